// libFuzzer harness: derivatives of random op sequences. Leaves of small random shapes and dtypes (float32,
// float64) that require grad go through a random chain of differentiable ops (pointwise, reductions, views,
// matmul, cat/stack, indexing, softmax, norms, losses), the same ops with the same arguments on CPU and on
// Meta. Checked:
//   * forward: CPU and Meta both raise or both give the same sizes and dtype (an out-of-range index, any
//     index into an empty dim included, is refused by the CPU only: Meta has no values to check);
//   * backward (autograd::run_backward of the sum of every result): does not raise where the forward did
//     not; every leaf's grad has the leaf's sizes and dtype, on CPU and on Meta;
//   * the CPU grads are finite when every forward value was finite and small and the chain used only ops
//     whose derivative is bounded on bounded input (sqrt, log, div, pow, norm ... at 0 are not).
// Bad arguments must raise strata::Error; anything else (a crash, a sanitizer report) is a finding.
#include <cmath>
#include <cstring>
#include <string>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "core/shape.h"
#include "fuzz_common.h"

using namespace strata;
using namespace strata::fuzz;
namespace ag = strata::autograd;

namespace {

constexpr int kOps = 62;

struct Args {
  int op = 0;
  int64_t i0 = 0, i1 = 0, i2 = 0;
  std::vector<int64_t> sizes;
  bool flag = false;
  bool hostile_index = false;  // index values may be out of range
  uint32_t seed = 0;
};

bool unbounded_derivative(int op) {
  switch (op) {
    case 9: case 10: case 11: case 15: case 19: case 29: case 50: return true;
    default: return false;
  }
}

bool is_index_op(int op) { return op >= 45 && op <= 48; }

// A deterministic stream of small numbers (leaf values, index values) from one drawn seed.
struct Lcg {
  uint32_t s;
  uint32_t next() { return s = s * 1664525u + 1013904223u; }
};

Tensor leaf(IntArrayRef sizes, ScalarType dt, Device dev, uint32_t seed) {
  Tensor t = empty_tensor(sizes, dt, dev);
  if (!dev.is_meta()) {
    Lcg g{seed};
    for (int64_t i = 0; i < t.numel(); ++i) {
      const uint32_t r = g.next() >> 24;
      // Values in [-2, 2] on a grid of 1/32, with exact zeros and ties (max/abs/relu kinks) common.
      const double v = (r % 16 == 0) ? 0.0 : (static_cast<double>(r % 129) - 64.0) / 32.0;
      if (dt == ScalarType::Float64) t.data_ptr<double>()[i] = v;
      else t.data_ptr<float>()[i] = static_cast<float>(v);
    }
  }
  return t;
}

// An int64 index tensor of `sizes` with values in [0, bound) (or, hostile, in [-bound - 2, bound + 2)).
Tensor index_tensor(IntArrayRef sizes, int64_t bound, bool hostile, uint32_t seed, Device dev) {
  Tensor t = empty_tensor(sizes, ScalarType::Int64, dev);
  if (!dev.is_meta()) {
    Lcg g{seed};
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t r = g.next() >> 8;
      t.data_ptr<int64_t>()[i] = hostile ? (r % (2 * bound + 5)) - bound - 2 : (bound > 0 ? r % bound : 0);
    }
  }
  return t;
}

int64_t size_at(const Tensor& x, int64_t d) {
  if (x.dim() == 0) return 1;
  d = ((d % x.dim()) + x.dim()) % x.dim();
  return x.size(d);
}

