// Loading compiled device code (a cubin or PTX image, e.g. from NVRTC) and launching its kernels on a stream,
// through the driver table (driver_api.h). Works on the fake driver too, whose kernels are host functions
// registered by name (fake_driver.h).
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "backends/cuda/cuda_runtime.h"

namespace strata::cuda {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// A module loaded on one device; unloaded with the object.
class KernelModule {
 public:
  // `image`: a cubin, fatbin or NUL-terminated PTX, as cuModuleLoadData takes it. `what` names it in errors.
  KernelModule(const void* image, int device, std::string what);
  ~KernelModule();
  KernelModule(const KernelModule&) = delete;
  KernelModule& operator=(const KernelModule&) = delete;
  // The kernel `name` (its mangled name for C++ kernels not declared extern "C"); looked up once.
  CUfunction function(const std::string& name);
  int device() const { return device_; }

 private:
  CUmodule module_ = nullptr;
  int device_;
  std::string what_;
  std::mutex mu_;
  std::map<std::string, CUfunction> functions_;
};

// Queues fn on `s` (the current stream of fn's device by default) with `args` (pointers to each argument's
// value, as cuLaunchKernel takes them). Checks the launch shape against the device's limits first, naming
// `name` in the error.
void launch_kernel(CUfunction fn, const char* name, Dim3 grid, Dim3 block, unsigned shared_bytes, const Stream& s,
                   void** args);

}  // namespace strata::cuda
