// Note [Batching rules]
// A rule turns one call on batched tensors (logical shapes) into one call on
// physical tensors, batch dim first. The families:
// - pointwise ops (kPointwise, plus a few more): each batched argument gets
//   its batch dim moved to the front and size-1 dims inserted after it up to
//   the largest logical rank, so broadcasting against unbatched arguments
//   (which are right-aligned) lines up. A logically 0-d batched argument whose
//   dtype differs from another argument declines (its promotion category would
//   change as a 1-d physical tensor).
// - ops of one tensor with dim arguments (reductions, softmax, cumsum, views
//   such as select/transpose/unsqueeze): batch first, every dim shifted by one;
//   "all dims" (None or [] where the op means that) become 1..rank.
// - shape ops (view/reshape/expand): the batch size is prepended to the shape.
// - matmul family: folded into one matmul of the physical tensors (a batched
//   operand against an unbatched one is one GEMM over B*rows).
// - cat/stack, losses, layer_norm/embedding/linear (whose batched operand
//   only needs its batch in front), copy_ and ops of self alone.
// Rules that would need an unusual case (a logically 0-d input to a dim op, a
// weighted loss, an out= argument) return false: the fallback then loops.
#include <mutex>
#include <string>
#include <unordered_map>

#include "ops/ops.h"
#include "vmap/batching.h"

namespace strata::vmap {

namespace {

std::vector<BatchRule>& rules() {
  static auto* r = new std::vector<BatchRule>();
  return *r;
}

Tensor to_front(const Tensor& p, int64_t bd) {
  if (bd == 0) return p;
  std::vector<int64_t> perm{bd};
  for (int64_t i = 0; i < p.dim(); ++i)
    if (i != bd) perm.push_back(i);
  return permute(p, perm);
}

Tensor pad_after_batch(Tensor p, int64_t n) {
  for (int64_t k = 0; k < n; ++k) p = unsqueeze(p, 1);
  return p;
}

// The physical tensor of t at level, batch first; t itself expanded to a
// batch of B when t is not batched there.
Tensor front_or_expand(const Tensor& t, int64_t level, int64_t B) {
  auto [p, bd] = unwrap_at(t, level);
  if (bd) return to_front(p, *bd);
  std::vector<int64_t> sizes{B};
  sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
  return expand(unsqueeze(t, 0), sizes);
}

bool wrap(int64_t d, int64_t n, int64_t* out) {
  if (n <= 0) n = 1;
  if (d < -n || d >= n) return false;
  *out = d < 0 ? d + n : d;
  return true;
}

int arg_index(const OperatorEntry& op, const std::string& name) {
  const auto& args = op.schema().args;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == name) return static_cast<int>(i);
  return -1;
}

// Replaces the op's arguments in stack by the results in s.
void finish(Stack& stack, size_t base, Stack& s) {
  stack.resize(base);
  for (IValue& v : s) stack.push_back(std::move(v));
}

// True if a tensor (or list element) other than those at `allowed` is batched at level.
bool others_batched(const Stack& s, int64_t level, std::initializer_list<int> allowed) {
  for (size_t i = 0; i < s.size(); ++i) {
    bool ok = false;
    for (int a : allowed) ok = ok || a == static_cast<int>(i);
    if (ok) continue;
    if (s[i].is_tensor() && unwrap_at(s[i].to_tensor(), level).second) return true;
    if (s[i].is_tensor_list())
      for (const Tensor& t : s[i].to_tensor_list())
        if (unwrap_at(t, level).second) return true;
  }
  return false;
}

// ---- pointwise -------------------------------------------------------------

bool rule_pointwise(const OperatorEntry& op, Stack& stack, size_t base, int64_t level, bool expand_self) {
  const auto& args = op.schema().args;
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  int64_t R = 0, B = -1;
  bool any_in = false, zero_d_batched = false, mixed = false;
  ScalarType dt = ScalarType::Undefined;
  int write = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].is_tensor_list()) return false;
    if (!s[i].is_tensor() || !s[i].to_tensor().defined()) continue;
    const Tensor& t = s[i].to_tensor();
    auto [p, bd] = unwrap_at(t, level);
    if (bd) B = p.size(*bd);
    if (args[i].is_write) {
      if (write < 0) write = static_cast<int>(i);
      continue;
    }
    R = std::max(R, t.dim());
    if (bd) {
      any_in = true;
      zero_d_batched = zero_d_batched || t.dim() == 0;
    }
    if (!t.impl()->is_wrapped_number()) {
      if (dt == ScalarType::Undefined) dt = t.dtype();
      mixed = mixed || dt != t.dtype();
    }
  }
  if (!any_in) return false;
  if (zero_d_batched && mixed && R > 0) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!s[i].is_tensor() || !s[i].to_tensor().defined()) continue;
    const Tensor t = s[i].to_tensor();
    auto [p, bd] = unwrap_at(t, level);
    if (args[i].is_write) {
      if (!bd) inplace_error(op, args[i].name);
      s[i] = IValue(to_front(p, *bd));
    } else if (bd) {
      s[i] = IValue(pad_after_batch(to_front(p, *bd), R - t.dim()));
    } else if (expand_self && i == 0) {
      s[i] = IValue(pad_after_batch(front_or_expand(t, level, B), R - t.dim()));
    }
  }
  call_physical(op, s);
  if (write >= 0 && s.size() == 1) {
    s[0] = stack[base + static_cast<size_t>(write)];
  } else {
    wrap_results(s, level);
  }
  finish(stack, base, s);
  return true;
}

