/// \file ndarray_access.h
/// \brief Test helper: read and write NDArray elements as doubles, whatever the dtype, so
/// references can be written once for all element types.
#pragma once

#include <cstdint>

#include "kiln/runtime/ndarray.h"
#include "kiln/support/error.h"

namespace kiln::testing {

/// Element i of `a` as a double. A bool that is neither 0 nor 1 (a poisoned byte nobody
/// wrote) reads as -77, so comparisons with a reference fail.
inline double element(const runtime::NDArray& a, int64_t i) {
  DataType t = a.dtype();
  if (t == DataType::Float(32)) return a.data_as<float>()[i];
  if (t == DataType::Float(64)) return a.data_as<double>()[i];
  if (t == DataType::Int(32)) return a.data_as<int32_t>()[i];
  if (t == DataType::Int(64)) return static_cast<double>(a.data_as<int64_t>()[i]);
  if (t == DataType::Int(16)) return a.data_as<int16_t>()[i];
  if (t == DataType::Int(8)) return a.data_as<int8_t>()[i];
  if (t == DataType::UInt(8)) return a.data_as<uint8_t>()[i];
  if (t == DataType::UInt(32)) return a.data_as<uint32_t>()[i];
  if (t.is_bool()) {
    uint8_t b = a.data_as<uint8_t>()[i];
    return b == 0 ? 0.0 : b == 1 ? 1.0 : -77.0;
  }
  KILN_ERROR << "test helper: unsupported dtype " << t;
}

/// Sets element i of `a` from a double (converted to the array's dtype).
inline void set_element(const runtime::NDArray& a, int64_t i, double v) {
  DataType t = a.dtype();
  if (t == DataType::Float(32))
    a.data_as<float>()[i] = static_cast<float>(v);
  else if (t == DataType::Float(64))
    a.data_as<double>()[i] = v;
  else if (t == DataType::Int(32))
    a.data_as<int32_t>()[i] = static_cast<int32_t>(v);
  else if (t == DataType::Int(64))
    a.data_as<int64_t>()[i] = static_cast<int64_t>(v);
  else if (t == DataType::Int(16))
    a.data_as<int16_t>()[i] = static_cast<int16_t>(v);
  else if (t == DataType::Int(8))
    a.data_as<int8_t>()[i] = static_cast<int8_t>(v);
  else if (t == DataType::UInt(8))
    a.data_as<uint8_t>()[i] = static_cast<uint8_t>(v);
  else if (t == DataType::UInt(32))
    a.data_as<uint32_t>()[i] = static_cast<uint32_t>(v);
  else if (t.is_bool())
    a.data_as<uint8_t>()[i] = v != 0;
  else
    KILN_ERROR << "test helper: unsupported dtype " << t;
}

}  // namespace kiln::testing
