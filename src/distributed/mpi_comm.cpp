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
#include <optional>
#include <stdexcept>
#include <thread>
#include <algorithm>
#include <cstdio>
#include <unistd.h>

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
    // Off unless asked for: on the fast path a timed-out call ends the process instead of raising
    // DistError, and on over-subscribed cores long runs of small calls get slower (docs/DISTRIBUTED.md).
    const char* v = std::getenv("STRATA_DISTRIBUTED_FAST_PATH");
    return v && (std::string(v) == "1" || std::string(v) == "true" || std::string(v) == "on");
  }();
  return on;
}

int64_t fast_path_max_bytes() {
  static const int64_t n = [] {
    const char* v = std::getenv("STRATA_DISTRIBUTED_FAST_PATH_MAX_BYTES");
    return v ? std::atoll(v) : int64_t{4096};
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
int connect_and_merge(const std::string&, double) { no_mpi(); }
int run_sync(Job, double) { no_mpi(); }
int64_t fast_path_calls() { return 0; }
void finalize(double) {}

#else

namespace {

#define STRATA_MPI_FNS(X)                                                                                          \
  X(MPI_Init_thread) X(MPI_Initialized) X(MPI_Finalized) X(MPI_Finalize) X(MPI_Comm_rank) X(MPI_Comm_size)       \
  X(MPI_Comm_split) X(MPI_Comm_free) X(MPI_Comm_set_errhandler) X(MPI_Error_string) X(MPI_Allreduce)             \
  X(MPI_Bcast) X(MPI_Reduce) X(MPI_Allgather) X(MPI_Gather) X(MPI_Scatter) X(MPI_Reduce_scatter_block)           \
  X(MPI_Alltoall) X(MPI_Alltoallv) X(MPI_Send) X(MPI_Recv) X(MPI_Barrier) X(MPI_Open_port) X(MPI_Close_port)     \
  X(MPI_Comm_accept) X(MPI_Comm_connect) X(MPI_Intercomm_merge) X(MPI_Comm_disconnect) X(MPI_Get_library_version) X(MPI_Isend) X(MPI_Irecv) X(MPI_Test)   \
  X(MPI_Ibarrier) X(MPI_Query_thread)

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
  std::mutex broken_mu;
  std::string broken;
  std::atomic<bool> is_broken{false};  // !broken.empty(), readable without the mutex (checked on every call)
  std::map<int, MPI_Comm> comms;  // touched by the token's holder only
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
      },
      -1, "MPI_Init_thread");
  e.started = true;
  return {e.rank, e.size};
}

