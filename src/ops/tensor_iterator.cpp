#include "ops/tensor_iterator.h"

#include <algorithm>

#include "ops/ops.h"
#include "ops/out_overlap.h"
#include "ops/pointwise.h"
#include "core/hot.h"

namespace strata {

STRATA_HOT void update_result_type_state(ResultTypeState& st, const Tensor& t) {
  if (!t.defined()) return;
  ScalarType cur = t.dtype();
  if (t.impl()->is_wrapped_number()) {
    // A Python float counts as the default dtype, a Python int as int64.
    if (is_floating_type(cur)) cur = default_dtype();
    else if (is_complex_type(cur)) cur = default_complex_dtype();
    st.wrapped_result = promote_types(st.wrapped_result == ScalarType::Undefined ? cur : st.wrapped_result, cur);
  } else if (t.dim() > 0) {
    st.dim_result = promote_types(st.dim_result == ScalarType::Undefined ? cur : st.dim_result, cur);
  } else {
    st.zero_result = promote_types(st.zero_result == ScalarType::Undefined ? cur : st.zero_result, cur);
  }
}

void update_result_type_state(ResultTypeState& st, const Scalar& s) {
  ScalarType cur = s.natural_dtype();
  st.wrapped_result = promote_types(st.wrapped_result == ScalarType::Undefined ? cur : st.wrapped_result, cur);
}

namespace {
int category(ScalarType t) {
  return t == ScalarType::Bool ? 0 : is_integral_type(t, false) ? 1 : is_complex_type(t) ? 3 : 2;
}

// The higher-priority class wins unless the lower one is of a higher category;
// a complex lower class over a floating higher one keeps the higher's width
// (float64 tensor * 1j -> complex128, float32 tensor * 1j -> complex64).
ScalarType combine_categories(ScalarType higher, ScalarType lower) {
  if (higher == ScalarType::Undefined) return lower;
  if (lower == ScalarType::Undefined) return higher;
  if (is_complex_type(higher)) return higher;
  if (is_complex_type(lower)) [[unlikely]]
    return is_floating_type(higher) ? to_complex_type(higher) : lower;
  if (is_floating_type(higher)) return higher;
  if (higher == ScalarType::Bool || is_floating_type(lower)) return promote_types(higher, lower);
  return higher;
}
}  // namespace

STRATA_HOT ScalarType result_type(const ResultTypeState& st) {
  return combine_categories(st.dim_result, combine_categories(st.zero_result, st.wrapped_result));
}

ScalarType result_type(std::initializer_list<Tensor> ts) {
  ResultTypeState st;
  for (const auto& t : ts) update_result_type_state(st, t);
  return result_type(st);
}

bool can_cast(ScalarType from, ScalarType to) { return category(from) <= category(to); }

STRATA_HOT Device common_device(std::span<const Tensor> ts, const char* op) {
  std::optional<Device> dev;
  for (const auto& t : ts) {
    if (!t.defined()) continue;
    Device d = t.device();
    if (!dev) {
      dev = d;
    } else if (*dev != d) {
      // CPU scalars may be mixed with tensors of any device.
      if (d.is_cpu() && t.dim() == 0) continue;
      if (dev->is_cpu()) {
        bool all_scalar_so_far = true;
        for (const auto& u : ts) {
          if (&u == &t) break;
          if (u.defined() && u.dim() != 0) all_scalar_so_far = false;
        }
        if (all_scalar_so_far) {
          dev = d;
          continue;
        }
      }
      throw Error(str(op, ": Expected all tensors to be on the same device, but found at least two devices, ",
                      dev->str(), " and ", d.str(), "!"));
    }
  }
  return dev.value_or(Device());
}

namespace {
// std::equal on int64 ranges is a call to memcmp; shapes are a few dims long.
inline bool same_sizes(IntArrayRef a, IntArrayRef b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// Note [channels_last outputs]: a 4-d (5-d) tensor whose strides put C fastest, then W, H (, D), N is laid out
// channels_last (channels_last_3d); size-1 dims may have any stride, as torch's is_contiguous(memory_format=)
// allows. A pointwise op whose first full-shape input is so laid out (and not also plain contiguous) gives its
// output the same layout, as torch's TensorIterator does, and runs it as one flat run when every operand shares it.
bool is_channels_last_dense(const Tensor& t) {
  const int64_t nd = t.dim();
  if (nd != 4 && nd != 5) return false;
  IntArrayRef sz = t.sizes(), st = t.strides();
  int64_t expected = 1;
  auto next = [&](int64_t d) {
    if (sz[d] != 1 && st[d] != expected) return false;
    expected *= sz[d];
    return true;
  };
  if (!next(1)) return false;
  for (int64_t d = nd - 1; d >= 2; --d)
    if (!next(d)) return false;
  return next(0);
}

// The output of a non-contiguous first input: channels-last when that input is, else row-major. Out of line: the
// common (contiguous) path only tests a flag.
[[gnu::noinline]] Tensor empty_in_layout_of(const Tensor& lead, IntArrayRef shape, ScalarType dtype, Device device) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if ((nd != 4 && nd != 5) || !same_sizes(lead.sizes(), shape) || !is_channels_last_dense(lead))
    return empty_tensor(shape, dtype, device);
  DimVector strides(shape.size());
  int64_t s = 1;
  strides[1] = s;
  s *= std::max<int64_t>(shape[1], 1);
  for (int64_t d = nd - 1; d >= 2; --d) {
    strides[d] = s;
    s *= std::max<int64_t>(shape[d], 1);
  }
  strides[0] = s;
  int64_t numel = 1;
  for (int64_t v : shape) numel *= v;
  auto storage = make_storage(static_cast<size_t>(numel) * element_size(dtype), device);
  return Tensor(make_intrusive<TensorImpl>(std::move(storage), 0, shape, IntArrayRef(strides), dtype));
}

[[gnu::noinline]] bool same_channels_last_layout(const Tensor& out, std::span<const Tensor> inputs, IntArrayRef shape) {
  if (!is_channels_last_dense(out)) return false;
  for (const Tensor& t : inputs)
    if (t.dim() != 0 && !(same_sizes(t.sizes(), shape) && same_sizes(t.strides(), out.strides()))) return false;
  return true;
}
}  // namespace

// Note [Overlapping writes]
// An op that writes (out= or in place) into memory that one of its inputs
// still has to be read from would read elements it already overwrote, with a
// result that depends on the loop order. As in torch, the TensorIterator
// refuses such calls when it can tell: the written-to tensor has elements
// that share memory (an expanded tensor; fill_ and zero_, which have no
// inputs, may still write it), or an input and the output are both
// non-overlapping and dense over one storage and their spans overlap without
// being the very same elements in the same order (x.add_(x) and
// exp(x, out=x) are fine; x[1:].add_(x[:-1]) and x.add_(x.t()) are not).
// Layouts it cannot judge cheaply (every other element, say) are let through,
// as in torch.
bool non_overlapping_and_dense(const Tensor& t) {
  if (t.is_contiguous()) return true;
  const int nd = t.dim();
  DimVector perm(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) perm[i] = i;
  IntArrayRef sz = t.sizes(), st = t.strides();
  std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return st[a] < st[b]; });
  int64_t expected = 1;
  for (int64_t d : perm) {
    if (sz[d] == 1) continue;
    if (st[d] != expected) return false;
    expected *= sz[d];
  }
  return true;
}

