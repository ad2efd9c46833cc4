// scaled_dot_product_attention: a fused CPU kernel per (batch, head) matrix
// (scores GEMM, mask + scale + softmax on the score block, output GEMM) with
// bool/additive masks, causal masking, broadcasting over batch dims and
// grouped-query attention; and _scaled_dot_product_attention_backward, the
// fused gradient the autograd derivative uses when no graph of the backward
// is recorded. dropout_p > 0 is composed in Python (strata.nn.functional)
// from this op's pieces; the op itself is deterministic.
//
// Operands are read in place when their rows are contiguous (the usual
// view(B, T, H, D).transpose(1, 2) heads are), and results are laid out in
// the dimension order of the corresponding input, as torch does: the
// output of transposed heads is itself a transposed view, so the caller's
// transpose(1, 2).reshape(B, T, C) costs no copy, and the heads' gradients
// flow back through the view ops without copies either.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/nn_attention_kernels.h"
#include "ops/nn_util.h"
#include "ops/op_list.h"

namespace strata {

STRATA_DEFINE_STUB(nn_attention_forward_stub, nn::AttnForwardFn);
STRATA_DEFINE_STUB(nn_attention_backward_stub, nn::AttnBackwardFn);

using namespace nn;

// Implementations live in strata::nn so their names cannot clash with other families.
namespace nn {

namespace {

// Shapes and checks common to the forward and the backward.
struct AttnSetup {
  int64_t l = 0, s = 0, e = 0, ev = 0;
  DimVector batch;   // broadcast batch dims of q, k, v (and the mask)
  int64_t group = 1; // query heads per key/value head (enable_gqa)
  Device dev;
};

AttnSetup setup_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                          const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal, bool enable_gqa) {
  STRATA_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op, ": expected query, key and value to have at least "
               "2 dimensions, but got query ", q.shape_str(), ", key ", k.shape_str(), ", value ", v.shape_str());
  STRATA_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), op, ": Expected query, key, and value to have the "
               "same dtype, but got query.dtype: ", dtype_name(q.dtype()), " key.dtype: ", dtype_name(k.dtype()),
               " and value.dtype: ", dtype_name(v.dtype()), " instead.");
  check_floating(op, q, "query");
  STRATA_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, op, ": dropout_p must be in [0, 1], but got ", dropout_p);
  STRATA_CHECK_T(NotImplementedError, dropout_p == 0.0, op, ": the op computes dropout_p=0 only; use "
                 "strata.nn.functional.scaled_dot_product_attention for dropout_p=", dropout_p);
  STRATA_CHECK(!(is_causal && has(attn_mask)), op, ": Explicit attn_mask should not be set when is_causal=True");
  AttnSetup st;
  st.l = q.size(-2);
  st.e = q.size(-1);
  st.s = k.size(-2);
  st.ev = v.size(-1);
  STRATA_CHECK(k.size(-1) == st.e, op, ": Expected query and key to have the same embedding dimension (last dim), "
               "but got query ", q.shape_str(), " and key ", k.shape_str());
  STRATA_CHECK(v.size(-2) == st.s, op, ": Expected key and value to have the same sequence length (dim -2), but got "
               "key ", k.shape_str(), " and value ", v.shape_str());
  if (has(attn_mask)) {
    const ScalarType md = attn_mask->dtype();
    STRATA_CHECK(md == ScalarType::Bool || md == q.dtype(), op, ": Expected attn_mask dtype to be bool or to match "
                 "query dtype, but got attn_mask.dtype: ", dtype_name(md), " and query.dtype: ", dtype_name(q.dtype()));
  }
  st.dev = check_devices(op, {q, k, v, has(attn_mask) ? *attn_mask : Tensor()});
  int64_t nb = std::max({q.dim(), k.dim(), v.dim()}) - 2;
  if (has(attn_mask)) nb = std::max(nb, attn_mask->dim() - 2);
  // Batch sizes right-aligned to nb dims (missing leading dims are 1).
  auto bsizes = [&](const Tensor& t) {
    DimVector r(nb, 1);
    const int64_t tb = std::max<int64_t>(t.dim() - 2, 0);
    for (int64_t i = 0; i < tb; ++i) r[nb - tb + i] = t.size(i);
    return r;
  };
  const DimVector qs = bsizes(q), ks = bsizes(k), vs = bsizes(v);
  // Grouped-query attention: key/value heads (dim -3) serve groups of query heads.
  if (enable_gqa && nb >= 1 && qs[nb - 1] != ks[nb - 1]) {
    STRATA_CHECK(ks[nb - 1] > 0 && qs[nb - 1] % ks[nb - 1] == 0 && vs[nb - 1] == ks[nb - 1], op,
                 ": enable_gqa=True needs the number of query heads (", qs[nb - 1], ") to be a multiple of the "
                 "number of key/value heads (", ks[nb - 1], ", ", vs[nb - 1], ")");
    st.group = qs[nb - 1] / ks[nb - 1];
  }
  st.batch.resize(nb);
  for (int64_t i = 0; i < nb; ++i) {
    const bool heads = i == nb - 1 && st.group > 1;
    int64_t b = qs[i];
    for (int64_t c : {heads ? qs[i] : ks[i], heads ? qs[i] : vs[i]}) {
      STRATA_CHECK(b == c || b == 1 || c == 1, op, ": batch dimensions of query ", q.shape_str(), ", key ",
                   k.shape_str(), " and value ", v.shape_str(), " cannot be broadcast together");
      b = b == 1 ? c : b;
    }
    st.batch[i] = b;
  }
  if (has(attn_mask)) {
    const Tensor& m = *attn_mask;
    const int64_t ml = m.dim() >= 2 ? m.size(-2) : 1, mss = m.dim() >= 1 ? m.size(-1) : 1;
    STRATA_CHECK((ml == st.l || ml == 1) && (mss == st.s || mss == 1), op, ": attn_mask of shape ", m.shape_str(),
                 " cannot be broadcast to the attention weights' shape (", st.l, ", ", st.s, ")");
    const DimVector ms = bsizes(m);
    for (int64_t i = 0; i < nb; ++i)
      STRATA_CHECK(ms[i] == 1 || ms[i] == st.batch[i], op, ": attn_mask of shape ", m.shape_str(),
                   " cannot be broadcast to the batch shape ", shape_str(st.batch));
  }
  return st;
}

