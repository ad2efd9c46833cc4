// Strata's CPU allocator (src/core/allocator.cpp) against malloc/free and aligned_alloc/free, for small blocks (served
// by glibc on both sides, plus a 64-byte header and statistics in Strata) and large ones (kept in Strata's block cache
// on free; glibc hands blocks this big back to the kernel). The *Touch variants write one byte per 4 KiB page after
// allocating, as the first kernel writing a fresh result would: that is where a cache pays off (no page faults).
// Run: build/bench/bench_allocator [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "core/allocator.h"

namespace {

using strata::DeviceType;

void touch(void* p, size_t n) {
  auto* c = static_cast<volatile char*>(p);
  for (size_t i = 0; i < n; i += 4096) c[i] = 1;
}

void Strata(benchmark::State& st) {
  strata::Allocator* alloc = strata::get_allocator(DeviceType::CPU);
  size_t n = static_cast<size_t>(st.range(0));
  for (auto _ : st) {
    strata::DataPtr p = alloc->allocate(n);
    benchmark::DoNotOptimize(p.get());
  }
}

void Malloc(benchmark::State& st) {
  size_t n = static_cast<size_t>(st.range(0));
  for (auto _ : st) {
    void* p = std::malloc(n);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}

void AlignedAlloc(benchmark::State& st) {
  size_t n = static_cast<size_t>(st.range(0));
  for (auto _ : st) {
    void* p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}

// Both *Touch loops start with one untimed round, so they measure the steady state (Strata's cache warm).
void StrataTouch(benchmark::State& st) {
  strata::Allocator* alloc = strata::get_allocator(DeviceType::CPU);
  size_t n = static_cast<size_t>(st.range(0));
  touch(alloc->allocate(n).get(), n);
  for (auto _ : st) {
    strata::DataPtr p = alloc->allocate(n);
    touch(p.get(), n);
  }
}

void MallocTouch(benchmark::State& st) {
  size_t n = static_cast<size_t>(st.range(0));
  void* first = std::malloc(n);
  touch(first, n);
  std::free(first);
  for (auto _ : st) {
    void* p = std::malloc(n);
    touch(p, n);
    std::free(p);
  }
}

// Small: 64 B and 4 KiB. Large: 4 MiB and 64 MiB (above the 1 MiB cache threshold and glibc's mmap threshold).
BENCHMARK(Strata)->Arg(64)->Arg(4096)->Arg(4 << 20)->Arg(64 << 20);
BENCHMARK(Malloc)->Arg(64)->Arg(4096)->Arg(4 << 20)->Arg(64 << 20);
BENCHMARK(AlignedAlloc)->Arg(64)->Arg(4096)->Arg(4 << 20)->Arg(64 << 20);
BENCHMARK(StrataTouch)->Arg(4 << 20)->Arg(64 << 20);
BENCHMARK(MallocTouch)->Arg(4 << 20)->Arg(64 << 20);

}  // namespace

BENCHMARK_MAIN();
