// CUDA through the driver API, loaded with dlopen at run time (device_backend.h): memory,
// copies and launches. Nothing here links against CUDA; the entry points are looked up by name.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "device_backend.h"
#include "kiln/support/error.h"

namespace kiln::runtime {
namespace {

// The few driver types and entry points used, declared as the driver's header declares them.
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUdeviceptr = unsigned long long;  // NOLINT: the driver's type
constexpr CUresult kSuccess = 0;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);

  int device_count = 0;
  std::vector<CUcontext> contexts;  // primary contexts, retained on first use
  std::mutex mu;
  std::string error;  // why CUDA cannot be used ("" when it can)
};

std::string cu_error(const Driver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  if (d.cuGetErrorString) d.cuGetErrorString(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(r);
  if (text) s += std::string(" (") + text + ")";
  return s;
}

template <typename F>
bool load_symbol(void* lib, const char* name, F* fn, std::string* error) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr && error->empty()) error->assign(std::string("libcuda.so.1 lacks ") + name);
  return *fn != nullptr;
}

Driver& driver() {
  static Driver* d = [] {
    auto* drv = new Driver{};
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      drv->error = std::string("cannot load the CUDA driver libcuda.so.1 (") +
                   (e ? e : "not found") + "); is an NVIDIA driver installed?";
      return drv;
    }
    std::string& err = drv->error;
    load_symbol(lib, "cuGetErrorName", &drv->cuGetErrorName, &err);
    load_symbol(lib, "cuGetErrorString", &drv->cuGetErrorString, &err);
    load_symbol(lib, "cuInit", &drv->cuInit, &err);
    load_symbol(lib, "cuDeviceGetCount", &drv->cuDeviceGetCount, &err);
    load_symbol(lib, "cuDeviceGet", &drv->cuDeviceGet, &err);
    load_symbol(lib, "cuDeviceGetName", &drv->cuDeviceGetName, &err);
    load_symbol(lib, "cuDevicePrimaryCtxRetain", &drv->cuDevicePrimaryCtxRetain, &err);
    load_symbol(lib, "cuCtxSetCurrent", &drv->cuCtxSetCurrent, &err);
    load_symbol(lib, "cuCtxSynchronize", &drv->cuCtxSynchronize, &err);
    load_symbol(lib, "cuMemAlloc_v2", &drv->cuMemAlloc, &err);
    load_symbol(lib, "cuMemFree_v2", &drv->cuMemFree, &err);
    load_symbol(lib, "cuMemcpyHtoD_v2", &drv->cuMemcpyHtoD, &err);
    load_symbol(lib, "cuMemcpyDtoH_v2", &drv->cuMemcpyDtoH, &err);
    load_symbol(lib, "cuMemcpyDtoD_v2", &drv->cuMemcpyDtoD, &err);
    load_symbol(lib, "cuModuleLoadDataEx", &drv->cuModuleLoadDataEx, &err);
    load_symbol(lib, "cuModuleGetFunction", &drv->cuModuleGetFunction, &err);
    load_symbol(lib, "cuLaunchKernel", &drv->cuLaunchKernel, &err);
    if (!err.empty()) return drv;
    if (CUresult r = drv->cuInit(0); r != kSuccess) {
      err = "cuInit failed: " + cu_error(*drv, r);
      return drv;
    }
    if (CUresult r = drv->cuDeviceGetCount(&drv->device_count); r != kSuccess) {
      err = "cuDeviceGetCount failed: " + cu_error(*drv, r);
      return drv;
    }
    if (drv->device_count == 0) err = "the CUDA driver reports no device";
    drv->contexts.assign(static_cast<size_t>(drv->device_count), nullptr);
    return drv;
  }();
  return *d;
}

/// The driver with device `id`'s primary context current in this thread; throws "no CUDA
/// device: ..." otherwise.
Driver& use_device(int id) {
  Driver& d = driver();
  KILN_USER_CHECK(d.error.empty()) << "no CUDA device: " << d.error;
  KILN_USER_CHECK(id >= 0 && id < d.device_count)
      << "no CUDA device: device " << id << " requested, the driver reports " << d.device_count;
  CUcontext ctx;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.contexts[id] == nullptr) {
      CUdevice dev;
      CUresult r = d.cuDeviceGet(&dev, id);
      if (r == kSuccess) r = d.cuDevicePrimaryCtxRetain(&d.contexts[id], dev);
      KILN_USER_CHECK(r == kSuccess)
          << "no CUDA device: cannot create a context on device " << id << ": " << cu_error(d, r);
    }
    ctx = d.contexts[id];
  }
  CUresult r = d.cuCtxSetCurrent(ctx);
  KILN_USER_CHECK(r == kSuccess) << "CUDA: cuCtxSetCurrent failed: " << cu_error(d, r);
  return d;
}

