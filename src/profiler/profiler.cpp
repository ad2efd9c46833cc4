#include "profiler/profiler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "backends/cpu/blas.h"
#include "backends/cpu/parallel.h"
#include "core/allocator.h"
#include "ops/stub.h"

namespace strata::profiler {

int64_t now_ns() {
  // steady_clock is CLOCK_MONOTONIC, the clock behind Python's perf_counter_ns,
  // so Python-side timestamps (explain's binding layer) line up with these.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t current_thread_id() {
  thread_local int64_t tid = static_cast<int64_t>(::syscall(SYS_gettid));
  return tid;
}

namespace {
std::atomic<uint32_t> g_next_session{1};
std::atomic<StackHook> g_stack_hook{nullptr};
}  // namespace

Session::Session(ProfilerConfig c) : cfg_(c), start_ns_(now_ns()), id_(g_next_session.fetch_add(1)) {}

std::shared_ptr<ThreadBuffer> Session::buffer_for_this_thread() {
  int64_t tid = current_thread_id();
  std::lock_guard<std::mutex> g(mu_);
  for (auto& b : buffers_)
    if (b->thread_id == tid) return b;
  auto b = std::make_shared<ThreadBuffer>();
  b->thread_id = tid;
  b->events.reserve(256);
  buffers_.push_back(b);
  return b;
}

std::vector<std::pair<int64_t, std::vector<Event>>> Session::take_events() {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::pair<int64_t, std::vector<Event>>> out;
  for (auto& b : buffers_) {
    std::lock_guard<std::mutex> gb(b->mu);
    out.emplace_back(b->thread_id, std::move(b->events));
    b->events.clear();
  }
  return out;
}

namespace {
// Note [Profiling every thread]
// A session with all_threads puts the Profiler key into every thread's
// dispatch keys (g_global_included_keys); a thread whose first op meets the
// layer without a session of its own joins it then, and leaves it at its
// first op or range after the session has stopped.
std::mutex g_all_mu;
std::shared_ptr<Session> g_all_session;          // guarded by g_all_mu
std::atomic<Session*> g_all_session_raw{nullptr};  // the same, for the unlocked check
}  // namespace

namespace detail {

struct ThreadState {
  std::shared_ptr<Session> session;
  std::shared_ptr<ThreadBuffer> buf;
  std::vector<int32_t> open;                   // indices of the ranges not yet ended, innermost last
  std::vector<const OperatorEntry*> ops;       // ops executing on this thread, outermost first
  std::vector<std::string> names;              // "strata::<full name>" per op id, built on first use
  bool warn_hidden_copy = false;
  bool joined_all = false;  // recording into the all-threads session without having started it
};

constinit thread_local ThreadState* tls_recording = nullptr;

namespace {

ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

// The Profiler key is on while anything needs the op layer; the inner
// ProfilerKernel key only while explaining.
void update_keys(ThreadState& st) {
  auto& tls = tls_local_dispatch_key_set();
  bool outer = st.session || st.warn_hidden_copy;
  bool inner = st.session && st.session->config().explain;
  tls.included = outer ? tls.included.add(DispatchKey::Profiler) : tls.included.remove(DispatchKey::Profiler);
  tls.included = inner ? tls.included.add(DispatchKey::ProfilerKernel) : tls.included.remove(DispatchKey::ProfilerKernel);
  tls_recording = st.session ? &st : nullptr;
}

const std::string& op_event_name(ThreadState& st, const OperatorEntry& op) {
  size_t id = static_cast<size_t>(op.id());
  if (id >= st.names.size()) st.names.resize(id + 1);
  std::string& n = st.names[id];
  if (n.empty()) {
    std::string full = op.schema().full_name();
    n = full.find("::") == std::string::npos ? "strata::" + full : full;
  }
  return n;
}

int64_t token_for(const ThreadState& st, int32_t idx) {
  return (static_cast<int64_t>(st.session->id() & 0x7fffffff) << 32) | static_cast<uint32_t>(idx);
}

// Appends an event (start time set by the caller) and opens it.
int32_t open_event(ThreadState& st, Event&& e) {
  e.depth = static_cast<int32_t>(st.open.size());
  e.parent = st.open.empty() ? -1 : st.open.back();
  e.thread_id = st.buf->thread_id;
  if (e.parent < 0 && st.session->config().with_stack) {
    // Nested ranges share their root's Python stack (no Python runs between).
    if (StackHook h = g_stack_hook.load()) e.stack = h();
  }
  int32_t idx;
  {
    std::lock_guard<std::mutex> g(st.buf->mu);
    idx = static_cast<int32_t>(st.buf->events.size());
    st.buf->events.push_back(std::move(e));
  }
  st.open.push_back(idx);
  return idx;
}

void close_event(ThreadState& st, int32_t idx, int64_t end) {
  {
    std::lock_guard<std::mutex> g(st.buf->mu);
    if (idx < static_cast<int32_t>(st.buf->events.size())) st.buf->events[idx].end_ns = end;
  }
  // Usually the innermost; tolerate out-of-order ends from Python.
  auto it = std::find(st.open.rbegin(), st.open.rend(), idx);
  if (it != st.open.rend()) st.open.erase(std::next(it).base());
}

}  // namespace

void sync_all_threads(ThreadState& st);

int64_t begin_range(ThreadState* st, std::string_view name, std::string_view category) {
  if (st) sync_all_threads(*st);
  if (!st || !st->session) return -1;
  Event e;
  e.name = std::string(name);
  e.category = std::string(category);
  if (st->session->config().profile_memory) {
    AllocatorStats m = cpu_allocator_stats();
    e.mem_start_bytes = m.allocated_bytes;
    e.mem_start_count = m.num_allocs;
  }
  e.start_ns = now_ns();
  return token_for(*st, open_event(*st, std::move(e)));
}

void end_range(ThreadState* st, int64_t token) {
  if (token < 0 || !st || !st->session) return;
  if (static_cast<uint32_t>(token >> 32) != (st->session->id() & 0x7fffffff)) return;  // stale
  int64_t end = now_ns();
  int32_t idx = static_cast<int32_t>(token & 0xffffffff);
  if (st->session->config().profile_memory) {
    AllocatorStats m = cpu_allocator_stats();
    std::lock_guard<std::mutex> g(st->buf->mu);
    if (idx < static_cast<int32_t>(st->buf->events.size())) {
      Event& e = st->buf->events[idx];
      e.alloc_bytes = m.allocated_bytes - e.mem_start_bytes;
      e.num_allocs = m.num_allocs - e.mem_start_count;
    }
  }
  close_event(*st, idx, end);
}

}  // namespace detail

using detail::ThreadState;
using detail::state;

int64_t begin_range(std::string_view name, std::string_view category) {
  ThreadState* st = detail::tls_recording;
  if (!st && g_all_session_raw.load(std::memory_order_relaxed)) st = &state();  // may join it
  return detail::begin_range(st, name, category);
}
void end_range(int64_t token) { detail::end_range(&state(), token); }

namespace detail {
// Joins the all-threads session, or leaves it once stopped (Note [Profiling every thread]).
void sync_all_threads(ThreadState& st) {
  Session* all = g_all_session_raw.load(std::memory_order_acquire);
  if (st.joined_all && st.session.get() != all) {
    int64_t end = now_ns();
    while (!st.open.empty()) close_event(st, st.open.back(), end);
    st.session.reset();
    st.buf.reset();
    st.joined_all = false;
    tls_recording = nullptr;
  }
  if (!st.session && all) {
    std::lock_guard<std::mutex> g(g_all_mu);
    if (!g_all_session) return;
    st.session = g_all_session;
    st.buf = st.session->buffer_for_this_thread();
    st.open.clear();
    st.joined_all = true;
    tls_recording = &st;
  }
}
}  // namespace detail

std::shared_ptr<Session> start(ProfilerConfig cfg) {
  ThreadState& st = state();
  detail::sync_all_threads(st);
  STRATA_CHECK(!st.session, "profiler: a profiling session is already active on this thread");
  auto s = std::make_shared<Session>(cfg);
  if (cfg.all_threads) {
    std::lock_guard<std::mutex> g(g_all_mu);
    STRATA_CHECK(!g_all_session, "profiler: another session is already recording every thread");
    g_all_session = s;
    g_all_session_raw.store(s.get(), std::memory_order_release);
    uint64_t keys = DispatchKeySet(DispatchKey::Profiler).raw();
    if (cfg.explain) keys |= DispatchKeySet(DispatchKey::ProfilerKernel).raw();
    g_global_included_keys.fetch_or(keys);
  }
  st.session = s;
  st.buf = s->buffer_for_this_thread();
  st.open.clear();
  detail::update_keys(st);
  return s;
}

void stop(const std::shared_ptr<Session>& s) {
  if (s && s->config().all_threads) {
    std::lock_guard<std::mutex> g(g_all_mu);
    if (g_all_session == s) {
      g_global_included_keys.fetch_and(
          ~(DispatchKeySet(DispatchKey::Profiler).raw() | DispatchKeySet(DispatchKey::ProfilerKernel).raw()));
      g_all_session_raw.store(nullptr, std::memory_order_release);
      g_all_session.reset();
    }
  }
  ThreadState& st = state();
  if (!s || st.session != s) return;
  int64_t end = now_ns();
  while (!st.open.empty()) detail::close_event(st, st.open.back(), end);
  st.session.reset();
  st.buf.reset();
  detail::update_keys(st);
}

std::shared_ptr<Session> current_session() { return state().session; }

ThreadStateGuard::ThreadStateGuard(std::shared_ptr<Session> s) {
  ThreadState& st = state();
  if (!s || st.session == s) return;
  prev_ = st.session;
  // Ranges left open by the outer session stay open; this thread's events for
  // s nest from depth 0.
  st.session = std::move(s);
  st.buf = st.session->buffer_for_this_thread();
  st.open.clear();
  active_ = true;
  detail::update_keys(st);
}

ThreadStateGuard::~ThreadStateGuard() {
  if (!active_) return;
  ThreadState& st = state();
  int64_t end = now_ns();
  while (!st.open.empty()) detail::close_event(st, st.open.back(), end);
  st.session = prev_;
  st.buf = prev_ ? prev_->buffer_for_this_thread() : nullptr;
  detail::update_keys(st);
}

std::vector<std::string> current_op_stack() {
  ThreadState& st = state();
  std::vector<std::string> out;
  for (const OperatorEntry* op : st.ops) out.push_back(op->schema().full_name());
  return out;
}

bool warn_hidden_copy_enabled() { return state().warn_hidden_copy; }
void set_warn_hidden_copy(bool on) {
  ThreadState& st = state();
  st.warn_hidden_copy = on;
  detail::update_keys(st);
}

void set_stack_hook(StackHook h) { g_stack_hook.store(h); }

// ---- the dispatcher layers --------------------------------------------------

namespace {

void record_inputs(Event& e, const OperatorEntry& op, const Stack& stack) {
  size_t n = std::min(op.schema().args.size(), stack.size());
  e.input_shapes.reserve(n);
  e.input_dtypes.reserve(n);
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const IValue& v = stack[i];
    if (v.is_tensor() && v.to_tensor().defined()) {
      const Tensor& t = v.to_tensor();
      if (t.impl()->is_wrapped_number()) {
        e.input_shapes.emplace_back();
        e.input_dtypes.emplace_back("Scalar");
      } else {
        e.input_shapes.emplace_back(t.sizes().begin(), t.sizes().end());
        e.input_dtypes.emplace_back(dtype_name(t.dtype()));
      }
    } else {
      e.input_shapes.emplace_back();
      if (v.is_tensor_list()) {
        e.input_dtypes.emplace_back("TensorList");
      } else if (std::holds_alternative<Scalar>(v.raw()) || std::holds_alternative<double>(v.raw()) ||
                 std::holds_alternative<int64_t>(v.raw()) || std::holds_alternative<bool>(v.raw())) {
        e.input_dtypes.emplace_back("Scalar");
      } else {
        e.input_dtypes.emplace_back("");
      }
    }
  }
}

void record_values(Event& e, const OperatorEntry& op, const Stack& stack) {
  size_t n = std::min(op.schema().args.size(), stack.size());
  e.input_values.reserve(n);
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const auto& raw = stack[i].raw();
    auto& out = e.input_values.emplace_back();
    if (const auto* v = std::get_if<int64_t>(&raw)) {
      out.push_back(*v);
    } else if (const auto* b = std::get_if<bool>(&raw)) {
      out.push_back(*b ? 1 : 0);
    } else if (const auto* l = std::get_if<std::vector<int64_t>>(&raw)) {
      out = *l;
    }
  }
}

