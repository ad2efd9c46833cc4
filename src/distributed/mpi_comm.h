// strata.distributed's MPI backend: Open MPI's C API, loaded with dlopen at first use (like oneDNN in
// backends/cpu/dnnl_runtime.h), and one communication thread that makes every MPI call.
//
// Why one thread: collectives must run in the same order on every rank, MPI_Init and MPI_Finalize must be called
// by the same thread, and a caller must be able to give up on a collective that never completes (a dead or hung
// rank). The caller hands a Job to the thread and sleeps on the Work's condition variable (no busy polling of its
// own; MPI itself is asked to yield when idle, see mpi_comm.cpp), with the group's timeout. A Job that times out
// leaves the thread stuck inside MPI: the engine is then marked broken and every later call fails at once.
// Exception: a small synchronous collective may run on the caller's own thread when the engine is idle (run_sync,
// the fast path); it is started non-blocking and tested until the group's deadline, so it can give up as well.
//
// The header needs no MPI headers: buffers are raw pointers, datatypes and reduction ops small integers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace strata::dist {

// Whether Open MPI's library could be loaded (and every function we call found); `reason` says why not.
bool mpi_available(std::string* reason);

enum class DataType : int { Int8, UInt8, Int16, Int32, Int64, Float32, Float64, Complex64, Complex128, Byte, Bool };
enum class RedOp : int { Sum, Max, Min, Prod };

enum class Kind : int {
  Allreduce, Broadcast, Reduce, Allgather, Gather, Scatter, ReduceScatter, Alltoall, Alltoallv, Send, Recv, Barrier,
  RawAllreduce  // MPI_Allreduce exactly as the library offers it (bench/distributed.py's reference)
};

struct Job {
  Kind kind = Kind::Barrier;
  int comm = 0;                 // communicator id (0: the world)
  const void* send = nullptr;   // nullptr: in place
  void* recv = nullptr;
  int64_t count = 0;            // elements per rank (see mpi_comm.cpp for each kind)
  DataType dtype = DataType::Byte;
  RedOp op = RedOp::Sum;
  int root = 0;                 // root of broadcast/reduce/gather/scatter, peer of send/recv
  int tag = 0;
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;  // Alltoallv
  std::string name;             // for messages: "all_reduce", ...
  bool async_op = false;        // the caller does not wait for it now (see mpi_comm.cpp: started non-blocking)
};

// A submitted job: done once the communication thread finished it (or failed it).
struct Work {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::atomic<bool> done_flag{false};  // `done`, readable without the mutex (the waiter's short spin)
  std::string error;     // non-empty: the job failed
  int source = -1;       // Recv: the rank the message came from
  // Waits up to `timeout_s` seconds (negative: forever). Returns false on timeout; the caller then reports it.
  bool wait_for(double timeout_s);
  void finish(std::string err = {});
};

// Starts MPI (on the communication thread) if not started yet. `singleton_ok`: the caller knows it was not started
// by mpirun. Returns the world's rank and size.
std::pair<int, int> init();
bool initialized();
// The engine gave up on a job that timed out; the reason (empty: healthy).
std::string broken_reason();
void mark_broken(const std::string& why);

// Runs the job on the communication thread. Throws if MPI is not started or the engine is broken.
std::shared_ptr<Work> submit(Job job);
// Runs a synchronous collective and waits for it (up to `timeout_s`; negative: forever); returns Work::source.
// The fast path: when the communication thread has nothing queued or running (and no point-to-point message in
// flight) and the job is small (mpi_comm.cpp: small_route), the caller makes the MPI calls itself, under the
// engine's token (mpi_comm.cpp: Engine) and with the deadline, saving the
// hand-off to the thread and back; otherwise the job is queued behind the others, as submit() does. Throws
// std::runtime_error with the messages of wait_work(). STRATA_DISTRIBUTED_FAST_PATH=0 turns the fast path off.
// A fast-path call waits with a deadline (mpi_comm.cpp: run_small): past the timeout it raises like the thread path.
// `hook` (optional): called once, on the calling thread, before the call first has to sleep (a fast-path collective
// still not done after its polling time, or one handed to the thread): the binding releases the GIL there, so a
// small collective that completes while polling never pays for releasing and taking it again.
struct BlockingHook {
  virtual void before_block() = 0;
 protected:
  ~BlockingHook() = default;
};
int run_sync(Job job, double timeout_s, BlockingHook* hook = nullptr);
bool fast_path_enabled();
int64_t fast_path_max_bytes();  // larger messages (bytes per rank) take the thread path
int64_t fast_path_calls();  // how many calls took the fast path (tests)
int64_t fast_path_backoffs();  // how often the fast path turned itself off for a while (mpi_comm.cpp: run_here)
// Waits for a submitted job; on timeout marks the engine broken. Throws with "strata.distributed: " + message.
int wait_work(Work& w, double timeout_s, const std::string& what);
std::string timeout_message(const std::string& what, double timeout_s);
// Runs `fn` (MPI calls of the caller's own) on the communication thread and waits up to `timeout_s`.
void run_on_thread(std::function<void()> fn, double timeout_s, const std::string& what);

// Communicators, by small integer ids. All of these are collective over the parent and run on the thread.
int comm_split(int parent, int color, int key, double timeout_s);  // color < 0: this rank gets no new communicator
void comm_free(int comm);
int comm_rank(int comm);
int comm_size(int comm);
// Joining separately started processes into one communicator: the first rank opens a port and accepts the others
// one by one (each accept is collective over the ranks joined so far); each later rank connects once.
std::string open_port(double timeout_s);
void close_port(const std::string& port, double timeout_s);
int accept_and_merge(int comm, const std::string& port, double timeout_s);
int connect_and_merge(const std::string& port, double timeout_s);

// `iters` back-to-back MPI_Allreduce (sum, in place) calls on the communication thread, timed there: the library's
// own speed with none of ours (bench/distributed.py's reference). Returns seconds for all of them.
double bench_raw_allreduce(int comm, void* buf, int64_t count, DataType dtype, int iters, double timeout_s);

// `iters` synchronous all_reduces (sum, in place) through run_sync from the calling thread, timed there: the engine
// (fast path or thread hand-off, our small all-reduce or MPI's) with no Python (bench/distributed.py --small).
double bench_engine_allreduce(int comm, void* buf, int64_t count, DataType dtype, int iters, double timeout_s);

// MPI_Finalize (on the thread), once, at exit; skipped if the engine is broken.
void finalize(double timeout_s);

}  // namespace strata::dist
