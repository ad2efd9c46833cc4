// Eager elementwise kernels for CUDA tensors.
//
// Note [CUDA eager kernels]
// The ops keep their device-generic implementations (ops/pointwise.cpp, ops/nn_activation.cpp: TensorIterator
// broadcasts, promotes, allocates or checks out=, flattens the geometry); what the CUDA backend adds is the stub
// each of them calls (Note [Kernel stubs]). A CUDA stub renders one kernel for (op, operand dtypes, compute dtype,
// number of dims, 32/64-bit index math), CUDA C that includes ops/pointwise_functors.h and ops/nn_functors.h, the
// functors the CPU loops use, so eager CPU and CUDA agree by construction. The source is built at the first use
// of that combination (KernelBuilder: NVRTC to an sm_90a cubin, cached in memory and on disk by
// python/strata/_inductor/cuda_compile.py), loaded with KernelModule per device and launched with launch_kernel
// on the current stream. Under the fake driver the builder compiles the same source with g++ and
// nvrtc_host_emulation.h into a shared object whose entry is registered with fake::register_kernel under the
// kernel's name: the generated kernel itself runs (emulated, block by block) when the stream reaches it.
//
// The kernel is a grid-stride loop over the output's linear index; each operand's byte offset comes from dividing
// the index by the (flattened) sizes, innermost first. int32 index math when the element count and every
// operand's byte span are below 2^30, int64 otherwise. No vector loads yet (the compiler's pointwise renderer,
// python/strata/_inductor/cuda.py, has them; eager kernels do not).
//
// CPU 0-d operands (Python numbers, 0-d CPU tensors) are copied to the device first (a 0-d device tensor that the
// caching allocator reuses in stream order).
#include "backends/cuda/eager_kernels.h"

#include <dlfcn.h>

#include <atomic>
#include <map>
#include <unordered_map>
#include <memory>
#include <mutex>

#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/fake_driver.h"
#include "backends/cuda/kernel_module.h"
#include "dispatch/dispatcher.h"
#include "ops/ops.h"
#include "ops/pointwise.h"
#include "ops/stub.h"
#include "ops/tensor_iterator.h"

