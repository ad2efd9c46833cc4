// strata._C entry points behind strata.func.vmap (python/strata/func/_vmap.py):
// levels, wrapping and unwrapping batched tensors, the fallback's warnings.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "bind.h"
#include "vmap/vmap.h"

namespace strata::py {

void bind_vmap(nb::module_& m) {
  using namespace strata::vmap;
  m.def("_vmap_push_level", [](int64_t batch_size, int randomness) {
    STRATA_CHECK(randomness >= 0 && randomness <= 2, "vmap: bad randomness code ", randomness);
    return push_level(batch_size, static_cast<Randomness>(randomness));
  });
  m.def("_vmap_pop_level", [] { pop_level(); });
  m.def("_vmap_levels", [] {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const LevelInfo& l : active_levels()) out.emplace_back(l.level, l.batch_size);
    return out;
  });
  m.def("_vmap_add_batch_dim", [](const Tensor& t, int64_t bdim, int64_t level) { return make_batched(t, bdim, level); });
  m.def("_vmap_remove_batch_dim", [](const Tensor& t, int64_t level, int64_t batch_size, int64_t out_dim) {
    return remove_batch_dim(t, level, batch_size, out_dim);
  });
  // (physical, bdim, level) of the outermost wrapper, or None when t is not batched.
  m.def("_vmap_unwrap", [](const Tensor& t) -> nb::object {
    BatchedTensorImpl* b = maybe_batched(t);
    if (!b) return nb::none();
    return nb::make_tuple(wrap_tensor(b->value()), b->bdim(), b->level());
  });
  m.def("_vmap_is_batched", [](const Tensor& t) { return maybe_batched(t) != nullptr; });
  m.def("_vmap_take_warnings", [] { return take_warnings(); });
  m.def("_vmap_slow_path_calls", [] { return slow_path_calls(); });
  m.def("_vmap_forget_warnings", [] { forget_warnings(); });
}

}  // namespace strata::py
