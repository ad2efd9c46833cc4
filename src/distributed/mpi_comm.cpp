// See mpi_comm.h. Open MPI's predefined handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...) are addresses of global
// objects in libmpi (its ABI: the mpi.h macros take their address), so they are looked up with dlsym like the
// functions; mpi.h is needed at build time for the function types only.
#include "distributed/mpi_comm.h"

#include "profiler/profiler.h"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>
#include <optional>
#include <stdexcept>
#include <thread>
#include <algorithm>
#include <cstdio>
#include <unistd.h>
#include <cmath>
#include <cstring>
#include <type_traits>

#if __has_include(<mpi.h>)
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#define STRATA_HAVE_MPI 1
#endif
#endif

namespace strata::dist {

// A waiter may first spin, yielding the core, on the flag before it sleeps on the condition variable (and the
// communication thread on its queue): STRATA_DISTRIBUTED_SPIN_US microseconds. Off by default: on an
// over-subscribed machine (2 ranks, each with a caller and a communication thread, on 2 cores) spinning made a
// 1 KiB all_reduce 3-10x slower (bench/distributed.py; docs/DISTRIBUTED.md); with idle cores it saves the futex
// wake-up.
std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds t{[] {
    const char* v = std::getenv("STRATA_DISTRIBUTED_SPIN_US");
    return v ? std::atol(v) : 0L;
  }()};
  return t;
}

// Callers blocked in Work::wait_for: while there are any, an async job in flight is tested without naps.
static std::atomic<int> waiters{0};

bool Work::wait_for(double timeout_s) {
  struct Count {
    Count() { waiters.fetch_add(1, std::memory_order_relaxed); }
    ~Count() { waiters.fetch_sub(1, std::memory_order_relaxed); }
  } count;
  auto spin_end = std::chrono::steady_clock::now() + spin_time();
  while (!done_flag.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_end)
    std::this_thread::yield();
  std::unique_lock<std::mutex> lk(mu);
  if (timeout_s < 0) {
    cv.wait(lk, [&] { return done; });
    return true;
  }
  return cv.wait_for(lk, std::chrono::duration<double>(timeout_s), [&] { return done; });
}

void Work::finish(std::string err) {
  {
    std::lock_guard<std::mutex> lk(mu);
    error = std::move(err);
    done = true;
    done_flag.store(true, std::memory_order_release);
  }
  cv.notify_all();
}

bool fast_path_enabled() {
  static const bool on = [] {
    // On unless turned off (0, false, off): the fast path's calls wait with a deadline like the thread's
    // (mpi_comm.cpp: run_small), so a timeout raises DistError on either path.
    const char* v = std::getenv("STRATA_DISTRIBUTED_FAST_PATH");
    return !(v && (std::string(v) == "0" || std::string(v) == "false" || std::string(v) == "off"));
  }();
  return on;
}

int64_t fast_path_max_bytes() {
  static const int64_t n = [] {
    const char* v = std::getenv("STRATA_DISTRIBUTED_FAST_PATH_MAX_BYTES");
    return v ? std::atoll(v) : int64_t{16384};
  }();
  return n;
}

std::string timeout_message(const std::string& what, double timeout_s) {
  return what + " did not complete within " + std::to_string(timeout_s) +
         " s (a rank may have died, hung, or called a different collective)";
}

int wait_work(Work& w, double timeout_s, const std::string& what) {
  if (!w.wait_for(timeout_s)) {
    std::string msg = timeout_message(what, timeout_s);
    mark_broken(msg);
    throw std::runtime_error("strata.distributed: " + msg);
  }
  if (!w.error.empty()) throw std::runtime_error("strata.distributed: " + what + ": " + w.error);
  return w.source;
}

#ifndef STRATA_HAVE_MPI

bool mpi_available(std::string* reason) {
  if (reason) *reason = "Strata was built without Open MPI's headers (install libopenmpi-dev and rebuild)";
  return false;
}
[[noreturn]] static void no_mpi() {
  throw std::runtime_error("strata.distributed: Strata was built without Open MPI's headers (install "
                           "libopenmpi-dev and rebuild)");
}
std::pair<int, int> init() { no_mpi(); }
bool initialized() { return false; }
std::string broken_reason() { return {}; }
void mark_broken(const std::string&) {}
std::shared_ptr<Work> submit(Job) { no_mpi(); }
void run_on_thread(std::function<void()>, double, const std::string&) { no_mpi(); }
int comm_split(int, int, int, double) { no_mpi(); }
void comm_free(int) {}
int comm_rank(int) { no_mpi(); }
int comm_size(int) { no_mpi(); }
std::string open_port(double) { no_mpi(); }
void close_port(const std::string&, double) { no_mpi(); }
int accept_and_merge(int, const std::string&, double) { no_mpi(); }
double bench_raw_allreduce(int, void*, int64_t, DataType, int, double) { no_mpi(); }
double bench_engine_allreduce(int, void*, int64_t, DataType, int, double) { no_mpi(); }
int connect_and_merge(const std::string&, double) { no_mpi(); }
int run_sync(Job, double, BlockingHook*) { no_mpi(); }
int64_t fast_path_calls() { return 0; }
int64_t fast_path_backoffs() { return 0; }
void finalize(double) {}

#else

