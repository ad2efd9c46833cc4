// Eager elementwise kernels for CUDA tensors (Note [CUDA eager kernels] in eager_kernels.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace strata::cuda {

// Turns a generated CUDA C source into something launchable. With fake=false it returns the cubin image for the
// kernel `name` (NVRTC, sm_90a); with fake=true the path of a shared object built by g++ from the same source
// under nvrtc_host_emulation.h, which exports `strata_emu_entry` (a fake_driver HostKernel). Installed by the
// Python binding (python/strata/cuda/_eager.py does the work, with its disk cache).
using KernelBuilder = std::function<std::string(const std::string& source, const std::string& name, bool fake)>;
void set_kernel_builder(KernelBuilder b);
bool has_kernel_builder();

// One operand of an elementwise kernel: its data, dtype and byte strides (one per dim of the launch shape).
struct EwOperand {
  char* data = nullptr;
  ScalarType dtype = ScalarType::Float32;
  std::vector<int64_t> strides;  // bytes
};

// Runs `out = expr(x0, x1, ...)` over `shape` on the current stream of `device`. `expr` is C++ over the inputs
// converted to the compute type (x0, x1, x2 of type C = opmath_t<compute>) and the scalars p.a, p.b, p.c
// (double) and p.ia (int64). operands[0] is the output.
void launch_elementwise(const char* op, const std::string& expr, ScalarType compute, const std::vector<int64_t>& shape,
                        const std::vector<EwOperand>& operands, int device, double a = 0, double b = 0, double c = 0,
                        int64_t ia = 0);

// Builds (once) and launches the kernel `name` of `source`, whose one parameter is a struct passed as the bytes of
// `params`, on the current stream of `device` with a 1-d grid.
void launch_generated(const std::string& source, const std::string& name, int device, unsigned grid, unsigned block,
                      std::vector<unsigned char>& params);
// The C++ type name of a dtype in generated sources (nullptr when the eager kernels do not take it).
const char* eager_ctype(ScalarType t);
uint64_t eager_hash(const std::string& s);

// Copies src into dst (both CUDA tensors on dst's device, src broadcastable to dst), converting dtypes, in one
// kernel on the current stream. Returns false when a dtype is not supported by the eager kernels (complex,
// float8), so the caller falls back to the host path.
bool copy_kernel(const Tensor& dst, const Tensor& src);
// fill_ of a CUDA tensor with a real value, one kernel. False for unsupported dtypes or complex values.
bool fill_kernel(const Tensor& dst, const Scalar& value);

// Whether the eager kernels handle this dtype (bool, integers, float16/bfloat16/float32/float64).
bool eager_dtype_supported(ScalarType t);

// Statistics for tests: kernels built (compiled or loaded from the builder) and launches.
int64_t eager_kernels_built();
int64_t eager_launches();

// Copies the device-generic CPU implementations of the ops with CUDA stubs onto the CUDA dispatch key.
void share_pointwise_kernels();
// The same for the reductions and softmax of eager_reductions.cpp (called by share_pointwise_kernels).
void share_reduction_kernels();

}  // namespace strata::cuda