void check_no_overlapping_write(const char* op, const Tensor& out, std::span<const Tensor> inputs) {
  if (out.numel() <= 1 || !out.impl()->storage()) return;
  const bool out_dense = non_overlapping_and_dense(out);
  if (!out_dense && !inputs.empty()) {
    IntArrayRef sz = out.sizes(), st = out.strides();
    for (size_t d = 0; d < sz.size(); ++d) {
      STRATA_CHECK(!(sz[d] > 1 && st[d] == 0), op, ": unsupported operation: more than one element of the "
                   "written-to tensor refers to a single memory location. Please clone() the tensor before "
                   "performing the operation.");
    }
  }
  if (!out_dense) return;
  const char* ob = static_cast<const char*>(out.data_ptr());
  const char* oe = ob + out.numel() * static_cast<int64_t>(out.element_size());
  for (const Tensor& in : inputs) {
    if (!in.defined() || in.numel() == 0 || in.impl() == out.impl()) continue;
    if (in.impl()->storage() != out.impl()->storage()) continue;
    if (!non_overlapping_and_dense(in)) continue;
    const char* ib = static_cast<const char*>(in.data_ptr());
    const char* ie = ib + in.numel() * static_cast<int64_t>(in.element_size());
    bool partial;
    if (ib == ob && ie == oe) {
      IntArrayRef a = in.strides(), b = out.strides();
      partial = !(in.sizes().size() == out.sizes().size() && std::equal(a.begin(), a.end(), b.begin(), b.end()));
    } else {
      partial = ib < oe && ob < ie;
    }
    STRATA_CHECK(!partial, op, ": unsupported operation: some elements of the input tensor and the written-to "
                 "tensor refer to a single memory location. Please clone() the tensor before performing the "
                 "operation.");
  }
}

