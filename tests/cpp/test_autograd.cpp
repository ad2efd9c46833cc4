// Autograd from C++ (no Python): recording through the dispatcher layer, the
// engine, saved-tensor version checks, and grad mode.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "ops/ops.h"

using namespace strata;
namespace ag = strata::autograd;

namespace {
Tensor vec(std::vector<float> v) {
  Tensor t = empty_tensor(std::vector<int64_t>{static_cast<int64_t>(v.size())}, ScalarType::Float32, Device());
  std::copy(v.begin(), v.end(), t.data_ptr<float>());
  return t;
}
}  // namespace

TEST(Autograd, RecordsOnlyWhenAnInputRequiresGrad) {
  Tensor x = vec({1, 2, 3});
  EXPECT_FALSE(ag::requires_grad(mul(x, x)));
  ag::set_requires_grad(x, true);
  EXPECT_TRUE(x.key_set().has(DispatchKey::Autograd));
  Tensor y = mul(x, x);
  ASSERT_TRUE(ag::grad_fn(y));
  EXPECT_EQ(ag::grad_fn(y)->name(), "MulBackward0");
  {
    ag::GradModeGuard off(false);
    EXPECT_FALSE(ag::requires_grad(mul(x, x)));
  }
}

TEST(Autograd, BackwardAccumulatesIntoLeaves) {
  Tensor x = vec({1, 2, 3});
  ag::set_requires_grad(x, true);
  Tensor loss = sum(mul(x, x));
  ag::run_backward({loss}, {}, {}, {});
  Tensor g = ag::grad(x);
  ASSERT_TRUE(g.defined());
  EXPECT_FLOAT_EQ(g.data_ptr<float>()[0], 2.f);
  EXPECT_FLOAT_EQ(g.data_ptr<float>()[2], 6.f);
  // autograd.grad form: nothing accumulates, the gradient is returned.
  ag::BackwardOptions opt;
  opt.accumulate_grad = false;
  auto r = ag::run_backward({sum(mul(x, x))}, {}, {x}, opt);
  EXPECT_FLOAT_EQ(r[0].data_ptr<float>()[1], 4.f);
  EXPECT_FLOAT_EQ(ag::grad(x).data_ptr<float>()[1], 4.f);
}

TEST(Autograd, InPlaceChangeOfSavedTensorIsDetected) {
  Tensor x = vec({1, 2});
  ag::set_requires_grad(x, true);
  Tensor y = exp(x);  // saves its output
  Tensor z = sum(y);
  {
    ag::GradModeGuard off(false);
    add(y, y, 1, y);
  }
  try {
    ag::run_backward({z}, {}, {}, {});
    FAIL() << "expected a version-counter error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified by an inplace operation"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("ExpBackward0"), std::string::npos);
  }
}

TEST(Autograd, LeafInPlaceIsRejected) {
  Tensor x = vec({1, 2});
  ag::set_requires_grad(x, true);
  EXPECT_THROW(add(x, x, 1, x), Error);
}
