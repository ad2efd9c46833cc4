// Allocation for device types with several devices (CUDA): make_storage hands such a backend the whole Device, so
// that it allocates on the device named (not only the current one) and records the index it used for "cuda".
// Kept apart from allocator.h so that the backend plugs in without touching the core's allocator interface.
#pragma once

#include <cstddef>

#include "core/allocator.h"

namespace strata {

// Allocates nbytes on *device, replacing an index of -1 by the device actually used.
using IndexedAllocateFn = DataPtr (*)(size_t nbytes, Device* device);
// Installs fn for device type t (CUDA); make_storage uses it instead of get_allocator(t)->allocate.
void set_indexed_allocate(DeviceType t, IndexedAllocateFn fn);

// Copies nbytes from device memory at src (on `device`) into host memory dst and waits for it: what Tensor::item()
// uses for a tensor on a device of type t (CUDA), so that the core reads a device scalar without calling an op.
using DeviceReadFn = void (*)(Device device, const void* src, void* dst, size_t nbytes);
void set_device_read(DeviceType t, DeviceReadFn fn);

}  // namespace strata
