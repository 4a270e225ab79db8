// OpenCL through the ICD loader, loaded with dlopen at run time (device_backend.h). Memory is
// coarse-grained shared virtual memory (clSVMAlloc, OpenCL 2.0): a buffer is a pointer, so the
// host code of a GPU function passes pointers (and pointers into buffers, e.g. a view of a
// concat's slice) exactly as for CUDA. The device is the first one, over all platforms, that
// supports SVM; kernels run on one in-order queue. Every kernel Kiln generates takes a last
// argument, an int flag in device memory that a failed run-time check inside the kernel sets
// (OpenCL has no trap); synchronize() reports and clears it.
//
// Debian's PoCL is built on LLVM 15 and crashes inside clBuildProgram, on a cold kernel cache,
// in a process that has libLLVM-16 loaded (Kiln's compiler). Loading PoCL first with
// RTLD_DEEPBIND keeps its LLVM symbols its own, so it is preloaded that way when it exists.
#include <dlfcn.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "device_backend.h"
#include "kiln/support/error.h"

namespace kiln::runtime {
namespace {

// The few OpenCL types, constants and entry points used, as CL/cl.h declares them.
using cl_int = int32_t;
using cl_uint = uint32_t;
using cl_bitfield = uint64_t;
using cl_platform_id = void*;
using cl_device_id = void*;
using cl_context = void*;
using cl_command_queue = void*;
using cl_program = void*;
using cl_kernel = void*;
using cl_event = void*;
constexpr cl_int kSuccess = 0;
constexpr cl_bitfield kDeviceTypeAll = 0xFFFFFFFF;
constexpr cl_uint kDeviceName = 0x102B;
constexpr cl_uint kDeviceSvmCapabilities = 0x1053;
constexpr cl_bitfield kSvmCoarseGrainBuffer = 1;
constexpr cl_bitfield kMemReadWrite = 1;
constexpr cl_uint kProgramBuildLog = 0x1183;

struct Api {
  cl_int (*clGetPlatformIDs)(cl_uint, cl_platform_id*, cl_uint*);
  cl_int (*clGetDeviceIDs)(cl_platform_id, cl_bitfield, cl_uint, cl_device_id*, cl_uint*);
  cl_int (*clGetDeviceInfo)(cl_device_id, cl_uint, size_t, void*, size_t*);
  cl_context (*clCreateContext)(const intptr_t*, cl_uint, const cl_device_id*, void*, void*,
                                cl_int*);
  cl_command_queue (*clCreateCommandQueue)(cl_context, cl_device_id, cl_bitfield, cl_int*);
  void* (*clSVMAlloc)(cl_context, cl_bitfield, size_t, cl_uint);
  cl_int (*clEnqueueSVMFree)(cl_command_queue, cl_uint, void**, void*, void*, cl_uint,
                             const cl_event*, cl_event*);
  cl_int (*clEnqueueSVMMemcpy)(cl_command_queue, cl_uint, void*, const void*, size_t, cl_uint,
                               const cl_event*, cl_event*);
  cl_int (*clFinish)(cl_command_queue);
  cl_program (*clCreateProgramWithSource)(cl_context, cl_uint, const char**, const size_t*,
                                          cl_int*);
  cl_int (*clBuildProgram)(cl_program, cl_uint, const cl_device_id*, const char*, void*, void*);
  cl_int (*clGetProgramBuildInfo)(cl_program, cl_device_id, cl_uint, size_t, void*, size_t*);
  cl_kernel (*clCreateKernel)(cl_program, const char*, cl_int*);
  cl_int (*clSetKernelArg)(cl_kernel, cl_uint, size_t, const void*);
  cl_int (*clSetKernelArgSVMPointer)(cl_kernel, cl_uint, const void*);
  cl_int (*clEnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t*,
                                   const size_t*, const size_t*, cl_uint, const cl_event*,
                                   cl_event*);

  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  int32_t* error_flag = nullptr;  // SVM: set by a kernel whose run-time check fails
  std::string device_name;
  std::mutex mu;      // OpenCL kernels' arguments are state: one launch at a time
  std::string error;  // why OpenCL cannot be used ("" when it can)
};

template <typename F>
void load_symbol(void* lib, const char* name, F* fn, std::string* error) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr && error->empty()) error->assign(std::string("libOpenCL.so.1 lacks ") + name);
}

