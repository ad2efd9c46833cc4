// The profiler layer (a boxed fallback for DispatchKey::Profiler) and
// RecordScope: nothing recorded while off, nesting, shapes, threads, errors.
#include <gtest/gtest.h>

#include <thread>

#include "ops/ops.h"
#include "profiler/hidden_copy.h"
#include "profiler/profiler.h"

using namespace strata;
namespace prof = strata::profiler;

namespace {

Tensor filled(std::vector<int64_t> shape, double v) {
  Tensor t = empty_tensor(shape, ScalarType::Float32, Device());
  fill_(t, v);
  return t;
}

std::vector<prof::Event> all_events(const std::shared_ptr<prof::Session>& s) {
  std::vector<prof::Event> out;
  for (auto& [tid, evs] : s->take_events())
    for (auto& e : evs) out.push_back(std::move(e));
  return out;
}

const prof::Event* find(const std::vector<prof::Event>& evs, std::string_view name) {
  for (auto& e : evs)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

TEST(Profiler, FallbackIsRegisteredAndOffByDefault) {
  EXPECT_EQ(Dispatcher::get().fallback(DispatchKey::Profiler).debug_name, "profiler");
  EXPECT_FALSE(prof::is_recording());
  EXPECT_FALSE(tls_local_dispatch_key_set().included.has(DispatchKey::Profiler));
  // Every op's table routes the Profiler key to the fallback (not a fallthrough).
  EXPECT_FALSE(Dispatcher::get().find("add")->fallthrough_keys().has(DispatchKey::Profiler));
}

TEST(Profiler, RecordsOpsWithNestingAndStopsCleanly) {
  Tensor a = filled({3}, 1.0), b = filled({4}, 2.0);
  auto s = prof::start({});
  EXPECT_TRUE(prof::is_recording());
  EXPECT_TRUE(tls_local_dispatch_key_set().included.has(DispatchKey::Profiler));
  Tensor o = outer(a, b);  // composite: calls mul from inside its kernel
  prof::stop(s);
  EXPECT_FALSE(prof::is_recording());
  EXPECT_FALSE(tls_local_dispatch_key_set().included.has(DispatchKey::Profiler));
  auto evs = all_events(s);
  const prof::Event* eo = find(evs, "strata::outer");
  const prof::Event* em = find(evs, "strata::mul");
  ASSERT_TRUE(eo && em);
  EXPECT_EQ(eo->depth, 0);
  EXPECT_EQ(eo->parent, -1);
  EXPECT_EQ(em->depth, 1);
  EXPECT_EQ(&evs[em->parent], eo);
  EXPECT_LE(eo->start_ns, em->start_ns);
  EXPECT_LE(em->end_ns, eo->end_ns);
  EXPECT_EQ(eo->category, "cpu_op");
  EXPECT_EQ(eo->thread_id, prof::current_thread_id());
  EXPECT_TRUE(eo->input_shapes.empty());  // record_shapes off
  EXPECT_FLOAT_EQ(o.data_ptr<float>()[0], 2.0f);
}

TEST(Profiler, OffPathRecordsNothing) {
  Tensor a = filled({3}, 1.0);
  auto s = prof::start({});
  prof::stop(s);
  add(a, a);  // after stop
  { prof::RecordScope r("after", "python"); }
  EXPECT_TRUE(all_events(s).empty());
}

TEST(Profiler, RecordShapesAndDtypes) {
  Tensor a = filled({2, 3}, 1.0);
  prof::ProfilerConfig c;
  c.record_shapes = true;
  c.profile_memory = true;
  auto s = prof::start(c);
  add(a, a, Scalar(2.0));
  prof::stop(s);
  auto evs = all_events(s);
  const prof::Event* e = find(evs, "strata::add");
  ASSERT_TRUE(e);
  ASSERT_EQ(e->input_shapes.size(), 4u);  // self, other, alpha, out
  EXPECT_EQ(e->input_shapes[0], (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(e->input_dtypes[0], "float32");
  EXPECT_EQ(e->input_dtypes[2], "Scalar");
  EXPECT_EQ(e->input_dtypes[3], "");
  EXPECT_GE(e->num_allocs, 1);
  EXPECT_GE(e->alloc_bytes, 6 * 4);
}

TEST(Profiler, RecordScopeNestsOpsAndIsFreeWhenOff) {
  Tensor a = filled({3}, 1.0);
  { prof::RecordScope off("MmBackward0", "autograd"); }  // off: nothing to do, no crash
  auto s = prof::start({});
  {
    prof::RecordScope r("MmBackward0", "autograd");
    neg(a);
  }
  prof::stop(s);
  auto evs = all_events(s);
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].name, "MmBackward0");
  EXPECT_EQ(evs[0].category, "autograd");
  EXPECT_EQ(evs[1].name, "strata::neg");
  EXPECT_EQ(evs[1].parent, 0);
  EXPECT_EQ(evs[1].depth, 1);
  EXPECT_LE(evs[1].end_ns, evs[0].end_ns);
}

TEST(Profiler, ErrorsCloseTheirRange) {
  Tensor a = filled({3}, 1.0), b = filled({4}, 1.0);
  auto s = prof::start({});
  EXPECT_THROW(add(a, b), Error);
  neg(a);
  prof::stop(s);
  auto evs = all_events(s);
  const prof::Event* e = find(evs, "strata::add");
  const prof::Event* n = find(evs, "strata::neg");
  ASSERT_TRUE(e && n);
  EXPECT_GE(e->end_ns, e->start_ns);
  EXPECT_EQ(n->depth, 0);  // the failed call did not leave a range open
}

TEST(Profiler, OtherThreadsRecordOnlyWhenJoined) {
  Tensor a = filled({3}, 1.0);
  auto s = prof::start({});
  int64_t main_tid = prof::current_thread_id(), worker_tid = 0;
  std::thread([&] {
    EXPECT_FALSE(prof::is_recording());
    neg(a);  // not profiled: this thread has its own (empty) key set
    { prof::RecordScope r("not recorded", "kernel"); }
    prof::ThreadStateGuard g(s);
    worker_tid = prof::current_thread_id();
    prof::RecordScope r("worker", "autograd");
    abs(a);
  }).join();
  neg(a);
  prof::stop(s);
  auto evs = all_events(s);
  ASSERT_EQ(evs.size(), 3u);
  int main_count = 0, worker_count = 0;
  for (auto& e : evs) {
    if (e.thread_id == main_tid) {
      ++main_count;
      EXPECT_EQ(e.name, "strata::neg");
    }
    if (e.thread_id == worker_tid) ++worker_count;
  }
  EXPECT_EQ(main_count, 1);
  EXPECT_EQ(worker_count, 2);
  EXPECT_NE(main_tid, worker_tid);
}

TEST(Profiler, NestedSessionOnOneThreadIsAnError) {
  auto s = prof::start({});
  EXPECT_THROW(prof::start({}), Error);
  prof::stop(s);
}

namespace {
std::vector<std::string> g_messages;
void capture(const std::string& m) { g_messages.push_back(m); }
}  // namespace

TEST(Profiler, HiddenCopyReportNamesTheOp) {
  prof::set_hidden_copy_handler(&capture);
  g_messages.clear();
  Tensor x = filled({4, 3, 5}, 1.0);
  Tensor xt = transpose(x, 0, 1);  // (3, 4, 5), batch rows cannot be folded
  Tensor w = filled({5, 2}, 1.0);
  matmul(xt, w);
  EXPECT_TRUE(g_messages.empty());  // off by default
  prof::set_warn_hidden_copy(true);
  matmul(xt, w);
  matmul(contiguous(xt), w);  // contiguous input: no copy, no report
  prof::set_warn_hidden_copy(false);
  prof::set_hidden_copy_handler(nullptr);
  ASSERT_EQ(g_messages.size(), 1u);
  EXPECT_NE(g_messages[0].find("matmul"), std::string::npos);
  EXPECT_NE(g_messages[0].find("[3, 4, 5]"), std::string::npos);
  EXPECT_FALSE(tls_local_dispatch_key_set().included.has(DispatchKey::Profiler));
}
