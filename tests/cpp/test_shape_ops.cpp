#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/shape.h"
#include "ops/ops.h"

using namespace strata;

namespace {

Tensor make_f32(std::vector<int64_t> sizes, std::vector<float> vals) {
  Tensor t = empty_tensor(sizes, ScalarType::Float32, Device());
  for (size_t i = 0; i < vals.size(); ++i) t.data_ptr<float>()[i] = vals[i];
  return t;
}
Tensor make_i64(std::vector<int64_t> sizes, std::vector<int64_t> vals) {
  Tensor t = empty_tensor(sizes, ScalarType::Int64, Device());
  for (size_t i = 0; i < vals.size(); ++i) t.data_ptr<int64_t>()[i] = vals[i];
  return t;
}
std::vector<float> f32_values(const Tensor& t) {
  Tensor c = contiguous(t);
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}
std::vector<int64_t> i64_values(const Tensor& t) {
  Tensor c = contiguous(t);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

}  // namespace

TEST(ShapeOps, CatSkipsLegacyEmptyAndPromotes) {
  Tensor a = make_f32({2, 2}, {1, 2, 3, 4});
  Tensor b = make_i64({2, 1}, {5, 6});
  Tensor e = empty_tensor(std::vector<int64_t>{0}, ScalarType::Float32, Device());
  std::vector<Tensor> ts{a, e, b};
  Tensor c = cat(ts, -1);
  EXPECT_EQ(c.dtype(), ScalarType::Float32);
  EXPECT_EQ(f32_values(c), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  std::vector<Tensor> bad{a, make_f32({3, 1}, {0, 0, 0})};
  EXPECT_THROW(cat(bad, 1), Error);
}

TEST(ShapeOps, SplitReturnsViews) {
  Tensor a = make_f32({5}, {0, 1, 2, 3, 4});
  auto parts = split(a, 2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].numel(), 1);
  EXPECT_EQ(parts[1].impl()->storage().get(), a.impl()->storage().get());
  EXPECT_EQ(f32_values(parts[1]), (std::vector<float>{2, 3}));
  auto ch = chunk(a, 2);
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_EQ(ch[0].numel(), 3);
}

TEST(ShapeOps, FlipRollRepeat) {
  Tensor a = make_f32({2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(f32_values(flip(a, std::vector<int64_t>{0, 1})), (std::vector<float>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(f32_values(roll(a, std::vector<int64_t>{1})), (std::vector<float>{5, 0, 1, 2, 3, 4}));
  EXPECT_EQ(f32_values(roll(a, std::vector<int64_t>{-1}, std::vector<int64_t>{1})),
            (std::vector<float>{1, 2, 0, 4, 5, 3}));
  Tensor r = repeat(make_f32({2}, {7, 8}), std::vector<int64_t>{2, 2});
  EXPECT_EQ(r.dim(), 2);
  EXPECT_EQ(f32_values(r), (std::vector<float>{7, 8, 7, 8, 7, 8, 7, 8}));
  EXPECT_THROW(flip(a, std::vector<int64_t>{3}), IndexError);
}

TEST(ShapeOps, GatherScatterAndBounds) {
  Tensor a = make_f32({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor idx = make_i64({2, 2}, {2, 0, 1, 1});
  EXPECT_EQ(f32_values(gather(a, 1, idx)), (std::vector<float>{2, 0, 4, 4}));
  Tensor bad = make_i64({1, 1}, {3});
  EXPECT_THROW(gather(a, 1, bad), IndexError);
  Tensor z = make_f32({3}, {0, 0, 0});
  Tensor dup = make_i64({4}, {1, 1, 2, 1});
  Tensor src = make_f32({4}, {1, 2, 3, 4});
  EXPECT_EQ(f32_values(scatter_add(z, 0, dup, src)), (std::vector<float>{0, 7, 3}));
  EXPECT_EQ(f32_values(scatter(z, 0, make_i64({1}, {2}), Scalar(9.0))), (std::vector<float>{0, 0, 9}));
  EXPECT_EQ(f32_values(index_add(z, 0, make_i64({2}, {0, 0}), make_f32({2}, {1, 2}), 2)),
            (std::vector<float>{6, 0, 0}));
  EXPECT_EQ(f32_values(index_select(a, 0, make_i64({1}, {1}))), (std::vector<float>{3, 4, 5}));
}

TEST(ShapeOps, SortIsStableWithNaNLast) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = make_f32({6}, {2, nan, 1, 2, -1, 1});
  auto [v, i] = sort(a);
  EXPECT_EQ(i64_values(i), (std::vector<int64_t>{4, 2, 5, 0, 3, 1}));
  EXPECT_TRUE(std::isnan(f32_values(v)[5]));
  auto [vd, id] = sort(a, 0, true);
  EXPECT_EQ(i64_values(id), (std::vector<int64_t>{1, 0, 3, 2, 5, 4}));
  auto [tv, ti] = topk(a, 2, 0, false);
  EXPECT_EQ(i64_values(ti), (std::vector<int64_t>{4, 2}));
  EXPECT_THROW(topk(a, 7), Error);
}

TEST(ShapeOps, NonzeroTrilAndMeta) {
  Tensor a = make_f32({2, 2}, {0, 1, 2, 0});
  EXPECT_EQ(i64_values(nonzero(a)), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(f32_values(tril(make_f32({2, 2}, {1, 2, 3, 4}))), (std::vector<float>{1, 0, 3, 4}));
  EXPECT_EQ(f32_values(triu(make_f32({2, 2}, {1, 2, 3, 4}), 1)), (std::vector<float>{0, 2, 0, 0}));
  Tensor m = empty_tensor(std::vector<int64_t>{4, 5}, ScalarType::Float32, Device(DeviceType::Meta));
  auto [mv, mi] = sort(m, 0);
  EXPECT_EQ(mi.dtype(), ScalarType::Int64);
  EXPECT_EQ(mv.device().type, DeviceType::Meta);
  std::vector<Tensor> ms{m, m};
  EXPECT_EQ(stack(ms, 1).size(1), 2);
  EXPECT_THROW(nonzero(m), NotImplementedError);
}