void record_outputs(ThreadState& st, int32_t idx, size_t first, const Stack& stack) {
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = first; i < stack.size(); ++i) {
    if (stack[i].is_tensor()) {
      const Tensor& t = stack[i].to_tensor();
      shapes.emplace_back(t.defined() ? std::vector<int64_t>(t.sizes().begin(), t.sizes().end())
                                      : std::vector<int64_t>());
    } else if (stack[i].is_tensor_list()) {
      for (const Tensor& t : stack[i].to_tensor_list())
        shapes.emplace_back(t.defined() ? std::vector<int64_t>(t.sizes().begin(), t.sizes().end())
                                        : std::vector<int64_t>());
    }
  }
  std::lock_guard<std::mutex> g(st.buf->mu);
  st.buf->events[idx].output_shapes = std::move(shapes);
}

std::unique_ptr<ExplainInfo> explain_info(const OperatorEntry& op, DispatchKeySet ks, const Stack& stack) {
  auto info = std::make_unique<ExplainInfo>();
  size_t n = std::min(op.schema().args.size(), stack.size());
  Stack args(stack.end() - static_cast<std::ptrdiff_t>(n), stack.end());
  const LocalDispatchKeySet& tls = tls_local_dispatch_key_set();
  info->tensor_keys = strata::detail::collect_keys_boxed(args).raw();
  info->tls_included = tls.included.raw();
  info->tls_excluded = tls.excluded.raw();
  info->fallthrough = op.fallthrough_keys().raw();
  info->dispatch_keys = ks.raw();
  // What the table says lies between this layer and the kernel; the inner
  // layer later records the backend kernel actually reached.
  DispatchKeySet rest = ks.below(DispatchKey::Profiler) - op.fallthrough_keys();
  while (!rest.empty()) {
    DispatchKey k = rest.highest();
    if (static_cast<int>(k) < kFirstFunctionalityKey) break;
    info->layers.emplace_back(k, op.kernel_for(k).debug_name);
    rest = rest.remove(k);
  }
  return info;
}

