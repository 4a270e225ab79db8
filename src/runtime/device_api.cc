// device_api.h and the C ABI's device entry points (kiln_device_launch, the workspace): the
// CPU handled here, every other device type by its backend (device_backend.h).
#include "kiln/runtime/device_api.h"

#include <cstring>

#include "device_backend.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/support/error.h"

namespace kiln::runtime {

DeviceBackend* device_backend(int32_t device_type) {
  switch (device_type) {
    case kKilnCUDA:
      return &cuda_backend();
    case kKilnOpenCL:
      return &opencl_backend();
    default:
      return nullptr;
  }
}

namespace {

/// The "no CUDA device" / "no OpenCL device" prefix of a device's errors.
std::string no_device(Device dev) {
  return dev.type == kKilnCUDA ? "no CUDA device: " : "no OpenCL device: ";
}

/// The backend of `dev`, usable: throws "no <kind> device: why" otherwise.
DeviceBackend& usable(Device dev, const char* what) {
  DeviceBackend* b = device_backend(dev.type);
  KILN_USER_CHECK(b != nullptr) << what << ": unsupported device " << dev.str()
                                << " (this runtime supports cpu, cuda and opencl)";
  std::string why = b->unavailable(dev.id);
  KILN_USER_CHECK(why.empty()) << no_device(dev) << why;
  return *b;
}

}  // namespace

bool device_available(Device dev, std::string* why) {
  std::string reason;
  if (dev.type != kKilnCPU) {
    DeviceBackend* b = device_backend(dev.type);
    reason = b ? b->unavailable(dev.id)
               : "device " + dev.str() + " is not supported by this runtime (cpu, cuda and " +
                     "opencl are)";
  }
  if (why) *why = reason;
  return reason.empty();
}

std::string device_name(Device dev) {
  if (dev.type == kKilnCPU) return "cpu";
  return usable(dev, "device_name").name(dev.id);
}

void* device_alloc(Device dev, size_t nbytes) {
  KILN_USER_CHECK(dev.type != kKilnCPU)
      << "device_alloc: cpu memory comes from NDArray::empty, not device_alloc";
  return usable(dev, "device_alloc").alloc(dev.id, nbytes);
}

void device_free(Device dev, void* ptr) noexcept {
  DeviceBackend* b = device_backend(dev.type);
  if (ptr != nullptr && b != nullptr) b->free(dev.id, ptr);
}

void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_dev.type == kKilnCPU && src_dev.type == kKilnCPU) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  KILN_USER_CHECK(dst_dev.type == kKilnCPU || src_dev.type == kKilnCPU || dst_dev == src_dev)
      << "device_copy: cannot copy from " << src_dev.str() << " to " << dst_dev.str()
      << " (copies between two devices go through the cpu)";
  const Device dev = dst_dev.type == kKilnCPU ? src_dev : dst_dev;
  usable(dev, "device_copy")
      .copy(dev.id, dst, dst_dev.type != kKilnCPU, src, src_dev.type != kKilnCPU, nbytes);
}

void device_synchronize(Device dev) {
  if (dev.type == kKilnCPU) return;
  usable(dev, "device_synchronize").synchronize(dev.id);
}

}  // namespace kiln::runtime

extern "C" KILN_DLL int32_t kiln_device_launch(int32_t device_type, void** module_cache,
                                               const char* code, const char* kernel,
                                               const int64_t* dims, int32_t shared_bytes,
                                               void** args, const int32_t* arg_sizes,
                                               int32_t num_args) {
  using namespace kiln::runtime;  // NOLINT
  try {
    usable(Device{device_type, 0}, "kiln_device_launch")
        .launch(module_cache, code, kernel, dims, shared_bytes, args, arg_sizes, num_args);
    return 0;
  } catch (const std::exception& e) {
    kiln_set_last_error(e.what());
    return -1;
  }
}

extern "C" KILN_DLL void* kiln_device_workspace_alloc(int32_t device_type, uint64_t nbytes) {
  try {
    return kiln::runtime::device_alloc(kiln::runtime::Device{device_type, 0}, nbytes);
  } catch (const std::exception& e) {
    kiln_set_last_error(e.what());
    return nullptr;
  }
}

extern "C" KILN_DLL void kiln_device_workspace_free(int32_t device_type, void* ptr) {
  kiln::runtime::device_free(kiln::runtime::Device{device_type, 0}, ptr);
}
