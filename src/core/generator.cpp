#include "core/generator.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "core/error.h"

namespace strata {

// ---- mt19937 ---------------------------------------------------------------

void MT19937::reseed(uint64_t s) {
  seed = s;
  seeded = true;
  state[0] = static_cast<uint32_t>(s);
  for (uint32_t i = 1; i < kN; ++i) state[i] = 1812433253u * (state[i - 1] ^ (state[i - 1] >> 30)) + i;
  left = 1;  // the first draw regenerates
  next = 0;
}

void MT19937::regenerate() {
  constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrix = 0x9908b0dfu;
  auto twist = [](uint32_t a, uint32_t b) {
    uint32_t y = (a & kUpper) | (b & kLower);
    return (y >> 1) ^ ((b & 1u) ? kMatrix : 0u);
  };
  int i = 0;
  for (; i < kN - kM; ++i) state[i] = state[i + kM] ^ twist(state[i], state[i + 1]);
  for (; i < kN - 1; ++i) state[i] = state[i + kM - kN] ^ twist(state[i], state[i + 1]);
  state[kN - 1] = state[kM - 1] ^ twist(state[kN - 1], state[0]);
  left = kN + 1;
  next = 0;
}

void MT19937::fill(uint32_t* out, int64_t n) {
  while (n > 0) {
    if (left == 1) regenerate();
    // set_state guarantees next + left <= kN + 1, so these words exist.
    int64_t m = std::min<int64_t>(n, left - 1);
    const uint32_t* src = state + next;
    for (int64_t k = 0; k < m; ++k) out[k] = temper(src[k]);
    next += static_cast<uint32_t>(m);
    left -= static_cast<int32_t>(m);
    out += m;
    n -= m;
  }
}

// ---- torch's state layout --------------------------------------------------

namespace {
constexpr int64_t kOffLeft = 8, kOffSeeded = 12, kOffNext = 16, kOffWords = 24;
constexpr int64_t kOffNormalY = kOffWords + 8 * MT19937::kN + 8;  // after normal_x
constexpr int64_t kOffNormalValid = kOffNormalY + 16;             // after normal_rho
constexpr int64_t kOffFloatNormal = kOffNormalValid + 8;
constexpr int64_t kOffFloatValid = kOffFloatNormal + 4;
static_assert(kOffFloatValid + 4 == CPUGenerator::kStateBytes);

template <typename T>
void put(uint8_t* p, int64_t off, T v) {
  std::memcpy(p + off, &v, sizeof(T));
}
template <typename T>
T get(const uint8_t* p, int64_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}
}  // namespace

void CPUGenerator::get_state(uint8_t* out) const {
  std::memset(out, 0, kStateBytes);
  put<uint64_t>(out, 0, engine.seed);
  put<int32_t>(out, kOffLeft, engine.left);
  put<int32_t>(out, kOffSeeded, engine.seeded ? 1 : 0);
  put<uint64_t>(out, kOffNext, engine.next);
  for (int i = 0; i < MT19937::kN; ++i) put<uint64_t>(out, kOffWords + 8 * i, engine.state[i]);
  if (next_double_normal) {
    put<double>(out, kOffNormalY, *next_double_normal);
    put<int32_t>(out, kOffNormalValid, 1);
  }
  if (next_float_normal) {
    put<float>(out, kOffFloatNormal, *next_float_normal);
    out[kOffFloatValid] = 1;
  }
}

void CPUGenerator::set_state(const uint8_t* in) {
  int32_t left = get<int32_t>(in, kOffLeft);
  uint64_t next = get<uint64_t>(in, kOffNext);
  STRATA_CHECK(left >= 1 && left <= MT19937::kN && next <= MT19937::kN &&
                   static_cast<uint64_t>(left) + next <= MT19937::kN + 1,
               "set_rng_state: the state is corrupted (left=", left, ", next=", next,
               "); expected a state produced by get_rng_state");
  engine.seed = get<uint64_t>(in, 0);
  engine.left = left;
  engine.seeded = get<int32_t>(in, kOffSeeded) != 0;
  engine.next = static_cast<uint32_t>(next);
  // torch stores each 32-bit word in a u64 slot; only the low half is state.
  for (int i = 0; i < MT19937::kN; ++i) engine.state[i] = static_cast<uint32_t>(get<uint64_t>(in, kOffWords + 8 * i));
  next_double_normal.reset();
  if (get<int32_t>(in, kOffNormalValid)) next_double_normal = get<double>(in, kOffNormalY);
  next_float_normal.reset();
  if (in[kOffFloatValid]) next_float_normal = get<float>(in, kOffFloatNormal);
}

// ---- registry --------------------------------------------------------------

namespace {
// One mutex for all generators: ops hold it while drawing their raw stream.
struct Registry {
  std::mutex mu;
  std::unordered_map<int64_t, std::unique_ptr<CPUGenerator>> gens;
  Registry() { gens.emplace(0, std::make_unique<CPUGenerator>()); }
};
Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: ops may run during static destruction
  return *r;
}
}  // namespace

GeneratorGuard::GeneratorGuard(std::optional<int64_t> id) : lock_(registry().mu) {
  auto& gens = registry().gens;
  auto it = gens.find(id.value_or(0));
  STRATA_CHECK_VALUE(it != gens.end(), "generator: no generator with id ", *id,
                     " (create one with strata.Generator())");
  gen_ = it->second.get();
}

void ensure_generator(int64_t id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& slot = r.gens[id];
  if (!slot) slot = std::make_unique<CPUGenerator>();
}

void drop_generator(int64_t id) {
  STRATA_CHECK_VALUE(id != 0, "generator: the default generator cannot be dropped");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.gens.erase(id);
}

}  // namespace strata