namespace {

#define STRATA_MPI_FNS(X)                                                                                          \
  X(MPI_Init_thread) X(MPI_Initialized) X(MPI_Finalized) X(MPI_Finalize) X(MPI_Comm_rank) X(MPI_Comm_size)       \
  X(MPI_Comm_split) X(MPI_Comm_free) X(MPI_Comm_set_errhandler) X(MPI_Error_string) X(MPI_Allreduce)             \
  X(MPI_Bcast) X(MPI_Reduce) X(MPI_Allgather) X(MPI_Gather) X(MPI_Scatter) X(MPI_Reduce_scatter_block)           \
  X(MPI_Alltoall) X(MPI_Alltoallv) X(MPI_Send) X(MPI_Recv) X(MPI_Barrier) X(MPI_Open_port) X(MPI_Close_port)     \
  X(MPI_Comm_accept) X(MPI_Comm_connect) X(MPI_Intercomm_merge) X(MPI_Comm_disconnect) X(MPI_Get_library_version) X(MPI_Isend) X(MPI_Irecv) X(MPI_Test)   \
  X(MPI_Ibarrier) X(MPI_Query_thread) X(MPI_Comm_dup) X(MPI_Iallreduce) X(MPI_Ibcast) X(MPI_Iallgather)             \
  X(MPI_Ireduce_scatter_block) X(MPI_Testall)

struct Api {
#define STRATA_MPI_PTR(f) decltype(&::f) f = nullptr;
  STRATA_MPI_FNS(STRATA_MPI_PTR)
#undef STRATA_MPI_PTR
  MPI_Comm world = nullptr, self = nullptr;
  MPI_Errhandler errors_return = nullptr;
  MPI_Info info_null = nullptr;
  MPI_Datatype types[11] = {};
  MPI_Op ops[4] = {};
  bool ok = false;
  std::string reason;
};

const Api& api() {
  static const Api a = [] {
    Api a;
    // RTLD_GLOBAL: Open MPI's own plugins, loaded later by the library, resolve its symbols globally.
    void* h = nullptr;
    for (const char* name : {"libmpi.so.40", "libmpi.so"}) {
      if ((h = dlopen(name, RTLD_NOW | RTLD_GLOBAL))) break;
    }
    if (!h) {
      a.reason = std::string("could not load Open MPI's libmpi.so.40 (install openmpi-bin and libopenmpi3): ") +
                 dlerror();
      return a;
    }
    std::string missing;
#define STRATA_MPI_LOAD(f)                                  \
  a.f = reinterpret_cast<decltype(a.f)>(dlsym(h, #f));      \
  if (!a.f) missing += std::string(missing.empty() ? "" : ", ") + #f;
    STRATA_MPI_FNS(STRATA_MPI_LOAD)
#undef STRATA_MPI_LOAD
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p) missing += std::string(missing.empty() ? "" : ", ") + name;
      return p;
    };
    a.world = static_cast<MPI_Comm>(sym("ompi_mpi_comm_world"));
    a.self = static_cast<MPI_Comm>(sym("ompi_mpi_comm_self"));
    a.errors_return = static_cast<MPI_Errhandler>(sym("ompi_mpi_errors_return"));
    a.info_null = static_cast<MPI_Info>(sym("ompi_mpi_info_null"));
    const char* tnames[11] = {"ompi_mpi_int8_t",  "ompi_mpi_uint8_t", "ompi_mpi_int16_t",
                              "ompi_mpi_int32_t", "ompi_mpi_int64_t", "ompi_mpi_float",
                              "ompi_mpi_double",  "ompi_mpi_c_float_complex", "ompi_mpi_c_double_complex",
                              "ompi_mpi_byte",    "ompi_mpi_c_bool"};
    for (int i = 0; i < 11; ++i) a.types[i] = static_cast<MPI_Datatype>(sym(tnames[i]));
    const char* onames[4] = {"ompi_mpi_op_sum", "ompi_mpi_op_max", "ompi_mpi_op_min", "ompi_mpi_op_prod"};
    for (int i = 0; i < 4; ++i) a.ops[i] = static_cast<MPI_Op>(sym(onames[i]));
    if (!missing.empty()) {
      a.reason = "Open MPI's library lacks " + missing + " (Strata expects Open MPI 4.x)";
      return a;
    }
    a.ok = true;
    return a;
  }();
  return a;
}

std::string error_text(int code) {
  char buf[512];
  int len = 0;
  if (api().MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, len);
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw std::runtime_error(std::string(what) + " failed: " + error_text(code));
}

// The communication thread and its queue. Leaked on purpose: a thread stuck inside MPI (a timed-out collective)
// must not be joined at exit.
//
// Who may call MPI: whoever holds the token `busy` (taken and given back under `mu`). The communication thread takes
// it for each job and for testing point-to-point messages; a caller of a synchronous collective takes it (the fast
// path, run_sync) only when the thread has nothing queued, nothing running and no message in flight, and then makes
// the MPI call itself. So MPI calls never overlap (MPI_THREAD_SERIALIZED is enough) and a collective runs after
// every collective this process started before it.
struct Engine {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  std::atomic<int> queued{0};  // queue.size(), readable without the mutex
  bool busy = false;           // guarded by mu: someone is making MPI calls (see above)
  std::atomic<bool> started{false};
  std::atomic<bool> finalized{false};
  int thread_level = -1;       // MPI's thread support as started (MPI_THREAD_*)
  std::atomic<int64_t> fast_calls{0};
  // The fast path backs off (run_here): calls of the last window that had to nap, and until when it is off.
  int window_calls = 0, window_naps = 0, backoff_level = 0;  // touched by the token's holder only
  std::atomic<int64_t> fast_off_until{0};  // steady_clock ticks; 0: on
  std::atomic<int64_t> fast_backoffs{0};
  std::mutex broken_mu;
  std::string broken;
  std::atomic<bool> is_broken{false};  // !broken.empty(), readable without the mutex (checked on every call)
  std::map<int, MPI_Comm> comms;  // touched by the token's holder only
  // A duplicate of each communicator (same id) for the point-to-point messages of our own small all-reduce
  // (run_small): its messages can never match the user's send/recv or another collective's.
  std::map<int, MPI_Comm> shadows;  // touched by the token's holder only
  // Communicators of ranks joined with connect/accept (and those split from them): their messages go over TCP,
  // whose eager limit (64 KiB) makes run_small's pieces pointless (16 KiB in 4000-byte pieces: 0.73-0.77x of
  // MPI_Allreduce over TCP, docs/DISTRIBUTED.md). Known alike on every member.
  std::set<int> joined;  // touched by the token's holder only
  // Where small collectives work (run_small): the caller's buffers are copied in and out, so that a request left
  // behind by a timed-out call never writes into memory the caller has freed (the block is then leaked).
  std::unique_ptr<char[]> scratch;  // touched by the token's holder only
  size_t scratch_size = 0;
  char* scratch_for(size_t n) {
    if (n > scratch_size) {
      scratch.reset(new char[n]);
      scratch_size = n;
    }
    return scratch.get();
  }
  void abandon_scratch() {  // requests of a timed-out call may still use it
    (void)scratch.release();
    scratch_size = 0;
  }
  int next_id = 1;
  int rank = 0, size = 1;