void check(const Driver& d, CUresult r, const char* what) {
  KILN_USER_CHECK(r == kSuccess) << "CUDA: " << what << " failed: " << cu_error(d, r);
}

/// What a launch keeps in a library's module cache: the loaded module and its kernels.
struct LoadedModule {
  CUmodule module = nullptr;
  std::map<std::string, CUfunction> kernels;
};

class CudaBackend final : public DeviceBackend {
 public:
  std::string unavailable(int id) override {
    Driver& d = driver();
    if (!d.error.empty()) return d.error;
    if (id < 0 || id >= d.device_count) {
      return "device " + std::to_string(id) + " requested, the driver reports " +
             std::to_string(d.device_count);
    }
    return "";
  }

  std::string name(int id) override {
    Driver& d = use_device(id);
    char name[256] = {};
    CUdevice cd;
    check(d, d.cuDeviceGet(&cd, id), "cuDeviceGet");
    check(d, d.cuDeviceGetName(name, sizeof(name) - 1, cd), "cuDeviceGetName");
    return name;
  }

  void* alloc(int id, size_t nbytes) override {
    Driver& d = use_device(id);
    CUdeviceptr p = 0;
    CUresult r = d.cuMemAlloc(&p, nbytes == 0 ? 1 : nbytes);
    KILN_USER_CHECK(r == kSuccess)
        << "CUDA: cannot allocate " << nbytes << " bytes on cuda:" << id << ": " << cu_error(d, r);
    return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  }

  void free(int id, void* ptr) noexcept override {
    try {
      Driver& d = use_device(id);
      d.cuMemFree(dptr(ptr));
    } catch (...) {
    }
  }

  void copy(int id, void* dst, bool dst_on_device, const void* src, bool src_on_device,
            size_t nbytes) override {
    Driver& d = use_device(id);
    if (dst_on_device && src_on_device) {
      check(d, d.cuMemcpyDtoD(dptr(dst), dptr(src), nbytes), "cuMemcpyDtoD");
    } else if (dst_on_device) {
      check(d, d.cuMemcpyHtoD(dptr(dst), src, nbytes), "cuMemcpyHtoD");
    } else {
      check(d, d.cuMemcpyDtoH(dst, dptr(src), nbytes), "cuMemcpyDtoH");
    }
  }

  void synchronize(int id) override {
    Driver& d = use_device(id);
    check(d, d.cuCtxSynchronize(), "a kernel (reported at synchronize)");
  }

  void launch(void** module_cache, const char* ptx, const char* kernel, const int64_t dims[6],
              int32_t shared_bytes, void** args, const int32_t* /*arg_sizes*/,
              int32_t /*num_args*/) override {
    Driver& d = use_device(0);
    CUfunction fn = nullptr;
    {
      std::lock_guard<std::mutex> lock(d.mu);
      auto* m = static_cast<LoadedModule*>(*module_cache);
      if (m == nullptr) {
        // The JIT's log names the problem when the PTX does not load (e.g. a newer ISA).
        char log[8192] = {};
        int opts[] = {5 /*CU_JIT_ERROR_LOG_BUFFER*/, 6 /*CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES*/};
        void* vals[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log) - 1))};
        CUmodule mod = nullptr;
        CUresult r = d.cuModuleLoadDataEx(&mod, ptx, 2, opts, vals);
        KILN_USER_CHECK(r == kSuccess)
            << "CUDA: cannot load the module's device code: " << cu_error(d, r) << ": " << log;
        m = new LoadedModule{mod, {}};  // lives as long as the process: libraries may unload
        *module_cache = m;
      }
      auto it = m->kernels.find(kernel);
      if (it == m->kernels.end()) {
        CUresult r = d.cuModuleGetFunction(&fn, m->module, kernel);
        KILN_USER_CHECK(r == kSuccess)
            << "CUDA: kernel '" << kernel
            << "' not found in the module's device code: " << cu_error(d, r);
        m->kernels.emplace(kernel, fn);
      } else {
        fn = it->second;
      }
    }
    auto u = [&](int i) { return static_cast<unsigned>(dims[i]); };
    CUresult r = d.cuLaunchKernel(fn, u(0), u(1), u(2), u(3), u(4), u(5),
                                  static_cast<unsigned>(shared_bytes), nullptr, args, nullptr);
    KILN_USER_CHECK(r == kSuccess)
        << "CUDA: launching kernel '" << kernel << "' (grid " << dims[0] << "x" << dims[1] << "x"
        << dims[2] << ", block " << dims[3] << "x" << dims[4] << "x" << dims[5]
        << ") failed: " << cu_error(d, r);
  }

 private:
  static CUdeviceptr dptr(const void* p) {
    return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
  }
};

}  // namespace

DeviceBackend& cuda_backend() {
  static CudaBackend b;
  return b;
}

}  // namespace kiln::runtime
