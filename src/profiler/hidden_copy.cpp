#include "profiler/hidden_copy.h"

#include <atomic>
#include <cstdio>
#include <sstream>

namespace strata::profiler {

namespace {
std::atomic<HiddenCopyHandler> g_handler{nullptr};

std::string list_str(IntArrayRef v) {
  std::ostringstream ss;
  ss << "[";
  for (size_t i = 0; i < v.size(); ++i) ss << (i ? ", " : "") << v[i];
  ss << "]";
  return ss.str();
}
}  // namespace

void set_hidden_copy_handler(HiddenCopyHandler h) { g_handler.store(h); }

void report_hidden_copy(const Tensor& t, std::string_view what) {
  // The op the caller asked for is the outermost one on this thread; the copy
  // may happen in an op it called.
  std::vector<std::string> ops = current_op_stack();
  std::string outer = ops.empty() ? "an op" : ops.front();
  std::ostringstream ss;
  ss << outer << ": silently made a contiguous copy of " << what << " (shape " << list_str(t.sizes())
     << ", strides " << list_str(t.strides()) << ", dtype " << dtype_name(t.dtype()) << ", "
     << t.numel() * static_cast<int64_t>(t.element_size()) << " bytes)";
  if (ops.size() > 1) ss << " inside " << ops.back();
  ss << "; pass a contiguous tensor (call .contiguous() once up front) to avoid the copy";
  if (HiddenCopyHandler h = g_handler.load()) {
    h(ss.str());
  } else {
    std::fprintf(stderr, "strata warning: %s\n", ss.str().c_str());
  }
}

}  // namespace strata::profiler
