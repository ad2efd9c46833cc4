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
#include "dispatch/ivalue.h"

namespace strata {
class OperatorEntry;
}

namespace strata::autocast {

enum class Policy : uint8_t { None, LowerPrecision, Float32, Promote };

bool is_enabled();
void set_enabled(bool on);
ScalarType dtype();
void set_dtype(ScalarType t);
// The policy for an op by name (for tests and explain()).
Policy policy_of(std::string_view op_name);
Policy policy_of(const OperatorEntry& op);
// Autocast applies to an op dispatched now: the key is included and not excluded (the autocast
// kernel excludes it while the op whose inputs it cast runs below it).
bool is_active();
// Casts the inputs of op on the stack (its schema's arguments, last on the stack) as the autocast
// kernel does, with the same ops (to_dtype) and the same rules; the compile recorder calls it so
// that a captured graph holds the casts as nodes (Note [Autocast in captured graphs] in
// src/compile/recorder.cpp).
void cast_inputs(const OperatorEntry& op, Stack& stack);

}  // namespace strata::autocast
