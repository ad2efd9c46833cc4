// Note [The profiler]
// Profiling is a dispatcher layer: a boxed fallback registered for
// DispatchKey::Profiler records every op call (name, steady-clock start/end,
// thread, nesting, optionally input shapes/dtypes and allocator deltas) and
// redispatches below itself. The layer is switched on for a thread by putting
// Profiler into that thread's included key set, so when it is off no profiler
// code runs for an op at all: the key is simply never in the computed key set.
// Ops called from inside kernels dispatch again and are recorded as children.
//
// Anything else (autograd nodes, Python record_function blocks, kernels that
// want a finer breakdown) records a range with RecordScope, which costs one
// thread-local load when the thread is not recording.
//
// Events go into a per-thread buffer owned by a Session; a session is started
// and stopped by one thread, and other threads can join it (ThreadStateGuard)
// so that, e.g., an engine worker's events land in the caller's profile.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dispatch/dispatcher.h"

namespace strata::profiler {

struct ProfilerConfig {
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;
  // Finer data per op call for explain(): the key path, the kernel chosen,
  // and timestamps at kernel entry/exit (through a second, inner layer).
  bool explain = false;
  // Every thread records while the session runs (as torch's profiler), not
  // only the one that started it and those that join it (ThreadStateGuard).
  // One such session at a time.
  bool all_threads = false;
  // With record_shapes: the values of int, bool and int[] arguments and the
  // shapes of tensor outputs (for strata.utils.flop_counter).
  bool record_args = false;
};

// The dispatch path of one op call, filled in explain mode.
struct ExplainInfo {
  uint64_t tensor_keys = 0, tls_included = 0, tls_excluded = 0, fallthrough = 0, dispatch_keys = 0;
  // Functionality layers the call passed through between the profiler and the
  // backend kernel: (key, kernel debug name).
  std::vector<std::pair<DispatchKey, std::string>> layers;
  DispatchKey backend_key = DispatchKey::NumKeys;
  DispatchKey kernel_source = DispatchKey::NumKeys;  // e.g. CompositeImplicit for a CPU entry
  std::string kernel_name;
  int64_t kernel_start_ns = -1, kernel_end_ns = -1;
  int64_t allocs = 0, alloc_bytes = 0, peak_increase = 0;
};

struct Event {
  std::string name;
  std::string category;  // "cpu_op" for dispatcher ops, "user_annotation" for record_function, or the caller's
  int64_t start_ns = 0, end_ns = -1;
  int64_t thread_id = 0;
  int32_t depth = 0;
  int32_t parent = -1;  // index in the same thread's event list
  // record_shapes: one entry per op argument ([] and "" for non-tensors, as torch).
  std::vector<std::vector<int64_t>> input_shapes;
  std::vector<std::string> input_dtypes;
  // record_args: per argument, an int/bool ([v]) or int[] value ([] otherwise),
  // and one shape per tensor output.
  std::vector<std::vector<int64_t>> input_values;
  std::vector<std::vector<int64_t>> output_shapes;
  // profile_memory: allocator deltas over the call (net bytes, allocation count).
  int64_t alloc_bytes = 0, num_allocs = 0;
  int64_t mem_start_bytes = 0, mem_start_count = 0;  // allocator state at the start of a range
  std::string stack;  // with_stack: the Python stack at the call, innermost last
  std::unique_ptr<ExplainInfo> explain;
};

struct ThreadBuffer {
  std::mutex mu;  // taken per event; uncontended except while a session is collected
  std::vector<Event> events;
  int64_t thread_id = 0;
};

class Session {
 public:
  explicit Session(ProfilerConfig c);
  const ProfilerConfig& config() const { return cfg_; }
  int64_t start_ns() const { return start_ns_; }
  uint64_t id() const { return id_; }
  // The calling thread's buffer in this session (created on first use).
  std::shared_ptr<ThreadBuffer> buffer_for_this_thread();
  // Moves out every thread's events, each list in start order.
  std::vector<std::pair<int64_t, std::vector<Event>>> take_events();

 private:
  ProfilerConfig cfg_;
  int64_t start_ns_;
  uint64_t id_;
  std::mutex mu_;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers_;
};

int64_t now_ns();
int64_t current_thread_id();

namespace detail {
struct ThreadState;
// Non-null exactly while this thread records into a session. constinit: the
// check in RecordScope is one TLS load with no guard call.
extern constinit thread_local ThreadState* tls_recording;
int64_t begin_range(ThreadState* st, std::string_view name, std::string_view category);
void end_range(ThreadState* st, int64_t token);
}  // namespace detail

inline bool is_recording() { return detail::tls_recording != nullptr; }

// Starts recording on this thread (nested sessions on one thread are an
// error); returns the session to pass to stop().
std::shared_ptr<Session> start(ProfilerConfig cfg);
// Stops recording on this thread. Events of ranges still open get the stop
// time as their end.
void stop(const std::shared_ptr<Session>& s);
// The session this thread records into, or null.
std::shared_ptr<Session> current_session();

// Makes this thread record into s for the guard's lifetime (for worker
// threads that run work on behalf of a profiled thread).
class ThreadStateGuard {
 public:
  explicit ThreadStateGuard(std::shared_ptr<Session> s);
  ~ThreadStateGuard();
  ThreadStateGuard(const ThreadStateGuard&) = delete;
  ThreadStateGuard& operator=(const ThreadStateGuard&) = delete;

 private:
  std::shared_ptr<Session> prev_;
  bool active_ = false;
};

// RAII range: RecordScope s("MmBackward0", "autograd"). Safe on any thread,
// with the profiler on or off.
class RecordScope {
 public:
  RecordScope(std::string_view name, std::string_view category) {
    if (__builtin_expect(detail::tls_recording == nullptr, 1)) return;
    st_ = detail::tls_recording;
    token_ = detail::begin_range(st_, name, category);
  }
  ~RecordScope() {
    if (st_) detail::end_range(st_, token_);
  }
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;

 private:
  detail::ThreadState* st_ = nullptr;
  int64_t token_ = -1;
};

// Non-RAII form of RecordScope for bindings (Python's record_function):
// begin returns a token (-1 when not recording) to hand to end on the same
// thread. A stale token (the session stopped meanwhile) is ignored.
int64_t begin_range(std::string_view name, std::string_view category);
void end_range(int64_t token);

// The names of the ops currently executing on this thread, outermost first
// (tracked while the Profiler layer is on: recording, explain, or warnings).
std::vector<std::string> current_op_stack();

// Silent-cost warnings (see hidden_copy.h). Thread-local switches.
bool warn_hidden_copy_enabled();
void set_warn_hidden_copy(bool on);

// Where explain() gets the BLAS/threads/ISA facts for matmul-family ops.
std::string isa_level();
std::string blas_library_for(ScalarType dt);
std::string blas_backend_description();
bool is_matmul_family(std::string_view op_name);

// Hook for the binding: returns the Python stack as text (with_stack).
using StackHook = std::string (*)();
void set_stack_hook(StackHook h);

}  // namespace strata::profiler