  // Point-to-point messages in flight: started with MPI_Isend/MPI_Irecv so that a rank's send and its receive
  // (a ring exchange) do not wait on each other; the thread tests them between jobs.
  struct Pending {
    MPI_Request req;
    std::shared_ptr<Work> work;
  };
  std::vector<Pending> pending;  // touched by the token's holder only (a fast-path caller reads it before taking it)

  Engine() {
    std::thread([this] {
      for (;;) {
        std::function<void()> fn;
        {
          std::unique_lock<std::mutex> lk(mu);
          if (pending.empty() && queue.empty()) {
            // The next job of a sequence of small collectives usually comes within microseconds.
            lk.unlock();
            auto spin_end = std::chrono::steady_clock::now() + spin_time();
            while (std::chrono::steady_clock::now() < spin_end && queued.load(std::memory_order_acquire) == 0)
              std::this_thread::yield();
            lk.lock();
          }
          if (pending.empty()) {
            cv.wait(lk, [&] { return !queue.empty() && !busy; });
          } else if (queue.empty() || busy) {
            if (!busy) {
              busy = true;
              lk.unlock();
              progress();
              lk.lock();
              busy = false;
            }
            if (queue.empty() || busy) cv.wait_for(lk, std::chrono::microseconds(50));
          }
          if (queue.empty() || busy) continue;
          fn = std::move(queue.front());
          queue.pop_front();
          queued.fetch_sub(1, std::memory_order_relaxed);
          busy = true;
        }
        fn();
        if (!released) {
          std::lock_guard<std::mutex> lk(mu);
          busy = false;
        }
        released = false;
      }
    }).detach();
  }
  // Gives the token back before a job's Work is finished (called by the job, on the thread): the caller it wakes
  // finds the engine idle and takes its next synchronous collective's fast path. (Given back after the wake-up, the
  // token would often still be held when the caller returns, and one slow call would lead to the next.)
  bool released = false;  // the communication thread's own
  void release() {
    {
      std::lock_guard<std::mutex> lk(mu);
      busy = false;
    }
    released = true;
  }
  void progress() {
    for (size_t i = 0; i < pending.size();) {
      int flag = 0;
      MPI_Status st;
      int rc = api().MPI_Test(&pending[i].req, &flag, &st);
      if (rc != MPI_SUCCESS || flag) {
        if (rc == MPI_SUCCESS) pending[i].work->source = st.MPI_SOURCE;
        pending[i].work->finish(rc == MPI_SUCCESS ? std::string() : "MPI_Test failed: " + error_text(rc));
        pending.erase(pending.begin() + i);
      } else {
        ++i;
      }
    }
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lk(mu);
      queue.push_back(std::move(fn));
      queued.fetch_add(1, std::memory_order_release);
    }
    cv.notify_one();
  }
  MPI_Comm comm(int id) {
    if (id == 0) return api().world;
    auto it = comms.find(id);
    if (it == comms.end()) throw std::runtime_error("unknown or freed communicator " + std::to_string(id));
    return it->second;
  }
  MPI_Comm shadow(int id) {
    auto it = shadows.find(id);
    if (it == shadows.end()) throw std::runtime_error("no duplicate of communicator " + std::to_string(id));
    return it->second;
  }
  // Duplicates communicator `id` into shadows (collective over it, like the call that made it).
  void add_shadow(int id) {
    MPI_Comm d = nullptr;
    check(api().MPI_Comm_dup(comm(id), &d), "MPI_Comm_dup");
    api().MPI_Comm_set_errhandler(d, api().errors_return);
    shadows[id] = d;
  }
};

Engine& engine() {
  static Engine* e = new Engine();
  return *e;
}

void ensure_usable() {
  auto& e = engine();
  if (!e.started) throw std::runtime_error("strata.distributed: MPI is not started (call init_process_group)");
  if (e.finalized) throw std::runtime_error("strata.distributed: MPI was already finalized");
  std::string b = broken_reason();
  if (!b.empty())
    throw std::runtime_error("strata.distributed: the communication engine is unusable after an earlier failure: " +
                             b);
}

// ---- small collectives: non-blocking, waited for with a deadline ------------------------------------------------
//
// A collective of at most fast_path_max_bytes() per rank (all_reduce, broadcast, all_gather, reduce_scatter) and
// every barrier is started non-blocking and then tested until done (wait_requests): on the caller's own thread (the
// fast path, run_here) the test loop can give up at the group's timeout and raise, where a blocking MPI call could
// only be left by ending the process. The choice of this route depends only on the job (kind, bytes, communicator
// size), never on which thread runs it, so every rank makes matching calls (MPI does not match a blocking
// collective with a non-blocking one). all_reduce on 2^k ranks is our own recursive doubling over MPI_Isend /
// MPI_Irecv on the communicator's duplicate: Open MPI's MPI_Iallreduce took 1.2 us against 0.9 us for
// MPI_Allreduce at 1 KiB and 5.1 us against 1.9 us at 4 KiB (2 ranks, one mpirun job), the exchange 0.9 us and
// 3.0 us (docs/DISTRIBUTED.md); the other sizes and kinds use MPI's own non-blocking collectives.

constexpr int64_t kElemSize[] = {1, 1, 2, 4, 8, 4, 8, 8, 16, 1, 1};

