// Grouped conv2d (1 < groups, not depthwise) in the blocked layout NCHW[x]c. Output block ob
// (y output channels) belongs to one or more groups; it reduces over the R input blocks (x
// channels each) that hold those groups' input channels, starting at first_input_block(ob), with
// a kernel packed at compile time into [O/y, R, KH, KW, x, y] whose entries are zero where an
// input channel and an output channel belong to different groups. Three cases of the same
// compute: x and y divide the group widths (each output block reads exactly its group's
// C/groups/x blocks, no zero: RegNet's 16-, 24- and 56-wide groups in 16- or 8-wide blocks);
// a block holds k whole groups on both sides (R = 1, block-diagonal kernel, k times the
// multiply-adds: ResNeXt's 4-wide groups); or neither (the blocks the groups overlap, clamped to
// the input). The main stage is tagged like conv2d_nchwc's and has its reduction structure
// (input block, kh, kw, channel in block), so conv2d_nchwc's register-tiled schedule and its
// knobs apply unchanged; choose_grouped_conv2d_blocks picks blocks that waste few multiply-adds
// while keeping the neighbours' lanes-wide layout where it can.
#include "kiln/topi/conv2d_grouped.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "conv2d_common.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;
using detail::ci;

namespace {

constexpr const char* kOp = "conv2d_grouped_nchwc";
/// The main stage's tag: conv2d_nchwc's, whose schedule this compute shares.
constexpr const char* kMainTag = "conv2d_nchwc";
/// The most multiply-adds per useful one the chosen blocks may compute.
constexpr double kMaxWaste = 4.0;

/// The first input block and the number of blocks output block `ob` needs, before clamping.
std::pair<int64_t, int64_t> needed_blocks(const GroupedConv2DBlocks& b, int64_t ob) {
  const int64_t ig = b.in_per_group(), og = b.out_per_group();
  const int64_t g0 = ob * b.oc_bn / og, g1 = (ob * b.oc_bn + b.oc_bn - 1) / og;
  const int64_t lo = g0 * ig / b.ic_bn, hi = ((g1 + 1) * ig + b.ic_bn - 1) / b.ic_bn;
  return {lo, hi - lo};
}

}  // namespace

GroupedConv2DBlocks GroupedConv2DBlocks::make(int64_t in_channel, int64_t out_channel,
                                              int64_t groups, int64_t ic_bn, int64_t oc_bn,
                                              const std::string& op) {
  KILN_USER_CHECK(groups >= 1 && in_channel > 0 && out_channel > 0 && in_channel % groups == 0 &&
                  out_channel % groups == 0)
      << op << ": groups " << groups << " must divide the " << in_channel << " input and "
      << out_channel << " output channels";
  KILN_USER_CHECK(ic_bn > 0 && oc_bn > 0 && in_channel % ic_bn == 0 && out_channel % oc_bn == 0)
      << op << ": blocks (ic " << ic_bn << ", oc " << oc_bn << ") must divide the " << in_channel
      << " input and " << out_channel << " output channels";
  GroupedConv2DBlocks b;
  b.groups = groups;
  b.in_channel = in_channel;
  b.out_channel = out_channel;
  b.ic_bn = ic_bn;
  b.oc_bn = oc_bn;
  for (int64_t ob = 0; ob < out_channel / oc_bn; ++ob)
    b.span = std::max(b.span, needed_blocks(b, ob).second);
  return b;
}

int64_t GroupedConv2DBlocks::first_input_block(int64_t ob) const {
  return std::min(needed_blocks(*this, ob).first, in_channel / ic_bn - span);
}

Expr GroupedConv2DBlocks::first_input_block(const Expr& ob) const {
  const int64_t ig = in_per_group(), og = out_per_group();
  // The group's own blocks: og / oc_bn output blocks per group, ig / ic_bn input blocks.
  if (og % oc_bn == 0 && ig % ic_bn == 0) {
    Expr g = og == oc_bn ? ob : floordiv(ob, ci(og / oc_bn));
    return ig == ic_bn ? g : g * ci(ig / ic_bn);
  }
  // k whole groups per block on both sides: input block ob.
  if (oc_bn % og == 0 && ic_bn % ig == 0 && oc_bn / og == ic_bn / ig) return ob;
  Expr lo = floordiv(floordiv(ob * ci(oc_bn), ci(og)) * ci(ig), ci(ic_bn));
  return min(lo, ci(in_channel / ic_bn - span));
}

double GroupedConv2DBlocks::waste() const {
  return std::max(1.0, static_cast<double>(span * ic_bn) / static_cast<double>(in_per_group()));
}

