// Random sampling ops over the CPU generator (see Note [CPU random streams] in
// core/generator.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/shape.h"
#include "ops/creation_common.h"
#include "ops/api/complex.h"
#include "ops/ops.h"

namespace strata {

STRATA_DEFINE_STUB(random_stub, RandomFn);
STRATA_DEFINE_STUB(randperm_stub, RandpermFn);

namespace {

// The order in which torch draws an output's elements: that of its
// TensorIterator, whose dimensions are sorted by stride (the largest
// outermost). A permutation of self's dims; identity when contiguous.
std::vector<int64_t> fill_order(const Tensor& self) {
  // Size-1 dimensions do not change the order; they go last, out of the sort.
  std::vector<int64_t> perm, ones;
  for (int64_t d = 0; d < self.dim(); ++d) (self.size(d) == 1 ? ones : perm).push_back(d);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return self.stride(a) > self.stride(b); });
  perm.insert(perm.end(), ones.begin(), ones.end());
  return perm;
}

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

// An in-place fill of an expanded tensor would write one location many times.
void check_no_broadcast_dims(const Tensor& self) {
  for (int64_t d = 0; d < self.dim(); ++d) {
    STRATA_CHECK(self.stride(d) != 0 || self.size(d) <= 1,
                 "unsupported operation: more than one element of the written-to tensor refers to a single memory "
                 "location. Please clone() the tensor before performing the operation.");
  }
}

// Fills self (any layout) with the distribution in p, drawing from generator
// `gen` in torch's element order. Meta tensors and empty ones draw nothing.
const Tensor& random_into(const Tensor& self, RandomParams p, OptInt gen) {
  check_no_broadcast_dims(self);
  if (self.device().is_meta() || self.numel() == 0) return self;
  p.contiguous_layout = self.is_contiguous();
  if (p.contiguous_layout) {
    GeneratorGuard g(gen);
    p.gen = &*g;
    random_stub(self.device().type, self, p);
  } else {
    // Draw into a contiguous buffer laid out in fill order, then scatter.
    Tensor view = permute(self, fill_order(self));
    Tensor tmp = empty_tensor(view.sizes(), self.dtype(), self.device());
    {
      GeneratorGuard g(gen);
      p.gen = &*g;
      random_stub(tmp.device().type, tmp, p);
    }
    copy_(view, tmp, false);
  }
  self.bump_version();
  return self;
}

void check_floating(const char* op, ScalarType dt) {
  STRATA_CHECK(is_floating_type(dt), op, ": expected a floating point dtype, got ", dtype_name(dt));
}

Tensor wrapped(double v, const Tensor& like) { return scalar_to_tensor(Scalar(v), like.dtype(), like.device(), true); }

// Inclusive [lowest, highest] that random_/randint may produce for a dtype:
// integers their full range, floats the integers they represent exactly.
std::pair<double, double> integer_bounds(ScalarType dt) {
  return visit_dtype(dt, [&]<typename T>() -> std::pair<double, double> {
    if constexpr (std::is_same_v<T, bool>) {
      return {0.0, 1.0};
    } else if constexpr (is_float_v<T>) {
      int digits = std::is_same_v<T, double> ? 53 : std::is_same_v<T, float> ? 24 : std::is_same_v<T, Half> ? 11 : 8;
      double m = std::ldexp(1.0, digits);
      return {-m, m};
    } else {
      return {static_cast<double>(std::numeric_limits<T>::lowest()),
              static_cast<double>(std::numeric_limits<T>::max())};
    }
  });
}

// rand / randn: a floating tensor of `size` filled from one distribution.
Tensor float_random_factory(const char* op, RandomKind kind, IntArrayRef size, OptInt gen, OptDType dtype,
                            OptDevice device, const std::optional<Tensor>& out) {
  ScalarType dt = factory_dtype(op, dtype, out, default_dtype());
  if (!is_complex_type(dt)) check_floating(op, dt);
  Tensor t = factory_alloc(op, size, dt, factory_device(op, device, out));
  RandomParams p;
  p.kind = kind;
  if (is_complex_type(dt)) {
    // As torch: the real and imaginary parts are independent draws, in the
    // order of view_as_real; randn scales them to N(0, 1/2) so E|z|^2 = 1.
    Tensor parts = view_as_real(t);
    random_into(parts, p, gen);
    if (kind == RandomKind::Normal && !parts.device().is_meta())
      copy_(parts, mul(parts, wrapped(0.70710678118654752440, parts)), false);
    return finish_factory(op, t, out);
  }
  random_into(t, p, gen);
  return finish_factory(op, t, out);
}