struct OpFrame {
  ThreadState& st;
  explicit OpFrame(ThreadState& s, const OperatorEntry& op) : st(s) { st.ops.push_back(&op); }
  ~OpFrame() { st.ops.pop_back(); }
};

void profiler_fallback(const OperatorEntry& op, DispatchKeySet ks, Stack& stack) {
  ThreadState& st = state();
  detail::sync_all_threads(st);
  OpFrame frame(st, op);
  if (!st.session) {
    // Only tracking the op stack (silent-cost warnings).
    redispatch_boxed(op, ks, DispatchKey::Profiler, stack);
    return;
  }
  const ProfilerConfig& cfg = st.session->config();
  Event e;
  e.name = detail::op_event_name(st, op);
  e.category = "cpu_op";
  if (cfg.record_shapes || cfg.explain) record_inputs(e, op, stack);
  const bool record_args = cfg.record_args;
  if (record_args) record_values(e, op, stack);
  const size_t first_out = stack.size() - std::min(op.schema().args.size(), stack.size());
  if (cfg.explain) e.explain = explain_info(op, ks, stack);
  bool mem = cfg.profile_memory || cfg.explain;
  AllocatorStats before = mem ? cpu_allocator_stats() : AllocatorStats{};
  e.start_ns = now_ns();
  int32_t idx = detail::open_event(st, std::move(e));
  struct Closer {
    ThreadState& st;
    ThreadBuffer* buf;
    int32_t idx;
    bool mem;
    AllocatorStats before;
    ~Closer() {
      int64_t end = now_ns();
      // A callee may have stopped the session (then the range is closed already).
      if (st.buf.get() != buf) return;
      if (mem) {
        AllocatorStats after = cpu_allocator_stats();
        std::lock_guard<std::mutex> g(st.buf->mu);
        Event& ev = st.buf->events[idx];
        ev.alloc_bytes = after.allocated_bytes - before.allocated_bytes;
        ev.num_allocs = after.num_allocs - before.num_allocs;
        if (ev.explain) {
          ev.explain->allocs = ev.num_allocs;
          ev.explain->alloc_bytes = ev.alloc_bytes;
          ev.explain->peak_increase = after.peak_bytes - before.peak_bytes;
        }
      }
      detail::close_event(st, idx, end);
    }
  } closer{st, st.buf.get(), idx, mem, before};
  redispatch_boxed(op, ks, DispatchKey::Profiler, stack);
  if (record_args && st.buf.get() == closer.buf) record_outputs(st, idx, first_out, stack);
}

