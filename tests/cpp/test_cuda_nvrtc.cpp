// src/backends/cuda/nvrtc_runtime: the NVRTC function table fails cleanly where the library is missing (every
// machine), and compiles to PTX and an sm_90a cubin where $STRATA_NVRTC_DIR names the wheel's lib directory
// (tests/python/compile/test_cuda_codegen.py covers the generated kernels through Python).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backends/cuda/nvrtc_runtime.h"
#include "core/error.h"

namespace nv = strata::cuda::nvrtc;

TEST(CudaNvrtc, MissingLibraryRaisesNamingTheFile) {
  if (nv::loaded()) GTEST_SKIP() << "NVRTC already loaded in this process";
  try {
    nv::load("/nonexistent-strata-nvrtc-dir");
    FAIL() << "load succeeded from a directory that does not exist";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-strata-nvrtc-dir/libnvrtc-builtins.so.13.0"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(nv::loaded());
  EXPECT_THROW(nv::compile("extern \"C\" __global__ void k() {}", "k", "sm_90a", {}), strata::Error);
}

TEST(CudaNvrtc, CompilesToPtxAndCubinWhereInstalled) {
  const char* dir = std::getenv("STRATA_NVRTC_DIR");
  if (!dir) GTEST_SKIP() << "set STRATA_NVRTC_DIR to nvidia/cu13/lib to run";
  nv::load(dir);
  EXPECT_EQ(nv::version().first, 13);
  const auto c = nv::compile("extern \"C\" __global__ void twice(float* a) { a[threadIdx.x] *= 2.0f; }", "twice",
                             "sm_90a", {"--ptxas-options=-v"});
  EXPECT_NE(c.ptx.find(".entry twice"), std::string::npos);
  ASSERT_GE(c.cubin.size(), 4u);
  EXPECT_EQ(c.cubin.substr(0, 4), std::string("\x7f" "ELF"));
  EXPECT_NE(c.log.find("0 bytes spill stores"), std::string::npos) << c.log;
  try {
    nv::compile("extern \"C\" __global__ void bad(float* a) { a[0] = missing; }", "bad_kernel", "sm_90a", {});
    FAIL() << "a compile error did not raise";
  } catch (const strata::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("kernel bad_kernel failed to compile"), std::string::npos) << m;
    EXPECT_NE(m.find("missing"), std::string::npos) << m;
  }
  EXPECT_THROW(nv::compile("", "k", "compute_90a", {}), strata::ValueError);
}
