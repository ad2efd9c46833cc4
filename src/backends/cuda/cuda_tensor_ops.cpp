// The CUDA backend's first kernels: factories (empty, empty_strided, zeros, ones, full), copies between the host
// and devices (copy_, _to_copy, clone) and fill_, registered for DispatchKey::CUDA; and the installation of the
// caching allocator for DeviceType::CUDA.
//
// Note [Copies without kernels]
// Until Strata has CUDA kernels of its own, only byte copies and zero fills run on the device (cuMemcpy*,
// cuMemsetD8). A copy that also converts, broadcasts or has strided operands goes through the host: the device
// bytes the operands span are read back (on the current stream, which is then synchronized), the conversion runs
// on the CPU, and the destination's span is written back (a read-modify-write, so that bytes of the span that do
// not belong to the destination keep their values). Correct, and slow; named in docs/CUDA.md.
#include "backends/cuda/caching_allocator.h"
#include "core/indexed_allocator.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/eager_kernels.h"
#include "backends/cuda/pinned_memory.h"
#include "ops/api/core.h"
#include "ops/creation_common.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/pointwise.h"

#include <cmath>

#include "core/shape.h"

namespace strata::cuda {

namespace {

int64_t span_elems(const Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t e = 1;
  for (int64_t i = 0; i < t.dim(); ++i) e += (t.sizes()[i] - 1) * t.strides()[i];
  return e;
}

CUdeviceptr dptr(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); }

bool is_cuda(const Tensor& t) { return t.device().type == DeviceType::CUDA; }

// Copies bytes from device memory on `dev` to the host on the device's current stream and waits (a sync point).
void read_device(int dev, void* dst, CUdeviceptr src, size_t bytes) {
  sync_point("a copy from a cuda device to the host (.cpu(), .item(), .tolist(), print, bool(), copy_)");
  DeviceGuard g(dev);
  Stream s = current_stream(dev);
  check(driver().cuMemcpyDtoHAsync(dst, src, bytes, s.handle), "cuMemcpyDtoHAsync");
  s.synchronize();
}

// A CPU copy of the device bytes `t` spans, and the view of it with t's geometry. Waits for the copy.
std::pair<Tensor, Tensor> read_span(const Tensor& t) {
  const int64_t n = span_elems(t);
  Tensor base = empty_tensor(std::vector<int64_t>{n}, t.dtype(), Device());
  if (n > 0) read_device(t.device().index, base.data_ptr(), dptr(t), static_cast<size_t>(n) * t.element_size());
  Tensor view = make_view(base, DimVector(t.sizes().begin(), t.sizes().end()),
                          DimVector(t.strides().begin(), t.strides().end()), 0);
  return {base, view};
}

// Writes `host` (contiguous, on the CPU, t's dtype, span_elems(t) elements) to the bytes t spans.
void write_span(const Tensor& t, const Tensor& host) {
  const int64_t n = span_elems(t);
  if (n == 0) return;
  const int dev = t.device().index;
  DeviceGuard g(dev);
  // The driver takes a copy of pageable host memory before returning, so `host` may go away at once.
  check(driver().cuMemcpyHtoDAsync(dptr(t), host.data_ptr(), static_cast<size_t>(n) * t.element_size(),
                                   current_stream(dev).handle),
        "cuMemcpyHtoDAsync");
}

Tensor copy_cuda(const Tensor& self, const Tensor& src, bool non_blocking) {
  if (self.is_same(src)) return self;
  STRATA_CHECK(!src.device().is_meta() && !self.device().is_meta(), "copy_: cannot copy between ",
               src.device().str(), " and ", self.device().str(), " (meta tensors have no data)");
  if (!is_cuda(self)) {  // device -> host
    STRATA_CHECK(self.device().is_cpu(), "copy_: no copy routine from ", src.device().str(), " to ",
                 self.device().str());
    const size_t bytes = static_cast<size_t>(self.numel()) * self.element_size();
    if (self.numel() > 0 && self.dtype() == src.dtype() && self.is_contiguous() && src.is_contiguous() &&
        std::equal(self.sizes().begin(), self.sizes().end(), src.sizes().begin(), src.sizes().end()) &&
        is_pinned(self.data_ptr(), bytes)) {
      // Into page-locked memory: one asynchronous copy (Note [Pinned host memory]).
      const int dev = src.device().index;
      DeviceGuard g(dev);
      Stream s = current_stream(dev);
      check(driver().cuMemcpyDtoHAsync(self.data_ptr(), dptr(src), bytes, s.handle), "cuMemcpyDtoHAsync");
      pinned_record_use(self.data_ptr(), s);
      if (!non_blocking) {
        sync_point("copy_ from a cuda device to pinned host memory with non_blocking=False");
        s.synchronize();
      }
      self.bump_version();
      return self;
    }
    auto [base, view] = read_span(src);
    copy_(self, view, false);
    return self;
  }
  DimVector b = broadcast_shapes(self.sizes(), src.sizes(), "copy_");
  STRATA_CHECK(std::equal(b.begin(), b.end(), self.sizes().begin(), self.sizes().end()), "copy_: source of shape ",
               src.shape_str(), " cannot be broadcast to destination shape ", self.shape_str());
  if (self.numel() == 0) return self;
  const int dev = self.device().index;
  DeviceGuard g(dev);
  const bool same_layout = src.dtype() == self.dtype() && src.is_contiguous() && self.is_contiguous() &&
                           std::equal(b.begin(), b.end(), src.sizes().begin(), src.sizes().end());
  const size_t bytes = static_cast<size_t>(self.numel()) * self.element_size();
  if (same_layout && is_cuda(src) && src.device().index == dev) {
    check(driver().cuMemcpyDtoDAsync(dptr(self), dptr(src), bytes, current_stream(dev).handle),
          "cuMemcpyDtoDAsync");
  } else if (is_cuda(src) && src.device().index == dev && copy_kernel(self, src)) {
    // Converting, broadcasting or strided copy on one device: one kernel (Note [CUDA eager kernels]).
  } else if (same_layout && src.device().is_cpu() && is_pinned(src.data_ptr(), bytes)) {
    // From page-locked memory: asynchronous (Note [Pinned host memory]); non_blocking=False waits below.
    Stream s = current_stream(dev);
    check(driver().cuMemcpyHtoDAsync(dptr(self), src.data_ptr(), bytes, s.handle), "cuMemcpyHtoDAsync");
    pinned_record_use(src.data_ptr(), s);
  } else if (src.device().is_cpu() && self.is_contiguous()) {
    // Host -> device: convert and broadcast on the host, then one copy.
    Tensor h = src;
    h = to_dtype(h, self.dtype());
    if (!std::equal(b.begin(), b.end(), h.sizes().begin(), h.sizes().end())) h = expand(h, self.sizes());
    h = contiguous(h);
    check(driver().cuMemcpyHtoDAsync(dptr(self), h.data_ptr(), bytes, current_stream(dev).handle),
          "cuMemcpyHtoDAsync");
  } else {
    // Note [Copies without kernels]
    Tensor host_src = is_cuda(src) ? read_span(src).second : src;
    auto [base, view] = read_span(self);
    copy_(view, host_src, false);
    write_span(self, base);
  }
  if (!non_blocking && src.device().is_cpu()) {
    sync_point("copy_ from the host to a cuda device with non_blocking=False");
    current_stream(dev).synchronize();
  }
  self.bump_version();
  return self;
}
STRATA_IMPL(copy_, CUDA, copy_cuda);

Tensor fill_cuda(const Tensor& self, const Scalar& value) {
  if (self.numel() == 0) return self;
  const int dev = self.device().index;
  DeviceGuard g(dev);
  bool zero = !value.is_complex() && value.to_double() == 0.0 && !(value.is_floating_point() &&
                                                                    std::signbit(value.to_double()));
  if (zero && self.is_contiguous()) {
    check(driver().cuMemsetD8Async(dptr(self), 0, static_cast<size_t>(self.numel()) * self.element_size(),
                                   current_stream(dev).handle),
          "cuMemsetD8Async");
  } else if (!fill_kernel(self, value)) {
    auto [base, view] = read_span(self);  // Note [Copies without kernels]
    fill_(view, value);
    write_span(self, base);
  }
  self.bump_version();
  return self;
}
STRATA_IMPL(fill_, CUDA, fill_cuda);

Tensor empty_cuda(IntArrayRef size, OptDType dtype, OptDevice device, const std::optional<Tensor>& out) {
  lazy_init();
  ScalarType dt = factory_dtype("empty", dtype, out, default_dtype());
  Device d = factory_device("empty", device, out);
  if (out && out->defined()) {
    Tensor o = *out;
    if (!std::equal(o.sizes().begin(), o.sizes().end(), size.begin(), size.end())) resize_out(o, size, "empty");
    return o;
  }
  return factory_alloc("empty", size, dt, d);
}
STRATA_IMPL(empty, CUDA, empty_cuda);

Tensor empty_strided_cuda(IntArrayRef size, IntArrayRef stride, OptDType dtype, OptDevice device) {
  lazy_init();
  STRATA_CHECK(size.size() == stride.size(), "empty_strided: mismatch in length of strides and shape (",
               size.size(), " sizes, ", stride.size(), " strides)");
  int64_t extent = 1;
  bool empty = false;
  for (size_t i = 0; i < size.size(); ++i) {
    STRATA_CHECK(size[i] >= 0 && stride[i] >= 0, "empty_strided: negative size or stride in sizes=",
                 shape_str(size), " strides=", shape_str(stride));
    empty = empty || size[i] == 0;
    int64_t term;
    STRATA_CHECK(size[i] == 0 || (!__builtin_mul_overflow(size[i] - 1, stride[i], &term) &&
                                  !__builtin_add_overflow(extent, term, &extent)),
                 "empty_strided: Storage size calculation overflowed with sizes=", shape_str(size),
                 " and strides=", shape_str(stride));
  }
  if (empty) extent = 0;
  Tensor base = empty_tensor(std::vector<int64_t>{extent}, dtype.value_or(default_dtype()),
                             device.value_or(Device(DeviceType::CUDA)));
  return make_view(base, DimVector(size.begin(), size.end()), DimVector(stride.begin(), stride.end()), 0);
}
STRATA_IMPL(empty_strided, CUDA, empty_strided_cuda);

Tensor fill_factory(const char* op, IntArrayRef size, const Scalar& v, OptDType dtype, OptDevice device,
                    const std::optional<Tensor>& out, ScalarType dflt) {
  lazy_init();
  ScalarType dt = factory_dtype(op, dtype, out, dflt);
  Tensor t = factory_alloc(op, size, dt, factory_device(op, device, out));
  fill_(t, v);
  return finish_factory(op, t, out);
}
Tensor zeros_cuda(IntArrayRef size, OptDType dtype, OptDevice device, const std::optional<Tensor>& out) {
  return fill_factory("zeros", size, Scalar(int64_t(0)), dtype, device, out, default_dtype());
}
STRATA_IMPL(zeros, CUDA, zeros_cuda);
Tensor ones_cuda(IntArrayRef size, OptDType dtype, OptDevice device, const std::optional<Tensor>& out) {
  return fill_factory("ones", size, Scalar(int64_t(1)), dtype, device, out, default_dtype());
}
STRATA_IMPL(ones, CUDA, ones_cuda);
Tensor full_cuda(IntArrayRef size, const Scalar& v, OptDType dtype, OptDevice device,
                 const std::optional<Tensor>& out) {
  return fill_factory("full", size, v, dtype, device, out, v.natural_dtype());
}
STRATA_IMPL(full, CUDA, full_cuda);

Tensor to_copy_cuda(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor out = empty_tensor(self.sizes(), dtype.value_or(self.dtype()), device.value_or(self.device()));
  copy_(out, self, false);
  return out;
}
STRATA_IMPL(_to_copy, CUDA, to_copy_cuda);

Tensor clone_cuda(const Tensor& self) {
  Tensor out = empty_tensor(self.sizes(), self.dtype(), self.device());
  copy_(out, self, false);
  return out;
}
STRATA_IMPL(clone, CUDA, clone_cuda);

}  // namespace