// Ops that are not elementwise (cat, stack, index_select, gather, take,
// masked_select, cross) read an input in another order than they write out,
// so torch refuses any overlap between out and an input, full aliasing
// included (assert_no_overlap). Called before out is resized: resizing an out
// that is an input would change the input under the op.
void check_out_overlap(const char* op, const Tensor& out, std::span<const Tensor> inputs) {
  if (!out.defined() || !out.impl()->storage()) return;
  const bool out_dense = non_overlapping_and_dense(out);
  const char* ob = out.numel() ? static_cast<const char*>(out.data_ptr()) : nullptr;
  const char* oe = ob ? ob + out.numel() * static_cast<int64_t>(out.element_size()) : nullptr;
  for (const Tensor& in : inputs) {
    if (!in.defined()) continue;
    bool overlap = in.impl() == out.impl();
    if (!overlap && ob && in.numel() > 0 && out_dense && in.impl()->storage() == out.impl()->storage() &&
        non_overlapping_and_dense(in)) {
      const char* ib = static_cast<const char*>(in.data_ptr());
      const char* ie = ib + in.numel() * static_cast<int64_t>(in.element_size());
      overlap = ib < oe && ob < ie;
    }
    STRATA_CHECK(!overlap, op, ": unsupported operation: some elements of the input tensor and the written-to "
                 "tensor refer to a single memory location. Please clone() the tensor before performing the "
                 "operation.");
  }
}

