// Silent-cost warnings: ops that make a contiguous copy of an input behind the
// caller's back call contiguous_input() instead of contiguous(). With the
// thread-local switch off (the default) it is contiguous() plus one flag test,
// and only for inputs that are not contiguous already.
#pragma once

#include <string>
#include <string_view>

#include "ops/ops.h"
#include "profiler/profiler.h"

namespace strata::profiler {

// Called with the warning text; the Python binding turns it into a Python
// warning at the user's line (and may throw if warnings are errors).
using HiddenCopyHandler = void (*)(const std::string& message);
void set_hidden_copy_handler(HiddenCopyHandler h);
// Builds the message (op being run, input layout) and calls the handler.
void report_hidden_copy(const Tensor& t, std::string_view what);

}  // namespace strata::profiler

namespace strata {

// contiguous(t), reporting the copy when hidden-copy warnings are on.
// `what` names the input in the message ("self", "the weight", ...).
inline Tensor contiguous_input(const Tensor& t, std::string_view what = "an input") {
  if (!t.is_contiguous() && profiler::warn_hidden_copy_enabled() && !t.device().is_meta())
    profiler::report_hidden_copy(t, what);
  return contiguous(t);
}

}  // namespace strata
