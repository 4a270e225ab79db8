// Depthwise conv2d in NCHW and NCHW[x]c. The NCHW form reuses the row schedule of
// conv2d_nchw. The blocked form is memory-bound, so its schedule is about touching each byte
// once: the output is computed in register tiles of tile_ow columns x the channel block (an
// accumulator at the ow-tile loop, kh and kw outside, ow unrolled, the channel block
// vectorized), so with kw unrolled the input vectors of neighbouring columns are loaded once
// per kh row and reused across kw; channel chunks x output rows run in parallel. The padding
// is produced either as a root pass (pad_at = 0: one extra read and write of the input), or at
// the row loop (pad_at = 1: the KH padded input rows of one output row, in L1), or at the
// channel-chunk loop (pad_at = 2: one padded plane of the chunk, in L2), or not at all
// (pad_at = 3, "inline", the fallback: the conv reads the input in place through
// `if_then_else(likely(in bounds), x, 0)`; loop_partition splits the row-in-tile and the
// ow-tile loops into border / interior / border parts, so the interior tiles carry no checks,
// the first row of a tile keeps one row check and only the border tiles check columns).
#include "kiln/topi/depthwise_conv2d.h"

#include <algorithm>

#include "conv2d_common.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;
using autotune::SplitPolicy;
using detail::ci;
using detail::vectorize_block;

