#include "core/deterministic.h"

#include <atomic>

#include "core/error.h"

namespace strata {

namespace {
std::atomic<bool> g_on{false}, g_warn_only{false};
std::atomic<DeterminismWarnFn> g_warn{nullptr};
}  // namespace

bool deterministic_algorithms() { return g_on.load(std::memory_order_relaxed); }
bool deterministic_warn_only() { return g_warn_only.load(std::memory_order_relaxed); }
void set_deterministic_algorithms(bool on, bool warn_only) {
  g_warn_only.store(warn_only);
  g_on.store(on);
}
void set_determinism_warn_handler(DeterminismWarnFn fn) { g_warn.store(fn); }

void alert_not_deterministic(const char* op) {
  if (!deterministic_algorithms()) return;
  std::string msg = str(op, " does not have a deterministic implementation, but you set "
                        "'torch.use_deterministic_algorithms(True)'. You can turn off determinism just for this "
                        "operation, or you can use the 'warn_only=True' option, if that's acceptable for your "
                        "application.");
  if (deterministic_warn_only()) {
    if (DeterminismWarnFn w = g_warn.load()) w(msg);
    return;
  }
  throw Error(msg);
}

}  // namespace strata
