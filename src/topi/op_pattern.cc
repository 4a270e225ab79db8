// Names of pattern kinds and tag predicates.
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

const char* op_pattern_name(OpPattern p) {
  switch (p) {
    case OpPattern::kElemWise:
      return "elemwise";
    case OpPattern::kBroadcast:
      return "broadcast";
    case OpPattern::kInjective:
      return "injective";
    case OpPattern::kCommReduce:
      return "comm_reduce";
    case OpPattern::kOutEWiseFusable:
      return "out_elemwise_fusable";
    case OpPattern::kOpaque:
      return "opaque";
  }
  return "?";
}

bool is_injective_tag(const std::string& t) {
  for (const char* p : {tag::kElemWise, tag::kBroadcast, tag::kInjective}) {
    std::string s(p);
    if (t == s || t.rfind(s + ",", 0) == 0) return true;
  }
  return false;
}

}  // namespace kiln::topi
