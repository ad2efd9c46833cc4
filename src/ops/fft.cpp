// torch.fft's primitives: _fft_c2c, _fft_r2c, _fft_c2r (decl/fft.def), CPU and Meta.
//
// Note [FFT library]
// The transforms are oneMKL's DFTI (backends/cpu/mkl_dft.cpp, loaded with dlopen): the library torch's x86 wheel
// uses, the fastest of the candidates we measured (docs/DESIGN.md, "FFT"), and permissively licensed. DFTI takes
// any strides for the signal dims and one batch dim (a count and a distance), so the input is read where it lies
// and the output is written in place: the largest batch dim goes to MKL, the other batch dims are a loop here.
// Only an input with a zero stride (an expanded tensor) is copied first. Results are allocated contiguous.
// A two-sided r2c (torch.fft.fft of a real tensor) is the one-sided transform plus the conjugate-symmetric
// half, filled from it; c2r reads only the first last_dim_size / 2 + 1 entries of its last dim.
#include "ops/op_list.h"

#include <cmath>

#include "backends/cpu/mkl_dft.h"
#include "core/shape.h"
#include "ops/api/complex.h"
#include "ops/api/fft.h"
#include "ops/ops.h"

namespace strata {

namespace {

DimVector fft_dims(const Tensor& self, IntArrayRef dim, const char* op, bool allow_empty) {
  STRATA_CHECK(allow_empty || !dim.empty(), op, ": expected at least one dim to transform");
  DimVector dims;
  for (int64_t d : dim) {
    int64_t w = wrap_dim(d, self.dim(), op);
    for (int64_t e : dims) STRATA_CHECK(e != w, op, ": dims must be unique (got ", shape_str(dim), ")");
    dims.push_back(w);
  }
  return dims;
}

double norm_scale(int64_t mode, double n, const char* op) {
  STRATA_CHECK(mode >= 0 && mode <= 2, op, ": normalization must be 0 (none), 1 (1/sqrt(n)) or 2 (1/n), got ",
               mode);
  return mode == 0 ? 1.0 : mode == 1 ? 1.0 / std::sqrt(n) : 1.0 / n;
}

void check_signal_sizes(const Tensor& t, const DimVector& dims, const char* op) {
  for (int64_t d : dims)
    STRATA_CHECK(t.size(d) >= 1, op, ": Invalid number of data points (", t.size(d), ") specified (dim ", d,
                 " of a tensor of shape ", t.shape_str(), ")");
}

// Runs the transforms of x into y (y's sizes are the output's; both any strides).
void run(cpu::dft::Kind kind, bool forward, Tensor x, const Tensor& y, const DimVector& dims, double scale) {
  if (y.numel() == 0) return;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) > 1 && x.stride(d) == 0) {
      x = contiguous(x);
      break;
    }
  cpu::dft::Geometry g;
  g.kind = kind;
  g.forward = forward;
  g.dbl = x.dtype() == ScalarType::Float64 || x.dtype() == ScalarType::ComplexDouble;
  g.scale = scale;
  const Tensor& real_side = kind == cpu::dft::Kind::C2R ? y : x;
  for (int64_t d : dims) {
    g.lengths.push_back(real_side.size(d));
    g.in_strides.push_back(x.stride(d));
    g.out_strides.push_back(y.stride(d));
  }
  // Batch dims: the largest goes to MKL, the rest are looped over here.
  DimVector batch;
  for (int64_t d = 0; d < y.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end() && y.size(d) > 1) batch.push_back(d);
  int64_t b0 = -1;
  for (int64_t d : batch)
    if (b0 < 0 || y.size(d) > y.size(b0)) b0 = d;
  if (b0 >= 0) {
    g.howmany = y.size(b0);
    g.in_dist = x.stride(b0);
    g.out_dist = y.stride(b0);
  }
  DimVector rest;
  for (int64_t d : batch)
    if (d != b0) rest.push_back(d);
  const size_t in_es = element_size(x.dtype()), out_es = element_size(y.dtype());
  const char* in = static_cast<const char*>(x.data_ptr());
  char* out = static_cast<char*>(y.data_ptr());
  DimVector idx(rest.size(), 0);
  while (true) {
    int64_t in_off = 0, out_off = 0;
    for (size_t i = 0; i < rest.size(); ++i) {
      in_off += idx[i] * x.stride(rest[i]);
      out_off += idx[i] * y.stride(rest[i]);
    }
    cpu::dft::execute(g, in + in_off * int64_t(in_es), out + out_off * int64_t(out_es));
    size_t i = rest.size();
    while (i > 0 && ++idx[i - 1] == y.size(rest[i - 1])) idx[--i] = 0;
    if (i == 0) break;
  }
}

