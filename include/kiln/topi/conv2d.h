/// \file conv2d.h
/// \brief 2-D convolution in NCHW and in the x86 blocked layout NCHW[x]c.
///
/// Both have pattern kind kOutEWiseFusable: element-wise consumers (bias, relu, residual add)
/// fuse into the convolution's output stage.
///
/// * `conv2d_nchw`: data [N, C, H, W], kernel [O, C/groups, KH, KW] (OIHW), per-side padding,
///   strides, dilation, groups; output [N, O, OH, OW]. Its schedule is a simple reference
///   (parallel over n*oc and output rows, a row accumulator vectorized over ow).
/// * `conv2d_nchwc`: the fast path (TVM's conv2d_NCHWc, conv2d_avx_common / conv2d_avx_1x1):
///   data [N, C/x, H, W, x], kernel pre-packed by `pack_conv2d_weight` into
///   OIHW[x]i[y]o = [O/y, C/x, KH, KW, x, y], output [N, O/y, OH, OW, y]; groups = 1 only
///   (grouped convolutions use conv2d_nchw; depthwise ones depthwise_conv2d.h). An optional
///   epilogue (bias per output channel, relu, residual add) is computed in one element-wise
///   stage that the schedule fuses into the output.
///
/// Schedules are autotune templates (docs/template-api.md) whose fallback configs are the
/// defaults; docs/conv2d-schedule.md explains the NCHWc knobs and the measured defaults.
///
///   Conv2DWorkload wl{1, 64, 56, 56, 64, 3, 3, {1, 1, Padding2D::all(1)}};
///   autotune::Template t = conv2d_nchwc_template(wl, {}, Target::host());
///   autotune::Instance inst = autotune::instantiate(t, autotune::Config::fallback());
///   // inst.args = {data [1, 64/x, 56, 56, x], packed kernel, output}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/autotune/template.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/nn_util.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

/// Pattern kind of every convolution operator.
constexpr OpPattern kConv2DPattern = OpPattern::kOutEWiseFusable;

/// A convolution's logical (NCHW / OIHW) shapes and attributes: what templates are keyed by.
struct Conv2DWorkload {
  int64_t batch = 1, in_channel = 0, height = 0, width = 0;
  int64_t out_channel = 0, kernel_h = 0, kernel_w = 0;
  Conv2DParams params;

  int64_t out_height() const;
  int64_t out_width() const;
  std::vector<int64_t> data_shape() const;    ///< [N, C, H, W]
  std::vector<int64_t> kernel_shape() const;  ///< [O, C/groups, KH, KW]
  std::vector<int64_t> out_shape() const;     ///< [N, O, OH, OW]
  /// Multiply-adds times two.
  double flops() const;
  /// "conv2d N1 C64 H56 W56 O64 K3x3 strides (1, 1), padding …".
  std::string str() const;
};

// ---------------------------------------------------------------------------------------------
// NCHW

/// Shape rule: the output shape [N, O, OH, OW] of conv2d_nchw, or a user error naming
/// "conv2d_nchw", the shapes and the attributes (rank, channel / group mismatch, a kernel
/// larger than the padded input, bad attributes).
std::vector<int64_t> conv2d_nchw_shape(const std::vector<int64_t>& data,
                                       const std::vector<int64_t>& kernel,
                                       const Conv2DParams& params);

/// out[n, o, y, x] = sum_{c, kh, kw} pad(data)[n, g(o) * C/groups + c, y*sh + kh*dh,
/// x*sw + kw*dw] * kernel[o, c, kh, kw], with g(o) = o / (O / groups). The padding is its
/// own stage (pad_spatial). Main stage tag "conv2d_nchw". pattern: out_ewise_fusable
te::Tensor conv2d_nchw(const te::Tensor& data, const te::Tensor& kernel, const Conv2DParams& params,
                       const std::string& name = "conv2d_nchw");

/// Schedules the group whose output is `out` and whose main stage is a conv2d_nchw (found by
/// tag), with knobs tile_ow (row accumulator width), vectorize and parallel_rows.
void schedule_conv2d_nchw(autotune::Config& cfg, te::Schedule& s, const te::Tensor& out,
                          const Target& target);
/// The fallback (untuned) schedule of a group whose first output holds a conv2d_nchw: the
/// rule-based scheduler (auto_schedule.h).
te::Schedule schedule_conv2d_nchw(const std::vector<te::Tensor>& outs, const Target& target);
/// Template "conv2d_nchw": args {data, kernel, out}.
autotune::Template conv2d_nchw_template(const Conv2DWorkload& wl, const Target& target);

// ---------------------------------------------------------------------------------------------
// NCHW[x]c

