#include <gtest/gtest.h>

#include <numeric>

#include "core/shape.h"
#include "ops/ops.h"

using namespace strata;

namespace {

Tensor arange_f(int64_t n, Device dev = Device()) {
  Tensor t = empty_tensor(DimVector{n}, ScalarType::Float32, dev);
  if (!dev.is_meta()) {
    float* p = t.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i);
  }
  return t;
}

DimVector dv(IntArrayRef a) { return DimVector(a.begin(), a.end()); }

}  // namespace

TEST(Views, AsStridedBoundsAreChecked) {
  Tensor base = arange_f(12);
  // Exactly fits: last element is index 11.
  Tensor ok = as_strided(base, DimVector{3, 4}, DimVector{4, 1}, int64_t(0));
  EXPECT_EQ(ok.numel(), 12);
  EXPECT_THROW(as_strided(base, DimVector{3, 4}, DimVector{4, 1}, int64_t(1)), Error);
  EXPECT_THROW(as_strided(base, DimVector{13}, DimVector{1}, int64_t(0)), Error);
  EXPECT_THROW(as_strided(base, DimVector{2}, DimVector{-1}, int64_t(1)), Error);
  EXPECT_THROW(as_strided(base, DimVector{2}, DimVector{1}, int64_t(-1)), Error);
  EXPECT_THROW(as_strided(base, DimVector{2, 2}, DimVector{1}, std::nullopt), Error);
  // Overflowing spans are rejected, not wrapped around.
  EXPECT_THROW(as_strided(base, DimVector{2, 2}, DimVector{int64_t(1) << 62, int64_t(1) << 62}, int64_t(0)), Error);
  // Zero elements never read anything: any offset inside or at the end is fine.
  EXPECT_EQ(as_strided(base, DimVector{0, 5}, DimVector{100, 100}, int64_t(3)).numel(), 0);
  // The default offset is self's: a view at offset 10 can reach only 2 more.
  Tensor tail = slice(base, 0, int64_t(10), std::nullopt, 1);
  EXPECT_EQ(as_strided(tail, DimVector{2}, DimVector{1}, std::nullopt).storage_offset(), 10);
  EXPECT_THROW(as_strided(tail, DimVector{3}, DimVector{1}, std::nullopt), Error);
  // Same checks on Meta (the storage size is known without data).
  Tensor meta = arange_f(12, Device(DeviceType::Meta));
  EXPECT_THROW(as_strided(meta, DimVector{13}, DimVector{1}, int64_t(0)), Error);
  EXPECT_EQ(as_strided(meta, DimVector{6}, DimVector{2}, int64_t(0)).numel(), 6);
}

TEST(Views, GeometryOfBasicViews) {
  Tensor x = view(arange_f(24), DimVector{2, 3, 4});
  EXPECT_EQ(dv(x.strides()), (DimVector{12, 4, 1}));
  Tensor tr = transpose(x, 0, 2);
  EXPECT_EQ(dv(tr.sizes()), (DimVector{4, 3, 2}));
  EXPECT_EQ(dv(tr.strides()), (DimVector{1, 4, 12}));
  EXPECT_FALSE(tr.is_contiguous());
  Tensor s = select(x, 1, -1);
  EXPECT_EQ(dv(s.sizes()), (DimVector{2, 4}));
  EXPECT_EQ(s.storage_offset(), 8);
  Tensor sl = slice(x, 2, int64_t(1), int64_t(100), 2);
  EXPECT_EQ(dv(sl.sizes()), (DimVector{2, 3, 2}));
  EXPECT_EQ(dv(sl.strides()), (DimVector{12, 4, 2}));
  EXPECT_EQ(sl.storage_offset(), 1);
  Tensor e = expand(unsqueeze(select(x, 0, 0), 0), DimVector{5, -1, -1});
  EXPECT_EQ(dv(e.sizes()), (DimVector{5, 3, 4}));
  EXPECT_EQ(e.strides()[0], 0);
  Tensor d = diagonal(x, 1, 1, 2);
  EXPECT_EQ(dv(d.sizes()), (DimVector{2, 3}));
  EXPECT_EQ(dv(d.strides()), (DimVector{12, 5}));
  EXPECT_EQ(d.storage_offset(), 1);
  Tensor u = unfold(arange_f(7), 0, 3, 2);
  EXPECT_EQ(dv(u.sizes()), (DimVector{3, 3}));
  EXPECT_EQ(dv(u.strides()), (DimVector{2, 1}));
  Tensor p = permute(x, DimVector{2, 0, 1});
  EXPECT_EQ(dv(p.strides()), (DimVector{1, 12, 4}));
  Tensor m = movedim(x, DimVector{0}, DimVector{2});
  EXPECT_EQ(dv(m.sizes()), (DimVector{3, 4, 2}));
  // All of them share x's storage.
  for (const Tensor& v : {tr, s, sl, e, d, p, m}) EXPECT_EQ(v.impl()->storage(), x.impl()->storage());
}

