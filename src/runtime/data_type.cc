// DataType printing and parsing: "<code><bits>[x<lanes>]", with "bool" and "handle" special.
#include "kiln/runtime/data_type.h"

#include <cctype>

#include "kiln/support/error.h"

namespace kiln {

std::string DataType::str() const {
  if (is_void()) return "void";
  std::string s;
  if (is_bool()) {
    s = "bool";
  } else if (is_handle()) {
    s = "handle";
  } else {
    switch (code()) {
      case kInt:
        s = "int";
        break;
      case kUInt:
        s = "uint";
        break;
      case kFloat:
        s = "float";
        break;
      case kBFloat:
        s = "bfloat";
        break;
      default:
        s = "unknown";
        break;
    }
    s += std::to_string(bits());
  }
  if (lanes() > 1) s += "x" + std::to_string(lanes());
  return s;
}

namespace {
/// Parses a non-empty all-digit string no larger than `max`; -1 otherwise.
int parse_number(const std::string& s, int max) {
  if (s.empty() || s.size() > 5) return -1;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  }
  int v = std::stoi(s);
  return v <= max ? v : -1;
}
}  // namespace

DataType DataType::parse(const std::string& str) {
  auto bad = [&](const char* why) {
    KILN_ERROR << "bad data type '" << str << "': " << why
               << " (expected int|uint|float<bits>, bfloat16, bool or handle, with an optional "
                  "x<lanes> suffix, or void)";
  };
  std::string s = str;
  int lanes = 1;
  size_t x = s.find('x');
  if (x != std::string::npos) {
    lanes = parse_number(s.substr(x + 1), 65535);
    if (lanes < 1) bad("lanes must be a number from 1 to 65535");
    s = s.substr(0, x);
  }
  if (s == "void") {
    if (x != std::string::npos) bad("void has no lanes");
    return Void();
  }
  if (s == "bool") return Bool(lanes);
  if (s == "handle") {
    if (lanes != 1) bad("handle has no lanes");
    return Handle();
  }
  auto parse_bits = [&](size_t prefix) {
    int bits = parse_number(s.substr(prefix), 255);
    if (bits < 1) bad("bits must be a number from 1 to 255");
    return bits;
  };
  if (s.rfind("uint", 0) == 0) return UInt(parse_bits(4), lanes);
  if (s.rfind("int", 0) == 0) return Int(parse_bits(3), lanes);
  if (s.rfind("float", 0) == 0) return Float(parse_bits(5), lanes);
  if (s.rfind("bfloat", 0) == 0) {
    if (parse_bits(6) != 16) bad("bfloat has 16 bits");
    return BFloat16(lanes);
  }
  bad("unknown type name");
  return Void();  // not reached
}

}  // namespace kiln