// ---- one tensor with dim arguments ------------------------------------------

struct DimSpec {
  std::vector<std::string> names;
  int64_t extra = 0;          // unsqueeze: a dim may name one past the end
  bool all_if_empty = false;  // [] means every dim
  bool all_if_none = false;   // None means every dim (an int[]? argument)
  bool flatten_if_none = false;  // None means "of the flattened tensor" (an int? argument)
  bool prepend0 = false;      // permute: the batch stays first
};

bool rule_dims(const DimSpec& spec, const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  if (s.empty() || !s[0].is_tensor() || others_batched(s, level, {0})) return false;
  const Tensor self = s[0].to_tensor();
  auto [p, bd] = unwrap_at(self, level);
  if (!bd) return false;
  const int64_t r = self.dim();
  if (r == 0 && spec.extra == 0) return false;  // a dim of a 0-d tensor: the loop gives the op's own answer
  Tensor pf = to_front(p, *bd);
  const int64_t B = pf.size(0);
  std::vector<int64_t> all;
  for (int64_t d = 1; d <= r; ++d) all.push_back(d);
  for (const std::string& name : spec.names) {
    const int idx = arg_index(op, name);
    if (idx < 0) continue;
    IValue& v = s[static_cast<size_t>(idx)];
    if (v.is_none()) {
      if (spec.all_if_none) {
        v = IValue(all);
      } else if (spec.flatten_if_none) {
        const int k = arg_index(op, "keepdim");
        if (k >= 0 && s[static_cast<size_t>(k)].to_bool()) return false;
        pf = reshape(pf, std::vector<int64_t>{B, -1});
        v = IValue(int64_t(1));
      }
      continue;
    }
    if (const auto* i = std::get_if<int64_t>(&v.raw())) {
      int64_t w;
      if (!wrap(*i, r + spec.extra, &w)) return false;
      v = IValue(w + 1);
      continue;
    }
    const std::vector<int64_t>& l = v.to_int_list();
    if (l.empty()) {
      if (spec.all_if_empty) v = IValue(all);
      if (spec.prepend0) v = IValue(std::vector<int64_t>{0});
      continue;
    }
    std::vector<int64_t> out;
    if (spec.prepend0) out.push_back(0);
    for (int64_t d : l) {
      int64_t w;
      if (!wrap(d, r + spec.extra, &w)) return false;
      out.push_back(w + 1);
    }
    v = IValue(std::move(out));
  }
  s[0] = IValue(pf);
  call_physical(op, s);
  wrap_results(s, level);
  finish(stack, base, s);
  return true;
}

// ---- shapes ----------------------------------------------------------------

// view/reshape (size_arg holds the new logical shape); expand/broadcast_to.
bool rule_shape(const OperatorEntry& op, Stack& stack, size_t base, int64_t level, bool is_expand) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  if (others_batched(s, level, {0}) || s.size() < 2) return false;
  const Tensor self = s[0].to_tensor();
  auto [p, bd] = unwrap_at(self, level);
  if (!bd) return false;
  Tensor pf = to_front(p, *bd);
  const std::vector<int64_t>& size = s[1].to_int_list();
  std::vector<int64_t> phys{pf.size(0)};
  phys.insert(phys.end(), size.begin(), size.end());
  if (is_expand) {
    const int64_t n = static_cast<int64_t>(size.size());
    if (n < self.dim()) return false;
    pf = pad_after_batch(pf, n - self.dim());
  }
  s[0] = IValue(pf);
  s[1] = IValue(phys);
  if (op.schema().name == "view") {
    try {
      call_physical(op, s);
    } catch (const Error&) {
      // The batch moved to the front made the physical tensor non-viewable:
      // the values are the same through reshape (a copy).
      s = Stack{IValue(reshape(pf, phys))};
    }
  } else {
    call_physical(op, s);
  }
  wrap_results(s, level);
  finish(stack, base, s);
  return true;
}

bool rule_squeeze_all(const OperatorEntry&, Stack& stack, size_t base, int64_t level) {
  const Tensor self = stack[base].to_tensor();
  auto [p, bd] = unwrap_at(self, level);
  if (!bd) return false;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (self.size(d) == 1) dims.push_back(d + 1);
  Tensor r = dims.empty() ? to_front(p, *bd) : squeeze(to_front(p, *bd), IntArrayRef(dims));
  stack.resize(base);
  stack.push_back(IValue(make_batched(r, 0, level)));
  return true;
}