// The profiler's name of a job: the collective, its bytes (per rank) and its communicator.
static std::string profile_name(const Job& j) {
  static const int64_t size[] = {1, 1, 2, 4, 8, 4, 8, 8, 16, 1, 1};
  int64_t n = j.count;
  if (j.kind == Kind::Alltoallv) {
    n = 0;
    for (int c : j.send_counts) n += c;
  }
  return "distributed::" + j.name + " [" + std::to_string(n * size[static_cast<int>(j.dtype)]) + " B, comm " +
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

// The watchdog of fast-path calls. A collective run on the caller's own thread cannot be abandoned: MPI offers no
// way to leave a blocking collective, and the caller is inside it. So a thread started with the first fast-path
// call looks at the call in progress every `tick` (a twentieth of its timeout, 10 ms to 1 s); when one has run past
// its timeout it marks the engine broken, writes the same message a DistError would carry to stderr, and ends the
// process (exit status 1): under the launcher or mpirun the other ranks are then stopped and the failure reported.
// Without a fast path (STRATA_DISTRIBUTED_FAST_PATH=0) a timed-out synchronous call raises DistError instead.
namespace {
struct Watchdog {
  std::mutex mu;
  bool active = false;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds tick{1000};
  double timeout_s = 0;
  std::string what;
  std::once_flag started;

  void begin(const std::string& name, double t) {
    if (t < 0) return;  // no timeout: nothing to watch
    std::call_once(started, [this] { std::thread([this] { run(); }).detach(); });
    std::lock_guard<std::mutex> lk(mu);
    active = true;
    timeout_s = t;
    deadline = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(t));
    tick = std::chrono::milliseconds(std::clamp<int64_t>(static_cast<int64_t>(t * 50), 10, 1000));
    what = name;
  }
  void end() {
    std::lock_guard<std::mutex> lk(mu);
    active = false;
  }
  [[noreturn]] void run() {
    for (;;) {
      std::chrono::milliseconds t;
      {
        std::lock_guard<std::mutex> lk(mu);
        t = tick;
        if (active && std::chrono::steady_clock::now() > deadline) {
          std::string msg = timeout_message(what, timeout_s);
          mark_broken(msg);
          std::string out = "strata.distributed: " + msg +
                            "; it ran on the calling thread (the synchronous fast path), which MPI cannot interrupt, "
                            "so the process ends here (STRATA_DISTRIBUTED_FAST_PATH=0 keeps synchronous collectives "
                            "on the communication thread, where a timeout raises DistError)\n";
          std::fflush(nullptr);
          ssize_t ignored = ::write(2, out.data(), out.size());
          (void)ignored;
          std::_Exit(1);
        }
      }
      std::this_thread::sleep_for(t);
    }
  }
};
Watchdog& watchdog() {
  static Watchdog* w = new Watchdog();  // leaked: its thread never ends
  return *w;
}

// Runs `j` on the caller's thread when the communication thread is idle (see Engine); false when it is not.
bool run_here(const Job& j, double timeout_s) {
  auto& e = engine();
  if (!fast_path_enabled() || e.thread_level < MPI_THREAD_SERIALIZED) return false;
  if (j.async_op || j.kind == Kind::Send || j.kind == Kind::Recv || j.kind == Kind::RawAllreduce) return false;
  if (profiler::is_recording()) return false;  // profiled collectives are recorded on the thread's own track
  static const int64_t elem_size[] = {1, 1, 2, 4, 8, 4, 8, 8, 16, 1, 1};
  int64_t n = j.count;  // elements per rank; Alltoallv: count is 1 and the sizes are in send_counts
  if (j.kind == Kind::Alltoallv) {
    n = 0;
    for (int c : j.send_counts) n += c;
  }
  if (n * elem_size[static_cast<int>(j.dtype)] > fast_path_max_bytes()) return false;
  {
    std::lock_guard<std::mutex> lk(e.mu);
    if (e.busy || !e.queue.empty() || !e.pending.empty()) return false;
    e.busy = true;
  }
  std::string err;
  if (!broken_reason().empty()) {
    err = "the communication engine is unusable after an earlier failure: " + broken_reason();
  } else {
    watchdog().begin(j.name, timeout_s);
    try {
      execute(e, j, nullptr);
    } catch (const std::exception& ex) {
      err = ex.what();
    }
    watchdog().end();
  }
  bool more;
  {
    std::lock_guard<std::mutex> lk(e.mu);
    e.busy = false;
    more = !e.queue.empty();
  }
  if (more) e.cv.notify_one();  // jobs queued meanwhile wait for the token
  e.fast_calls.fetch_add(1, std::memory_order_relaxed);
  if (!err.empty()) throw std::runtime_error("strata.distributed: " + j.name + ": " + err);
  return true;
}
}  // namespace

int run_sync(Job job, double timeout_s) {
  ensure_usable();
  if (run_here(job, timeout_s)) return -1;
  std::string name = job.name;
  auto w = submit(std::move(job));
  return wait_work(*w, timeout_s, name);
}

int64_t fast_path_calls() { return engine().fast_calls.load(); }

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

void finalize(double timeout_s) {
  auto& e = engine();
  if (!e.started || e.finalized || !broken_reason().empty()) return;
  try {
    run_on_thread(
        [&e] {
          for (auto& [id, c] : e.comms) api().MPI_Comm_free(&c);
          e.comms.clear();
          api().MPI_Finalize();
        },
        timeout_s, "MPI_Finalize");
  } catch (const std::exception&) {
  }
  e.finalized = true;
}

#endif

}  // namespace strata::dist