std::string GroupedConv2DBlocks::str() const {
  std::ostringstream os;
  os << "groups " << groups << ", blocks ic " << ic_bn << " oc " << oc_bn << ", span " << span;
  return os.str();
}

GroupedConv2DBlocks choose_grouped_conv2d_blocks(const Conv2DWorkload& wl, const Target& target) {
  conv2d_nchw_shape(wl.data_shape(), wl.kernel_shape(), wl.params);  // validates
  const int64_t G = wl.params.groups, C = wl.in_channel, O = wl.out_channel;
  KILN_USER_CHECK(G > 1 && !(G == C && O == C))
      << kOp << ": groups " << G << " with " << C << " input and " << O
      << " output channels is not a grouped convolution (use conv2d_nchwc for groups 1, "
         "depthwise_conv2d_nchwc for depthwise ones)";
  const int64_t lanes = std::max(1, target.vector_bits() / 32);
  GroupedConv2DBlocks best =
      GroupedConv2DBlocks::make(C, O, G, channel_block(C, lanes), channel_block(O, lanes), kOp);
  // Narrower blocks (at least 8 channels, the vector micro-kernel's minimum) that divide both
  // channel counts waste fewer multiply-adds, at the price of a layout transform on each side
  // (about 1 ms each for a 56x56x128 map on Zen 4). What a block saves grows with the group width
  // (the multiply-adds per transformed value), so they are taken for groups of 16 input channels
  // or more (RegNet's 24- and 56-wide groups: 1.27 -> 1.22 ms and 2.47 -> 2.02 ms for a
  // bottleneck with its 1x1 convolutions), not for ResNeXt's 4- and 8-wide ones (5.96 -> 6.95
  // ms and 4.82 -> 5.07 ms), unless the lanes-wide blocks waste too much.
  const double default_waste = best.waste();
  const bool narrower =
      default_waste > kMaxWaste || (default_waste > 1.0 && best.in_per_group() >= 16);
  for (int64_t bn = lanes / 2; narrower && bn >= 8; bn /= 2) {
    if (C % bn != 0 || O % bn != 0) continue;
    GroupedConv2DBlocks b = GroupedConv2DBlocks::make(C, O, G, bn, bn, kOp);
    if (b.waste() * 2 <= default_waste && b.waste() < best.waste()) best = b;
  }
  // Past 4 zero multiply-adds per useful one (groups of one or two input channels: depthwise
  // convolutions with a channel multiplier) the NCHW schedule is the better choice.
  KILN_USER_CHECK(best.waste() <= kMaxWaste)
      << kOp << ": " << C / G << " input channels per group are too few for the blocked layout ("
      << best.str() << " computes " << best.waste() << " multiply-adds per useful one, at most "
      << kMaxWaste << ")";
  return best;
}

std::vector<int64_t> packed_grouped_conv2d_weight_shape(const std::vector<int64_t>& k,
                                                        const GroupedConv2DBlocks& b) {
  const char* op = "pack_grouped_conv2d_weight";
  KILN_USER_CHECK(k.size() == 4 && k[0] == b.out_channel && k[1] == b.in_per_group())
      << op << ": expected a kernel [" << b.out_channel << ", " << b.in_per_group() << ", KH, KW] ("
      << b.str() << "), got " << shape_str(k);
  return {k[0] / b.oc_bn, b.span, k[2], k[3], b.ic_bn, b.oc_bn};
}

runtime::NDArray pack_grouped_conv2d_weight(const runtime::NDArray& w,
                                            const GroupedConv2DBlocks& b) {
  KILN_USER_CHECK(w.dtype() == DataType::Float(32))
      << "pack_grouped_conv2d_weight: expected a float32 kernel, got " << w.dtype().str();
  const std::vector<int64_t> ps = packed_grouped_conv2d_weight_shape(w.shape(), b);
  const int64_t KH = ps[2], KW = ps[3], ig = b.in_per_group(), og = b.out_per_group();
  runtime::NDArray r = runtime::NDArray::empty(ps, w.dtype());
  const float* src = w.data_as<float>();
  float* dst = r.data_as<float>();
  for (int64_t ob = 0; ob < ps[0]; ++ob) {
    const int64_t first = b.first_input_block(ob);
    for (int64_t rb = 0; rb < b.span; ++rb)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw)
          for (int64_t i = 0; i < b.ic_bn; ++i)
            for (int64_t o = 0; o < b.oc_bn; ++o) {
              const int64_t oc = ob * b.oc_bn + o, c = (first + rb) * b.ic_bn + i;
              const int64_t local = c - (oc / og) * ig;
              *dst++ =
                  local >= 0 && local < ig ? src[((oc * ig + local) * KH + kh) * KW + kw] : 0.0f;
            }
  }
  return r;
}

