// Note [Autocast]
// strata.autocast puts DispatchKey::Autocast into the thread's included keys.
// One boxed kernel serves that key for every op: it looks up the op's policy
// (run in the autocast dtype, run in float32, or promote to the widest input),
// casts eligible floating inputs (not float64, not Python numbers) with the
// ordinary differentiable _to_copy op, so the casts appear in the autograd
// graph and gradients reach parameters in their own dtype, then continues
// below itself. Ops without a policy pass through untouched.
#pragma once

#include "core/dtype.h"

namespace strata::autocast {

enum class Policy : uint8_t { None, LowerPrecision, Float32, Promote };

bool is_enabled();
void set_enabled(bool on);
ScalarType dtype();
void set_dtype(ScalarType t);
// The policy for an op by name (for tests and explain()).
Policy policy_of(std::string_view op_name);

}  // namespace strata::autocast
