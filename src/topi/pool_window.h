// Internal to topi: the per-axis window arithmetic that pooling over 2-D (pooling.cc) and
// 1-D / 3-D windows (conv_nd.cc) share.
#pragma once

#include <cstdint>
#include <functional>

#include "kiln/ir/expr.h"

namespace kiln::topi::detail {

/// a && b, where an undefined condition means "always".
inline ir::Expr and_opt(ir::Expr a, ir::Expr b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a && b;
}

/// One pooled axis: output extent, taps, input position of tap r of output o, the condition
/// that the tap is taken (undefined: always), and the avg divisor along this axis.
struct AxisWindow {
  int64_t out = 0, taps = 0;
  /// Padded windows: the padding before the input and the extent of the padded input the
  /// windows read (at least pad_begin + the input's extent); 0 for adaptive windows.
  int64_t pad_begin = 0, padded = 0;
  std::function<ir::Expr(ir::Expr o, ir::Expr r)> pos;
  std::function<ir::Expr(ir::Expr o, ir::Expr r)> take;
  std::function<ir::Expr(ir::Expr o)> count;
};

/// The window of an input axis of extent `in`: kernel k, stride s, padding pb / pe, dilation
/// d; ceil_mode rounds the output extent up; include_pad counts padded taps in the divisor.
AxisWindow window_axis(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d,
                       bool ceil_mode, bool include_pad);

}  // namespace kiln::topi::detail