TEST(Views, ViewNeedsCompatibleStrides) {
  Tensor x = view(arange_f(24), DimVector{2, 3, 4});
  // Splitting/merging inside one contiguous chunk works on a transposed tensor.
  Tensor tr = transpose(x, 0, 1);  // [3, 2, 4], strides [4, 12, 1]
  Tensor ok = view(tr, DimVector{3, 2, 2, 2});
  EXPECT_EQ(dv(ok.strides()), (DimVector{4, 12, 2, 1}));
  EXPECT_THROW(view(tr, DimVector{6, 4}), Error);
  EXPECT_THROW(view(x, DimVector{5, -1}), Error);
  EXPECT_THROW(view(x, DimVector{-1, -1}), Error);
  // reshape copies when a view is impossible.
  Tensor r = reshape(tr, DimVector{6, 4});
  EXPECT_NE(r.impl()->storage(), x.impl()->storage());
  EXPECT_FLOAT_EQ(r.data_ptr<float>()[4], 12.0f);
  Tensor rv = reshape(x, DimVector{4, -1});
  EXPECT_EQ(rv.impl()->storage(), x.impl()->storage());
  EXPECT_EQ(dv(rv.sizes()), (DimVector{4, 6}));
}

TEST(Views, ZeroSizeAndZeroDim) {
  Tensor z = empty_tensor(DimVector{0, 3}, ScalarType::Float32, Device());
  EXPECT_EQ(dv(view(z, DimVector{3, 0, 5, 0}).sizes()), (DimVector{3, 0, 5, 0}));
  EXPECT_THROW(view(z, DimVector{-1, 0}), Error);
  Tensor s = scalar_to_tensor(Scalar(2.0), ScalarType::Float32);
  EXPECT_EQ(view(s, DimVector{1, 1}).dim(), 2);
  EXPECT_EQ(unsqueeze(s, 0).dim(), 1);
  EXPECT_EQ(transpose(s, 0, -1).dim(), 0);
  EXPECT_EQ(flatten(s).dim(), 1);
  EXPECT_THROW(select(s, 0, 0), IndexError);
  EXPECT_EQ(slice(z, 1, int64_t(5), int64_t(1), 1).sizes()[1], 0);
  EXPECT_THROW(slice(z, 1, std::nullopt, std::nullopt, 0), ValueError);
}

TEST(Index, GatherAndPut) {
  Tensor x = view(arange_f(12), DimVector{3, 4});
  Tensor idx = empty_tensor(DimVector{3}, ScalarType::Int64, Device());
  int64_t* ip = idx.data_ptr<int64_t>();
  ip[0] = 2;
  ip[1] = -3;
  ip[2] = 2;
  Tensor rows = index(x, std::vector<Tensor>{idx}, 0);
  EXPECT_EQ(dv(rows.sizes()), (DimVector{3, 4}));
  EXPECT_FLOAT_EQ(rows.data_ptr<float>()[0], 8.0f);
  EXPECT_FLOAT_EQ(rows.data_ptr<float>()[4], 0.0f);
  Tensor cols = index(x, std::vector<Tensor>{idx}, 1);
  EXPECT_EQ(dv(cols.sizes()), (DimVector{3, 3}));
  EXPECT_FLOAT_EQ(cols.data_ptr<float>()[1], 1.0f);  // x[0, -3]
  ip[0] = 3;
  EXPECT_THROW(index(x, std::vector<Tensor>{idx}, 0), IndexError);
  ip[0] = 0;
  // Accumulate adds duplicates: column 2 appears twice.
  Tensor acc = view(arange_f(4), DimVector{4});
  fill_(acc, 0.0);
  Tensor one = scalar_to_tensor(Scalar(1.0), ScalarType::Float32);
  Tensor cidx = empty_tensor(DimVector{3}, ScalarType::Int64, Device());
  cidx.data_ptr<int64_t>()[0] = 2;
  cidx.data_ptr<int64_t>()[1] = 0;
  cidx.data_ptr<int64_t>()[2] = 2;
  uint32_t v0 = acc.version();
  index_put_(acc, std::vector<Tensor>{cidx}, one, true, 0);
  EXPECT_GT(acc.version(), v0);
  EXPECT_FLOAT_EQ(acc.data_ptr<float>()[2], 2.0f);
  EXPECT_FLOAT_EQ(acc.data_ptr<float>()[0], 1.0f);
  EXPECT_FLOAT_EQ(acc.data_ptr<float>()[1], 0.0f);
  // Meta: shapes only.
  Tensor mx = empty_tensor(DimVector{3, 4}, ScalarType::Float32, Device(DeviceType::Meta));
  Tensor mr = index(mx, std::vector<Tensor>{idx}, 1);
  EXPECT_EQ(dv(mr.sizes()), (DimVector{3, 3}));
  EXPECT_TRUE(mr.device().is_meta());
}