bool rule_t(const OperatorEntry&, Stack& stack, size_t base, int64_t level) {
  const Tensor self = stack[base].to_tensor();
  auto [p, bd] = unwrap_at(self, level);
  if (!bd || self.dim() > 2) return false;
  Tensor r = self.dim() < 2 ? alias(p) : transpose(to_front(p, *bd), 1, 2);
  stack.resize(base);
  stack.push_back(IValue(make_batched(r, self.dim() < 2 ? *bd : 0, level)));
  return true;
}

// ---- matmul family -----------------------------------------------------------

struct Operand {
  Tensor t;  // physical, batch first, when batched; else the logical tensor
  bool batched;
  int64_t rank;  // logical rank
};

Operand operand(const Tensor& x, int64_t level) {
  auto [p, bd] = unwrap_at(x, level);
  if (bd) return {to_front(p, *bd), true, x.dim()};
  return {x, false, x.dim()};
}

// Logical matmul of a and b (ranks >= 2, at least one batched) as one
// physical matmul; batch first in the result.
Tensor matmul_2d(Operand a, Operand b) {
  const int64_t R = std::max(a.rank, b.rank);
  if (a.batched) a.t = pad_after_batch(a.t, R - a.rank);
  if (b.batched) b.t = pad_after_batch(b.t, R - b.rank);
  return matmul(a.t, b.t);
}

// The logical matmul of x and y at level, batched at level; undefined when
// the ranks are not those of matmul.
Tensor matmul_at(const Tensor& x, const Tensor& y, int64_t level) {
  Operand a = operand(x, level), b = operand(y, level);
  if (a.rank == 0 || b.rank == 0) return Tensor();
  Tensor r;
  if (a.rank == 1 && b.rank == 1) {
    if (a.batched && b.batched) {
      r = reshape(matmul(unsqueeze(a.t, 1), unsqueeze(b.t, 2)), std::vector<int64_t>{a.t.size(0)});
    } else {
      r = a.batched ? matmul(a.t, b.t) : matmul(b.t, a.t);
    }
  } else if (a.rank == 1) {
    if (a.batched) {
      r = squeeze(matmul_2d({unsqueeze(a.t, 1), true, 2}, b), int64_t(-2));
    } else {
      r = matmul(a.t, b.t);
    }
  } else if (b.rank == 1) {
    if (b.batched) {
      r = squeeze(matmul_2d(a, {unsqueeze(b.t, -1), true, 2}), int64_t(-1));
    } else {
      r = matmul(a.t, b.t);
    }
  } else {
    r = matmul_2d(a, b);
  }
  return make_batched(r, 0, level);
}

BatchRule matmul_rule(int64_t ra, int64_t rb) {
  // ra/rb: the ranks the op requires (0: any, as matmul).
  return [ra, rb](const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
    const Tensor& x = stack[base].to_tensor();
    const Tensor& y = stack[base + 1].to_tensor();
    const int out = arg_index(op, "out");
    if (out >= 0 && !stack[base + static_cast<size_t>(out)].is_none()) return false;
    if ((ra && x.dim() != ra) || (rb && y.dim() != rb)) return false;  // the op's own error, from the loop
    Tensor r = matmul_at(x, y, level);
    if (!r.defined()) return false;
    stack.resize(base);
    stack.push_back(IValue(r));
    return true;
  };
}

bool rule_linear(const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  const Tensor x = s[0].to_tensor(), w = s[1].to_tensor();
  auto [px, bx] = unwrap_at(x, level);
  if (bx && !others_batched(s, level, {0})) {
    s[0] = IValue(to_front(px, *bx));
    call_physical(op, s);
    wrap_results(s, level);
    finish(stack, base, s);
    return true;
  }
  if (w.dim() != 2 || x.dim() == 0) return false;
  Tensor r = matmul_at(x, transpose(w, 0, 1), level);  // batched at level
  if (!r.defined()) return false;
  if (!s[2].is_none() && s[2].to_tensor().defined()) r = add(r, s[2].to_tensor());
  stack.resize(base);
  stack.push_back(IValue(r));
  return true;
}

bool rule_addmm(const OperatorEntry&, Stack& stack, size_t base, int64_t level) {
  if (!stack[base + 5].is_none()) return false;
  const Tensor self = stack[base].to_tensor(), m1 = stack[base + 1].to_tensor(), m2 = stack[base + 2].to_tensor();
  const Scalar beta = stack[base + 3].to_scalar(), alpha = stack[base + 4].to_scalar();
  if (m1.dim() != 2 || m2.dim() != 2) return false;
  Tensor prod = unwrap_at(m1, level).second || unwrap_at(m2, level).second ? matmul_at(m1, m2, level) : mm(m1, m2);
  auto scaled = [](const Tensor& t, const Scalar& s) {
    if (s.to<double>() == 1.0) return t;
    return mul(t, scalar_to_tensor(s, t.dtype(), t.device(), true));
  };
  Tensor r = beta.to<double>() == 0.0 ? scaled(prod, alpha) : add(scaled(self, beta), scaled(prod, alpha));
  stack.resize(base);
  stack.push_back(IValue(r));
  return true;
}

