#include "core/device.h"

#include <mutex>

#include "core/error.h"

namespace strata {

namespace {
std::string& privateuse1_name() {
  static std::string name = "privateuseone";
  return name;
}
}  // namespace

void rename_privateuse1_backend(const std::string& name) { privateuse1_name() = name; }

std::string device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Meta: return "meta";
    case DeviceType::PrivateUse1: return privateuse1_name();
    case DeviceType::MPS: return "mps";
  }
  return "unknown";
}

Device::Device(const std::string& spec) {
  std::string kind = spec;
  int idx = -1;
  if (auto colon = spec.find(':'); colon != std::string::npos) {
    kind = spec.substr(0, colon);
    std::string num = spec.substr(colon + 1);
    STRATA_CHECK(!num.empty() && num.find_first_not_of("0123456789") == std::string::npos && num.size() < 4,
                 "Invalid device string: '", spec, "'");
    idx = std::stoi(num);
  }
  if (kind == "cpu") {
    type = DeviceType::CPU;
  } else if (kind == "cuda") {
    type = DeviceType::CUDA;
  } else if (kind == "meta") {
    type = DeviceType::Meta;
  } else if (kind == "mps") {
    type = DeviceType::MPS;
  } else if (kind == privateuse1_name()) {
    type = DeviceType::PrivateUse1;
  } else {
    throw Error(strata::str("Expected one of cpu, cuda, meta, mps, ", privateuse1_name(),
                    " device type at start of device string: ", spec));
  }
  index = static_cast<int8_t>(idx);
}

std::string Device::str() const {
  std::string s = device_type_name(type);
  if (index >= 0) s += ":" + std::to_string(index);
  return s;
}

}  // namespace strata
