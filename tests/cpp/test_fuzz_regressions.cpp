// Regression tests for what the fuzzers in fuzz/ found (docs/HARDENING.md). In the sanitizer build
// (scripts/sanitize.sh) the old code failed these with a UBSan report; in a normal build they check the
// error that is raised now instead of a wrapped-around result.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "core/shape.h"
#include "dispatch/schema.h"
#include "ops/ops.h"

using namespace strata;

namespace {

Tensor i64(std::vector<int64_t> vals) {
  Tensor t = empty_tensor(DimVector{static_cast<int64_t>(vals.size())}, ScalarType::Int64, Device());
  for (size_t i = 0; i < vals.size(); ++i) t.data_ptr<int64_t>()[i] = vals[i];
  return t;
}

}  // namespace

// fuzz_geometry: expand of one element to 2**62 x 4 (strides only, no memory) had numel wrap around.
TEST(FuzzRegressions, ViewWithMoreThanInt64ElementsIsRefused) {
  const int64_t big = int64_t(1) << 62;
  Tensor one = zeros(DimVector{1});
  EXPECT_THROW(expand(one, DimVector{big, 4}), Error);
  EXPECT_THROW(as_strided(one, DimVector{big, 4}, DimVector{0, 0}, int64_t(0)), Error);
  EXPECT_THROW(expand(zeros(DimVector{1}, std::nullopt, Device(DeviceType::Meta)), DimVector{big, 4}), Error);
  // Fits exactly: 2**62 elements are fine as a view.
  EXPECT_EQ(expand(one, DimVector{big}).numel(), big);
  // A zero size makes any product 0: an empty view with huge other sizes stays allowed.
  Tensor empty = zeros(DimVector{0});
  EXPECT_EQ(expand(empty, DimVector{big, 4, 0}).numel(), 0);
}

// fuzz_geometry / fuzz_meta_ops: contiguous strides of an empty tensor with huge sizes overflowed
// (clone of an empty view, repeat); torch raises "Stride calculation overflowed".
TEST(FuzzRegressions, ContiguousStrideOverflowIsRefused) {
  const int64_t big = int64_t(1) << 60;
  EXPECT_THROW(empty_tensor(DimVector{0, 27, big}, ScalarType::Float32, Device()), Error);
  EXPECT_THROW(empty_tensor(DimVector{0, 27, big}, ScalarType::Float32, Device(DeviceType::Meta)), Error);
  Tensor e = expand(zeros(DimVector{0, 1, 1}), DimVector{0, 27, big});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_THROW(contiguous_strides(DimVector{0, 27, big}), Error);
  EXPECT_THROW(repeat(zeros(DimVector{0, 2}), DimVector{1, int64_t(1) << 62}), Error);
  // The largest strides that fit are still computed.
  EXPECT_EQ(contiguous_strides(DimVector{0, 2, int64_t(1) << 61}), (DimVector{int64_t(1) << 62, int64_t(1) << 61, 1}));
  // Sizes whose running product overflows only past a zero size: contiguous by definition.
  EXPECT_TRUE(is_contiguous_geometry(DimVector{0, 27, big}, DimVector{1, big, 1}));
}

// fuzz_indexing: an out-of-range index of huge value was multiplied by the stride before the range
// check refused it (signed overflow); now it only raises IndexError.
TEST(FuzzRegressions, HugeOutOfRangeIndexRaisesIndexError) {
  Tensor x = zeros(DimVector{4, 5});
  EXPECT_THROW(index(x, std::vector<Tensor>{i64({5244662530760558792})}), IndexError);
  EXPECT_THROW(index(x, std::vector<Tensor>{i64({1}), i64({INT64_MIN})}), IndexError);
  EXPECT_THROW(index_put_(x, std::vector<Tensor>{i64({INT64_MAX})}, zeros(DimVector{5})), IndexError);
  EXPECT_EQ(index(x, std::vector<Tensor>{i64({-4, 3})}).size(0), 2);
}

// fuzz_meta_ops: a reduction over an empty dim offset the (null) data pointer of the empty input.
TEST(FuzzRegressions, ReductionOverEmptyDimOfDatalessInput) {
  Tensor e = zeros(DimVector{3, 0});
  Tensor s = sum(e, OptIntArrayRef(DimVector{1}));
  ASSERT_EQ(s.numel(), 3);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(s.data_ptr<float>()[i], 0.0f);
  Tensor m = amax(zeros(DimVector{0, 4}), DimVector{1});
  EXPECT_EQ(m.numel(), 0);
}