// Element offsets of t's matrices for each flattened index of `batch` (t's batch dims right-aligned; size-1 dims
// broadcast). group > 1 maps query head h of the last batch dim to key/value head h / group.
std::vector<int64_t> batch_offsets(const Tensor& t, IntArrayRef batch, int64_t group) {
  const int64_t nb = static_cast<int64_t>(batch.size()), tb = std::max<int64_t>(t.dim() - 2, 0);
  DimVector st(nb, 0);
  for (int64_t i = 0; i < tb; ++i) st[nb - tb + i] = t.size(i) == 1 ? 0 : t.stride(i);
  int64_t total = 1;
  for (int64_t b : batch) total *= b;
  std::vector<int64_t> off(static_cast<size_t>(total));
  DimVector idx(nb, 0);
  for (int64_t f = 0; f < total; ++f) {
    int64_t o = 0;
    for (int64_t i = 0; i < nb; ++i) o += (i == nb - 1 && group > 1 ? idx[i] / group : idx[i]) * st[i];
    off[static_cast<size_t>(f)] = o;
    for (int64_t i = nb - 1; i >= 0; --i) {  // odometer step, last dim fastest
      if (++idx[i] < batch[i]) break;
      idx[i] = 0;
    }
  }
  return off;
}

// t in dtype ct with unit stride along its rows and a BLAS-valid row stride, copied only when it has neither.
Tensor row_operand(const Tensor& t, ScalarType ct, std::string_view what) {
  Tensor x = to_dtype(t, ct);
  const int64_t r = x.size(-2), c = x.size(-1);
  const bool ok = (c <= 1 || x.stride(-1) == 1) && (r <= 1 || x.stride(-2) >= std::max<int64_t>(c, 1));
  return ok ? x : contiguous_input(x, what);
}

