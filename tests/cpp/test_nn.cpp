// C++ API of strata.nn.functional: values against hand-written loops, the
// meta device and error types.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/ops.h"

using namespace strata;

namespace {

Tensor make(std::vector<int64_t> shape, std::vector<double> vals, ScalarType dt = ScalarType::Float32) {
  Tensor t = empty_tensor(shape, dt, Device());
  visit_dtype(dt, [&]<typename T>() {
    for (size_t i = 0; i < vals.size(); ++i) t.data_ptr<T>()[i] = static_cast<T>(vals[i]);
  });
  return t;
}

Tensor random(std::vector<int64_t> shape, unsigned seed, ScalarType dt = ScalarType::Float64) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(n);
  for (auto& x : v) x = u(g);
  return make(shape, v, dt);
}

double at(const Tensor& t, int64_t i) {
  return visit_dtype(t.dtype(), [&]<typename T>() { return static_cast<double>(t.data_ptr<T>()[i]); });
}

}  // namespace

TEST(NN, ReluAndInplace) {
  Tensor x = make({4}, {-1, 0, 2, NAN});
  Tensor y = relu(x);
  EXPECT_EQ(at(y, 0), 0);
  EXPECT_EQ(at(y, 2), 2);
  EXPECT_TRUE(std::isnan(at(y, 3)));
  relu_(x);
  EXPECT_EQ(at(x, 0), 0);
  Tensor g = gelu(make({1}, {1.0}, ScalarType::Float64));
  EXPECT_NEAR(at(g, 0), 0.5 * (1 + std::erf(1 / std::sqrt(2.0))), 1e-14);
  EXPECT_THROW(gelu(make({1}, {1.0}, ScalarType::Int64)), Error);
}

TEST(NN, LinearMatchesLoop) {
  Tensor x = random({2, 3, 5}, 1), w = random({4, 5}, 2), b = random({4}, 3);
  Tensor y = linear(x, w, b);
  ASSERT_EQ(y.dim(), 3);
  ASSERT_EQ(y.size(2), 4);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t o = 0; o < 4; ++o) {
      double acc = at(b, o);
      for (int64_t k = 0; k < 5; ++k) acc += at(x, r * 5 + k) * at(w, o * 5 + k);
      EXPECT_NEAR(at(y, r * 4 + o), acc, 1e-12);
    }
  EXPECT_THROW(linear(x, random({4, 6}, 4)), Error);
}

TEST(NN, CrossEntropyMatchesFormula) {
  Tensor x = random({3, 4}, 5);
  Tensor t = make({3}, {0, 3, 1}, ScalarType::Int64);
  Tensor l = cross_entropy(x, t, std::nullopt, "none");
  double total = 0;
  for (int64_t i = 0; i < 3; ++i) {
    double m = -1e300, s = 0;
    for (int64_t c = 0; c < 4; ++c) m = std::max(m, at(x, i * 4 + c));
    for (int64_t c = 0; c < 4; ++c) s += std::exp(at(x, i * 4 + c) - m);
    double want = -(at(x, i * 4 + static_cast<int64_t>(at(t, i))) - m - std::log(s));
    EXPECT_NEAR(at(l, i), want, 1e-12);
    total += want;
  }
  EXPECT_NEAR(at(cross_entropy(x, t), 0), total / 3, 1e-12);
  EXPECT_THROW(cross_entropy(x, make({3}, {0, 4, 1}, ScalarType::Int64)), IndexError);
}

