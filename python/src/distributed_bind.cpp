// strata._C._distributed: the MPI communication engine (src/distributed/mpi_comm.h) for strata.distributed.
// Buffers travel as addresses (the Python side holds the tensors until the Work completes); datatypes and
// reduction ops as the small integers of mpi_comm.h.
#include <atomic>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind.h"
#include "distributed/mpi_comm.h"

namespace strata::py {

namespace {

bool sync_tensors_run(int kind, int comm, int group_size, nb::handle a, nb::handle b, int op, int root, const char* name,
                      double timeout) {
  using namespace strata::dist;
  auto mpi_type = [](const Tensor& t) -> int {
    if (!t.device().is_cpu() || !t.is_contiguous() || t.numel() == 0) return -1;
    switch (t.dtype()) {
      case ScalarType::Int8: return static_cast<int>(DataType::Int8);
      case ScalarType::UInt8: return static_cast<int>(DataType::UInt8);
      case ScalarType::Int16: return static_cast<int>(DataType::Int16);
      case ScalarType::Int32: return static_cast<int>(DataType::Int32);
      case ScalarType::Int64: return static_cast<int>(DataType::Int64);
      case ScalarType::Float32: return static_cast<int>(DataType::Float32);
      case ScalarType::Float64: return static_cast<int>(DataType::Float64);
      default: return -1;
    }
  };
  if (!nb::isinstance<Tensor>(a)) return false;
  const Tensor& out = *nb::inst_ptr<Tensor>(a);
  int dt = mpi_type(out);
  if (dt < 0) return false;
  Job j;
  j.kind = static_cast<Kind>(kind);
  j.comm = comm;
  j.recv = out.data_ptr();
  j.count = out.numel();
  j.dtype = static_cast<DataType>(dt);
  j.op = static_cast<RedOp>(op);
  j.root = root;
  j.name = name;
  if (!b.is_none()) {
    if (!nb::isinstance<Tensor>(b)) return false;
    const Tensor& in = *nb::inst_ptr<Tensor>(b);
    if (mpi_type(in) != dt) return false;
    if (j.kind == Kind::Allgather) {
      if (out.numel() != in.numel() * group_size) return false;
      j.count = in.numel();
    } else if (j.kind == Kind::ReduceScatter) {
      if (in.numel() != out.numel() * group_size) return false;
    } else {
      return false;
    }
    j.send = in.data_ptr();
  } else if (j.kind != Kind::Allreduce && j.kind != Kind::Broadcast) {
    return false;
  }
  // The GIL is released only once the call has to wait (BlockingHook): most small collectives of a busy loop
  // complete at their first test, and releasing and taking the GIL cost about as much as the rest of the call.
  struct GilRelease final : BlockingHook {
    PyThreadState* saved = nullptr;
    void before_block() override {
      if (!saved) saved = PyEval_SaveThread();
    }
    void restore() {
      if (saved) PyEval_RestoreThread(saved);
      saved = nullptr;
    }
    ~GilRelease() { restore(); }
  } gil;
  try {
    run_sync(std::move(j), timeout, &gil);
  } catch (const std::runtime_error& e) {
    gil.restore();
    throw Error(e.what());
  }
  gil.restore();
  return true;
}

// strata.distributed.all_reduce as a C-level callable (METH_FASTCALL): the common call -- all_reduce(t) or
// all_reduce(t, op=ReduceOp.SUM), default group, async_op False, no debug mode -- runs sync_tensors_run straight
// from the arguments, with no Python frame; anything else (other arguments, a tensor sync_tensors_run refuses, no
// default group, the debug mode, a keyword it does not know) is handed, arguments untouched, to the Python
// function it replaces (strata.distributed._collectives._all_reduce_general), which checks, raises and runs as
// before. Its `self` is the module it lives in (strata.distributed._collectives: it pickles by name, and reads as
// a built-in function); what it needs is in g_entry (set once by make_all_reduce, kept alive for the process).
std::atomic<int64_t> g_all_reduce_entry_calls{0};

struct EntryRefs {
  PyObject* general = nullptr;  // the Python function
  PyObject* state = nullptr;    // strata.distributed._state
  PyObject* sum = nullptr;      // ReduceOp.SUM
  PyObject* dist_error = nullptr;
} g_entry;

PyObject* all_reduce_entry(PyObject*, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  PyObject* general = g_entry.general;
  auto fallback = [&] { return PyObject_Vectorcall(general, args, nargsf, kwnames); };
  static PyObject* s_op = PyUnicode_InternFromString("op");
  static PyObject* s_group = PyUnicode_InternFromString("group");
  static PyObject* s_async = PyUnicode_InternFromString("async_op");
  static PyObject* s_debug = PyUnicode_InternFromString("debug");
  static PyObject* s_default = PyUnicode_InternFromString("default");
  static PyObject* s_comm = PyUnicode_InternFromString("_comm");
  static PyObject* s_ranks = PyUnicode_InternFromString("_ranks");
  static PyObject* s_timeout = PyUnicode_InternFromString("_timeout");
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs < 1 || nargs > 4) return fallback();
  PyObject* slot[4] = {args[0], nargs > 1 ? args[1] : nullptr, nargs > 2 ? args[2] : nullptr,
                       nargs > 3 ? args[3] : nullptr};
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    int at = name == s_op ? 1 : name == s_group ? 2 : name == s_async ? 3 : -1;
    if (at < 0 || slot[at]) return fallback();
    slot[at] = args[nargs + k];
  }
  if ((slot[1] && slot[1] != g_entry.sum) || (slot[2] && slot[2] != Py_None) ||
      (slot[3] && slot[3] != Py_False))
    return fallback();
  PyObject* state = g_entry.state;
  PyObject* debug = PyObject_GetAttr(state, s_debug);
  if (!debug) return nullptr;
  Py_DECREF(debug);  // a bool: alive in the interpreter
  if (debug != Py_False) return fallback();
  PyObject* g = PyObject_GetAttr(state, s_default);
  if (!g) return nullptr;
  // The default group's communicator, size and time limit, read once per group object (a ProcessGroup sets them
  // in its constructor only); the cache holds a reference, so a new group is never taken for the old one.
  static PyObject* cached_group = nullptr;
  static long comm = -1;
  static Py_ssize_t size = -1;
  static double timeout = -1.0;
  if (g != cached_group) {
    long c = -1;
    Py_ssize_t sz = -1;
    double t = -1.0;
    if (g != Py_None) {
      PyObject* o = PyObject_GetAttr(g, s_comm);
      if (o) {
        c = PyLong_AsLong(o);
        Py_DECREF(o);
      }
      o = PyObject_GetAttr(g, s_ranks);
      if (o) {
        sz = PyObject_Size(o);
        Py_DECREF(o);
      }
      o = PyObject_GetAttr(g, s_timeout);
      if (o) {
        t = PyFloat_AsDouble(o);
        Py_DECREF(o);
      }
    }
    if (PyErr_Occurred()) {  // an odd group: the general path says what is wrong
      PyErr_Clear();
      c = -1;
    }
    PyObject* old = cached_group;
    cached_group = g;  // the reference GetAttr gave
    comm = c, size = sz, timeout = t;
    Py_XDECREF(old);
  } else {
    Py_DECREF(g);
  }
  if (comm < 0 || size < 1) return fallback();
  bool done;
  try {
    done = sync_tensors_run(0, static_cast<int>(comm), static_cast<int>(size), args[0], nb::none(), 0, 0,
                            "all_reduce", timeout);
  } catch (const std::exception& e) {  // as the general path: raise DistError(str(e)) from None
    PyErr_SetString(g_entry.dist_error, e.what());
    return nullptr;
  }
  if (!done) return fallback();
  g_all_reduce_entry_calls.fetch_add(1, std::memory_order_relaxed);
  Py_RETURN_NONE;
}

