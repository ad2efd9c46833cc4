// Eager reductions (sum, mean, amax/amin/max/min, all/any) and softmax/log_softmax for CUDA tensors: CUDA stubs of
// the device-generic ops in ops/reduction.cpp and ops/reduce_softmax.cpp, rendered and built like the elementwise
// kernels (Note [CUDA eager kernels] in eager_kernels.cpp).
//
// Note [CUDA eager reductions]
// One block per output element (a grid-stride loop over outputs): each thread accumulates a strided slice of the
// reduced elements (ReduceGeom's reduced dims, innermost first), then a __shfl_xor_sync tree per warp, one
// shared-memory exchange between warps and a last pass. Accumulators follow the CPU kernels: float for 16-bit
// floats, double for float64, int64 for integer and bool sums; max/min keep the input type (int for the 8/16-bit
// integers and bool, which the warp shuffle does not take). Softmax: one block per row of a contiguous
// [outer, n, inner] view (row elements inner apart), a max pass, a sum-of-exp pass and a write pass, in opmath.
// The summation order is the GPU's (strided per thread, then a tree), so float sums differ from the CPU's pairwise
// sums in the last bits. Reducing an outer dim with many outputs (a column sum) runs one block per column with
// strided loads: correct, not fast.
#include <string>
#include <vector>

#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/eager_kernels.h"
#include "dispatch/dispatcher.h"
#include "ops/reduce_common.h"

namespace strata::cuda {
namespace {

struct RedOp {
  const char* name;
  const char* ident;    // identity of the accumulator A
  const char* map;      // element (type T, read as v) -> A
  const char* combine;  // (a, b) -> A
  const char* final;    // r -> output value
};

const char* small_int_acc(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
    case ScalarType::UInt8:
    case ScalarType::Int8:
    case ScalarType::Int16: return "int";
    default: return nullptr;
  }
}

std::string acc_type(const char* op, ScalarType in) {
  const std::string o = op;
  if (o == "sum" || o == "mean" || o == "prod") {
    if (is_floating_type(in)) return str("strata::opmath_t<", eager_ctype(in), ">");
    return "int64_t";
  }
  if (o == "all" || o == "any") return "int";
  if (const char* s = small_int_acc(in)) return s;
  return str("strata::opmath_t<", eager_ctype(in), ">");
}

void put8(std::vector<unsigned char>& buf, const void* v) {
  const auto* p = static_cast<const unsigned char*>(v);
  buf.insert(buf.end(), p, p + 8);
}
void put_i(std::vector<unsigned char>& buf, long long v) { put8(buf, &v); }

const char* kBlockReduce =
    "template <typename A, typename F>\n"
    "__device__ __forceinline__ A strata_block_reduce(A v, F f, A* sh) {\n"
    "  for (int m = 16; m > 0; m >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, m));\n"
    "  if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;\n"
    "  __syncthreads();\n"
    "  A r = sh[0];\n"
    "  for (unsigned w = 1; w < (blockDim.x + 31) / 32; ++w) r = f(r, sh[w]);\n"
    "  __syncthreads();\n"
    "  return r;\n"
    "}\n";

std::string emu_entry(const std::string& name, const char* params) {
  return str("#ifdef STRATA_NVRTC_HOST_EMULATION\n#include <functional>\nextern \"C\" std::function<void()> "
             "strata_emu_entry(void** params, unsigned grid, unsigned block) {\n  ",
             params, " p = *static_cast<", params, "*>(params[0]);\n  return [p, grid, block] { strata_emu::launch(grid, "
             "block, [&] { ", name, "(p); }); };\n}\n#endif\n");
}

// Finishes a kernel source s whose entry has `body` (the __global__ entry named after stem and the source's hash,
// and the host emulation's entry) and launches it over `rows` rows, a block per row (fewer threads and blocks on
// the fake driver, whose emulation runs a host thread per GPU thread).
void launch_row_kernel(std::string s, const std::string& body, const char* stem, const char* params, int64_t rows,
                       int device, std::vector<unsigned char>& buf) {
  const std::string name = str("strata_eager_", stem, "_", std::hex, eager_hash(s + body));
  s += str("extern \"C\" __global__ void __launch_bounds__(256) ", name, "(", params, " p) {\n", body, "}\n");
  s += emu_entry(name, params);
  const bool fake = driver().is_fake;
  const unsigned block = fake ? 32 : 256;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, fake ? 2 : 65536));
  launch_generated(s, name, device, grid, block, buf);
}