namespace {

constexpr const char* kNCHW = "depthwise_conv2d_nchw";
constexpr const char* kNCHWc = "depthwise_conv2d_nchwc";
/// pad_at value: the padding is inlined into the convolution (no padded copy).
constexpr int64_t kPadInline = 3;

void check_window(int64_t oh, int64_t ow, const std::vector<int64_t>& d,
                  const std::vector<int64_t>& k, const Conv2DParams& p, const char* op) {
  KILN_USER_CHECK(oh > 0 && ow > 0)
      << op << ": the kernel " << shape_str(k) << " (dilation (" << p.dilation_h << ", "
      << p.dilation_w << ")) does not fit the padded input: data " << shape_str(d) << ", padding "
      << p.padding.str();
}

/// The channel-block knob (the layout): tuned, or pinned to the default lanes-wide block.
int64_t define_block_knob(Config& cfg, int64_t C, int64_t lanes, ChannelBlocks blocks) {
  const int64_t bn = channel_block(C, lanes);
  if (blocks == ChannelBlocks::kDefault) {
    cfg.define_split_fixed("tile_c", C, {-1, bn});
  } else {
    cfg.define_split("tile_c", C, 2, SplitPolicy::kFactors, 64);
    if (cfg.is_fallback()) cfg.fallback_split("tile_c", {-1, bn});
  }
  return cfg.split("tile_c").size[1];
}

/// The schedule's knobs for channel blocks of bn; `registers`, the target's vector registers.
void define_schedule_knobs(Config& cfg, int64_t OH, int64_t OW, int64_t KH, int64_t IW,
                           int64_t stride, int64_t lanes, int64_t bn, int64_t registers) {
  cfg.define_split("tile_ow", OW, 2, SplitPolicy::kFactors, 32);
  cfg.define_split("tile_oh", OH, 2, SplitPolicy::kFactors, 8);
  cfg.define_bool("unroll_kw");
  cfg.define_knob("pad_at", {0, 1, 2, kPadInline});
  if (cfg.is_fallback()) {
    // 14 accumulator vectors of 32 registers (AVX-512), the rest for the kernel row and the
    // inputs; 7 of 16 with AVX2.
    const int64_t vecs = std::max<int64_t>(1, bn / lanes);
    const int64_t acc = std::max<int64_t>(1, registers * 14 / 32);
    cfg.fallback_split("tile_ow",
                       {-1, largest_divisor_at_most(OW, std::max<int64_t>(1, acc / vecs))});
    cfg.fallback_knob("unroll_kw", 1);
    // Inline padding: no copy; loop_partition leaves the interior tiles without checks
    // (D1-D9 geomean vs oneDNN 1.3 against 0.87 for pad_at 1, docs/conv2d-schedule.md).
    const int64_t pad_at = kPadInline;
    cfg.fallback_knob("pad_at", pad_at);
    // Rows per tile (up to 8). With pad_at 1 each tile pads (rows - 1) * stride + KH input
    // rows, so more rows copy less; the padded rows ((W + pads) x bn floats each) should stay
    // within ~96 KiB (L2; 1, 2, 4, 8 rows measured in docs/conv2d-schedule.md). Inline: the
    // first row of each tile keeps its row check, so more rows check less.
    const int64_t row_bytes = (IW + 2) * bn * 4;
    int64_t rows = 1;
    for (int64_t r = 8; r > 1; --r)
      if (OH % r == 0 &&
          (pad_at == kPadInline || ((r - 1) * stride + KH) * row_bytes <= 96 * 1024)) {
        rows = r;
        break;
      }
    cfg.fallback_split("tile_oh", {-1, rows});
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// NCHW

std::vector<int64_t> depthwise_conv2d_nchw_shape(const std::vector<int64_t>& d,
                                                 const std::vector<int64_t>& k,
                                                 const Conv2DParams& p) {
  check_conv_params(p, kNCHW);
  KILN_USER_CHECK(d.size() == 4 && k.size() == 4 && k[1] == 1)
      << kNCHW << ": expected data [N, C, H, W] and kernel [C*M, 1, KH, KW], got data "
      << shape_str(d) << " and kernel " << shape_str(k);
  KILN_USER_CHECK(p.groups == 1 || p.groups == d[1])
      << kNCHW << ": groups " << p.groups << " must be 1 or the " << d[1]
      << " input channels (data " << shape_str(d) << ")";
  KILN_USER_CHECK(k[0] % d[1] == 0 && k[0] > 0)
      << kNCHW << ": kernel " << shape_str(k) << " must have a multiple of the " << d[1]
      << " input channels of data " << shape_str(d) << " as its output channels";
  int64_t oh =
      conv_out_extent(d[2], k[2], p.stride_h, p.dilation_h, p.padding.top, p.padding.bottom);
  int64_t ow =
      conv_out_extent(d[3], k[3], p.stride_w, p.dilation_w, p.padding.left, p.padding.right);
  check_window(oh, ow, d, k, p, kNCHW);
  return {d[0], k[0], oh, ow};
}

te::Tensor depthwise_conv2d_nchw(const te::Tensor& data, const te::Tensor& kernel,
                                 const Conv2DParams& p, const std::string& name) {
  std::vector<int64_t> ds = static_shape(data, kNCHW), ks = static_shape(kernel, kNCHW);
  std::vector<int64_t> os = depthwise_conv2d_nchw_shape(ds, ks, p);
  const int64_t M = ks[0] / ds[1];
  te::Tensor pad = pad_spatial(data, 2, p.padding, name + "_pad");
  te::IterVar kh = te::reduce_axis({0, static_cast<int32_t>(ks[2])}, "kh");
  te::IterVar kw = te::reduce_axis({0, static_cast<int32_t>(ks[3])}, "kw");
  return te::compute(
      detail::to_exprs(os),
      [&](Var n, Var o, Var y, Var x) {
        Expr c = M == 1 ? Expr(o) : floordiv(o, ci(M));
        Expr h = y * ci(p.stride_h) + kh->var * ci(p.dilation_h);
        Expr w = x * ci(p.stride_w) + kw->var * ci(p.dilation_w);
        return te::sum(pad(n, c, h, w) * kernel(o, ci(0), kh, kw), {kh, kw});
      },
      name, kNCHW);
}

void schedule_depthwise_conv2d_nchw(Config& cfg, te::Schedule& s, const te::Tensor& out,
                                    const Target& target) {
  detail::schedule_nchw_rows(cfg, s, out, kNCHW, target);
}

te::Schedule schedule_depthwise_conv2d_nchw(const std::vector<te::Tensor>& outs,
                                            const Target& target) {
  KILN_USER_CHECK(!outs.empty()) << "schedule_depthwise_conv2d_nchw: no outputs";
  te::Schedule s = te::create_schedule(outs);
  Config cfg = Config::fallback();
  schedule_depthwise_conv2d_nchw(cfg, s, outs[0], target);
  return s;
}

autotune::Template depthwise_conv2d_nchw_template(const Conv2DWorkload& wl, const Target& target) {
  return {kNCHW, "1", [wl, target](Config& cfg) {
            const DataType f32 = DataType::Float(32);
            te::Tensor data = te::placeholder(detail::to_exprs(wl.data_shape()), f32, "data");
            te::Tensor kernel = te::placeholder(
                {ci(wl.out_channel), ci(1), ci(wl.kernel_h), ci(wl.kernel_w)}, f32, "kernel");
            te::Tensor out = depthwise_conv2d_nchw(data, kernel, wl.params);
            te::Schedule s = te::create_schedule({out});
            schedule_depthwise_conv2d_nchw(cfg, s, out, target);
            return autotune::Instance{s, {data, kernel, out}, cfg, {false, true, false}};
          }};
}

// ---------------------------------------------------------------------------------------------
// NCHW[x]c

std::vector<int64_t> packed_depthwise_weight_shape(const std::vector<int64_t>& k, int64_t bn) {
  const char* op = "pack_depthwise_weight";
  KILN_USER_CHECK(k.size() == 4 && k[1] == 1)
      << op << ": expected a kernel [C, 1, KH, KW], got " << shape_str(k);
  KILN_USER_CHECK(bn > 0 && k[0] % bn == 0) << op << ": block " << bn << " does not divide the "
                                            << k[0] << " channels of kernel " << shape_str(k);
  return {k[0] / bn, 1, k[2], k[3], 1, bn};
}

te::Tensor pack_depthwise_weight(const te::Tensor& kernel, int64_t bn, const std::string& name) {
  std::vector<int64_t> ps =
      packed_depthwise_weight_shape(static_shape(kernel, "pack_depthwise_weight"), bn);
  return te::compute(
      detail::to_exprs(ps),
      [&](const std::vector<Var>& i) { return kernel(i[0] * ci(bn) + i[5], ci(0), i[2], i[3]); },
      name, detail::tag_of(tag::kInjective, "pack_depthwise_weight"));
}

std::vector<int64_t> depthwise_conv2d_nchwc_shape(const std::vector<int64_t>& d,
                                                  const std::vector<int64_t>& k,
                                                  const Conv2DParams& p) {
  check_conv_params(p, kNCHWc);
  KILN_USER_CHECK(d.size() == 5 && k.size() == 6 && k[1] == 1 && k[4] == 1)
      << kNCHWc << ": expected data [N, C/x, H, W, x] and packed kernel [C/x, 1, KH, KW, 1, x], "
      << "got data " << shape_str(d) << " and kernel " << shape_str(k);
  KILN_USER_CHECK(d[1] == k[0] && d[4] == k[5])
      << kNCHWc << ": data " << shape_str(d) << " and packed kernel " << shape_str(k)
      << " disagree on the channels (multiplier 1 only in the blocked layout)";
  KILN_USER_CHECK(p.groups == 1 || p.groups == d[1] * d[4])
      << kNCHWc << ": groups " << p.groups << " must be 1 or the " << d[1] * d[4] << " channels";
  int64_t oh =
      conv_out_extent(d[2], k[2], p.stride_h, p.dilation_h, p.padding.top, p.padding.bottom);
  int64_t ow =
      conv_out_extent(d[3], k[3], p.stride_w, p.dilation_w, p.padding.left, p.padding.right);
  check_window(oh, ow, d, k, p, kNCHWc);
  return {d[0], d[1], oh, ow, d[4]};
}

te::Tensor depthwise_conv2d_nchwc(const te::Tensor& data, const te::Tensor& kernel,
                                  const Conv2DParams& p, const EpilogueSpec& ep,
                                  const std::string& name) {
  std::vector<int64_t> ds = static_shape(data, kNCHWc), ks = static_shape(kernel, kNCHWc);
  std::vector<int64_t> os = depthwise_conv2d_nchwc_shape(ds, ks, p);
  te::Tensor pad = pad_spatial(data, 2, p.padding, name + "_pad");
  te::IterVar kh = te::reduce_axis({0, static_cast<int32_t>(ks[2])}, "kh");
  te::IterVar kw = te::reduce_axis({0, static_cast<int32_t>(ks[3])}, "kw");
  te::Tensor conv = te::compute(
      detail::to_exprs(os),
      [&](Var n, Var cb, Var y, Var x, Var c) {
        Expr h = y * ci(p.stride_h) + kh->var * ci(p.dilation_h);
        Expr w = x * ci(p.stride_w) + kw->var * ci(p.dilation_w);
        return te::sum(pad(n, cb, h, w, c) * kernel(cb, ci(0), kh, kw, ci(0), c), {kh, kw});
      },
      name, kNCHWc);
  return detail::conv_epilogue(conv, ep, name, kNCHWc);
}

int64_t define_depthwise_nchwc_knobs(Config& cfg, const Conv2DWorkload& wl, const Target& target,
                                     ChannelBlocks blocks) {
  KILN_USER_CHECK(wl.out_channel == wl.in_channel)
      << kNCHWc << ": only multiplier 1 is supported in the blocked layout (" << wl.in_channel
      << " input, " << wl.out_channel << " output channels)";
  depthwise_conv2d_nchw_shape(wl.data_shape(), {wl.out_channel, 1, wl.kernel_h, wl.kernel_w},
                              wl.params);
  const int64_t lanes = std::max(1, target.vector_bits() / 32);
  const int64_t bn = define_block_knob(cfg, wl.in_channel, lanes, blocks);
  define_schedule_knobs(cfg, wl.out_height(), wl.out_width(), wl.kernel_h, wl.width,
                        wl.params.stride_h, lanes, bn, target.vector_registers());
  return bn;
}

void schedule_depthwise_conv2d_nchwc(Config& cfg, te::Schedule& s, const te::Tensor& out,
                                     const Target& target) {
  const std::string who = "schedule_depthwise_conv2d_nchwc";
  te::Tensor conv = find_tagged({out}, kNCHWc);
  KILN_USER_CHECK(conv.defined()) << who << ": no " << kNCHWc << " stage feeds output '"
                                  << out.name() << "'";
  std::vector<int64_t> cs = static_shape(conv, who);
  KILN_USER_CHECK(static_shape(out, who) == cs)
      << who << ": output '" << out.name() << "' must have the convolution's shape "
      << shape_str(cs);
  std::vector<te::Tensor> ins = detail::inputs_of(conv);
  te::Tensor pad = ins[0];
  std::vector<int64_t> ks = static_shape(ins[1], who);
  const int64_t lanes = std::max(1, target.vector_bits() / 32);
  const int64_t bn = cs[4];
  const std::vector<int64_t> ds =
      static_shape(detail::is_pad(pad) ? detail::inputs_of(pad)[0] : pad, who);
  // The stride (for the fallback row count only), estimated from the shapes.
  const int64_t stride_h = cs[2] > 1 ? (static_shape(pad, who)[2] - ks[2]) / (cs[2] - 1) : 1;
  // The block is the tensors' (a template defined its block knob before building them).
  if (cfg.space().find("tile_c") >= 0) {
    KILN_USER_CHECK(cfg.split("tile_c").size[1] == bn)
        << who << ": the config's channel block (tile_c " << cfg.split("tile_c").size[1]
        << ") differs from the tensors' (" << bn << ")";
  }
  define_schedule_knobs(cfg, cs[2], cs[3], ks[2], ds[3], std::max<int64_t>(1, stride_h), lanes, bn,
                        target.vector_registers());

  inline_injective_consumers(s, {out}, {conv});
  te::Tensor acc = detail::accumulator(s, conv, out);
  te::Stage so = s[out];
  auto ax = so.op_axis();
  auto oh = cfg.split("tile_oh").apply(so, ax[2]);
  auto ow = cfg.split("tile_ow").apply(so, ax[3]);
  so.reorder({ax[0], ax[1], oh[0], oh[1], ow[0], ow[1], ax[4]});
  const int64_t pad_at = cfg.knob("pad_at");
  te::IterVar row, chunk;
  if (pad_at == 2) {
    chunk = so.fuse(ax[0], ax[1]);
    so.parallel(chunk);
  } else {
    row = so.fuse({ax[0], ax[1], oh[0]});
    so.parallel(row);
  }
  so.unroll(ow[1]);
  vectorize_block(so, ax[4], bn, lanes);

  if (detail::is_pad(pad)) {
    te::Stage sp = s[pad];
    if (pad_at == kPadInline) {
      sp.compute_inline();
    } else if (pad_at == 0) {
      detail::schedule_pad_root(s, pad, true);
    } else {
      sp.compute_at(so, pad_at == 1 ? row : chunk);
      sp.vectorize(sp.op_axis()[4]);
    }
  }

  te::Stage sa = s[acc];
  sa.compute_at(so, ow[0]);
  auto aax = sa.op_axis();
  auto rax = sa.op_reduce_axis();  // kh, kw
  sa.reorder({aax[0], aax[1], aax[2], rax[0], rax[1], aax[3], aax[4]});
  sa.unroll(aax[3]);
  vectorize_block(sa, aax[4], bn, lanes);
  if (cfg.knob("unroll_kw")) sa.unroll(rax[1]);
}

te::Schedule schedule_depthwise_conv2d_nchwc(const std::vector<te::Tensor>& outs,
                                             const Target& target) {
  KILN_USER_CHECK(!outs.empty()) << "schedule_depthwise_conv2d_nchwc: no outputs";
  te::Schedule s = te::create_schedule(outs);
  Config cfg = Config::fallback();
  schedule_depthwise_conv2d_nchwc(cfg, s, outs[0], target);
  return s;
}

autotune::Template depthwise_conv2d_nchwc_template(const Conv2DWorkload& wl, const Target& target,
                                                   bool bias_relu, ChannelBlocks blocks) {
  return {kNCHWc, "1", [wl, target, bias_relu, blocks](Config& cfg) {
            int64_t bn = define_depthwise_nchwc_knobs(cfg, wl, target, blocks);
            return detail::conv_template_instance(
                cfg, nchwc_shape(wl.data_shape(), bn, kNCHWc),
                packed_depthwise_weight_shape({wl.in_channel, 1, wl.kernel_h, wl.kernel_w}, bn),
                "packed_kernel", wl.in_channel, nchwc_shape(wl.out_shape(), bn, kNCHWc),
                {bias_relu, bias_relu, false},
                [&](const te::Tensor& d, const te::Tensor& k, const EpilogueSpec& spec) {
                  return depthwise_conv2d_nchwc(d, k, wl.params, spec);
                },
                [&](Config& c, te::Schedule& s, const te::Tensor& out) {
                  schedule_depthwise_conv2d_nchwc(c, s, out, target);
                });
          }};
}

}  // namespace kiln::topi
