#include "core/tensor.h"

#include "core/shape.h"
#include "core/indexed_allocator.h"

#include <atomic>
#include <cstring>

#include <algorithm>

#include "core/error.h"
#include "core/hot.h"

namespace strata {

void contiguous_strides_checked(IntArrayRef sizes, int64_t* out);  // shape.cpp: raises on int64 overflow

namespace {
thread_local bool t_inference_mode = false;
}  // namespace

bool inference_mode_enabled() { return t_inference_mode; }
void set_inference_mode_enabled(bool on) { t_inference_mode = on; }

void check_inplace_not_inference(const TensorImpl& t) {
  STRATA_CHECK(!t.is_inference() || t_inference_mode,
               "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get "
               "a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more "
               "details.");
}
void check_saveable_not_inference(const TensorImpl& t) {
  STRATA_CHECK(!t.is_inference() || t_inference_mode,
               "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode "
               "in computation tracked by autograd. To work around this, you can make a clone to get a normal "
               "tensor and use it in autograd, or use `strata.no_grad()` instead of `strata.inference_mode()`.");
}

namespace {
std::atomic<IndexedAllocateFn> g_indexed_allocate[kNumDeviceTypes] = {};
}  // namespace

void set_indexed_allocate(DeviceType t, IndexedAllocateFn fn) { g_indexed_allocate[static_cast<int>(t)].store(fn); }

namespace {
std::atomic<DeviceReadFn> g_device_read[kNumDeviceTypes] = {};
}  // namespace

void set_device_read(DeviceType t, DeviceReadFn fn) { g_device_read[static_cast<int>(t)].store(fn); }

STRATA_HOT intrusive_ptr<StorageImpl> make_storage(size_t nbytes, Device device) {
  if (device.type == DeviceType::CUDA) [[unlikely]] {
    IndexedAllocateFn fn = g_indexed_allocate[static_cast<int>(device.type)].load(std::memory_order_acquire);
    if (fn) {
      DataPtr p = fn(nbytes, &device);
      return make_intrusive<StorageImpl>(std::move(p), nbytes, device);
    }
  }
  return make_intrusive<StorageImpl>(get_allocator(device.type)->allocate(nbytes), nbytes, device);
}

TensorImpl::TensorImpl(intrusive_ptr<StorageImpl> storage, int64_t offset, IntArrayRef sizes, IntArrayRef strides,
                       ScalarType dtype)
    : storage_(std::move(storage)), offset_(offset), dtype_(dtype), inference_(t_inference_mode) {
  STRATA_CHECK(sizes.size() == strides.size(), "TensorImpl: ", sizes.size(), " sizes but ", strides.size(),
               " strides");
  keys_ = DispatchKeySet(backend_key_for(storage_->device().type));
  assign_dims(sizes, &strides);
  refresh();
}

STRATA_HOT TensorImpl::TensorImpl(intrusive_ptr<StorageImpl> storage, int64_t offset, IntArrayRef sizes,
                                  ScalarType dtype)
    : storage_(std::move(storage)), offset_(offset), dtype_(dtype), inference_(t_inference_mode) {
  keys_ = DispatchKeySet(backend_key_for(storage_->device().type));
  assign_dims(sizes, nullptr);
  refresh();
}

STRATA_HOT TensorImpl::~TensorImpl() = default;

STRATA_HOT void TensorImpl::assign_dims(IntArrayRef sizes, const IntArrayRef* strides) {
  const int64_t n = static_cast<int64_t>(sizes.size());
  // Build the new buffer before touching the old one: the arguments may view it.
  int64_t tmp[2 * kInlineDims];
  std::unique_ptr<int64_t[]> heap;
  int64_t* buf = tmp;
  if (n > kInlineDims) {
    heap.reset(new int64_t[static_cast<size_t>(2 * n)]);
    buf = heap.get();
  }
  std::copy(sizes.begin(), sizes.end(), buf);
  if (strides) {
    std::copy(strides->begin(), strides->end(), buf + n);
  } else {
    contiguous_strides_checked(IntArrayRef(buf, static_cast<size_t>(n)), buf + n);
  }
  if (heap) {
    dims_heap_ = std::move(heap);
    dims_ = dims_heap_.get();
  } else {
    std::copy(tmp, tmp + 2 * n, dims_inline_);
    dims_ = dims_inline_;
    dims_heap_.reset();
  }
  ndim_ = n;
}

STRATA_HOT void TensorImpl::refresh() {
  // A view may have more elements than int64 counts (expand(2**62, 4) of one element is only strides): such a
  // geometry is refused here, for every op that builds one (the product used to wrap around, found by
  // fuzz/fuzz_geometry). A zero size makes any product 0.
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes()) overflow |= __builtin_mul_overflow(n, s, &n);
  if (__builtin_expect(overflow, 0)) {
    const bool empty = std::find(sizes().begin(), sizes().end(), int64_t(0)) != sizes().end();
    STRATA_CHECK(empty, "numel: integer multiplication overflow: a tensor of sizes ", shape_str(sizes()),
                 " has more than 2**63 - 1 elements");
    n = 0;
  }
  numel_ = n;
  contiguous_ = is_contiguous_geometry(sizes(), strides());
}

