// An extension library built outside libstrata, as a third party would write
// one. Loading it (dlopen, or strata.ops.load_library from Python) runs its
// static initialisers, which
//   (a) define a custom op myext::scaled_add(a, b, alpha) = a + alpha * b with
//       CPU and Meta kernels, and
//   (b) register an out-of-tree backend on DispatchKey::PrivateUse1, named
//       "npu": its own allocator (host memory underneath, but a separate device
//       type), the cross-device copy hook, and PrivateUse1 kernels for
//       _to_copy, copy_, add and myext::scaled_add.
// Every other op called with npu tensors fails with the dispatcher's
// NotImplementedError, which is what the tests check.
//
// It also defines myext::counters(), which returns how often the npu pieces
// ran, so tests can tell that the npu kernels (and not CPU ones) did the work.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/allocator.h"
#include "core/shape.h"
#include "dispatch/dispatcher.h"
#include "ops/device_copy.h"
#include "ops/ops.h"

namespace myext {

using namespace strata;

enum Counter { kAllocs, kAllocBytes, kCopyHook, kNpuAdd, kNpuScaledAdd, kCpuScaledAdd, kNpuCopy, kNumCounters };
std::atomic<int64_t> g_counters[kNumCounters];

const Device kNpu(DeviceType::PrivateUse1, 0);

// ---- allocator ------------------------------------------------------------
// Host memory with a tag in front of each block, so that a stray free of a CPU
// pointer (or of npu memory by the CPU allocator) would be caught in a debug
// run; the tag is checked on free.
constexpr uint64_t kTag = 0x6e70752d6d656d31ull;  // "npu-mem1"
constexpr size_t kHeader = 64;

void npu_free(void* p) {
  char* base = static_cast<char*>(p) - kHeader;
  if (*reinterpret_cast<uint64_t*>(base) != kTag) std::abort();
  *reinterpret_cast<uint64_t*>(base) = 0;
  std::free(base);
}

class NpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return DataPtr();
    STRATA_CHECK_T(OutOfMemoryError, nbytes < (size_t(1) << 40), "npu out of memory: tried to allocate ", nbytes,
                   " bytes");
    void* base = std::aligned_alloc(kHeader, (nbytes + 2 * kHeader - 1) / kHeader * kHeader);
    STRATA_CHECK_T(OutOfMemoryError, base, "npu out of memory: tried to allocate ", nbytes, " bytes");
    *static_cast<uint64_t*>(base) = kTag;
    g_counters[kAllocs]++;
    g_counters[kAllocBytes] += static_cast<int64_t>(nbytes);
    void* p = static_cast<char*>(base) + kHeader;
    return DataPtr(p, p, &npu_free);
  }
};
NpuAllocator g_allocator;

// ---- host views -----------------------------------------------------------
// Because npu memory is host memory, an npu tensor can be looked at as a CPU
// tensor over the same bytes; the CPU kernels then do the arithmetic. The view
// keeps the npu storage alive.
void release_storage(void* ctx) { delete static_cast<intrusive_ptr<StorageImpl>*>(ctx); }

Tensor host_view(const Tensor& t) {
  if (t.device().type != DeviceType::PrivateUse1) return t;
  const auto& st = t.impl()->storage();
  auto* keep = new intrusive_ptr<StorageImpl>(st);
  auto cpu_storage = make_intrusive<StorageImpl>(DataPtr(st->data(), keep, &release_storage), st->nbytes(), Device());
  DimVector sizes(t.sizes().begin(), t.sizes().end()), strides(t.strides().begin(), t.strides().end());
  return Tensor(make_intrusive<TensorImpl>(cpu_storage, t.storage_offset(), sizes, strides, t.dtype()));
}

// Copies a CPU result into fresh npu memory.
Tensor to_npu(const Tensor& cpu) {
  Tensor out = empty_tensor(cpu.sizes(), cpu.dtype(), kNpu);
  copy_(host_view(out), cpu, false);
  return out;
}

// npu tensors may only be combined with npu tensors and CPU scalars (0-d).
void check_devices(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) {
    if (!t->defined() || t->device().type == DeviceType::PrivateUse1) continue;
    STRATA_CHECK(t->device().is_cpu() && t->dim() == 0, op,
                 ": Expected all tensors to be on the same device, but found at least two devices, npu:0 and ",
                 t->device().str(), "!");
  }
}

// ---- the cross-device copy hook -------------------------------------------
void cross_device_copy(const Tensor& dst, const Tensor& src) {
  auto ok = [](const Tensor& t) { return t.device().is_cpu() || t.device().type == DeviceType::PrivateUse1; };
  STRATA_CHECK(ok(dst) && ok(src), "copy_: the npu backend cannot copy from ", src.device().str(), " to ",
               dst.device().str());
  g_counters[kCopyHook]++;
  copy_(host_view(dst), host_view(src), false);
}

// ---- PrivateUse1 kernels --------------------------------------------------
Tensor npu_to_copy(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Device target = device.value_or(self.device());
  // One npu device: "npu" means npu:0, as "cuda" means the current device.
  if (target.type == DeviceType::PrivateUse1) target = kNpu;
  Tensor out = empty_tensor(self.sizes(), dtype.value_or(self.dtype()), target);
  copy_(out, self, false);
  return out;
}

