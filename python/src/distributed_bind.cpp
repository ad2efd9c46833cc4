// strata._C._distributed: the MPI communication engine (src/distributed/mpi_comm.h) for strata.distributed.
// Buffers travel as addresses (the Python side holds the tensors until the Work completes); datatypes and
// reduction ops as the small integers of mpi_comm.h.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind.h"
#include "distributed/mpi_comm.h"

namespace strata::py {

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
             bool ok;
             {
               nb::gil_scoped_release nogil;
               ok = w.wait_for(timeout);
             }
             if (!ok) {
               std::string msg = what + " did not complete within " + std::to_string(timeout) +
                                 " s (a rank may have died, hung, or called a different collective)";
               mark_broken(msg);
               throw Error("strata.distributed: " + msg);
             }
             if (!w.error.empty()) throw Error("strata.distributed: " + what + ": " + w.error);
             return w.source;
           })
      .def("is_completed", [](Work& w) {
        std::lock_guard<std::mutex> lk(w.mu);
        return w.done;
      });

  m.def("submit",
        [rethrow](int kind, int comm, uintptr_t send, uintptr_t recv, int64_t count, int dtype, int op, int root,
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
          return rethrow([&] { return submit(std::move(j)); });
        },
        nb::arg("kind"), nb::arg("comm"), nb::arg("send"), nb::arg("recv"), nb::arg("count"), nb::arg("dtype"),
        nb::arg("op"), nb::arg("root"), nb::arg("tag"), nb::arg("name"), nb::arg("send_counts"),
        nb::arg("send_displs"), nb::arg("recv_counts"), nb::arg("recv_displs"), nb::arg("async_op") = false);
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
#undef STRATA_NOGIL
}

}  // namespace strata::py
