#include "autograd/anomaly.h"

#include <atomic>

#include "core/error.h"

namespace strata::autograd {

namespace {
std::atomic<bool> g_enabled{false};
std::atomic<bool> g_check_nan{true};
std::atomic<TraceFn> g_trace_fn{nullptr};
}  // namespace

bool anomaly_mode_enabled() { return g_enabled.load(std::memory_order_relaxed); }
bool anomaly_check_nan() { return g_check_nan.load(std::memory_order_relaxed); }
void set_anomaly_mode(bool enabled, bool check_nan) {
  g_enabled = enabled;
  g_check_nan = check_nan;
}
void set_anomaly_trace_fn(TraceFn fn) { g_trace_fn = fn; }

std::string current_anomaly_trace(std::string_view op_name) {
  std::string where;
  if (TraceFn fn = g_trace_fn.load()) where = fn();
  return str("the forward call of '", op_name, "' was made at:\n", where.empty() ? "  (no Python frame)\n" : where);
}

}  // namespace strata::autograd
