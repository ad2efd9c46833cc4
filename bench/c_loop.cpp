// The bandwidth anchor for large elementwise ops: a plain OpenMP loop
// c[i] = a[i] op b[i] over n floats. Prints one JSON object with GB/s
// (12 bytes moved per element) for add and mul: median, min and max of reps.
//   c_loop [n=33554432] [reps=10] [threads=2]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

template <typename F>
std::vector<double> run(int64_t n, int reps, int threads, float* __restrict a, float* __restrict b,
                        float* __restrict c, F op) {
  std::vector<double> gbs;
  for (int r = 0; r < reps + 1; ++r) {
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) c[i] = op(a[i], b[i]);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) gbs.push_back(12.0 * n / s / 1e9);  // the first run is a warm-up
  }
  std::sort(gbs.begin(), gbs.end());
  return gbs;
}

void print(const char* name, const std::vector<double>& v, bool last) {
  std::printf("\"%s\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}%s", name, v[v.size() / 2], v.front(),
              v.back(), last ? "" : ", ");
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t(1) << 25);
  int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  // Touch pages with the same threads that use them (first-touch placement).
  float* a = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  float* b = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  float* c = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = float(i % 1000) * 0.5f, b[i] = 1.5f, c[i] = 0;
  auto add = run(n, reps, threads, a, b, c, [](float x, float y) { return x + y; });
  auto mul = run(n, reps, threads, a, b, c, [](float x, float y) { return x * y; });
  std::printf("{\"n\": %lld, \"threads\": %d, \"unit\": \"GB/s\", ", static_cast<long long>(n), threads);
  print("add", add, false);
  print("mul", mul, true);
  std::printf(", \"check\": %g}\n", double(c[n - 1]));
  std::free(a), std::free(b), std::free(c);
  return 0;
}