/// The device's name and whether it has coarse-grained SVM.
bool svm_device(const Api& a, cl_device_id dev, std::string* name) {
  cl_bitfield caps = 0;
  if (a.clGetDeviceInfo(dev, kDeviceSvmCapabilities, sizeof(caps), &caps, nullptr) != kSuccess)
    return false;
  char buf[256] = {};
  a.clGetDeviceInfo(dev, kDeviceName, sizeof(buf) - 1, buf, nullptr);
  *name = buf;
  return (caps & kSvmCoarseGrainBuffer) != 0;
}

Api& api() {
  static Api* a = [] {
    auto* api = new Api{};
    std::string& err = api->error;
    dlopen("libpocl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);  // see the file comment
    void* lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      err = std::string("cannot load the OpenCL ICD loader libOpenCL.so.1 (") +
            (e ? e : "not found") + "); install ocl-icd-libopencl1 and a driver (e.g. PoCL)";
      return api;
    }
    load_symbol(lib, "clGetPlatformIDs", &api->clGetPlatformIDs, &err);
    load_symbol(lib, "clGetDeviceIDs", &api->clGetDeviceIDs, &err);
    load_symbol(lib, "clGetDeviceInfo", &api->clGetDeviceInfo, &err);
    load_symbol(lib, "clCreateContext", &api->clCreateContext, &err);
    load_symbol(lib, "clCreateCommandQueue", &api->clCreateCommandQueue, &err);
    load_symbol(lib, "clSVMAlloc", &api->clSVMAlloc, &err);
    load_symbol(lib, "clEnqueueSVMFree", &api->clEnqueueSVMFree, &err);
    load_symbol(lib, "clEnqueueSVMMemcpy", &api->clEnqueueSVMMemcpy, &err);
    load_symbol(lib, "clFinish", &api->clFinish, &err);
    load_symbol(lib, "clCreateProgramWithSource", &api->clCreateProgramWithSource, &err);
    load_symbol(lib, "clBuildProgram", &api->clBuildProgram, &err);
    load_symbol(lib, "clGetProgramBuildInfo", &api->clGetProgramBuildInfo, &err);
    load_symbol(lib, "clCreateKernel", &api->clCreateKernel, &err);
    load_symbol(lib, "clSetKernelArg", &api->clSetKernelArg, &err);
    load_symbol(lib, "clSetKernelArgSVMPointer", &api->clSetKernelArgSVMPointer, &err);
    load_symbol(lib, "clEnqueueNDRangeKernel", &api->clEnqueueNDRangeKernel, &err);
    if (!err.empty()) return api;
    cl_uint nplat = 0;
    if (api->clGetPlatformIDs(0, nullptr, &nplat) != kSuccess || nplat == 0) {
      err =
          "the OpenCL ICD loader finds no platform (is a driver such as pocl-opencl-icd "
          "installed?)";
      return api;
    }
    std::vector<cl_platform_id> plats(nplat);
    api->clGetPlatformIDs(nplat, plats.data(), nullptr);
    std::string seen;
    for (cl_platform_id p : plats) {
      cl_uint ndev = 0;
      if (api->clGetDeviceIDs(p, kDeviceTypeAll, 0, nullptr, &ndev) != kSuccess) continue;
      std::vector<cl_device_id> devs(ndev);
      api->clGetDeviceIDs(p, kDeviceTypeAll, ndev, devs.data(), nullptr);
      for (cl_device_id d : devs) {
        std::string name;
        if (svm_device(*api, d, &name)) {
          api->device = d;
          api->device_name = name;
          break;
        }
        seen += (seen.empty() ? "" : ", ") + name;
      }
      if (api->device) break;
    }
    if (api->device == nullptr) {
      err =
          "no OpenCL device supports shared virtual memory (OpenCL 2.0 coarse-grained "
          "buffers), which Kiln's OpenCL modules need" +
          (seen.empty() ? std::string() : "; found: " + seen);
      return api;
    }
    cl_int rc = kSuccess;
    api->context = api->clCreateContext(nullptr, 1, &api->device, nullptr, nullptr, &rc);
    if (rc == kSuccess) api->queue = api->clCreateCommandQueue(api->context, api->device, 0, &rc);
    if (rc == kSuccess) {
      api->error_flag =
          static_cast<int32_t*>(api->clSVMAlloc(api->context, kMemReadWrite, sizeof(int32_t), 0));
      const int32_t zero = 0;
      rc = api->error_flag == nullptr
               ? -4 /*CL_MEM_OBJECT_ALLOCATION_FAILURE*/
               : api->clEnqueueSVMMemcpy(api->queue, 1, api->error_flag, &zero, sizeof(zero), 0,
                                         nullptr, nullptr);
    }
    if (rc != kSuccess)
      err = "cannot set up a context on '" + api->device_name + "' (OpenCL error " +
            std::to_string(rc) + ")";
    return api;
  }();
  return *a;
}

