// The CUDA runtime and caching allocator against the REAL driver: the driver-agnostic checks of test_cuda_fake.cpp
// (rounding and segments, split/merge, per-stream reuse, record_stream, empty_cache, out of memory, statistics,
// private pools, stream order and events, copies, pinned memory, a kernel launched from PTX, several threads).
// Skipped unless STRATA_CUDA_TEST_REAL=1 is set (scripts/test_gpu.sh sets it) and a GPU is there. Run them in a
// process of their own: the driver is chosen once per process and the fake-driver tests select the fake one.
//   STRATA_CUDA_TEST_REAL=1 build/tests/cpp/strata_tests --gtest_filter='CudaReal*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/kernel_module.h"
#include "backends/cuda/pinned_memory.h"
#include "ops/ops.h"

using namespace strata;
using namespace strata::cuda;

namespace {

constexpr size_t MiB = size_t(1) << 20;

bool real_requested() {
  const char* v = std::getenv("STRATA_CUDA_TEST_REAL");
  return v && std::string(v) == "1";
}

class CudaReal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!real_requested()) GTEST_SKIP() << "real-GPU test: set STRATA_CUDA_TEST_REAL=1 (scripts/test_gpu.sh does)";
    if (!available()) GTEST_SKIP() << "no usable CUDA driver: " << unavailable_reason();
    ASSERT_FALSE(driver().is_fake) << "STRATA_CUDA_TEST_REAL=1 but this process uses the fake driver: run "
                                      "--gtest_filter='CudaReal*' in a process of its own, without STRATA_CUDA_DRIVER=fake";
    ASSERT_GE(device_count(), 1);
    set_device(0);
    synchronize(0);
    caching_allocator().empty_cache();
    caching_allocator().reset_accumulated_stats(0);
    caching_allocator().reset_peak_stats(0);
  }
  void TearDown() override {
    if (!real_requested() || !available()) return;
    synchronize(0);
    caching_allocator().empty_cache();
  }
  static CachingAllocator& alloc() { return caching_allocator(); }
  static uintptr_t addr(const DataPtr& p) { return reinterpret_cast<uintptr_t>(p.get()); }
  static DeviceStats st() { return caching_allocator().stats(0); }
};

std::vector<float> values(const Tensor& cpu) {
  Tensor c = contiguous(cpu);
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// add_ints(int* p, int v, int n): p[i] += v for i < n. NVRTC 13.0's PTX (compute_75) for
//   extern "C" __global__ void add_ints(int* p, int v, int n) {
//     int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += v; }
// The driver compiles it for the device at cuModuleLoadData.
const char kAddIntsPtx[] = R"(
.version 9.0
.target sm_75
.address_size 64

.visible .entry add_ints(
	.param .u64 add_ints_param_0,
	.param .u32 add_ints_param_1,
	.param .u32 add_ints_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<9>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [add_ints_param_0];
	ld.param.u32 	%r2, [add_ints_param_1];
	ld.param.u32 	%r3, [add_ints_param_2];
	mov.u32 	%r4, %ctaid.x;
	mov.u32 	%r5, %ntid.x;
	mov.u32 	%r6, %tid.x;
	mad.lo.s32 	%r1, %r4, %r5, %r6;
	setp.ge.s32 	%p1, %r1, %r3;
	@%p1 bra 	$L__BB0_2;

	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.s32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.u32 	%r7, [%rd4];
	add.s32 	%r8, %r7, %r2;
	st.global.u32 	[%rd4], %r8;

$L__BB0_2:
	ret;
}
)";

}  // namespace

TEST_F(CudaReal, DevicesAndProperties) {
  const DeviceProperties& p = device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GE(p.major, 7) << p.name;
  EXPECT_GT(p.total_memory, size_t(1) << 30);
  EXPECT_GT(p.multi_processor_count, 0);
  EXPECT_EQ(p.warp_size, 32);
  EXPECT_EQ(p.max_threads_per_block, 1024);
  EXPECT_GE(p.shared_memory_per_block_optin, p.shared_memory_per_block);
  auto [free_b, total_b] = mem_get_info(0);
  EXPECT_GT(free_b, 0u);
  EXPECT_LE(free_b, total_b);
  EXPECT_EQ(total_b, p.total_memory);
  EXPECT_THROW(check_device(device_count(), "test"), IndexError);
  std::printf("device 0: %s, capability %d.%d, %d SMs, %.1f GiB (%.1f GiB free)\n", p.name.c_str(), p.major, p.minor,
              p.multi_processor_count, double(total_b) / (1 << 30), double(free_b) / (1 << 30));
}

