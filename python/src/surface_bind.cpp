// Tensor internals that torch's Python surface exposes and no op covers:
// swapping a tensor's storage (set_, resize_ past the current storage) and
// wrapping a tensor in a Python subclass while keeping its autograd history
// (as_subclass). Used by python/strata/_tensor_surface.py.
#include <algorithm>

#include "autograd/variable.h"
#include "bind.h"
#include "core/shape.h"

namespace strata::py {

void bind_surface(nb::module_& m) {
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