PyMethodDef all_reduce_def = {"all_reduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(
                                                &all_reduce_entry)),
                              METH_FASTCALL | METH_KEYWORDS,
                              "all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False)\n\n"
                              "Reduces `tensor` across the ranks of `group` in place (torch.distributed.all_reduce)."};

}  // namespace

void bind_distributed(nb::module_& parent) {
  using namespace strata::dist;
  nb::module_ m = parent.def_submodule("_distributed", "MPI communication engine behind strata.distributed");
  auto rethrow = [](auto&& fn) {
    try {
      return fn();
    } catch (const std::runtime_error& e) {
      throw Error(e.what());
    }
  };
  m.def("mpi_available", [] {
    std::string reason;
    bool ok = mpi_available(&reason);
    return std::make_pair(ok, reason);
  });
  m.def("init", [rethrow] {
    nb::gil_scoped_release nogil;
    return rethrow([] { return init(); });
  });
  m.def("initialized", [] { return initialized(); });
  m.def("broken_reason", [] { return broken_reason(); });
  m.def("mark_broken", [](const std::string& why) { mark_broken(why); });
  m.def("finalize", [](double timeout) {
    nb::gil_scoped_release nogil;
    finalize(timeout);
  });

  nb::class_<Work>(m, "Work")
      .def("wait",
           [](Work& w, double timeout, const std::string& what) {
             nb::gil_scoped_release nogil;
             try {
               return wait_work(w, timeout, what);
             } catch (const std::runtime_error& e) {
               nb::gil_scoped_acquire gil;
               throw Error(e.what());
             }
           })
      .def("is_completed", [](Work& w) {
        std::lock_guard<std::mutex> lk(w.mu);
        return w.done;
      });

  auto make_job = [](int kind, int comm, uintptr_t send, uintptr_t recv, int64_t count, int dtype, int op, int root,
                     int tag, const std::string& name, std::vector<int> sc, std::vector<int> sd, std::vector<int> rc,
                     std::vector<int> rd, bool async_op) {
    Job j;
    j.kind = static_cast<Kind>(kind);
    j.comm = comm;
    j.send = reinterpret_cast<const void*>(send);
    j.recv = reinterpret_cast<void*>(recv);
    j.count = count;
    j.dtype = static_cast<DataType>(dtype);
    j.op = static_cast<RedOp>(op);
    j.root = root;
    j.tag = tag;
    j.name = name;
    j.async_op = async_op;
    j.send_counts = std::move(sc);
    j.send_displs = std::move(sd);
    j.recv_counts = std::move(rc);
    j.recv_displs = std::move(rd);
    return j;
  };
  m.def("submit",
        [rethrow, make_job](int kind, int comm, uintptr_t send, uintptr_t recv, int64_t count, int dtype, int op,
                            int root, int tag, const std::string& name, std::vector<int> sc, std::vector<int> sd,
                            std::vector<int> rc, std::vector<int> rd, bool async_op) {
          Job j = make_job(kind, comm, send, recv, count, dtype, op, root, tag, name, std::move(sc), std::move(sd),
                           std::move(rc), std::move(rd), async_op);
          return rethrow([&] { return submit(std::move(j)); });
        },
        nb::arg("kind"), nb::arg("comm"), nb::arg("send"), nb::arg("recv"), nb::arg("count"), nb::arg("dtype"),
        nb::arg("op"), nb::arg("root"), nb::arg("tag"), nb::arg("name"), nb::arg("send_counts"),
        nb::arg("send_displs"), nb::arg("recv_counts"), nb::arg("recv_displs"), nb::arg("async_op") = false);
  // A synchronous job: run_sync (the fast path when the thread is idle), waited for here; returns the source rank.
  m.def("run_sync",
        [make_job](int kind, int comm, uintptr_t send, uintptr_t recv, int64_t count, int dtype, int op, int root,
                   int tag, const std::string& name, std::vector<int> sc, std::vector<int> sd, std::vector<int> rc,
                   std::vector<int> rd, double timeout) {
          Job j = make_job(kind, comm, send, recv, count, dtype, op, root, tag, name, std::move(sc), std::move(sd),
                           std::move(rc), std::move(rd), false);
          nb::gil_scoped_release nogil;
          try {
            return run_sync(std::move(j), timeout);
          } catch (const std::runtime_error& e) {
            nb::gil_scoped_acquire gil;
            throw Error(e.what());
          }
        });
  // The hot synchronous collectives straight from their tensors (strata.distributed._collectives' fast calls):
  // all_reduce / broadcast (`b` None), all_gather_into_tensor / reduce_scatter_tensor (`a` the output, `b` the
  // input). Returns False, doing nothing, unless every tensor is a contiguous, non-empty CPU tensor of a dtype MPI
  // has and the sizes agree: the Python path then runs, with its checks, copies and messages.
  auto sync_tensors = &sync_tensors_run;
  m.def("sync_tensors", sync_tensors, nb::arg("kind"), nb::arg("comm"), nb::arg("group_size"), nb::arg("a").none(),
        nb::arg("b").none(), nb::arg("op"), nb::arg("root"), nb::arg("name"), nb::arg("timeout"));
  // sync_tensors(0, comm, group_size, tensor, None, op, 0, "all_reduce", timeout) with fewer arguments to convert:
  // the hottest call (strata.distributed.all_reduce).
  m.def("all_reduce_sync", [sync_tensors](nb::handle t, int comm, int group_size, int op, double timeout) {
    return sync_tensors(0, comm, group_size, t, nb::none(), op, 0, "all_reduce", timeout);
  });
  // The C-level strata.distributed.all_reduce (all_reduce_entry above), made once by _collectives.
  m.def("make_all_reduce", [](nb::object general, nb::object state, nb::object sum, nb::object dist_error,
                              nb::object module) {
    for (PyObject** slot : {&g_entry.general, &g_entry.state, &g_entry.sum, &g_entry.dist_error}) Py_XDECREF(*slot);
    g_entry = {general.release().ptr(), state.release().ptr(), sum.release().ptr(), dist_error.release().ptr()};
    nb::object name = module.attr("__name__");
    PyObject* f = PyCFunction_NewEx(&all_reduce_def, module.ptr(), name.ptr());
    if (!f) throw nb::python_error();
    return nb::steal(f);
  });
  m.def("all_reduce_entry_calls", [] { return g_all_reduce_entry_calls.load(std::memory_order_relaxed); });
  m.def("fast_path_calls", [] { return fast_path_calls(); });
  m.def("fast_path_backoffs", [] { return fast_path_backoffs(); });
  m.def("fast_path_enabled", [] { return fast_path_enabled(); });
  // Each of these is collective (or a call of MPI's) on the communication thread: the GIL is released meanwhile.
#define STRATA_NOGIL(expr)            \
  {                                   \
    nb::gil_scoped_release release;   \
    return rethrow([&] { return expr; }); \
  }
  m.def("comm_split", [rethrow](int p, int color, int key, double t) STRATA_NOGIL(comm_split(p, color, key, t)));
  m.def("comm_free", [](int c) {
    nb::gil_scoped_release release;
    comm_free(c);
  });
  m.def("comm_rank", [rethrow](int c) STRATA_NOGIL(comm_rank(c)));
  m.def("comm_size", [rethrow](int c) STRATA_NOGIL(comm_size(c)));
  m.def("open_port", [rethrow](double t) STRATA_NOGIL(open_port(t)));
  m.def("close_port", [rethrow](const std::string& p, double t) STRATA_NOGIL((close_port(p, t), 0)));
  m.def("accept_and_merge",
        [rethrow](int c, const std::string& p, double t) STRATA_NOGIL(accept_and_merge(c, p, t)));
  m.def("connect_and_merge", [rethrow](const std::string& p, double t) STRATA_NOGIL(connect_and_merge(p, t)));
  m.def("bench_raw_allreduce", [rethrow](int c, uintptr_t buf, int64_t count, int dtype, int iters, double t)
            STRATA_NOGIL(bench_raw_allreduce(c, reinterpret_cast<void*>(buf), count, static_cast<DataType>(dtype),
                                             iters, t)));
  m.def("bench_engine_allreduce", [rethrow](int c, uintptr_t buf, int64_t count, int dtype, int iters, double t)
            STRATA_NOGIL(bench_engine_allreduce(c, reinterpret_cast<void*>(buf), count, static_cast<DataType>(dtype),
                                                iters, t)));
#undef STRATA_NOGIL
}

}  // namespace strata::py
