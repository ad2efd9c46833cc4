// The Sparse and Quantized layers from C++ (src/sparse): wrapper geometry, dtype and keys, the fallback
// refusing an op with no handler (naming the op and the layout) and honouring one that accepts, detach
// keeping the wrapper, and the constructors' checks.
#include <gtest/gtest.h>

#include "autograd/variable.h"
#include "core/error.h"
#include "dispatch/dispatcher.h"
#include "ops/ops.h"
#include "sparse/quantized.h"
#include "sparse/sparse.h"

using namespace strata;

namespace {

Tensor E(std::vector<int64_t> sizes, ScalarType t) { return empty_tensor(sizes, t, Device()); }

Tensor coo() {
  Tensor idx = E({2, 3}, ScalarType::Int64);
  const int64_t v[] = {0, 1, 1, 2, 0, 2};
  std::copy(v, v + 6, idx.data_ptr<int64_t>());
  Tensor vals = E({3}, ScalarType::Float32);
  const float f[] = {3, 4, 5};
  std::copy(f, f + 3, vals.data_ptr<float>());
  return sparse::make_sparse_coo(idx, vals, std::vector<int64_t>{2, 3}, false);
}

bool g_accept = false;
bool accept_clone(const OperatorEntry& op, Stack& stack) {
  if (!g_accept || op.schema().name != "clone") return false;
  Tensor self = stack[stack.size() - op.schema().args.size()].to_tensor();
  stack.resize(stack.size() - op.schema().args.size());
  stack.emplace_back(self);  // "clone" answers with its input: enough to see the handler's result come back
  return true;
}

}  // namespace

TEST(Sparse, WrapperGeometryKeysAndNoElementMemory) {
  Tensor s = coo();
  auto* impl = sparse::maybe_sparse(s);
  ASSERT_NE(impl, nullptr);
  EXPECT_EQ(s.dim(), 2);
  EXPECT_EQ(s.size(0), 2);
  EXPECT_EQ(s.size(1), 3);
  EXPECT_EQ(s.dtype(), ScalarType::Float32);
  EXPECT_TRUE(s.key_set().has(sparse::kSparseKey));
  EXPECT_EQ(impl->nnz(), 3);
  EXPECT_EQ(impl->sparse_dim(), 2);
  EXPECT_EQ(impl->dense_dim(), 0);
  EXPECT_EQ(s.impl()->storage()->nbytes(), 0u);
  EXPECT_EQ(dispatch_key_name(sparse::kSparseKey), "Sparse");
  EXPECT_EQ(dispatch_key_name(sparse::kQuantizedKey), "Quantized");
}

TEST(Sparse, FallbackRefusesNamingOpAndLayout) {
  Tensor s = coo();
  try {
    (void)exp(s);
    FAIL() << "exp of a sparse tensor did not raise";
  } catch (const NotImplementedError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'exp'"), std::string::npos) << m;
    EXPECT_NE(m.find("sparse_coo"), std::string::npos) << m;
  }
  EXPECT_THROW((void)s.item(), Error);
}

TEST(Sparse, HandlerResultComesBack) {
  Tensor s = coo();
  sparse::set_sparse_handler(&accept_clone);
  g_accept = true;
  Tensor c = clone(s);
  g_accept = false;
  EXPECT_TRUE(c.is_same(s));
  EXPECT_THROW((void)exp(s), NotImplementedError);  // the handler declines, the fallback raises
}

TEST(Sparse, DetachKeepsTheWrapper) {
  Tensor s = coo();
  Tensor d = autograd::detach(s);
  auto* impl = sparse::maybe_sparse(d);
  ASSERT_NE(impl, nullptr);
  EXPECT_EQ(impl->nnz(), 3);
  EXPECT_TRUE(impl->indices().is_same(sparse::maybe_sparse(s)->indices()));
}

TEST(Sparse, ConstructorChecks) {
  Tensor idx = E({2, 3}, ScalarType::Int64);
  Tensor vals = E({4}, ScalarType::Float32);
  EXPECT_THROW(sparse::make_sparse_coo(idx, vals, std::vector<int64_t>{2, 3}, false), Error);  // nnz mismatch
  Tensor v3 = E({3}, ScalarType::Float32);
  EXPECT_THROW(sparse::make_sparse_coo(idx, v3, std::vector<int64_t>{2, 3, 4}, false), Error);  // ndim
  Tensor fidx = E({2, 3}, ScalarType::Float32);
  EXPECT_THROW(sparse::make_sparse_coo(fidx, v3, std::vector<int64_t>{2, 3}, false), Error);  // dtype
}

TEST(Quantized, WrapperSharesIntegerStorageAndRefusesOps) {
  Tensor q8 = E({2, 2}, ScalarType::Int8);
  Tensor q = sparse::make_quantized(q8, sparse::QDtype::QInt8, 0.5, 1, Tensor(), Tensor(), 0);
  auto* impl = sparse::maybe_quantized(q);
  ASSERT_NE(impl, nullptr);
  EXPECT_EQ(q.data_ptr(), q8.data_ptr());
  EXPECT_EQ(impl->scale(), 0.5);
  EXPECT_EQ(impl->zero_point(), 1);
  EXPECT_FALSE(impl->per_channel());
  EXPECT_THROW((void)exp(q), NotImplementedError);
  EXPECT_NE(sparse::maybe_quantized(autograd::detach(q)), nullptr);
  Tensor u8 = E({2}, ScalarType::UInt8);
  EXPECT_THROW(sparse::make_quantized(u8, sparse::QDtype::QInt8, 0.5, 0, Tensor(), Tensor(), 0), Error);
}