TEST(NN, Conv2dMatchesLoop) {
  Tensor x = random({2, 4, 6, 5}, 6), w = random({6, 2, 3, 2}, 7), b = random({6}, 8);
  std::vector<int64_t> stride{2, 1}, pad{1, 0}, dil{1, 2};
  Tensor y = conv2d(x, w, b, stride, pad, dil, 2);
  const int64_t oh = (6 + 2 - 3) / 2 + 1, ow = (5 - 3) / 1 + 1;
  ASSERT_EQ(y.size(2), oh);
  ASSERT_EQ(y.size(3), ow);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t o = 0; o < 6; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = at(b, o);
          const int64_t g = o / 3;
          for (int64_t c = 0; c < 2; ++c)
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 2; ++kj) {
                int64_t ih = i * 2 - 1 + ki, iw = j + kj * 2;
                if (ih < 0 || ih >= 6 || iw < 0 || iw >= 5) continue;
                acc += at(x, ((n * 4 + g * 2 + c) * 6 + ih) * 5 + iw) * at(w, ((o * 2 + c) * 3 + ki) * 2 + kj);
              }
          EXPECT_NEAR(at(y, ((n * 6 + o) * oh + i) * ow + j), acc, 1e-12);
        }
  EXPECT_THROW(conv2d(random({1, 3, 6, 5}, 9), w), Error);
}

TEST(NN, PoolNormPadAttention) {
  Tensor x = make({1, 1, 2, 3}, {1, 5, 2, 4, 3, 6});
  auto [v, idx] = max_pool2d_with_indices(x, std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1});
  EXPECT_EQ(at(v, 0), 5);
  EXPECT_EQ(at(idx, 0), 1);
  EXPECT_EQ(at(v, 1), 6);
  EXPECT_EQ(at(idx, 1), 5);
  Tensor a = avg_pool2d(x, std::vector<int64_t>{2, 3});
  EXPECT_NEAR(at(a, 0), 21.0 / 6, 1e-6);
  Tensor ln = layer_norm(make({2, 2}, {1, 3, 5, 5}), std::vector<int64_t>{2});
  EXPECT_NEAR(at(ln, 0), -1, 1e-3);
  EXPECT_NEAR(at(ln, 2), 0, 1e-6);
  Tensor p = pad(make({1, 3}, {1, 2, 3}), std::vector<int64_t>{2, 1}, "reflect");
  ASSERT_EQ(p.size(1), 6);
  const double want[] = {3, 2, 1, 2, 3, 2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(at(p, i), want[i]);
  // One key: attention returns its value whatever the scores.
  Tensor q = random({2, 3, 4}, 10), k = random({2, 1, 4}, 11), val = random({2, 1, 5}, 12);
  Tensor o = scaled_dot_product_attention(q, k, val);
  for (int64_t bq = 0; bq < 2; ++bq)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t e = 0; e < 5; ++e) EXPECT_NEAR(at(o, (bq * 3 + i) * 5 + e), at(val, bq * 5 + e), 1e-12);
}

TEST(NN, MetaAndZeroSize) {
  Device meta(DeviceType::Meta);
  Tensor x = empty_tensor(std::vector<int64_t>{8, 3, 32, 32}, ScalarType::Float32, meta);
  Tensor w = empty_tensor(std::vector<int64_t>{16, 3, 3, 3}, ScalarType::Float32, meta);
  Tensor y = conv2d(x, w, std::nullopt, std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1});
  EXPECT_EQ(y.device().type, DeviceType::Meta);
  EXPECT_EQ(y.size(1), 16);
  EXPECT_EQ(y.size(3), 32);
  Tensor same = conv2d(x, w, std::nullopt, std::vector<int64_t>{1, 1}, std::string_view("same"));
  EXPECT_EQ(same.size(2), 32);
  Tensor m = max_pool2d(y, std::vector<int64_t>{2, 2});
  EXPECT_EQ(m.size(2), 16);
  Tensor e = empty_tensor(std::vector<int64_t>{0, 3}, ScalarType::Float32, Device());
  EXPECT_EQ(linear(e, random({4, 3}, 1, ScalarType::Float32)).size(0), 0);
  EXPECT_EQ(softplus(e).numel(), 0);
  Tensor ids = make({2}, {0, 7}, ScalarType::Int64);
  EXPECT_THROW(embedding(random({5, 2}, 2), ids), IndexError);
}
