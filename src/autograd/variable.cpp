#include "autograd/variable.h"

#include <atomic>

#include "autograd/derivative.h"
#include "core/shape.h"
#include "ops/ops.h"
#include "nested/nested.h"
#include "sparse/quantized.h"
#include "sparse/sparse.h"

namespace strata::autograd {

namespace {
std::atomic<Tensor (*)(const Tensor&)> g_batched_detach{nullptr};
std::atomic<Tensor (*)(const Tensor&)> g_batched_physical{nullptr};
}  // namespace

void set_batched_hooks(BatchedHooks hooks) {
  g_batched_detach.store(hooks.detach);
  g_batched_physical.store(hooks.physical);
}

namespace {
void add_autograd_key(const Tensor& t) { t.impl()->set_key_set(t.key_set().add(DispatchKey::Autograd)); }

// Regenerates the grad_fn of a view whose base was written in place through
// another alias: the view's gradient is the matching slice of the base's.
class AsStridedViewNode final : public Node {
 public:
  AsStridedViewNode(TensorGeometry base, DimVector sizes, DimVector strides, int64_t offset)
      : base_(std::move(base)), sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(offset) {}
  variable_list apply(variable_list&& grads) override {
    Tensor g = zeros(base_.sizes, base_.dtype, base_.device);
    Tensor slice = as_strided(g, sizes_, strides_, offset_);
    // Overlapping views (expand) need accumulation; index_put with
    // accumulate would be exact, a copy is exact for non-overlapping views.
    copy_(slice, grads[0]);
    return {g};
  }
  std::string name() const override { return "AsStridedBackward0"; }

