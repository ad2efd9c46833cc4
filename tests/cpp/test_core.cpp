#include <gtest/gtest.h>

#include <complex>

#include "core/shape.h"
#include "ops/api/complex.h"
#include "ops/ops.h"

using namespace strata;

TEST(Core, PromoteTypes) {
  EXPECT_EQ(promote_types(ScalarType::UInt8, ScalarType::Int8), ScalarType::Int16);
  EXPECT_EQ(promote_types(ScalarType::Float16, ScalarType::BFloat16), ScalarType::Float32);
  EXPECT_EQ(promote_types(ScalarType::Bool, ScalarType::Int32), ScalarType::Int32);
  EXPECT_EQ(promote_types(ScalarType::Int64, ScalarType::Float16), ScalarType::Float16);
}

TEST(Core, ComplexAndUnsignedDtypes) {
  // The lattice is symmetric, and the barebones unsigned types refuse integer partners.
  for (int i = 0; i < kNumScalarTypes; ++i) {
    for (int j = 0; j < kNumScalarTypes; ++j) {
      auto a = static_cast<ScalarType>(i), b = static_cast<ScalarType>(j);
      bool refused = a != b && ((is_barebones_unsigned(a) && !is_floating_type(b)) ||
                                (is_barebones_unsigned(b) && !is_floating_type(a)) || is_float8_type(a) ||
                                is_float8_type(b) || (is_barebones_unsigned(a) && is_float8_type(b)));
      if (refused) {
        EXPECT_THROW(promote_types(a, b), Error) << dtype_name(a) << " " << dtype_name(b);
      } else {
        EXPECT_EQ(promote_types(a, b), promote_types(b, a)) << dtype_name(a) << " " << dtype_name(b);
      }
    }
  }
  EXPECT_EQ(promote_types(ScalarType::Float64, ScalarType::ComplexFloat), ScalarType::ComplexDouble);
  EXPECT_EQ(promote_types(ScalarType::Int64, ScalarType::ComplexFloat), ScalarType::ComplexFloat);
  EXPECT_EQ(promote_types(ScalarType::UInt32, ScalarType::Float16), ScalarType::Float16);
  EXPECT_EQ(element_size(ScalarType::ComplexDouble), 16u);
  EXPECT_EQ(element_size(ScalarType::Float8_e4m3fn), 1u);
  EXPECT_EQ(dtype_from_name("torch.float8_e5m2"), ScalarType::Float8_e5m2);
  // float8: 448 is e4m3fn's largest value (0x7e); inf saturates to it; e5m2 keeps inf (0x7c).
  EXPECT_EQ(Float8_e4m3fn(448.0f).bits, 0x7e);
  EXPECT_EQ(Float8_e4m3fn(std::numeric_limits<float>::infinity()).bits, 0x7e);
  EXPECT_EQ(Float8_e5m2(std::numeric_limits<float>::infinity()).bits, 0x7c);
  EXPECT_EQ(static_cast<float>(Float8_e4m3fn::from_bits(0x38)), 1.0f);
  EXPECT_TRUE(std::isnan(static_cast<float>(Float8_e4m3fnuz::from_bits(0x80))));
  EXPECT_EQ(dtype_from_name("cfloat"), ScalarType::ComplexFloat);
  EXPECT_EQ(dtype_from_name("torch.uint64"), ScalarType::UInt64);

  Tensor z = scalar_to_tensor(Scalar(std::complex<double>(1, 2)), ScalarType::ComplexFloat);
  Tensor w = mul(z, z);  // (1+2i)^2 = -3+4i
  EXPECT_EQ(w.dtype(), ScalarType::ComplexFloat);
  EXPECT_EQ(w.item().to_complex(), std::complex<double>(-3, 4));
  EXPECT_EQ(imag(w).item().to_double(), 4.0);
  EXPECT_EQ(abs(w).dtype(), ScalarType::Float32);
  EXPECT_EQ(abs(w).item().to_double(), 5.0);
  // A Python-number-like complex scalar over a float32 tensor gives complex64.
  Tensor x = scalar_to_tensor(Scalar(2.0), ScalarType::Float32);
  Tensor i = scalar_to_tensor(Scalar(std::complex<double>(0, 1)), ScalarType::ComplexDouble, Device(), true);
  EXPECT_EQ(mul(x, i).dtype(), ScalarType::ComplexFloat);
  EXPECT_THROW(lt(z, z), NotImplementedError);
  Tensor u = scalar_to_tensor(Scalar(int64_t(3)), ScalarType::UInt32);
  EXPECT_THROW(add(u, u), NotImplementedError);
  EXPECT_TRUE(eq(u, u).item().to_bool());
}

