#include "core/sanitizer_canary.h"

#ifdef STRATA_SANITIZER_BUILD
#include <climits>
#include <stdexcept>
#include <thread>

namespace strata::debug {

int64_t sanitizer_canary(int kind, int64_t n) {
  if (n < 1) throw std::invalid_argument("sanitizer_canary: n must be positive");
  switch (static_cast<Canary>(kind)) {
    case Canary::heap_overflow_read: {
      auto* p = new int32_t[n];
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(i);
      volatile int32_t* vp = p;
      int64_t r = vp[n];  // one past the end
      delete[] p;
      return r;
    }
    case Canary::use_after_free: {
      auto* p = new int32_t[n];
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(i);
      volatile int32_t* vp = p;
      delete[] p;
      return vp[0];
    }
    case Canary::signed_overflow: {
      volatile int32_t a = INT32_MAX;
      int32_t b = a + static_cast<int32_t>(n);
      return b;
    }
    case Canary::data_race: {
      int64_t shared = 0;
      auto bump = [&shared, n] {
        for (int64_t i = 0; i < n; ++i) {
          volatile int64_t* p = &shared;
          *p = *p + 1;  // read-modify-write from two threads, no lock, no atomic
        }
      };
      std::thread other(bump);
      bump();
      other.join();
      return shared;
    }
  }
  throw std::invalid_argument("sanitizer_canary: unknown kind");
}

}  // namespace strata::debug
#endif
