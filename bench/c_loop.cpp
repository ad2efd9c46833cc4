// The physical reference for large elementwise ops and reductions: plain OpenMP loops over n floats, compiled with
// -O3 -march=native, each a single pass over memory. Two builds of this file:
//  - build/bench/libc_loop.so (C_LOOP_NO_MAIN): bench/suite.py calls c_loop_run() through ctypes on the same
//    buffers as the other sides, interleaved call by call with them, so the comparison is made under the same load;
//  - build/bench/c_loop: a standalone program printing GB/s per op as JSON.
//      c_loop [n=33554432] [reps=10] [threads=2]
// Ops and the bytes they move per element (what a perfect kernel must read and write):
//   add, mul   c = a op b                                   12
//   gelu       c = gelu(a) (erf form)                        8
//   chain7     c = sqrt(|(a*b + a)*0.5 - b|) * a, fused     12   (7 ops that eager frameworks run one by one)
//   scale      c = a * 0.5                                   8   (floor for a read+write pass: softmax, layer_norm)
//   sum        sum of a                                      4   (floor for a one-pass reduction)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// The vector versions of erff in glibc's libmvec are only declared under -ffast-math; declaring the function with the
// OpenMP simd attribute lets the loop below call them without relaxing IEEE semantics elsewhere.
extern "C" __attribute__((simd("notinbranch"))) float erff(float) noexcept;

namespace {

template <typename F>
void binary(const float* __restrict a, const float* __restrict b, float* __restrict c, int64_t n, int threads, F op) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) c[i] = op(a[i], b[i]);
}

}  // namespace

// Runs `op` once; returns the sum for "sum", 0 for the others, and -1 for an unknown op (c is then untouched).
extern "C" double c_loop_run(const char* op, const float* a, const float* b, float* c, int64_t n, int threads) {
  if (std::strcmp(op, "add") == 0) {
    binary(a, b, c, n, threads, [](float x, float y) { return x + y; });
  } else if (std::strcmp(op, "mul") == 0) {
    binary(a, b, c, n, threads, [](float x, float y) { return x * y; });
  } else if (std::strcmp(op, "chain7") == 0) {
    binary(a, b, c, n, threads, [](float x, float y) { return std::sqrt(std::fabs((x * y + x) * 0.5f - y)) * x; });
  } else if (std::strcmp(op, "gelu") == 0) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) c[i] = 0.5f * a[i] * (1.0f + erff(a[i] * 0.70710678118654752f));
  } else if (std::strcmp(op, "scale") == 0) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) c[i] = a[i] * 0.5f;
  } else if (std::strcmp(op, "sum") == 0) {
    // Float accumulators per SIMD lane, as a framework's vectorized sum would have; the result is only a check.
    float s = 0;
#pragma omp parallel for simd num_threads(threads) schedule(static) reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += a[i];
    return s;
  } else {
    return -1;
  }
  return 0;
}

#ifndef C_LOOP_NO_MAIN
int main(int argc, char** argv) {
  int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t(1) << 25);
  int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  if (n <= 0 || reps <= 0 || threads <= 0) {
    std::fprintf(stderr, "usage: c_loop [n>0] [reps>0] [threads>0]\n");
    return 2;
  }
  size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
  float* a = static_cast<float*>(std::aligned_alloc(64, bytes));
  float* b = static_cast<float*>(std::aligned_alloc(64, bytes));
  float* c = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!a || !b || !c) {
    std::fprintf(stderr, "c_loop: out of memory for n=%lld\n", static_cast<long long>(n));
    return 1;
  }
  // Touch pages with the same threads that use them (first-touch placement).
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = float(i % 1000) * 0.5f, b[i] = 1.5f, c[i] = 0;
  struct Op {
    const char* name;
    double bytes;
  } ops[] = {{"add", 12}, {"mul", 12}, {"gelu", 8}, {"chain7", 12}, {"scale", 8}, {"sum", 4}};
  std::printf("{\"n\": %lld, \"threads\": %d, \"unit\": \"GB/s\"", static_cast<long long>(n), threads);
  double check = 0;
  for (const Op& op : ops) {
    std::vector<double> gbs;
    for (int r = 0; r < reps + 1; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      check += c_loop_run(op.name, a, b, c, n, threads);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) gbs.push_back(op.bytes * n / s / 1e9);  // the first run is a warm-up
    }
    std::sort(gbs.begin(), gbs.end());
    std::printf(", \"%s\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}", op.name, gbs[gbs.size() / 2],
                gbs.front(), gbs.back());
  }
  std::printf(", \"check\": %g}\n", check + double(c[n - 1]));
  std::free(a), std::free(b), std::free(c);
  return 0;
}
#endif
