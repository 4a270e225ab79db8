/// \file conv2d_grouped.h
/// \brief Grouped 2-D convolution (1 < groups, not depthwise) in the x86 blocked layout
/// NCHW[x]c: ResNeXt's and RegNet's 3x3 layers (group widths 4 to a few hundred channels).
///
/// Data [N, C/x, H, W, x] and output [N, O/y, OH, OW, y] are blocked like conv2d_nchwc's, so
/// the 1x1 convolutions around a grouped layer hand it their blocked tensors directly. The kernel
/// [O, C/groups, KH, KW] is packed once (at compile time) into [O/y, R, KH, KW, x, y]: output
/// block `ob` reduces over the R input blocks that start at `first_input_block(ob)`, the blocks
/// holding the input channels of the groups its y output channels belong to; kernel entries that
/// pair an input channel with an output channel of another group are zero. When x divides the
/// input and y the output group width, each output block reads exactly its group's blocks (no
/// zero); when a block holds several whole groups (group width 4 or 8 with 16-wide blocks), R = 1
/// and the packed kernel is block diagonal (the zeros cost groups-per-block times the
/// multiply-adds, still far faster than the NCHW schedule, and cheaper than layout transforms to
/// narrower blocks). Other widths (24 channels in 16-wide blocks) read the blocks their groups
/// overlap.
///
/// The main stage has conv2d_nchwc's tag and reduction structure (input block, kh, kw, channel
/// in block), so conv2d_nchwc's schedule and knobs apply unchanged; only the input block an
/// output block reads differs. docs/conv2d-schedule.md ("Grouped convolutions") has the blocks'
/// choice and measurements.
///
///   Conv2DWorkload wl{1, 128, 28, 28, 128, 3, 3, {1, 1, Padding2D::all(1), 1, 1, 8}};
///   GroupedConv2DBlocks b = choose_grouped_conv2d_blocks(wl, Target::host());
///   autotune::Template t = conv2d_grouped_nchwc_template(wl, {}, Target::host());
///   // args {data NCHW<b.ic_bn>c, pack_grouped_conv2d_weight(w, b), out NCHW<b.oc_bn>c}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/autotune/template.h"
#include "kiln/ir/expr.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/conv2d.h"

namespace kiln::topi {

/// How a grouped convolution's channels are blocked, and which input blocks each output block
/// reads.
struct GroupedConv2DBlocks {
  int64_t groups = 1, in_channel = 0, out_channel = 0;
  int64_t ic_bn = 0, oc_bn = 0;
  int64_t span = 0;  ///< R: the input blocks one output block reduces over

  /// The blocks of a convolution with C input and O output channels in `groups` groups; a user
  /// error naming `op` when groups does not divide both or a block does not divide its channels.
  static GroupedConv2DBlocks make(int64_t in_channel, int64_t out_channel, int64_t groups,
                                  int64_t ic_bn, int64_t oc_bn, const std::string& op);

