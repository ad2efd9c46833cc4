// The Python-free half of the guard evaluator (src/compile/guards.h): tensor
// specs, shape expressions (exact arithmetic, Python floor division, printing),
// the global-state guard, storage aliasing.
#include <gtest/gtest.h>

#include "autocast/autocast.h"
#include "autograd/variable.h"
#include "compile/guards.h"
#include "dispatch/dispatch_key.h"
#include "ops/ops.h"

using namespace strata;
using namespace strata::compile;

namespace {

Tensor make(std::vector<int64_t> shape, ScalarType dtype = ScalarType::Float32) {
  return empty_tensor(shape, dtype, Device());
}

TensorSpec spec(std::vector<int64_t> sizes, std::vector<int64_t> strides = {}) {
  TensorSpec s;
  s.dtype = ScalarType::Float32;
  s.sizes = std::move(sizes);
  s.check_strides = !strides.empty();
  s.strides = std::move(strides);
  return s;
}

}  // namespace

TEST(CompileGuards, TensorSpecMatchesAndWordsTheFirstMismatch) {
  Tensor x = make({4, 3});
  EXPECT_TRUE(spec({4, 3}).matches(x));
  EXPECT_TRUE(spec({kDynamicDim, 3}).matches(x));
  EXPECT_FALSE(spec({5, 3}).matches(x));
  EXPECT_EQ(spec({5, 3}).mismatch(x, "X"), "X.size()[0] == 5 (got 4)");
  EXPECT_FALSE(spec({4}).matches(x));
  EXPECT_EQ(spec({4}).mismatch(x, "X"), "X.dim() == 1 (got 2)");
  EXPECT_TRUE(spec({4, 3}, {3, 1}).matches(x));
  Tensor t = transpose(make({3, 4}), 0, 1);
  EXPECT_FALSE(spec({4, 3}, {3, 1}).matches(t));
  EXPECT_EQ(spec({4, 3}, {3, 1}).mismatch(t, "X"), "X.stride()[0] == 3 (got 1)");
  EXPECT_TRUE(spec({4, 3}, {kDynamicDim, 4}).matches(t));
  Tensor d = make({4, 3}, ScalarType::Float64);
  EXPECT_FALSE(spec({4, 3}).matches(d));
  EXPECT_EQ(spec({4, 3}).mismatch(d, "X"), "X.dtype: expected float32, got float64");
  autograd::set_requires_grad(x, true);
  EXPECT_FALSE(spec({4, 3}).matches(x));
  EXPECT_EQ(spec({4, 3}).mismatch(x, "X"), "X.requires_grad: expected False, got True");
  EXPECT_TRUE(spec({4, 3}).mismatch(make({4, 3}), "X").empty());
  EXPECT_EQ(spec({4, kDynamicDim}, {3, 1}).describe("X"),
            "check_tensor(X, float32, cpu, requires_grad=False, size=[4, None], stride=[3, 1])");
}

TEST(CompileGuards, ShapeExprArithmetic) {
  using K = ShapeExpr::Kind;
  auto c = ShapeExpr::constant;
  auto leaf = ShapeExpr::leaf(0);
  std::vector<int64_t> leaves{7};
  EXPECT_EQ(ShapeExpr::binary(K::FloorDiv, c(-7), c(2))->eval(leaves), -4);  // Python: -7 // 2 == -4
  EXPECT_EQ(ShapeExpr::binary(K::FloorDiv, c(7), c(-2))->eval(leaves), -4);
  EXPECT_EQ(ShapeExpr::binary(K::FloorDiv, leaf, c(2))->eval(leaves), 3);
  EXPECT_EQ(ShapeExpr::binary(K::FloorDiv, leaf, c(0))->eval(leaves), std::nullopt);
  EXPECT_EQ(ShapeExpr::binary(K::Mul, c(INT64_MAX), c(2))->eval(leaves), std::nullopt);
  EXPECT_EQ(ShapeExpr::binary(K::Sub, leaf, c(10))->eval(leaves), -3);
  EXPECT_EQ(ShapeExpr::leaf(3)->eval(leaves), std::nullopt);  // no such leaf
}

