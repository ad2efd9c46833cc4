// F.interpolate's modes nearest, nearest-exact, linear (1 to 3 dims) and
// cubic, and their gradient. Each spatial axis gets a table of source indices
// and weights, built with torch's arithmetic (the source coordinate in float
// for float inputs and in double for double, nearest indices always in float),
// so that results match torch's to rounding; the kernel then forms the
// separable sum of products over the axes.
#include <algorithm>
#include <cmath>

#include "ops/nn_more_kernels.h"
#include "ops/nn_util.h"
#include "ops/op_list.h"

namespace strata {

STRATA_DEFINE_STUB(nn_interpolate_stub, nn::InterpolateFn);
STRATA_DEFINE_STUB(nn_interpolate_backward_stub, nn::InterpolateBackwardFn);

namespace nn {
namespace {

enum class Mode { Nearest, NearestExact, Linear, Cubic, LinearAA, CubicAA };

Mode parse_mode(const char* op, std::string_view m) {
  if (m == "nearest") return Mode::Nearest;
  if (m == "nearest-exact") return Mode::NearestExact;
  if (m == "linear" || m == "bilinear" || m == "trilinear") return Mode::Linear;
  if (m == "cubic" || m == "bicubic") return Mode::Cubic;
  // Antialiased (F.interpolate(antialias=True)): the filter widens with the downscaling factor.
  if (m == "bilinear-aa" || m == "linear-aa") return Mode::LinearAA;
  if (m == "bicubic-aa" || m == "cubic-aa") return Mode::CubicAA;
  throw NotImplementedError(str(op, ": unsupported interpolation mode '", m,
                                "' (expected nearest, nearest-exact, linear, bilinear, trilinear or bicubic)"));
}

// 1 / scale when the user gave one, else in / out (torch's compute_scales_value).
template <typename A>
A scale_value(std::optional<double> scale, int64_t in, int64_t out) {
  return scale && *scale > 0 ? static_cast<A>(1.0 / *scale) : static_cast<A>(in) / static_cast<A>(out);
}
template <typename A>
A area_scale(int64_t in, int64_t out, bool align, std::optional<double> scale) {
  if (align) return out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0);
  return scale_value<A>(scale, in, out);
}
template <typename A>
A source_index(A scale, int64_t o, bool align, bool cubic) {
  if (align) return scale * static_cast<A>(o);
  // Fused multiply-add, as the compiler contracts this expression in torch's vectorized builds: the
  // coordinates (and so the weights) then round the same way.
  const A s = std::fma(scale, static_cast<A>(o) + A(0.5), A(-0.5));
  return !cubic && s < A(0) ? A(0) : s;
}
// Integer part (clamped to the last index) and fraction in [0, 1].
template <typename A>
void index_and_lambda(A real, int64_t n, int64_t& idx, A& lambda) {
  idx = std::min(static_cast<int64_t>(std::floor(real)), n - 1);
  lambda = std::min(std::max(real - static_cast<A>(idx), A(0)), A(1));
}
// Keys' cubic convolution weights with A = -0.75 (torch's bicubic).
template <typename A>
void cubic_coeffs(A t, A c[4]) {
  const A a = A(-0.75);
  // Horner forms with fused multiply-adds (see source_index).
  auto conv1 = [a](A x) { return std::fma(std::fma(a + 2, x, -(a + 3)) * x, x, A(1)); };
  auto conv2 = [a](A x) { return std::fma(std::fma(std::fma(a, x, -5 * a), x, 8 * a), x, -4 * a); };
  c[0] = conv2(t + 1);
  c[1] = conv1(t);
  c[2] = conv1(1 - t);
  c[3] = conv2(2 - t);
}

// Antialiased tables (torch's, after PIL): output o averages the inputs within `support` of its centre with a
// triangle (linear) or Keys a = -0.5 (cubic) filter stretched by the scale, weights normalized to sum 1. Rows
// have the widest window's number of taps; the unused ones read the window's first input with weight 0. The
// mixed float/double steps follow torch's expressions, so the weights round the same way.
template <typename A>
InterpAxis make_axis_aa(bool cubic, int64_t in, int64_t out, bool align, std::optional<double> user_scale) {
  const A scale = area_scale<A>(in, out, align, user_scale);
  const double half = cubic ? 2.0 : 1.0;  // interp_size / 2
  const A support = static_cast<A>(scale >= A(1) ? half * static_cast<double>(scale) : half);
  const A invscale = scale >= A(1) ? static_cast<A>(1.0 / static_cast<double>(scale)) : A(1);
  auto filter = [cubic](A x) -> A {
    x = std::abs(x);
    if (!cubic) return x < A(1) ? A(1) - x : A(0);
    const A a = A(-0.5);
    if (x < A(1)) return std::fma(std::fma(a + 2, x, -(a + 3)) * x, x, A(1));
    if (x < A(2)) return std::fma(std::fma(std::fma(a, x, -5 * a), x, 8 * a), x, -4 * a);
    return A(0);
  };
  InterpAxis ax;
  ax.taps = static_cast<int64_t>(std::ceil(static_cast<double>(support))) * 2 + 1;
  ax.idx.assign(static_cast<size_t>(out * ax.taps), 0);
  ax.w.assign(static_cast<size_t>(out * ax.taps), 0.0);
  std::vector<A> w(static_cast<size_t>(ax.taps));
  for (int64_t o = 0; o < out; ++o) {
    const A center = static_cast<A>(static_cast<double>(scale) * (static_cast<double>(o) + 0.5));
    const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(static_cast<double>(center - support) + 0.5), 0);
    const int64_t xsize = std::clamp<int64_t>(
        std::min<int64_t>(static_cast<int64_t>(static_cast<double>(center + support) + 0.5), in) - xmin, 0, ax.taps);
    A total = 0;
    for (int64_t j = 0; j < xsize; ++j) {
      const A d = static_cast<A>(j + xmin) - center;
      w[j] = filter(static_cast<A>((static_cast<double>(d) + 0.5) * static_cast<double>(invscale)));
      total += w[j];
    }
    for (int64_t j = 0; j < ax.taps; ++j) {
      ax.idx[o * ax.taps + j] = j < xsize ? xmin + j : std::min(xmin, in - 1);
      ax.w[o * ax.taps + j] = j < xsize && total != A(0) ? static_cast<double>(w[j] / total) : 0.0;
    }
  }
  return ax;
}

template <typename A>
InterpAxis make_axis(Mode mode, int64_t in, int64_t out, bool align, std::optional<double> scale) {
  if (mode == Mode::LinearAA || mode == Mode::CubicAA) return make_axis_aa<A>(mode == Mode::CubicAA, in, out, align,
                                                                               scale);
  InterpAxis ax;
  ax.taps = mode == Mode::Cubic ? 4 : mode == Mode::Linear ? 2 : 1;
  ax.idx.assign(static_cast<size_t>(out * ax.taps), 0);
  ax.w.assign(static_cast<size_t>(out * ax.taps), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    int64_t* ix = ax.idx.data() + o * ax.taps;
    double* w = ax.w.data() + o * ax.taps;
    switch (mode) {
      case Mode::LinearAA:
      case Mode::CubicAA:
        break;  // make_axis_aa
      case Mode::Nearest: {
        const float s = scale_value<float>(scale, in, out);
        ix[0] = out == in ? o
                : out == 2 * in ? (o >> 1)
                                : std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * s)), in - 1);
        w[0] = 1;
        break;
      }
      case Mode::NearestExact: {
        const float s = scale_value<float>(scale, in, out);
        const float real = static_cast<float>((static_cast<double>(o) + 0.5) * static_cast<double>(s));
        ix[0] = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
        w[0] = 1;
        break;
      }
      case Mode::Linear: {
        if (out == in) {
          ix[0] = ix[1] = o;
          w[0] = 1, w[1] = 0;
          break;
        }
        const A real = source_index<A>(area_scale<A>(in, out, align, scale), o, align, false);
        int64_t i0;
        A l1;
        index_and_lambda(real, in, i0, l1);
        ix[0] = i0;
        ix[1] = i0 + (i0 < in - 1 ? 1 : 0);
        w[1] = static_cast<double>(l1);
        w[0] = static_cast<double>(A(1) - l1);
        break;
      }
      case Mode::Cubic: {
        const A real = source_index<A>(area_scale<A>(in, out, align, scale), o, align, true);
        int64_t i0;
        A t;
        index_and_lambda(real, in, i0, t);
        A c[4];
        cubic_coeffs(t, c);
        for (int j = 0; j < 4; ++j) {
          ix[j] = std::clamp<int64_t>(i0 - 1 + j, 0, in - 1);
          w[j] = static_cast<double>(c[j]);
        }
        break;
      }
    }
  }
  return ax;
}

