// Anomaly mode: every recorded node keeps the Python (or C++) call site that
// created it, and the engine checks each gradient for NaN, naming the node and
// that call site on the first one.
#pragma once

#include <string>
#include <string_view>

namespace strata::autograd {

bool anomaly_mode_enabled();
void set_anomaly_mode(bool enabled, bool check_nan = true);
bool anomaly_check_nan();
// The Python binding installs a function that formats the current Python
// stack; without one the trace names only the op.
using TraceFn = std::string (*)();
void set_anomaly_trace_fn(TraceFn fn);
std::string current_anomaly_trace(std::string_view op_name);

}  // namespace strata::autograd
