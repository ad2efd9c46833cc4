// Note [Tensor = storage + view]
// A tensor is (storage, offset, sizes, strides, dtype, device). Offsets and
// strides count elements, not bytes. Views share the storage and with it the
// version counter, which every in-place or out= write bumps; autograd compares
// it against the version saved at record time.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/intrusive_ptr.h"
#include "core/scalar.h"
#include "dispatch/dispatch_key.h"

namespace strata {

using IntArrayRef = std::span<const int64_t>;
using DimVector = std::vector<int64_t>;

class StorageImpl : public RefCounted {
 public:
  StorageImpl(DataPtr data, size_t nbytes, Device device)
      : data_(std::move(data)), nbytes_(nbytes), device_(device) {}
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }
  // Exchanges this storage's memory with d (same byte count; share_memory_
  // moves a storage into shared memory this way: every view reads its data
  // through the storage, so all of them follow).
  void swap_data(DataPtr& d) { std::swap(data_, d); }

 private:
  DataPtr data_;
  size_t nbytes_;
  Device device_;
  std::atomic<uint32_t> version_{0};
};

// Allocates storage for nbytes on device (Meta: no memory).
intrusive_ptr<StorageImpl> make_storage(size_t nbytes, Device device);

struct AutogradMeta;  // defined by the autograd layer

class TensorImpl : public RefCounted {
 public:
  TensorImpl(intrusive_ptr<StorageImpl> storage, int64_t offset, IntArrayRef sizes, IntArrayRef strides,
             ScalarType dtype);
  // Contiguous geometry: the strides follow from sizes.
  TensorImpl(intrusive_ptr<StorageImpl> storage, int64_t offset, IntArrayRef sizes, ScalarType dtype);
  ~TensorImpl() override;

