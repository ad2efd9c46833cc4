// Note [Guards]
// A compiled graph is only valid for inputs like the ones it was traced with:
// same tensor dtypes, devices, requires_grad, sizes (except the dimensions
// traced as dynamic), the same Python constants, the same module structure,
// the same global modes. strata.compile records those assumptions as guards
// and checks all of them before every call of a compiled entry; a miss sends
// the frame back to the tracer (or to another cached entry).
//
// This file holds the parts of the guard evaluator that do not touch Python:
//   * TensorSpec: the tensor-metadata check (dtype, device, requires_grad,
//     ndim, each static size and stride), read straight from the TensorImpl;
//   * ShapeExpr / DimRelation: symbolic-shape guards, small integer
//     expression trees over tensor sizes compared with == != < <= > >=;
//   * GlobalState: the thread and process state that changes what a graph
//     computes (grad mode, default dtype, autocast on/off and its dtype);
//   * storage aliasing between tensors.
// The evaluator proper (sources read from the frame's arguments, globals and
// closure cells, shared-prefix accessor tree, the Python-object guards) is in
// python/src/guards_bind.cpp because it walks Python objects with the CPython
// API; see Note [Guard evaluation] there.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "autograd/variable.h"
#include "core/tensor.h"

namespace strata::compile {

// Sizes and strides are never negative, so "not guarded" is a sentinel.
constexpr int64_t kDynamicDim = -1;

// The metadata a graph assumed of one tensor input.
struct TensorSpec {
  ScalarType dtype = ScalarType::Float32;
  Device device;
  bool requires_grad = false;
  std::vector<int64_t> sizes;    // kDynamicDim: any size (a dynamic dimension)
  std::vector<int64_t> strides;  // empty: strides not guarded; kDynamicDim per entry: that stride not guarded
  bool check_strides = false;
  // The tensor's dispatch key set (a batched tensor of vmap, a Python-keyed one, ...), as torch's
  // TENSOR_MATCH guards it; 0: not guarded.
  uint64_t keys = 0;

  bool matches(const Tensor& t) const {
    const TensorImpl* impl = t.impl();
    if (!impl || impl->dtype() != dtype || impl->dim() != static_cast<int64_t>(sizes.size())) return false;
    if (impl->device() != device) return false;
    if (keys != 0 && t.key_set().raw() != keys) return false;
    if (autograd::requires_grad(t) != requires_grad) return false;
    const int64_t* sz = impl->sizes().data();
    for (size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] != kDynamicDim && sizes[i] != sz[i]) return false;
    if (check_strides) {
      const int64_t* st = impl->strides().data();
      for (size_t i = 0; i < strides.size(); ++i)
        if (strides[i] != kDynamicDim && strides[i] != st[i]) return false;
    }
    return true;
  }
  // The first mismatch, worded for the recompile log ("X.dtype: expected
  // float32, got float64", "X.size()[0] == 4 (got 8)"); empty when it matches.
  std::string mismatch(const Tensor& t, const std::string& name) const;
  // "check_tensor(X, float32, cpu, requires_grad=False, size=[4, None], stride=[3, 1])"
  std::string describe(const std::string& name) const;
};

// Note [Shape expressions]
// A ShapeExpr is an integer expression over "leaves" (a tensor's size or
// stride in one dimension; the evaluator supplies their values by index) and
// constants, with + - * and Python's floor division //. Evaluation is exact:
// an overflow or a division by zero makes the value undefined and the guard
// that needs it fails.
struct ShapeExpr {
  enum class Kind : uint8_t { Const, Leaf, Add, Sub, Mul, FloorDiv };
  Kind kind = Kind::Const;
  int64_t value = 0;  // Const: the constant; Leaf: the leaf index
  std::shared_ptr<const ShapeExpr> lhs, rhs;

  static std::shared_ptr<const ShapeExpr> constant(int64_t v);
  static std::shared_ptr<const ShapeExpr> leaf(int64_t index);
  static std::shared_ptr<const ShapeExpr> binary(Kind k, std::shared_ptr<const ShapeExpr> a,
                                                 std::shared_ptr<const ShapeExpr> b);

  // nullopt on overflow or division by zero.
  std::optional<int64_t> eval(std::span<const int64_t> leaves) const;
  // Python-like text with the fewest parentheses: "4*L['x'].size()[0] + 1".
  std::string str(std::span<const std::string> leaf_names) const;
};

enum class RelOp : uint8_t { EQ, NE, LT, LE, GT, GE };
RelOp parse_rel_op(std::string_view op);  // "==" "!=" "<" "<=" ">" ">=" (ValueError otherwise)
std::string_view rel_op_str(RelOp op);

struct DimRelation {
  std::shared_ptr<const ShapeExpr> lhs, rhs;
  RelOp op = RelOp::EQ;

  // False also when either side is undefined.
  bool holds(std::span<const int64_t> leaves) const;
  std::string str(std::span<const std::string> leaf_names) const;
  // "A >= 2 (got 1 >= 2)" style failure text.
  std::string failure(std::span<const int64_t> leaves, std::span<const std::string> leaf_names) const;
};

// Note [Global state guard]
// What changes the graph that tracing records, independently of the inputs:
//   grad mode        (Autograd excluded from the thread's dispatch keys:
//                     no_grad / inference_mode / set_grad_enabled),
//   the default dtype (factory functions and Python-number promotion),
//   autocast on/off  (Autocast in the thread's included keys) and its dtype.
// Each field may be left unguarded. strata has no deterministic-algorithms
// switch that changes kernels (use_deterministic_algorithms only records a
// flag in Python), so there is nothing else to read.
struct GlobalState {
  std::optional<bool> grad_enabled;
  std::optional<ScalarType> default_dtype;
  std::optional<bool> autocast_enabled;
  std::optional<ScalarType> autocast_dtype;

  static GlobalState current();  // every field set
  bool matches() const;          // against current()
  std::string mismatch() const;  // empty when it matches
  std::string describe() const;
};

// True when two of the tensors share a storage (undefined tensors are skipped).
// Quadratic for a handful of tensors, sorted beyond that. On a hit, `first`
// and `second` receive the positions of one aliasing pair.
bool any_storage_aliasing(std::span<const TensorImpl* const> tensors, size_t* first = nullptr,
                          size_t* second = nullptr);

}  // namespace strata::compile
