#pragma once

#include <cstdint>
#include <string>

namespace strata {

// Backends a tensor can live on. PrivateUse1 is for backends registered from
// outside the library (see tests/cpp/out_of_tree).
// MPS (Apple's Metal) parses, as in torch, but this build has no MPS backend:
// allocating on it raises.
enum class DeviceType : int8_t { CPU = 0, CUDA = 1, Meta = 2, PrivateUse1 = 3, MPS = 4 };
constexpr int kNumDeviceTypes = 5;

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = -1;  // -1: "the current device" of that type

  constexpr Device() = default;
  constexpr Device(DeviceType t, int8_t i = -1) : type(t), index(i) {}
  // Parses "cpu", "cuda", "cuda:1", "meta", "mps", or the registered PrivateUse1 name.
  explicit Device(const std::string& spec);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_meta() const { return type == DeviceType::Meta; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
};

std::string device_type_name(DeviceType t);
// Renames PrivateUse1 (e.g. to "npu") so that Device("npu") parses.
void rename_privateuse1_backend(const std::string& name);

}  // namespace strata
