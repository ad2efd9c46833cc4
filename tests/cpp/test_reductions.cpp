#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/shape.h"
#include "ops/ops.h"

using namespace strata;

namespace {
Tensor iota_tensor(std::vector<int64_t> shape, ScalarType dt = ScalarType::Float32) {
  Tensor t = empty_tensor(shape, dt, Device());
  visit_dtype(dt, [&]<typename T>() {
    for (int64_t i = 0; i < t.numel(); ++i) t.data_ptr<T>()[i] = static_cast<T>(static_cast<float>(i));
  });
  return t;
}
}  // namespace

TEST(Reductions, SumRowsColumnsAndAll) {
  Tensor a = iota_tensor({3, 4});  // 0..11
  Tensor rows = sum(a, std::vector<int64_t>{1});
  ASSERT_EQ(rows.dim(), 1);
  EXPECT_FLOAT_EQ(rows.data_ptr<float>()[0], 6.f);
  EXPECT_FLOAT_EQ(rows.data_ptr<float>()[2], 38.f);
  Tensor cols = sum(a, std::vector<int64_t>{0}, true);
  ASSERT_EQ(cols.dim(), 2);
  EXPECT_EQ(cols.size(0), 1);
  EXPECT_FLOAT_EQ(cols.data_ptr<float>()[3], 3.f + 7.f + 11.f);
  EXPECT_FLOAT_EQ(sum(a).item().to_double(), 66.0);
  EXPECT_FLOAT_EQ(mean(a).item().to_double(), 5.5);
}

TEST(Reductions, IntegerSumIsInt64AndMeanOfIntThrows) {
  Tensor a = iota_tensor({5}, ScalarType::Int8);
  Tensor s = sum(a);
  EXPECT_EQ(s.dtype(), ScalarType::Int64);
  EXPECT_EQ(s.item().to_int(), 10);
  EXPECT_THROW(mean(a), Error);
}

TEST(Reductions, EmptyAndErrors) {
  Tensor e = empty_tensor(std::vector<int64_t>{0}, ScalarType::Float32, Device());
  EXPECT_EQ(sum(e).item().to_double(), 0.0);
  EXPECT_EQ(prod(e).item().to_double(), 1.0);
  EXPECT_TRUE(std::isnan(mean(e).item().to_double()));
  EXPECT_THROW(max(e), Error);
  Tensor a = iota_tensor({2, 3});
  EXPECT_THROW(sum(a, std::vector<int64_t>{2}), IndexError);
  EXPECT_THROW(sum(a, std::vector<int64_t>{0, 0}), Error);
}

TEST(Reductions, MaxDimArgmaxAndNaN) {
  Tensor a = iota_tensor({2, 3});
  a.data_ptr<float>()[4] = 10.f;  // row 1: 3, 10, 5
  auto [v, i] = max(a, 1);
  EXPECT_FLOAT_EQ(v.data_ptr<float>()[1], 10.f);
  EXPECT_EQ(i.data_ptr<int64_t>()[1], 1);
  EXPECT_EQ(argmax(a).item().to_int(), 4);
  a.data_ptr<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(amax(a).item().to_double()));
  EXPECT_EQ(argmin(a, int64_t(1)).data_ptr<int64_t>()[0], 0);
}

TEST(Reductions, SoftmaxRowsSumToOne) {
  Tensor a = iota_tensor({4, 100});
  Tensor s = softmax(a, 1);
  for (int r = 0; r < 4; ++r) {
    double acc = 0;
    for (int c = 0; c < 100; ++c) acc += s.data_ptr<float>()[r * 100 + c];
    EXPECT_NEAR(acc, 1.0, 1e-5);
  }
  Tensor l = log_softmax(a, 0);
  EXPECT_NEAR(std::exp(l.data_ptr<float>()[0]) + std::exp(l.data_ptr<float>()[100]) +
                  std::exp(l.data_ptr<float>()[200]) + std::exp(l.data_ptr<float>()[300]),
              1.0, 1e-5);
}

TEST(Reductions, CumsumAndVar) {
  Tensor a = iota_tensor({2, 3});
  Tensor c = cumsum(a, 1);
  EXPECT_FLOAT_EQ(c.data_ptr<float>()[2], 3.f);
  EXPECT_FLOAT_EQ(c.data_ptr<float>()[5], 12.f);
  Tensor v = var(a, std::vector<int64_t>{1});
  EXPECT_FLOAT_EQ(v.data_ptr<float>()[0], 1.f);
}

TEST(Reductions, MetaShapes) {
  Tensor m = empty_tensor(std::vector<int64_t>{3, 4, 5}, ScalarType::Float16, Device(DeviceType::Meta));
  Tensor s = sum(m, std::vector<int64_t>{0, 2}, true);
  EXPECT_EQ(s.device().type, DeviceType::Meta);
  EXPECT_EQ(s.dim(), 3);
  EXPECT_EQ(s.size(1), 4);
  auto [v, i] = min(m, -1);
  EXPECT_EQ(i.dtype(), ScalarType::Int64);
  EXPECT_EQ(v.dim(), 2);
  EXPECT_EQ(softmax(m, 1).dtype(), ScalarType::Float16);
}