  IntArrayRef sizes() const { return IntArrayRef(dims_, static_cast<size_t>(ndim_)); }
  IntArrayRef strides() const { return IntArrayRef(dims_ + ndim_, static_cast<size_t>(ndim_)); }
  int64_t dim() const { return ndim_; }
  int64_t numel() const { return numel_; }
  int64_t storage_offset() const { return offset_; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  bool is_contiguous() const { return contiguous_; }
  const intrusive_ptr<StorageImpl>& storage() const { return storage_; }
  DispatchKeySet key_set() const { return keys_; }
  void set_key_set(DispatchKeySet k) { keys_ = k; }

  // Start of this view's data (storage base + offset), or null on Meta.
  void* data() const {
    char* base = static_cast<char*>(storage_->data());
    return base ? base + offset_ * static_cast<int64_t>(element_size(dtype_)) : nullptr;
  }

  // Re-points this tensor at new geometry (used by in-place view ops like
  // transpose_ and by resize of out= tensors).
  // sizes and strides may view this tensor's own geometry.
  void set_geometry(IntArrayRef sizes, IntArrayRef strides, int64_t offset);
  void set_storage(intrusive_ptr<StorageImpl> s) { storage_ = std::move(s); }
  // Only for Tensor.data = other (torch's set_data), which may change dtype.
  void set_dtype(ScalarType t) { dtype_ = t; }

  // A Python number turned into a 0-d tensor: it takes part in type promotion
  // only by category (see result_type).
  bool is_wrapped_number() const { return wrapped_number_; }
  void set_wrapped_number(bool w) { wrapped_number_ = w; }

  AutogradMeta* autograd_meta() const { return autograd_meta_.get(); }
  void set_autograd_meta(std::shared_ptr<AutogradMeta> m) { autograd_meta_ = std::move(m); }
  const std::shared_ptr<AutogradMeta>& autograd_meta_ptr() const { return autograd_meta_; }

  // The tensor this one is a view of (the root of a chain of views), set by
  // make_view. Autograd uses it when an in-place write through a view of a
  // tensor without history brings a gradient in (y = zeros(..); y[0] = x).
  const intrusive_ptr<TensorImpl>& view_base() const { return view_base_; }
  void set_view_base(intrusive_ptr<TensorImpl> b) { view_base_ = std::move(b); }

  // Note [Inference tensors]
  // A tensor created while inference mode is on (set_inference_mode_enabled)
  // is an inference tensor, as are views of one (make_view copies the flag);
  // a view of a normal tensor stays normal even inside inference mode. Outside
  // inference mode an inference tensor may not be updated in place, get
  // requires_grad, or be saved for backward (torch's rules).
  bool is_inference() const { return inference_; }
  void set_inference(bool v) { inference_ = v; }

  // Slot for the Python wrapper object, so that a tensor keeps its identity.
  void* pyobj = nullptr;

 private:
  void refresh();
  // Copies sizes and strides (contiguous strides when `strides` is null).
  void assign_dims(IntArrayRef sizes, const IntArrayRef* strides);

  // Note [TensorImpl geometry storage]
  // Sizes and then strides, ndim_ each, in one buffer that is inside the
  // object up to kInlineDims dims: creating a tensor of a common rank costs no
  // allocation for its geometry (two vectors used to be about a fifth of the
  // C++ time of `a + b` on 4 floats).
  static constexpr int kInlineDims = 5;
  intrusive_ptr<StorageImpl> storage_;
  int64_t offset_;
  int64_t* dims_ = dims_inline_;
  int64_t ndim_ = 0;
  int64_t dims_inline_[2 * kInlineDims];
  std::unique_ptr<int64_t[]> dims_heap_;
  int64_t numel_ = 1;
  ScalarType dtype_;
  bool contiguous_ = true;
  bool wrapped_number_ = false;
  bool inference_;
  DispatchKeySet keys_;
  std::shared_ptr<AutogradMeta> autograd_meta_;
  intrusive_ptr<TensorImpl> view_base_;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(intrusive_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return static_cast<bool>(impl_); }
  TensorImpl* impl() const { return impl_.get(); }
  const intrusive_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  IntArrayRef sizes() const { return impl_->sizes(); }
  IntArrayRef strides() const { return impl_->strides(); }
  // d may be negative (from the end). Inline for valid d: describe_gemm and
  // friends call these a dozen times per op (~450 instructions of 1x64 @ 64x64
  // went to the out-of-line wrap_dim); anything else takes the checked path.
  int64_t size(int64_t d) const {
    const int64_t n = impl_->dim(), w = d < 0 ? d + n : d;
    if (static_cast<uint64_t>(w) < static_cast<uint64_t>(n)) [[likely]] return impl_->sizes()[w];
    return size_checked(d);
  }
  int64_t stride(int64_t d) const {
    const int64_t n = impl_->dim(), w = d < 0 ? d + n : d;
    if (static_cast<uint64_t>(w) < static_cast<uint64_t>(n)) [[likely]] return impl_->strides()[w];
    return stride_checked(d);
  }
  int64_t dim() const { return impl_->dim(); }
  int64_t numel() const { return impl_->numel(); }
  int64_t storage_offset() const { return impl_->storage_offset(); }
  ScalarType dtype() const { return impl_->dtype(); }
  Device device() const { return impl_->device(); }
  bool is_contiguous() const { return impl_->is_contiguous(); }
  size_t element_size() const { return strata::element_size(dtype()); }
  DispatchKeySet key_set() const { return impl_->key_set(); }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  void* data_ptr() const { return impl_->data(); }
  template <typename T>
  T* data_ptr() const {
    return static_cast<T*>(impl_->data());
  }
  uint32_t version() const { return impl_->storage()->version(); }
  void bump_version() const { impl_->storage()->bump_version(); }

  // Reads a one-element tensor (any shape with numel()==1).
  Scalar item() const;
  std::string shape_str() const;
  // "float32 tensor of shape [2, 3] on cpu"
  std::string describe() const;

 private:
  int64_t size_checked(int64_t d) const;
  int64_t stride_checked(int64_t d) const;
  intrusive_ptr<TensorImpl> impl_;
};

// Thread-local inference mode (strata.inference_mode): tensors created while it
// is on are inference tensors (Note [Inference tensors]).
bool inference_mode_enabled();
void set_inference_mode_enabled(bool on);
// Raises torch's errors for an inference tensor outside inference mode: an
// in-place update (check_inplace_not_inference) and saving it for backward.
void check_inplace_not_inference(const TensorImpl& t);
void check_saveable_not_inference(const TensorImpl& t);

// Allocates an uninitialised contiguous tensor (checks sizes for negatives and
// overflow first).
Tensor empty_tensor(IntArrayRef sizes, ScalarType dtype, Device device);
// A tensor over an existing storage with the given geometry (no checks beyond
// bounds; callers validated already).
Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides, int64_t offset);
// A 0-d tensor holding s, marked as a wrapped number when `wrapped`.
Tensor scalar_to_tensor(const Scalar& s, ScalarType dtype, Device device = Device(), bool wrapped = false);

}  // namespace strata