TEST(CompileGuards, ShapeExprPrintsWithFewestParentheses) {
  using K = ShapeExpr::Kind;
  auto c = ShapeExpr::constant;
  auto a = ShapeExpr::leaf(0), b = ShapeExpr::leaf(1);
  std::vector<std::string> names{"A", "B"};
  auto bin = ShapeExpr::binary;
  EXPECT_EQ(bin(K::Mul, c(4), a)->str(names), "4*A");
  EXPECT_EQ(bin(K::Add, bin(K::Mul, c(4), a), c(1))->str(names), "4*A + 1");
  EXPECT_EQ(bin(K::Mul, bin(K::Add, a, b), c(2))->str(names), "(A + B)*2");
  EXPECT_EQ(bin(K::Sub, a, bin(K::Sub, b, c(1)))->str(names), "A - (B - 1)");
  EXPECT_EQ(bin(K::Sub, bin(K::Sub, a, b), c(1))->str(names), "A - B - 1");
  EXPECT_EQ(bin(K::FloorDiv, a, bin(K::Mul, b, c(2)))->str(names), "A//(B*2)");
  EXPECT_EQ(bin(K::Add, a, bin(K::Add, b, c(1)))->str(names), "A + B + 1");
  EXPECT_EQ(bin(K::Mul, c(-1), a)->str(names), "-1*A");
  EXPECT_EQ(bin(K::FloorDiv, a, c(-2))->str(names), "A//-2");
  DimRelation r{bin(K::Mul, c(4), a), b, parse_rel_op("<=")};
  std::vector<int64_t> ok{2, 8}, bad{3, 8};
  EXPECT_TRUE(r.holds(ok));
  EXPECT_FALSE(r.holds(bad));
  EXPECT_EQ(r.failure(bad, names), "4*A <= B (got 12 <= 8)");
  EXPECT_THROW(parse_rel_op("=<"), ValueError);
}

TEST(CompileGuards, GlobalStateFollowsGradModeDefaultDtypeAndAutocast) {
  GlobalState now = GlobalState::current();
  EXPECT_TRUE(now.matches());
  EXPECT_TRUE(now.mismatch().empty());
  {
    ExcludeDispatchKeyGuard no_grad(DispatchKey::Autograd);
    EXPECT_FALSE(now.matches());
    EXPECT_EQ(now.mismatch(), "grad_enabled == True (got False)");
    GlobalState only_dtype;
    only_dtype.default_dtype = now.default_dtype;
    EXPECT_TRUE(only_dtype.matches());  // unguarded fields are not read
  }
  {
    IncludeDispatchKeyGuard on(DispatchKey::Autocast);
    EXPECT_FALSE(now.matches());
    EXPECT_EQ(now.mismatch(), "autocast_enabled == False (got True)");
  }
  ScalarType prev = default_dtype();
  set_default_dtype(ScalarType::Float64);
  EXPECT_FALSE(now.matches());
  EXPECT_EQ(now.mismatch(), "default_dtype: expected float32, got float64");
  set_default_dtype(prev);
  EXPECT_TRUE(now.matches());
}

TEST(CompileGuards, StorageAliasing) {
  std::vector<Tensor> ts;
  for (int i = 0; i < 12; ++i) ts.push_back(make({2}));
  std::vector<const TensorImpl*> impls;
  for (auto& t : ts) impls.push_back(t.impl());
  for (size_t n : {3, 12}) {  // the quadratic and the sorted path
    std::span<const TensorImpl* const> s(impls.data(), n);
    EXPECT_FALSE(any_storage_aliasing(s));
    const TensorImpl* saved = impls[n - 1];
    Tensor v = transpose(unsqueeze(ts[1], 0), 0, 1);
    impls[n - 1] = v.impl();
    size_t a = 0, b = 0;
    EXPECT_TRUE(any_storage_aliasing(s, &a, &b));
    EXPECT_EQ(a, 1u);
    EXPECT_EQ(b, n - 1);
    impls[n - 1] = nullptr;  // undefined tensors take no part
    EXPECT_FALSE(any_storage_aliasing(s));
    impls[n - 1] = saved;
  }
}
