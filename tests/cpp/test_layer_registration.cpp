// A functionality layer on a built-in op, registered with STRATA_IMPL_WITH_KEYS:
// it runs only while its key is in the thread-local include set, and hands the
// call to the kernels below it.
#include <gtest/gtest.h>

#include "ops/ops.h"

using namespace strata;

namespace {

int g_tracer_calls = 0;

Tensor traced_neg(DispatchKeySet ks, const Tensor& self, const std::optional<Tensor>& out) {
  ++g_tracer_calls;
  return redispatch_op<OpId::neg>(ks, DispatchKey::Tracer, self, out);
}
STRATA_IMPL_WITH_KEYS(neg, Tracer, traced_neg);

}  // namespace

TEST(LayerRegistration, RunsOnlyWhenIncludedAndRedispatches) {
  Tensor a = empty_tensor(std::vector<int64_t>{3}, ScalarType::Float32, Device());
  fill_(a, 2.0);
  int before = g_tracer_calls;
  Tensor b = neg(a);
  EXPECT_EQ(g_tracer_calls, before);  // Tracer not included: the layer is skipped
  {
    IncludeDispatchKeyGuard g{DispatchKeySet(DispatchKey::Tracer)};
    Tensor c = neg(a);
    EXPECT_EQ(g_tracer_calls, before + 1);
    EXPECT_FLOAT_EQ(c.data_ptr<float>()[0], -2.0f);
    {
      ExcludeDispatchKeyGuard e{DispatchKeySet(DispatchKey::Tracer)};
      neg(a);
      EXPECT_EQ(g_tracer_calls, before + 1);  // excluded wins over included
    }
  }
  EXPECT_FLOAT_EQ(b.data_ptr<float>()[0], -2.0f);
}