  int64_t in_per_group() const { return in_channel / groups; }
  int64_t out_per_group() const { return out_channel / groups; }
  /// The first input block output block `ob` reads (its R blocks end inside the input).
  int64_t first_input_block(int64_t ob) const;
  /// The same as an expression of `ob` (a multiply, a division and a multiply, or the general
  /// clamped form when blocks and groups do not nest).
  ir::Expr first_input_block(const ir::Expr& ob) const;
  /// Multiply-adds computed per useful one: R * ic_bn / (C / groups), at least 1.
  double waste() const;
  /// "groups 8, blocks ic 16 oc 16, span 1".
  std::string str() const;
};

/// The default blocks of a grouped workload on `target`: the lanes-wide blocks conv2d_nchwc
/// uses (no layout transform next to its neighbours), unless groups of 16 or more input channels
/// would waste multiply-adds in them (24 or 56 channels in 16-wide blocks) and a block of at least
/// 8 channels (at most the lanes) at least halves the waste, or the lanes-wide blocks would
/// compute more than 4 multiply-adds per useful one: then the block wasting the fewest. A user
/// error when the workload is not a grouped convolution (groups 1 or depthwise, or groups not
/// dividing the channels), or when no block computes at most 4 multiply-adds per useful one (one
/// or two input channels per group: the NCHW schedule is the better choice).
GroupedConv2DBlocks choose_grouped_conv2d_blocks(const Conv2DWorkload& wl, const Target& target);

/// [O/oc_bn, R, KH, KW, ic_bn, oc_bn] for a grouped OIHW kernel [O, C/groups, KH, KW].
std::vector<int64_t> packed_grouped_conv2d_weight_shape(const std::vector<int64_t>& oihw,
                                                        const GroupedConv2DBlocks& b);
/// Packs a float32 grouped kernel [O, C/groups, KH, KW]: out[ob, r, kh, kw, i, o] =
/// kernel[ob*oc_bn + o, c - g*(C/groups), kh, kw] with c = (first_input_block(ob) + r)*ic_bn + i
/// and g = (ob*oc_bn + o) / (O/groups) when c is one of group g's input channels, else 0.
runtime::NDArray pack_grouped_conv2d_weight(const runtime::NDArray& kernel,
                                            const GroupedConv2DBlocks& b);

/// Shape rule of conv2d_grouped_nchwc: [N, O/y, OH, OW, y] from data [N, C/x, H, W, x] and the
/// packed kernel [O/y, R, KH, KW, x, y] with params.groups > 1; a user error naming
/// "conv2d_grouped_nchwc", the shapes and the attributes otherwise (R must be the span of the
/// blocks).
std::vector<int64_t> conv2d_grouped_nchwc_shape(const std::vector<int64_t>& data,
                                                const std::vector<int64_t>& packed_kernel,
                                                const Conv2DParams& params);

/// out[n, ob, y, x, oi] = sum_{r, kh, kw, ii} pad(data)[n, first_input_block(ob) + r, y*sh +
/// kh*dh, x*sw + kw*dw, ii] * packed[ob, r, kh, kw, ii, oi]. Main stage tag "conv2d_nchwc"
/// (conv2d_nchwc's schedule applies), followed by the epilogue stage when `epilogue` is not
/// empty. pattern: out_ewise_fusable
te::Tensor conv2d_grouped_nchwc(const te::Tensor& data, const te::Tensor& packed_kernel,
                                const Conv2DParams& params, const EpilogueSpec& epilogue = {},
                                const std::string& name = "conv2d_grouped_nchwc");

/// Declares the template's knobs on `cfg`: tile_ic / tile_oc pinned to the blocks `choose_
/// grouped_conv2d_blocks` picks (the layout), then conv2d_nchwc's schedule knobs (oc_reg,
/// tile_oh, tile_ow, unroll_kw, unroll_ic, acc_outer) with their fallbacks; returns the blocks.
GroupedConv2DBlocks define_conv2d_grouped_nchwc_knobs(autotune::Config& cfg,
                                                      const Conv2DWorkload& wl,
                                                      const Target& target);

/// Schedules the group whose output is `out` and whose main stage is a conv2d_grouped_nchwc:
/// conv2d_nchwc's schedule (register tiles over ow x output-channel vectors, reduction over the
/// group's input blocks and the kernel taps, parallel over tiles).
void schedule_conv2d_grouped_nchwc(autotune::Config& cfg, te::Schedule& s, const te::Tensor& out,
                                   const Target& target);

/// Template "conv2d_grouped_nchwc": args {data (NCHW<ic_bn>c), packed kernel, [bias [O]],
/// [residual (NCHW<oc_bn>c)], out}.
autotune::Template conv2d_grouped_nchwc_template(const Conv2DWorkload& wl, const EpilogueFlags& ep,
                                                 const Target& target);

}  // namespace kiln::topi