// Tables for the last k dims of in_sizes -> out_sp, padded to three axes (unit axes in front).
void make_axes(Mode mode, ScalarType ct, IntArrayRef in_sizes, IntArrayRef out_sp, bool align,
               const std::optional<double> (&scales)[3], InterpAxis (&axes)[3]) {
  const int k = static_cast<int>(out_sp.size());
  const int64_t nd = static_cast<int64_t>(in_sizes.size());
  for (int i = 0; i < k; ++i) {
    const int64_t in = in_sizes[nd - k + i], out = out_sp[i];
    axes[3 - k + i] = ct == ScalarType::Float64 ? make_axis<double>(mode, in, out, align, scales[i])
                                                : make_axis<float>(mode, in, out, align, scales[i]);
  }
}


void check_sizes(const char* op, IntArrayRef in_sizes, IntArrayRef out_sp) {
  const int k = static_cast<int>(out_sp.size());
  STRATA_CHECK(k >= 1 && k <= 3 && static_cast<int>(in_sizes.size()) == k + 2, op,
               ": expected 1 to 3 output sizes and an (N, C, spatial...) input with that many spatial dims, but got "
               "output_size=",
               shape_str(out_sp), " and input of size ", shape_str(in_sizes));
  const int64_t nd = static_cast<int64_t>(in_sizes.size());
  bool ok = true;
  for (int i = 0; i < k; ++i) ok = ok && in_sizes[nd - k + i] > 0 && out_sp[i] > 0;
  static const char* names[3] = {"D", "H", "W"};
  std::string in_s, out_s;
  for (int i = 0; i < k; ++i) {
    const char* nm = names[3 - k + i];
    in_s += str(i ? ", " : "", nm, ": ", in_sizes[nd - k + i]);
    out_s += str(i ? ", " : "", nm, ": ", out_sp[i]);
  }
  STRATA_CHECK(ok, "Input and output sizes should be greater than 0, but got input (", in_s, ") output (", out_s,
               ")");
}

}  // namespace

