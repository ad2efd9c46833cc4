// The mt19937 generator and the random ops built on it (see Note [CPU random
// streams] in core/generator.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backends/cpu/parallel.h"
#include "core/generator.h"
#include "ops/ops.h"

using namespace strata;

namespace {
// Restores the default generator after a test.
struct StateGuard {
  std::vector<uint8_t> saved = std::vector<uint8_t>(CPUGenerator::kStateBytes);
  StateGuard() { GeneratorGuard(std::nullopt)->get_state(saved.data()); }
  ~StateGuard() { GeneratorGuard(std::nullopt)->set_state(saved.data()); }
};
void seed_default(uint64_t s) { GeneratorGuard(std::nullopt)->manual_seed(s); }
}  // namespace

// The standard library's mt19937 is an independent implementation of the same
// engine; the C++ standard also fixes its 10000th output for the default seed.
TEST(MT19937, MatchesStandardEngine) {
  MT19937 a(5489);
  std::mt19937 b(5489);
  for (int i = 0; i < 9999; ++i) ASSERT_EQ(a(), b()) << i;
  EXPECT_EQ(a(), 4123659995u);
  EXPECT_EQ(b(), 4123659995u);
  // Bulk fills continue the same stream across regenerations.
  std::vector<uint32_t> bulk(3000);
  a.fill(bulk.data(), 1000);
  a.fill(bulk.data() + 1000, 2000);
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(bulk[i], b()) << i;
  // Seeds use their low 32 bits; the full seed is kept as the initial seed.
  MT19937 c((uint64_t(7) << 32) | 11);
  std::mt19937 d(11);
  EXPECT_EQ(c(), d());
  EXPECT_EQ(c.seed, (uint64_t(7) << 32) | 11);
}

TEST(MT19937, StateRoundTripContinuesStream) {
  CPUGenerator g;
  g.manual_seed(77);
  for (int i = 0; i < 700; ++i) g.random();
  g.next_double_normal = 0.25;
  std::vector<uint8_t> st(CPUGenerator::kStateBytes);
  g.get_state(st.data());
  CPUGenerator h;
  h.set_state(st.data());
  ASSERT_TRUE(h.next_double_normal.has_value());
  EXPECT_EQ(*h.next_double_normal, 0.25);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(g.random(), h.random());
  // A corrupted position is refused and leaves the generator as it was.
  std::vector<uint8_t> bad = st;
  int32_t left = 0;
  std::memcpy(bad.data() + 8, &left, 4);
  EXPECT_THROW(h.set_state(bad.data()), Error);
  EXPECT_EQ(g.random(), h.random());
}

TEST(Random, RandTakesLow24BitsOfEachDraw) {
  StateGuard sg;
  seed_default(42);
  Tensor t = rand(std::vector<int64_t>{10}, std::nullopt, ScalarType::Float32);
  std::mt19937 ref(42);
  const float* p = t.data_ptr<float>();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p[i], static_cast<float>(ref() & 0xffffff) * 0x1.0p-24f) << i;
}

TEST(Random, IndependentOfThreadCount) {
  StateGuard sg;
  int saved = get_num_threads();
  std::vector<int64_t> shape{300001};
  auto draw = [&](int threads) {
    set_num_threads(threads);
    seed_default(123);
    return std::make_tuple(randn(shape, std::nullopt, ScalarType::Float32), rand(shape, std::nullopt, ScalarType::Float64),
                           randint(-5, 1000, shape));
  };
  auto [a1, b1, c1] = draw(1);
  auto [a2, b2, c2] = draw(2);
  set_num_threads(saved);
  EXPECT_EQ(0, std::memcmp(a1.data_ptr(), a2.data_ptr(), a1.numel() * 4));
  EXPECT_EQ(0, std::memcmp(b1.data_ptr(), b2.data_ptr(), b1.numel() * 8));
  EXPECT_EQ(0, std::memcmp(c1.data_ptr(), c2.data_ptr(), c1.numel() * 8));
}

TEST(Random, SeparateGeneratorsDoNotInterfere) {
  ensure_generator(9001);
  GeneratorGuard(int64_t(9001))->manual_seed(5);
  Tensor a = rand(std::vector<int64_t>{8}, int64_t(9001));
  rand(std::vector<int64_t>{100});  // draws from the default generator only
  GeneratorGuard(int64_t(9001))->manual_seed(5);
  Tensor b = rand(std::vector<int64_t>{8}, int64_t(9001));
  EXPECT_EQ(0, std::memcmp(a.data_ptr(), b.data_ptr(), 8 * 4));
  drop_generator(9001);
  EXPECT_THROW(rand(std::vector<int64_t>{1}, int64_t(9001)), ValueError);
}

TEST(Random, RandpermIsPermutationAndRandintInRange) {
  Tensor p = randperm(1000);
  std::vector<int64_t> v(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + 1000);
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(v[i], i);
  Tensor r = randint(-3, 4, std::vector<int64_t>{10000}, std::nullopt, ScalarType::Int8);
  const int8_t* q = r.data_ptr<int8_t>();
  bool seen[7] = {};
  for (int i = 0; i < 10000; ++i) {
    ASSERT_GE(q[i], -3);
    ASSERT_LT(q[i], 4);
    seen[q[i] + 3] = true;
  }
  for (bool s : seen) EXPECT_TRUE(s);
}

TEST(Random, MetaAndEmptyConsumeNothing) {
  StateGuard sg;
  seed_default(3);
  Tensor m = randn(std::vector<int64_t>{4, 5}, std::nullopt, std::nullopt, Device(DeviceType::Meta));
  EXPECT_TRUE(m.device().is_meta());
  EXPECT_EQ(m.numel(), 20);
  rand(std::vector<int64_t>{0, 3});
  std::mt19937 ref(3);
  EXPECT_EQ(rand(std::vector<int64_t>{1}).data_ptr<float>()[0], static_cast<float>(ref() & 0xffffff) * 0x1.0p-24f);
}

TEST(Creation, FactoriesOnCpuAndMeta) {
  Tensor e = eye(2, 3);
  const float* p = e.data_ptr<float>();
  float want[] = {1, 0, 0, 0, 1, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p[i], want[i]);
  Tensor a = arange(Scalar(int64_t(10)), Scalar(int64_t(0)), Scalar(int64_t(-3)));
  ASSERT_EQ(a.numel(), 4);
  EXPECT_EQ(a.dtype(), ScalarType::Int64);
  EXPECT_EQ(a.data_ptr<int64_t>()[3], 1);
  EXPECT_THROW(arange(Scalar(0), Scalar(10), Scalar(0)), Error);
  Tensor m = full(std::vector<int64_t>{2, 2}, Scalar(true), std::nullopt, Device(DeviceType::Meta));
  EXPECT_EQ(m.dtype(), ScalarType::Bool);
  EXPECT_TRUE(m.device().is_meta());
  Tensor l = linspace(Scalar(-3), Scalar(7), 5, ScalarType::Int32);
  int32_t wl[] = {-3, 0, 2, 4, 7};  // torch.linspace(-3, 7, 5, dtype=torch.int32)
  for (int i = 0; i < 5; ++i) EXPECT_EQ(l.data_ptr<int32_t>()[i], wl[i]);
}
