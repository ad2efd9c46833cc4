// scaled_dot_product_attention: GEMM-based math path with bool/additive masks,
// causal masking, broadcasting over batch dims and grouped-query attention.
// dropout_p > 0 is composed in Python (strata.nn.functional) from this op's
// pieces; the op itself is deterministic.
#include <cmath>

#include "ops/nn_util.h"
#include "ops/op_list.h"

namespace strata {

STRATA_DEFINE_STUB(nn_attention_stub, nn::AttentionFn);

using namespace nn;

// Implementations live in strata::nn so their names cannot clash with other families.
namespace nn {

namespace {
// sizes/strides of t's batch dims (all but the last two), right-aligned to nb
// dims; broadcast dims get stride 0.
void batch_geometry(const Tensor& t, int64_t nb, DimVector& sizes, DimVector& strides) {
  DimVector cs = contiguous_strides(t.sizes());
  const int64_t tb = std::max<int64_t>(t.dim() - 2, 0);
  sizes.assign(nb, 1);
  strides.assign(nb, 0);
  for (int64_t i = 0; i < tb; ++i) {
    const int64_t d = nb - tb + i;
    sizes[d] = t.size(i);
    strides[d] = t.size(i) == 1 ? 0 : cs[i];
  }
}
}  // namespace

Tensor sdpa_impl(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& attn_mask,
                 double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  const char* op = "scaled_dot_product_attention";
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
  const int64_t L = q.size(-2), E = q.size(-1), S = k.size(-2), Ev = v.size(-1);
  STRATA_CHECK(k.size(-1) == E, op, ": Expected query and key to have the same embedding dimension (last dim), but "
               "got query ", q.shape_str(), " and key ", k.shape_str());
  STRATA_CHECK(v.size(-2) == S, op, ": Expected key and value to have the same sequence length (dim -2), but got key ",
               k.shape_str(), " and value ", v.shape_str());
  if (has(attn_mask)) {
    const ScalarType md = attn_mask->dtype();
    STRATA_CHECK(md == ScalarType::Bool || md == q.dtype(), op, ": Expected attn_mask dtype to be bool or to match "
                 "query dtype, but got attn_mask.dtype: ", dtype_name(md), " and query.dtype: ", dtype_name(q.dtype()));
  }
  Device dev = check_devices(op, {q, k, v, has(attn_mask) ? *attn_mask : Tensor()});
  int64_t nb = std::max({q.dim(), k.dim(), v.dim()}) - 2;
  if (has(attn_mask)) nb = std::max(nb, attn_mask->dim() - 2);
  DimVector qs, qst, ks, kst, vs, vst, ms, mst;
  batch_geometry(q, nb, qs, qst);
  batch_geometry(k, nb, ks, kst);
  batch_geometry(v, nb, vs, vst);
  // Grouped-query attention: key/value heads (dim -3) serve groups of query heads.
  int64_t group = 1;
  if (enable_gqa && nb >= 1 && qs[nb - 1] != ks[nb - 1]) {
    STRATA_CHECK(ks[nb - 1] > 0 && qs[nb - 1] % ks[nb - 1] == 0 && vs[nb - 1] == ks[nb - 1], op,
                 ": enable_gqa=True needs the number of query heads (", qs[nb - 1], ") to be a multiple of the "
                 "number of key/value heads (", ks[nb - 1], ", ", vs[nb - 1], ")");
    group = qs[nb - 1] / ks[nb - 1];
  }
  DimVector batch(nb);
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t kv = (i == nb - 1 && group > 1) ? qs[i] : ks[i];
    int64_t b = qs[i];
    for (int64_t c : {kv, (i == nb - 1 && group > 1) ? qs[i] : vs[i]}) {
      STRATA_CHECK(b == c || b == 1 || c == 1, op, ": batch dimensions of query ", q.shape_str(), ", key ",
                   k.shape_str(), " and value ", v.shape_str(), " cannot be broadcast together");
      b = b == 1 ? c : b;
    }
    batch[i] = b;
  }
  Tensor mask;
  int mask_kind = 0;
  int64_t m_rs = 0, m_cs = 0;
  if (has(attn_mask)) {
    const Tensor& m = *attn_mask;
    const int64_t ml = m.dim() >= 2 ? m.size(-2) : 1, mss = m.dim() >= 1 ? m.size(-1) : 1;
    STRATA_CHECK((ml == L || ml == 1) && (mss == S || mss == 1), op, ": attn_mask of shape ", m.shape_str(),
                 " cannot be broadcast to the attention weights' shape (", L, ", ", S, ")");
    batch_geometry(m.dim() >= 2 ? m : reshape_contig(contiguous(m), std::vector<int64_t>{1, mss}), nb, ms, mst);
    for (int64_t i = 0; i < nb; ++i)
      STRATA_CHECK(ms[i] == 1 || ms[i] == batch[i], op, ": attn_mask of shape ", m.shape_str(),
                   " cannot be broadcast to the batch shape ", shape_str(batch));
    mask_kind = m.dtype() == ScalarType::Bool ? 1 : 2;
    m_rs = ml == 1 ? 0 : mss;
    m_cs = mss == 1 ? 0 : 1;
  }
  DimVector out_shape = batch;
  out_shape.push_back(L);
  out_shape.push_back(Ev);
  if (dev.is_meta()) return empty_tensor(out_shape, q.dtype(), dev);
  const ScalarType ct = compute_type(q.dtype());
  Tensor out = empty_tensor(out_shape, ct, dev);
  if (out.numel() == 0) return to_dtype(out, q.dtype());
  AttnArgs a;
  a.batch = checked_numel(batch, op);
  a.l = L;
  a.s = S;
  a.e = E;
  a.ev = Ev;
  a.scale = scale.value_or(E > 0 ? 1.0 / std::sqrt(static_cast<double>(E)) : 1.0);
  a.causal = is_causal;
  a.mask_kind = mask_kind;
  a.m_rs = m_rs;
  a.m_cs = m_cs;
  for (int64_t b = 0; b < a.batch; ++b) {
    int64_t rem = b, qo = 0, ko = 0, vo = 0, mo = 0;
    for (int64_t i = nb - 1; i >= 0; --i) {
      const int64_t idx = rem % batch[i];
      rem /= batch[i];
      const int64_t kvi = (i == nb - 1 && group > 1) ? idx / group : idx;
      qo += idx * qst[i];
      ko += kvi * kst[i];
      vo += kvi * vst[i];
      if (mask_kind) mo += idx * mst[i];
    }
    a.q_off.push_back(qo);
    a.k_off.push_back(ko);
    a.v_off.push_back(vo);
    a.m_off.push_back(mo);
  }
  if (mask_kind == 1) mask = contiguous(*attn_mask);
  else if (mask_kind == 2) mask = prep(*attn_mask, ct);
  nn_attention_stub(dev.type, prep(q, ct), prep(k, ct), prep(v, ct), mask, out, a);
  return to_dtype(out, q.dtype());
}
STRATA_IMPL_CPU_META(scaled_dot_product_attention, sdpa_impl);

}  // namespace nn
}  // namespace strata
