// Loading device code and launching kernels (kernel_module.h).
#include "backends/cuda/kernel_module.h"

#include "core/error.h"

namespace strata::cuda {

KernelModule::KernelModule(const void* image, int device, std::string what) : device_(device), what_(std::move(what)) {
  STRATA_CHECK(image != nullptr, "KernelModule: no image for ", what_);
  DeviceGuard g(device);
  check(driver().cuModuleLoadData(&module_, image), ("cuModuleLoadData (" + what_ + ")").c_str());
}

KernelModule::~KernelModule() {
  if (!module_) return;
  try {
    DeviceGuard g(device_);
    driver().cuModuleUnload(module_);
  } catch (...) {  // a destructor reports nothing
  }
}

CUfunction KernelModule::function(const std::string& name) {
  std::lock_guard lk(mu_);
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  DeviceGuard g(device_);
  CUfunction fn = nullptr;
  CUresult r = driver().cuModuleGetFunction(&fn, module_, name.c_str());
  STRATA_CHECK(r != CUDA_ERROR_NOT_FOUND, "kernel '", name, "' is not in ", what_,
               " (a C++ kernel needs extern \"C\" or its mangled name)");
  check(r, "cuModuleGetFunction");
  functions_.emplace(name, fn);
  return fn;
}

void launch_kernel(CUfunction fn, const char* name, Dim3 grid, Dim3 block, unsigned shared_bytes, const Stream& s,
                   void** args) {
  const DeviceProperties& p = device_properties(s.device);
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  STRATA_CHECK(grid.x && grid.y && grid.z && threads, "launch of kernel '", name, "': empty grid (", grid.x, ", ",
               grid.y, ", ", grid.z, ") or block (", block.x, ", ", block.y, ", ", block.z, ")");
  STRATA_CHECK(threads <= static_cast<uint64_t>(p.max_threads_per_block), "launch of kernel '", name, "': ",
               threads, " threads per block, more than the ", p.max_threads_per_block, " of ", p.name);
  STRATA_CHECK(grid.y <= 65535 && grid.z <= 65535, "launch of kernel '", name, "': grid (", grid.x, ", ", grid.y,
               ", ", grid.z, ") exceeds 65535 in y or z");
  STRATA_CHECK(shared_bytes <= static_cast<unsigned>(p.shared_memory_per_block_optin), "launch of kernel '", name,
               "': ", shared_bytes, " bytes of shared memory, more than the ", p.shared_memory_per_block_optin,
               " a block of ", p.name, " can have");
  DeviceGuard g(s.device);
  CUresult r = driver().cuLaunchKernel(fn, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, s.handle,
                                       args, nullptr);
  if (r != CUDA_SUCCESS) check(r, (std::string("cuLaunchKernel (") + name + ")").c_str());
}

}  // namespace strata::cuda