 private:
  TensorGeometry base_;
  DimVector sizes_, strides_;
  int64_t offset_;
};
}  // namespace

AutogradMeta& ensure_meta(const Tensor& t) {
  STRATA_CHECK(t.defined(), "autograd: undefined tensor");
  if (!t.impl()->autograd_meta()) t.impl()->set_autograd_meta(std::make_shared<AutogradMeta>());
  return *t.impl()->autograd_meta();
}

bool is_leaf(const Tensor& t) {
  AutogradMeta* m = meta(t);
  return !m || !m->grad_fn;
}

void set_requires_grad(const Tensor& t, bool value) {
  if (!value) {
    AutogradMeta* m = meta(t);
    STRATA_CHECK(!m || !m->grad_fn,
                 "you can only change requires_grad flags of leaf variables. If you want to use a computed variable "
                 "in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
    if (m) m->requires_grad = false;
    return;
  }
  STRATA_CHECK(!t.impl()->is_inference() || inference_mode_enabled(),
               "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
  STRATA_CHECK(is_differentiable_type(t.dtype()),
               "only Tensors of floating point and complex dtype can require gradients (got ", dtype_name(t.dtype()), ")");
  // A batched tensor (vmap) shares its physical tensor's autograd state: set it there.
  if (t.key_set().has(DispatchKey::Vmap))
    if (auto hook = g_batched_physical.load())
      if (Tensor p = hook(t); p.defined()) {
        set_requires_grad(p, true);
        t.impl()->set_autograd_meta(p.impl()->autograd_meta_ptr());
        add_autograd_key(t);
        return;
      }
  AutogradMeta& m = ensure_meta(t);
  if (m.grad_fn) return;  // already requires grad through its history
  m.requires_grad = true;
  add_autograd_key(t);
}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  AutogradMeta* m = meta(t);
  if (!m) return nullptr;
  if (m->is_view && m->view_base.defined() && m->attr_version != t.version()) {
    // The storage was written since this view's history was set: if that
    // write went through the base or another view, the base's history holds
    // it, and this view's history must read from there.
    AutogradMeta* bm = meta(m->view_base);
    if (bm && (bm->grad_fn || bm->requires_grad)) {
      const Tensor& base = m->view_base;
      auto node = std::make_shared<AsStridedViewNode>(TensorGeometry::of(base),
                                                      DimVector(t.sizes().begin(), t.sizes().end()),
                                                      DimVector(t.strides().begin(), t.strides().end()),
                                                      t.storage_offset() - base.storage_offset());
      STRATA_CHECK(base.is_contiguous(), "autograd: the base of a view written in place is not contiguous");
      node->next_edges.push_back(gradient_edge(base));
      node->add_input_geometry(t);
      m->grad_fn = node;
      m->output_nr = 0;
      add_autograd_key(t);
    }
    m->attr_version = t.version();
  }
  return m->grad_fn;
}

std::shared_ptr<Node> grad_accumulator(const Tensor& t) {
  AutogradMeta* m = meta(t);
  if (!m || !m->requires_grad || m->grad_fn) return nullptr;
  // Threads recording ops on one leaf at once must create its sink once:
  // the check and the creation hold one of a few spin locks chosen by the
  // meta's address (held for a pointer check nearly always; a std::mutex cost
  // twice as much on every op with a leaf input).
  struct SpinGuard {
    std::atomic_flag& f;
    explicit SpinGuard(std::atomic_flag& flag) : f(flag) {
      while (f.test_and_set(std::memory_order_acquire))
        while (f.test(std::memory_order_relaxed)) {
        }
    }
    ~SpinGuard() { f.clear(std::memory_order_release); }
  };
  static std::atomic_flag locks[16];
  // Once made, the sink is read with one acquire load (no lock on the hot path).
  AccumulateGrad* acc = m->grad_accumulator.load(std::memory_order_acquire);
  if (!acc) {
    SpinGuard g(locks[(reinterpret_cast<uintptr_t>(m) >> 6) & 15]);
    acc = m->grad_accumulator.load(std::memory_order_relaxed);
    if (!acc) {
      acc = new AccumulateGrad(*m, t);
      m->grad_accumulator.store(acc, std::memory_order_release);
    }
  }
  // Aliasing: the edge owns the meta, which owns the sink.
  return std::shared_ptr<Node>(t.impl()->autograd_meta_ptr(), acc);
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = meta(t);
  if (!m) return {};
  if (!m->is_view) {
    // The common cases, with no stale view history to regenerate.
    if (m->grad_fn) return {m->grad_fn, m->output_nr};
    if (m->requires_grad) return {grad_accumulator(t), 0};
    return {};
  }
  if (auto fn = grad_fn(t)) return {fn, meta(t)->output_nr};
  if (auto acc = grad_accumulator(t)) return {acc, 0};
  return {};
}

void set_history(const Tensor& t, std::shared_ptr<Node> fn, uint32_t output_nr) {
  AutogradMeta& m = ensure_meta(t);
  m.grad_fn = std::move(fn);
  m.output_nr = output_nr;
  m.requires_grad = false;
  m.attr_version = t.version();
  add_autograd_key(t);
}

namespace {
// Note [In-place writes through a view]
// base.grad_fn becomes CopySlices: the gradient of the base after the write is
// the old base's gradient everywhere except in the written region, where it is
// what fn (the in-place op, whose slot 0 is the view's old value) says.
class CopySlices final : public Node {
 public:
  CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<Node> fn)
      : base_(TensorGeometry::of(base)),
        sizes_(view.sizes().begin(), view.sizes().end()),
        strides_(view.strides().begin(), view.strides().end()),
        offset_(view.storage_offset() - base.storage_offset()),
        fn_(std::move(fn)) {
    STRATA_CHECK(base.is_contiguous(), "in-place write through a view: the view's base (", base.describe(),
                 ") is not contiguous, which autograd does not support yet; clone() the base first");
    add_input_geometry(base);
    next_edges.push_back(gradient_edge(base));
    for (size_t i = 1; i < fn_->next_edges.size(); ++i) next_edges.push_back(fn_->next_edges[i]);
  }
  variable_list apply(variable_list&& grads) override {
    Tensor result = clone(grads[0]);
    Tensor slice = as_strided(result, sizes_, strides_, offset_);
    variable_list r = fn_->apply({clone(slice)});
    variable_list out;
    out.reserve(next_edges.size());
    if (next_edges[0].valid()) {
      if (r.size() > 0 && r[0].defined())
        copy_(slice, r[0]);
      else
        zero_(slice);
      out.push_back(result);
    } else {
      out.push_back(Tensor());
    }
    for (size_t i = 1; i < next_edges.size(); ++i) out.push_back(i < r.size() ? r[i] : Tensor());
    return out;
  }
  std::string name() const override { return "CopySlices"; }
  void release_variables() override { fn_->release_variables(); }

 private:
  TensorGeometry base_;
  DimVector sizes_, strides_;
  int64_t offset_;
  std::shared_ptr<Node> fn_;
};
}  // namespace

void rebase_history(const Tensor& t, std::shared_ptr<Node> fn) {
  AutogradMeta* m = meta(t);
  if ((!m || !m->is_view) && t.impl()->view_base() && !requires_grad(t)) {
    // A view of a tensor that had no history: track it now, so the write
    // reaches the base.
    Tensor base(t.impl()->view_base());
    if (!base.impl()->autograd_meta() || !meta(base)->is_view) {
      AutogradMeta& vm = ensure_meta(t);
      vm.is_view = true;
      vm.view_base = base;
      vm.attr_version = t.version();
      m = &vm;
    }
  }
  if (m && m->is_view && m->view_base.defined()) {
    const Tensor& base = m->view_base;
    STRATA_CHECK(t.storage_offset() >= 0, "in-place on a view: bad geometry");
    // Offsets of as_strided are absolute storage offsets, and base and view
    // share storage, so the view's own geometry addresses it inside base.
    auto copy_slices = std::make_shared<CopySlices>(base, t, std::move(fn));
    set_history(base, copy_slices, 0);
    // The view's own history is regenerated from the base on next use.
    m->attr_version = t.version() - 1;
    m->grad_fn = nullptr;
    (void)grad_fn(t);
    if (!m->grad_fn) set_history(t, copy_slices, 0);
    return;
  }
  set_history(t, std::move(fn), 0);
}

void mark_view(const Tensor& out, const Tensor& in) {
  AutogradMeta& m = ensure_meta(out);
  AutogradMeta* im = meta(in);
  m.is_view = true;
  m.view_base = (im && im->is_view && im->view_base.defined()) ? im->view_base : in;
  m.attr_version = out.version();
}

Tensor alias_without_history(const Tensor& t) {
  // A batched tensor (vmap) must stay batched: a plain alias of it would carry the Vmap key
  // without the wrapper that key promises.
  if (t.defined() && t.key_set().has(DispatchKey::Vmap))
    if (auto hook = g_batched_detach.load())
      if (Tensor b = hook(t); b.defined()) return b;
  // A sparse tensor has no elements of its own to alias: detach its values instead.
  if (t.defined() && t.key_set().has(sparse::kSparseKey)) return sparse::detach_sparse(t);
  if (t.defined() && t.key_set().has(sparse::kQuantizedKey)) return sparse::detach_quantized(t);
  if (t.defined() && t.key_set().has(nested::kNestedKey)) return nested::detach_nested(t);
  Tensor a = make_view(t, DimVector(t.sizes().begin(), t.sizes().end()),
                       DimVector(t.strides().begin(), t.strides().end()), t.storage_offset());
  // Not a view for autograd: writes into it must not reach t's history.
  a.impl()->set_view_base({});
  a.impl()->set_key_set(t.key_set().remove(DispatchKey::Autograd));
  a.impl()->set_wrapped_number(t.impl()->is_wrapped_number());
  return a;
}

Tensor detach(const Tensor& t) { return alias_without_history(t); }

Tensor grad(const Tensor& t) {
  AutogradMeta* m = meta(t);
  return m ? m->grad : Tensor();
}

void set_grad(const Tensor& t, const Tensor& g) {
  if (g.defined()) {
    STRATA_CHECK(g.dtype() == t.dtype(), "assigned grad has data of a different type (", dtype_name(g.dtype()),
                 " vs ", dtype_name(t.dtype()), ")");
    STRATA_CHECK(g.device() == t.device(), "assigned grad has data located on a different device");
    STRATA_CHECK(std::equal(g.sizes().begin(), g.sizes().end(), t.sizes().begin(), t.sizes().end()),
                 "assigned grad has data of a different size (", g.shape_str(), " vs ", t.shape_str(), ")");
  }
  if (!g.defined() && !meta(t)) return;
  ensure_meta(t).grad = g;
}

bool grad_mode_enabled() { return !tls_local_dispatch_key_set().excluded.has(DispatchKey::Autograd); }

GradModeGuard::GradModeGuard(bool enabled) {
  auto& tls = tls_local_dispatch_key_set();
  prev_excluded_ = tls.excluded;
  tls.excluded = enabled ? tls.excluded.remove(DispatchKey::Autograd) : tls.excluded.add(DispatchKey::Autograd);
}
GradModeGuard::~GradModeGuard() { tls_local_dispatch_key_set().excluded = prev_excluded_; }

Tensor sum_to(const Tensor& grad, IntArrayRef shape) {
  IntArrayRef gs = grad.sizes();
  if (std::equal(gs.begin(), gs.end(), shape.begin(), shape.end())) return grad;
  const int64_t lead = static_cast<int64_t>(gs.size()) - static_cast<int64_t>(shape.size());
  STRATA_CHECK(lead >= 0, "autograd: gradient of shape ", shape_str(gs), " cannot be summed to shape ",
               shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t g = gs[lead + i];
    if (shape[i] == 1 && g != 1) {
      dims.push_back(lead + static_cast<int64_t>(i));
    } else {
      STRATA_CHECK(shape[i] == g, "autograd: gradient of shape ", shape_str(gs), " cannot be summed to shape ",
                   shape_str(shape));
    }
  }
  Tensor r = dims.empty() ? grad : sum(grad, IntArrayRef(dims), /*keepdim=*/true);
  return reshape(r, shape);
}

}  // namespace strata::autograd

namespace strata {

AutogradMeta::~AutogradMeta() { delete grad_accumulator.load(std::memory_order_relaxed); }

}  // namespace strata