// fuzz_geometry / fuzz_meta_ops: TensorIterator merged the sizes and byte strides of an empty shape with
// huge sizes ([0, 2**60, 4], views of an empty tensor) and overflowed; nothing is visited now.
TEST(FuzzRegressions, ElementwiseOpsOnEmptyShapesWithHugeSizes) {
  const int64_t big = int64_t(1) << 60;
  Tensor e = expand(zeros(DimVector{0, 1, 1}), DimVector{0, big, 4});
  Tensor f = expand(zeros(DimVector{1, 1, 4}), DimVector{0, big, 4});
  EXPECT_EQ(add(e, f).numel(), 0);
  EXPECT_EQ(maximum(e, zeros(DimVector{4})).numel(), 0);
  Tensor dst = as_strided(zeros(DimVector{1}), DimVector{0, big, 4}, DimVector{0, 4, 1}, int64_t(0));
  EXPECT_EQ(copy_(dst, zeros(DimVector{4})).numel(), 0);
}

// fuzz_geometry: view/reshape multiplied out the sizes of an empty input with huge sizes to see whether
// it was empty (signed overflow).
TEST(FuzzRegressions, ReshapeOfEmptyTensorWithHugeSizes) {
  const int64_t big = int64_t(1) << 60;
  Tensor e = expand(zeros(DimVector{0, 1}), DimVector{0, big});
  EXPECT_EQ(reshape(e, DimVector{0, 7}).numel(), 0);
  EXPECT_EQ(view(e, DimVector{big, 0}).numel(), 0);
  EXPECT_EQ(reshape(e, DimVector{-1}).numel(), 0);
}

// fuzz_geometry: diagonal of an empty view whose two dims have huge strides summed them with a signed
// overflow (and moved the offset by offset * stride unchecked).
TEST(FuzzRegressions, DiagonalOfEmptyViewWithHugeStrides) {
  const int64_t huge = int64_t(1) << 62;
  Tensor e = as_strided(zeros(DimVector{4}), DimVector{0, 5, 5}, DimVector{1, huge, huge}, int64_t(0));
  for (int64_t offset : {int64_t(0), int64_t(2), int64_t(-3)}) {
    Tensor d = diagonal(e, offset, 1, 2);
    EXPECT_EQ(d.numel(), 0);
    EXPECT_EQ(d.dim(), 2);
    EXPECT_EQ(d.size(0), 0);
    EXPECT_EQ(d.storage_offset(), 0);
  }
  // In range, offset and stride are torch's.
  Tensor m = zeros(DimVector{3, 4});
  Tensor d = diagonal(m, 1, 0, 1);
  EXPECT_EQ(d.size(0), 3);
  EXPECT_EQ(d.stride(0), 5);
  EXPECT_EQ(d.storage_offset(), 1);
  EXPECT_EQ(diagonal(m, -1, 0, 1).storage_offset(), 4);
}

// fuzz_geometry: select/slice of an empty view with huge strides (as_strided accepts any for zero
// elements) computed the new offset with a signed overflow.
TEST(FuzzRegressions, SelectAndSliceOfEmptyViewWithHugeStrides) {
  const int64_t huge = int64_t(1) << 62;
  Tensor e = as_strided(zeros(DimVector{4}), DimVector{4, 0}, DimVector{huge, 1}, int64_t(0));
  EXPECT_EQ(select(e, 0, 3).numel(), 0);
  EXPECT_EQ(slice(e, 0, int64_t(3), std::nullopt, 1).numel(), 0);
  EXPECT_EQ(select(e, 0, 3).size(0), 0);
  EXPECT_EQ(unsqueeze(e, 0).dim(), 3);
  EXPECT_EQ(unsqueeze(e, 0).stride(0), huge);
  // No overflow, but far past the storage: the data pointer of such a view would overflow to form.
  Tensor f = as_strided(zeros(DimVector{4}), DimVector{3, 0}, DimVector{int64_t(1) << 61, 1}, int64_t(0));
  Tensor g = select(f, 0, 2);
  EXPECT_EQ(g.storage_offset(), 0);
  EXPECT_EQ(contiguous(g).numel(), 0);
  // In range, the offset is torch's.
  Tensor h = as_strided(zeros(DimVector{8}), DimVector{4, 0}, DimVector{2, 1}, int64_t(0));
  EXPECT_EQ(select(h, 0, 3).storage_offset(), 6);
}