// Decomposes `idx` over dims (sizes/strides arrays named in the params), adding to the offsets listed.
std::string decompose(const char* idx, int nd, const char* sizes, std::initializer_list<std::pair<const char*, const char*>>
                                                                     offs) {
  std::string s = str("      { I r = ", idx, ";\n");
  for (int d = 0; d < nd; ++d) {
    s += str("        { const I sz = static_cast<I>(p.", sizes, "[", d, "]); const I k = ", d + 1 < nd ? "r % sz" : "r",
             ";", d + 1 < nd ? " r /= sz;" : "");
    for (auto& [off, st] : offs) s += str(" ", off, " += k * static_cast<I>(p.", st, "[", d, "]);");
    s += " }\n";
  }
  return s + "      }\n";
}

void run_reduce(const RedOp& op, const Tensor& in, const Tensor& out, const ReduceGeom& g) {
  STRATA_CHECK_T(NotImplementedError,
                 eager_ctype(in.dtype()) && eager_ctype(out.dtype()), op.name, ": the CUDA kernels do not support ",
               dtype_name(in.dtype()), " yet");
  if (g.nout == 0) return;
  const int K = static_cast<int>(g.keep_sizes.size()), R = static_cast<int>(g.red_sizes.size());
  int64_t span = 1;
  for (int d = 0; d < K; ++d) span += (g.keep_sizes[d] - 1) * std::abs(g.keep_in[d]);
  for (int d = 0; d < R; ++d) span += (g.red_sizes[d] - 1) * std::abs(g.red_in[d]);
  const bool idx32 = span < (int64_t(1) << 30) && g.nout < (int64_t(1) << 30);
  const std::string A = acc_type(op.name, in.dtype());
  std::string s = str("// Strata eager CUDA reduction: ", op.name,
                      " (src/backends/cuda/eager_reductions.cpp)\n#include <cstdint>\n#include <limits>\n"
                      "#include \"ops/pointwise_functors.h\"\n",
                      kBlockReduce, "namespace strata_eager_r {\nstruct Params {\n  const char* in;\n  char* out;\n",
                      "  long long ks[", K, "], ki[", K, "], ko[", K, "];\n  long long rs[", R, "], ri[", R,
                      "];\n  long long nout, nred;\n};\n}\n");
  std::string body = str("  using I = ", idx32 ? "int" : "long long", ";\n  using T = ", eager_ctype(in.dtype()),
                         ";\n  using O = ", eager_ctype(out.dtype()), ";\n  using A = ", A, ";\n",
                         "  struct Combine { __device__ A operator()(A a, A b) const { return ", op.combine, "; } };\n",
                         "  __shared__ A sh[32];\n  const T* in = reinterpret_cast<const T*>(p.in);\n",
                         "  O* out = reinterpret_cast<O*>(p.out);\n  const I nred = static_cast<I>(p.nred);\n",
                         "  for (I o = static_cast<I>(blockIdx.x); o < static_cast<I>(p.nout); o += static_cast<I>(gridDim.x)) {\n",
                         "      I ioff = 0, ooff = 0;\n", decompose("o", K, "ks", {{"ioff", "ki"}, {"ooff", "ko"}}),
                         "    A acc = ", op.ident, ";\n",
                         "    for (I j = static_cast<I>(threadIdx.x); j < nred; j += static_cast<I>(blockDim.x)) {\n",
                         "      I off = ioff;\n", decompose("j", R, "rs", {{"off", "ri"}}), "      const T v = in[off];\n",
                         "      acc = Combine{}(acc, ", op.map, ");\n    }\n",
                         "    const A r = strata_block_reduce(acc, Combine{}, sh);\n",
                         "    if (threadIdx.x == 0) out[ooff] = static_cast<O>(", op.final, ");\n  }\n");
  std::vector<unsigned char> buf;
  const char* pin = static_cast<const char*>(in.data_ptr());
  char* pout = static_cast<char*>(out.data_ptr());
  put8(buf, &pin);
  put8(buf, &pout);
  for (int d = 0; d < K; ++d) put_i(buf, g.keep_sizes[d]);
  for (int d = 0; d < K; ++d) put_i(buf, g.keep_in[d]);
  for (int d = 0; d < K; ++d) put_i(buf, g.keep_out[d]);
  for (int d = 0; d < R; ++d) put_i(buf, g.red_sizes[d]);
  for (int d = 0; d < R; ++d) put_i(buf, g.red_in[d]);
  put_i(buf, g.nout);
  put_i(buf, g.nred);
  launch_row_kernel(std::move(s), body, op.name, "strata_eager_r::Params", g.nout, out.device().index, buf);
}