namespace strata::cuda {

namespace {

std::mutex g_mu;
KernelBuilder g_builder;
std::atomic<int64_t> g_built{0}, g_launches{0};

const char* ctype(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "bool";
    case ScalarType::UInt8: return "uint8_t";
    case ScalarType::Int8: return "int8_t";
    case ScalarType::Int16: return "int16_t";
    case ScalarType::Int32: return "int32_t";
    case ScalarType::Int64: return "int64_t";
    case ScalarType::Float16: return "strata::Half";
    case ScalarType::BFloat16: return "strata::BFloat16";
    case ScalarType::Float32: return "float";
    case ScalarType::Float64: return "double";
    default: return nullptr;
  }
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A built kernel: the module per device (kept for the process) and the function in it.
struct Built {
  std::string name;
  std::string image;  // cubin, or a placeholder for the fake driver
  std::map<int, std::unique_ptr<KernelModule>> modules;
  std::map<int, CUfunction> fns;
};
// Keyed by the kernel's name, which ends with a 64-bit hash of its source.
std::unordered_map<std::string, std::unique_ptr<Built>>& cache() {
  static auto* m = new std::unordered_map<std::string, std::unique_ptr<Built>>();
  return *m;
}

CUfunction get_kernel(const std::string& source, const std::string& name, int device) {
  std::unique_lock<std::mutex> lk(g_mu);
  auto& c = cache();
  auto it = c.find(name);
  if (it == c.end()) {
    STRATA_CHECK(g_builder, "CUDA eager kernel ", name, ": no kernel builder is installed (strata._C installs one; "
                 "C++ programs without Python cannot build eager CUDA kernels yet)");
    KernelBuilder b = g_builder;
    const bool fake = driver().is_fake;
    lk.unlock();  // the builder may take seconds (NVRTC or g++) and calls into Python
    std::string r = b(source, name, fake);
    auto built = std::make_unique<Built>();
    built->name = name;
    if (fake) {
      void* h = dlopen(r.c_str(), RTLD_NOW | RTLD_LOCAL);
      STRATA_CHECK(h, "CUDA eager kernel ", name, ": cannot load its host emulation ", r, ": ", dlerror());
      auto entry = reinterpret_cast<fake::HostKernel>(dlsym(h, "strata_emu_entry"));
      STRATA_CHECK(entry, "CUDA eager kernel ", name, ": ", r, " has no strata_emu_entry");
      fake::register_kernel(name, entry);
      built->image = "strata fake module";
    } else {
      built->image = std::move(r);
    }
    ++g_built;
    lk.lock();
    it = c.emplace(name, std::move(built)).first;  // a racing builder's result is dropped
  }
  Built& b = *it->second;
  auto f = b.fns.find(device);
  if (f != b.fns.end()) return f->second;
  auto mod = std::make_unique<KernelModule>(b.image.data(), device, "CUDA eager kernel " + b.name);
  CUfunction fn = mod->function(b.name);
  b.modules.emplace(device, std::move(mod));
  b.fns.emplace(device, fn);
  return fn;
}

struct Rendered {
  std::string source, name;
};

// vec > 0: every operand is contiguous ('c' in kinds) or a single broadcast value ('s') over one dim; the kernel
// then moves `vec` elements per access (16 bytes for the widest contiguous operand) when every contiguous pointer is
// aligned to its vector, and finishes (or, misaligned, does everything) with the scalar loop.
std::string render(const char* op, const std::string& expr, ScalarType compute, int nd, bool idx32,
                   const std::vector<EwOperand>& ops, std::string& name, int vec, const std::string& kinds) {
  const int nop = static_cast<int>(ops.size());
  const int dcap = nd > 0 ? nd : 1;
  std::string s;
  s += "// Strata eager CUDA kernel: ";
  s += op;
  s += " (src/backends/cuda/eager_kernels.cpp)\n#include <cstdint>\n#include \"ops/pointwise_functors.h\"\n"
       "#include \"ops/nn_functors.h\"\n#include \"ops/activation_backward_functors.h\"\n";
  if (vec > 0) s += "template <typename T, int V>\nstruct alignas(sizeof(T) * V) StrataVec {\n  T a[V];\n};\n";
  s += str("namespace strata_eager {\nstruct Params {\n  char* data[", nop, "];\n  long long sizes[", dcap,
           "];\n  long long strides[", nop, "][", dcap, "];\n  long long n;\n  double a, b, c;\n  long long ia;\n};\n}\n");
  name = str("strata_eager_", op, "_");
  std::string body;
  body += str("  using I = ", idx32 ? "int" : "long long", ";\n  using C = strata::opmath_t<", ctype(compute), ">;\n");
  body += "  const I n = static_cast<I>(p.n);\n  I start = 0;\n";
  body += "  const I tid = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x);\n"
          "  const I step = static_cast<I>(blockDim.x) * static_cast<I>(gridDim.x);\n";
  if (vec > 0) {
    body += str("  constexpr int V = ", vec, ";\n  bool aligned = true;\n");
    for (int o = 0; o < nop; ++o) {
      if (kinds[o] == 'c')
        body += str("  aligned = aligned && reinterpret_cast<unsigned long long>(p.data[", o, "]) % (sizeof(",
                    ctype(ops[o].dtype), ") * V) == 0;\n");
      else
        body += str("  const C s", o, " = static_cast<C>(*reinterpret_cast<const ", ctype(ops[o].dtype), "*>(p.data[", o,
                    "]));\n");
    }
    body += "  if (aligned) {\n    const I nv = n / V;\n    for (I v = tid; v < nv; v += step) {\n";
    for (int o = 1; o < nop; ++o)
      if (kinds[o] == 'c')
        body += str("      const StrataVec<", ctype(ops[o].dtype), ", V> v", o, " = reinterpret_cast<const StrataVec<",
                    ctype(ops[o].dtype), ", V>*>(p.data[", o, "])[v];\n");
    body += str("      StrataVec<", ctype(ops[0].dtype), ", V> r;\n#pragma unroll\n      for (int l = 0; l < V; ++l) {\n");
    for (int o = 1; o < nop; ++o)
      body += kinds[o] == 'c' ? str("        const C x", o - 1, " = static_cast<C>(v", o, ".a[l]);\n")
                              : str("        const C x", o - 1, " = s", o, ";\n");
    body += str("        r.a[l] = static_cast<", ctype(ops[0].dtype), ">(", expr, ");\n      }\n");
    body += str("      reinterpret_cast<StrataVec<", ctype(ops[0].dtype), ", V>*>(p.data[0])[v] = r;\n    }\n");
    body += "    start = nv * V;\n  }\n";
  }
  body += "  for (I i = start + tid; i < n; i += step) {\n";
  for (int o = 0; o < nop; ++o) body += str("    I o", o, " = 0;\n");
  if (nd == 1) {
    for (int o = 0; o < nop; ++o) body += str("    o", o, " = i * static_cast<I>(p.strides[", o, "][0]);\n");
  } else if (nd > 1) {
    body += "    I r = i;\n";
    for (int d = 0; d < nd; ++d) {
      body += str("    {\n      const I s = static_cast<I>(p.sizes[", d, "]);\n      const I k = ", d + 1 < nd ? "r % s" : "r",
                  ";\n");
      if (d + 1 < nd) body += "      r /= s;\n";
      for (int o = 0; o < nop; ++o) body += str("      o", o, " += k * static_cast<I>(p.strides[", o, "][", d, "]);\n");
      body += "    }\n";
    }
  }
  for (int o = 1; o < nop; ++o)
    body += str("    const C x", o - 1, " = static_cast<C>(*reinterpret_cast<const ", ctype(ops[o].dtype),
                "*>(p.data[", o, "] + o", o, "));\n");
  body += str("    *reinterpret_cast<", ctype(ops[0].dtype), "*>(p.data[0] + o0) = static_cast<", ctype(ops[0].dtype),
              ">(", expr, ");\n  }\n");
  name += str(std::hex, fnv1a(s + body + expr));
  s += str("extern \"C\" __global__ void __launch_bounds__(256) ", name, "(strata_eager::Params p) {\n", body, "}\n");
  // The host-emulation entry (nvrtc_host_emulation.h defines STRATA_NVRTC_HOST_EMULATION): a fake-driver kernel.
  s += str("#ifdef STRATA_NVRTC_HOST_EMULATION\n#include <functional>\nextern \"C\" std::function<void()> "
           "strata_emu_entry(void** params, unsigned grid, unsigned block) {\n  strata_eager::Params p = "
           "*static_cast<strata_eager::Params*>(params[0]);\n  return [p, grid, block] { strata_emu::launch(grid, "
           "block, [&] { ",
           name, "(p); }); };\n}\n#endif\n");
  return s;
}

int64_t span_bytes(const std::vector<int64_t>& shape, const EwOperand& o, ScalarType) {
  int64_t e = element_size(o.dtype);
  for (size_t d = 0; d < shape.size(); ++d) e += (shape[d] - 1) * std::abs(o.strides[d]);
  return e;
}

}  // namespace

void set_kernel_builder(KernelBuilder b) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_builder = std::move(b);
}

