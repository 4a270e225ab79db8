/// \file op_pattern.h
/// \brief Fusion pattern kinds of operators (TVM paper section 3) and the tags that mark
/// operators' compute stages.
///
/// Every operator in topi declares its pattern kind; the graph compiler's fusion pass reads it:
/// injective ops fuse into each other, a reduction fuses with its injective inputs, a
/// complex-out-fusable op (conv2d, dense) fuses the element-wise ops on its output, opaque ops
/// stand alone. Schedules find an operator's main stage by its tag.
#pragma once

#include <string>

namespace kiln::topi {

/// Ordered: a higher kind is harder to fuse.
enum class OpPattern : int {
  kElemWise = 0,         ///< out[i] = f(in[i]) for same-shaped inputs
  kBroadcast = 1,        ///< element-wise with numpy broadcasting
  kInjective = 2,        ///< each output element depends on one input element (reshape, …)
  kCommReduce = 3,       ///< a commutative reduction (sum, max, …)
  kOutEWiseFusable = 4,  ///< complex op whose output can take element-wise ops (conv2d, dense)
  kOpaque = 8            ///< cannot be fused (extern calls, sort, …)
};

const char* op_pattern_name(OpPattern p);

/// Tags on te compute ops. Main stages of complex ops use their operator name as the tag.
namespace tag {
constexpr const char* kElemWise = "elemwise";
constexpr const char* kBroadcast = "broadcast";
constexpr const char* kInjective = "injective";
constexpr const char* kCommReduce = "comm_reduce";
constexpr const char* kCommReduceIdx = "comm_reduce_idx";
}  // namespace tag

/// True if a compute tagged `t` is injective (elemwise, broadcast or injective tags, or a tag
/// starting with one of them followed by ',' — e.g. "elemwise,relu").
bool is_injective_tag(const std::string& t);

}  // namespace kiln::topi
