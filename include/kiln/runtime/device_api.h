/// \file device_api.h
/// \brief Memory on devices other than the CPU: allocate, free, copy, synchronize.
///
/// CUDA goes through the driver API, loaded at run time with dlopen("libcuda.so.1") (never
/// linked, never the toolkit's stub library): a machine without the driver or without a GPU
/// gets a kiln::Error that starts "no CUDA device: " and says why. Every call works on the
/// device's primary context, made current in the calling thread. OpenCL goes through the ICD
/// loader (dlopen("libOpenCL.so.1")) on the first device with shared virtual memory (device
/// memory is clSVMAlloc'd, so buffers are pointers as on CUDA); without one, errors start "no
/// OpenCL device: ". Kernels launch on one stream or queue per device (kiln_device_launch,
/// c_runtime_api.h); copies and synchronize() wait for it.
#pragma once

#include <cstddef>
#include <string>

#include "kiln/runtime/ndarray.h"

namespace kiln::runtime {

/// True when `dev` can be used: the CPU always; a CUDA device when the driver loads and has a
/// device of that index; OpenCL device 0 when a platform has a device with SVM. Otherwise false,
/// with the reason in `why` when it is not null.
bool device_available(Device dev, std::string* why = nullptr);
/// The device's name ("NVIDIA H100 80GB HBM3", "cpu").
std::string device_name(Device dev);
/// Allocates `nbytes` (at least 1) on `dev` (256-byte aligned). Throws kiln::Error.
void* device_alloc(Device dev, size_t nbytes);
/// Frees memory from device_alloc; never throws (a failure is ignored).
void device_free(Device dev, void* ptr) noexcept;
/// Copies `nbytes` from `src` on `src_dev` to `dst` on `dst_dev` (the CPU and one device, or
/// within one device), after the kernels launched before it. Throws kiln::Error naming the
/// driver's error.
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes);
/// Waits for everything launched on `dev`; a kernel's fault (CUDA) or failed run-time check
/// (OpenCL's error flag) is thrown here as a kiln::Error.
void device_synchronize(Device dev);

}  // namespace kiln::runtime