Tensor apply(const Args& a, const Tensor& x, const Tensor& y) {
  const DimVector dims{a.i0};
  const Device dev = x.device();
  switch (a.op) {
    case 0: return neg(x);
    case 1: return tanh(x);
    case 2: return sigmoid(x);
    case 3: return exp(x);
    case 4: return sin(x);
    case 5: return square(x);
    case 6: return abs(x);
    case 7: return relu(x);
    case 8: return gelu(x, a.flag ? "tanh" : "none");
    case 9: return sqrt(x);
    case 10: return log(x);
    case 11: return reciprocal(x);
    case 12: return add(x, y, a.flag ? Scalar(2.5) : Scalar(1));
    case 13: return mul(x, y);
    case 14: return sub(x, y);
    case 15: return div(x, y);
    case 16: return maximum(x, y);
    case 17: return matmul(x, y);
    case 18: return where(gt(x, y), x, y);
    case 19: return pow(x, y);
    case 20: return minimum(x, y);
    case 21: return a.flag ? sum(x, OptIntArrayRef(dims), a.i1 > 0) : sum(x);
    case 22: return a.flag ? mean(x, OptIntArrayRef(dims), a.i1 > 0) : mean(x);
    case 23: return amax(x, dims, a.flag);
    case 24: return std::get<0>(max(x, a.i0, a.flag));
    case 25: return var(x, OptIntArrayRef(dims), Scalar(a.i1 & 1), a.flag);
    case 26: return logsumexp(x, dims, a.flag);
    case 27: return prod(x, a.flag ? OptInt(a.i0) : std::nullopt, a.flag);
    case 28: return cumsum(x, a.i0);
    case 29: return norm(x, Scalar(2), a.flag ? OptIntArrayRef(dims) : std::nullopt, a.flag);
    case 30: return softmax(x, a.i0);
    case 31: return log_softmax(x, a.i0);
    case 32: return transpose(x, a.i0, a.i1);
    case 33: return reshape(x, a.sizes);
    case 34: return expand(x, a.sizes);
    case 35: return unsqueeze(x, a.i0);
    case 36: return squeeze(x, a.i0);
    case 37: return permute(x, a.sizes);
    case 38: return select(x, a.i0, a.i1);
    case 39: return slice(x, a.i0, a.i1, a.i2, a.flag ? 2 : 1);
    case 40: return narrow(x, a.i0, a.i1, a.i2);
    case 41: return diagonal(x, a.i2, a.i0, a.i1);
    case 42: return flip(x, dims);
    case 43: return unfold(x, a.i0, a.i1, a.i2);
    case 44: {
      std::vector<Tensor> ts{x, y};
      return a.flag ? cat(ts, a.i0) : stack(ts, a.i0);
    }
    case 45: {
      const int64_t n = a.sizes.empty() ? 0 : std::min<int64_t>(std::max<int64_t>(a.sizes[0], 0), 8);
      return index_select(x, a.i0, index_tensor(DimVector{n}, size_at(x, a.i0), a.hostile_index, a.seed, dev));
    }
    case 46: {
      // The index has x's rank, each size at most x's (gather's rule), or the drawn sizes when hostile.
      std::vector<int64_t> s(x.sizes().begin(), x.sizes().end());
      for (size_t d = 0; d < s.size() && d < a.sizes.size(); ++d) s[d] = std::min(s[d], std::max<int64_t>(a.sizes[d], 0));
      if (a.hostile_index) s.assign(a.sizes.begin(), a.sizes.end());
      if (small_numel(s) < 0) return gather(x, a.i0, index_tensor(DimVector{}, 1, false, a.seed, dev));
      return gather(x, a.i0, index_tensor(s, size_at(x, a.i0), a.hostile_index, a.seed, dev));
    }
    case 47: {
      // x[idx] with a (possibly multi-dim) int64 index on dim 0, or x[idx, idx2] (a bool mask's result shape
      // depends on its values: Meta refuses it).
      std::vector<int64_t> s(a.sizes.begin(), a.sizes.end());
      if (small_numel(s) < 0 || s.size() > 2) s = {2};
      std::vector<Tensor> idx{index_tensor(s, size_at(x, 0), a.hostile_index, a.seed, dev)};
      if (a.flag) idx.push_back(index_tensor(DimVector{a.i1 & 1 ? 1 : 2}, size_at(x, 1), a.hostile_index, a.seed + 1, dev));
      return index(x, idx);
    }
    case 48: {
      std::vector<int64_t> s(x.sizes().begin(), x.sizes().end());
      if (!s.empty()) s[((a.i0 % x.dim()) + x.dim()) % x.dim()] = std::clamp<int64_t>(a.i1, 0, 4);
      return take_along_dim(x, index_tensor(s, size_at(x, a.i0), a.hostile_index, a.seed, dev), a.i0);
    }
    case 49: return a.flag ? tril(x, a.i0) : triu(x, a.i0);
    case 50: return rsqrt(x);
    case 51: return repeat(x, a.sizes);
    case 52: return roll(x, DimVector{a.i1}, dims);
    case 53: return clamp(x, y, a.flag ? std::optional<Tensor>(add(y, ones_like(y))) : std::nullopt);
    case 54: return mse_loss(x, y, a.flag ? "sum" : "none");
    case 55: return linear(x, y);
    case 56: {
      std::vector<int64_t> s;
      if (x.dim() > 0) s.push_back(x.size(-1));
      return layer_norm(x, a.flag ? IntArrayRef(s) : IntArrayRef(a.sizes));
    }
    case 57: return to_dtype(x, x.dtype() == ScalarType::Float32 ? ScalarType::Float64 : ScalarType::Float32);
    case 58: return std::get<0>(sort(x, a.i0, a.flag));
    case 59: return std::get<0>(topk(x, std::clamp<int64_t>(a.i1, 0, 3), a.i0, a.flag));
    case 60: return mul(contiguous(transpose(x, 0, -1)), y);
    default: return flatten(x, a.i0, a.i1);
  }
}