Tensor pin_memory(const Tensor& t) {
  STRATA_CHECK(t.device().is_cpu(), "pin_memory: only CPU tensors can be pinned, got a ", t.describe());
  const size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
  auto storage = make_intrusive<StorageImpl>(pinned_allocate(nbytes), nbytes, Device());
  Tensor out(make_intrusive<TensorImpl>(std::move(storage), 0, t.sizes(), t.dtype()));
  copy_(out, t, false);
  return out;
}

// Views only compute geometry: their CPU kernels (device-generic, shared with Meta) serve CUDA tensors as they
// are. Copied onto the CUDA key at the first use of CUDA, when every static registration has run.
void share_view_kernels() {
  Dispatcher& d = Dispatcher::get();
  for (const char* name : {"view", "view.dtype", "transpose", "permute", "select", "slice", "expand", "squeeze.dims",
                           "unsqueeze", "as_strided", "diagonal", "unfold", "alias"}) {
    OperatorEntry* op = d.find(name);
    if (!op || op->has_registered(DispatchKey::CUDA) || !op->has_registered(DispatchKey::CPU)) continue;
    d.register_kernel(*op, DispatchKey::CUDA, op->kernel_for(DispatchKey::CPU));
  }
  share_pointwise_kernels();
}

namespace {

const bool g_installed = [] {
  install_caching_allocator();
  // Tensor::item() on a cuda tensor: one element copied on the current stream of its device, then a wait.
  set_device_read(DeviceType::CUDA, [](Device device, const void* src, void* dst, size_t nbytes) {
    read_device(device.index, dst, reinterpret_cast<uintptr_t>(src), nbytes);
  });
  return true;
}();

}  // namespace

}  // namespace strata::cuda