int64_t job_bytes(const Job& j) {  // bytes per rank
  int64_t n = j.count;  // Alltoallv: count is 1 and the sizes are in send_counts
  if (j.kind == Kind::Alltoallv) {
    n = 0;
    for (int c : j.send_counts) n += c;
  }
  return n * kElemSize[static_cast<int>(j.dtype)];
}

// Our own all-reduce (2^k ranks, a type we reduce) takes messages up to STRATA_DISTRIBUTED_ALLREDUCE_MAX_BYTES
// (64 KiB) per rank: at 32 KiB the thread path's blocking MPI_Allreduce made 0.54-0.72x of the back-to-back
// reference, our exchange in pieces 1.35x (whole messages 0.61x; docs/DISTRIBUTED.md). Same on every rank, like the
// other limits.
int64_t allreduce_max_bytes() {
  static const int64_t n = [] {
    const char* v = std::getenv("STRATA_DISTRIBUTED_ALLREDUCE_MAX_BYTES");
    return v ? std::atoll(v) : int64_t{65536};
  }();
  return n;
}

bool own_allreduce_type(DataType t);

// Whether small_route() may hold, without MPI calls (checked before the fast path takes the token).
bool maybe_small(const Job& j) {
  switch (j.kind) {
    case Kind::Barrier: return true;
    case Kind::Allreduce: return job_bytes(j) <= std::max(fast_path_max_bytes(), allreduce_max_bytes());
    case Kind::Broadcast:
    case Kind::Allgather:
    case Kind::ReduceScatter: return job_bytes(j) <= fast_path_max_bytes();
    default: return false;
  }
}

// Needs the token (asks MPI for the communicator's size).
bool small_route(Engine& e, const Job& j) {
  if (!maybe_small(j)) return false;
  if (j.kind != Kind::Allreduce || job_bytes(j) <= fast_path_max_bytes()) return true;
  if (e.joined.count(j.comm)) return false;  // over TCP: measured at 16 KiB and below only
  int size = 1;
  api().MPI_Comm_size(e.comm(j.comm), &size);
  return (size & (size - 1)) == 0 && own_allreduce_type(j.dtype);
}

// How a waiting rank polls: MPI_Testall (Open MPI yields the core inside it when nothing progressed, with
// mpi_yield_when_idle) for the first STRATA_DISTRIBUTED_POLL_US microseconds (default 50), then naps of 5 us doubling
// to 100 us between tests: a rank whose peer is late (still computing, or preempted on an over-subscribed machine)
// stops competing for the core.
std::chrono::microseconds poll_time() {
  static const std::chrono::microseconds t{[] {
    const char* v = std::getenv("STRATA_DISTRIBUTED_POLL_US");
    return v ? std::atol(v) : 50L;
  }()};
  return t;
}

// The piece size of our all-reduce's messages (run_small); must be the same on every rank, like
// STRATA_DISTRIBUTED_FAST_PATH_MAX_BYTES (both decide which messages the ranks exchange).
int64_t chunk_bytes() {
  static const int64_t n = [] {
    const char* v = std::getenv("STRATA_DISTRIBUTED_CHUNK_BYTES");
    return v ? std::max<int64_t>(std::atoll(v), 1) : int64_t{4000};
  }();
  return n;
}

using Clock = std::chrono::steady_clock;

// A call's time limit, read from the clock only once a wait does not end at its first test (most small collectives
// of a busy loop complete at once: the clock read would be a tenth of their cost).
struct Deadline {
  double timeout_s;  // negative: none
  BlockingHook* hook = nullptr;  // called before the first wait that does not end at once
  bool napped = false;           // a wait went past its polling time (the peer was late)
  bool set = false;
  Clock::time_point at;
  bool passed(Clock::time_point now) {
    if (timeout_s < 0) return false;
    if (!set) {
      at = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
      set = true;
    }
    return now > at;
  }
};

// Tests `reqs` until all are done (true) or the deadline (if given) passes (false; the requests stay in flight).
bool wait_requests(int n, MPI_Request* reqs, Deadline* deadline) {
  const Api& a = api();
  int flag = 0;
  check(a.MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE), "MPI_Testall");
  if (flag) return true;
  const auto start = Clock::now();
  if (deadline && deadline->passed(start)) return false;
  const auto poll_end = start + poll_time();
  auto nap = std::chrono::microseconds(5);
  for (unsigned i = 1;; ++i) {
    check(a.MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (flag) return true;
    if ((i & 15) != 0) continue;
    auto now = Clock::now();
    if (deadline && deadline->passed(now)) return false;
    if (now > poll_end) {
      if (deadline) {
        deadline->napped = true;
        if (deadline->hook) {  // the GIL goes before the first nap, not before polling (docs/DISTRIBUTED.md)
          deadline->hook->before_block();
          deadline->hook = nullptr;
        }
      }
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(100));
    }
  }
}

// acc[i] = acc[i] (op) in[i], the same bits whichever operand is whose (each rank of a pair computes it with the
// operands swapped): integer sums and products wrap (unsigned arithmetic), MAX/MIN of floats propagate NaN and
// order -0.0 below +0.0.
template <class T>
void reduce_into(T* acc, const T* in, int64_t n, RedOp op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case RedOp::Sum: for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<T>(static_cast<U>(acc[i]) + static_cast<U>(in[i])); break;
      case RedOp::Prod: for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<T>(static_cast<U>(acc[i]) * static_cast<U>(in[i])); break;
      case RedOp::Max: for (int64_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], in[i]); break;
      case RedOp::Min: for (int64_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], in[i]); break;
    }
  } else {
    switch (op) {
      case RedOp::Sum: for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] + in[i]; break;
      case RedOp::Prod: for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] * in[i]; break;
      case RedOp::Max:
      case RedOp::Min: {
        const bool mx = op == RedOp::Max;
        for (int64_t i = 0; i < n; ++i) {
          T x = acc[i], y = in[i];
          if (x != x || y != y) acc[i] = x != x ? x : y;
          else if (x == y) acc[i] = (std::signbit(x) != mx) ? x : y;  // max: the +0.0 of a pair; min: the -0.0
          else acc[i] = ((x > y) == mx) ? x : y;
        }
        break;
      }
    }
  }
}