Tensor rand_impl(IntArrayRef size, OptInt gen, OptDType dtype, OptDevice device, const std::optional<Tensor>& out) {
  return float_random_factory("rand", RandomKind::Uniform, size, gen, dtype, device, out);
}
STRATA_IMPL_CPU_META(rand, rand_impl);

Tensor randn_impl(IntArrayRef size, OptInt gen, OptDType dtype, OptDevice device, const std::optional<Tensor>& out) {
  return float_random_factory("randn", RandomKind::Normal, size, gen, dtype, device, out);
}
STRATA_IMPL_CPU_META(randn, randn_impl);

Tensor randint_impl(int64_t low, int64_t high, IntArrayRef size, OptInt gen, OptDType dtype, OptDevice device,
                    const std::optional<Tensor>& out) {
  ScalarType dt = factory_dtype("randint", dtype, out, ScalarType::Int64);
  STRATA_CHECK(low < high, "randint: expects 'low' to be less than 'high', but got low=", low, " >= high=", high);
  auto [lo, hi] = integer_bounds(dt);
  STRATA_CHECK(static_cast<double>(low) >= lo && static_cast<double>(high - 1) <= hi, "randint: range [", low, ", ",
               high, ") is out of bounds for dtype ", dtype_name(dt));
  Tensor t = factory_alloc("randint", size, dt, factory_device("randint", device, out));
  RandomParams p;
  p.kind = RandomKind::IntRange;
  p.low = low;
  p.range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  random_into(t, p, gen);
  return finish_factory("randint", t, out);
}
STRATA_IMPL_CPU_META(randint, randint_impl);

Tensor randperm_impl(int64_t n, OptInt gen, OptDType dtype, OptDevice device, const std::optional<Tensor>& out) {
  STRATA_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  ScalarType dt = factory_dtype("randperm", dtype, out, ScalarType::Int64);
  STRATA_CHECK(dt != ScalarType::Bool || n <= 2, "randperm: n is too large for result tensor type: 'Bool'");
  STRATA_CHECK(n == 0 || static_cast<double>(n - 1) <= integer_bounds(dt).second,
               "randperm: n is too large for result tensor type: '", dtype_name(dt), "'");
  Tensor t = factory_alloc("randperm", std::vector<int64_t>{n}, dt, factory_device("randperm", device, out));
  if (!t.device().is_meta() && n > 0) {
    GeneratorGuard g(gen);
    randperm_stub(t.device().type, t, n, *g);
  }
  return finish_factory("randperm", t, out);
}
STRATA_IMPL_CPU_META(randperm, randperm_impl);

Tensor uniform_impl(const Tensor& self, double from, double to, OptInt gen) {
  check_floating("uniform_", self.dtype());
  STRATA_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  STRATA_CHECK(std::isfinite(to - from), "uniform_ expects to-from to be finite, but found to-from=", to - from);
  RandomParams p;
  p.kind = RandomKind::Uniform;
  p.a = from;
  p.b = to;
  return random_into(self, p, gen);
}
STRATA_IMPL_CPU_META(uniform_, uniform_impl);

Tensor normal_impl(const Tensor& self, double mean, double std, OptInt gen) {
  check_floating("normal_", self.dtype());
  STRATA_CHECK(std >= 0.0, "normal_ expects std >= 0.0, but found std ", std);
  RandomParams p;
  p.kind = RandomKind::Normal;
  p.a = mean;
  p.b = std;
  return random_into(self, p, gen);
}
STRATA_IMPL_CPU_META(normal_, normal_impl);

Tensor exponential_impl(const Tensor& self, double lambd, OptInt gen) {
  check_floating("exponential_", self.dtype());
  STRATA_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  RandomParams p;
  p.kind = RandomKind::Exponential;
  p.a = lambd;
  return random_into(self, p, gen);
}
STRATA_IMPL_CPU_META(exponential_, exponential_impl);

