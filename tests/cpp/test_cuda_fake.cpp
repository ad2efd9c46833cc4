// The CUDA runtime and caching allocator against the fake driver (src/backends/cuda/fake_driver.h): rounding,
// splitting and merging, per-stream pools, record_stream, empty_cache, out of memory, statistics, private pools,
// stream order and events. No GPU needed.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/fake_driver.h"
#include "backends/cuda/kernel_module.h"
#include "backends/cuda/pinned_memory.h"
#include "ops/ops.h"

using namespace strata;
using namespace strata::cuda;

namespace {

constexpr size_t MiB = size_t(1) << 20;

class CudaFake : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(use_fake_driver()) << "another driver was loaded first";
    ASSERT_TRUE(available()) << unavailable_reason();
    set_device(0);
    fake::set_manual_progress(false);
    fake::set_total_memory(0, size_t(8) << 30);
    synchronize(0);
    caching_allocator().empty_cache();
    caching_allocator().reset_accumulated_stats(0);
    caching_allocator().reset_peak_stats(0);
  }
  void TearDown() override {
    fake::set_manual_progress(false);
    fake::set_total_memory(0, size_t(8) << 30);
  }
  static CachingAllocator& alloc() { return caching_allocator(); }
  static uintptr_t addr(const DataPtr& p) { return reinterpret_cast<uintptr_t>(p.get()); }
  static DeviceStats st() { return caching_allocator().stats(0); }
};