// ---- cat / stack ---------------------------------------------------------------

bool rule_cat(const OperatorEntry& op, Stack& stack, size_t base, int64_t level, bool is_stack) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  if (!s[2].is_none()) return false;
  const std::vector<Tensor>& l = s[0].to_tensor_list();
  int64_t B = -1, r = -1;
  for (const Tensor& t : l) {
    auto [p, bd] = unwrap_at(t, level);
    if (bd) B = p.size(*bd);
    if (r < 0 && (is_stack || !(t.dim() == 1 && t.size(0) == 0))) r = t.dim();
  }
  if (B < 0 || r <= 0) return false;
  int64_t d;
  if (!wrap(s[1].to_int(), is_stack ? r + 1 : r, &d)) return false;
  std::vector<Tensor> phys;
  for (const Tensor& t : l) phys.push_back(front_or_expand(t, level, B));
  s[0] = IValue(std::move(phys));
  s[1] = IValue(d + 1);
  call_physical(op, s);
  wrap_results(s, level);
  finish(stack, base, s);
  return true;
}

// ---- losses ------------------------------------------------------------------

// cross_entropy_loss / nll_loss with class-index targets and no weight: the
// per-element losses of all entries in one call (reduction='none'), then
// each entry's reduction.
bool rule_class_loss(const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  const Tensor input = s[0].to_tensor(), target = s[1].to_tensor();
  if (!s[2].is_none() && s[2].to_tensor().defined()) return false;
  const int64_t ri = input.dim();
  if ((ri != 1 && ri != 2) || target.dim() != ri - 1 || is_floating_type(target.dtype())) return false;
  auto [pi, bi] = unwrap_at(input, level);
  auto [pt, bt] = unwrap_at(target, level);
  const int64_t B = bi ? pi.size(*bi) : pt.size(*bt);
  const int64_t C = input.size(-1);
  Tensor in = front_or_expand(input, level, B), tg = front_or_expand(target, level, B);
  const std::string reduction = s[3].to_string();
  const int64_t ignore = s[4].to_int();
  s[0] = IValue(reshape(in, std::vector<int64_t>{-1, C}));
  s[1] = IValue(reshape(tg, std::vector<int64_t>{-1}));
  s[3] = IValue(std::string("none"));
  call_physical(op, s);
  Tensor per = reshape(s[0].to_tensor(), std::vector<int64_t>{B, -1});  // [B, N]
  Tensor r;
  if (reduction == "none") {
    r = ri == 1 ? reshape(per, std::vector<int64_t>{B}) : per;
  } else if (reduction == "sum") {
    r = sum(per, std::vector<int64_t>{1});
  } else if (reduction == "mean") {
    Tensor count = sum(to_dtype(ne(reshape(tg, std::vector<int64_t>{B, -1}),
                                   scalar_to_tensor(Scalar(ignore), tg.dtype(), tg.device(), true)),
                                per.dtype()),
                       std::vector<int64_t>{1});
    r = div(sum(per, std::vector<int64_t>{1}), count);
  } else {
    return false;  // the op's own error, from the loop
  }
  stack.resize(base);
  stack.push_back(IValue(make_batched(r, 0, level)));
  return true;
}

bool rule_mse(const OperatorEntry&, Stack& stack, size_t base, int64_t) {
  const Tensor input = stack[base].to_tensor(), target = stack[base + 1].to_tensor();
  const std::string reduction = stack[base + 2].to_string();
  if (reduction != "none" && reduction != "mean" && reduction != "sum") return false;
  Tensor d = sub(input, target);
  Tensor sq = mul(d, d);
  Tensor r = reduction == "none" ? sq : reduction == "mean" ? mean(sq) : sum(sq);
  stack.resize(base);
  stack.push_back(IValue(r));
  return true;
}

// ---- ops whose one batched tensor only needs its batch in front ---------------

bool writes_anything(const OperatorEntry& op, const Stack& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (op.schema().args[i].is_write && !s[i].is_none()) return true;
  return false;
}

BatchRule leading_rule(int k) {
  return [k](const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
    Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
    if (others_batched(s, level, {k}) || writes_anything(op, s)) return false;
    auto [p, bd] = unwrap_at(s[static_cast<size_t>(k)].to_tensor(), level);
    if (!bd) return false;
    s[static_cast<size_t>(k)] = IValue(to_front(p, *bd));
    call_physical(op, s);
    wrap_results(s, level);
    finish(stack, base, s);
    return true;
  };
}

