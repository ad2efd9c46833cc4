// out= of an op that is not elementwise must not share memory with an input (torch's assert_no_overlap);
// defined in tensor_iterator.cpp beside the elementwise check (Note [Overlapping writes]).
#pragma once

#include <span>

#include "core/tensor.h"

namespace strata {

void check_out_overlap(const char* op, const Tensor& out, std::span<const Tensor> inputs);

}  // namespace strata