/// [O/oc_bn, C/ic_bn, KH, KW, ic_bn, oc_bn] for an OIHW kernel shape; a user error when a
/// block does not divide its channel count.
std::vector<int64_t> packed_conv2d_weight_shape(const std::vector<int64_t>& oihw, int64_t ic_bn,
                                                int64_t oc_bn);
/// Packs an OIHW kernel into OIHW[ic_bn]i[oc_bn]o: out[ob, ib, kh, kw, ii, oi] =
/// kernel[ob*oc_bn + oi, ib*ic_bn + ii, kh, kw]. Meant to be constant-folded at compile time.
/// Tag "injective,pack_conv2d_weight". pattern: injective
te::Tensor pack_conv2d_weight(const te::Tensor& kernel, int64_t ic_bn, int64_t oc_bn,
                              const std::string& name = "packed_kernel");

/// Element-wise consumers fused into conv2d_nchwc's output (each optional):
/// out = relu?(conv + bias[oc] + residual[n, ob, y, x, oi]).
struct EpilogueSpec {
  te::Tensor bias;      ///< [O], per output channel
  bool relu = false;    ///< max(., 0) last
  te::Tensor residual;  ///< the output's shape [N, O/y, OH, OW, y]
  bool empty() const { return !bias.defined() && !relu && !residual.defined(); }
};

/// Shape rule of conv2d_nchwc: [N, O/y, OH, OW, y] from data [N, C/x, H, W, x] and packed
/// kernel [O/y, C/x, KH, KW, x, y]; a user error naming "conv2d_nchwc", the shapes and the
/// attributes otherwise (groups must be 1).
std::vector<int64_t> conv2d_nchwc_shape(const std::vector<int64_t>& data,
                                        const std::vector<int64_t>& packed_kernel,
                                        const Conv2DParams& params);

/// The blocked convolution; the main stage (tag "conv2d_nchwc") is followed, when `epilogue`
/// is not empty, by one element-wise stage (tag "elemwise,conv2d_epilogue") that is returned.
/// pattern: out_ewise_fusable
te::Tensor conv2d_nchwc(const te::Tensor& data, const te::Tensor& packed_kernel,
                        const Conv2DParams& params, const EpilogueSpec& epilogue = {},
                        const std::string& name = "conv2d_nchwc");

/// The blocking a config chose for a workload: channel blocks and the layouts they imply.
struct Conv2DNCHWcLayout {
  int64_t ic_bn = 0, oc_bn = 0;
  std::string data_layout;                                   ///< "NCHW<ic_bn>c"
  std::string out_layout;                                    ///< "NCHW<oc_bn>c"
  std::vector<int64_t> data_shape, kernel_shape, out_shape;  ///< blocked shapes
};

/// Whether a conv2d_nchwc config chooses its channel blocks (tile_ic / tile_oc; the space of
/// an operator tuned alone) or keeps the default lanes-wide ones (inside a graph: untuned
/// neighbours use them, so a tuned layer needs no layout transforms around it).
enum class ChannelBlocks : uint8_t { kTuned, kDefault };

/// Declares the knobs of the NCHWc template on `cfg` (tile_ic, tile_oc, oc_reg, tile_oh,
/// tile_ow, unroll_kw, unroll_ic) with their fallback defaults, and returns the layout they
/// choose.
Conv2DNCHWcLayout define_conv2d_nchwc_knobs(autotune::Config& cfg, const Conv2DWorkload& wl,
                                            const Target& target,
                                            ChannelBlocks blocks = ChannelBlocks::kTuned);

/// Schedules the group whose output is `out` and whose main stage is a conv2d_nchwc (found by
/// tag): padding as a root stage (parallel, vectorized over the channel block), the output
/// computed tile by tile (tile_oh x tile_ow x oc block) through a register accumulator (the
/// conv stage itself, in local scope, when an epilogue follows; otherwise a cache_write) at the
/// ow-tile loop, element-wise stages inlined. The config's tile_ic / tile_oc must match the
/// tensors' blocks when it has them.
void schedule_conv2d_nchwc(autotune::Config& cfg, te::Schedule& s, const te::Tensor& out,
                           const Target& target);
/// The fallback (untuned) schedule.
te::Schedule schedule_conv2d_nchwc(const std::vector<te::Tensor>& outs, const Target& target);

/// Which epilogue stages a template instance includes.
struct EpilogueFlags {
  bool bias = false, relu = false, residual = false;
};
/// Template "conv2d_nchwc": args {data (NCHW<ic_bn>c), packed kernel, [bias [O]],
/// [residual (NCHW<oc_bn>c)], out}, blocks chosen by the config's tile_ic / tile_oc.
autotune::Template conv2d_nchwc_template(const Conv2DWorkload& wl, const EpilogueFlags& ep,
                                         const Target& target,
                                         ChannelBlocks blocks = ChannelBlocks::kTuned);

}  // namespace kiln::topi
