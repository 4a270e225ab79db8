// DataType printing and parsing: round trips for scalars, vectors, bool, bfloat16, handle and
// void, and the error text for malformed strings.
#include "kiln/runtime/data_type.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/support/error.h"

namespace kiln {
namespace {

TEST(DataType, StrParseRoundTrip) {
  const DataType types[] = {DataType::Int(8),     DataType::Int(32),    DataType::Int(64),
                            DataType::UInt(8),    DataType::UInt(16),   DataType::Float(16),
                            DataType::Float(32),  DataType::Float(64),  DataType::Float(32, 16),
                            DataType::Int(8, 64), DataType::UInt(8, 4), DataType::Bool(),
                            DataType::Bool(8),    DataType::BFloat16(), DataType::BFloat16(32),
                            DataType::Handle(),   DataType::Void(),     DataType::Int(1, 2)};
  for (DataType t : types) {
    SCOPED_TRACE(t.str());
    EXPECT_EQ(DataType::parse(t.str()), t);
  }
}

TEST(DataType, Names) {
  EXPECT_EQ(DataType::Float(32).str(), "float32");
  EXPECT_EQ(DataType::Int(8, 16).str(), "int8x16");
  EXPECT_EQ(DataType::Bool().str(), "bool");
  EXPECT_EQ(DataType::Bool(4).str(), "boolx4");
  EXPECT_EQ(DataType::BFloat16().str(), "bfloat16");
  EXPECT_EQ(DataType::BFloat16(8).str(), "bfloat16x8");
  EXPECT_EQ(DataType::Handle().str(), "handle");
  EXPECT_EQ(DataType::Void().str(), "void");
  EXPECT_EQ(DataType::parse("float32x8"), DataType::Float(32, 8));
  EXPECT_EQ(DataType::parse("bfloat16"), DataType::BFloat16());
  EXPECT_TRUE(DataType::parse("bool").is_bool());
  EXPECT_EQ(DataType::Float(32, 4).bytes(), 16);
}

void expect_parse_error(const std::string& s, const std::string& detail) {
  try {
    DataType::parse(s);
    ADD_FAILURE() << "parse('" << s << "') did not throw";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("bad data type '" + s + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(detail), std::string::npos) << msg;
  }
}

TEST(DataType, BadStrings) {
  expect_parse_error("", "unknown type name");
  expect_parse_error("floaty", "bits");
  expect_parse_error("float", "bits");
  expect_parse_error("int8a", "bits");
  expect_parse_error("int0", "bits");
  expect_parse_error("int999", "bits");
  expect_parse_error("float32x", "lanes");
  expect_parse_error("float32x0", "lanes");
  expect_parse_error("float32x4x", "lanes");
  expect_parse_error("float32x99999999999", "lanes");
  expect_parse_error("bfloat32", "bfloat has 16 bits");
  expect_parse_error("handlex4", "handle has no lanes");
  expect_parse_error("tensor", "unknown type name");
  expect_parse_error("Float32", "unknown type name");
}

}  // namespace
}  // namespace kiln
