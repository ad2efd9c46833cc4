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

Tensor contiguous_mf(const Tensor& self, nb::handle mf) {
  check_memory_format(mf, "contiguous");
  return contiguous(self);
}

Tensor clone_mf(const Tensor& self, nb::handle mf) {
  check_memory_format(mf, "clone");
  return clone(self);
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