// Inner layer (explain mode only): sits below every functionality key and
// above the backends, so it sees the kernel the call finally reaches.
void profiler_kernel_fallback(const OperatorEntry& op, DispatchKeySet ks, Stack& stack) {
  ThreadState& st = state();
  DispatchKeySet below = ks.below(DispatchKey::ProfilerKernel) - op.fallthrough_keys();
  Event* ev = nullptr;
  int32_t idx = -1;
  if (st.session && st.buf && !st.open.empty() && !st.ops.empty() && st.ops.back() == &op) {
    idx = st.open.back();
    std::lock_guard<std::mutex> g(st.buf->mu);
    ev = &st.buf->events[idx];
    if (ev->explain && ev->explain->kernel_start_ns < 0) {
      const KernelFunction& k = op.lookup(below);
      ev->explain->backend_key = below.highest();
      ev->explain->kernel_source = op.source_of(below.highest());
      ev->explain->kernel_name = k.debug_name;
    } else {
      idx = -1;
    }
  }
  if (idx < 0) {
    redispatch_boxed(op, ks, DispatchKey::ProfilerKernel, stack);
    return;
  }
  ThreadBuffer* buf = st.buf.get();
  auto stamp = [&](bool start) {
    int64_t t = now_ns();
    if (st.buf.get() != buf) return;
    std::lock_guard<std::mutex> g(st.buf->mu);
    auto& x = *st.buf->events[idx].explain;
    (start ? x.kernel_start_ns : x.kernel_end_ns) = t;
  };
  struct End {
    decltype(stamp)& f;
    ~End() { f(false); }
  };
  stamp(true);
  End end{stamp};
  redispatch_boxed(op, ks, DispatchKey::ProfilerKernel, stack);
}

