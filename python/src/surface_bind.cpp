// Tensor internals that torch's Python surface exposes and no op covers:
// swapping a tensor's storage (set_, resize_ past the current storage) and
// wrapping a tensor in a Python subclass while keeping its autograd history
// (as_subclass). Used by python/strata/_tensor_surface.py.
#include <algorithm>

#include "autograd/variable.h"
#include "bind.h"
#include "core/shape.h"
#include "ops/ops.h"

namespace strata::py {

namespace {

// torch's memory_format argument: None or a strata.memory_format object. Every
// dense result is laid out row-major here, so the format only gets checked.
void check_memory_format(nb::handle mf, const char* op) {
  if (mf.is_none()) return;
  nb::handle type = mf.type();
  STRATA_CHECK_TYPE(nb::cast<std::string>(type.attr("__name__")) == "memory_format", op,
                    "(): argument 'memory_format' must be torch.memory_format, not ",
                    nb::cast<std::string>(type.attr("__name__")));
}

// The channels-last formats are laid out by python/strata/_channels_last.py (a Python call only when a format is
// named, or for clone's preserve_format of a non-contiguous 4-d/5-d tensor).
nb::object channels_last_fn(const char* name) {
  return nb::module_::import_("strata._channels_last").attr(name);
}

bool is_contiguous_format(nb::handle mf) {
  return mf.is_none() || nb::cast<std::string>(nb::str(mf)) == "torch.contiguous_format";
}

nb::object contiguous_mf(nb::handle self_h, nb::handle mf) {
  const Tensor& self = nb::cast<const Tensor&>(self_h);
  check_memory_format(mf, "contiguous");
  if (is_contiguous_format(mf)) return wrap_tensor(contiguous(self));
  return channels_last_fn("convert")(self_h, mf);
}

nb::object clone_mf(nb::handle self_h, nb::handle mf) {
  const Tensor& self = nb::cast<const Tensor&>(self_h);
  check_memory_format(mf, "clone");
  const bool may_keep_layout = !self.is_contiguous() && (self.dim() == 4 || self.dim() == 5);
  if (mf.is_none() ? !may_keep_layout : is_contiguous_format(mf)) return wrap_tensor(clone(self));
  return channels_last_fn("clone")(self_h, mf);
}

}  // namespace

void bind_surface(nb::module_& m) {
  // contiguous() and clone() taking memory_format= without a Python frame in
  // between (they sit on hot paths).
  nb::object cls = m.attr("Tensor");
  cls.attr("contiguous") = nb::cpp_function(&contiguous_mf, nb::is_method(), nb::name("contiguous"),
                                            nb::arg("memory_format") = nb::none());
  cls.attr("clone") = nb::cpp_function(&clone_mf, nb::is_method(), nb::name("clone"), nb::kw_only(),
                                       nb::arg("memory_format") = nb::none());
  // self takes src's storage and geometry (torch's self.set_(src)): both then
  // see the same memory; self's autograd history is untouched, as in torch.
  m.def("_set_storage_from", [](const Tensor& self, const Tensor& src) {
    STRATA_CHECK(self.dtype() == src.dtype(), "set_: could not set a tensor of dtype ", dtype_name(src.dtype()),
                 " to a tensor of dtype ", dtype_name(self.dtype()));
    STRATA_CHECK(self.device() == src.device(), "set_: expected a source on ", self.device().str(), " but got ",
                 src.device().str());
    self.impl()->set_storage(src.impl()->storage());
    self.impl()->set_geometry(src.sizes(), src.strides(), src.storage_offset());
    self.bump_version();
  });
  // A new Python object of class cls over the same tensor (same storage and
  // autograd history); the caller passes a fresh alias (a view) of the tensor.
  m.def("_wrap_as_subclass", [](nb::type_object cls, const Tensor& t) {
    nb::object o = nb::inst_alloc(cls);
    new (nb::inst_ptr<Tensor>(o)) Tensor(t);
    nb::inst_mark_ready(o);
    return o;
  });
}

}  // namespace strata::py