void check(cl_int rc, const std::string& what) {
  KILN_USER_CHECK(rc == kSuccess) << "OpenCL: " << what << " failed (OpenCL error " << rc << ")";
}

/// What a launch keeps in a library's module cache: the built program and its kernels.
struct LoadedProgram {
  cl_program program = nullptr;
  std::map<std::string, cl_kernel> kernels;
};

class OpenCLBackend final : public DeviceBackend {
 public:
  std::string unavailable(int id) override {
    Api& a = api();
    if (!a.error.empty()) return a.error;
    if (id != 0) return "device " + std::to_string(id) + " requested; Kiln uses one OpenCL device";
    return "";
  }

  std::string name(int id) override { return use(id).device_name; }

  void* alloc(int id, size_t nbytes) override {
    Api& a = use(id);
    void* p = a.clSVMAlloc(a.context, kMemReadWrite, nbytes == 0 ? 1 : nbytes, 128);
    KILN_USER_CHECK(p != nullptr) << "OpenCL: cannot allocate " << nbytes << " bytes on '"
                                  << a.device_name << "'";
    return p;
  }

  void free(int id, void* ptr) noexcept override {
    Api& a = api();
    if (!a.error.empty() || id != 0) return;
    // On the queue: freed once the kernels launched before it (which may use it) are done.
    std::lock_guard<std::mutex> lock(a.mu);
    a.clEnqueueSVMFree(a.queue, 1, &ptr, nullptr, nullptr, 0, nullptr, nullptr);
  }

  void copy(int id, void* dst, bool, const void* src, bool, size_t nbytes) override {
    Api& a = use(id);
    std::lock_guard<std::mutex> lock(a.mu);
    check(a.clEnqueueSVMMemcpy(a.queue, 1, dst, src, nbytes, 0, nullptr, nullptr),
          "a copy of " + std::to_string(nbytes) + " bytes");
  }

  void synchronize(int id) override {
    Api& a = use(id);
    std::lock_guard<std::mutex> lock(a.mu);
    check(a.clFinish(a.queue), "a kernel (reported at synchronize)");
    int32_t flag = 0;
    check(a.clEnqueueSVMMemcpy(a.queue, 1, &flag, a.error_flag, sizeof(flag), 0, nullptr, nullptr),
          "reading the kernels' error flag");
    if (flag != 0) {
      const int32_t zero = 0;
      a.clEnqueueSVMMemcpy(a.queue, 1, a.error_flag, &zero, sizeof(zero), 0, nullptr, nullptr);
      KILN_ERROR << "OpenCL: a run-time check inside a kernel failed (an index out of "
                    "range, e.g. Gather's indices); the outputs are not valid";
    }
  }

