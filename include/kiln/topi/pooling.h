/// \file pooling.h
/// \brief 2-D pooling: max and average over sliding windows, global pooling and adaptive
/// pooling, in the NCHW and NCHW[x]c (blocked channel) layouts.
///
/// Pattern kind: `kOutEWiseFusable`, as in TVM (pool2d, global_pool2d and adaptive_pool2d all
/// register OUT_ELEMWISE_FUSABLE there). A pool is a windowed reduction whose output elements
/// read overlapping inputs, so injective producers are not inlined into it (that would redo
/// their work per window tap), but element-wise consumers (relu, requantize, …) fuse after it
/// and are computed in the pool's output loop.
///
/// Semantics follow PyTorch (torch.nn.MaxPool2d / AvgPool2d / AdaptiveAvgPool2d):
/// * out = floor_or_ceil((H + pad_top + pad_bottom - dilation·(k - 1) - 1) / stride) + 1; with
///   ceil_mode a last window that would start in the bottom/right padding is dropped.
/// * Max pooling ignores padding (padded taps are -inf).
/// * Average pooling divides by the number of taps inside the padded input
///   [-pad_begin, size + pad_end) when count_include_pad, else by the number of taps inside
///   the input itself (windows clipped by ceil_mode count only what they cover).
/// * Adaptive pooling: output index o covers input [floor(o·H/OH), ceil((o+1)·H/OH)).
///
/// Layouts: "NCHW" (x [N, C, H, W]) or "NCHW<x>c" (x [N, C/x, H, W, x]); the output has the
/// same layout. Errors name the op, the layout and the shapes.
///
/// The CPU schedule (`pool_template` / `schedule_pool`): the batch, channel (block) and output
/// row loops are fused and parallel; for NCHW the output row is split by the vector lanes and
/// the inner part vectorized under the window loops, for NCHWc the channel block is the
/// vector. Knobs: "vec" (vectorize, default on) and "unroll_window" (unroll the window loops
/// when the window has at most 16 taps; default on). Average pooling sums into a local row
/// computed at the output row and scales when it writes out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/autotune/template.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

/// Pattern kind of every pooling operator.
constexpr OpPattern kPoolPattern = OpPattern::kOutEWiseFusable;

enum class PoolType : uint8_t { kMax, kAvg };
const char* pool_type_name(PoolType t);

namespace tag {
constexpr const char* kPool = "pool";         ///< the windowed reduction (max, or avg's sum)
constexpr const char* kPoolAvg = "pool_avg";  ///< avg: the scaling stage after the sum
constexpr const char* kPoolPad = "pool_pad";  ///< NCHW: the padded input rows
}  // namespace tag

/// Window attributes of pool2d. Padding is {top, left, bottom, right}.
struct Pool2DAttrs {
  std::vector<int64_t> kernel{2, 2};
  std::vector<int64_t> stride{1, 1};
  std::vector<int64_t> padding{0, 0, 0, 0};
  std::vector<int64_t> dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;  ///< avg only
};

/// The output extent of one pooled dimension (PyTorch's rule; see the file comment).
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                         int64_t pad_end, int64_t dilation, bool ceil_mode);

/// Windowed max / average pooling over H and W. pattern: out_ewise_fusable
te::Tensor pool2d(const te::Tensor& x, PoolType type, const Pool2DAttrs& attrs,
                  const std::string& layout = "NCHW", const std::string& name = "pool2d");

/// Pooling over all of H and W: output H = W = 1. pattern: out_ewise_fusable
te::Tensor global_pool2d(const te::Tensor& x, PoolType type, const std::string& layout = "NCHW",
                         const std::string& name = "global_pool2d");

/// Pooling to a given output size {OH, OW} (PyTorch's adaptive windows). pattern:
/// out_ewise_fusable
te::Tensor adaptive_pool2d(const te::Tensor& x, PoolType type, std::vector<int64_t> output_size,
                           const std::string& layout = "NCHW",
                           const std::string& name = "adaptive_pool2d");

/// Schedules the pooling group whose output is `out` (a pool, or an element-wise stage on
/// one: intermediate injective stages are inlined) in `s` with knobs "vec" and
/// "unroll_window" of `cfg` (see the file comment).
void schedule_pool(autotune::Config& cfg, te::Schedule& s, const te::Tensor& out,
                   const Target& target);

/// Default schedule (fallback config) of a pooling group.
te::Schedule schedule_pool(const std::vector<te::Tensor>& outs, const Target& target);

/// A pooling workload for the template: which op, its input shape and attributes.
struct PoolWorkload {
  enum Kind : uint8_t { kWindow, kGlobal, kAdaptive } kind = kWindow;
  PoolType type = PoolType::kMax;
  std::vector<int64_t> shape;  ///< the input shape in `layout`
  std::string layout = "NCHW";
  Pool2DAttrs attrs;                 ///< kWindow
  std::vector<int64_t> output_size;  ///< kAdaptive
};

/// The template "pool2d_cpu": arguments x, out.
autotune::Template pool_template(const PoolWorkload& w, const Target& target);

}  // namespace kiln::topi