// Ops over an input of k dims (channels + spatial) or k+1 with a leading N
// whose entries are independent (convolutions, pooling, group_norm): the
// batch becomes N, or is folded into N (B*N) and split again after.
BatchRule fold_rule(int64_t k) {
  return [k](const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
    Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
    if (others_batched(s, level, {0})) return false;
    const Tensor x = s[0].to_tensor();
    auto [p, bd] = unwrap_at(x, level);
    if (!bd) return false;
    Tensor pf = to_front(p, *bd);
    const int64_t r = x.dim(), B = pf.size(0);
    if (r == k) {
      s[0] = IValue(pf);
      call_physical(op, s);
      wrap_results(s, level);
      finish(stack, base, s);
      return true;
    }
    if (r != k + 1 && k > 0) return false;
    if (r < 2) return false;
    std::vector<int64_t> folded{-1};
    folded.insert(folded.end(), x.sizes().begin() + 1, x.sizes().end());
    s[0] = IValue(reshape(pf, folded));
    call_physical(op, s);
    const int64_t N = x.size(0);
    for (IValue& v : s) {
      if (!v.is_tensor() || !v.to_tensor().defined()) continue;
      const Tensor& t = v.to_tensor();
      std::vector<int64_t> split{B, N};
      split.insert(split.end(), t.sizes().begin() + 1, t.sizes().end());
      v = IValue(make_batched(reshape(t, split), 0, level));
    }
    finish(stack, base, s);
    return true;
  };
}

// Advanced indexing, index.Tensor(self, indices, dim): the indices take
// consecutive dims of self from `dim`. Only self batched: the same indices
// one dim further. Batched indices into an unbatched self: the result has the
// batch where the index dims go. Both batched (dim 0): an arange over the
// batch becomes the first index, so entry b reads from its own slice.
bool rule_index(const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  const Tensor self = s[0].to_tensor();
  const std::vector<Tensor>& idx = s[1].to_tensor_list();
  const int64_t dim = s[2].to_int();
  if (dim < 0) return false;
  auto [ps, bs] = unwrap_at(self, level);
  bool idx_batched = false, any_mask = false;
  int64_t R = 0, B = bs ? ps.size(*bs) : -1;
  for (const Tensor& t : idx) {
    if (!t.defined()) return false;
    auto [p, bd] = unwrap_at(t, level);
    if (bd) {
      idx_batched = true;
      B = p.size(*bd);
    }
    any_mask = any_mask || t.dtype() == ScalarType::Bool || t.dtype() == ScalarType::UInt8;
    R = std::max(R, t.dim());
  }
  if (!idx_batched) {
    s[0] = IValue(to_front(ps, *bs));
    s[2] = IValue(dim + 1);
    call_physical(op, s);
    wrap_results(s, level);
    finish(stack, base, s);
    return true;
  }
  if (any_mask) return false;
  std::vector<Tensor> phys;
  for (const Tensor& t : idx) {
    auto [p, bd] = unwrap_at(t, level);
    phys.push_back(bd ? pad_after_batch(to_front(p, *bd), R - t.dim()) : t);
  }
  int64_t out_bdim = dim;
  if (bs) {
    if (dim != 0) return false;
    std::vector<int64_t> shape(static_cast<size_t>(R) + 1, 1);
    shape[0] = B;
    phys.insert(phys.begin(), reshape(arange(Scalar(B), ScalarType::Int64, ps.device()), shape));
    s[0] = IValue(to_front(ps, *bs));
    out_bdim = 0;
  }
  s[1] = IValue(std::move(phys));
  call_physical(op, s);
  s[0] = IValue(make_batched(s[0].to_tensor(), out_bdim, level));
  finish(stack, base, s);
  return true;
}

// scaled_dot_product_attention: q, k, v with their batch first (an unbatched
// one expanded, no copy) and padded to one rank, so the leading dims line up;
// a batched mask likewise, an unbatched one broadcasts as it is.
bool rule_sdpa(const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  if (s[4].to_double() != 0.0) return false;
  int64_t B = -1, R = 0;
  for (size_t i = 0; i < 4; ++i) {
    if (!s[i].is_tensor() || !s[i].to_tensor().defined()) continue;
    auto [p, bd] = unwrap_at(s[i].to_tensor(), level);
    if (bd) B = p.size(*bd);
    if (i < 3) R = std::max(R, s[i].to_tensor().dim());
  }
  if (B < 0 || R < 2) return false;
  for (size_t i = 0; i < 4; ++i) {
    if (!s[i].is_tensor() || !s[i].to_tensor().defined()) continue;
    const Tensor t = s[i].to_tensor();
    const bool batched = unwrap_at(t, level).second.has_value();
    if (i == 3 && !batched) continue;
    if (t.dim() > R) return false;
    s[i] = IValue(pad_after_batch(front_or_expand(t, level, B), R - t.dim()));
  }
  call_physical(op, s);
  wrap_results(s, level);
  finish(stack, base, s);
  return true;
}

