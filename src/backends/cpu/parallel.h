// Multi-threading for CPU kernels: OpenMP underneath, one entry point above.
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace strata {

// Work below this many elements runs on the calling thread.
constexpr int64_t kGrainSize = 32768;

int get_num_threads();
void set_num_threads(int n);
bool in_parallel_region();

// Calls f(begin, end) over disjoint chunks of [begin, end) on up to
// get_num_threads() threads; chunks are at least `grain` long.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
#ifdef _OPENMP
  // Small ranges first: they never ask OpenMP anything (a tiny op's whole
  // kernel is a few dozen nanoseconds).
  int nt = n > grain ? get_num_threads() : 1;
  if (nt > 1 && !omp_in_parallel()) {
    int64_t chunks = std::min<int64_t>(nt, (n + grain - 1) / grain);
#pragma omp parallel num_threads(static_cast<int>(chunks))
    {
      int64_t tid = omp_get_thread_num();
      int64_t nth = omp_get_num_threads();
      int64_t per = (n + nth - 1) / nth;
      int64_t b = begin + tid * per;
      int64_t e = std::min(end, b + per);
      if (b < e) f(b, e);
    }
    return;
  }
#endif
  f(begin, end);
}

}  // namespace strata
