// The Nested layer from C++ (src/nested): the wrapper's geometry, dtype and keys (no element memory, 0 for the
// ragged size), the fallback refusing an op with no handler (naming the op and the layout) and honouring one
// that accepts, detach keeping the wrapper, and the constructor's checks.
#include <gtest/gtest.h>

#include "autograd/variable.h"
#include "core/error.h"
#include "dispatch/dispatcher.h"
#include "nested/nested.h"
#include "ops/ops.h"

using namespace strata;

namespace {

Tensor E(std::vector<int64_t> sizes, ScalarType t) { return empty_tensor(sizes, t, Device()); }

Tensor offsets_of(std::vector<int64_t> o) {
  Tensor t = E({static_cast<int64_t>(o.size())}, ScalarType::Int64);
  std::copy(o.begin(), o.end(), t.data_ptr<int64_t>());
  return t;
}

// Entries of lengths 2 and 3 with 4 features: logical shape (2, j, 4), values (5, 4).
Tensor jagged() { return nested::make_nested(E({5, 4}, ScalarType::Float32), offsets_of({0, 2, 5}), Tensor(), 1); }

bool g_accept = false;
bool accept_clone(const OperatorEntry& op, Stack& stack) {
  if (!g_accept || op.schema().name != "clone") return false;
  Tensor self = stack[stack.size() - op.schema().args.size()].to_tensor();
  stack.resize(stack.size() - op.schema().args.size());
  stack.emplace_back(self);
  return true;
}

}  // namespace

TEST(Nested, WrapperGeometryKeysAndNoElementMemory) {
  Tensor n = jagged();
  auto* impl = nested::maybe_nested(n);
  ASSERT_NE(impl, nullptr);
  EXPECT_EQ(n.dim(), 3);
  EXPECT_EQ(n.size(0), 2);
  EXPECT_EQ(n.size(1), 0);  // the ragged size has no single value
  EXPECT_EQ(n.size(2), 4);
  EXPECT_EQ(n.dtype(), ScalarType::Float32);
  EXPECT_TRUE(n.key_set().has(nested::kNestedKey));
  EXPECT_EQ(n.impl()->storage()->nbytes(), 0u);
  EXPECT_EQ(impl->ragged_idx(), 1);
  EXPECT_FALSE(impl->lengths().defined());
  // Nested sits above autograd, as Sparse and Quantized do.
  EXPECT_GT(static_cast<int>(nested::kNestedKey), static_cast<int>(DispatchKey::Autograd));
  EXPECT_LT(static_cast<int>(nested::kNestedKey), kNumDispatchKeys);
  // ragged_idx 2: values (H, sum j, D) stand for (B, H, j, D)
  Tensor t = nested::make_nested(E({3, 5, 2}, ScalarType::Float32), offsets_of({0, 2, 5}), Tensor(), 2);
  EXPECT_EQ(t.dim(), 4);
  EXPECT_EQ(t.size(1), 3);
  EXPECT_EQ(t.size(2), 0);
  EXPECT_EQ(t.size(3), 2);
}

TEST(Nested, FallbackRefusesNamingOpAndLayout) {
  Tensor n = jagged();
  try {
    (void)exp(n);
    FAIL() << "exp of a nested tensor did not raise";
  } catch (const NotImplementedError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'exp'"), std::string::npos) << m;
    EXPECT_NE(m.find("strata.jagged"), std::string::npos) << m;
  }
  EXPECT_THROW((void)n.item(), Error);
}

TEST(Nested, HandlerResultComesBack) {
  Tensor n = jagged();
  nested::set_nested_handler(&accept_clone);
  g_accept = true;
  Tensor c = clone(n);
  g_accept = false;
  EXPECT_TRUE(c.is_same(n));
  EXPECT_THROW((void)exp(n), NotImplementedError);  // the handler declines, the fallback raises
  nested::set_nested_handler(nullptr);
}

TEST(Nested, DetachKeepsTheWrapper) {
  Tensor n = jagged();
  Tensor d = autograd::detach(n);
  auto* impl = nested::maybe_nested(d);
  ASSERT_NE(impl, nullptr);
  EXPECT_TRUE(impl->offsets().is_same(nested::maybe_nested(n)->offsets()));
  EXPECT_EQ(impl->values().data_ptr(), nested::maybe_nested(n)->values().data_ptr());
}

TEST(Nested, ConstructorChecks) {
  Tensor v = E({5, 4}, ScalarType::Float32);
  EXPECT_THROW(nested::make_nested(v, E({3}, ScalarType::Float32), Tensor(), 1), Error);       // offsets dtype
  EXPECT_THROW(nested::make_nested(v, offsets_of({0, 2, 5}), Tensor(), 3), Error);             // ragged_idx
  EXPECT_THROW(nested::make_nested(v, E({3, 1}, ScalarType::Int64), Tensor(), 1), Error);       // offsets 1-D
  EXPECT_THROW(nested::make_nested(v, offsets_of({0, 2, 5}), offsets_of({1, 2, 3}), 1), Error);  // B lengths
  EXPECT_THROW(nested::make_nested(jagged(), offsets_of({0, 2, 5}), Tensor(), 1), Error);       // nested values
}