AttnMat mat_of(const Tensor& t, IntArrayRef batch, int64_t group) {
  AttnMat m;
  m.rs = t.size(-2) <= 1 ? std::max<int64_t>(t.size(-1), 1) : t.stride(-2);
  m.off = batch_offsets(t, batch, group);
  return m;
}

// An uninitialised tensor of `sizes` whose dims are stored in the order of ref's strides (ref has the same batch
// sizes and rank), so a result follows its input's layout; row-major when ref's last dim is not its innermost.
Tensor empty_like_layout(const Tensor& ref, IntArrayRef sizes, ScalarType dt, Device dev) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  bool follow = ref.dim() == nd && nd >= 3 && ref.stride(-1) == 1;
  for (int64_t i = 0; follow && i < nd - 2; ++i) follow = ref.size(i) == sizes[i];
  for (int64_t i = 0; follow && i < nd - 1; ++i) follow = ref.size(i) <= 1 || ref.stride(i) >= 1;
  if (!follow) return empty_tensor(sizes, dt, dev);
  DimVector perm(nd - 1);
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return ref.stride(a) > ref.stride(b); });
  perm.push_back(nd - 1);
  DimVector ps(nd);
  for (int64_t i = 0; i < nd; ++i) ps[i] = sizes[perm[i]];
  const DimVector cs = contiguous_strides(ps);
  DimVector strides(nd);
  for (int64_t i = 0; i < nd; ++i) strides[perm[i]] = cs[i];
  Tensor base = empty_tensor(ps, dt, dev);
  return make_view(base, DimVector(sizes.begin(), sizes.end()), strides, base.storage_offset());
}

// The mask contiguous in its kernel dtype (bool, or the compute type), with its geometry.
Tensor mask_operand(const std::optional<Tensor>& attn_mask, ScalarType ct, const AttnSetup& st, AttnGeom& g) {
  if (!has(attn_mask)) return Tensor();
  const Tensor& m = *attn_mask;
  const int64_t ml = m.dim() >= 2 ? m.size(-2) : 1, mss = m.dim() >= 1 ? m.size(-1) : 1;
  Tensor mc = m.dtype() == ScalarType::Bool ? contiguous(m) : prep(m, ct);
  if (mc.dim() < 2) mc = reshape_contig(mc, std::vector<int64_t>{1, mss});
  g.mask_kind = m.dtype() == ScalarType::Bool ? 1 : 2;
  g.m_rs = ml == 1 ? 0 : mss;
  g.m_cs = mss == 1 ? 0 : 1;
  g.mask.off = batch_offsets(mc, st.batch, 1);
  return mc;
}

double default_scale(std::optional<double> scale, int64_t e) {
  return scale.value_or(e > 0 ? 1.0 / std::sqrt(static_cast<double>(e)) : 1.0);
}

// The sizes, scale and causality every attention kernel call gets (operands and mask are set by the caller).
AttnGeom attn_geom(const AttnSetup& st, std::optional<double> scale, bool is_causal, const char* op) {
  AttnGeom g;
  g.batch = checked_numel(st.batch, op);
  g.l = st.l;
  g.s = st.s;
  g.e = st.e;
  g.ev = st.ev;
  g.scale = default_scale(scale, st.e);
  g.causal = is_causal;
  return g;
}

}  // namespace

