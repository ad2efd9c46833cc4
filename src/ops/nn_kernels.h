// Kernel stubs of the structured nn ops (everything that is not a plain
// pointwise op). The device-generic op code in ops/nn_*.cpp validates
// arguments, computes shapes, makes the operands contiguous and converts
// float16/bfloat16 to float32; kernels then see contiguous float32 or float64
// data only (index tensors are contiguous int64).
#pragma once

#include <vector>

#include "core/tensor.h"
#include "ops/stub.h"

namespace strata::nn {

enum class Reduction { None, Mean, Sum };

// y[m, n] = sum_k x[m, k] w[n, k] (+ bias[n]); bias may be undefined.
using LinearFn = void (*)(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, int64_t m,
                          int64_t n, int64_t k);
// Smallest and largest value of a contiguous int64 tensor (numel > 0).
using MinMaxFn = void (*)(const Tensor& idx, int64_t* lo, int64_t* hi);
// out[i, :] = weight[idx[i], :]; ids were validated.
using EmbeddingFn = void (*)(const Tensor& weight, const Tensor& idx, const Tensor& out);
// Rescales, in place, the rows of a contiguous weight named by idx whose
// norm_type-norm exceeds max_norm (each row once).
using EmbeddingRenormFn = void (*)(const Tensor& weight, const Tensor& idx, double max_norm, double norm_type);
using OneHotFn = void (*)(const Tensor& idx, const Tensor& out, int64_t num_classes);
// embedding_bag's forward, per bag: weight (v, d) contiguous float32/float64, idx (n,) int64 validated,
// offsets (bags + 1,) int64 clamped to [0, n] (an end below its start is an empty bag); psw (n,) of weight's
// dtype or undefined. Writes out (bags, d), offset2bag (n,) and aux ((n,) of weight's dtype for sum/mean,
// (bags, d) int64 for max), as described at _embedding_bag in decl/nn.def.
using EmbeddingBagFn = void (*)(const Tensor& weight, const Tensor& idx, const Tensor& offsets, int64_t mode,
                                const Tensor& psw, int64_t padding_idx, const Tensor& out, const Tensor& offset2bag,
                                const Tensor& aux);

// Rows of length d: (x - mean) * rstd * w + b (layer_norm), or x * rstd * w
// (rms_norm, when `rms`). w and b may be undefined.
using RowNormFn = void (*)(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, int64_t rows,
                           int64_t d, double eps, bool rms);
// x is (n, c, s); statistics per (n, group) over (c / groups) * s values.
using GroupNormFn = void (*)(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, int64_t n,
                             int64_t c, int64_t s, int64_t groups, double eps);
// x is (n, c, s). Training: statistics of the batch, written to batch_mean and
// batch_var (biased, float64). Otherwise mean/var are the running statistics.
using BatchNormFn = void (*)(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& mean,
                             const Tensor& var, const Tensor& y, const Tensor& batch_mean, const Tensor& batch_var,
                             int64_t n, int64_t c, int64_t s, bool training, double eps);

// input (n, c, d) logits (log_softmax applied when `logits`) or log-probs;
// target (n, d) int64 validated to be in [0, c) or ignore_index.
struct ClassLossArgs {
  int64_t n, c, d;
  Reduction reduction;
  int64_t ignore_index;
  double label_smoothing;
  bool logits;
};
using ClassLossFn = void (*)(const Tensor& input, const Tensor& target, const Tensor& weight, const Tensor& out,
                             const ClassLossArgs& a);
// Cross entropy with class-probability targets, same layout as input.
using ProbLossFn = void (*)(const Tensor& input, const Tensor& target, const Tensor& weight, const Tensor& out,
                            const ClassLossArgs& a);
// out (0-d) = scale * sum(x).
using SumFn = void (*)(const Tensor& x, const Tensor& out, double scale);

struct Window2d {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};
// x (n, c, h, w), w (o, c / groups, kh, kw), y (n, o, oh, ow); pads are the
// top/left ones (the bottom/right ones follow from the output size).
using Conv2dFn = void (*)(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Window2d& p,
                          int64_t groups);
// x (planes, h, w) -> y (planes, oh, ow). (Max and adaptive pooling run on the 1-to-3-D kernels of
// ops/nn_more_kernels.h.)
using AvgPool2dFn = void (*)(const Tensor& x, const Tensor& y, const Window2d& p, bool count_include_pad,
                             int64_t divisor);
// y[i...] = x[map_0[i_0], ..., map_last[i_last]], or value where any map is -1.
using PadFn = void (*)(const Tensor& x, const Tensor& y, const std::vector<std::vector<int64_t>>& maps, double value);

}  // namespace strata::nn

namespace strata {
STRATA_DECLARE_STUB(nn_linear_stub, nn::LinearFn);
STRATA_DECLARE_STUB(nn_minmax_stub, nn::MinMaxFn);
STRATA_DECLARE_STUB(nn_embedding_stub, nn::EmbeddingFn);
STRATA_DECLARE_STUB(nn_one_hot_stub, nn::OneHotFn);
STRATA_DECLARE_STUB(nn_embedding_bag_stub, nn::EmbeddingBagFn);
STRATA_DECLARE_STUB(nn_embedding_renorm_stub, nn::EmbeddingRenormFn);
STRATA_DECLARE_STUB(nn_row_norm_stub, nn::RowNormFn);
STRATA_DECLARE_STUB(nn_group_norm_stub, nn::GroupNormFn);
STRATA_DECLARE_STUB(nn_batch_norm_stub, nn::BatchNormFn);
STRATA_DECLARE_STUB(nn_class_loss_stub, nn::ClassLossFn);
STRATA_DECLARE_STUB(nn_prob_loss_stub, nn::ProbLossFn);
STRATA_DECLARE_STUB(nn_sum_stub, nn::SumFn);
STRATA_DECLARE_STUB(nn_conv2d_stub, nn::Conv2dFn);
STRATA_DECLARE_STUB(nn_avg_pool2d_stub, nn::AvgPool2dFn);
STRATA_DECLARE_STUB(nn_pad_stub, nn::PadFn);
}  // namespace strata