STRATA_HOT TensorIterator::TensorIterator(Config cfg, std::initializer_list<Tensor> inputs)
    : cfg_(std::move(cfg)) {
  STRATA_CHECK(static_cast<int>(inputs.size()) + 1 <= kMaxOperands, cfg_.op, ": too many operands");
  for (const Tensor& t : inputs) inputs_[ninputs_++] = t;
  device_ = common_device(this->inputs(), cfg_.op);
  if (cfg_.out) {
    Device od = cfg_.out->device();
    STRATA_CHECK(od == device_ || ninputs_ == 0, cfg_.op, ": Expected out tensor to be on ", device_.str(),
                 " but got ", od.str());
    device_ = od;
  }

  // Broadcast shape. Same-shaped inputs (the common case) need no new vector:
  // the shape is a view of the first input's sizes.
  // 0-d inputs (Python numbers: `x * 0.5`) broadcast to anything, so the
  // shape is still a view of the first input of full rank when all the others
  // agree with it.
  DimVector shape_buf;
  IntArrayRef shape;
  int lead = 0;
  while (lead < ninputs_ && inputs_[lead].dim() == 0) ++lead;
  if (lead == ninputs_) lead = 0;
  bool same_shapes = ninputs_ > 0;
  for (int i = 0; same_shapes && i < ninputs(); ++i) {
    same_shapes = i == lead || inputs_[i].dim() == 0 || same_sizes(inputs_[lead].sizes(), inputs_[i].sizes());
  }
  if (same_shapes) {
    shape = inputs_[lead].sizes();
  } else {
    for (const auto& t : this->inputs()) shape_buf = broadcast_shapes(shape_buf, t.sizes(), cfg_.op);
    shape = shape_buf;
  }

  // In place, the output takes part in broadcasting (copy_ of a [4, 5] source
  // into [2, 4, 5]); a generator (fill) has no inputs and covers its output.
  if (cfg_.inplace && cfg_.out) {
    IntArrayRef os = cfg_.out->sizes();
    if (!std::equal(shape.begin(), shape.end(), os.begin(), os.end())) {
      shape_buf = broadcast_shapes(shape, os, cfg_.op);
      shape = shape_buf;
    }
  }

  // Dtypes.
  if (cfg_.compute_dtype) {
    common_ = *cfg_.compute_dtype;
  } else {
    ResultTypeState st;
    for (int i = 0; i < ninputs(); ++i)
      if (i != cfg_.skip_promotion_of) update_result_type_state(st, inputs_[i]);
    common_ = result_type(st);
    if (common_ == ScalarType::Undefined) common_ = default_dtype();
  }
  if (cfg_.int_to_float && !is_floating_type(common_) && !is_complex_type(common_)) common_ = default_dtype();
  ScalarType out_dtype = cfg_.out_dtype.value_or(common_);

  if (cfg_.out) {
    Tensor o = *cfg_.out;
    if (cfg_.inplace) {
      STRATA_CHECK(can_cast(out_dtype, o.dtype()), cfg_.op, ": result type ", dtype_name(out_dtype),
                   " can't be cast to the desired output type ", dtype_name(o.dtype()));
      STRATA_CHECK(std::equal(shape.begin(), shape.end(), o.sizes().begin(), o.sizes().end()), cfg_.op,
                   ": output with shape ", o.shape_str(), " doesn't match the broadcast shape ", shape_str(shape));
    } else {
      STRATA_CHECK(can_cast(out_dtype, o.dtype()), cfg_.op, ": result type ", dtype_name(out_dtype),
                   " can't be cast to the desired output type ", dtype_name(o.dtype()));
      if (!std::equal(shape.begin(), shape.end(), o.sizes().begin(), o.sizes().end())) resize_out(o, shape, cfg_.op);
    }
    if (!device_.is_meta()) check_no_overlapping_write(cfg_.op, o, this->inputs());
    if (o.dtype() == out_dtype) {
      out_ = o;
    } else {
      // Compute in the op's own dtype, then cast into out (see finish()).
      user_out_ = o;
      out_ = empty_tensor(shape, out_dtype, device_);
    }
  } else if (__builtin_expect(ninputs_ > 0 && !inputs_[lead].is_contiguous(), 0)) {
    out_ = empty_in_layout_of(inputs_[lead], shape, out_dtype, device_);  // Note [channels_last outputs]
  } else {
    out_ = empty_tensor(shape, out_dtype, device_);
  }
  numel_ = out_.numel();

  if (cfg_.promote_inputs) {
    for (int i = 0; i < ninputs(); ++i) {
      if (i == cfg_.skip_promotion_of) continue;
      if (inputs_[i].dtype() == common_) continue;
      const Tensor& t = inputs_[i];
      // A Python number (`x * 0.5`) is re-made in the common dtype directly:
      // an op call for a one-element cast cost a third of the whole op.
      if (t.dim() == 0 && t.impl()->is_wrapped_number() && t.device().is_cpu())
        inputs_[i] = scalar_to_tensor(t.item(), common_, t.device(), true);
      else
        inputs_[i] = to_dtype(t, common_);
    }
  }
  // out_ has the broadcast shape; `shape` may view inputs_[0]'s sizes, which
  // promotion above may have replaced.
  if (!is_meta()) compute_geometry(out_.sizes());
}

