/// \file depthwise_conv2d.h
/// \brief Depthwise 2-D convolution (each input channel convolved with its own filters) in
/// NCHW and in the blocked layout NCHW[x]c. pattern: out_ewise_fusable (kConv2DPattern).
///
/// Workloads are Conv2DWorkload with groups == in_channel and out_channel = in_channel *
/// multiplier. The NCHW kernel is [C * M, 1, KH, KW] (the grouped-conv / ONNX layout; output
/// channel o reads input channel o / M). The blocked form supports multiplier 1: data
/// [N, C/x, H, W, x], kernel packed by pack_depthwise_weight into [C/x, 1, KH, KW, 1, x], output
/// [N, C/x, OH, OW, x].
///
/// Depthwise convolution is memory-bound (9 FMAs per output for 3x3, one input read per
/// output at stride 1): its NCHWc schedule vectorizes over the channel block, keeps a register
/// tile of tile_ow output vectors, runs channel chunks x rows in parallel, and avoids a separate
/// pass over memory for the padding (knob pad_at: 0 root pass, 1 padded rows at the row loop,
/// 2 padded plane at the channel-chunk loop, 3 "inline", the fallback: no padded copy, the
/// bounds checks are left only in the border tiles by loop_partition).
/// docs/conv2d-schedule.md has the measurements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/topi/conv2d.h"

namespace kiln::topi {

/// Shape rule: [N, C*M, OH, OW] from data [N, C, H, W] and kernel [C*M, 1, KH, KW]; a user
/// error naming "depthwise_conv2d_nchw", the shapes and the attributes otherwise (groups must
/// be 1 or C: the op is depthwise by definition).
std::vector<int64_t> depthwise_conv2d_nchw_shape(const std::vector<int64_t>& data,
                                                 const std::vector<int64_t>& kernel,
                                                 const Conv2DParams& params);
/// out[n, o, y, x] = sum_{kh, kw} pad(data)[n, o / M, y*sh + kh*dh, x*sw + kw*dw] *
/// kernel[o, 0, kh, kw]. Main stage tag "depthwise_conv2d_nchw". pattern: out_ewise_fusable
te::Tensor depthwise_conv2d_nchw(const te::Tensor& data, const te::Tensor& kernel,
                                 const Conv2DParams& params,
                                 const std::string& name = "depthwise_conv2d_nchw");
/// The NCHW row schedule (as conv2d_nchw's: knobs tile_ow, vectorize, parallel_rows).
void schedule_depthwise_conv2d_nchw(autotune::Config& cfg, te::Schedule& s, const te::Tensor& out,
                                    const Target& target);
te::Schedule schedule_depthwise_conv2d_nchw(const std::vector<te::Tensor>& outs,
                                            const Target& target);
/// Template "depthwise_conv2d_nchw": args {data, kernel, out}.
autotune::Template depthwise_conv2d_nchw_template(const Conv2DWorkload& wl, const Target& target);

/// [C/bn, 1, KH, KW, 1, bn] for a kernel [C, 1, KH, KW]; a user error when bn does not divide C.
std::vector<int64_t> packed_depthwise_weight_shape(const std::vector<int64_t>& kernel, int64_t bn);
/// out[cb, 0, kh, kw, 0, ci] = kernel[cb*bn + ci, 0, kh, kw] (constant-folded at compile time).
/// pattern: injective
te::Tensor pack_depthwise_weight(const te::Tensor& kernel, int64_t bn,
                                 const std::string& name = "packed_kernel");
/// Shape rule of depthwise_conv2d_nchwc: [N, C/x, OH, OW, x]; user errors name
/// "depthwise_conv2d_nchwc".
std::vector<int64_t> depthwise_conv2d_nchwc_shape(const std::vector<int64_t>& data,
                                                  const std::vector<int64_t>& packed_kernel,
                                                  const Conv2DParams& params);
/// The blocked depthwise convolution (multiplier 1), main stage tag "depthwise_conv2d_nchwc",
/// followed by the epilogue stage when `epilogue` is not empty (bias is [C]).
te::Tensor depthwise_conv2d_nchwc(const te::Tensor& data, const te::Tensor& packed_kernel,
                                  const Conv2DParams& params, const EpilogueSpec& epilogue = {},
                                  const std::string& name = "depthwise_conv2d_nchwc");
/// Declares the knobs (tile_c, tile_ow, tile_oh, unroll_kw, pad_at) and returns the channel
/// block.
int64_t define_depthwise_nchwc_knobs(autotune::Config& cfg, const Conv2DWorkload& wl,
                                     const Target& target,
                                     ChannelBlocks blocks = ChannelBlocks::kTuned);
/// Schedules the group whose output is `out` and whose main stage is a depthwise_conv2d_nchwc.
void schedule_depthwise_conv2d_nchwc(autotune::Config& cfg, te::Schedule& s, const te::Tensor& out,
                                     const Target& target);
te::Schedule schedule_depthwise_conv2d_nchwc(const std::vector<te::Tensor>& outs,
                                             const Target& target);
/// Template "depthwise_conv2d_nchwc": args {data (NCHW<bn>c), packed kernel, [bias [C]], out},
/// bn chosen by the config's tile_c (or pinned to the default block, see ChannelBlocks).
autotune::Template depthwise_conv2d_nchwc_template(const Conv2DWorkload& wl, const Target& target,
                                                   bool bias_relu = false,
                                                   ChannelBlocks blocks = ChannelBlocks::kTuned);

}  // namespace kiln::topi
