// Derivatives of the FFT primitives (ops/decl/fft.def), torch's formulas. Each transform is linear, so its
// gradient is the adjoint transform of the gradient (Note [Complex gradients]): the adjoint of an unnormalized
// forward DFT is the unnormalized backward DFT, and a normalization is its own adjoint's.
#include "autograd/derivative_util.h"
#include "core/shape.h"
#include "ops/api/fft.h"

namespace strata::autograd {
namespace {

int64_t last_fft_dim(const std::vector<int64_t>& dim, int64_t ndim) { return wrap_dim(dim.back(), ndim); }

// c2c: the same transform in the other direction.
void fft_c2c_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, _fft_c2c(g[0], ctx.arg_ints(1), ctx.arg_int(2), !ctx.arg_bool(3)));
}
STRATA_DERIVATIVE_NAMED(_fft_c2c, save_inputs(), save_outputs(), fft_c2c_backward, "FftC2CBackward0");

// r2c: a two-sided result is a c2c of the real input; a one-sided one is that c2c's first n / 2 + 1 entries
// along the last dim, whose adjoint pads the gradient with zeros back to n entries.
void fft_r2c_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const std::vector<int64_t>& dim = ctx.arg_ints(1);
  const TensorGeometry& in = ctx.input_geometry(0);
  Tensor grad = g[0];
  if (ctx.arg_bool(3)) {
    const int64_t last = last_fft_dim(dim, int64_t(in.sizes.size()));
    const int64_t missing = in.sizes[last] - grad.size(last);
    if (missing > 0) {
      std::vector<int64_t> zs(grad.sizes().begin(), grad.sizes().end());
      zs[last] = missing;
      grad = cat(std::vector<Tensor>{grad, zeros(zs, grad.dtype(), grad.device())}, last);
    }
  }
  out.set(0, real(_fft_c2c(grad, dim, ctx.arg_int(2), /*forward=*/false)));
}
STRATA_DERIVATIVE_NAMED(_fft_r2c, save_inputs(), save_outputs(), fft_r2c_backward, "FftR2CBackward0");

// c2r: a one-sided r2c of the gradient, with the entries that stand for two (a bin and its mirror image)
// doubled; input entries past last_dim_size / 2 + 1 were not read and get zeros.
void fft_c2r_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const std::vector<int64_t>& dim = ctx.arg_ints(1);
  const TensorGeometry& in = ctx.input_geometry(0);
  const int64_t last = last_fft_dim(dim, int64_t(in.sizes.size()));
  const int64_t n = ctx.arg_int(3), half = n / 2 + 1, doubled = n - half;
  Tensor gi = _fft_r2c(g[0], dim, ctx.arg_int(2), /*onesided=*/true);
  if (doubled > 0) {
    Tensor w = ones(std::vector<int64_t>{half}, g[0].dtype(), g[0].device());
    fill_(narrow(w, 0, 1, doubled), Scalar(2.0));
    std::vector<int64_t> ws(in.sizes.size(), 1);
    ws[last] = half;
    gi = mul(gi, reshape(w, ws));
  }
  if (in.sizes[last] > half) {
    std::vector<int64_t> zs(gi.sizes().begin(), gi.sizes().end());
    zs[last] = in.sizes[last] - half;
    gi = cat(std::vector<Tensor>{gi, zeros(zs, gi.dtype(), gi.device())}, last);
  }
  out.set(0, gi);
}
STRATA_DERIVATIVE_NAMED(_fft_c2r, save_inputs(), save_outputs(), fft_c2r_backward, "FftC2RBackward0");

}  // namespace
}  // namespace strata::autograd