bool own_allreduce_type(DataType t) {
  switch (t) {
    case DataType::Int8: case DataType::UInt8: case DataType::Int16: case DataType::Int32: case DataType::Int64:
    case DataType::Float32: case DataType::Float64: return true;
    default: return false;
  }
}

void reduce_typed(void* acc, const void* in, int64_t n, DataType t, RedOp op) {
  switch (t) {
    case DataType::Int8: return reduce_into(static_cast<int8_t*>(acc), static_cast<const int8_t*>(in), n, op);
    case DataType::UInt8: return reduce_into(static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(in), n, op);
    case DataType::Int16: return reduce_into(static_cast<int16_t*>(acc), static_cast<const int16_t*>(in), n, op);
    case DataType::Int32: return reduce_into(static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), n, op);
    case DataType::Int64: return reduce_into(static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), n, op);
    case DataType::Float32: return reduce_into(static_cast<float*>(acc), static_cast<const float*>(in), n, op);
    case DataType::Float64: return reduce_into(static_cast<double*>(acc), static_cast<const double*>(in), n, op);
    default: throw std::logic_error("reduce_typed: unsupported type");
  }
}

// Runs a small_route() job; false when `deadline` passed first (the engine's scratch then stays with the requests:
// Engine::abandon_scratch). Needs the token.
bool run_small(Engine& e, const Job& j, Deadline* deadline) {
  const Api& a = api();
  MPI_Comm c = e.comm(j.comm);
  MPI_Datatype t = a.types[static_cast<int>(j.dtype)];
  MPI_Op op = a.ops[static_cast<int>(j.op)];
  const int n = static_cast<int>(j.count);
  const size_t nb = static_cast<size_t>(j.count * kElemSize[static_cast<int>(j.dtype)]);
  int rank = 0, size = 1;
  a.MPI_Comm_rank(c, &rank);
  a.MPI_Comm_size(c, &size);
  MPI_Request req[2];
  switch (j.kind) {
    case Kind::Barrier:
      check(a.MPI_Ibarrier(c, req), "MPI_Ibarrier");
      return wait_requests(1, req, deadline);
    case Kind::Broadcast: {
      char* buf = e.scratch_for(nb);
      if (rank == j.root) std::memcpy(buf, j.recv, nb);
      check(a.MPI_Ibcast(buf, n, t, j.root, c, req), "MPI_Ibcast");
      if (!wait_requests(1, req, deadline)) return false;
      if (rank != j.root) std::memcpy(j.recv, buf, nb);
      return true;
    }
    case Kind::Allgather: {
      char* buf = e.scratch_for(nb * size);
      std::memcpy(buf + nb * rank, j.send ? j.send : static_cast<const char*>(j.recv) + nb * rank, nb);
      check(a.MPI_Iallgather(MPI_IN_PLACE, n, t, buf, n, t, c, req), "MPI_Iallgather");
      if (!wait_requests(1, req, deadline)) return false;
      std::memcpy(j.recv, buf, nb * size);
      return true;
    }
    case Kind::ReduceScatter: {
      char* in = e.scratch_for(nb * (size + 1));
      char* out = in + nb * size;
      std::memcpy(in, j.send ? j.send : j.recv, nb * size);
      check(a.MPI_Ireduce_scatter_block(in, out, n, t, op, c, req), "MPI_Ireduce_scatter_block");
      if (!wait_requests(1, req, deadline)) return false;
      std::memcpy(j.recv, out, nb);
      return true;
    }
    case Kind::Allreduce: {
      char* acc = e.scratch_for(2 * nb);
      char* in = acc + nb;
      std::memcpy(acc, j.send ? j.send : j.recv, nb);
      if ((size & (size - 1)) == 0 && own_allreduce_type(j.dtype)) {
        MPI_Comm sc = e.shadow(j.comm);
        // Each exchange travels in pieces of at most chunk_bytes(): under the shared-memory transport's eager limit
        // (4 KiB with its header) a message is copied out at once; above it a rendezvous costs a round trip. At
        // most 32 pieces.
        const int64_t es = kElemSize[static_cast<int>(j.dtype)];
        int64_t per = e.joined.count(j.comm) ? n : std::max<int64_t>(chunk_bytes() / es, 1);
        per = std::max<int64_t>(per, (n + 31) / 32);
        const int pieces = static_cast<int>((n + per - 1) / per);
        MPI_Request reqs[64];
        for (int mask = 1; mask < size; mask <<= 1) {  // recursive doubling
          int peer = rank ^ mask;
          for (int k = 0; k < pieces; ++k) {
            int64_t off = k * per, m = std::min<int64_t>(per, n - off);
            check(a.MPI_Irecv(in + off * es, static_cast<int>(m), t, peer, 0, sc, &reqs[2 * k]), "MPI_Irecv");
            check(a.MPI_Isend(acc + off * es, static_cast<int>(m), t, peer, 0, sc, &reqs[2 * k + 1]), "MPI_Isend");
          }
          if (!wait_requests(2 * pieces, reqs, deadline)) return false;
          reduce_typed(acc, in, n, j.dtype, j.op);
        }
      } else {
        check(a.MPI_Iallreduce(MPI_IN_PLACE, acc, n, t, op, c, req), "MPI_Iallreduce");
        if (!wait_requests(1, req, deadline)) return false;
      }
      std::memcpy(j.recv, acc, nb);
      return true;
    }
    default: throw std::logic_error("run_small: not a small collective");
  }
}