std::vector<float> values(const Tensor& cpu) {
  Tensor c = contiguous(cpu);
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace

TEST(CudaSizes, RoundingFollowsTorch) {
  EXPECT_EQ(round_size(1), 512u);
  EXPECT_EQ(round_size(512), 512u);
  EXPECT_EQ(round_size(513), 1024u);
  EXPECT_EQ(allocation_size(512), 2 * MiB);
  EXPECT_EQ(allocation_size(MiB), 2 * MiB);
  EXPECT_EQ(allocation_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(allocation_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(allocation_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(allocation_size(11 * MiB), 12 * MiB);
  EXPECT_EQ(format_size(20 * MiB), "20.00 MiB");
}

TEST_F(CudaFake, DevicesAndProperties) {
  EXPECT_EQ(device_count(), 2);
  const DeviceProperties& p = device_properties(1);
  EXPECT_EQ(p.name, "Strata fake device 1");
  EXPECT_EQ(p.major, 9);
  EXPECT_EQ(p.minor, 0);
  EXPECT_THROW(check_device(2, "test"), IndexError);
}

TEST_F(CudaFake, SmallRequestsShareATwoMiBSegment) {
  const int64_t calls = fake::alloc_calls();
  DataPtr a = alloc().allocate(1000);
  DataPtr b = alloc().allocate(3000);
  EXPECT_EQ(fake::alloc_calls(), calls + 1);  // one segment for both
  EXPECT_EQ(addr(b), addr(a) + 1024);         // 1000 rounds to 1024: b is carved right after a
  DeviceStats s = st();
  EXPECT_EQ(s.segment.s[kSmallPool].current, 1);
  EXPECT_EQ(s.reserved_bytes.s[kAll].current, int64_t(2 * MiB));
  EXPECT_EQ(s.allocated_bytes.s[kAll].current, 1024 + 3072);
  EXPECT_EQ(s.requested_bytes.s[kAll].current, 4000);
  EXPECT_EQ(s.inactive_split.s[kAll].current, 1);  // the rest of the segment
}

TEST_F(CudaFake, SplitBlocksMergeWhenFreed) {
  uintptr_t first;
  {
    DataPtr a = alloc().allocate(4 * MiB);  // large: a 20 MiB segment, split
    DataPtr b = alloc().allocate(4 * MiB);
    first = addr(a);
    EXPECT_EQ(addr(b), first + 4 * MiB);
    EXPECT_EQ(st().segment.s[kLargePool].current, 1);
    a.reset();
    // a's block and the tail are free pieces of a split segment
    EXPECT_EQ(st().inactive_split.s[kLargePool].current, 2);
  }
  std::vector<BlockInfo> snap = alloc().snapshot(0);
  ASSERT_EQ(snap.size(), 1u);  // everything merged back into one block
  EXPECT_EQ(snap[0].size, 20 * MiB);
  EXPECT_FALSE(snap[0].allocated);
  EXPECT_EQ(st().inactive_split.s[kAll].current, 0);
  const int64_t calls = fake::alloc_calls();
  DataPtr c = alloc().allocate(18 * MiB);  // fits the merged block: no new segment
  EXPECT_EQ(addr(c), first);
  EXPECT_EQ(fake::alloc_calls(), calls);
}

TEST_F(CudaFake, FreedBlocksAreReusedOnlyByTheirStream) {
  Stream s1 = new_stream(0);
  uintptr_t on_default;
  { on_default = addr(alloc().allocate_on(5000, 0, default_stream(0))); }
  DataPtr again = alloc().allocate_on(5000, 0, default_stream(0));
  EXPECT_EQ(addr(again), on_default);
  DataPtr other = alloc().allocate_on(5000, 0, s1);
  EXPECT_NE(addr(other), on_default);
}

TEST_F(CudaFake, RecordStreamDelaysReuseUntilTheStreamGetsThere) {
  fake::set_manual_progress(true);
  Stream s1 = new_stream(0);
  DataPtr x = alloc().allocate(8192);
  const uintptr_t px = addr(x);
  alloc().record_stream(x.get(), s1);
  DeviceGuard g(0);
  ASSERT_EQ(driver().cuMemsetD8Async(px, 7, 8192, s1.handle), CUDA_SUCCESS);  // s1 still uses x
  x.reset();
  DataPtr y = alloc().allocate(8192);
  EXPECT_NE(addr(y), px);  // s1's work on x has not run: x is not handed out
  EXPECT_EQ(fake::run_pending(s1.handle), 2u);  // the memset and the allocator's event
  DataPtr z = alloc().allocate(8192);
  EXPECT_EQ(addr(z), px);
}

TEST_F(CudaFake, EmptyCacheReturnsUnusedSegments) {
  { DataPtr a = alloc().allocate(3 * MiB), b = alloc().allocate(100); }
  EXPECT_EQ(st().reserved_bytes.s[kAll].current, int64_t(22 * MiB));
  DataPtr keep = alloc().allocate(200);  // keeps the small segment
  alloc().empty_cache();
  EXPECT_EQ(st().reserved_bytes.s[kAll].current, int64_t(2 * MiB));
  EXPECT_EQ(fake::used_memory(0), 2 * MiB);
  keep.reset();
  alloc().empty_cache();
  EXPECT_EQ(st().reserved_bytes.s[kAll].current, 0);
  EXPECT_EQ(fake::used_memory(0), 0u);
}

TEST_F(CudaFake, OutOfMemoryReleasesTheCacheRetriesThenRaises) {
  fake::set_total_memory(0, 64 * MiB);
  { DataPtr a = alloc().allocate(30 * MiB); }  // cached after the free
  DataPtr b = alloc().allocate(40 * MiB);     // needs the cached 30 MiB back
  EXPECT_EQ(st().num_alloc_retries, 1);
  EXPECT_EQ(st().num_ooms, 0);
  try {
    DataPtr c = alloc().allocate(60 * MiB);
    FAIL() << "no OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("Tried to allocate 60.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("GPU 0 has a total capacity of 64.00 MiB of which 24.00 MiB is free"), std::string::npos) << m;
    EXPECT_NE(m.find("40.00 MiB is allocated by Strata"), std::string::npos) << m;
    EXPECT_NE(m.find("0 bytes is reserved by Strata but unallocated"), std::string::npos) << m;
  }
  EXPECT_EQ(st().num_ooms, 1);
  EXPECT_EQ(st().num_alloc_retries, 2);
}

TEST_F(CudaFake, StatisticsCountCurrentPeakAndTotals) {
  {
    DataPtr a = alloc().allocate(2048);
    DataPtr b = alloc().allocate(4096);
  }
  DataPtr c = alloc().allocate(1024);
  DeviceStats s = st();
  EXPECT_EQ(s.allocated_bytes.s[kAll].current, 1024);
  EXPECT_EQ(s.allocated_bytes.s[kAll].peak, 6144);
  EXPECT_EQ(s.allocated_bytes.s[kAll].allocated, 7168);
  EXPECT_EQ(s.allocated_bytes.s[kAll].freed, 6144);
  EXPECT_EQ(s.allocation.s[kSmallPool].allocated, 3);
  EXPECT_EQ(s.allocation.s[kLargePool].allocated, 0);
  alloc().reset_peak_stats(0);
  EXPECT_EQ(st().allocated_bytes.s[kAll].peak, 1024);
  auto m = alloc().memory_stats(0);
  EXPECT_EQ(m.at("allocated_bytes.all.current"), 1024);
  EXPECT_EQ(m.at("allocation.small_pool.current"), 1);
  EXPECT_EQ(m.at("reserved_bytes.all.current"), int64_t(2 * MiB));
  EXPECT_TRUE(m.count("inactive_split_bytes.large_pool.peak"));
  EXPECT_NE(alloc().memory_summary(0).find("Allocated memory"), std::string::npos);
}

TEST_F(CudaFake, PrivatePoolKeepsItsBlocks) {
  MempoolId id = alloc().new_pool_id();
  alloc().begin_allocate_to_pool(0, id);
  uintptr_t in_pool;
  { in_pool = addr(alloc().allocate(MiB)); }
  alloc().end_allocate_to_pool(0, id);
  DataPtr outside = alloc().allocate(MiB);
  EXPECT_NE(addr(outside), in_pool);  // the pool's free block is not for others
  alloc().begin_allocate_to_pool(0, id);
  DataPtr again = alloc().allocate(MiB);
  alloc().end_allocate_to_pool(0, id);
  EXPECT_EQ(addr(again), in_pool);  // the same address on the next capture
  alloc().empty_cache();            // does not release a live pool's segments
  EXPECT_EQ(st().segment.s[kAll].current, 2);
  again.reset();
  alloc().release_pool(0, id);  // each begin took a use of the pool (as two captures sharing it would)
  EXPECT_EQ(st().segment.s[kAll].current, 2);
  alloc().release_pool(0, id);
  EXPECT_EQ(st().segment.s[kAll].current, 1);
  EXPECT_THROW(alloc().release_pool(0, id), Error);
}

TEST_F(CudaFake, StreamsRunInOrderAndEventsCompleteThere) {
  fake::set_manual_progress(true);
  Stream s = new_stream(0);
  DeviceGuard g(0);
  CUdeviceptr d = 0;
  ASSERT_EQ(driver().cuMemAlloc(&d, 16), CUDA_SUCCESS);
  unsigned char poison[16];
  std::memcpy(poison, reinterpret_cast<void*>(d), 16);
  EXPECT_EQ(poison[0], fake::kAllocPoison);
  unsigned char src[16], dst[16];
  std::memset(src, 3, 16);
  std::memset(dst, 0, 16);
  ASSERT_EQ(driver().cuMemcpyHtoDAsync(d, src, 16, s.handle), CUDA_SUCCESS);
  Event e(true);
  e.record(s);
  ASSERT_EQ(driver().cuMemsetD8Async(d, 9, 16, s.handle), CUDA_SUCCESS);
  ASSERT_EQ(driver().cuMemcpyDtoHAsync(dst, d, 16, s.handle), CUDA_SUCCESS);
  EXPECT_EQ(fake::pending(s.handle), 4u);
  EXPECT_FALSE(e.query());
  EXPECT_FALSE(s.query());
  EXPECT_EQ(fake::run_pending(s.handle, 2), 2u);  // the copy in and the event
  EXPECT_TRUE(e.query());
  EXPECT_EQ(dst[0], 0);  // the copy out has not run
  s.synchronize();
  EXPECT_EQ(dst[0], 9);  // the memset ran before the copy out, as queued
  ASSERT_EQ(driver().cuMemFree(d), CUDA_SUCCESS);
}

TEST_F(CudaFake, WaitEventOrdersTwoStreams) {
  fake::set_manual_progress(true);
  Stream producer = new_stream(0), consumer = new_stream(0);
  DeviceGuard g(0);
  DataPtr buf = alloc().allocate_on(64, 0, producer);
  DataPtr out = alloc().allocate_on(64, 0, consumer);
  const CUdeviceptr pb = addr(buf), po = addr(out);
  ASSERT_EQ(driver().cuMemsetD8Async(pb, 5, 64, producer.handle), CUDA_SUCCESS);
  Event e;
  e.record(producer);
  consumer.wait(e.handle());
  ASSERT_EQ(driver().cuMemcpyDtoDAsync(po, pb, 64, consumer.handle), CUDA_SUCCESS);
  EXPECT_EQ(fake::run_pending(consumer.handle), 0u);  // blocked on the event
  consumer.synchronize();                              // runs the producer up to the event
  unsigned char host[64];
  ASSERT_EQ(driver().cuMemcpyDtoHAsync(host, po, 64, consumer.handle), CUDA_SUCCESS);
  consumer.synchronize();
  EXPECT_EQ(host[63], 5);
  EXPECT_TRUE(producer.query() || fake::pending(producer.handle) == 0);
}

TEST_F(CudaFake, WorkOnFreedMemoryIsAnIllegalAddress) {
  fake::set_manual_progress(true);
  Stream s = new_stream(0);
  DeviceGuard g(0);
  CUdeviceptr d = 0;
  ASSERT_EQ(driver().cuMemAlloc(&d, 256), CUDA_SUCCESS);
  unsigned char host[256];
  ASSERT_EQ(driver().cuMemcpyDtoHAsync(host, d, 256, s.handle), CUDA_SUCCESS);
  ASSERT_EQ(driver().cuMemFree(d), CUDA_SUCCESS);  // while the copy is still queued
  EXPECT_EQ(driver().cuStreamSynchronize(s.handle), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(driver().cuMemsetD8Async(d, 0, 1, s.handle), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(CudaFake, EventTimingNeedsCompletedTimingEvents) {
  Stream s = new_stream(0);
  Event a(true), b(true), untimed(false);
  a.record(s);
  b.record(s);
  b.synchronize();
  EXPECT_GE(a.elapsed_time(b), 0.0f);
  untimed.record(s);
  EXPECT_THROW(a.elapsed_time(untimed), Error);
}

TEST_F(CudaFake, TensorsMoveBetweenHostAndDevice) {
  Tensor h = arange(Scalar(int64_t(0)), Scalar(int64_t(12)), Scalar(int64_t(1)), ScalarType::Float32);
  Tensor d = to_device(h, Device(DeviceType::CUDA));
  EXPECT_EQ(d.device(), Device(DeviceType::CUDA, 0));  // the index is filled in
  EXPECT_EQ(alloc().stats(0).allocated_bytes.s[kAll].current, 512);
  Tensor back = to_device(d, Device());
  EXPECT_EQ(values(back), values(h));
  // A strided device view comes back through the host path.
  const std::vector<int64_t> shape{3, 4};
  Tensor t = to_device(transpose(reshape(d, shape), 0, 1), Device());
  EXPECT_EQ(values(t), values(transpose(reshape(h, shape), 0, 1)));
  // Host -> strided device view: the other elements of the span keep their values.
  Tensor dv = transpose(reshape(d, shape), 0, 1);
  copy_(select(dv, 0, 1), full(std::vector<int64_t>{3}, Scalar(-1.0), ScalarType::Float32));
  std::vector<float> got = values(to_device(d, Device()));
  EXPECT_EQ(got[1], -1.0f);
  EXPECT_EQ(got[5], -1.0f);
  EXPECT_EQ(got[9], -1.0f);
  EXPECT_EQ(got[2], 2.0f);
  EXPECT_EQ(got[4], 4.0f);
}

namespace {
// A host "kernel" for the fake driver: adds params[1] (an int) to every int of the device buffer params[0] (n ints,
// n = grid x block).
std::function<void()> add_kernel(void** params, unsigned gx, unsigned bx) {
  int* p = *static_cast<int**>(params[0]);
  const int v = *static_cast<int*>(params[1]);
  const size_t n = size_t(gx) * bx;
  return [p, v, n] {
    for (size_t i = 0; i < n; ++i) p[i] += v;
  };
}
}  // namespace

TEST_F(CudaFake, LaunchedKernelsRunInStreamOrderWithTheirLaunchParameters) {
  fake::register_kernel("add_ints", &add_kernel);
  fake::set_manual_progress(true);
  Stream s = new_stream(0);
  DeviceGuard g(0);
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  ASSERT_EQ(driver().cuModuleLoadData(&mod, "image"), CUDA_SUCCESS);
  ASSERT_EQ(driver().cuModuleGetFunction(&fn, mod, "add_ints"), CUDA_SUCCESS);
  EXPECT_EQ(driver().cuModuleGetFunction(&fn, mod, "missing"), CUDA_ERROR_NOT_FOUND);
  ASSERT_EQ(driver().cuModuleGetFunction(&fn, mod, "add_ints"), CUDA_SUCCESS);
  DataPtr buf = alloc().allocate_on(8 * sizeof(int), 0, s);
  ASSERT_EQ(driver().cuMemsetD8Async(addr(buf), 0, 8 * sizeof(int), s.handle), CUDA_SUCCESS);
  int* dev = static_cast<int*>(buf.get());
  int v = 3;
  void* params[] = {&dev, &v};
  ASSERT_EQ(driver().cuLaunchKernel(fn, 2, 1, 1, 4, 1, 1, 0, s.handle, params, nullptr), CUDA_SUCCESS);
  v = 10;  // the launch took its parameters already
  ASSERT_EQ(driver().cuLaunchKernel(fn, 2, 1, 1, 4, 1, 1, 0, s.handle, params, nullptr), CUDA_SUCCESS);
  int host[8] = {};
  ASSERT_EQ(driver().cuMemcpyDtoHAsync(host, addr(buf), sizeof host, s.handle), CUDA_SUCCESS);
  EXPECT_EQ(fake::run_pending(s.handle, 2), 2u);  // memset and the first launch
  EXPECT_EQ(host[7], 0);
  s.synchronize();
  for (int x : host) EXPECT_EQ(x, 13);
  EXPECT_EQ(driver().cuModuleUnload(mod), CUDA_SUCCESS);
}

TEST_F(CudaFake, DevicesKeepSeparatePoolsAndFigures) {
  caching_allocator().reset_accumulated_stats(1);
  DataPtr a = alloc().allocate_on(4096, 1, default_stream(1));
  Device d(DeviceType::CUDA, 1);
  Tensor t = empty_tensor(std::vector<int64_t>{16}, ScalarType::Float32, d);
  EXPECT_EQ(t.device(), d);
  EXPECT_EQ(alloc().stats(1).allocation.s[kAll].current, 2);
  EXPECT_EQ(alloc().stats(0).allocation.s[kAll].current, 0);
  EXPECT_EQ(current_device(), 0);  // allocating on cuda:1 leaves the current device alone
  EXPECT_GT(fake::used_memory(1), 0u);
}

TEST_F(CudaFake, ConcurrentAllocationsKeepTheFiguresExact) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      set_device(0);
      std::vector<DataPtr> live;
      for (int i = 0; i < 200; ++i) {
        live.push_back(caching_allocator().allocate(size_t(512) * (1 + (i * 7 + t) % 40)));
        if (i % 3 == 0) live.erase(live.begin());
      }
    });
  }
  for (auto& th : threads) th.join();
  DeviceStats s = st();
  EXPECT_EQ(s.allocation.s[kAll].current, 0);
  EXPECT_EQ(s.allocated_bytes.s[kAll].current, 0);
  EXPECT_EQ(s.active_bytes.s[kAll].current, 0);
  EXPECT_EQ(s.allocation.s[kAll].allocated, 800);
  EXPECT_EQ(s.inactive_split.s[kAll].current, 0);  // every split block merged back
  alloc().empty_cache();
  EXPECT_EQ(st().reserved_bytes.s[kAll].current, 0);
}

TEST_F(CudaFake, AStalledStreamDoesNotHoldBackBlocksWaitingOnAnother) {
  fake::set_manual_progress(true);
  Stream slow = new_stream(0), quick = new_stream(0);
  DataPtr a = alloc().allocate(4096), b = alloc().allocate(4096);
  const uintptr_t pa = addr(a), pb = addr(b);
  alloc().record_stream(a.get(), slow);
  alloc().record_stream(b.get(), quick);
  a.reset();  // its event waits on `slow`, queued first
  b.reset();
  EXPECT_EQ(fake::run_pending(quick.handle), 1u);
  DataPtr c = alloc().allocate(4096);
  EXPECT_EQ(addr(c), pb);  // b's block is back though a's event (on slow) has not completed
  DataPtr d = alloc().allocate(4096);
  EXPECT_NE(addr(d), pa);
  slow.synchronize();
}

TEST_F(CudaFake, PinnedCopiesAreAsynchronousAndKeepTheirHostBlock) {
  fake::set_manual_progress(true);
  Tensor host = pin_memory(full(std::vector<int64_t>{256}, Scalar(2.0), ScalarType::Float32));
  const void* hp = host.data_ptr();
  EXPECT_TRUE(is_pinned(hp, 1024));
  EXPECT_FALSE(is_pinned(hp, 1 << 20));
  Tensor dev = empty_tensor(std::vector<int64_t>{256}, ScalarType::Float32, Device(DeviceType::CUDA));
  Stream s = current_stream(0);
  copy_(dev, host, /*non_blocking=*/true);
  EXPECT_EQ(fake::pending(s.handle), 2u);  // the copy and the pinned block's event; nothing waited
  fill_(host, Scalar(5.0));                // a copy from pinned memory reads it when it runs
  host = Tensor();                         // freed while the copy is queued
  Tensor other = pin_memory(full(std::vector<int64_t>{256}, Scalar(1.0), ScalarType::Float32));
  EXPECT_NE(other.data_ptr(), hp);  // the block waits for the copy's event
  s.synchronize();
  std::vector<float> got = values(to_device(dev, Device()));
  EXPECT_EQ(got[0], 5.0f);
  Tensor again = pin_memory(other);
  EXPECT_EQ(again.data_ptr(), hp);  // now it is handed out again
  // device -> pinned host, asynchronous with non_blocking
  copy_(again, dev, /*non_blocking=*/true);
  EXPECT_EQ(again.data_ptr<float>()[0], 1.0f);  // not run yet
  s.synchronize();
  EXPECT_EQ(again.data_ptr<float>()[0], 5.0f);
}

TEST_F(CudaFake, KernelModulesFindKernelsAndLaunchesAreChecked) {
  fake::register_kernel("add_ints", &add_kernel);
  fake::set_manual_progress(true);
  KernelModule mod("fake image", 0, "test module");
  CUfunction fn = mod.function("add_ints");
  EXPECT_EQ(mod.function("add_ints"), fn);
  try {
    mod.function("absent");
    FAIL() << "no error for a missing kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel 'absent' is not in test module"), std::string::npos) << e.what();
  }
  Stream s = current_stream(0);
  Tensor t = zeros(std::vector<int64_t>{64}, ScalarType::Int32, Device(DeviceType::CUDA));
  int* p = static_cast<int*>(t.data_ptr());
  int v = 2;
  void* args[] = {&p, &v};
  launch_kernel(fn, "add_ints", {2, 1, 1}, {32, 1, 1}, 0, s, args);
  EXPECT_EQ(fake::pending(s.handle), 2u);  // zeros' memset, then the launch
  s.synchronize();
  Tensor back = to_device(t, Device());
  EXPECT_EQ(back.data_ptr<int>()[63], 2);
  EXPECT_THROW(launch_kernel(fn, "add_ints", {1, 1, 1}, {2048, 1, 1}, 0, s, args), Error);
  EXPECT_THROW(launch_kernel(fn, "add_ints", {0, 1, 1}, {32, 1, 1}, 0, s, args), Error);
  EXPECT_THROW(launch_kernel(fn, "add_ints", {1, 1, 1}, {32, 1, 1}, 1 << 20, s, args), Error);
  EXPECT_EQ(fake::pending(s.handle), 0u);  // nothing queued by the refused launches
}