const RedOp kSum{"sum", "A(0)", "static_cast<A>(static_cast<strata::opmath_t<T>>(v))", "a + b", "r"};
const RedOp kProd{"prod", "A(1)", "static_cast<A>(static_cast<strata::opmath_t<T>>(v))", "a * b", "r"};
const RedOp kMean{"mean", "A(0)", "static_cast<A>(static_cast<strata::opmath_t<T>>(v))", "a + b",
                  "r / static_cast<A>(p.nred)"};
const RedOp kMax{"amax", "std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity() : "
                         "std::numeric_limits<A>::lowest()",
                 "static_cast<A>(static_cast<strata::opmath_t<T>>(v))", "strata::fn::Maximum{}(a, b)", "r"};
const RedOp kMin{"amin", "std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity() : "
                         "std::numeric_limits<A>::max()",
                 "static_cast<A>(static_cast<strata::opmath_t<T>>(v))", "strata::fn::Minimum{}(a, b)", "r"};
const RedOp kAll{"all", "1", "(static_cast<strata::opmath_t<T>>(v) != 0 ? 1 : 0)", "(a != 0 && b != 0) ? 1 : 0",
                 "r != 0"};
const RedOp kAny{"any", "0", "(static_cast<strata::opmath_t<T>>(v) != 0 ? 1 : 0)", "(a != 0 || b != 0) ? 1 : 0",
                 "r != 0"};

void sum_cuda(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) { run_reduce(kSum, in, out, g); }
void prod_cuda(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) { run_reduce(kProd, in, out, g); }
void mean_cuda(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) { run_reduce(kMean, in, out, g); }
void max_cuda(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) { run_reduce(kMax, in, out, g); }
void min_cuda(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) { run_reduce(kMin, in, out, g); }
void all_cuda(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) { run_reduce(kAll, in, out, g); }
void any_cuda(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) { run_reduce(kAny, in, out, g); }

