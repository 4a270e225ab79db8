// Blocked layouts, shared by the layout pass (alter_layout.cc) and the CPU layout hooks
// (strategy/cpu_layout.cc): "NCHW<b>c" names, block sizes and blocked types; and the check that
// a graph does not convert a tensor back and forth between blocked ops (layout_round_trips).
#pragma once

#include <string>
#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::graph::detail {

/// The block size of "NCHW<b>c"; 0 for "" (plain NCHW).
inline int64_t block_of(const std::string& layout) {
  if (layout.empty() || layout == "NCHW") return 0;
  return std::stoll(layout.substr(4, layout.size() - 5));
}

/// "NCHW<bn>c".
inline std::string blocked_layout(int64_t bn) { return "NCHW" + std::to_string(bn) + "c"; }

/// [N, C/bn, H, W, bn] for a 4-D NCHW type.
inline TensorType blocked_type(const TensorType& t, int64_t bn) {
  return {{t.shape[0], t.shape[1] / bn, t.shape[2], t.shape[3], bn}, t.dtype};
}

/// The layout_transform nodes of `g` (after alter_op_layout) that block again a tensor computed
/// from one a layout_transform unblocked: each is a round trip NCHW<b>c → NCHW → NCHW<b>c
/// between two blocked ops (through the plain ops between them). Tests assert there are none,
/// or only small ones (their element counts: the nodes' output types).
std::vector<int> layout_round_trips(const Graph& g);

}  // namespace kiln::graph::detail