FallbackRegistrar g_profiler_layer(DispatchKey::Profiler, KernelFunction::make_boxed(&profiler_fallback, "profiler"));
FallbackRegistrar g_profiler_kernel_layer(DispatchKey::ProfilerKernel,
                                          KernelFunction::make_boxed(&profiler_kernel_fallback, "profiler_kernel"));

}  // namespace

// ---- facts for explain() --------------------------------------------------

std::string isa_level() { return cpu_capability_name(cpu_capability()); }

std::string blas_library_for(ScalarType dt) {
  auto name = [](cpublas::Library l) -> std::string {
    switch (l) {
      case cpublas::Library::Dnnl: return "oneDNN";
      case cpublas::Library::OpenBLAS: return "OpenBLAS";
      default: return "built-in blocked GEMM";
    }
  };
  if (dt == ScalarType::Float32 || dt == ScalarType::Float16 || dt == ScalarType::BFloat16)
    return name(cpublas::sgemm_library());  // 16-bit floats compute in float32
  if (dt == ScalarType::Float64) return name(cpublas::other_library());
  return "built-in integer GEMM kernel";
}

std::string blas_backend_description() { return cpublas::backend_name(); }

bool is_matmul_family(std::string_view n) {
  static constexpr std::string_view kOps[] = {"matmul", "mm",      "bmm",    "mv",     "dot",    "vdot",
                                              "addmm",  "addmv",   "addbmm", "baddbmm", "linear", "conv1d",
                                              "conv2d", "conv3d", "convolution", "einsum", "tensordot"};
  auto dot = n.find('.');
  std::string_view base = n.substr(0, dot);
  if (auto p = base.rfind("::"); p != std::string_view::npos) base = base.substr(p + 2);
  for (auto k : kOps)
    if (base == k) return true;
  return false;
}

}  // namespace strata::profiler