TEST_F(CudaReal, SmallRequestsShareATwoMiBSegment) {
  DataPtr a = alloc().allocate(1000);
  DataPtr b = alloc().allocate(3000);
  EXPECT_EQ(addr(b), addr(a) + 1024);
  DeviceStats s = st();
  EXPECT_EQ(s.num_device_alloc, 1);  // one cuMemAlloc for both
  EXPECT_EQ(s.segment.s[kSmallPool].current, 1);
  EXPECT_EQ(s.reserved_bytes.s[kAll].current, int64_t(2 * MiB));
  EXPECT_EQ(s.allocated_bytes.s[kAll].current, 1024 + 3072);
  EXPECT_EQ(s.requested_bytes.s[kAll].current, 4000);
  EXPECT_EQ(addr(a) % 512, 0u);
}

TEST_F(CudaReal, SplitBlocksMergeWhenFreed) {
  uintptr_t first;
  {
    DataPtr a = alloc().allocate(4 * MiB);
    DataPtr b = alloc().allocate(4 * MiB);
    first = addr(a);
    EXPECT_EQ(addr(b), first + 4 * MiB);
    EXPECT_EQ(st().segment.s[kLargePool].current, 1);
  }
  std::vector<BlockInfo> snap = alloc().snapshot(0);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].size, 20 * MiB);
  EXPECT_EQ(st().inactive_split.s[kAll].current, 0);
  const int64_t device_allocs = st().num_device_alloc;
  DataPtr c = alloc().allocate(18 * MiB);
  EXPECT_EQ(addr(c), first);
  EXPECT_EQ(st().num_device_alloc, device_allocs);
}

TEST_F(CudaReal, FreedBlocksAreReusedOnlyByTheirStream) {
  Stream s1 = new_stream(0);
  uintptr_t on_default;
  { on_default = addr(alloc().allocate_on(5000, 0, default_stream(0))); }
  DataPtr again = alloc().allocate_on(5000, 0, default_stream(0));
  EXPECT_EQ(addr(again), on_default);
  DataPtr other = alloc().allocate_on(5000, 0, s1);
  EXPECT_NE(addr(other), on_default);
}

TEST_F(CudaReal, RecordStreamKeepsTheBlockUntilTheStreamIsDone) {
  Stream s1 = new_stream(0);
  // Enough work on s1 that it is still running when the block is freed (1 GiB of memsets: ~1 ms at 3 TB/s).
  DataPtr big = alloc().allocate_on(256 * MiB, 0, s1);
  DataPtr x = alloc().allocate(8192);
  const uintptr_t px = addr(x);
  alloc().record_stream(x.get(), s1);
  {
    DeviceGuard g(0);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(driver().cuMemsetD8Async(addr(big), uint8_t(i), 256 * MiB, s1.handle), CUDA_SUCCESS);
    ASSERT_EQ(driver().cuMemsetD8Async(px, 7, 8192, s1.handle), CUDA_SUCCESS);
  }
  x.reset();
  const bool s1_done = s1.query();
  DataPtr y = alloc().allocate(8192);
  if (!s1_done) EXPECT_NE(addr(y), px) << "the block was handed out while s1 still used it";
  s1.synchronize();
  y.reset();
  DataPtr z = alloc().allocate(8192);
  DataPtr w = alloc().allocate(8192);
  EXPECT_TRUE(addr(z) == px || addr(w) == px) << "the block did not come back after s1 finished";
}

TEST_F(CudaReal, EmptyCacheReturnsMemoryToTheDriver) {
  { DataPtr a = alloc().allocate(300 * MiB), b = alloc().allocate(100); }
  EXPECT_EQ(st().reserved_bytes.s[kAll].current, int64_t(302 * MiB));
  const size_t free_before = mem_get_info(0).first;
  alloc().empty_cache();
  EXPECT_EQ(st().reserved_bytes.s[kAll].current, 0);
  const size_t free_after = mem_get_info(0).first;
  EXPECT_GE(free_after, free_before + 250 * MiB) << "the driver does not report the released segments as free";
}

TEST_F(CudaReal, OutOfMemoryRaisesWithTheFigures) {
  const size_t total = device_properties(0).total_memory;
  DataPtr keep = alloc().allocate(MiB);
  try {
    DataPtr c = alloc().allocate(2 * total);
    FAIL() << "no OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("CUDA out of memory. Tried to allocate"), std::string::npos) << m;
    EXPECT_NE(m.find("GPU 0 has a total capacity of"), std::string::npos) << m;
    EXPECT_NE(m.find("1.00 MiB is allocated by Strata"), std::string::npos) << m;
  }
  EXPECT_EQ(st().num_ooms, 1);
  EXPECT_EQ(st().num_alloc_retries, 1);
  DataPtr after = alloc().allocate(64 * MiB);  // the device still works
  EXPECT_NE(after.get(), nullptr);
}