void softmax_cuda(const Tensor& in, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool log) {
  STRATA_CHECK_T(NotImplementedError,
                 eager_ctype(in.dtype()), log ? "log_softmax" : "softmax", ": the CUDA kernels do not support ",
               dtype_name(in.dtype()), " yet");
  const int64_t rows = outer * inner;
  if (rows == 0 || n == 0) return;
  const bool idx32 = outer * n * inner < (int64_t(1) << 30);
  std::string s = str("// Strata eager CUDA ", log ? "log_softmax" : "softmax",
                      " (src/backends/cuda/eager_reductions.cpp)\n#include <cstdint>\n#include <cmath>\n#include <limits>\n"
                      "#include \"ops/pointwise_functors.h\"\n",
                      kBlockReduce,
                      "namespace strata_eager_s {\nstruct Params {\n  const char* in;\n  char* out;\n  long long rows, n, "
                      "inner;\n};\n}\n");
  std::string body = str(
      "  using I = ", idx32 ? "int" : "long long", ";\n  using T = ", eager_ctype(in.dtype()),
      ";\n  using A = strata::opmath_t<T>;\n",
      "  struct Max { __device__ A operator()(A a, A b) const { return strata::fn::Maximum{}(a, b); } };\n",
      "  struct Sum { __device__ A operator()(A a, A b) const { return a + b; } };\n",
      "  __shared__ A sh[32];\n  const T* in = reinterpret_cast<const T*>(p.in);\n",
      "  T* out = reinterpret_cast<T*>(p.out);\n  const I n = static_cast<I>(p.n), inner = static_cast<I>(p.inner);\n",
      "  for (I row = static_cast<I>(blockIdx.x); row < static_cast<I>(p.rows); row += static_cast<I>(gridDim.x)) {\n",
      "    const I base = (row / inner) * n * inner + row % inner;\n",
      "    A m = -std::numeric_limits<A>::infinity();\n",
      "    for (I j = static_cast<I>(threadIdx.x); j < n; j += static_cast<I>(blockDim.x)) m = Max{}(m, "
      "static_cast<A>(in[base + j * inner]));\n",
      "    m = strata_block_reduce(m, Max{}, sh);\n", "    A z = A(0);\n",
      "    for (I j = static_cast<I>(threadIdx.x); j < n; j += static_cast<I>(blockDim.x)) z += "
      "std::exp(static_cast<A>(in[base + j * inner]) - m);\n",
      "    z = strata_block_reduce(z, Sum{}, sh);\n",
      log ? "    const A lz = std::log(z);\n" : "",
      "    for (I j = static_cast<I>(threadIdx.x); j < n; j += static_cast<I>(blockDim.x)) {\n",
      "      const A x = static_cast<A>(in[base + j * inner]) - m;\n",
      log ? "      out[base + j * inner] = static_cast<T>(x - lz);\n" : "      out[base + j * inner] = static_cast<T>(std::exp(x) / z);\n",
      "    }\n  }\n");
  std::vector<unsigned char> buf;
  const char* pin = static_cast<const char*>(in.data_ptr());
  char* pout = static_cast<char*>(out.data_ptr());
  put8(buf, &pin);
  put8(buf, &pout);
  put_i(buf, rows);
  put_i(buf, n);
  put_i(buf, inner);
  launch_row_kernel(std::move(s), body, log ? "log_softmax" : "softmax", "strata_eager_s::Params", rows,
                    out.device().index, buf);
}