void TensorImpl::set_geometry(IntArrayRef sizes, IntArrayRef strides, int64_t offset) {
  STRATA_CHECK(sizes.size() == strides.size(), "set_geometry: ", sizes.size(), " sizes but ", strides.size(),
               " strides");
  assign_dims(sizes, &strides);
  offset_ = offset;
  refresh();
}

// Only reached for an out-of-range d (or any d of a 0-d tensor, which has no
// dims to index): raises the error wrap_dim words, as torch does.
int64_t Tensor::size_checked(int64_t d) const {
  STRATA_CHECK_INDEX(dim() > 0, "size: dimension specified as ", d, " but tensor has no dimensions");
  return sizes()[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride_checked(int64_t d) const {
  STRATA_CHECK_INDEX(dim() > 0, "stride: dimension specified as ", d, " but tensor has no dimensions");
  return strides()[wrap_dim(d, dim(), "stride")];
}

std::string Tensor::shape_str() const { return strata::shape_str(sizes()); }

std::string Tensor::describe() const {
  return str(dtype_name(dtype()), " tensor of shape ", shape_str(), " on ", device().str());
}

Scalar Tensor::item() const {
  // A batched tensor's data is its batch entry 0 (src/vmap/vmap.h): its value differs per entry.
  STRATA_CHECK(!key_set().has(DispatchKey::Vmap), "vmap: item() on a batched tensor is not supported: inside "
               "vmap its value differs per batch entry (data-dependent control flow); use tensor ops instead");
  STRATA_CHECK(numel() == 1, "item(): a Tensor with ", numel(), " elements cannot be converted to Scalar");
  if (!device().is_cpu()) {
    // A device with a registered reader (CUDA) copies the element to the host and waits, as torch's item() does.
    DeviceReadFn read = device().is_meta() ? nullptr : g_device_read[static_cast<int>(device().type)].load();
    STRATA_CHECK(read != nullptr, "item(): the tensor is on ", device().str(),
                 "; copy it to the cpu first (tensor.cpu())");
    alignas(16) unsigned char buf[16];
    STRATA_CHECK(element_size() <= sizeof(buf), "item(): unexpected element size");
    read(device(), data_ptr(), buf, element_size());
    return visit_all_dtypes_and_float8(dtype(), [&]<typename T>() -> Scalar {
      T v;
      std::memcpy(&v, buf, sizeof(T));
      return Scalar(v);
    });
  }
  return visit_all_dtypes_and_float8(dtype(), [&]<typename T>() -> Scalar { return Scalar(*data_ptr<T>()); });
}

STRATA_HOT Tensor empty_tensor(IntArrayRef sizes, ScalarType dtype, Device device) {
  STRATA_CHECK(dtype != ScalarType::Undefined, "empty: undefined dtype");
  int64_t n = checked_numel(sizes, "empty");
  size_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(n), element_size(dtype), &nbytes)) {
    throw Error(str("empty: ", shape_str(sizes), " elements of ", dtype_name(dtype), " overflow the address space"));
  }
  return Tensor(make_intrusive<TensorImpl>(make_storage(nbytes, device), 0, sizes, dtype));
}

Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides, int64_t offset) {
  auto impl = make_intrusive<TensorImpl>(base.impl()->storage(), offset, sizes, strides, base.dtype());
  impl->set_key_set(base.key_set());
  impl->set_inference(base.impl()->is_inference());
  impl->set_view_base(base.impl()->view_base() ? base.impl()->view_base() : base.impl_ptr());
  return Tensor(std::move(impl));
}

Tensor scalar_to_tensor(const Scalar& s, ScalarType dtype, Device device, bool wrapped) {
  // A wrapped number for a Meta computation lives on the CPU, as the Python
  // binding's do: it keeps its value, which a graph recorded on Meta (the
  // compiler's) must replay, and Meta kernels take CPU wrapped numbers.
  if (wrapped && device.is_meta()) device = Device();
  // The same on a GPU: a wrapped number is a CPU scalar that any device's kernels take (the CUDA stubs copy it to
  // the device in stream order); an empty device tensor here would have left the value unset.
  if (wrapped && device.type == DeviceType::CUDA) device = Device();
  Tensor t = empty_tensor({}, dtype, device);
  // Only a CPU tensor gets the value here: on another device (CUDA, PrivateUse1) the 0-d tensor is left
  // uninitialized, so ops that need a device scalar make it with full() instead.
  if (device.is_cpu()) {
    visit_all_dtypes_and_float8(dtype, [&]<typename T>() { *t.data_ptr<T>() = s.to<T>(); });
  }
  t.impl()->set_wrapped_number(wrapped);
  return t;
}

std::string Scalar::repr() const {
  switch (kind_) {
    case Kind::Bool: return v_.i ? "True" : "False";
    case Kind::Int: return std::to_string(v_.i);
    case Kind::Complex: {
      std::ostringstream ss;
      ss << "(" << v_.c.re << (v_.c.im < 0 || std::signbit(v_.c.im) ? "" : "+") << v_.c.im << "j)";
      return ss.str();
    }
    default: {
      std::ostringstream ss;
      ss << v_.d;
      return ss.str();
    }
  }
}

}  // namespace strata
