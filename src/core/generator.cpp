#include "core/generator.h"

#include <mutex>
#include <unordered_map>

#include "core/error.h"

namespace strata {

namespace {
struct Registry {
  std::mutex mu;
  std::unordered_map<int64_t, GeneratorState> gens{{0, GeneratorState{kDefaultSeed, 0}}};
};
Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: ops may run during static destruction
  return *r;
}
GeneratorState& lookup(Registry& r, std::optional<int64_t> id) {
  auto it = r.gens.find(id.value_or(0));
  STRATA_CHECK_VALUE(it != r.gens.end(), "generator: no generator with id ", *id,
                     " (create one with strata.Generator())");
  return it->second;
}
}  // namespace

GeneratorState reserve_random_blocks(std::optional<int64_t> id, uint64_t nblocks) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  GeneratorState& g = lookup(r, id);
  GeneratorState s = g;
  g.offset += nblocks;
  return s;
}

GeneratorState generator_state(std::optional<int64_t> id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return lookup(r, id);
}

void set_generator_state(std::optional<int64_t> id, GeneratorState s) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.gens[id.value_or(0)] = s;
}

void drop_generator(int64_t id) {
  STRATA_CHECK_VALUE(id != 0, "generator: the default generator cannot be dropped");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.gens.erase(id);
}

}  // namespace strata