// max/min over a dim with indices, argmax/argmin: one block per row of the contiguous [outer, n, inner] view.
// The first index of the best value wins; NaN is better than every number (as on the CPU).
void arg_reduce_cuda(const Tensor& in, const Tensor& values, const Tensor& indices, int64_t outer, int64_t n,
                     int64_t inner, bool is_max) {
  const char* op = is_max ? "argmax" : "argmin";
  STRATA_CHECK_T(NotImplementedError,
                 eager_ctype(in.dtype()), op, ": the CUDA kernels do not support ", dtype_name(in.dtype()), " yet");
  const int64_t rows = outer * inner;
  if (rows == 0 || n == 0) return;
  const bool idx32 = outer * n * inner < (int64_t(1) << 30);
  const char* acc = small_int_acc(in.dtype());
  std::string s = str("// Strata eager CUDA ", op, " (src/backends/cuda/eager_reductions.cpp)\n#include <cstdint>\n"
                      "#include \"ops/pointwise_functors.h\"\n",
                      "namespace strata_eager_a {\nstruct Params {\n  const char* in;\n  char* values;\n  char* indices;\n"
                      "  long long rows, n, inner;\n};\n}\n");
  std::string body = str(
      "  using I = ", idx32 ? "int" : "long long", ";\n  using T = ", eager_ctype(in.dtype()), ";\n  using A = ",
      acc ? acc : str("strata::opmath_t<T>"), ";\n",
      "  // (a, ia) better than (b, ib)? ib < 0 is 'nothing yet'.\n",
      "  struct Better { __device__ bool operator()(A a, long long ia, A b, long long ib) const {\n",
      "    if (ia < 0) return false;\n    if (ib < 0) return true;\n",
      "    const bool na = a != a, nb = b != b;\n    if (na || nb) return na && (!nb || ia < ib);\n",
      "    if (", is_max ? "a > b" : "a < b", ") return true;\n    return a == b && ia < ib;\n  } };\n",
      "  __shared__ A sv[32];\n  __shared__ long long si[32];\n",
      "  const T* in = reinterpret_cast<const T*>(p.in);\n  T* values = reinterpret_cast<T*>(p.values);\n",
      "  long long* indices = reinterpret_cast<long long*>(p.indices);\n",
      "  const I n = static_cast<I>(p.n), inner = static_cast<I>(p.inner);\n",
      "  for (I row = static_cast<I>(blockIdx.x); row < static_cast<I>(p.rows); row += static_cast<I>(gridDim.x)) {\n",
      "    const I base = (row / inner) * n * inner + row % inner;\n",
      "    A v = A(0);\n    long long bi = -1;\n",
      "    for (I j = static_cast<I>(threadIdx.x); j < n; j += static_cast<I>(blockDim.x)) {\n",
      "      const A x = static_cast<A>(static_cast<strata::opmath_t<T>>(in[base + j * inner]));\n",
      "      if (Better{}(x, j, v, bi)) { v = x; bi = j; }\n    }\n",
      "    for (int m = 16; m > 0; m >>= 1) {\n",
      "      const A ov = __shfl_xor_sync(0xffffffffu, v, m);\n",
      "      const long long oi = __shfl_xor_sync(0xffffffffu, bi, m);\n",
      "      if (Better{}(ov, oi, v, bi)) { v = ov; bi = oi; }\n    }\n",
      "    if (threadIdx.x % 32 == 0) { sv[threadIdx.x / 32] = v; si[threadIdx.x / 32] = bi; }\n",
      "    __syncthreads();\n",
      "    if (threadIdx.x == 0) {\n",
      "      for (unsigned w = 1; w < (blockDim.x + 31) / 32; ++w) if (Better{}(sv[w], si[w], v, bi)) { v = sv[w]; bi = si[w]; }\n",
      "      indices[row] = bi;\n      if (values) values[row] = in[base + static_cast<I>(bi) * inner];\n    }\n",
      "    __syncthreads();\n  }\n");
  std::vector<unsigned char> buf;
  const char* pin = static_cast<const char*>(in.data_ptr());
  char* pv = values.defined() ? static_cast<char*>(values.data_ptr()) : nullptr;
  char* pi = static_cast<char*>(indices.data_ptr());
  put8(buf, &pin);
  put8(buf, &pv);
  put8(buf, &pi);
  put_i(buf, rows);
  put_i(buf, n);
  put_i(buf, inner);
  launch_row_kernel(std::move(s), body, op, "strata_eager_a::Params", rows, indices.device().index, buf);
}

const StubRegistrar<ArgReduceFn> r_arg(arg_reduce_stub, DeviceType::CUDA, arg_reduce_cuda);
const StubRegistrar<ReduceFn> r_sum(reduce_sum_stub, DeviceType::CUDA, sum_cuda);
const StubRegistrar<ReduceFn> r_prod(reduce_prod_stub, DeviceType::CUDA, prod_cuda);
const StubRegistrar<ReduceFn> r_mean(reduce_mean_stub, DeviceType::CUDA, mean_cuda);
const StubRegistrar<ReduceFn> r_max(reduce_max_stub, DeviceType::CUDA, max_cuda);
const StubRegistrar<ReduceFn> r_min(reduce_min_stub, DeviceType::CUDA, min_cuda);
const StubRegistrar<ReduceFn> r_all(reduce_all_stub, DeviceType::CUDA, all_cuda);
const StubRegistrar<ReduceFn> r_any(reduce_any_stub, DeviceType::CUDA, any_cuda);
const StubRegistrar<SoftmaxFn> r_softmax(softmax_stub, DeviceType::CUDA, softmax_cuda);

}  // namespace

void share_reduction_kernels() {
  Dispatcher& d = Dispatcher::get();
  for (const char* name : {"sum", "prod", "mean", "amax", "amin", "max", "min", "max.dim", "min.dim", "argmax", "argmin", "all", "any",
                           "softmax", "log_softmax"}) {
    OperatorEntry* op = d.find(name);
    if (!op || op->has_registered(DispatchKey::CUDA) || !op->has_registered(DispatchKey::CPU)) continue;
    d.register_kernel(*op, DispatchKey::CUDA, op->kernel_for(DispatchKey::CPU));
  }
}

}  // namespace strata::cuda
