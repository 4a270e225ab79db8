// Blocked layouts, shared by the layout pass (alter_layout.cc) and the CPU layout hooks
// (strategy/cpu_layout.cc): "NCHW<b>c" names, block sizes and blocked types.
#pragma once

#include <string>

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

}  // namespace kiln::graph::detail
