#include "backends/cpu/parallel.h"

#include <atomic>
#include <thread>

namespace strata {

namespace {
std::atomic<int> g_threads{0};
}

int get_num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n > 0) return n;
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void set_num_threads(int n) {
  g_threads.store(n > 0 ? n : 1);
#ifdef _OPENMP
  omp_set_num_threads(n > 0 ? n : 1);
#endif
}

bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

}  // namespace strata