std::vector<int64_t> conv2d_grouped_nchwc_shape(const std::vector<int64_t>& d,
                                                const std::vector<int64_t>& k,
                                                const Conv2DParams& p) {
  check_conv_params(p, kOp);
  KILN_USER_CHECK(d.size() == 5 && k.size() == 6)
      << kOp << ": expected data [N, C/x, H, W, x] and packed kernel [O/y, R, KH, KW, x, y], "
      << "got data " << shape_str(d) << " and kernel " << shape_str(k);
  KILN_USER_CHECK(d[4] == k[4]) << kOp << ": data " << shape_str(d) << " has input blocks of "
                                << d[4] << " channels but packed kernel " << shape_str(k)
                                << " blocks of " << k[4];
  const GroupedConv2DBlocks b =
      GroupedConv2DBlocks::make(d[1] * d[4], k[0] * k[5], p.groups, d[4], k[5], kOp);
  KILN_USER_CHECK(k[1] == b.span) << kOp << ": packed kernel " << shape_str(k) << " reads " << k[1]
                                  << " input blocks per output block, but data " << shape_str(d)
                                  << " with " << b.str() << " needs " << b.span;
  return detail::nchwc_output_shape(d, k, p, kOp);
}

te::Tensor conv2d_grouped_nchwc(const te::Tensor& data, const te::Tensor& kernel,
                                const Conv2DParams& p, const EpilogueSpec& ep,
                                const std::string& name) {
  std::vector<int64_t> ds = static_shape(data, kOp), ks = static_shape(kernel, kOp);
  std::vector<int64_t> os = conv2d_grouped_nchwc_shape(ds, ks, p);
  const GroupedConv2DBlocks b =
      GroupedConv2DBlocks::make(ds[1] * ds[4], ks[0] * ks[5], p.groups, ds[4], ks[5], kOp);
  // conv2d_nchwc's main stage, each output block reading its groups' input blocks.
  te::Tensor conv = detail::conv2d_nchwc_main(
      data, kernel, os, p, [&](Var ob, Var rco) { return b.first_input_block(ob) + rco; }, name,
      kMainTag);
  return detail::conv_epilogue(conv, ep, name, kOp);
}

GroupedConv2DBlocks define_conv2d_grouped_nchwc_knobs(Config& cfg, const Conv2DWorkload& wl,
                                                      const Target& target) {
  const GroupedConv2DBlocks b = choose_grouped_conv2d_blocks(wl, target);
  // The blocks are the layout (the neighbours' in a graph): pinned, not tuned.
  cfg.define_split_fixed("tile_ic", wl.in_channel, {-1, b.ic_bn});
  cfg.define_split_fixed("tile_oc", wl.out_channel, {-1, b.oc_bn});
  return b;
}

void schedule_conv2d_grouped_nchwc(Config& cfg, te::Schedule& s, const te::Tensor& out,
                                   const Target& target) {
  te::Tensor conv = find_tagged({out}, kMainTag);
  KILN_USER_CHECK(conv.defined()) << "schedule_conv2d_grouped_nchwc: no conv2d_grouped_nchwc "
                                     "stage feeds output '"
                                  << out.name() << "'";
  schedule_conv2d_nchwc(cfg, s, out, target);
}

autotune::Template conv2d_grouped_nchwc_template(const Conv2DWorkload& wl, const EpilogueFlags& ep,
                                                 const Target& target) {
  return {kOp, "1", [wl, ep, target](Config& cfg) {
            const GroupedConv2DBlocks b = define_conv2d_grouped_nchwc_knobs(cfg, wl, target);
            const std::vector<int64_t> ks =
                packed_grouped_conv2d_weight_shape(wl.kernel_shape(), b);
            return detail::conv_template_instance(
                cfg, nchwc_shape(wl.data_shape(), b.ic_bn, kOp), ks, "packed_kernel",
                wl.out_channel, nchwc_shape(wl.out_shape(), b.oc_bn, kOp), ep,
                [&](const te::Tensor& d, const te::Tensor& k, const EpilogueSpec& spec) {
                  return conv2d_grouped_nchwc(d, k, wl.params, spec);
                },
                [&](Config& c, te::Schedule& s, const te::Tensor& out) {
                  schedule_conv2d_grouped_nchwc(c, s, out, target);
                });
          }};
}

}  // namespace kiln::topi