bool eager_dtype_supported(ScalarType t) { return ctype(t) != nullptr; }
const char* eager_ctype(ScalarType t) { return ctype(t); }
uint64_t eager_hash(const std::string& s) { return fnv1a(s); }
int64_t eager_kernels_built() { return g_built.load(); }
int64_t eager_launches() { return g_launches.load(); }

void launch_elementwise(const char* op, const std::string& expr, ScalarType compute, const std::vector<int64_t>& shape,
                        const std::vector<EwOperand>& operands, int device, double a, double b, double c, int64_t ia) {
  STRATA_CHECK_T(NotImplementedError,
                 ctype(compute), op, ": the CUDA kernels do not support ", dtype_name(compute), " yet");
  for (const auto& o : operands)
    STRATA_CHECK_T(NotImplementedError,
                 ctype(o.dtype), op, ": the CUDA kernels do not support ", dtype_name(o.dtype), " tensors yet");
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (n == 0) return;
  const int nd = static_cast<int>(shape.size());
  bool idx32 = n < (int64_t(1) << 30);
  for (const auto& o : operands) idx32 = idx32 && span_bytes(shape, o, o.dtype) < (int64_t(1) << 30);
  // Negative strides (flip views) would need signed offsets: int math is signed, so they work with either width.
  // Rendering costs more than the launch: sources are kept per (op, expr, dtypes, dims, index width).
  // Contiguity class: one dim with every operand contiguous or a broadcast value -> the vector path.
  std::string kinds;
  size_t widest = 0;
  bool vec_ok = nd == 1 && n >= 2;
  for (size_t o = 0; o < operands.size(); ++o) {
    const int64_t es = static_cast<int64_t>(element_size(operands[o].dtype));
    const char k = nd == 1 && operands[o].strides[0] == es ? 'c' : nd == 1 && o > 0 && operands[o].strides[0] == 0 ? 's' : 'g';
    kinds += k;
    vec_ok = vec_ok && k != 'g';
    if (k == 'c') widest = std::max(widest, static_cast<size_t>(es));
  }
  const int vec = vec_ok && widest > 0 ? static_cast<int>(16 / widest) : 0;
  std::string key = str(op, '\0', expr, '\0', static_cast<int>(compute), ':', nd, ':', idx32, ':', vec, kinds);
  for (const auto& o : operands) key += static_cast<char>('A' + static_cast<int>(o.dtype));
  const Rendered* r;
  {
    static auto* rendered = new std::unordered_map<std::string, Rendered>();
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = rendered->find(key);
    if (it == rendered->end()) {
      Rendered x;
      x.source = render(op, expr, compute, nd, idx32, operands, x.name, vec, kinds);
      it = rendered->emplace(std::move(key), std::move(x)).first;
    }
    r = &it->second;  // entries are never erased; unordered_map keeps element addresses on rehash
  }
  const std::string& src = r->source;
  const std::string& name = r->name;
  // Packs the kernel's Params struct (its layout: data[nop], sizes[dcap], strides[nop][dcap], n, a, b, c, ia).
  const int nop = static_cast<int>(operands.size());
  const int dcap = nd > 0 ? nd : 1;
  std::vector<unsigned char> buf(static_cast<size_t>(nop + dcap + nop * dcap + 5) * 8, 0);
  auto put = [&](size_t slot, const void* v) { std::memcpy(buf.data() + slot * 8, v, 8); };
  size_t k = 0;
  for (int o = 0; o < nop; ++o) put(k++, &operands[o].data);
  for (int d = 0; d < dcap; ++d) {
    long long v = d < nd ? shape[d] : 1;
    put(k++, &v);
  }
  for (int o = 0; o < nop; ++o)
    for (int d = 0; d < dcap; ++d) {
      long long v = d < nd ? operands[o].strides[d] : 0;
      put(k++, &v);
    }
  long long nn = n;
  put(k++, &nn);
  put(k++, &a);
  put(k++, &b);
  put(k++, &c);
  long long iav = ia;
  put(k++, &iav);
  const bool fake = driver().is_fake;
  // The fake driver runs each GPU thread as a host thread: a small grid keeps the emulation quick (the kernel is a
  // grid-stride loop, so any grid covers n).
  const unsigned block = fake ? 32 : 256;
  const int64_t want = ((vec > 0 ? n / vec + vec : n) + block - 1) / block;
  const int64_t cap = fake ? 2 : (int64_t(1) << 26) / block;
  const unsigned grid = static_cast<unsigned>(std::max<int64_t>(1, std::min(want, cap)));
  launch_generated(src, name, device, grid, block, buf);
}