// Largest |value| of a CPU float tensor, +inf when one is not finite.
double max_abs(const Tensor& t) {
  ag::GradModeGuard off(false);
  Tensor c = contiguous(ag::detach(t));
  double m = 0;
  for (int64_t i = 0; i < c.numel(); ++i) {
    const double v = c.dtype() == ScalarType::Float64 ? c.data_ptr<double>()[i] : c.data_ptr<float>()[i];
    if (!std::isfinite(v)) return INFINITY;
    m = std::max(m, std::fabs(v));
  }
  return m;
}

bool same_geometry(const Tensor& a, const Tensor& b) {
  return DimVector(a.sizes().begin(), a.sizes().end()) == DimVector(b.sizes().begin(), b.sizes().end()) &&
         a.dtype() == b.dtype();
}

const char* dname(ScalarType t) {
  static std::string ring[4];  // several in one printf
  static int next = 0;
  std::string& s = ring[next++ % 4];
  s = std::string(dtype_name(t));
  return s.c_str();
}

bool is_float(const Tensor& t) { return t.dtype() == ScalarType::Float32 || t.dtype() == ScalarType::Float64; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  const bool verbose = std::getenv("STRATA_FUZZ_VERBOSE") != nullptr;  // replaying a finding
  const Device meta(DeviceType::Meta);
  std::vector<Tensor> cpu, met;  // the pool: leaves first, then every result that is kept
  const int n_leaves = fdp.ConsumeIntegralInRange<int>(1, 3);
  for (int i = 0; i < n_leaves; ++i) {
    auto shape = draw_sizes(fdp, 3, 4);
    if (small_numel(shape) < 0) shape = {};
    const ScalarType dt = fdp.ConsumeIntegralInRange<int>(0, 3) == 0 ? ScalarType::Float64 : ScalarType::Float32;
    Tensor c = leaf(shape, dt, Device(), fdp.ConsumeIntegral<uint32_t>()), m = leaf(shape, dt, meta, 0);
    ag::set_requires_grad(c, true);
    ag::set_requires_grad(m, true);
    cpu.push_back(c);
    met.push_back(m);
  }
  bool bounded = true;  // every forward value finite and small, only ops with bounded derivatives
  const int steps = fdp.ConsumeIntegralInRange<int>(1, 6);
  for (int s = 0; s < steps && fdp.remaining_bytes() > 0; ++s) {
    Args a;
    a.op = fdp.ConsumeIntegralInRange<int>(0, kOps - 1);
    const size_t ix = fdp.ConsumeIntegralInRange<size_t>(0, cpu.size() - 1);
    const size_t iy = fdp.ConsumeIntegralInRange<size_t>(0, cpu.size() - 1);
    a.i0 = fdp.ConsumeIntegralInRange<int64_t>(-4, 3);
    a.i1 = fdp.ConsumeIntegralInRange<int64_t>(-4, 4);
    a.i2 = fdp.ConsumeIntegralInRange<int64_t>(-3, 4);
    a.sizes = draw_sizes(fdp, 4, 4);
    a.flag = fdp.ConsumeBool();
    a.hostile_index = fdp.ConsumeIntegralInRange<int>(0, 7) == 0;
    a.seed = fdp.ConsumeIntegral<uint32_t>();
    if (a.op == 51) {  // repeat: keep the CPU's copy small (the harness checks derivatives, not bandwidth)
      int64_t n = std::max<int64_t>(cpu[ix].numel(), 1);
      bool big = false;
      for (int64_t r : a.sizes) big |= r > 16 || (r > 0 && __builtin_mul_overflow(n, r, &n)) || n > kMaxElements;
      if (big) continue;
    }
    if (verbose)
      std::fprintf(stderr, "step %d: op %d (i0=%ld i1=%ld i2=%ld sizes=%s flag=%d hostile=%d) on x %s %s, y %s %s\n",
                   s, a.op, static_cast<long>(a.i0), static_cast<long>(a.i1), static_cast<long>(a.i2),
                   shape_str(a.sizes).c_str(), a.flag, a.hostile_index, cpu[ix].shape_str().c_str(),
                   dname(cpu[ix].dtype()), cpu[iy].shape_str().c_str(), dname(cpu[iy].dtype()));
    Tensor rc, rm;
    std::string cpu_error, meta_error;
    try {
      rc = apply(a, cpu[ix], cpu[iy]);
    } catch (const OutOfMemoryError&) {
      continue;  // a huge result of an empty input: Meta allocates nothing, the CPU cannot
    } catch (const Error& e) {
      cpu_error = e.what();
    }
    try {
      rm = apply(a, met[ix], met[iy]);
    } catch (const Error& e) {
      meta_error = e.what();
    }
    // Meta cannot see index values: only the CPU refuses an out-of-range one (any index into an empty dim).
    const bool index_values_only = is_index_op(a.op) && meta_error.empty();
    if (cpu_error.empty() != meta_error.empty() && !index_values_only) {
      std::fprintf(stderr, "op %d on x %s, y %s: CPU %s, Meta %s\n", a.op, cpu[ix].shape_str().c_str(),
                   cpu[iy].shape_str().c_str(), cpu_error.empty() ? "ok" : cpu_error.c_str(),
                   meta_error.empty() ? "ok" : meta_error.c_str());
      FUZZ_CHECK(cpu_error.empty() == meta_error.empty());
    }
    if (!cpu_error.empty()) continue;
    FUZZ_CHECK(rm.device().is_meta());
    if (!same_geometry(rc, rm)) {
      std::fprintf(stderr, "op %d: CPU %s %s, Meta %s %s\n", a.op, rc.shape_str().c_str(), dname(rc.dtype()),
                   rm.shape_str().c_str(), dname(rm.dtype()));
      FUZZ_CHECK(same_geometry(rc, rm));
    }
    check_in_bounds(rc);
    FUZZ_CHECK(ag::requires_grad(rc) == ag::requires_grad(rm));
    if (!is_float(rc) || !ag::requires_grad(rc)) continue;
    std::vector<int64_t> nonzero(rc.sizes().begin(), rc.sizes().end());
    for (auto& v : nonzero) v = std::max<int64_t>(v, 1);
    if (small_numel(nonzero) < 0) continue;  // e.g. [1, 2**30] from a reduction over an empty dim
    if (unbounded_derivative(a.op) || max_abs(rc) > 1e3) bounded = false;
    cpu.push_back(rc);
    met.push_back(rm);
  }

  // loss = the sum of every result (the leaves too, so each leaf gets a gradient).
  Tensor loss_c, loss_m;
  try {
    for (size_t i = 0; i < cpu.size(); ++i) {
      Tensor lc = sum(to_dtype(cpu[i], ScalarType::Float64)), lm = sum(to_dtype(met[i], ScalarType::Float64));
      loss_c = loss_c.defined() ? add(loss_c, lc) : lc;
      loss_m = loss_m.defined() ? add(loss_m, lm) : lm;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "summing the results raised: %s\n", e.what());
    FUZZ_CHECK(false);
  }
  for (const auto& [loss, dev_name] : {std::pair{loss_c, "CPU"}, std::pair{loss_m, "Meta"}}) {
    try {
      ag::run_backward({loss}, {}, {}, {});
    } catch (const Error& e) {
      std::fprintf(stderr, "%s backward raised: %s\n", dev_name, e.what());
      FUZZ_CHECK(false);
    }
  }
  for (int i = 0; i < n_leaves; ++i) {
    const Tensor gc = ag::grad(cpu[i]), gm = ag::grad(met[i]);
    FUZZ_CHECK(gc.defined() && gm.defined());
    if (!same_geometry(gc, cpu[i]) || !same_geometry(gm, met[i]) || !gm.device().is_meta()) {
      std::fprintf(stderr, "leaf %d %s %s: CPU grad %s %s, Meta grad %s %s\n", i, cpu[i].shape_str().c_str(),
                   dname(cpu[i].dtype()), gc.shape_str().c_str(), dname(gc.dtype()),
                   gm.shape_str().c_str(), dname(gm.dtype()));
      FUZZ_CHECK(false);
    }
    check_in_bounds(gc);
    if (bounded && !std::isfinite(max_abs(gc))) {
      std::fprintf(stderr, "leaf %d %s: a non-finite gradient from a finite, bounded forward\n", i,
                   cpu[i].shape_str().c_str());
      FUZZ_CHECK(false);
    }
  }
  return 0;
}
