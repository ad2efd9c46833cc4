// Shared-memory tensors (core/shared_memory.h) for Tensor.share_memory_ / is_shared and the multiprocessing
// reductions (python/strata/multiprocessing/reductions.py).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "bind.h"
#include "core/shared_memory.h"

namespace strata::py {

void bind_shared_memory(nb::module_& m) {
  m.def("_share_memory_", [](const Tensor& t) {
    STRATA_CHECK(t.defined(), "share_memory_: undefined tensor");
    share_storage(*t.impl()->storage());
  });
  m.def("_is_shared", [](const Tensor& t) { return t.defined() && storage_is_shared(*t.impl()->storage()); });
  // (fd, storage bytes) of the tensor's storage, moved to shared memory first; the fd stays the storage's.
  m.def("_shared_storage_fd", [](const Tensor& t) {
    STRATA_CHECK(t.device().is_cpu(), "share_memory_: only CPU tensors can be shared between processes, got a ",
                 t.describe());
    StorageImpl& s = *t.impl()->storage();
    share_storage(s);
    return std::make_pair(shared_storage_fd(s), static_cast<int64_t>(s.nbytes()));
  });
  // A tensor viewing the shared memory behind fd (which it takes over) with the given geometry.
  m.def("_tensor_from_shared_fd", [](int fd, int64_t nbytes, nb::handle dtype, std::vector<int64_t> sizes,
                                      std::vector<int64_t> strides, int64_t offset) {
    std::optional<ScalarType> st = to_scalar_type(dtype);
    STRATA_CHECK_VALUE(st.has_value(), "_tensor_from_shared_fd: expected a dtype");
    auto storage = storage_from_shared_fd(fd, static_cast<size_t>(nbytes));
    return wrap_tensor(Tensor(make_intrusive<TensorImpl>(std::move(storage), offset, sizes, strides, *st)));
  });
}

}  // namespace strata::py
