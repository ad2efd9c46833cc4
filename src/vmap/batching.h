// Pieces shared by the Vmap fallback (vmap.cpp) and the batching rules
// (batching_rules.cpp).
#pragma once

#include <functional>

#include "dispatch/dispatcher.h"
#include "vmap/vmap.h"

namespace strata::vmap {

// A batching rule: the op's arguments are stack[base..]; at least one tensor
// is batched at `level` (the highest level among them). It either replaces the
// arguments by the op's results and returns true, or leaves the stack alone
// and returns false (the fallback then decomposes or loops).
using BatchRule = std::function<bool(const OperatorEntry&, Stack&, size_t base, int64_t level)>;
const BatchRule* find_rule(const OperatorEntry& op);

int64_t max_level(const Stack& s, size_t base);
// Calls op on a stack of (physical) arguments, which may still be batched at
// lower levels.
void call_physical(const OperatorEntry& op, Stack& s);
// Every tensor in s becomes batched at level with bdim 0.
void wrap_results(Stack& s, int64_t level);
[[noreturn]] void inplace_error(const OperatorEntry& op, const std::string& arg);

}  // namespace strata::vmap