  void launch(void** module_cache, const char* source, const char* kernel, const int64_t dims[6],
              int32_t shared_bytes, void** args, const int32_t* arg_sizes,
              int32_t num_args) override {
    Api& a = use(0);
    KILN_USER_CHECK(shared_bytes == 0)
        << "OpenCL: kernel '" << kernel << "' asks for dynamic shared memory";
    std::lock_guard<std::mutex> lock(a.mu);
    auto* m = static_cast<LoadedProgram*>(*module_cache);
    if (m == nullptr) {
      cl_int rc = kSuccess;
      cl_program p = a.clCreateProgramWithSource(a.context, 1, &source, nullptr, &rc);
      check(rc, "clCreateProgramWithSource");
      rc = a.clBuildProgram(p, 1, &a.device, "", nullptr, nullptr);
      if (rc != kSuccess) {
        size_t n = 0;
        a.clGetProgramBuildInfo(p, a.device, kProgramBuildLog, 0, nullptr, &n);
        std::string log(n, '\0');
        a.clGetProgramBuildInfo(p, a.device, kProgramBuildLog, n, log.data(), nullptr);
        KILN_ERROR << "OpenCL: cannot build the module's device code on '" << a.device_name
                   << "' (OpenCL error " << rc << "): " << log;
      }
      m = new LoadedProgram{p, {}};  // lives as long as the process: libraries may unload
      *module_cache = m;
    }
    cl_kernel k;
    auto it = m->kernels.find(kernel);
    if (it == m->kernels.end()) {
      cl_int rc = kSuccess;
      k = a.clCreateKernel(m->program, kernel, &rc);
      check(rc, std::string("finding kernel '") + kernel + "' in the module's device code");
      m->kernels.emplace(kernel, k);
    } else {
      k = it->second;
    }
    for (int32_t i = 0; i < num_args; ++i) {
      cl_int rc = arg_sizes[i] == 0
                      ? a.clSetKernelArgSVMPointer(k, i, *static_cast<void**>(args[i]))
                      : a.clSetKernelArg(k, i, static_cast<size_t>(arg_sizes[i]), args[i]);
      check(rc,
            std::string("setting argument ") + std::to_string(i) + " of kernel '" + kernel + "'");
    }
    check(a.clSetKernelArgSVMPointer(k, num_args, a.error_flag),
          std::string("setting the error flag of kernel '") + kernel + "'");
    size_t global[3], local[3];
    for (int d = 0; d < 3; ++d) {
      local[d] = static_cast<size_t>(dims[3 + d]);
      global[d] = static_cast<size_t>(dims[d]) * local[d];
    }
    check(a.clEnqueueNDRangeKernel(a.queue, k, 3, nullptr, global, local, 0, nullptr, nullptr),
          std::string("launching kernel '") + kernel + "' (" + std::to_string(dims[0]) + "x" +
              std::to_string(dims[1]) + "x" + std::to_string(dims[2]) + " work-groups of " +
              std::to_string(dims[3]) + "x" + std::to_string(dims[4]) + "x" +
              std::to_string(dims[5]) + ")");
  }

 private:
  static Api& use(int id) {
    Api& a = api();
    KILN_USER_CHECK(a.error.empty()) << "no OpenCL device: " << a.error;
    KILN_USER_CHECK(id == 0) << "no OpenCL device: device " << id
                             << " requested; Kiln uses one OpenCL device";
    return a;
  }
};

}  // namespace

DeviceBackend& opencl_backend() {
  static OpenCLBackend b;
  return b;
}

}  // namespace kiln::runtime
