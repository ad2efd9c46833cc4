// The Vmap layer from C++: batched tensor geometry and keys, levels in the
// thread-local key set, a rule (add), the per-entry fallback of an op without
// a rule and its one warning, and item() refusing a batched tensor.
#include <gtest/gtest.h>

#include "dispatch/dispatcher.h"
#include "ops/ops.h"
#include "vmap/vmap.h"

using namespace strata;

namespace {

Tensor iota(std::vector<int64_t> sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return reshape(arange(Scalar(n), ScalarType::Float32), sizes);
}

float at(const Tensor& t, std::vector<int64_t> idx) {
  int64_t off = t.storage_offset();
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.stride(static_cast<int64_t>(d));
  return static_cast<const float*>(t.impl()->storage()->data())[off];
}

struct LevelGuard {
  explicit LevelGuard(int64_t n) : level(vmap::push_level(n, vmap::Randomness::Error)) {}
  ~LevelGuard() { vmap::pop_level(); }
  int64_t level;
};

// Sum of a 1-d tensor's elements: an op with no batching rule.
Tensor rowsum_cpu(const Tensor& self) {
  Tensor out = empty_tensor({}, ScalarType::Float32, Device());
  float acc = 0;
  for (int64_t i = 0; i < self.size(0); ++i) acc += at(self, {i});
  *out.data_ptr<float>() = acc;
  return out;
}

}  // namespace

TEST(Vmap, BatchedGeometryAndKeys) {
  Tensor x = iota({2, 3, 4});
  Tensor b = vmap::make_batched(x, 1, 7);
  EXPECT_EQ(b.dim(), 2);
  EXPECT_EQ(b.size(0), 2);
  EXPECT_EQ(b.size(1), 4);
  EXPECT_EQ(b.stride(0), 12);
  EXPECT_TRUE(b.key_set().has(DispatchKey::Vmap));
  EXPECT_TRUE(b.device().is_cpu());
  auto* impl = vmap::maybe_batched(b);
  ASSERT_NE(impl, nullptr);
  EXPECT_EQ(impl->bdim(), 1);
  EXPECT_EQ(impl->level(), 7);
  EXPECT_TRUE(impl->value().is_same(x));
  EXPECT_EQ(vmap::maybe_batched(x), nullptr);
  EXPECT_THROW(vmap::make_batched(x, 3, 1), Error);
  EXPECT_THROW(vmap::make_batched(b, 0, 7), Error);  // a wrapper must have a higher level than its inside
  EXPECT_THROW(vmap::make_batched(iota({1}), 0, 1).item(), Error);
}

TEST(Vmap, LevelsToggleTheIncludedKey) {
  EXPECT_FALSE(tls_local_dispatch_key_set().included.has(DispatchKey::Vmap));
  {
    LevelGuard outer(2);
    EXPECT_TRUE(tls_local_dispatch_key_set().included.has(DispatchKey::Vmap));
    {
      LevelGuard inner(3);
      EXPECT_GT(inner.level, outer.level);
      EXPECT_EQ(vmap::active_levels().size(), 2u);
    }
    EXPECT_TRUE(tls_local_dispatch_key_set().included.has(DispatchKey::Vmap));
  }
  EXPECT_FALSE(tls_local_dispatch_key_set().included.has(DispatchKey::Vmap));
  // Outside vmap, ops on plain tensors give plain tensors.
  EXPECT_FALSE(add(iota({3}), iota({3})).key_set().has(DispatchKey::Vmap));
}

TEST(Vmap, AddRuleBroadcastsAgainstAnUnbatchedTensor) {
  LevelGuard g(3);
  Tensor x = iota({4, 3});  // batch at dim 1: entry e is column e
  Tensor y = iota({4});
  Tensor b = vmap::make_batched(x, 1, g.level);
  const int64_t before = vmap::slow_path_calls();
  Tensor r = add(b, y);
  EXPECT_EQ(vmap::slow_path_calls(), before);
  auto [p, bd] = vmap::unwrap_at(r, g.level);
  ASSERT_TRUE(bd.has_value());
  Tensor out = vmap::remove_batch_dim(r, g.level, 3, 0);  // [3, 4]
  ASSERT_EQ(out.size(0), 3);
  ASSERT_EQ(out.size(1), 4);
  for (int64_t e = 0; e < 3; ++e)
    for (int64_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(at(out, {e, i}), at(x, {i, e}) + at(y, {i}));
}

TEST(Vmap, FallbackLoopsOncePerEntryAndWarnsOnce) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_vmap::rowsum(Tensor self) -> Tensor");
  d.register_kernel(op, DispatchKey::CPU, make_kernel<&rowsum_cpu>("rowsum_cpu"));
  LevelGuard g(2);
  Tensor x = iota({2, 5});
  Tensor b = vmap::make_batched(x, 0, g.level);
  vmap::take_warnings();
  const int64_t before = vmap::slow_path_calls();
  Tensor r1 = call_op<Tensor, const Tensor&>(op, b);
  Tensor r2 = call_op<Tensor, const Tensor&>(op, b);
  EXPECT_EQ(vmap::slow_path_calls(), before + 2);
  auto w = vmap::take_warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("test_vmap::rowsum"), std::string::npos);
  Tensor out = vmap::remove_batch_dim(r2, g.level, 2, 0);
  ASSERT_EQ(out.dim(), 1);
  EXPECT_FLOAT_EQ(at(out, {0}), 0 + 1 + 2 + 3 + 4);
  EXPECT_FLOAT_EQ(at(out, {1}), 5 + 6 + 7 + 8 + 9);
}

TEST(Vmap, RandomOpInErrorModeRaises) {
  LevelGuard g(2);
  EXPECT_THROW(rand(std::vector<int64_t>{3}), Error);
}