STRATA_HOT void TensorIterator::compute_geometry(IntArrayRef shape) {
  const int nd = static_cast<int>(shape.size());
  const int nop = noperands();
  for (int o = 0; o < nop; ++o) data_[o] = static_cast<char*>((o == 0 ? out_ : inputs_[o - 1]).data_ptr());
  if (nd == 0) {
    ndim_ = 0;
    return;
  }
  if (numel_ == 0) {
    // Nothing to visit. The sizes of an empty shape may be huge ([0, 2**60, 4]): their merged products and
    // byte strides below would overflow int64 (found by fuzz/fuzz_geometry).
    ndim_ = 1;
    geo_[0] = 0;
    for (int o = 0; o < nop; ++o) strides(o)[0] = 0;
    return;
  }
  // Fast path: every operand contiguous with the full shape (no broadcasting)
  // is one flat run, whatever the number of dims.
  // A 0-d input joins the flat run with stride 0 (the kernels' broadcast-
  // scalar loops take it from there).
  bool flat = true;
  for (int o = 0; flat && o < nop; ++o) {
    const Tensor& t = o == 0 ? out_ : inputs_[o - 1];
    flat = (o > 0 && t.dim() == 0) || (t.is_contiguous() && same_sizes(t.sizes(), shape));
  }
  // Every operand in the same channels-last layout is one flat run too (Note [channels_last outputs]).
  if (__builtin_expect(!flat && (nd == 4 || nd == 5) && !out_.is_contiguous(), 0))
    flat = same_channels_last_layout(out_, inputs(), shape);
  if (flat) {
    ndim_ = 1;
    geo_[0] = numel_;
    for (int o = 0; o < nop; ++o) {
      const Tensor& t = o == 0 ? out_ : inputs_[o - 1];
      strides(o)[0] = o > 0 && t.dim() == 0 ? 0 : static_cast<int64_t>(t.element_size());
    }
    return;
  }
  if (nd > kInlineDims) {
    geo_heap_.reset(new int64_t[static_cast<size_t>(nop + 1) * nd]);
    geo_ = geo_heap_.get();
    geo_cap_ = nd;
  }
  // Innermost-first shape and broadcast byte strides.
  for (int d = 0; d < nd; ++d) geo_[d] = shape[nd - 1 - d];
  for (int o = 0; o < nop; ++o) {
    const Tensor& t = o == 0 ? out_ : inputs_[o - 1];
    int64_t* st = strides(o);
    for (int d = 0; d < nd; ++d) st[d] = 0;
    int64_t es = static_cast<int64_t>(t.element_size());
    int off = nd - static_cast<int>(t.dim());
    for (int d = 0; d < t.dim(); ++d) {
      int rd = nd - 1 - (d + off);
      st[rd] = t.sizes()[d] == 1 ? 0 : t.strides()[d] * es;
    }
  }
  // Drop size-1 dims, then merge neighbours whose strides line up for every
  // operand. Written in place: the output position never passes the input's.
  int n = 0;
  for (int d = 0; d < nd; ++d) {
    int64_t sz = geo_[d];
    if (sz == 1) continue;
    bool merge = n > 0;
    for (int o = 0; merge && o < nop; ++o) merge = strides(o)[n - 1] * geo_[n - 1] == strides(o)[d];
    if (merge) {
      geo_[n - 1] *= sz;
    } else {
      geo_[n] = sz;
      for (int o = 0; o < nop; ++o) strides(o)[n] = strides(o)[d];
      n++;
    }
  }
  if (n == 0) {
    geo_[0] = 1;
    for (int o = 0; o < nop; ++o) strides(o)[0] = 0;
    n = 1;
  }
  ndim_ = n;
}

STRATA_HOT Tensor TensorIterator::finish() {
  if (user_out_.defined()) {
    if (!is_meta()) copy_(user_out_, out_, false);
    return user_out_;
  }
  return out_;
}

bool TensorIterator::is_contiguous() const {
  if (ndim() > 1) return false;
  if (ndim() == 0) return true;
  for (int o = 0; o < noperands(); ++o) {
    const Tensor& t = o == 0 ? out_ : inputs_[o - 1];
    if (strides(o)[0] != static_cast<int64_t>(t.element_size())) return false;
  }
  return true;
}

}  // namespace strata
