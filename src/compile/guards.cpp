// The Python-free half of the guard evaluator: see Note [Guards] in guards.h.
#include "compile/guards.h"

#include <algorithm>
#include <sstream>

#include "autocast/autocast.h"
#include "core/error.h"
#include "dispatch/dispatch_key.h"
#include "dispatch/dispatcher.h"

namespace strata::compile {

namespace {

std::string dims_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += v[i] == kDynamicDim ? std::string("None") : std::to_string(v[i]);
  }
  return s + "]";
}

const char* py_bool(bool b) { return b ? "True" : "False"; }

}  // namespace

// ---------------------------------------------------------------------------
// TensorSpec

std::string TensorSpec::mismatch(const Tensor& t, const std::string& name) const {
  if (!t.defined()) return name + ": expected a Tensor, got an undefined tensor";
  std::ostringstream out;
  if (t.dtype() != dtype) {
    out << name << ".dtype: expected " << dtype_name(dtype) << ", got " << dtype_name(t.dtype());
  } else if (t.device() != device) {
    out << name << ".device: expected " << device.str() << ", got " << t.device().str();
  } else if (autograd::requires_grad(t) != requires_grad) {
    out << name << ".requires_grad: expected " << py_bool(requires_grad) << ", got "
        << py_bool(autograd::requires_grad(t));
  } else if (keys != 0 && t.key_set().raw() != keys) {
    out << name << ".dispatch_keys: expected " << std::hex << "0x" << keys << ", got 0x" << t.key_set().raw();
  } else if (t.dim() != static_cast<int64_t>(sizes.size())) {
    out << name << ".dim() == " << sizes.size() << " (got " << t.dim() << ")";
  } else {
    for (size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] != kDynamicDim && sizes[i] != t.sizes()[i])
        return (out << name << ".size()[" << i << "] == " << sizes[i] << " (got " << t.sizes()[i] << ")", out.str());
    if (check_strides)
      for (size_t i = 0; i < strides.size(); ++i)
        if (strides[i] != kDynamicDim && strides[i] != t.strides()[i])
          return (out << name << ".stride()[" << i << "] == " << strides[i] << " (got " << t.strides()[i] << ")",
                  out.str());
  }
  return out.str();
}

std::string TensorSpec::describe(const std::string& name) const {
  std::string s = "check_tensor(" + name + ", " + std::string(dtype_name(dtype)) + ", " + device.str() +
                  ", requires_grad=" + py_bool(requires_grad) + ", size=" + dims_str(sizes);
  if (check_strides) s += ", stride=" + dims_str(strides);
  return s + ")";
}

// ---------------------------------------------------------------------------
// ShapeExpr

std::shared_ptr<const ShapeExpr> ShapeExpr::constant(int64_t v) {
  auto e = std::make_shared<ShapeExpr>();
  e->kind = Kind::Const;
  e->value = v;
  return e;
}

std::shared_ptr<const ShapeExpr> ShapeExpr::leaf(int64_t index) {
  auto e = std::make_shared<ShapeExpr>();
  e->kind = Kind::Leaf;
  e->value = index;
  return e;
}

std::shared_ptr<const ShapeExpr> ShapeExpr::binary(Kind k, std::shared_ptr<const ShapeExpr> a,
                                                   std::shared_ptr<const ShapeExpr> b) {
  STRATA_CHECK_VALUE(k != Kind::Const && k != Kind::Leaf, "ShapeExpr::binary: not a binary operator");
  STRATA_CHECK_VALUE(a && b, "ShapeExpr::binary: missing operand");
  auto e = std::make_shared<ShapeExpr>();
  e->kind = k;
  e->lhs = std::move(a);
  e->rhs = std::move(b);
  return e;
}