TEST(Core, NumelOverflowAndNegativeSizes) {
  std::vector<int64_t> huge{int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_THROW(checked_numel(huge), Error);
  std::vector<int64_t> neg{2, -1};
  EXPECT_THROW(empty_tensor(neg, ScalarType::Float32, Device()), Error);
  std::vector<int64_t> zero{int64_t(1) << 62, 0, int64_t(1) << 62};
  EXPECT_EQ(checked_numel(zero), 0);
}

TEST(Core, HugeAllocationIsCleanError) {
  std::vector<int64_t> big{int64_t(1) << 45};
  EXPECT_THROW(empty_tensor(big, ScalarType::Float32, Device()), OutOfMemoryError);
  Tensor ok = empty_tensor(std::vector<int64_t>{4}, ScalarType::Float32, Device());
  EXPECT_EQ(ok.numel(), 4);
}

TEST(Core, AddBroadcastAndPromotion) {
  Tensor a = empty_tensor(std::vector<int64_t>{2, 3}, ScalarType::Float32, Device());
  fill_(a, 1.5);
  Tensor b = empty_tensor(std::vector<int64_t>{3}, ScalarType::Int64, Device());
  fill_(b, int64_t(2));
  Tensor c = add(a, b);
  ASSERT_EQ(c.dtype(), ScalarType::Float32);
  ASSERT_EQ(c.dim(), 2);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(c.data_ptr<float>()[i], 3.5f);
  uint32_t v = a.version();
  add(a, b, 1, a);
  EXPECT_GT(a.version(), v);
  EXPECT_FLOAT_EQ(a.data_ptr<float>()[0], 3.5f);
}

TEST(Core, IntegerDivisionByZeroThrows) {
  Tensor a = empty_tensor(std::vector<int64_t>{3}, ScalarType::Int64, Device());
  fill_(a, int64_t(7));
  Tensor z = empty_tensor(std::vector<int64_t>{3}, ScalarType::Int64, Device());
  fill_(z, int64_t(0));
  EXPECT_THROW(remainder(a, z), Error);
  EXPECT_THROW(div(a, z, std::string_view("floor")), Error);
}

TEST(Core, MetaTensorsHaveNoData) {
  Tensor a = empty_tensor(std::vector<int64_t>{1000, 1000}, ScalarType::Float32, Device(DeviceType::Meta));
  Tensor b = exp(a);
  EXPECT_EQ(b.device().type, DeviceType::Meta);
  EXPECT_EQ(b.numel(), 1000000);
  EXPECT_EQ(b.data_ptr(), nullptr);
}

// Note [TensorImpl geometry storage]: sizes and strides live inline up to 5
// dims and on the heap beyond; set_geometry may be handed views of the
// tensor's own geometry, across the inline/heap boundary both ways.
TEST(Core, TensorImplGeometryInlineAndHeap) {
  for (int64_t nd : {0, 1, 5, 6, 9}) {
    std::vector<int64_t> sizes;
    for (int64_t d = 0; d < nd; ++d) sizes.push_back(d % 3 + 1);
    Tensor t = empty_tensor(sizes, ScalarType::Float32, Device());
    ASSERT_EQ(t.dim(), nd);
    EXPECT_TRUE(std::equal(t.sizes().begin(), t.sizes().end(), sizes.begin(), sizes.end()));
    DimVector expect = contiguous_strides(sizes);
    EXPECT_TRUE(std::equal(t.strides().begin(), t.strides().end(), expect.begin(), expect.end()));
    EXPECT_TRUE(t.is_contiguous());
    // Re-set from its own (aliased) geometry: unchanged.
    t.impl()->set_geometry(t.sizes(), t.strides(), 0);
    EXPECT_TRUE(std::equal(t.sizes().begin(), t.sizes().end(), sizes.begin(), sizes.end()));
    EXPECT_TRUE(std::equal(t.strides().begin(), t.strides().end(), expect.begin(), expect.end()));
  }
  // Grow from inline to heap and shrink back, each time from views of the current geometry.
  Tensor t = empty_tensor(std::vector<int64_t>{24}, ScalarType::Float32, Device());
  std::vector<int64_t> big{1, 2, 1, 3, 1, 2, 2}, big_st = {24, 12, 12, 4, 4, 2, 1};
  t.impl()->set_geometry(big, big_st, 0);
  ASSERT_EQ(t.dim(), 7);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_TRUE(t.is_contiguous());
  t.impl()->set_geometry(t.sizes().subspan(3), t.strides().subspan(3), 0);  // a view of the heap buffer
  ASSERT_EQ(t.dim(), 4);
  EXPECT_EQ(t.sizes()[0], 3);
  EXPECT_EQ(t.strides()[3], 1);
  EXPECT_EQ(t.numel(), 12);
  std::vector<int64_t> mismatched{2, 3};
  EXPECT_THROW(t.impl()->set_geometry(mismatched, std::vector<int64_t>{1}, 0), Error);
}

TEST(Core, SizeAndStrideIndexing) {
  Tensor t = empty_tensor(std::vector<int64_t>{2, 3, 4}, ScalarType::Float32, Device());
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(-3), 2);
  EXPECT_EQ(t.stride(-1), 1);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_THROW(t.size(3), IndexError);
  EXPECT_THROW(t.size(-4), IndexError);
  EXPECT_THROW(t.stride(7), IndexError);
  Tensor s = scalar_to_tensor(Scalar(1.0), ScalarType::Float32);
  EXPECT_THROW(s.size(0), IndexError);  // a 0-d tensor has no dims to index (torch raises too)
  EXPECT_THROW(s.stride(-1), IndexError);
}
