// Numerical failure of a linear-algebra routine on valid input: a singular
// matrix, a matrix that is not positive-definite, an algorithm that did not
// converge. Maps to strata.linalg.LinAlgError (a RuntimeError), as torch's
// torch.linalg.LinAlgError.
#pragma once

#include "core/error.h"

namespace strata {

struct LinAlgError : Error {  // -> strata.linalg.LinAlgError (RuntimeError subclass)
  using Error::Error;
};

}  // namespace strata