std::optional<int64_t> ShapeExpr::eval(std::span<const int64_t> leaves) const {
  switch (kind) {
    case Kind::Const:
      return value;
    case Kind::Leaf:
      return value >= 0 && static_cast<size_t>(value) < leaves.size() ? std::optional<int64_t>(leaves[value])
                                                                      : std::nullopt;
    default:
      break;
  }
  auto a = lhs->eval(leaves);
  if (!a) return std::nullopt;
  auto b = rhs->eval(leaves);
  if (!b) return std::nullopt;
  int64_t r = 0;
  switch (kind) {
    case Kind::Add:
      if (__builtin_add_overflow(*a, *b, &r)) return std::nullopt;
      return r;
    case Kind::Sub:
      if (__builtin_sub_overflow(*a, *b, &r)) return std::nullopt;
      return r;
    case Kind::Mul:
      if (__builtin_mul_overflow(*a, *b, &r)) return std::nullopt;
      return r;
    case Kind::FloorDiv: {
      if (*b == 0 || (*a == INT64_MIN && *b == -1)) return std::nullopt;
      int64_t q = *a / *b;
      if ((*a % *b != 0) && ((*a < 0) != (*b < 0))) --q;  // Python rounds towards -infinity
      return q;
    }
    default:
      return std::nullopt;
  }
}

namespace {

// Binding strength for printing: sums 1, products 2, atoms 3.
int precedence(const ShapeExpr& e) {
  switch (e.kind) {
    case ShapeExpr::Kind::Add:
    case ShapeExpr::Kind::Sub:
      return 1;
    case ShapeExpr::Kind::Mul:
    case ShapeExpr::Kind::FloorDiv:
      return 2;
    default:
      return 3;  // leaves and constants; Python's unary minus binds tighter than * and //, so "-3" is an atom
  }
}

}  // namespace

std::string ShapeExpr::str(std::span<const std::string> leaf_names) const {
  switch (kind) {
    case Kind::Const:
      return std::to_string(value);
    case Kind::Leaf:
      return value >= 0 && static_cast<size_t>(value) < leaf_names.size() ? leaf_names[value]
                                                                         : "<leaf " + std::to_string(value) + ">";
    default:
      break;
  }
  int p = precedence(*this);
  // Left operand: parenthesised when it binds looser; right operand also when
  // it binds equally (a - (b + c), a // (b * c)), except for + and * whose
  // right side may be a same-level sum/product... of the same operator only.
  auto wrap = [&](const ShapeExpr& e, bool right) {
    std::string s = e.str(leaf_names);
    int q = precedence(e);
    bool paren = q < p || (right && q == p && !((kind == Kind::Add && e.kind == Kind::Add) ||
                                                 (kind == Kind::Mul && e.kind == Kind::Mul)));
    return paren ? "(" + s + ")" : s;
  };
  const char* op = kind == Kind::Add ? " + " : kind == Kind::Sub ? " - " : kind == Kind::Mul ? "*" : "//";
  return wrap(*lhs, false) + op + wrap(*rhs, true);
}

RelOp parse_rel_op(std::string_view op) {
  if (op == "==") return RelOp::EQ;
  if (op == "!=") return RelOp::NE;
  if (op == "<") return RelOp::LT;
  if (op == "<=") return RelOp::LE;
  if (op == ">") return RelOp::GT;
  if (op == ">=") return RelOp::GE;
  STRATA_CHECK_VALUE(false, "add_dim_relation: unknown comparison '", op, "' (expected == != < <= > >=)");
  return RelOp::EQ;
}

std::string_view rel_op_str(RelOp op) {
  switch (op) {
    case RelOp::EQ:
      return "==";
    case RelOp::NE:
      return "!=";
    case RelOp::LT:
      return "<";
    case RelOp::LE:
      return "<=";
    case RelOp::GT:
      return ">";
    case RelOp::GE:
      return ">=";
  }
  return "?";
}

namespace {

bool compare(int64_t a, RelOp op, int64_t b) {
  switch (op) {
    case RelOp::EQ:
      return a == b;
    case RelOp::NE:
      return a != b;
    case RelOp::LT:
      return a < b;
    case RelOp::LE:
      return a <= b;
    case RelOp::GT:
      return a > b;
    case RelOp::GE:
      return a >= b;
  }
  return false;
}

}  // namespace

bool DimRelation::holds(std::span<const int64_t> leaves) const {
  auto a = lhs->eval(leaves);
  if (!a) return false;
  auto b = rhs->eval(leaves);
  return b && compare(*a, op, *b);
}

