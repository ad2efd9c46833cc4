// Several std::threads at once on the shared parts of the library: the
// dispatcher (definitions and kernel registrations while other threads call
// ops), the CPU allocator and its caches, the autograd engine, generators and
// the profiler. Each test checks results; run under ThreadSanitizer (a build
// with -fsanitize=thread, see docs/THREADS.md) they also check for races.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "backends/cpu/parallel.h"
#include "core/generator.h"
#include "ops/ops.h"
#include "profiler/profiler.h"

using namespace strata;
namespace ag = strata::autograd;
namespace prof = strata::profiler;

namespace {

constexpr int kThreads = 4;

template <typename F>
void run_threads(int n, F f) {
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back(f, i);
  for (auto& t : ts) t.join();
}

Tensor filled(std::vector<int64_t> sizes, float v) {
  Tensor t = empty_tensor(sizes, ScalarType::Float32, Device());
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
  return t;
}

float at(const Tensor& t, int64_t i) { return contiguous(t).data_ptr<float>()[i]; }

Tensor plus_one(const Tensor& x) { return add(x, filled({}, 1.0f)); }
Tensor plus_one_again(const Tensor& x) { return add(filled({}, 1.0f), x); }

}  // namespace

// Intra-op threads (OpenMP) stay at one: the runtime is not built with the
// sanitizer, and these tests are about threads the user starts.
class Threads : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = get_num_threads();
    set_num_threads(1);
  }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_F(Threads, DispatcherRegistrationWhileOpsRun) {
  Dispatcher& d = Dispatcher::get();
  static int round = 0;  // the test may be repeated (--gtest_repeat): fresh names each time
  ++round;
  OperatorEntry& op = d.def("test_threads::plus_one_" + std::to_string(round) + "(Tensor self) -> Tensor");
  d.register_kernel(op, DispatchKey::CPU, make_kernel<&plus_one>("plus_one"));
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::thread registrar([&] {
    for (int i = 0; i < 200; ++i) {
      // Swap the kernel for an equivalent one, define new ops (which grows
      // the op table) and look them up, while the callers run.
      d.register_kernel(op, DispatchKey::CPU,
                        i % 2 ? make_kernel<&plus_one>("plus_one") : make_kernel<&plus_one_again>("plus_one_again"));
      const std::string name = "test_threads::fresh_" + std::to_string(round) + "_" + std::to_string(i);
      OperatorEntry& fresh = d.def(name + "(Tensor self) -> Tensor");
      d.register_kernel(fresh, DispatchKey::CPU, make_kernel<&plus_one>("plus_one"));
      if (d.find(name) != &fresh) wrong.fetch_add(1);
    }
    stop = true;
  });
  run_threads(kThreads - 1, [&](int t) {
    Tensor x = filled({3}, static_cast<float>(t));
    int n = 0;
    while (!stop || n < 100) {
      Tensor r = call_op<Tensor, const Tensor&>(op, x);
      if (at(r, 2) != t + 1.0f) wrong.fetch_add(1);
      Stack s{IValue(x)};
      call_boxed(op, s);
      if (at(s.back().to_tensor(), 0) != t + 1.0f) wrong.fetch_add(1);
      if (at(add(x, x), 1) != 2.0f * t) wrong.fetch_add(1);
      ++n;
    }
  });
  registrar.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(Threads, AllocatorBlocksMoveBetweenThreads) {
  // Sizes across the per-thread small lists (<= 4 KiB), glibc's range and the
  // shared mapped-block cache (>= 64 KiB); half of the blocks are freed on
  // another thread than the one that made them.
  const std::vector<int64_t> sizes = {1, 16, 100, 1000, 5000, 20000, 70000, 300000};
  std::mutex mu;
  std::vector<Tensor> handoff;
  std::atomic<int> wrong{0};
  run_threads(kThreads, [&](int t) {
    for (int it = 0; it < 300; ++it) {
      int64_t n = sizes[(it + t) % sizes.size()];
      Tensor a = filled({n}, static_cast<float>(t * 1000 + it));
      if (at(a, n - 1) != t * 1000 + it) wrong.fetch_add(1);
      Tensor taken;
      {
        std::lock_guard<std::mutex> g(mu);
        if (it % 2) {
          handoff.push_back(a);
        } else if (!handoff.empty()) {
          taken = std::move(handoff.back());
          handoff.pop_back();
        }
      }
      if (taken.defined()) {
        float v = at(taken, 0);
        if (at(taken, taken.numel() - 1) != v) wrong.fetch_add(1);
      }
      if (it % 50 == 0) empty_cpu_cache();
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(Threads, IndependentBackwardPasses) {
  std::atomic<int> wrong{0};
  run_threads(kThreads, [&](int t) {
    for (int it = 0; it < 50; ++it) {
      Tensor x = filled({4}, static_cast<float>(t + it));
      ag::set_requires_grad(x, true);
      Tensor loss = sum(mul(x, x));
      ag::run_backward({loss}, {}, {}, {});
      Tensor g = ag::grad(x);
      if (!g.defined() || at(g, 3) != 2.0f * (t + it)) wrong.fetch_add(1);
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(Threads, BackwardPassesAccumulateIntoASharedLeaf) {
  Tensor w = filled({8}, 1.0f);
  ag::set_requires_grad(w, true);
  constexpr int kIters = 50;
  run_threads(kThreads, [&](int t) {
    Tensor c = filled({8}, static_cast<float>(t + 1));
    for (int it = 0; it < kIters; ++it) {
      Tensor loss = sum(mul(w, c));
      ag::run_backward({loss}, {}, {}, {});
    }
  });
  // d/dw of sum(w * c_t) is c_t: the sum over threads and iterations, exact in float.
  float expected = 0;
  for (int t = 0; t < kThreads; ++t) expected += kIters * static_cast<float>(t + 1);
  Tensor g = ag::grad(w);
  ASSERT_TRUE(g.defined());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(at(g, i), expected);
}

TEST_F(Threads, GeneratorsSeedAndDraw) {
  // Each thread reseeds its own generator and must see the same stream every
  // time; all of them also draw from the default generator meanwhile.
  Tensor ref;
  {
    ensure_generator(7000);
    GeneratorGuard(int64_t(7000))->manual_seed(42);
    ref = rand(std::vector<int64_t>{64}, int64_t(7000));
  }
  std::atomic<int> wrong{0};
  run_threads(kThreads, [&](int t) {
    int64_t id = 7001 + t;
    ensure_generator(id);
    for (int it = 0; it < 50; ++it) {
      GeneratorGuard(id)->manual_seed(42);
      Tensor r = rand(std::vector<int64_t>{64}, id);
      if (std::memcmp(r.data_ptr(), ref.data_ptr(), 64 * sizeof(float)) != 0) wrong.fetch_add(1);
      Tensor d = randn(std::vector<int64_t>{16});
      if (it % 10 == 0) GeneratorGuard(std::nullopt)->manual_seed(static_cast<uint64_t>(it));
      (void)d;
    }
    drop_generator(id);
  });
  drop_generator(7000);
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(Threads, ProfilerRecordsEveryThread) {
  Tensor a = filled({3}, 1.0f);
  prof::ProfilerConfig cfg;
  cfg.all_threads = true;
  auto s = prof::start(cfg);
  std::mutex mu;
  std::set<int64_t> tids;
  run_threads(kThreads, [&](int) {
    for (int i = 0; i < 20; ++i) neg(a);
    std::lock_guard<std::mutex> g(mu);
    tids.insert(prof::current_thread_id());
  });
  neg(a);
  prof::stop(s);
  std::map<int64_t, int> negs;
  for (auto& [tid, evs] : s->take_events())
    for (auto& e : evs)
      if (e.name == "strata::neg") ++negs[e.thread_id];
  for (int64_t tid : tids) EXPECT_EQ(negs[tid], 20) << "thread " << tid;
  EXPECT_EQ(negs[prof::current_thread_id()], 1);
  // After the stop, nothing records any more, and a new session can start.
  std::thread([&] {
    neg(a);
    EXPECT_FALSE(prof::is_recording());
  }).join();
  auto s2 = prof::start(cfg);
  prof::stop(s2);
}