Tensor sdpa_impl(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& attn_mask,
                 double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  const char* op = "scaled_dot_product_attention";
  const AttnSetup st = setup_attention(op, q, k, v, attn_mask, dropout_p, is_causal, enable_gqa);
  DimVector out_shape = st.batch;
  out_shape.push_back(st.l);
  out_shape.push_back(st.ev);
  const ScalarType ct = compute_type(q.dtype());
  Tensor out = empty_like_layout(q, out_shape, ct, st.dev);
  // Meta gives the layout the CPU kernel gives: a captured graph that transposes the result back (heads to
  // [B, T, H * D]) then records a view, not a copy, and its kernels expect the strides the run will have.
  if (out.numel() == 0 || st.dev.is_meta()) return to_dtype(out, q.dtype());
  AttnGeom g = attn_geom(st, scale, is_causal, op);
  Tensor qc = row_operand(q, ct, "the query"), kc = row_operand(k, ct, "the key"), vc = row_operand(v, ct, "the value");
  g.q = mat_of(qc, st.batch, 1);
  g.k = mat_of(kc, st.batch, st.group);
  g.v = mat_of(vc, st.batch, st.group);
  g.out = mat_of(out, st.batch, 1);
  Tensor mask = mask_operand(attn_mask, ct, st, g);
  nn_attention_forward_stub(st.dev.type, qc, kc, vc, mask, out, g);
  return to_dtype(out, q.dtype());
}
STRATA_IMPL_CPU_META(scaled_dot_product_attention, sdpa_impl);

// The gradients of scaled_dot_product_attention (dropout_p=0) for query, key and value with equal batch dims (no
// broadcasting between them, no grouped-query attention: the derivative uses its composite formula there).
Tensor3 sdpa_backward_impl(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::optional<Tensor>& attn_mask, bool is_causal, std::optional<double> scale) {
  const char* op = "_scaled_dot_product_attention_backward";
  const AttnSetup st = setup_attention(op, q, k, v, attn_mask, 0.0, is_causal, false);
  const auto batch_of = [](const Tensor& t) { return DimVector(t.sizes().begin(), t.sizes().end() - 2); };
  STRATA_CHECK(batch_of(q) == st.batch && batch_of(k) == st.batch && batch_of(v) == st.batch, op,
               ": expected query, key and value with equal batch dimensions (and a mask that broadcasts to them), "
               "but got query ", q.shape_str(), ", key ", k.shape_str(), " and value ", v.shape_str());
  DimVector out_shape = st.batch;
  out_shape.push_back(st.l);
  out_shape.push_back(st.ev);
  STRATA_CHECK(DimVector(grad_out.sizes().begin(), grad_out.sizes().end()) == out_shape, op, ": expected grad_out "
               "of the attention output's shape ", shape_str(out_shape), ", but got ", grad_out.shape_str());
  check_same_dtype(op, q, "query", grad_out, "grad_out");
  check_devices(op, {grad_out, q});
  const ScalarType ct = compute_type(q.dtype());
  Tensor gq = empty_like_layout(q, q.sizes(), ct, st.dev), gk = empty_like_layout(k, k.sizes(), ct, st.dev),
         gv = empty_like_layout(v, v.sizes(), ct, st.dev);
  AttnGeom g = attn_geom(st, scale, is_causal, op);
  if (g.batch > 0 && !st.dev.is_meta()) {  // Meta: the CPU kernel's layouts (see sdpa_impl)
    Tensor qc = row_operand(q, ct, "the query"), kc = row_operand(k, ct, "the key");
    Tensor vc = row_operand(v, ct, "the value"), go = row_operand(grad_out, ct, "grad_out");
    g.q = mat_of(qc, st.batch, 1);
    g.k = mat_of(kc, st.batch, 1);
    g.v = mat_of(vc, st.batch, 1);
    g.out = mat_of(go, st.batch, 1);
    g.gq = mat_of(gq, st.batch, 1);
    g.gk = mat_of(gk, st.batch, 1);
    g.gv = mat_of(gv, st.batch, 1);
    Tensor mask = mask_operand(attn_mask, ct, st, g);
    nn_attention_backward_stub(st.dev.type, go, qc, kc, vc, mask, gq, gk, gv, g);
  }
  return {to_dtype(gq, q.dtype()), to_dtype(gk, k.dtype()), to_dtype(gv, v.dtype())};
}
STRATA_IMPL_CPU_META(_scaled_dot_product_attention_backward, sdpa_backward_impl);

}  // namespace nn
}  // namespace strata
