// kiln_set_arg_error: the run-time half of the argument checks generated code runs on entry
// (see tir/packed_api.h). The check's static text is built at compile time; only the value the
// caller actually passed is formatted here, by kind (integer, dtype, type code, device,
// address), and appended.
#include <cstdio>
#include <string>

#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/data_type.h"

namespace {

std::string format_got(int32_t kind, int64_t got) {
  switch (kind) {
    case kKilnGotDType: {
      auto code = static_cast<kiln::DataType::Code>(got & 0xff);
      int bits = static_cast<int>((got >> 8) & 0xff);
      int lanes = static_cast<int>((got >> 16) & 0xffff);
      if (code > kiln::DataType::kBFloat) {
        return "dtype(code=" + std::to_string(code) + ", bits=" + std::to_string(bits) +
               ", lanes=" + std::to_string(lanes) + ")";
      }
      return kiln::DataType(code, bits, lanes).str();
    }
    case kKilnGotTypeCode:
      switch (got) {
        case kKilnInt:
          return "int";
        case kKilnUInt:
          return "uint";
        case kKilnFloat:
          return "float";
        case kKilnOpaqueHandle:
          return "handle";
        case kKilnNull:
          return "null";
        case kKilnArrayHandle:
          return "array";
        case kKilnStr:
          return "str";
        default:
          return "type code " + std::to_string(got);
      }
    case kKilnGotDevice:
      switch (got) {
        case kKilnCPU:
          return "cpu";
        case kKilnCUDA:
          return "cuda";
        case kKilnOpenCL:
          return "opencl";
        default:
          return "device type " + std::to_string(got);
      }
    case kKilnGotAddress: {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(got));
      return buf;
    }
    default:
      return std::to_string(got);
  }
}

}  // namespace

extern "C" KILN_DLL void kiln_set_arg_error(const char* prefix, int32_t kind, int64_t got) {
  std::string msg = prefix ? prefix : "";
  msg += format_got(kind, got);
  kiln_set_last_error(msg.c_str());
}

extern "C" KILN_DLL int32_t kiln_check_array(const KilnArray* a, const char* prefix, int32_t ndim,
                                             int32_t dtype_word, int64_t alignment,
                                             const int64_t* shape_strides) {
  return kiln_check_array_on(a, prefix, ndim, dtype_word, alignment, shape_strides, kKilnCPU);
}

extern "C" KILN_DLL int32_t kiln_check_array_on(const KilnArray* a, const char* prefix,
                                                int32_t ndim, int32_t dtype_word, int64_t alignment,
                                                const int64_t* shape_strides, int32_t device_type) {
  const std::string p = prefix ? prefix : "";
  auto fail = [&](const std::string& what, int32_t kind, int64_t got) {
    kiln_set_arg_error((p + what).c_str(), kind, got);
    return -1;
  };
  if (a->ndim != ndim)
    return fail("ndim expected " + std::to_string(ndim) + ", got ", kKilnGotInt, a->ndim);
  const int32_t word = static_cast<int32_t>(a->dtype.code | (a->dtype.bits << 8) |
                                            (static_cast<uint32_t>(a->dtype.lanes) << 16));
  if (word != dtype_word)
    return fail("dtype expected " + format_got(kKilnGotDType, dtype_word) + ", got ", kKilnGotDType,
                word);
  if (a->device.device_type != device_type)
    return fail("device expected " + format_got(kKilnGotDevice, device_type) + ", got ",
                kKilnGotDevice, a->device.device_type);
  for (int32_t d = 0; d < ndim; ++d)
    if (a->shape[d] != shape_strides[d])
      return fail("shape[" + std::to_string(d) + "] expected " + std::to_string(shape_strides[d]) +
                      ", got ",
                  kKilnGotInt, a->shape[d]);
  for (int32_t d = 0; a->strides && d < ndim; ++d)
    if (a->strides[d] != shape_strides[ndim + d])
      return fail("strides[" + std::to_string(d) + "] expected " +
                      std::to_string(shape_strides[ndim + d]) + ", got ",
                  kKilnGotInt, a->strides[d]);
  const auto addr = reinterpret_cast<uintptr_t>(a->data) + a->byte_offset;
  if (alignment > 1 && addr % static_cast<uint64_t>(alignment) != 0)
    return fail("data pointer expected " + std::to_string(alignment) + "-byte aligned, got ",
                kKilnGotAddress, static_cast<int64_t>(addr));
  return 0;
}