// Returns false for a point-to-point job, which stays in flight (Engine::pending) after this returns.
bool execute(Engine& e, const Job& j, const std::shared_ptr<Work>& w) {
  const Api& a = api();
  MPI_Comm c = e.comm(j.comm);
  MPI_Datatype t = a.types[static_cast<int>(j.dtype)];
  MPI_Op op = a.ops[static_cast<int>(j.op)];
  if (j.count > INT32_MAX) throw std::runtime_error(j.name + ": more than 2^31-1 elements in one message");
  int n = static_cast<int>(j.count);
  const void* s = j.send ? j.send : MPI_IN_PLACE;
  if (j.kind == Kind::Send || j.kind == Kind::Recv) {
    MPI_Request req;
    if (j.kind == Kind::Send)
      check(a.MPI_Isend(j.send, n, t, j.root, j.tag, c, &req), "MPI_Isend");
    else
      check(a.MPI_Irecv(j.recv, n, t, j.root < 0 ? MPI_ANY_SOURCE : j.root, j.tag, c, &req), "MPI_Irecv");
    e.pending.push_back({req, w});
    return false;
  }
  if (j.async_op && j.kind != Kind::RawAllreduce) {
    // Nobody waits on an async job yet (DDP's buckets during backward), and the other ranks may still be
    // computing: a blocking collective would spin in MPI meanwhile, taking the cores from the computation. So
    // first an MPI_Ibarrier, tested with growing naps in between (no spinning while the others catch up; tested
    // without naps while a caller waits), then the blocking collective, which then runs at once at the
    // library's full speed. (Open MPI's non-blocking collectives themselves were up to 6x slower than the
    // blocking ones for 16 MiB: 18.3 ms vs 3.2 ms, docs/DISTRIBUTED.md.)
    MPI_Request req;
    check(a.MPI_Ibarrier(c, &req), "MPI_Ibarrier");
    auto nap = std::chrono::microseconds(5);
    for (int tests = 0;; ++tests) {
      int flag = 0;
      check(a.MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      if (flag) break;
      if (tests < 32 || waiters.load(std::memory_order_relaxed) > 0) {  // a caller waits: as fast as we can
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::microseconds(100));
      }
    }
  }
  if (small_route(e, j)) {
    run_small(e, j, nullptr);  // on the communication thread: the caller keeps the time
    return true;
  }
  switch (j.kind) {
    case Kind::Allreduce:
    case Kind::RawAllreduce: check(a.MPI_Allreduce(s, j.recv, n, t, op, c), "MPI_Allreduce"); break;
    case Kind::Broadcast: check(a.MPI_Bcast(j.recv, n, t, j.root, c), "MPI_Bcast"); break;
    case Kind::Reduce: {
      int me = 0;
      a.MPI_Comm_rank(c, &me);
      // MPI_IN_PLACE is the root's option only; elsewhere the send buffer is the data.
      const void* src = (me == j.root) ? s : (j.send ? j.send : j.recv);
      check(a.MPI_Reduce(src, j.recv, n, t, op, j.root, c), "MPI_Reduce");
      break;
    }
    case Kind::Allgather: check(a.MPI_Allgather(s, n, t, j.recv, n, t, c), "MPI_Allgather"); break;
    case Kind::Gather: check(a.MPI_Gather(j.send, n, t, j.recv, n, t, j.root, c), "MPI_Gather"); break;
    case Kind::Scatter: check(a.MPI_Scatter(j.send, n, t, j.recv, n, t, j.root, c), "MPI_Scatter"); break;
    case Kind::ReduceScatter:
      check(a.MPI_Reduce_scatter_block(s, j.recv, n, t, op, c), "MPI_Reduce_scatter_block");
      break;
    case Kind::Alltoall: check(a.MPI_Alltoall(j.send, n, t, j.recv, n, t, c), "MPI_Alltoall"); break;
    case Kind::Alltoallv:
      check(a.MPI_Alltoallv(j.send, j.send_counts.data(), j.send_displs.data(), t, j.recv, j.recv_counts.data(),
                            j.recv_displs.data(), t, c),
            "MPI_Alltoallv");
      break;
    case Kind::Send:
    case Kind::Recv: break;  // started by submit()
    case Kind::Barrier: check(a.MPI_Barrier(c), "MPI_Barrier"); break;
  }
  return true;
}

}  // namespace

bool mpi_available(std::string* reason) {
  const Api& a = api();
  if (reason) *reason = a.reason;
  return a.ok;
}

bool initialized() { return engine().started; }