Tensor interpolate_impl(const Tensor& input, IntArrayRef output_size, std::string_view mode, bool align_corners,
                        std::optional<double> s0, std::optional<double> s1, std::optional<double> s2) {
  const char* op = "interpolate";
  const Mode m = parse_mode(op, mode);
  check_sizes(op, input.sizes(), output_size);
  check_floating(op, input, "input");
  const int k = static_cast<int>(output_size.size());
  DimVector out_shape(input.sizes().begin(), input.sizes().end() - k);
  out_shape.insert(out_shape.end(), output_size.begin(), output_size.end());
  Device dev = input.device();
  if (dev.is_meta()) return empty_tensor(out_shape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(out_shape, ct, dev);
  if (y.numel() == 0) return to_dtype(y, input.dtype());
  const std::optional<double> scales[3] = {s0, s1, s2};
  InterpAxis axes[3];
  make_axes(m, ct, input.sizes(), output_size, align_corners, scales, axes);
  nn_interpolate_stub(dev.type, reshape_contig(prep(input, ct), as_3d(input.sizes(), k)),
                      reshape_contig(y, as_3d(out_shape, k)), axes);
  return to_dtype(y, input.dtype());
}
STRATA_IMPL_CPU_META(_interpolate, interpolate_impl);

Tensor interpolate_backward_impl(const Tensor& grad_output, IntArrayRef input_size, std::string_view mode,
                                 bool align_corners, std::optional<double> s0, std::optional<double> s1,
                                 std::optional<double> s2) {
  const char* op = "interpolate_backward";
  const Mode m = parse_mode(op, mode);
  const int64_t nd = grad_output.dim();
  STRATA_CHECK(static_cast<int64_t>(input_size.size()) == nd && nd >= 3 && nd <= 5, op, ": grad_output of size ",
               grad_output.shape_str(), " does not match input_size ", shape_str(input_size));
  // Inputs are (N, C, spatial...), as the forward requires.
  const int k = static_cast<int>(nd - 2);
  for (int64_t i = 0; i < nd - k; ++i)
    STRATA_CHECK(grad_output.size(i) == input_size[i], op, ": grad_output of size ", grad_output.shape_str(),
                 " does not match input_size ", shape_str(input_size));
  DimVector out_sp(grad_output.sizes().end() - k, grad_output.sizes().end());
  check_sizes(op, input_size, out_sp);
  check_floating(op, grad_output, "grad_output");
  Device dev = grad_output.device();
  if (dev.is_meta()) return empty_tensor(input_size, grad_output.dtype(), dev);
  const ScalarType ct = compute_type(grad_output.dtype());
  Tensor gx = empty_tensor(input_size, ct, dev);
  if (gx.numel() == 0) return to_dtype(gx, grad_output.dtype());
  const std::optional<double> scales[3] = {s0, s1, s2};
  InterpAxis axes[3];
  make_axes(m, ct, input_size, out_sp, align_corners, scales, axes);
  nn_interpolate_backward_stub(dev.type, reshape_contig(prep(grad_output, ct), as_3d(grad_output.sizes(), k)),
                               reshape_contig(gx, as_3d(input_size, k)), axes);
  return to_dtype(gx, grad_output.dtype());
}
STRATA_IMPL_CPU_META(_interpolate_backward, interpolate_backward_impl);

}  // namespace nn
}  // namespace strata
