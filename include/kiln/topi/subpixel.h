/// \file subpixel.h
/// \brief Transposed convolution by sub-pixel (phase) decomposition: the plan of the stacked
/// convolution and the interleave that scatters its phases into the output.
///
/// Along one spatial axis, an ONNX ConvTranspose (stride s, kernel K, padding before pb,
/// dilation 1) writes output o = s·i − pb + k. For output y, let q = y + pb: the taps that reach
/// it are k = (q mod s) + s·t, t = 0..T−1 (T = ceil(K/s); a tap k ≥ K is zero), reading input
/// i = floor(q/s) − t. So every phase r = q mod s is an ordinary stride-1 convolution of the
/// input with a T-tap kernel, and the s² phases of a 2-D transposed convolution, stacked along
/// output channels (phase (ry, rx) at channels [(ry·sx + rx)·O, (ry·sx + rx + 1)·O)), are ONE
/// convolution (padding pad_lo before, pad_hi after) whose output position
/// floor(q/s) + offset holds output y. The interleave
///   out[n, o, y, x] = phases[n, (ry·sw + rx)·O + o, floor(qy/sh) + offset_h,
///                            floor(qx/sw) + offset_w],   qy = y + shift_h, ry = qy mod sh, …
/// is injective; it reads NCHW or NCHW<b>c phases (channels past s²·O are ignored) and writes
/// NCHW or NCHW<b>c. Only the useful multiply-adds are computed, up to the extra output row
/// and column the shared padding costs; computing each phase by its own convolution
/// (plan_subpixel_phase, the interleave of one tensor per phase) avoids those too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/te/tensor.h"

namespace kiln::topi {

/// The stacked convolution along one spatial axis (see the file comment).
struct SubpixelAxis {
  int64_t taps = 0;         ///< T = ceil(K / s)
  int64_t pad_lo = 0;       ///< the stacked convolution's padding before
  int64_t pad_hi = 0;       ///< ... and after
  int64_t shift = 0;        ///< q = y + shift (the transposed convolution's padding before)
  int64_t offset = 0;       ///< output y sits at position floor(q / s) + offset
  int64_t conv_extent = 0;  ///< the stacked convolution's output extent
};

/// The plan along one axis of a transposed convolution with input extent `in`, kernel `k`,
/// stride `s`, padding before `pad_begin`, dilation 1 and output extent `out` (which includes
/// the padding after and any output_padding). A user error for non-positive sizes.
SubpixelAxis plan_subpixel_axis(int64_t in, int64_t k, int64_t s, int64_t pad_begin, int64_t out);

/// The convolution of phase `r` (0 <= r < s: the outputs y with (y + pad_begin) mod s = r)
/// alone along one axis: taps ceil((K − r) / s), and paddings such that its positions hold
/// exactly that phase's outputs (output y at floor(q / s) + offset). Phases computed apart
/// have no shared extra row or column and no zero taps. taps is 0 when r >= K and
/// conv_extent 0 when no output falls in phase r.
SubpixelAxis plan_subpixel_phase(int64_t in, int64_t k, int64_t s, int64_t pad_begin, int64_t out,
                                 int64_t r);

/// The interleave's attributes.
struct SubpixelParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t shift_h = 0, shift_w = 0;
  int64_t offset_h = 0, offset_w = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t channels = 0;   ///< O, the output channels of one phase
  int64_t out_block = 0;  ///< 0: NCHW output; b > 0: NCHW<b>c (b divides channels)
  /// With one input per phase: each phase's own offsets (added to offset_h / offset_w), by
  /// phase along the axis (stride_h, stride_w values); empty with one stacked input.
  std::vector<int64_t> phase_offsets_h, phase_offsets_w;
};

/// The output shape of subpixel_interleave for phases of shape `in` ([N, C, P, Q] or
/// [N, C/b, P, Q, b]); a user error naming the problem when the phases do not cover every
/// output (too few channels or positions) or the attributes are invalid.
std::vector<int64_t> subpixel_interleave_shape(const std::vector<int64_t>& in,
                                               const SubpixelParams& p);

/// The interleave of the file comment (tag "injective,subpixel_interleave").
te::Tensor subpixel_interleave(const te::Tensor& phases, const SubpixelParams& p,
                               const std::string& name = "subpixel_interleave");

/// The output shape when each phase (ry, rx) is its own tensor `in[ry·sw + rx]` of O channels
/// (all NCHW or all NCHW<b>c): out[n, o, y, x] = in[ry·sw + rx][n, o, floor(qy / sh) +
/// offset_h + phase_offsets_h[ry], …]. A user error naming the phase when one does not cover
/// its outputs.
std::vector<int64_t> subpixel_interleave_shape(const std::vector<std::vector<int64_t>>& in,
                                               const SubpixelParams& p);

/// The interleave of one tensor per phase (in row-major phase order).
te::Tensor subpixel_interleave(const std::vector<te::Tensor>& phases, const SubpixelParams& p,
                               const std::string& name = "subpixel_interleave");

}  // namespace kiln::topi
