// Loads the out-of-tree example library (ext_example.cpp) with dlopen and
// uses its custom op and its "npu" backend through the ordinary C++ API.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "dispatch/dispatcher.h"
#include "ops/ops.h"

using namespace strata;

namespace {

void load_ext() {
  static void* handle = [] {
    void* h = dlopen(STRATA_EXT_EXAMPLE_PATH, RTLD_NOW | RTLD_GLOBAL);
    EXPECT_NE(h, nullptr) << dlerror();
    return h;
  }();
  ASSERT_NE(handle, nullptr);
}

Tensor cpu_vec(std::vector<float> v) {
  Tensor t = empty_tensor(std::vector<int64_t>{static_cast<int64_t>(v.size())}, ScalarType::Float32, Device());
  std::copy(v.begin(), v.end(), t.data_ptr<float>());
  return t;
}

std::vector<float> values(const Tensor& t) {
  Tensor c = contiguous(to_device(t, Device()));
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

std::vector<int64_t> counters() {
  const OperatorEntry* op = Dispatcher::get().find("myext::counters");
  Tensor t = call_op<Tensor>(*op);
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}
enum { kAllocs, kAllocBytes, kCopyHook, kNpuAdd, kNpuScaledAdd, kCpuScaledAdd, kNpuCopy };

}  // namespace

TEST(OutOfTree, LoadRegistersOpsAndBackend) {
  load_ext();
  Dispatcher& d = Dispatcher::get();
  const OperatorEntry* op = d.find("myext::scaled_add");
  ASSERT_NE(op, nullptr);
  EXPECT_GE(op->id(), static_cast<int>(OpId::NumBuiltinOps));  // got the next free id
  EXPECT_TRUE(op->has_registered(DispatchKey::CPU));
  EXPECT_TRUE(op->has_registered(DispatchKey::Meta));
  EXPECT_TRUE(op->has_registered(DispatchKey::PrivateUse1));
  EXPECT_TRUE(d.find("add")->has_registered(DispatchKey::PrivateUse1));
  EXPECT_FALSE(d.find("exp")->has_registered(DispatchKey::PrivateUse1));
  EXPECT_EQ(device_type_name(DeviceType::PrivateUse1), "npu");
  EXPECT_EQ(Device("npu:0").type, DeviceType::PrivateUse1);
  EXPECT_NE(get_allocator(DeviceType::PrivateUse1), get_allocator(DeviceType::CPU));
}

TEST(OutOfTree, CopiesAndKernelsOnNpu) {
  load_ext();
  auto before = counters();
  Tensor a = cpu_vec({1, 2, 3}), b = cpu_vec({10, 20, 30});
  Tensor an = to_device(a, Device("npu")), bn = to_device(b, Device("npu"));
  EXPECT_EQ(an.device().type, DeviceType::PrivateUse1);
  EXPECT_TRUE(an.key_set().has(DispatchKey::PrivateUse1));
  EXPECT_NE(an.data_ptr(), a.data_ptr());
  auto after_copy = counters();
  EXPECT_EQ(after_copy[kAllocs] - before[kAllocs], 2);
  EXPECT_GE(after_copy[kCopyHook] - before[kCopyHook], 2);  // cpu -> npu went through the hook

  Tensor s = add(an, bn, Scalar(int64_t(2)));
  EXPECT_EQ(s.device().type, DeviceType::PrivateUse1);
  EXPECT_EQ(values(s), (std::vector<float>{21, 42, 63}));

  const OperatorEntry* op = Dispatcher::get().find("myext::scaled_add");
  Tensor r = call_op<Tensor, const Tensor&, const Tensor&, double>(*op, an, bn, 0.5);
  EXPECT_EQ(r.device().type, DeviceType::PrivateUse1);
  EXPECT_EQ(values(r), (std::vector<float>{6, 12, 18}));
  Tensor rc = call_op<Tensor, const Tensor&, const Tensor&, double>(*op, a, b, 0.5);
  EXPECT_TRUE(rc.device().is_cpu());
  EXPECT_EQ(values(rc), (std::vector<float>{6, 12, 18}));
  Tensor rm = call_op<Tensor, const Tensor&, const Tensor&, double>(
      *op, empty_tensor(std::vector<int64_t>{4, 1}, ScalarType::Float32, Device(DeviceType::Meta)),
      empty_tensor(std::vector<int64_t>{3}, ScalarType::Float32, Device(DeviceType::Meta)), 1.0);
  EXPECT_TRUE(rm.device().is_meta());
  EXPECT_EQ(rm.numel(), 12);
  // Boxed, as Python calls it.
  Stack st{IValue(an), IValue(bn), IValue(2.0)};
  call_boxed(*op, st);
  EXPECT_EQ(values(st[0].to_tensor()), (std::vector<float>{21, 42, 63}));

  auto after = counters();
  EXPECT_EQ(after[kNpuAdd] - before[kNpuAdd], 1);
  EXPECT_EQ(after[kNpuScaledAdd] - before[kNpuScaledAdd], 2);
  EXPECT_EQ(after[kCpuScaledAdd] - before[kCpuScaledAdd], 1);

  // dtype conversion on the device, and npu -> npu copies.
  Tensor dn = to_dtype(an, ScalarType::Float64);
  EXPECT_EQ(dn.device().type, DeviceType::PrivateUse1);
  EXPECT_EQ(dn.dtype(), ScalarType::Float64);
  Tensor back = to_device(dn, Device());
  EXPECT_DOUBLE_EQ(back.data_ptr<double>()[2], 3.0);
  EXPECT_GT(counters()[kNpuCopy], after[kNpuCopy]);
}

TEST(OutOfTree, MissingKernelsAndDeviceMixing) {
  load_ext();
  Tensor an = to_device(cpu_vec({1, 2}), Device("npu"));
  try {
    exp(an);
    FAIL() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'exp'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("PrivateUse1"), std::string::npos) << msg;
  }
  EXPECT_THROW(add(an, cpu_vec({1, 2})), Error);
  // A CPU scalar is fine with an npu tensor.
  Tensor one = empty_tensor(std::vector<int64_t>{}, ScalarType::Float32, Device());
  fill_(one, 1.0);
  EXPECT_EQ(values(add(an, one)), (std::vector<float>{2, 3}));
  // Meta and npu do not mix.
  EXPECT_THROW(add(an, empty_tensor(std::vector<int64_t>{2}, ScalarType::Float32, Device(DeviceType::Meta))), Error);
  EXPECT_THROW(to_device(empty_tensor(std::vector<int64_t>{2}, ScalarType::Float32, Device(DeviceType::Meta)),
                         Device("npu")),
               Error);
}