std::string DimRelation::str(std::span<const std::string> leaf_names) const {
  return lhs->str(leaf_names) + " " + std::string(rel_op_str(op)) + " " + rhs->str(leaf_names);
}

std::string DimRelation::failure(std::span<const int64_t> leaves, std::span<const std::string> leaf_names) const {
  auto a = lhs->eval(leaves);
  auto b = rhs->eval(leaves);
  auto show = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string("undefined"); };
  return str(leaf_names) + " (got " + show(a) + " " + std::string(rel_op_str(op)) + " " + show(b) + ")";
}

// ---------------------------------------------------------------------------
// GlobalState

GlobalState GlobalState::current() {
  GlobalState s;
  s.grad_enabled = !tls_local_dispatch_key_set().excluded.has(DispatchKey::Autograd);
  s.default_dtype = strata::default_dtype();
  s.autocast_enabled = autocast::is_enabled();
  s.autocast_dtype = autocast::dtype();
  return s;
}

bool GlobalState::matches() const {
  const LocalDispatchKeySet& tls = tls_local_dispatch_key_set();
  if (grad_enabled && *grad_enabled == tls.excluded.has(DispatchKey::Autograd)) return false;
  if (autocast_enabled && *autocast_enabled != tls.included.has(DispatchKey::Autocast)) return false;
  if (default_dtype && *default_dtype != strata::default_dtype()) return false;
  if (autocast_dtype && *autocast_dtype != autocast::dtype()) return false;
  return true;
}

std::string GlobalState::mismatch() const {
  GlobalState now = current();
  std::ostringstream out;
  if (grad_enabled && *grad_enabled != *now.grad_enabled)
    out << "grad_enabled == " << py_bool(*grad_enabled) << " (got " << py_bool(*now.grad_enabled) << ")";
  else if (default_dtype && *default_dtype != *now.default_dtype)
    out << "default_dtype: expected " << dtype_name(*default_dtype) << ", got " << dtype_name(*now.default_dtype);
  else if (autocast_enabled && *autocast_enabled != *now.autocast_enabled)
    out << "autocast_enabled == " << py_bool(*autocast_enabled) << " (got " << py_bool(*now.autocast_enabled) << ")";
  else if (autocast_dtype && *autocast_dtype != *now.autocast_dtype)
    out << "autocast_dtype: expected " << dtype_name(*autocast_dtype) << ", got " << dtype_name(*now.autocast_dtype);
  return out.str();
}

std::string GlobalState::describe() const {
  std::vector<std::string> parts;
  if (grad_enabled) parts.push_back(std::string("grad_enabled == ") + py_bool(*grad_enabled));
  if (default_dtype) parts.push_back("default_dtype == " + std::string(dtype_name(*default_dtype)));
  if (autocast_enabled) parts.push_back(std::string("autocast_enabled == ") + py_bool(*autocast_enabled));
  if (autocast_dtype) parts.push_back("autocast_dtype == " + std::string(dtype_name(*autocast_dtype)));
  if (parts.empty()) return "global state (nothing guarded)";
  std::string s = "global state: ";
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s;
}

// ---------------------------------------------------------------------------
// Aliasing

bool any_storage_aliasing(std::span<const TensorImpl* const> tensors, size_t* first, size_t* second) {
  auto storage_of = [&](size_t i) -> const void* {
    return tensors[i] ? static_cast<const void*>(tensors[i]->storage().get()) : nullptr;
  };
  auto report = [&](size_t i, size_t j) {
    if (first) *first = std::min(i, j);
    if (second) *second = std::max(i, j);
    return true;
  };
  const size_t n = tensors.size();
  if (n <= 8) {
    for (size_t i = 0; i < n; ++i) {
      const void* si = storage_of(i);
      if (!si) continue;
      for (size_t j = i + 1; j < n; ++j)
        if (storage_of(j) == si) return report(i, j);
    }
    return false;
  }
  std::vector<std::pair<const void*, size_t>> v;
  v.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (const void* s = storage_of(i)) v.emplace_back(s, i);
  std::sort(v.begin(), v.end());
  for (size_t k = 1; k < v.size(); ++k)
    if (v[k].first == v[k - 1].first) return report(v[k - 1].second, v[k].second);
  return false;
}

}  // namespace strata::compile
