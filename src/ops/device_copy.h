// The hook through which copy_ moves data between two different devices
// (defined in ops/copy.cpp). A backend that lives outside the library (CUDA,
// or an out-of-tree PrivateUse1 backend, see tests/cpp/out_of_tree) installs
// it so that tensor.to(device) and tensor.cpu() work without copy_ knowing the
// device. There is one hook per process: the last backend to install it wins.
#pragma once

#include "core/tensor.h"

namespace strata {

// Called by the CPU/Meta copy_ kernel when dst and src are on different
// devices (and src is not a CPU scalar); must copy src into dst, converting
// the dtype and honouring both tensors' strides.
using CrossDeviceCopyFn = void (*)(const Tensor& dst, const Tensor& src);
void set_cross_device_copy(CrossDeviceCopyFn fn);

}  // namespace strata
