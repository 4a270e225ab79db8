/// \file data_type.h
/// \brief Scalar and vector element types, shared by the runtime and the compiler.
///
/// A DataType is (code, bits, lanes), as in DLPack: `float32x16` is Float(32, 16). Booleans are
/// UInt(1). Handles (pointers) are Handle(64).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace kiln {

class DataType {
 public:
  enum Code : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kHandle = 3, kBFloat = 4 };

  constexpr DataType() : code_(kHandle), bits_(0), lanes_(0) {}
  constexpr DataType(Code code, int bits, int lanes = 1)
      : code_(code), bits_(static_cast<uint8_t>(bits)), lanes_(static_cast<uint16_t>(lanes)) {}

  static constexpr DataType Int(int bits, int lanes = 1) { return DataType(kInt, bits, lanes); }
  static constexpr DataType UInt(int bits, int lanes = 1) { return DataType(kUInt, bits, lanes); }
  static constexpr DataType Float(int bits, int lanes = 1) { return DataType(kFloat, bits, lanes); }
  static constexpr DataType BFloat16(int lanes = 1) { return DataType(kBFloat, 16, lanes); }
  static constexpr DataType Bool(int lanes = 1) { return DataType(kUInt, 1, lanes); }
  static constexpr DataType Handle() { return DataType(kHandle, 64, 1); }
  /// The "no type" value used by statements and uninitialised fields.
  static constexpr DataType Void() { return DataType(kHandle, 0, 0); }

  constexpr Code code() const { return static_cast<Code>(code_); }
  constexpr int bits() const { return bits_; }
  constexpr int lanes() const { return lanes_; }
  constexpr int bytes() const { return (bits_ * lanes_ + 7) / 8; }

  constexpr bool is_int() const { return code_ == kInt; }
  constexpr bool is_uint() const { return code_ == kUInt && bits_ != 1; }
  constexpr bool is_bool() const { return code_ == kUInt && bits_ == 1; }
  constexpr bool is_float() const { return code_ == kFloat || code_ == kBFloat; }
  constexpr bool is_bfloat16() const { return code_ == kBFloat; }
  constexpr bool is_handle() const { return code_ == kHandle && bits_ != 0; }
  constexpr bool is_void() const { return code_ == kHandle && bits_ == 0; }
  /// Int or UInt (not bool).
  constexpr bool is_integer() const { return is_int() || is_uint(); }
  constexpr bool is_scalar() const { return lanes_ == 1; }
  constexpr bool is_vector() const { return lanes_ > 1; }

  constexpr DataType element_of() const { return with_lanes(1); }
  constexpr DataType with_lanes(int lanes) const { return DataType(code(), bits_, lanes); }
  constexpr DataType with_bits(int bits) const { return DataType(code(), bits, lanes_); }

  constexpr bool operator==(const DataType& o) const {
    return code_ == o.code_ && bits_ == o.bits_ && lanes_ == o.lanes_;
  }
  constexpr bool operator!=(const DataType& o) const { return !(*this == o); }

  /// "float32", "int8x16", "bool", "handle", "bfloat16".
  std::string str() const;
  /// Parses the output of str(); throws kiln::Error on a bad string.
  static DataType parse(const std::string& s);

 private:
  uint8_t code_;
  uint8_t bits_;
  uint16_t lanes_;
};

inline std::ostream& operator<<(std::ostream& os, DataType t) { return os << t.str(); }

}  // namespace kiln
