// Note [Counter-based random numbers]
// Every random op draws from Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC'11): a keyed bijection of a 128-bit counter.
// A generator's state is just (seed, offset). An op that needs B blocks of
// 128 random bits reserves counters [offset, offset + B) and advances offset by
// B; element i of its output reads block i / V (V values per block, see
// random_values_per_block) with key = seed. So what element i gets depends only
// on (seed, offset, i): results are identical for any thread count and any
// chunking of the work.
//
// Generators are identified by an int64 id so that ops can take one through
// the dispatcher as `int? generator=None` (None or 0: the default generator).
// Other ids are created by set_generator_state (Python's strata.Generator
// allocates ids and calls _set_rng_state) and released by drop_generator.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dtype.h"

namespace strata {

namespace philox {
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

struct Block {
  uint32_t v[4];
};

// Philox4x32 with 10 rounds: counter c, key k.
STRATA_ALWAYS_INLINE constexpr Block philox4x32_10(Block c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    uint64_t p0 = static_cast<uint64_t>(kMul0) * c.v[0];
    uint64_t p1 = static_cast<uint64_t>(kMul1) * c.v[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = Block{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
  }
  return c;
}

// The block an op reads for its block index `i` (counter = offset + i).
STRATA_ALWAYS_INLINE constexpr Block block_at(uint64_t seed, uint64_t offset, uint64_t i) {
  uint64_t ctr = offset + i;
  return philox4x32_10(Block{{static_cast<uint32_t>(ctr), static_cast<uint32_t>(ctr >> 32), 0u, 0u}},
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform [0, 1) with as many bits as the target's mantissa holds, so that
// rounding to the output type can never produce 1.
STRATA_ALWAYS_INLINE constexpr float u32_to_unit_float(uint32_t x) { return (x >> 8) * 0x1.0p-24f; }
STRATA_ALWAYS_INLINE constexpr float u32_to_unit_half(uint32_t x) { return (x >> 21) * 0x1.0p-11f; }
STRATA_ALWAYS_INLINE constexpr float u32_to_unit_bf16(uint32_t x) { return (x >> 24) * 0x1.0p-8f; }
STRATA_ALWAYS_INLINE constexpr double u64_to_unit_double(uint64_t x) { return (x >> 11) * 0x1.0p-53; }
STRATA_ALWAYS_INLINE constexpr uint64_t join64(uint32_t lo, uint32_t hi) {
  return static_cast<uint64_t>(lo) | (static_cast<uint64_t>(hi) << 32);
}
}  // namespace philox

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// torch's default CPU seed, so a fresh process starts from a documented state.
constexpr uint64_t kDefaultSeed = 67280421310721ull;

// Reserves `nblocks` counters of generator `id` (nullopt/0: default) and
// returns the state to generate from. Thread-safe. Throws if id is unknown.
GeneratorState reserve_random_blocks(std::optional<int64_t> id, uint64_t nblocks);
GeneratorState generator_state(std::optional<int64_t> id);
// Creates generator `id` when it does not exist yet.
void set_generator_state(std::optional<int64_t> id, GeneratorState s);
void drop_generator(int64_t id);

// What a random op produces per element, which fixes how many values one
// 128-bit block yields (see Note [Counter-based random numbers]).
enum class RandomKind : int8_t { Uniform, Normal, Bernoulli, Exponential, IntRange };

// 64-bit outputs (double, or integer ranges above 2^32) use two words per
// value; everything else one.
constexpr int random_values_per_block(RandomKind kind, ScalarType dtype, uint64_t range = 0) {
  if (kind == RandomKind::IntRange) return (range == 0 || range > (uint64_t(1) << 32)) ? 2 : 4;
  return dtype == ScalarType::Float64 ? 2 : 4;
}
constexpr uint64_t random_blocks_for(int64_t numel, int per_block) {
  return (static_cast<uint64_t>(numel) + per_block - 1) / per_block;
}

}  // namespace strata