// gather / scatter family (self, dim, index[, src]): every tensor batch first
// (an unbatched one expanded, no copy; a written one must be batched), the
// dim one further. The logical ranks must agree, as the ops require.
bool rule_gather_scatter(const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  const auto& args = op.schema().args;
  const int64_t r = s[0].to_tensor().dim();
  int64_t B = -1;
  int write = -1;
  auto plain_scalar = [&](const Tensor& t) {  // a Python number passed as the value
    return t.impl()->is_wrapped_number() && !unwrap_at(t, level).second;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (!s[i].is_tensor() || !s[i].to_tensor().defined() || plain_scalar(s[i].to_tensor())) continue;
    const Tensor& t = s[i].to_tensor();
    if (t.dim() != r) return false;
    auto [p, bd] = unwrap_at(t, level);
    if (bd) B = p.size(*bd);
    if (args[i].is_write) {
      if (!bd) inplace_error(op, args[i].name);
      write = static_cast<int>(i);
    }
  }
  int64_t d;
  if (r == 0 || !wrap(s[1].to_int(), r, &d)) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!s[i].is_tensor() || !s[i].to_tensor().defined() || plain_scalar(s[i].to_tensor())) continue;
    s[i] = IValue(front_or_expand(s[i].to_tensor(), level, B));
  }
  s[1] = IValue(d + 1);
  call_physical(op, s);
  if (write >= 0) {
    s.resize(1);
    s[0] = stack[base + static_cast<size_t>(write)];
  } else {
    wrap_results(s, level);
  }
  finish(stack, base, s);
  return true;
}

bool rule_repeat(const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  const Tensor self = s[0].to_tensor();
  auto [p, bd] = unwrap_at(self, level);
  if (!bd) return false;
  std::vector<int64_t> reps = s[1].to_int_list();
  const int64_t n = static_cast<int64_t>(reps.size());
  if (n < self.dim()) return false;
  s[0] = IValue(pad_after_batch(to_front(p, *bd), n - self.dim()));
  reps.insert(reps.begin(), 1);
  s[1] = IValue(std::move(reps));
  call_physical(op, s);
  wrap_results(s, level);
  finish(stack, base, s);
  return true;
}

// index_put / index_put_(self, indices, values, accumulate, dim) with
// unbatched integer indices: self batch first (expanded when only values are
// batched; the out-of-place op copies it anyway), the indices one dim
// further, values batch first and padded to the rank of the indexed region.
bool rule_index_put(const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  const Tensor self = s[0].to_tensor(), values = s[2].to_tensor();
  const std::vector<Tensor>& idx = s[1].to_tensor_list();
  const int64_t dim = s[4].to_int();
  if (dim < 0) return false;
  int64_t idx_rank = 0;
  for (const Tensor& t : idx) {
    if (!t.defined() || unwrap_at(t, level).second || !is_integral_type(t.dtype(), false)) return false;
    idx_rank = std::max(idx_rank, t.dim());
  }
  auto [ps, bs] = unwrap_at(self, level);
  auto [pv, bv] = unwrap_at(values, level);
  const bool inplace = op.schema().args[0].is_write;
  if (inplace && !bs) inplace_error(op, "self");
  const int64_t B = bs ? ps.size(*bs) : pv.size(*bv);
  const int64_t region = self.dim() - static_cast<int64_t>(idx.size()) + idx_rank;
  if (values.dim() > region) return false;
  s[0] = IValue(front_or_expand(self, level, B));
  if (bv) s[2] = IValue(pad_after_batch(to_front(pv, *bv), region - values.dim()));
  s[4] = IValue(dim + 1);
  call_physical(op, s);
  if (inplace) {
    s.resize(1);
    s[0] = stack[base];
  } else {
    wrap_results(s, level);
  }
  finish(stack, base, s);
  return true;
}

// Ops of self alone, element by element (clone, casts, fill_, zero_): the
// physical tensor as it is, the batch dim where it was.
bool rule_self_only(const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  if (others_batched(s, level, {0})) return false;
  auto [p, bd] = unwrap_at(s[0].to_tensor(), level);
  if (!bd) return false;
  const bool writes = op.schema().args[0].is_write;
  s[0] = IValue(p);
  call_physical(op, s);
  if (writes) {
    s.resize(1);
    s[0] = stack[base];
  } else {
    for (IValue& v : s)
      if (v.is_tensor() && v.to_tensor().defined()) v = IValue(make_batched(v.to_tensor(), *bd, level));
  }
  finish(stack, base, s);
  return true;
}

