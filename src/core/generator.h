// Note [CPU random streams]
// CPU random ops reproduce torch's CPU generator bit for bit: the same
// manual_seed gives the same numbers, and a state taken from torch
// (torch.get_rng_state()) can be set here and continue identically, and back.
//
// The engine is the 32-bit Mersenne Twister mt19937 (Matsumoto & Nishimura,
// 1998), seeded from the low 32 bits of the seed with the standard
// initialisation. A 64-bit draw is two 32-bit draws, the first one the high
// word. The ops' transformations of these draws (which bits make a uniform,
// Box-Muller variants, modulo for integer ranges, the shuffle of randperm)
// live next to the kernels in backends/cpu/kernels/random_kernels.cpp.
//
// mt19937 is sequential, so the raw stream of an op is drawn serially, in the
// order torch visits the output; only the per-element transformations run in
// parallel, which makes results independent of the thread count.
//
// A generator also caches the second value of its scalar Box-Muller normal,
// as torch does: the state is the engine plus that cache. Its serialized form
// is torch's 5056-byte layout (see CPUGenerator::kStateBytes).
//
// Generators are identified by an int64 id so that ops can take one through
// the dispatcher as `int? generator=None` (None or 0: the default generator).
// Other ids are created by set_generator_state (Python's strata.Generator
// allocates ids and calls _set_rng_state) and released by drop_generator.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

namespace strata {

// torch's default CPU seed, so a fresh process starts from a documented state.
constexpr uint64_t kDefaultSeed = 67280421310721ull;

class MT19937 {
 public:
  static constexpr int kN = 624, kM = 397;

  explicit MT19937(uint64_t seed = kDefaultSeed) { reseed(seed); }
  void reseed(uint64_t seed);

  uint32_t operator()() {
    if (left == 1) regenerate();
    --left;
    return temper(state[next++]);
  }
  // n successive draws into out; the same words as n calls, much faster.
  void fill(uint32_t* out, int64_t n);

  // The raw state, in the form torch serializes it: `left` counts down to the
  // next regeneration (1: the next draw regenerates), `next` indexes state.
  uint64_t seed = kDefaultSeed;
  int32_t left = 1;
  bool seeded = true;
  uint32_t next = 0;
  uint32_t state[kN];

 private:
  static uint32_t temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  }
  // The next kN words of the recurrence; left = kN + 1 and next = 0 after.
  void regenerate();
};

struct CPUGenerator {
  MT19937 engine;
  std::optional<double> next_double_normal;  // cached second Box-Muller sample
  std::optional<float> next_float_normal;    // kept for the state layout

  uint32_t random() { return engine(); }
  uint64_t random64() {
    uint64_t hi = engine();
    return (hi << 32) | engine();
  }
  void manual_seed(uint64_t s) {
    engine.reseed(s);
    next_double_normal.reset();
    next_float_normal.reset();
  }

  // torch's CPU state: initial seed (u64), left (i32), seeded (i32), next
  // (u64), the 624 words as u64, normal_x/normal_y/normal_rho (f64; the cached
  // double normal is normal_y), normal_is_valid (i32, 4 bytes padding), the
  // cached float normal (f32) and its valid flag (1 byte, 3 padding).
  static constexpr int64_t kStateBytes = 5056;
  void get_state(uint8_t* out) const;
  // Throws on a malformed state; the generator is unchanged then.
  void set_state(const uint8_t* in);
};

// Generator `id` (nullopt/0: the default one), locked for the guard's lifetime.
// Throws if id is unknown. Random ops hold it while they draw.
class GeneratorGuard {
 public:
  explicit GeneratorGuard(std::optional<int64_t> id);
  CPUGenerator& operator*() const { return *gen_; }
  CPUGenerator* operator->() const { return gen_; }

 private:
  std::unique_lock<std::mutex> lock_;
  CPUGenerator* gen_;
};

// Creates generator `id` (with the default seed) when it does not exist yet.
void ensure_generator(int64_t id);
void drop_generator(int64_t id);

}  // namespace strata
