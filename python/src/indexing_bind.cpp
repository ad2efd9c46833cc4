// Python indexing (__getitem__ / __setitem__). Filled in by the indexing work.
#include "bind.h"

namespace strata::py {

void bind_indexing(nb::module_& m) {}

}  // namespace strata::py