std::string broken_reason() {
  auto& e = engine();
  if (!e.is_broken.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lk(e.broken_mu);
  return e.broken;
}

void mark_broken(const std::string& why) {
  auto& e = engine();
  std::lock_guard<std::mutex> lk(e.broken_mu);
  if (e.broken.empty()) e.broken = why;
  e.is_broken.store(true, std::memory_order_release);
}

void run_on_thread(std::function<void()> fn, double timeout_s, const std::string& what) {
  auto w = std::make_shared<Work>();
  engine().post([fn = std::move(fn), w] {
    try {
      fn();
      w->finish();
    } catch (const std::exception& ex) {
      w->finish(ex.what());
    }
  });
  if (!w->wait_for(timeout_s)) {
    std::string msg = what + " did not complete within " + std::to_string(timeout_s) + " s";
    mark_broken(msg);
    throw std::runtime_error("strata.distributed: " + msg);
  }
  if (!w->error.empty()) throw std::runtime_error("strata.distributed: " + what + ": " + w->error);
}

std::pair<int, int> init() {
  auto& e = engine();
  if (e.finalized) throw std::runtime_error("strata.distributed: MPI was finalized; it cannot be started again");
  if (e.started) return {e.rank, e.size};
  std::string reason;
  if (!mpi_available(&reason)) throw std::runtime_error("strata.distributed: MPI backend unavailable: " + reason);
  // Waiting ranks yield the core (over-subscribed machines slow to a crawl when ranks busy-poll); a user's own
  // setting wins.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  run_on_thread(
      [&e] {
        const Api& a = api();
        int flag = 0;
        a.MPI_Initialized(&flag);
        if (!flag) {
          int provided = 0;
          check(a.MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
        }
        // Started by someone else (mpi4py, ...) possibly with less: the fast path needs SERIALIZED.
        a.MPI_Query_thread(&e.thread_level);
        a.MPI_Comm_set_errhandler(a.world, a.errors_return);
        a.MPI_Comm_rank(a.world, &e.rank);
        a.MPI_Comm_size(a.world, &e.size);
        e.add_shadow(0);
      },
      -1, "MPI_Init_thread");
  e.started = true;
  return {e.rank, e.size};
}

// The profiler's name of a job: the collective, its bytes (per rank) and its communicator.
static std::string profile_name(const Job& j) {
  return "distributed::" + j.name + " [" + std::to_string(job_bytes(j)) + " B, comm " +
         std::to_string(j.comm) + "]";
}

std::shared_ptr<Work> submit(Job job) {
  ensure_usable();
  auto w = std::make_shared<Work>();
  auto& e = engine();
  // A profiled caller's collectives are recorded on the communication thread's own track of its session.
  std::shared_ptr<profiler::Session> session = profiler::is_recording() ? profiler::current_session() : nullptr;
  e.post([&e, job = std::move(job), w, session] {
    std::optional<profiler::ThreadStateGuard> joined;
    std::optional<profiler::RecordScope> scope;
    if (session) {
      joined.emplace(session);
      scope.emplace(profile_name(job), "collective");
    }
    if (!broken_reason().empty()) {
      w->finish("the communication engine is unusable after an earlier failure: " + broken_reason());
      return;
    }
    std::string err;
    bool done = true;
    try {
      done = execute(e, job, w);
    } catch (const std::exception& ex) {
      err = ex.what();
    }
    if (done) {
      scope.reset();  // the profiler's record ends with the MPI call
      e.release();    // no more MPI calls in this job
      w->finish(std::move(err));
    }
  });
  return w;
}

// The fast path: runs a small_route() job on the caller's thread when the communication thread is idle (see
// Engine); false when it is not (or the job is not small). Its wait ends at the group's timeout: the engine is then
// marked broken (the requests stay in flight; MPI cannot cancel a collective) and the caller gets the same error
// as on the thread path.
namespace {
bool run_here(const Job& j, double timeout_s, BlockingHook* hook) {
  auto& e = engine();
  if (!fast_path_enabled() || e.thread_level < MPI_THREAD_SERIALIZED) return false;
  if (j.async_op || !maybe_small(j)) return false;
  if (profiler::is_recording()) return false;  // profiled collectives are recorded on the thread's own track
  if (int64_t until = e.fast_off_until.load(std::memory_order_relaxed)) {
    if (Clock::now().time_since_epoch().count() < until) return false;
    e.fast_off_until.store(0, std::memory_order_relaxed);  // try the fast path again
  }
  {
    std::lock_guard<std::mutex> lk(e.mu);
    if (e.busy || !e.queue.empty() || !e.pending.empty()) return false;
    e.busy = true;
  }
  bool small = false;
  try {
    small = small_route(e, j);
  } catch (const std::exception&) {  // an unknown communicator: the thread path reports it
  }
  if (!small) {
    bool more;
    {
      std::lock_guard<std::mutex> lk(e.mu);
      e.busy = false;
      more = !e.queue.empty();
    }
    if (more) e.cv.notify_one();
    return false;
  }
  std::string err;
  bool timed_out = false;
  if (!broken_reason().empty()) {
    err = "the communication engine is unusable after an earlier failure: " + broken_reason();
  } else {
    Deadline deadline{timeout_s, hook};
    try {
      if (!run_small(e, j, &deadline)) {
        timed_out = true;
        e.abandon_scratch();
        mark_broken(timeout_message(j.name, timeout_s));  // before the token goes back: queued jobs see it
      }
    } catch (const std::exception& ex) {
      err = ex.what();
    }
    // Back-off: when peers keep arriving late (at least kBackoffNaps of the last kWindow calls napped), the
    // fast path is off for a while. On an over-subscribed machine a rank that polls without pause is soon
    // preempted, and its peer then waits for it for a time slice; calls handed to the communication thread (the
    // caller sleeping in between) stayed at ~9 us where fast-path calls drifted to 15-40 us (docs/DISTRIBUTED.md).
    // Where each rank has a core, calls complete at their first tests and the fast path stays on.
    // The time doubles (0.1 s to 3.2 s) while the window after each try backs off again, and falls back to 0.1 s
    // after a window that does not.
    constexpr int kWindow = 32, kBackoffNaps = 4;
    e.window_naps += deadline.napped;
    if (++e.window_calls == kWindow) {
      if (e.window_naps >= kBackoffNaps) {
        auto t = std::chrono::milliseconds(100) * (1 << e.backoff_level);
        e.backoff_level = std::min(e.backoff_level + 1, 5);
        e.fast_off_until.store((Clock::now() + t).time_since_epoch().count(), std::memory_order_relaxed);
        e.fast_backoffs.fetch_add(1, std::memory_order_relaxed);
      } else {
        e.backoff_level = 0;
      }
      e.window_calls = e.window_naps = 0;
    }
  }
  bool more;
  {
    std::lock_guard<std::mutex> lk(e.mu);
    e.busy = false;
    more = !e.queue.empty();
  }
  if (more) e.cv.notify_one();  // jobs queued meanwhile wait for the token
  e.fast_calls.fetch_add(1, std::memory_order_relaxed);
  if (timed_out) throw std::runtime_error("strata.distributed: " + timeout_message(j.name, timeout_s));
  if (!err.empty()) throw std::runtime_error("strata.distributed: " + j.name + ": " + err);
  return true;
}
}  // namespace

int run_sync(Job job, double timeout_s, BlockingHook* hook) {
  ensure_usable();
  if (run_here(job, timeout_s, hook)) return -1;
  std::string name = job.name;
  auto w = submit(std::move(job));
  if (hook) hook->before_block();
  return wait_work(*w, timeout_s, name);
}

int64_t fast_path_calls() { return engine().fast_calls.load(); }
int64_t fast_path_backoffs() { return engine().fast_backoffs.load(); }

int comm_split(int parent, int color, int key, double timeout_s) {
  ensure_usable();
  auto& e = engine();
  int id = -1;
  run_on_thread(
      [&] {
        MPI_Comm out = nullptr;
        check(api().MPI_Comm_split(e.comm(parent), color < 0 ? MPI_UNDEFINED : color, key, &out), "MPI_Comm_split");
        if (color >= 0) {
          api().MPI_Comm_set_errhandler(out, api().errors_return);
          id = e.next_id++;
          e.comms[id] = out;
          e.add_shadow(id);
          if (e.joined.count(parent)) e.joined.insert(id);
        }
      },
      timeout_s, "new_group (MPI_Comm_split)");
  return id;
}

void comm_free(int comm) {
  auto& e = engine();
  if (comm <= 0 || !e.started || e.finalized || !broken_reason().empty()) return;
  try {
    run_on_thread(
        [&] {
          auto it = e.comms.find(comm);
          if (it == e.comms.end()) return;
          api().MPI_Comm_free(&it->second);
          e.comms.erase(it);
          e.joined.erase(comm);
          auto sh = e.shadows.find(comm);
          if (sh != e.shadows.end()) {
            api().MPI_Comm_free(&sh->second);
            e.shadows.erase(sh);
          }
        },
        30, "MPI_Comm_free");
  } catch (const std::exception&) {
  }
}

int comm_rank(int comm) {
  ensure_usable();
  int r = 0;
  run_on_thread([&] { check(api().MPI_Comm_rank(engine().comm(comm), &r), "MPI_Comm_rank"); }, 30, "MPI_Comm_rank");
  return r;
}

int comm_size(int comm) {
  ensure_usable();
  int s = 0;
  run_on_thread([&] { check(api().MPI_Comm_size(engine().comm(comm), &s), "MPI_Comm_size"); }, 30, "MPI_Comm_size");
  return s;
}

std::string open_port(double timeout_s) {
  ensure_usable();
  std::string port;
  run_on_thread(
      [&] {
        char buf[MPI_MAX_PORT_NAME + 1] = {};
        check(api().MPI_Open_port(api().info_null, buf), "MPI_Open_port");
        port = buf;
      },
      timeout_s, "MPI_Open_port");
  return port;
}

void close_port(const std::string& port, double timeout_s) {
  ensure_usable();
  run_on_thread([&] { check(api().MPI_Close_port(port.c_str()), "MPI_Close_port"); }, timeout_s, "MPI_Close_port");
}

static int merge_into_new(Engine& e, MPI_Comm inter, bool high) {
  const Api& a = api();
  MPI_Comm merged = nullptr;
  check(a.MPI_Intercomm_merge(inter, high ? 1 : 0, &merged), "MPI_Intercomm_merge");
  a.MPI_Comm_set_errhandler(merged, a.errors_return);
  a.MPI_Comm_disconnect(&inter);
  int id = e.next_id++;
  e.comms[id] = merged;
  e.add_shadow(id);
  e.joined.insert(id);
  return id;
}

int accept_and_merge(int comm, const std::string& port, double timeout_s) {
  ensure_usable();
  auto& e = engine();
  int id = -1;
  run_on_thread(
      [&] {
        MPI_Comm inter = nullptr;
        check(api().MPI_Comm_accept(port.c_str(), api().info_null, 0, e.comm(comm), &inter), "MPI_Comm_accept");
        api().MPI_Comm_set_errhandler(inter, api().errors_return);
        id = merge_into_new(e, inter, false);
      },
      timeout_s, "joining the process group (MPI_Comm_accept)");
  return id;
}

int connect_and_merge(const std::string& port, double timeout_s) {
  ensure_usable();
  auto& e = engine();
  int id = -1;
  run_on_thread(
      [&] {
        MPI_Comm inter = nullptr;
        check(api().MPI_Comm_connect(port.c_str(), api().info_null, 0, api().self, &inter), "MPI_Comm_connect");
        api().MPI_Comm_set_errhandler(inter, api().errors_return);
        id = merge_into_new(e, inter, true);
      },
      timeout_s, "joining the process group (MPI_Comm_connect)");
  return id;
}

double bench_raw_allreduce(int comm, void* buf, int64_t count, DataType dtype, int iters, double timeout_s) {
  ensure_usable();
  auto& e = engine();
  double seconds = 0;
  run_on_thread(
      [&] {
        const Api& a = api();
        MPI_Comm c = e.comm(comm);
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i)
          check(a.MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(count), a.types[static_cast<int>(dtype)],
                                a.ops[0], c),
                "MPI_Allreduce");
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      },
      timeout_s, "MPI_Allreduce (bench)");
  return seconds;
}

double bench_engine_allreduce(int comm, void* buf, int64_t count, DataType dtype, int iters, double timeout_s) {
  Job j;
  j.kind = Kind::Allreduce;
  j.comm = comm;
  j.recv = buf;
  j.count = count;
  j.dtype = dtype;
  j.name = "all_reduce";
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) run_sync(j, timeout_s);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void finalize(double timeout_s) {
  auto& e = engine();
  if (!e.started || e.finalized || !broken_reason().empty()) return;
  try {
    run_on_thread(
        [&e] {
          for (auto& [id, c] : e.comms) api().MPI_Comm_free(&c);
          e.comms.clear();
          for (auto& [id, c] : e.shadows) api().MPI_Comm_free(&c);
          e.shadows.clear();
          api().MPI_Finalize();
        },
        timeout_s, "MPI_Finalize");
  } catch (const std::exception&) {
  }
  e.finalized = true;
}

#endif

}  // namespace strata::dist