bool rule_copy_(const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
  Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  const Tensor self = s[0].to_tensor(), src = s[1].to_tensor();
  auto [ps, bs] = unwrap_at(self, level);
  auto [pr, br] = unwrap_at(src, level);
  if (!bs) inplace_error(op, "self");
  s[0] = IValue(to_front(ps, *bs));
  if (br) {
    if (src.dim() > self.dim()) return false;
    s[1] = IValue(pad_after_batch(to_front(pr, *br), self.dim() - src.dim()));
  }
  call_physical(op, s);
  s.resize(1);
  s[0] = stack[base];
  finish(stack, base, s);
  return true;
}

// max(self) / min(self): amax/amin of the flattened entries.
BatchRule full_extreme_rule(bool is_max) {
  return [is_max](const OperatorEntry&, Stack& stack, size_t base, int64_t level) {
    auto [p, bd] = unwrap_at(stack[base].to_tensor(), level);
    if (!bd || p.numel() == 0) return false;
    Tensor f = reshape(to_front(p, *bd), std::vector<int64_t>{p.size(*bd), -1});
    Tensor r = is_max ? amax(f, std::vector<int64_t>{1}) : amin(f, std::vector<int64_t>{1});
    stack.resize(base);
    stack.push_back(IValue(make_batched(r, 0, level)));
    return true;
  };
}

void def(const char* name, BatchRule r) {
  OperatorEntry* op = Dispatcher::get().find(name);
  if (!op) return;  // not declared in this build
  auto& v = rules();
  if (v.size() <= static_cast<size_t>(op->id())) v.resize(static_cast<size_t>(op->id()) + 1);
  v[static_cast<size_t>(op->id())] = std::move(r);
}

BatchRule dims(DimSpec spec) {
  return [spec](const OperatorEntry& op, Stack& stack, size_t base, int64_t level) {
    return rule_dims(spec, op, stack, base, level);
  };
}

