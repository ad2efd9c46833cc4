#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/allocator.h"

using namespace strata;

namespace {
bool aligned(void* p) { return reinterpret_cast<uintptr_t>(p) % kCpuAlignment == 0; }
}  // namespace

// Note [CPU block cache]: blocks of 64 KiB and up are the allocator's own mappings, reused by size.
TEST(CpuAllocator, MappedBlocksAreReusedBySize) {
  if (std::getenv("STRATA_CPU_CACHE_BYTES")) GTEST_SKIP() << "cache size set from the environment";
  Allocator* a = get_allocator(DeviceType::CPU);
  for (size_t n : {size_t(64) << 10, size_t(300) << 10, (size_t(3) << 20) + 5}) {
    void* first;
    {
      DataPtr p = a->allocate(n);
      first = p.get();
      ASSERT_TRUE(aligned(first));
      std::memset(first, 0x5a, n);  // the whole request is writable
    }
    DataPtr q = a->allocate(n);
    EXPECT_EQ(q.get(), first) << n;
    DataPtr r = a->allocate(n);  // the cached block is taken: a fresh one
    EXPECT_NE(r.get(), first) << n;
    std::memset(r.get(), 0, n);
  }
}

TEST(CpuAllocator, StatsAndEmptyCache) {
  Allocator* a = get_allocator(DeviceType::CPU);
  int64_t before = cpu_allocator_stats().allocated_bytes;
  {
    DataPtr small = a->allocate(100), mid = a->allocate(20000), mapped = a->allocate(200000);
    EXPECT_TRUE(aligned(small.get()) && aligned(mid.get()) && aligned(mapped.get()));
    EXPECT_EQ(cpu_allocator_stats().allocated_bytes - before, 100 + 20000 + 200000);
  }
  EXPECT_EQ(cpu_allocator_stats().allocated_bytes, before);
  empty_cpu_cache();  // unmaps the cached blocks; allocation goes on working
  DataPtr again = a->allocate(200000);
  std::memset(again.get(), 1, 200000);
  EXPECT_EQ(cpu_allocator_stats().allocated_bytes - before, 200000);
  EXPECT_TRUE(a->allocate(0).get() == nullptr);
}

// A cached block up to (not including) twice the request serves it; its own
// size travels with it, so it returns to the cache, and is unmapped, whole.
TEST(CpuAllocator, SlightlyBiggerCachedBlockIsReused) {
  if (std::getenv("STRATA_CPU_CACHE_BYTES")) GTEST_SKIP() << "cache size set from the environment";
  Allocator* a = get_allocator(DeviceType::CPU);
  empty_cpu_cache();
  void* big;
  {
    DataPtr p = a->allocate(size_t(200) << 10);
    big = p.get();
  }
  {
    DataPtr q = a->allocate(size_t(150) << 10);  // 150 KiB: the 200 KiB block serves
    EXPECT_EQ(q.get(), big);
    std::memset(q.get(), 7, size_t(150) << 10);
  }
  {
    DataPtr r = a->allocate(size_t(200) << 10);  // back in the cache under its own size
    EXPECT_EQ(r.get(), big);
    std::memset(r.get(), 1, size_t(200) << 10);
  }
  DataPtr s = a->allocate(size_t(90) << 10);  // less than half of the cached block: a fresh one
  EXPECT_NE(s.get(), big);
  empty_cpu_cache();
}
