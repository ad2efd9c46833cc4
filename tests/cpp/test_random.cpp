// The Philox generator and the random ops built on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "backends/cpu/parallel.h"
#include "core/generator.h"
#include "ops/ops.h"

using namespace strata;

namespace {
philox::Block run(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  return philox::philox4x32_10(philox::Block{{c0, c1, c2, c3}}, k0, k1);
}
void expect_block(const philox::Block& b, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3) {
  EXPECT_EQ(b.v[0], a0);
  EXPECT_EQ(b.v[1], a1);
  EXPECT_EQ(b.v[2], a2);
  EXPECT_EQ(b.v[3], a3);
}
// Restores the default generator after a test.
struct StateGuard {
  GeneratorState saved = generator_state(std::nullopt);
  ~StateGuard() { set_generator_state(std::nullopt, saved); }
};
}  // namespace

// Known-answer vectors of Philox4x32-10 from the Random123 distribution
// (kat_vectors: counter, key -> output). The same three values come out of an
// independent Python transcription of the published round function
// (mulhilo by 0xD2511F53 / 0xCD9E8D57, Weyl key bumps 0x9E3779B9 / 0xBB67AE85).
TEST(Philox, KnownAnswers) {
  expect_block(run(0, 0, 0, 0, 0, 0), 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
  expect_block(run(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff), 0x408f276d, 0x41c83b0e,
               0xa20bc7c6, 0x6d5451fd);
  expect_block(run(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0), 0xd16cfe09, 0x94fdcceb,
               0x5001e420, 0x24126ea1);
  // The round function is constexpr: the first vector also holds at compile time.
  static_assert(philox::philox4x32_10(philox::Block{{0, 0, 0, 0}}, 0, 0).v[0] == 0x6627e8d5u);
}

TEST(Philox, CounterLayout) {
  // block i of an op = Philox(counter = offset + i as (lo, hi, 0, 0), key = seed as (lo, hi)).
  uint64_t seed = 0x0123456789abcdefull, off = 0xfffffffful;
  philox::Block b = philox::block_at(seed, off, 1);  // counter 2^32 carries into word 1
  philox::Block ref = run(0, 1, 0, 0, 0x89abcdef, 0x01234567);
  expect_block(b, ref.v[0], ref.v[1], ref.v[2], ref.v[3]);
}

TEST(Random, RandReadsOneWordPerFloat) {
  StateGuard g;
  set_generator_state(std::nullopt, GeneratorState{42, 7});
  Tensor t = rand(std::vector<int64_t>{10}, std::nullopt, ScalarType::Float32);
  const float* p = t.data_ptr<float>();
  for (int i = 0; i < 10; ++i) {
    philox::Block b = philox::block_at(42, 7, i / 4);
    EXPECT_EQ(p[i], static_cast<float>(b.v[i % 4] >> 8) * 0x1.0p-24f) << i;
  }
  // 10 floats use ceil(10 / 4) = 3 blocks.
  EXPECT_EQ(generator_state(std::nullopt).offset, 10u);
  EXPECT_EQ(generator_state(std::nullopt).seed, 42u);
}

TEST(Random, IndependentOfThreadCount) {
  StateGuard g;
  int saved = get_num_threads();
  std::vector<int64_t> shape{300001};
  auto draw = [&](int threads) {
    set_num_threads(threads);
    set_generator_state(std::nullopt, GeneratorState{123, 0});
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
  StateGuard g;
  set_generator_state(int64_t(9001), GeneratorState{5, 0});
  Tensor a = rand(std::vector<int64_t>{8}, int64_t(9001));
  rand(std::vector<int64_t>{100});  // draws from the default generator only
  set_generator_state(int64_t(9001), GeneratorState{5, 0});
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
  StateGuard g;
  GeneratorState before = generator_state(std::nullopt);
  Tensor m = randn(std::vector<int64_t>{4, 5}, std::nullopt, std::nullopt, Device(DeviceType::Meta));
  EXPECT_TRUE(m.device().is_meta());
  EXPECT_EQ(m.numel(), 20);
  rand(std::vector<int64_t>{0, 3});
  EXPECT_EQ(generator_state(std::nullopt).offset, before.offset);
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