Tensor random_impl(const Tensor& self, int64_t from, OptInt to, OptInt gen) {
  auto [lo, hi] = integer_bounds(self.dtype());
  RandomParams p;
  p.kind = RandomKind::IntRange;
  p.low = from;
  if (to) {
    STRATA_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", *to);
    STRATA_CHECK(static_cast<double>(from) >= lo && static_cast<double>(*to - 1) <= hi, "random_: range [", from,
                 ", ", *to, ") is out of bounds for dtype ", dtype_name(self.dtype()));
    p.range = static_cast<uint64_t>(*to) - static_cast<uint64_t>(from);
  } else {
    // random_() proper draws one 32-bit word per element, 64 bits for int64 and double.
    if (from == 0) p.wide_draws = self.dtype() == ScalarType::Int64 || self.dtype() == ScalarType::Float64;
    // [from, the largest value the dtype holds exactly]; 2^64 values wrap to 0 ("all").
    STRATA_CHECK(static_cast<double>(from) >= lo && static_cast<double>(from) <= hi, "random_: from=", from,
                 " is out of bounds for dtype ", dtype_name(self.dtype()));
    uint64_t top = self.dtype() == ScalarType::Int64 ? static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                                                       : static_cast<uint64_t>(static_cast<int64_t>(hi));
    p.range = top - static_cast<uint64_t>(from) + 1;
  }
  return random_into(self, p, gen);
}
STRATA_IMPL_CPU_META(random_, random_impl);

