// The interface every non-CPU device of the runtime implements (device_api.h dispatches to it
// by device type): CUDA through the driver API (cuda_device_api.cc), OpenCL through the ICD
// loader (opencl_device_api.cc). Both are loaded with dlopen at run time, never linked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::runtime {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  /// "" when device `id` can be used, else why not ("no CUDA device: ..." style reason, without
  /// the prefix).
  virtual std::string unavailable(int id) = 0;
  virtual std::string name(int id) = 0;
  /// At least one byte; throws kiln::Error.
  virtual void* alloc(int id, size_t nbytes) = 0;
  virtual void free(int id, void* ptr) noexcept = 0;
  /// dst_on_device / src_on_device: whether that side is this backend's memory on device `id`
  /// (the other side is host memory). Waits for the kernels launched before it.
  virtual void copy(int id, void* dst, bool dst_on_device, const void* src, bool src_on_device,
                    size_t nbytes) = 0;
  virtual void synchronize(int id) = 0;
  /// Launches `kernel` of the device code `code` (kiln_device_launch, c_runtime_api.h).
  virtual void launch(void** module_cache, const char* code, const char* kernel,
                      const int64_t dims[6], int32_t shared_bytes, void** args,
                      const int32_t* arg_sizes, int32_t num_args) = 0;
};

/// The backend of `device_type` (kKilnCUDA, kKilnOpenCL); null for the CPU and unknown types.
DeviceBackend* device_backend(int32_t device_type);
DeviceBackend& cuda_backend();
DeviceBackend& opencl_backend();

}  // namespace kiln::runtime