void register_rules() {
  Dispatcher& d = Dispatcher::get();
  for (size_t i = 0, n = d.num_ops(); i < n; ++i) {
    const OperatorEntry& op = d.op(static_cast<int>(i));
    if (op.flags() & kPointwise) {
      const bool self_shaped = op.schema().name == "masked_fill";
      auto& v = rules();
      if (v.size() <= i) v.resize(i + 1);
      v[i] = [self_shaped](const OperatorEntry& o, Stack& s, size_t b, int64_t l) {
        return rule_pointwise(o, s, b, l, self_shaped);
      };
    }
  }
  auto pointwise = [](const OperatorEntry& o, Stack& s, size_t b, int64_t l) {
    return rule_pointwise(o, s, b, l, false);
  };
  for (const char* n : {"max.other", "min.other", "maximum", "minimum", "fmax", "fmin", "atan2", "fmod",
                        "remainder", "lerp", "addcdiv", "bitwise_and", "bitwise_or", "bitwise_xor",
                        "logical_and", "logical_or", "logical_xor", "lt", "le", "gt", "ge", "eq", "ne"}) {
    if (OperatorEntry* op = d.find(n)) {
      const size_t id = static_cast<size_t>(op->id());
      if (id >= rules().size() || !rules()[id]) def(n, pointwise);
    }
  }

  // Reductions: dim (int[]? / int[]) with None or [] meaning every dim.
  const DimSpec reduce_all{{"dim"}, 0, true, true, false, false};
  for (const char* n : {"sum", "mean", "amax", "amin", "var.dim", "var.correction", "std.dim", "std.correction",
                        "var_mean.dim", "var_mean.correction", "std_mean.dim", "std_mean.correction", "all",
                        "any", "norm", "norm.str", "count_nonzero", "logsumexp", "nansum", "nanmean"})
    def(n, dims(reduce_all));
  const DimSpec flat_none{{"dim"}, 0, false, false, true, false};
  for (const char* n : {"prod", "argmax", "argmin"}) def(n, dims(flat_none));
  const DimSpec one_dim{{"dim"}, 0, false, false, false, false};
  for (const char* n : {"max.dim", "min.dim", "cumsum", "cumprod", "softmax", "log_softmax", "logcumsumexp",
                        "cummax", "cummin", "sort", "argsort", "topk", "select.int", "slice.Tensor", "narrow",
                        "squeeze.dim", "squeeze.dims", "unflatten.int", "unbind.int", "glu",
                        "nanmedian.dim", "median.dim", "mode", "kthvalue"})
    def(n, dims(one_dim));
  def("roll", [](const OperatorEntry& op, Stack& s, size_t b, int64_t l) {
    // dims=[] rolls the flattened tensor, which would take in the batch dim: the loop does that one.
    return !s[b + 2].to_int_list().empty() && rule_dims(DimSpec{{"dims"}, 0, false, false, false, false}, op, s, b, l);
  });
  def("flip", dims(DimSpec{{"dims"}, 0, false, false, false, false}));
  for (const char* n : {"_fft_c2c", "_fft_r2c", "_fft_c2r"})  // strata.fft: the batch is one more batch dim
    def(n, dims(DimSpec{{"dim"}, 0, false, false, false, false}));
  def("unsqueeze", dims(DimSpec{{"dim"}, 1, false, false, false, false}));
  def("transpose.int", dims(DimSpec{{"dim0", "dim1"}, 0, false, false, false, false}));
  def("swapaxes", dims(DimSpec{{"axis0", "axis1"}, 0, false, false, false, false}));
  def("swapdims", dims(DimSpec{{"dim0", "dim1"}, 0, false, false, false, false}));
  def("flatten.using_ints", dims(DimSpec{{"start_dim", "end_dim"}, 0, false, false, false, false}));
  def("diagonal", dims(DimSpec{{"dim1", "dim2"}, 0, false, false, false, false}));
  def("unfold", dims(DimSpec{{"dimension"}, 0, false, false, false, false}));
  def("movedim.intlist", dims(DimSpec{{"source", "destination"}, 0, false, false, false, false}));
  def("moveaxis.intlist", dims(DimSpec{{"source", "destination"}, 0, false, false, false, false}));
  def("permute", dims(DimSpec{{"dims"}, 0, false, false, false, true}));
  def("index_select", dims(one_dim));

  auto shape = [](bool is_expand) {
    return [is_expand](const OperatorEntry& o, Stack& s, size_t b, int64_t l) {
      return rule_shape(o, s, b, l, is_expand);
    };
  };
  def("view", shape(false));
  def("reshape", shape(false));
  def("expand", shape(true));
  def("broadcast_to", shape(true));
  def("squeeze", rule_squeeze_all);
  def("t", rule_t);

  def("matmul", matmul_rule(0, 0));
  def("mm", matmul_rule(2, 2));
  def("bmm", matmul_rule(3, 3));
  def("mv", matmul_rule(2, 1));
  def("dot", matmul_rule(1, 1));
  def("linear", rule_linear);
  def("addmm", rule_addmm);

  def("cat", [](const OperatorEntry& o, Stack& s, size_t b, int64_t l) { return rule_cat(o, s, b, l, false); });
  def("stack", [](const OperatorEntry& o, Stack& s, size_t b, int64_t l) { return rule_cat(o, s, b, l, true); });

  def("cross_entropy_loss", rule_class_loss);
  def("nll_loss", rule_class_loss);
  def("mse_loss", rule_mse);

  for (const char* n : {"conv1d", "conv1d.padding", "conv_transpose1d", "max_pool1d_with_indices", "avg_pool1d",
                        "adaptive_avg_pool1d", "adaptive_max_pool1d"})
    def(n, fold_rule(2));
  for (const char* n : {"conv2d", "conv2d.padding", "conv_transpose2d", "max_pool2d_with_indices", "max_pool2d",
                        "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d"})
    def(n, fold_rule(3));
  for (const char* n : {"conv3d", "conv3d.padding", "conv_transpose3d", "max_pool3d_with_indices", "avg_pool3d",
                        "adaptive_avg_pool3d", "adaptive_max_pool3d"})
    def(n, fold_rule(4));
  def("group_norm", fold_rule(0));
  def("pad", [](const OperatorEntry& op, Stack& s, size_t b, int64_t l) {
    // Other modes accept only some input ranks, which the batch dim would change.
    return s[b + 2].to_string() == "constant" && leading_rule(0)(op, s, b, l);
  });
  def("layer_norm", leading_rule(0));
  def("rms_norm", leading_rule(0));
  def("embedding", leading_rule(1));

  for (const char* n : {"clone", "_to_copy", "fill_", "zero_", "alias"}) def(n, rule_self_only);
  def("copy_", rule_copy_);
  def("index.Tensor", rule_index);
  def("index_put", rule_index_put);
  def("index_put_", rule_index_put);
  def("scaled_dot_product_attention", rule_sdpa);
  for (const char* n : {"gather", "scatter.src", "scatter.value", "scatter_add", "scatter_reduce.two"})
    def(n, rule_gather_scatter);
  def("repeat", rule_repeat);
  def("tril", leading_rule(0));
  def("triu", leading_rule(0));
  def("one_hot", [](const OperatorEntry& op, Stack& s, size_t b, int64_t l) {
    return s[b + 1].to_int() > 0 && leading_rule(0)(op, s, b, l);  // -1 would take the max over every entry
  });
  def("batch_norm", [](const OperatorEntry& op, Stack& s, size_t b, int64_t l) {
    // Evaluation mode only: in training each entry has its own statistics.
    return !s[b + 5].to_bool() && fold_rule(0)(op, s, b, l);
  });
  def("max", full_extreme_rule(true));
  def("min", full_extreme_rule(false));
}

}  // namespace

const BatchRule* find_rule(const OperatorEntry& op) {
  static std::once_flag once;
  std::call_once(once, register_rules);
  const auto& v = rules();
  const size_t i = static_cast<size_t>(op.id());
  return i < v.size() && v[i] ? &v[i] : nullptr;
}

}  // namespace strata::vmap