// out[..., k] = conj(out[(-j) mod n_j for the other dims, n - k]) for k >= n / 2 + 1 on the last dim.
void fill_conjugate_symmetry(const Tensor& out, const DimVector& dims) {
  const int64_t last = dims.back(), n = out.size(last), h = n / 2 + 1, m = n - h;
  if (m <= 0) return;
  Tensor src = flip(narrow(out, last, 1, m), std::vector<int64_t>{last});
  for (size_t i = 0; i + 1 < dims.size(); ++i) src = roll(flip(src, std::vector<int64_t>{dims[i]}), std::vector<int64_t>{1}, std::vector<int64_t>{dims[i]});
  copy_(narrow(out, last, h, m), conj_physical(src), false);
}

double signal_numel(const Tensor& t, const DimVector& dims) {
  double n = 1;
  for (int64_t d : dims) n *= double(t.size(d));
  return n;
}

void check_library(const Tensor& t) {
  if (!t.device().is_meta()) STRATA_CHECK(cpu::dft::available(), cpu::dft::unavailable_reason());
}

}  // namespace

Tensor _fft_c2c_impl(const Tensor& self, IntArrayRef dim, int64_t normalization, bool forward) {
  constexpr const char* op = "_fft_c2c";
  STRATA_CHECK(is_complex_type(self.dtype()), op, " expects a complex input tensor, but got ",
               scalar_type_name(self.dtype()));
  DimVector dims = fft_dims(self, dim, op, true);
  check_signal_sizes(self, dims, op);
  const double scale = norm_scale(normalization, signal_numel(self, dims), op);
  Tensor out = empty_tensor(self.sizes(), self.dtype(), self.device());
  if (self.device().is_meta() || out.numel() == 0) return out;
  if (dims.empty()) {
    copy_(out, self, false);
    return out;
  }
  check_library(self);
  run(cpu::dft::Kind::C2C, forward, self, out, dims, scale);
  return out;
}
STRATA_IMPL_CPU_META(_fft_c2c, _fft_c2c_impl);

Tensor _fft_r2c_impl(const Tensor& self, IntArrayRef dim, int64_t normalization, bool onesided) {
  constexpr const char* op = "_fft_r2c";
  STRATA_CHECK(self.dtype() == ScalarType::Float32 || self.dtype() == ScalarType::Float64, op,
               " expects a float32 or float64 input tensor, but got ", scalar_type_name(self.dtype()));
  DimVector dims = fft_dims(self, dim, op, false);
  check_signal_sizes(self, dims, op);
  const double scale = norm_scale(normalization, signal_numel(self, dims), op);
  const int64_t last = dims.back(), n = self.size(last);
  DimVector sizes(self.sizes().begin(), self.sizes().end());
  if (onesided) sizes[last] = n / 2 + 1;
  Tensor out = empty_tensor(sizes, to_complex_type(self.dtype()), self.device());
  if (self.device().is_meta() || out.numel() == 0) return out;
  check_library(self);
  run(cpu::dft::Kind::R2C, true, self, onesided ? out : narrow(out, last, 0, n / 2 + 1), dims, scale);
  if (!onesided) fill_conjugate_symmetry(out, dims);
  return out;
}
STRATA_IMPL_CPU_META(_fft_r2c, _fft_r2c_impl);

Tensor _fft_c2r_impl(const Tensor& self, IntArrayRef dim, int64_t normalization, int64_t last_dim_size) {
  constexpr const char* op = "_fft_c2r";
  STRATA_CHECK(is_complex_type(self.dtype()), op, " expects a complex input tensor, but got ",
               scalar_type_name(self.dtype()));
  DimVector dims = fft_dims(self, dim, op, false);
  STRATA_CHECK(last_dim_size >= 1, op, ": Invalid number of data points (", last_dim_size, ") specified");
  check_signal_sizes(self, dims, op);
  const int64_t last = dims.back(), half = last_dim_size / 2 + 1;
  STRATA_CHECK(self.size(last) >= half, op, ": an output of ", last_dim_size, " points along dim ", last,
               " needs at least ", half, " input points there, but the input has shape ", self.shape_str());
  DimVector sizes(self.sizes().begin(), self.sizes().end());
  sizes[last] = last_dim_size;
  Tensor out = empty_tensor(sizes, to_real_value_type(self.dtype()), self.device());
  const double scale = norm_scale(normalization, signal_numel(out, dims), op);
  if (self.device().is_meta() || out.numel() == 0) return out;
  check_library(self);
  Tensor x = narrow(self, last, 0, half);
  if (dims.size() > 1) {
    // As torch (and NumPy): a c2c over the other dims, then a 1-D c2r. MKL's multi-dimensional c2r gives other
    // values where the input is not exactly Hermitian-symmetric.
    DimVector others(dims.begin(), dims.end() - 1);
    Tensor tmp = empty_tensor(x.sizes(), x.dtype(), x.device());
    run(cpu::dft::Kind::C2C, false, x, tmp, others, 1.0);
    x = tmp;
    dims = DimVector{last};
  }
  run(cpu::dft::Kind::C2R, false, x, out, dims, scale);
  return out;
}
STRATA_IMPL_CPU_META(_fft_c2r, _fft_c2r_impl);

}  // namespace strata