void launch_generated(const std::string& source, const std::string& name, int device, unsigned grid, unsigned block,
                      std::vector<unsigned char>& params) {
  DeviceGuard g(device);
  CUfunction fn = get_kernel(source, name, device);
  void* args[] = {params.data()};
  launch_kernel(fn, name.c_str(), Dim3{grid, 1, 1}, Dim3{block, 1, 1}, 0, current_stream(device), args);
  ++g_launches;
}

namespace {

// A CPU 0-d operand as a device tensor (Note [CUDA eager kernels]).
Tensor to_device_scalar(const Tensor& t, int device) {
  Tensor d = empty_tensor(std::vector<int64_t>{}, t.dtype(), Device(DeviceType::CUDA, device));
  copy_(d, t, true);
  return d;
}

// Runs the iterator's geometry with `expr`; compute is the type the functor sees (opmath of it).
void run_it(const char* op, TensorIterator& it, const std::string& expr, const PwArgs& a,
            std::optional<ScalarType> compute = std::nullopt) {
  const int dev = it.output().device().index;
  const int nd = it.ndim();
  std::vector<int64_t> shape(it.shape().begin(), it.shape().end());
  std::vector<EwOperand> ops;
  std::vector<Tensor> keep;
  for (int o = 0; o < it.noperands(); ++o) {
    EwOperand e;
    const Tensor& t = o == 0 ? it.output() : it.input(o - 1);
    e.dtype = t.dtype();
    e.data = it.data(o);
    for (int d = 0; d < nd; ++d) e.strides.push_back(it.stride_bytes(o, d));
    if (o > 0 && t.device().type != DeviceType::CUDA) {
      STRATA_CHECK(t.dim() == 0, op, ": expected all tensors to be on the same device, but found a ", t.describe());
      keep.push_back(to_device_scalar(t, dev));
      e.data = static_cast<char*>(keep.back().data_ptr());
      std::fill(e.strides.begin(), e.strides.end(), 0);
    }
    ops.push_back(std::move(e));
  }
  launch_elementwise(op, expr, compute.value_or(it.common_dtype()), shape, ops, dev, a.a, a.b, a.c);
}

// One stub per op: the functor expression over x0, x1, x2 (compute type C) and p.a/p.b/p.c.
#define STRATA_CUDA_PW_LIST(X) \
  X(exp_stub, "exp", "strata::fn::Exp{}(x0)") \
  X(exp2_stub, "exp2", "strata::fn::Exp2{}(x0)") \
  X(expm1_stub, "expm1", "strata::fn::Expm1{}(x0)") \
  X(log_stub, "log", "strata::fn::Log{}(x0)") \
  X(log2_stub, "log2", "strata::fn::Log2{}(x0)") \
  X(log10_stub, "log10", "strata::fn::Log10{}(x0)") \
  X(log1p_stub, "log1p", "strata::fn::Log1p{}(x0)") \
  X(sqrt_stub, "sqrt", "strata::fn::Sqrt{}(x0)") \
  X(rsqrt_stub, "rsqrt", "strata::fn::Rsqrt{}(x0)") \
  X(reciprocal_stub, "reciprocal", "strata::fn::Reciprocal{}(x0)") \
  X(sin_stub, "sin", "strata::fn::Sin{}(x0)") \
  X(cos_stub, "cos", "strata::fn::Cos{}(x0)") \
  X(tan_stub, "tan", "strata::fn::Tan{}(x0)") \
  X(tanh_stub, "tanh", "strata::fn::Tanh{}(x0)") \
  X(asin_stub, "asin", "strata::fn::Asin{}(x0)") \
  X(acos_stub, "acos", "strata::fn::Acos{}(x0)") \
  X(atan_stub, "atan", "strata::fn::Atan{}(x0)") \
  X(sinh_stub, "sinh", "strata::fn::Sinh{}(x0)") \
  X(cosh_stub, "cosh", "strata::fn::Cosh{}(x0)") \
  X(sigmoid_stub, "sigmoid", "strata::fn::Sigmoid{}(x0)") \
  X(erf_stub, "erf", "strata::fn::Erf{}(x0)") \
  X(erfc_stub, "erfc", "strata::fn::Erfc{}(x0)") \
  X(neg_stub, "neg", "strata::fn::Neg{}(x0)") \
  X(abs_stub, "abs", "strata::fn::Abs{}(x0)") \
  X(sign_stub, "sign", "strata::fn::Sign{}(x0)") \
  X(square_stub, "square", "strata::fn::Square{}(x0)") \
  X(floor_stub, "floor", "strata::fn::Floor{}(x0)") \
  X(ceil_stub, "ceil", "strata::fn::Ceil{}(x0)") \
  X(trunc_stub, "trunc", "strata::fn::Trunc{}(x0)") \
  X(isnan_stub, "isnan", "strata::fn::IsNan{}(x0)") \
  X(isinf_stub, "isinf", "strata::fn::IsInf{}(x0)") \
  X(isfinite_stub, "isfinite", "strata::fn::IsFinite{}(x0)") \
  X(logical_not_stub, "logical_not", "strata::fn::LogicalNot{}(x0)") \
  X(bitwise_not_stub, "bitwise_not", "strata::fn::BitwiseNot{}(x0)") \
  X(add_stub, "add", "(p.a == 1 ? strata::fn::Add{}(x0, x1) : p.a == -1 ? strata::fn::Sub{}(x0, x1) : " "strata::fn::AddAlpha{p.a}(x0, x1))") \
  X(mul_stub, "mul", "strata::fn::Mul{}(x0, x1)") \
  X(div_true_stub, "div", "strata::fn::Div{}(x0, x1)") \
  X(div_floor_stub, "div_floor", "strata::fn::DivFloor{}(x0, x1)") \
  X(div_trunc_stub, "div_trunc", "strata::fn::DivTrunc{}(x0, x1)") \
  X(remainder_stub, "remainder", "strata::fn::Remainder{}(x0, x1)") \
  X(fmod_stub, "fmod", "strata::fn::Fmod{}(x0, x1)") \
  X(pow_stub, "pow", "strata::fn::Pow{}(x0, x1)") \
  X(maximum_stub, "maximum", "strata::fn::Maximum{}(x0, x1)") \
  X(minimum_stub, "minimum", "strata::fn::Minimum{}(x0, x1)") \
  X(atan2_stub, "atan2", "strata::fn::Atan2{}(x0, x1)") \
  X(eq_stub, "eq", "strata::fn::Eq{}(x0, x1)") \
  X(ne_stub, "ne", "strata::fn::Ne{}(x0, x1)") \
  X(lt_stub, "lt", "strata::fn::Lt{}(x0, x1)") \
  X(le_stub, "le", "strata::fn::Le{}(x0, x1)") \
  X(gt_stub, "gt", "strata::fn::Gt{}(x0, x1)") \
  X(ge_stub, "ge", "strata::fn::Ge{}(x0, x1)") \
  X(logical_and_stub, "logical_and", "strata::fn::LogicalAnd{}(x0, x1)") \
  X(logical_or_stub, "logical_or", "strata::fn::LogicalOr{}(x0, x1)") \
  X(logical_xor_stub, "logical_xor", "strata::fn::LogicalXor{}(x0, x1)") \
  X(bitwise_and_stub, "bitwise_and", "strata::fn::BitwiseAnd{}(x0, x1)") \
  X(bitwise_or_stub, "bitwise_or", "strata::fn::BitwiseOr{}(x0, x1)") \
  X(bitwise_xor_stub, "bitwise_xor", "strata::fn::BitwiseXor{}(x0, x1)") \
  X(where_stub, "where", "(static_cast<bool>(x0) ? x1 : x2)") \
  X(clamp_stub, "clamp", "strata::fn::Clamp{}(x0, x1, x2)") \
  X(clamp_min_stub, "clamp_min", "strata::fn::ClampMin{}(x0, x1)") \
  X(clamp_max_stub, "clamp_max", "strata::fn::ClampMax{}(x0, x1)") \
  X(nn_relu_stub, "relu", "strata::fn::Relu{}(x0)") \
  X(nn_gelu_stub, "gelu", "(p.a != 0 ? strata::fn::GeluTanh{}(x0) : strata::fn::GeluErf{}(x0))") \
  X(nn_silu_stub, "silu", "strata::fn::Silu{}(x0)") \
  X(nn_leaky_relu_stub, "leaky_relu", "strata::fn::LeakyRelu{p.a}(x0)") \
  X(nn_hardtanh_stub, "hardtanh", "strata::fn::Hardtanh{p.a, p.b}(x0)") \
  X(nn_mish_stub, "mish", "strata::fn::Mish{}(x0)") \
  X(nn_softplus_stub, "softplus", "strata::fn::Softplus{p.a, p.b}(x0)") \
  X(nn_elu_stub, "elu", "strata::fn::Elu{p.a, p.b, p.c}(x0)") \
  X(nn_hardsigmoid_stub, "hardsigmoid", "strata::fn::Hardsigmoid{}(x0)") \
  X(nn_hardswish_stub, "hardswish", "strata::fn::Hardswish{}(x0)") \
  X(nn_log_sigmoid_stub, "log_sigmoid", "strata::fn::LogSigmoid{}(x0)") \
  X(round_stub, "round", "(p.a == 0 ? strata::fn::Round{}(x0) : strata::fn::RoundDecimals{std::pow(10.0, p.a)}(x0))") \
  X(nan_to_num_stub, "nan_to_num", "strata::fn::NanToNum{p.a, p.b, p.c}(x0)") \
  X(lerp_stub, "lerp", "strata::fn::Lerp{}(x0, x1, x2)") \
  X(act_threshold_backward_stub, "threshold_backward", "strata::fn::ThresholdBackward{p.a}(x0, x1)") \
  X(act_gelu_backward_stub, "gelu_backward", "(p.a != 0 ? strata::fn::GeluTanhBackward{}(x0, x1) : strata::fn::GeluErfBackward{}(x0, x1))") \
  X(act_silu_backward_stub, "silu_backward", "strata::fn::SiluBackward{}(x0, x1)") \
  X(act_sigmoid_backward_stub, "sigmoid_backward", "strata::fn::SigmoidBackward{}(x0, x1)") \
  X(act_tanh_backward_stub, "tanh_backward", "strata::fn::TanhBackward{}(x0, x1)")

}  // namespace
}  // namespace strata::cuda

