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
