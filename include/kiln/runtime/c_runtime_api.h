/// \file c_runtime_api.h
/// \brief The C ABI between generated code and the runtime. Plain C, stable.
///
/// Every generated entry point has the packed signature
///   int32_t f(const KilnValue* args, const int32_t* type_codes, int32_t num_args);
/// It returns 0 on success. On failure it calls kiln_set_last_error() with a message and
/// returns non-zero; the caller reads the message with kiln_get_last_error().
/// Tensors are passed as `KilnArray*` with type code kKilnArrayHandle.
#ifndef KILN_RUNTIME_C_RUNTIME_API_H_
#define KILN_RUNTIME_C_RUNTIME_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_DLL __attribute__((visibility("default")))

/// Type codes of packed arguments.
typedef enum {
  kKilnInt = 0,
  kKilnUInt = 1,
  kKilnFloat = 2,
  kKilnOpaqueHandle = 3,
  kKilnNull = 4,
  kKilnArrayHandle = 7,
  kKilnStr = 11,
} KilnTypeCode;

/// Device kinds (DLPack numbering).
typedef enum { kKilnCPU = 1, kKilnCUDA = 2, kKilnOpenCL = 4 } KilnDeviceType;

typedef struct {
  int32_t device_type;  ///< a KilnDeviceType
  int32_t device_id;
} KilnDevice;

typedef struct {
  uint8_t code;  ///< kiln::DataType::Code
  uint8_t bits;
  uint16_t lanes;
} KilnDataType;

/// A tensor view (DLPack's DLTensor layout). strides == NULL means compact row-major.
typedef struct {
  void* data;
  KilnDevice device;
  int32_t ndim;
  KilnDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} KilnArray;

/// One packed argument.
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
} KilnValue;

/// The packed calling convention of every generated function.
typedef int32_t (*KilnPackedCFunc)(const KilnValue* args, const int32_t* type_codes,
                                   int32_t num_args);

/// Sets the calling thread's last error message (copied).
KILN_DLL void kiln_set_last_error(const char* msg);
/// The calling thread's last error message ("" if none).
KILN_DLL const char* kiln_get_last_error(void);

/// Body of a parallel loop: runs iterations [begin, end) of the loop; returns 0 on success.
typedef int32_t (*KilnParallelLambda)(int64_t begin, int64_t end, void* closure);
/// Runs fn over [0, extent) split into contiguous chunks on the runtime's thread pool and
/// waits for all of them. Nested calls (from inside a running chunk) run inline. Returns 0, or
/// the first non-zero code a chunk returned.
KILN_DLL int32_t kiln_parallel_for(int64_t extent, KilnParallelLambda fn, void* closure);
/// Number of threads the pool uses (KILN_NUM_THREADS, default: the number of cores).
KILN_DLL int32_t kiln_get_num_threads(void);
/// Sets the pool's thread count (>= 1).
KILN_DLL void kiln_set_num_threads(int32_t n);

/// Scratch memory for generated code: 64-byte aligned; NULL on failure.
KILN_DLL void* kiln_workspace_alloc(uint64_t nbytes);
KILN_DLL void kiln_workspace_free(void* ptr);

/// How kiln_set_arg_error formats its `got` value.
typedef enum {
  kKilnGotInt = 0,       ///< a decimal integer: "512"
  kKilnGotDType = 1,     ///< a dtype packed as code | bits << 8 | lanes << 16: "float32"
  kKilnGotTypeCode = 2,  ///< a KilnTypeCode: "int", "float", "array", ...
  kKilnGotDevice = 3,    ///< a KilnDeviceType: "cpu", "cuda", ...
  kKilnGotAddress = 4,   ///< a pointer value in hexadecimal: "0x7f0000000004"
} KilnGotKind;
/// Sets the last error to `prefix` followed by `got` formatted as `kind` says (used by the
/// argument checks of generated code, e.g. prefix "f: argument 0 (A): dtype expected float32,
/// got " and a dtype).
KILN_DLL void kiln_set_arg_error(const char* prefix, int32_t kind, int64_t got);
/// Checks tensor argument `a` of generated code against constant expectations, in this order:
/// ndim, dtype (a KilnDataType word: code | bits << 8 | lanes << 16), device cpu, shape[d],
/// strides[d] (when strides is not NULL; shape_strides holds the ndim shape entries then the
/// ndim strides), the data pointer (data + byte_offset) aligned to `alignment` bytes (when
/// > 1). Returns 0, or sets the last error to `prefix` + the first failing check's text
/// ("ndim expected 2, got 1") and returns -1.
KILN_DLL int32_t kiln_check_array(const KilnArray* a, const char* prefix, int32_t ndim,
                                  int32_t dtype_word, int64_t alignment,
                                  const int64_t* shape_strides);

/// kiln_check_array for a tensor that must live on `device_type` (a KilnDeviceType) instead of
/// the CPU: "device expected cuda, got cpu".
KILN_DLL int32_t kiln_check_array_on(const KilnArray* a, const char* prefix, int32_t ndim,
                                     int32_t dtype_word, int64_t alignment,
                                     const int64_t* shape_strides, int32_t device_type);

/// Launches kernel `kernel` of a module's device code on device 0 of `device_type` (a
/// KilnDeviceType: kKilnCUDA, whose `code` is PTX text; kKilnOpenCL, OpenCL C source; both
/// NUL-terminated) with `dims` = grid x, y, z then block x, y, z (OpenCL: work-groups and
/// work-group size), `shared_bytes` of dynamic shared memory (CUDA only) and `args`: num_args
/// pointers to the argument values, cuLaunchKernel's form; arg_sizes[i] is 0 for a device
/// buffer (a pointer from device memory) and the value's size in bytes for a scalar. It runs on
/// the runtime's one stream or queue per device and returns without waiting. `module_cache` is
/// the address of a pointer owned by the calling library, NULL at first: the runtime loads or
/// compiles the code on the first launch and keeps what it made there. Returns 0, or -1 with
/// the last error naming the kernel and the driver's error ("no CUDA device: ...", "no OpenCL
/// device: ..." where the driver or a device is missing).
KILN_DLL int32_t kiln_device_launch(int32_t device_type, void** module_cache, const char* code,
                                    const char* kernel, const int64_t* dims, int32_t shared_bytes,
                                    void** args, const int32_t* arg_sizes, int32_t num_args);

/// Scratch memory on device 0 of `device_type` for the host code of a GPU function (an
/// intermediate buffer between its kernels); NULL with the last error set on failure.
KILN_DLL void* kiln_device_workspace_alloc(int32_t device_type, uint64_t nbytes);
KILN_DLL void kiln_device_workspace_free(int32_t device_type, void* ptr);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // KILN_RUNTIME_C_RUNTIME_API_H_