// fuzz_geometry: as_strided accepted any offset for zero elements, and forming the data pointer of
// as_strided(x, [0, 6, 0], ..., 2**62) overflowed (offset * itemsize).
TEST(FuzzRegressions, AsStridedOffsetOfEmptyViewMustBeAddressable) {
  Tensor x = zeros(DimVector{5, 4});
  EXPECT_THROW(as_strided(x, DimVector{0, 6, 0}, DimVector{4, 1, 8}, int64_t(1) << 62), Error);
  EXPECT_THROW(as_strided(x, DimVector{0}, DimVector{1}, INT64_MAX), Error);
  // Past the storage but addressable: accepted, as torch does.
  EXPECT_EQ(as_strided(x, DimVector{0}, DimVector{1}, int64_t(1000)).storage_offset(), 1000);
}

// fuzz_meta_ops: softmax of NaN converted NaN to int inside the vectorized exp (undefined; UBSan).
TEST(FuzzRegressions, SoftmaxOfNaNIsNaN) {
  Tensor x = zeros(DimVector{2, 3});
  x.data_ptr<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  Tensor s = softmax(x, 1);
  for (int64_t j = 0; j < 3; ++j) EXPECT_TRUE(std::isnan(s.data_ptr<float>()[j]));
  for (int64_t j = 3; j < 6; ++j) EXPECT_FLOAT_EQ(s.data_ptr<float>()[j], 1.0f / 3);
}

// fuzz_geometry: flatten multiplied out the huge sizes of an empty tensor's other dims.
TEST(FuzzRegressions, FlattenOfEmptyTensorWithHugeSizes) {
  const int64_t big = int64_t(1) << 40;
  Tensor e = expand(zeros(DimVector{0, 1, 1}), DimVector{0, big, big});
  EXPECT_THROW(flatten(e, 1, 2), Error);
  EXPECT_EQ(flatten(e, 0, 1).size(0), 0);
  EXPECT_EQ(flatten(e).numel(), 0);
}

// fuzz_schema: a schema whose name was only ".overload" parsed into an op without a name.
TEST(FuzzRegressions, SchemaNeedsAnOpName) {
  EXPECT_THROW(parse_schema(".ei`sum(str e) -> Tensor"), Error);
  EXPECT_THROW(parse_schema("add.(Tensor self) -> Tensor"), Error);
  EXPECT_EQ(parse_schema("add.Tensor(Tensor self, Tensor other) -> Tensor").overload, "Tensor");
}

// fuzz_meta_ops: a batched product with an empty inner dim stepped the (null) data pointers of the empty
// operands through the batch.
TEST(FuzzRegressions, BatchedMatmulWithEmptyInnerDim) {
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Int64}) {
    Tensor r = matmul(zeros(DimVector{2, 3, 0}, dt), zeros(DimVector{0, 4}, dt));
    ASSERT_EQ(r.numel(), 24);
    Tensor rc = contiguous(to_dtype(r, ScalarType::Float64));
    for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(rc.data_ptr<double>()[i], 0.0);
  }
  EXPECT_EQ(matmul(zeros(DimVector{5, 2, 0}), zeros(DimVector{5, 0, 3})).numel(), 30);
}

// fuzz_autograd_ops: take_along_dim takes negative indices (counted from the end) but its backward passed
// them to scatter_add, which refuses them: the forward worked and backward raised.
TEST(FuzzRegressions, TakeAlongDimBackwardWithNegativeIndices) {
  namespace ag = strata::autograd;
  Tensor x = contiguous(reshape(to_dtype(arange(Scalar(4)), ScalarType::Float32), DimVector{2, 1, 2}));
  ag::set_requires_grad(x, true);
  Tensor idx = reshape(i64({-1, 0}), DimVector{1, 1, 2});
  Tensor y = take_along_dim(x, idx, 0);
  EXPECT_EQ(y.data_ptr<float>()[0], 2.f);  // x[-1, 0, 0]
  ag::run_backward({sum(y)}, {}, {}, {});
  Tensor g = contiguous(ag::grad(x));
  const float want[] = {0, 1, 1, 0};  // torch's GatherBackward0
  for (int i = 0; i < 4; ++i) EXPECT_EQ(g.data_ptr<float>()[i], want[i]) << i;

  // Without dim the flattened input is indexed, negative indices again counted from the end.
  Tensor z = to_dtype(arange(Scalar(4)), ScalarType::Float32);
  ag::set_requires_grad(z, true);
  ag::run_backward({sum(take_along_dim(z, i64({-1, 0, -4, 3})))}, {}, {}, {});
  Tensor gz = ag::grad(z);
  const float want_z[] = {2, 0, 0, 2};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(gz.data_ptr<float>()[i], want_z[i]) << i;
}