// Needs the key set: copies that involve another device go to the CPU/Meta
// copy_ below this key, which calls the cross-device hook (or raises the
// meta-device errors).
OperatorEntry* g_copy_op = nullptr;
Tensor npu_copy_(DispatchKeySet ks, const Tensor& self, const Tensor& src, bool non_blocking) {
  bool local = self.device().type == src.device().type ||
               (src.device().is_cpu() && src.dim() == 0 && self.device().type == DeviceType::PrivateUse1);
  if (!local) {
    return redispatch<Tensor, const Tensor&, const Tensor&, bool>(*g_copy_op, ks, DispatchKey::PrivateUse1, self,
                                                                  src, non_blocking);
  }
  g_counters[kNpuCopy]++;
  copy_(host_view(self), host_view(src), non_blocking);
  self.bump_version();
  return self;
}

Tensor npu_add(const Tensor& self, const Tensor& other, const Scalar& alpha, const std::optional<Tensor>& out) {
  check_devices("add", {&self, &other});
  if (out) STRATA_CHECK(out->device().type == DeviceType::PrivateUse1, "add: out= must be an npu tensor");
  g_counters[kNpuAdd]++;
  Tensor r = add(host_view(self), host_view(other), alpha);
  if (!out) return to_npu(r);
  STRATA_CHECK(std::equal(out->sizes().begin(), out->sizes().end(), r.sizes().begin(), r.sizes().end()),
               "add: the npu backend cannot resize out= (shape ", out->shape_str(), ", result ", r.shape_str(), ")");
  copy_(host_view(*out), r, false);
  out->bump_version();
  return *out;
}

// The custom op. CPU: in terms of existing ops. npu: a hand-written loop for
// the float32 contiguous case (what a device kernel would be), host ops otherwise.
Tensor cpu_scaled_add(const Tensor& a, const Tensor& b, double alpha) {
  g_counters[kCpuScaledAdd]++;
  return add(a, b, Scalar(alpha));
}

Tensor meta_scaled_add(const Tensor& a, const Tensor& b, double alpha) {
  STRATA_CHECK(a.device() == b.device() || b.dim() == 0, "myext::scaled_add: tensors on different devices");
  DimVector shape = broadcast_shapes(a.sizes(), b.sizes(), "myext::scaled_add");
  return empty_tensor(shape, promote_types(a.dtype(), b.dtype()), a.device());
}

Tensor npu_scaled_add(const Tensor& a, const Tensor& b, double alpha) {
  check_devices("myext::scaled_add", {&a, &b});
  g_counters[kNpuScaledAdd]++;
  bool fast = a.device().type == b.device().type && a.dtype() == ScalarType::Float32 && b.dtype() == ScalarType::Float32 &&
              a.is_contiguous() && b.is_contiguous() &&
              std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin(), b.sizes().end());
  if (!fast) return to_npu(add(host_view(a), host_view(b), Scalar(alpha)));
  Tensor out = empty_tensor(a.sizes(), ScalarType::Float32, kNpu);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const float al = static_cast<float>(alpha);
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + al * pb[i];
  return out;
}

Tensor counters() {
  Tensor t = empty_tensor(std::vector<int64_t>{kNumCounters}, ScalarType::Int64, Device());
  for (int i = 0; i < kNumCounters; ++i) t.data_ptr<int64_t>()[i] = g_counters[i].load();
  return t;
}

// ---- registration (static initialisers, in this order) ----------------------
const bool g_backend_registered = [] {
  rename_privateuse1_backend("npu");
  set_allocator(DeviceType::PrivateUse1, &g_allocator);
  set_cross_device_copy(&cross_device_copy);
  Dispatcher& d = Dispatcher::get();
  d.def("myext::scaled_add(Tensor a, Tensor b, float alpha=1.0) -> Tensor");
  d.def("myext::counters() -> Tensor");
  g_copy_op = d.find("copy_");
  STRATA_CHECK(g_copy_op, "myext: copy_ is not defined");
  d.register_kernel(*g_copy_op, DispatchKey::PrivateUse1, make_kernel_with_keys<&npu_copy_>("npu_copy_"));
  return true;
}();

}  // namespace myext

// By name, as any library outside Strata registers kernels (the signature is
// checked against the schema when the library loads).
STRATA_LIBRARY_IMPL("myext::scaled_add", CPU, myext::cpu_scaled_add);
STRATA_LIBRARY_IMPL("myext::scaled_add", Meta, myext::meta_scaled_add);
STRATA_LIBRARY_IMPL("myext::scaled_add", PrivateUse1, myext::npu_scaled_add);
STRATA_LIBRARY_IMPL("myext::counters", CompositeImplicit, myext::counters);
STRATA_LIBRARY_IMPL("_to_copy", PrivateUse1, myext::npu_to_copy);
STRATA_LIBRARY_IMPL("add", PrivateUse1, myext::npu_add);