Tensor bernoulli_float_impl(const Tensor& self, double prob, OptInt gen) {
  STRATA_CHECK(prob >= 0 && prob <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", prob);
  RandomParams p;
  p.kind = RandomKind::Bernoulli;
  p.a = prob;
  return random_into(self, p, gen);
}
STRATA_IMPL_CPU_META(bernoulli__float, bernoulli_float_impl);

Tensor bernoulli_tensor_impl(const Tensor& self, const Tensor& prob, OptInt gen) {
  check_floating("bernoulli_", prob.dtype());
  DimVector b = broadcast_shapes(self.sizes(), prob.sizes(), "bernoulli_");
  STRATA_CHECK(std::equal(b.begin(), b.end(), self.sizes().begin(), self.sizes().end()),
               "bernoulli_: probability tensor of shape ", prob.shape_str(), " cannot be broadcast to ",
               self.shape_str());
  check_no_broadcast_dims(self);
  if (self.device().is_meta()) return self;
  if (!prob.device().is_meta()) {
    Tensor bad = logical_or(lt(prob, wrapped(0.0, prob)), gt(prob, wrapped(1.0, prob)));
    STRATA_CHECK(!any_nonzero(logical_or(bad, isnan(prob))), "bernoulli_: all probabilities must be in [0, 1]");
  }
  // u < p, one uniform per element in fill order: a 53-bit double for double
  // probabilities, a 24-bit float for the others (exact for p = 0 and p = 1).
  ScalarType udt = prob.dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  std::vector<int64_t> order = fill_order(self);
  Tensor u_ordered = empty_tensor(permute(self, order).sizes(), udt, self.device());
  uniform_(u_ordered, 0.0, 1.0, gen);
  Tensor u = permute(u_ordered, inverse(order));
  copy_(self, lt(u, to_dtype(prob, udt)), false);
  return self;
}
STRATA_IMPL_CPU_META(bernoulli__Tensor, bernoulli_tensor_impl);

Tensor bernoulli_impl(const Tensor& self, OptInt gen) {
  check_floating("bernoulli", self.dtype());
  Tensor out = empty_tensor(self.sizes(), self.dtype(), self.device());
  return bernoulli_(out, self, gen);
}
STRATA_IMPL_CPU_META(bernoulli, bernoulli_impl);

Tensor bernoulli_p_impl(const Tensor& self, double prob, OptInt gen) {
  check_floating("bernoulli", self.dtype());
  Tensor out = empty_tensor(self.sizes(), self.dtype(), self.device());
  return bernoulli_(out, prob, gen);
}
STRATA_IMPL_CPU_META(bernoulli_p, bernoulli_p_impl);

void check_std(const Tensor& std) {
  if (std.device().is_meta()) return;
  STRATA_CHECK(!any_nonzero(lt(std, wrapped(0.0, std))), "normal expects all elements of std >= 0.0");
}

Tensor normal_tf_impl(const Tensor& mean, double std, OptInt gen, const std::optional<Tensor>& out);

// mean + std * z with z standard normal of the broadcast shape.
Tensor normal_tensors(const Tensor& mean, const Tensor& std, OptInt gen, const std::optional<Tensor>& out) {
  // A Python number (wrapped 0-d tensor) takes the other operand's dtype, as in
  // type promotion.
  bool wm = mean.impl()->is_wrapped_number(), ws = std.impl()->is_wrapped_number();
  // A Python number std scales inside the generator, as normal(Tensor, float) does.
  if (ws && !wm && std.device().is_cpu()) {
    return normal_tf_impl(mean, contiguous(to_dtype(std, ScalarType::Float64)).data_ptr<double>()[0], gen, out);
  }
  ScalarType dt = wm && ws ? default_dtype()
                  : wm     ? std.dtype()
                  : ws     ? mean.dtype()
                           : promote_types(mean.dtype(), std.dtype());
  check_floating("normal", dt);
  check_std(std);
  DimVector shape = broadcast_shapes(mean.sizes(), std.sizes(), "normal");
  Device dev = mean.device().is_meta() || std.device().is_meta() ? Device(DeviceType::Meta) : mean.device();
  Tensor z = randn(shape, gen, dt, dev);
  return finish_factory("normal", add(mul(z, std), mean), out);
}

Tensor normal_tt_impl(const Tensor& mean, const Tensor& std, OptInt gen, const std::optional<Tensor>& out) {
  return normal_tensors(mean, std, gen, out);
}
STRATA_IMPL_CPU_META(normal_Tensor_Tensor, normal_tt_impl);

Tensor normal_tf_impl(const Tensor& mean, double std, OptInt gen, const std::optional<Tensor>& out) {
  STRATA_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  check_floating("normal", mean.dtype());
  // normal_(0, std) then + mean, so that std scales in the generator's precision.
  Tensor z = empty_tensor(mean.sizes(), mean.dtype(), mean.device());
  normal_(z, 0.0, std, gen);
  return finish_factory("normal", add(z, mean), out);
}
STRATA_IMPL_CPU_META(normal_Tensor_float, normal_tf_impl);

Tensor normal_ft_impl(double mean, const Tensor& std, OptInt gen, const std::optional<Tensor>& out) {
  check_floating("normal", std.dtype());
  check_std(std);
  Tensor z = randn(std.sizes(), gen, std.dtype(), std.device());
  return finish_factory("normal", add(mul(z, std), wrapped(mean, z)), out);
}
STRATA_IMPL_CPU_META(normal_float_Tensor, normal_ft_impl);

Tensor normal_ff_impl(double mean, double std, IntArrayRef size, OptInt gen, OptDType dtype, OptDevice device,
                      const std::optional<Tensor>& out) {
  ScalarType dt = factory_dtype("normal", dtype, out, default_dtype());
  Tensor t = factory_alloc("normal", size, dt, factory_device("normal", device, out));
  normal_(t, mean, std, gen);
  return finish_factory("normal", t, out);
}
STRATA_IMPL_CPU_META(normal_float_float, normal_ff_impl);

Tensor multinomial_impl(const Tensor& self, int64_t num_samples, bool replacement, OptInt gen,
                        const std::optional<Tensor>& out) {
  STRATA_CHECK(self.dim() == 1 || self.dim() == 2, "multinomial: prob_dist must be 1 or 2 dim, got ", self.dim(),
               " dims (shape ", self.shape_str(), ")");
  check_floating("multinomial", self.dtype());
  STRATA_CHECK(num_samples > 0, "multinomial: cannot sample n_sample <= 0 samples (got ", num_samples, ")");
  int64_t rows = self.dim() == 2 ? self.size(0) : 1;
  int64_t cats = self.size(-1);
  STRATA_CHECK(cats > 0, "multinomial: number of categories cannot be zero");
  STRATA_CHECK(replacement || num_samples <= cats, "multinomial: cannot sample n_sample > prob_dist.size(-1) samples "
               "without replacement (n_sample=", num_samples, ", categories=", cats, ")");
  DimVector shape = self.dim() == 2 ? DimVector{rows, num_samples} : DimVector{num_samples};
  Tensor result = empty_tensor(shape, ScalarType::Int64, self.device());
  if (self.device().is_meta()) return finish_factory("multinomial", result, out);
  STRATA_CHECK(self.device().is_cpu(), "multinomial: only implemented on cpu, got ", self.device().str());
  Tensor prob = contiguous(self);
  // Validity first, whatever the sampling path.
  {
    Tensor p64 = to_dtype(prob, ScalarType::Float64);
    const double* P = p64.data_ptr<double>();
    for (int64_t r = 0; r < rows; ++r) {
      int64_t nonzero = 0;
      for (int64_t c = 0; c < cats; ++c) {
        double v = P[r * cats + c];
        STRATA_CHECK(std::isfinite(v) && v >= 0, "multinomial: probability tensor contains either `inf`, `nan` or "
                     "element < 0");
        nonzero += v > 0;
      }
      STRATA_CHECK(nonzero > 0, "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
    }
  }
  if (!replacement || num_samples == 1) {
    // The exponential race (Gumbel-max): the k largest p / q with q ~ Exp(1),
    // one q per probability, drawn in the probabilities' dtype. As in torch,
    // zero-probability categories come last when k exceeds the nonzero ones.
    Tensor q = empty_tensor(prob.sizes(), prob.dtype(), prob.device());
    exponential_(q, 1.0, gen);
    Tensor score = div(prob, q);
    Tensor idx = num_samples == 1 ? argmax(score, -1, true) : std::get<1>(topk(score, num_samples, -1, true, true));
    copy_(result, idx, false);
    return finish_factory("multinomial", result, out);
  }
  // With replacement: inverse CDF per row, one 53-bit uniform per sample,
  // the cumulative sums in the probabilities' precision (float for 16-bit).
  visit_dtype(prob.dtype(), [&]<typename T>() {
    if constexpr (is_float_v<T>) {
      using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const T* P = prob.data_ptr<T>();
      int64_t* R = result.data_ptr<int64_t>();
      std::vector<A> cdf(cats);
      GeneratorGuard g(gen);
      for (int64_t r = 0; r < rows; ++r) {
        A sum = 0;
        for (int64_t c = 0; c < cats; ++c) cdf[c] = (sum += static_cast<A>(P[r * cats + c]));
        for (int64_t c = 0; c < cats; ++c) cdf[c] /= sum;
        cdf[cats - 1] = 1;  // rounding must not leave a gap at the top
        for (int64_t k = 0; k < num_samples; ++k) {
          uint64_t bits = g->random64();
          double u = static_cast<double>(bits & ((uint64_t(1) << 53) - 1)) * 0x1.0p-53;
          // First category whose cumulative probability reaches u.
          int64_t lo = 0, hi = cats;
          while (hi > lo) {
            int64_t mid = lo + (hi - lo) / 2;
            if (static_cast<double>(cdf[mid]) < u) lo = mid + 1;
            else hi = mid;
          }
          R[r * num_samples + k] = lo;
        }
      }
    }
  });
  return finish_factory("multinomial", result, out);
}
STRATA_IMPL_CPU_META(multinomial, multinomial_impl);

// ---- generator state -------------------------------------------------------

Tensor get_rng_state_impl(OptInt gen) {
  Tensor t = empty_tensor(std::vector<int64_t>{CPUGenerator::kStateBytes}, ScalarType::UInt8, Device(DeviceType::CPU));
  GeneratorGuard g(gen);
  g->get_state(t.data_ptr<uint8_t>());
  return t;
}
// Generator bookkeeping touches no tensor data: the same on every backend.
STRATA_IMPL_COMPOSITE(_get_rng_state, get_rng_state_impl);

Tensor set_rng_state_impl(const Tensor& state, OptInt gen) {
  STRATA_CHECK_TYPE(state.dtype() == ScalarType::UInt8, "set_rng_state: expected a torch.ByteTensor (uint8), got ",
                    dtype_name(state.dtype()));
  STRATA_CHECK(state.device().is_cpu(), "set_rng_state: expected a cpu state tensor, got ", state.describe());
  STRATA_CHECK(state.numel() == CPUGenerator::kStateBytes, "set_rng_state: expected a CPUGeneratorImplState of size ",
               CPUGenerator::kStateBytes, " but found the input RNG state size to be ", state.numel());
  Tensor c = contiguous(state);
  if (gen && *gen != 0) ensure_generator(*gen);
  GeneratorGuard g(gen);
  g->set_state(c.data_ptr<uint8_t>());
  return state;
}
// Generator bookkeeping touches no tensor data: the same on every backend.
STRATA_IMPL_COMPOSITE(_set_rng_state, set_rng_state_impl);

Tensor drop_generator_impl(int64_t id) {
  drop_generator(id);
  return empty_tensor(std::vector<int64_t>{0}, ScalarType::UInt8, Device(DeviceType::CPU));
}
// Generator bookkeeping touches no tensor data: the same on every backend.
STRATA_IMPL_COMPOSITE(_drop_generator, drop_generator_impl);

}  // namespace
}  // namespace strata