namespace strata {
#define STRATA_CUDA_PW_DECL(stub, op, expr) STRATA_DECLARE_STUB(stub, PointwiseFn);
STRATA_CUDA_PW_LIST(STRATA_CUDA_PW_DECL)
namespace cuda {
namespace {
#define STRATA_CUDA_PW_DEF(stub, op, expr)                                             \
  void stub##_cuda(TensorIterator& it, const PwArgs& a) { run_it(op, it, expr, a); }  \
  const StubRegistrar<PointwiseFn> stub##_cuda_reg(::strata::stub, DeviceType::CUDA, stub##_cuda);
STRATA_CUDA_PW_LIST(STRATA_CUDA_PW_DEF)
}  // namespace

// Ops whose implementation is device-generic and whose stubs have CUDA kernels above.
void share_pointwise_kernels() {
  Dispatcher& d = Dispatcher::get();
  for (const char* name :
       {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan",
        "tanh", "asin", "acos", "atan", "sinh", "cosh", "sigmoid", "erf", "erfc", "neg", "abs", "sign", "square",
        "floor", "ceil", "trunc", "isnan", "isinf", "isfinite", "logical_not", "bitwise_not", "add", "sub", "mul",
        "div", "floor_divide", "remainder", "fmod", "pow", "maximum", "minimum", "atan2", "eq", "ne", "lt", "le",
        "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "where",
        "masked_fill", "clamp", "clamp_min", "clamp_max", "relu", "gelu", "silu", "leaky_relu", "hardtanh", "mish", "softplus", "elu", "hardsigmoid", "hardswish",
        "log_sigmoid", "round", "nan_to_num", "lerp", "threshold_backward",
        "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward"}) {
    OperatorEntry* op = d.find(name);
    if (!op || op->has_registered(DispatchKey::CUDA) || !op->has_registered(DispatchKey::CPU)) continue;
    d.register_kernel(*op, DispatchKey::CUDA, op->kernel_for(DispatchKey::CPU));
  }
  share_reduction_kernels();
}

namespace {
std::vector<int64_t> byte_strides(const Tensor& t, IntArrayRef shape) {
  // t broadcast to shape: 0 stride for broadcast dims (leading dims missing in t count as broadcast).
  std::vector<int64_t> s(shape.size(), 0);
  const int64_t off = static_cast<int64_t>(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d)
    s[off + d] = t.sizes()[d] == 1 && shape[off + d] != 1 ? 0 : t.strides()[d] * static_cast<int64_t>(t.element_size());
  return s;
}
}  // namespace

bool has_kernel_builder() {
  std::lock_guard<std::mutex> lk(g_mu);
  return static_cast<bool>(g_builder);
}

bool copy_kernel(const Tensor& dst, const Tensor& src) {
  // Without a builder (a C++ program without the Python binding) copies keep the host path.
  if (!has_kernel_builder()) return false;
  if (!eager_dtype_supported(dst.dtype()) || !eager_dtype_supported(src.dtype())) return false;
  std::vector<int64_t> shape(dst.sizes().begin(), dst.sizes().end());
  // Innermost first, as TensorIterator lays out its geometry.
  std::vector<int64_t> ds = byte_strides(dst, dst.sizes()), ss = byte_strides(src, dst.sizes());
  if (dst.is_contiguous() && src.is_contiguous() &&
      std::equal(dst.sizes().begin(), dst.sizes().end(), src.sizes().begin(), src.sizes().end())) {
    // One flat dim: the kernel's vector path (.to(dtype), .float(), ...).
    shape = {dst.numel()};
    ds = {static_cast<int64_t>(dst.element_size())};
    ss = {static_cast<int64_t>(src.element_size())};
  }
  std::reverse(shape.begin(), shape.end());
  std::reverse(ds.begin(), ds.end());
  std::reverse(ss.begin(), ss.end());
  std::vector<EwOperand> ops(2);
  ops[0] = {static_cast<char*>(dst.data_ptr()), dst.dtype(), ds};
  ops[1] = {static_cast<char*>(src.data_ptr()), src.dtype(), ss};
  // Computed in the destination's type: bool <- x != 0, integers <- truncation, 16-bit floats <- float.
  launch_elementwise("copy", "x0", dst.dtype(), shape, ops, dst.device().index);
  return true;
}

bool fill_kernel(const Tensor& dst, const Scalar& value) {
  if (!has_kernel_builder()) return false;
  if (!eager_dtype_supported(dst.dtype()) || value.is_complex()) return false;
  std::vector<int64_t> shape(dst.sizes().begin(), dst.sizes().end());
  std::vector<int64_t> ds = byte_strides(dst, dst.sizes());
  std::reverse(shape.begin(), shape.end());
  std::reverse(ds.begin(), ds.end());
  std::vector<EwOperand> ops(1);
  ops[0] = {static_cast<char*>(dst.data_ptr()), dst.dtype(), ds};
  const ScalarType t = dst.dtype();
  // The value as Scalar::to<T> converts it: integers from the int64 value (floats truncated), floats via double.
  const int64_t iv = value.is_floating_point() ? static_cast<int64_t>(value.to_double()) : value.to_int();
  std::string expr = t == ScalarType::Bool ? "(p.a != 0)" : is_integral_type(t, false) ? "p.ia" : "static_cast<C>(p.a)";
  launch_elementwise("fill", expr, t, shape, ops, dst.device().index, value.to_double(), 0, 0, iv);
  return true;
}

}  // namespace cuda
}  // namespace strata