TEST_F(CudaReal, StatisticsCountCurrentPeakAndTotals) {
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
  auto m = alloc().memory_stats(0);
  EXPECT_EQ(m.at("allocated_bytes.all.current"), 1024);
  EXPECT_EQ(m.at("reserved_bytes.all.current"), int64_t(2 * MiB));
}

TEST_F(CudaReal, PrivatePoolKeepsItsAddresses) {
  MempoolId id = alloc().new_pool_id();
  alloc().begin_allocate_to_pool(0, id);
  uintptr_t in_pool;
  { in_pool = addr(alloc().allocate(MiB)); }
  alloc().end_allocate_to_pool(0, id);
  DataPtr outside = alloc().allocate(MiB);
  EXPECT_NE(addr(outside), in_pool);
  alloc().begin_allocate_to_pool(0, id);
  DataPtr again = alloc().allocate(MiB);
  alloc().end_allocate_to_pool(0, id);
  EXPECT_EQ(addr(again), in_pool);
  again.reset();
  alloc().release_pool(0, id);
  alloc().release_pool(0, id);
  EXPECT_EQ(st().segment.s[kAll].current, 1);
}

TEST_F(CudaReal, StreamWorkRunsInOrderAndEventsComplete) {
  Stream s = new_stream(0);
  DeviceGuard g(0);
  const size_t n = 64 * MiB;
  DataPtr d = alloc().allocate_on(n, 0, s);
  std::vector<unsigned char> src(n, 3), dst(n, 0);
  ASSERT_EQ(driver().cuMemcpyHtoDAsync(addr(d), src.data(), n, s.handle), CUDA_SUCCESS);
  Event e(true);
  e.record(s);
  ASSERT_EQ(driver().cuMemsetD8Async(addr(d), 9, n, s.handle), CUDA_SUCCESS);
  ASSERT_EQ(driver().cuMemcpyDtoHAsync(dst.data(), addr(d), n, s.handle), CUDA_SUCCESS);
  s.synchronize();
  EXPECT_TRUE(e.query());
  EXPECT_TRUE(s.query());
  EXPECT_EQ(dst[0], 9);
  EXPECT_EQ(dst[n - 1], 9);
}

TEST_F(CudaReal, WaitEventOrdersTwoStreams) {
  Stream producer = new_stream(0), consumer = new_stream(0);
  DeviceGuard g(0);
  const size_t n = 256 * MiB;  // long enough that an unordered copy would read the old bytes
  DataPtr buf = alloc().allocate_on(n, 0, producer);
  DataPtr out = alloc().allocate_on(n, 0, consumer);
  ASSERT_EQ(driver().cuMemsetD8Async(addr(buf), 1, n, producer.handle), CUDA_SUCCESS);
  producer.synchronize();
  for (int i = 2; i <= 5; ++i) ASSERT_EQ(driver().cuMemsetD8Async(addr(buf), uint8_t(i), n, producer.handle), CUDA_SUCCESS);
  Event e;
  e.record(producer);
  consumer.wait(e.handle());
  ASSERT_EQ(driver().cuMemcpyDtoDAsync(addr(out), addr(buf), n, consumer.handle), CUDA_SUCCESS);
  std::vector<unsigned char> host(n);
  ASSERT_EQ(driver().cuMemcpyDtoHAsync(host.data(), addr(out), n, consumer.handle), CUDA_SUCCESS);
  consumer.synchronize();
  EXPECT_EQ(host[0], 5);
  EXPECT_EQ(host[n / 2], 5);
  EXPECT_EQ(host[n - 1], 5);
  EXPECT_TRUE(producer.query());
}

TEST_F(CudaReal, EventTimingMeasuresWork) {
  Stream s = new_stream(0);
  DataPtr big = alloc().allocate_on(512 * MiB, 0, s);
  Event a(true), b(true), untimed(false);
  a.record(s);
  {
    DeviceGuard g(0);
    for (int i = 0; i < 8; ++i) ASSERT_EQ(driver().cuMemsetD8Async(addr(big), uint8_t(i), 512 * MiB, s.handle), CUDA_SUCCESS);
  }
  b.record(s);
  b.synchronize();
  const float ms = a.elapsed_time(b);
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 10000.0f);
  std::printf("4 GiB of memset: %.3f ms (%.0f GB/s)\n", ms, 4.0 * (1 << 30) / (ms * 1e6));
  untimed.record(s);
  EXPECT_THROW(a.elapsed_time(untimed), Error);
}

TEST_F(CudaReal, TensorsMoveBetweenHostAndDevice) {
  Tensor h = arange(Scalar(int64_t(0)), Scalar(int64_t(12)), Scalar(int64_t(1)), ScalarType::Float32);
  Tensor d = to_device(h, Device(DeviceType::CUDA));
  EXPECT_EQ(d.device(), Device(DeviceType::CUDA, 0));
  Tensor back = to_device(d, Device());
  EXPECT_EQ(values(back), values(h));
  const std::vector<int64_t> shape{3, 4};
  Tensor t = to_device(transpose(reshape(d, shape), 0, 1), Device());
  EXPECT_EQ(values(t), values(transpose(reshape(h, shape), 0, 1)));
  Tensor dv = transpose(reshape(d, shape), 0, 1);
  copy_(select(dv, 0, 1), full(std::vector<int64_t>{3}, Scalar(-1.0), ScalarType::Float32));
  std::vector<float> got = values(to_device(d, Device()));
  EXPECT_EQ(got[1], -1.0f);
  EXPECT_EQ(got[5], -1.0f);
  EXPECT_EQ(got[9], -1.0f);
  EXPECT_EQ(got[2], 2.0f);
  // A large round trip, every element checked.
  const int64_t n = int64_t(64) << 20;
  Tensor big = arange(Scalar(int64_t(0)), Scalar(n), Scalar(int64_t(1)), ScalarType::Int32);
  Tensor rt = to_device(to_device(big, Device(DeviceType::CUDA)), Device());
  EXPECT_EQ(std::memcmp(rt.data_ptr(), big.data_ptr(), size_t(n) * 4), 0);
}

TEST_F(CudaReal, PinnedCopiesRoundTrip) {
  Tensor host = pin_memory(full(std::vector<int64_t>{1 << 20}, Scalar(2.5), ScalarType::Float32));
  EXPECT_TRUE(is_pinned(host.data_ptr(), 4 << 20));
  Tensor dev = empty_tensor(std::vector<int64_t>{1 << 20}, ScalarType::Float32, Device(DeviceType::CUDA));
  copy_(dev, host, /*non_blocking=*/true);
  Tensor back = pin_memory(full(std::vector<int64_t>{1 << 20}, Scalar(0.0), ScalarType::Float32));
  copy_(back, dev, /*non_blocking=*/true);
  current_stream(0).synchronize();
  EXPECT_EQ(back.data_ptr<float>()[0], 2.5f);
  EXPECT_EQ(back.data_ptr<float>()[(1 << 20) - 1], 2.5f);
}

TEST_F(CudaReal, PtxKernelLaunchesInStreamOrder) {
  KernelModule mod(kAddIntsPtx, 0, "add_ints PTX");
  CUfunction fn = mod.function("add_ints");
  EXPECT_THROW(mod.function("absent"), Error);
  Stream s = current_stream(0);
  const int n = 1000;
  Tensor t = zeros(std::vector<int64_t>{n}, ScalarType::Int32, Device(DeviceType::CUDA));
  int* p = static_cast<int*>(t.data_ptr());
  int v = 3, count = n;
  void* args[] = {&p, &v, &count};
  launch_kernel(fn, "add_ints", {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, s, args);
  v = 10;  // the first launch took its arguments already
  launch_kernel(fn, "add_ints", {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, s, args);
  Tensor back = to_device(t, Device());
  for (int i = 0; i < n; ++i) ASSERT_EQ(back.data_ptr<int>()[i], 13) << "at " << i;
  EXPECT_THROW(launch_kernel(fn, "add_ints", {1, 1, 1}, {2048, 1, 1}, 0, s, args), Error);
  EXPECT_THROW(launch_kernel(fn, "add_ints", {1, 1, 1}, {32, 1, 1}, 1 << 20, s, args), Error);
}

TEST_F(CudaReal, ThreadsAllocateAndCopyConcurrently) {
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &ok] {
      set_device(0);  // each thread makes the primary context current through the runtime
      std::vector<DataPtr> live;
      for (int i = 0; i < 200; ++i) {
        live.push_back(caching_allocator().allocate(size_t(512) * (1 + (i * 7 + t) % 40)));
        if (i % 3 == 0) live.erase(live.begin());
      }
      Tensor h = full(std::vector<int64_t>{4096}, Scalar(double(t)), ScalarType::Float32);
      Tensor back = to_device(to_device(h, Device(DeviceType::CUDA)), Device());
      ok[t] = back.data_ptr<float>()[4095] == float(t);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(ok[t]) << "thread " << t;
  DeviceStats s = st();
  EXPECT_EQ(s.allocation.s[kAll].current, 0);
  EXPECT_EQ(s.allocated_bytes.s[kAll].current, 0);
  EXPECT_EQ(s.inactive_split.s[kAll].current, 0);
}
