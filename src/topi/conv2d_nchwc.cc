// conv2d in the blocked layout NCHW[x]c, the x86 fast path (TVM's conv2d_NCHWc with the
// conv2d_avx_common / conv2d_avx_1x1 schedules). Data [N, C/x, H, W, x] and a kernel packed
// once into [O/y, C/x, KH, KW, x, y] make the innermost reduction step a broadcast of one input
// value times one contiguous vector of y output channels. The schedule computes the output in
// register tiles of tile_oh rows x tile_ow columns x y channels: an accumulator stage (a
// cache_write, or the conv stage itself in local scope when an element-wise epilogue follows)
// is computed at the ow-tile loop with loops ic_outer, kh, kw, ic_inner, oh, ow, oc_chunk,
// oc_block; oh, ow and oc_chunk are unrolled and oc_block vectorized (split by the vector lanes
// when y is wider), so after unrolling the accumulator has constant indices and lives in zmm
// registers, and each reduction step is tile_oh * tile_ow broadcasts and FMAs with one kernel
// vector per lane group. A tile width that does not divide the row leaves a narrower tail tile
// (the split's guard, partitioned into its own copy of the nest). The tile loop (n, oc_chunk,
// oh_outer fused, and ow_outer when those are fewer than 16; oh_outer before oc_chunk when the
// input outweighs the kernel) is parallel; the padding is a root stage, parallel and vectorized
// over the channel block; epilogue stages are inlined into the output. A 1x1 tile reading more
// input streams than the hardware prefetchers follow prefetches its next column tile.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "conv2d_common.h"
#include "kiln/topi/conv2d.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;
using autotune::SplitPolicy;
using detail::ci;
using detail::vectorize_block;

namespace {

constexpr const char* kOp = "conv2d_nchwc";
/// A core's L2 cache, the smallest of the x86 hosts measured (AMD Zen 4: 1 MB; Intel Sapphire
/// Rapids: 2 MB).
constexpr double kL2Bytes = 1 << 20;
/// The channel-block knobs (the layout): tuned, or pinned to the default lanes-wide blocks.
std::pair<int64_t, int64_t> define_block_knobs(Config& cfg, int64_t C, int64_t O, int64_t lanes,
                                               ChannelBlocks blocks) {
  // Defaults (docs/conv2d-schedule.md): lanes-wide channel blocks, so that chains of layers
  // share one layout.
  const int64_t ic_bn = channel_block(C, lanes), oc_bn = channel_block(O, lanes);
  if (blocks == ChannelBlocks::kDefault) {
    cfg.define_split_fixed("tile_ic", C, {-1, ic_bn});
    cfg.define_split_fixed("tile_oc", O, {-1, oc_bn});
  } else {
    cfg.define_split("tile_ic", C, 2, SplitPolicy::kFactors, 64);
    cfg.define_split("tile_oc", O, 2, SplitPolicy::kFactors, 64);
    if (cfg.is_fallback()) {
      cfg.fallback_split("tile_oc", {-1, oc_bn});
      cfg.fallback_split("tile_ic", {-1, ic_bn});
    }
  }
  return {cfg.split("tile_ic").size[1], cfg.split("tile_oc").size[1]};
}

/// The schedule's knobs for output blocks of oc_bn channels (O output and IC input channels).
/// `registers`: the target's vector registers (zmm0-31 with AVX-512, ymm0-15 with AVX2): a
/// register tile of accumulators, the kernel vectors of one reduction step and a broadcast input
/// value must fit in them, or LLVM spills.
void define_schedule_knobs(Config& cfg, int64_t O, int64_t IC, int64_t OH, int64_t OW, int64_t KH,
                           int64_t KW, int64_t lanes, int64_t oc_bn, int64_t registers) {
  const std::vector<int64_t> oc_regs = {1, 2, 3, 4, 5};
  cfg.define_knob("oc_reg", oc_regs);
  cfg.define_split("tile_oh", OH, 2, SplitPolicy::kFactors, 4);
  // Widths up to 8 that leave a tail too: a 7-wide map takes 4 + 3 pixels.
  cfg.define_split("tile_ow", OW, 2, SplitPolicy::kFactorsAndSmall, 32, /*no_tail=*/false);
  cfg.define_bool("unroll_kw");
  cfg.define_bool("unroll_ic");
  cfg.define_bool("acc_outer");
  if (cfg.is_fallback()) {
    // The register tile covers V vectors of output channels (oc_reg chunks) by n = h x w output
    // pixels, with V * n + V + 1 <= registers (the accumulators, the V kernel vectors of a
    // reduction step, one broadcast). One step costs, in cycles:
    // V * n / 2 FMAs (two ports); V + n loads at about 1.5 per cycle; and, when the kernel slice a
    // tile streams through (V vectors x IC x KH x KW) does not fit L1, V vectors (64 bytes each
    // with AVX-512, 32 with AVX2) from L2 at about 24 bytes per cycle. The fallback maximizes the
    // modelled FMA share of a row of tiles (with a tail where allowed); ties go to tiles without
    // a tail, then to more accumulators (FMA latency hiding), then to taller tiles with AVX-512
    // and to wider ones (contiguous pixels) with AVX2. Measured against
    // oneDNN (docs/conv2d-schedule.md): 2 vectors x 14 pixels 0.81-0.89 where 4 x 4 gave
    // 0.72-0.78 and 1 x 28 0.54 (ResNet's 56-, 28- and 14-wide 3x3 layers); 4 x 7 (one spill) lost
    // to 2 x 2 x 7 at 56 wide (0.59 against 0.83). With AVX2 (16 ymm, AMD
    // EPYC Zen 1): 2 x 4 (8 accumulators) where the tuner's best direct configs held 8; counting 64
    // bytes a vector there had chosen a spilling 2 x 7 (C4, C7: 68% of peak). MobileNet-v2's 1x1
    // layers on 112- to 28-wide maps with AVX2: 3 x (1 x 4) or 2 x (1 x 4) at 0.94-1.04 of oneDNN
    // where 4 x 1 (taller) gave 0.60-0.95 (M3p, 144 -> 24 channels: 574 us against 898 us for
    // the old 1 x (2 x 7)).
    const int64_t vecs = std::max<int64_t>(1, oc_bn / lanes);
    const double l1_bytes = 32 * 1024;
    // The tile must fit the register file. With 32 registers one over the budget (a spilled
    // accumulator per step) had measured faster on an Intel host (C12: 4 x 7 at 0.80-0.91 of
    // oneDNN, 2 x 7 at 0.70-0.81), but on AMD Zen 4 the spill's store and reload in the inner
    // loop made the kernel bimodal with the stack's address (ASLR): MobileNet-v3's 160 -> 960
    // 1x1 layer on 7x7 took 0.17 or 0.27 ms from run to run with 4 x 7, 0.16 ms steadily with
    // the tile that fits; MobileNet-v3 ran 2-4% faster without the spill, -v2 0-3%. With 16
    // registers it did not pay either: in a network, where a bias epilogue follows the loop,
    // LLVM's allocator spilled four accumulators of a 2 x 7 tile and shuffled the rest each step
    // (MobileNet-v2's 960->320 layer on 7x7: 1.28 ms against 1.05 ms for 1 x 7; 0.91 ms without
    // the bias). The tuner's space still holds the spilling tiles. Three chunks (3 x 4 pixels:
    // 24-channel outputs, where 2 and 4 do not divide), wider ties and tiles with a tail (the
    // same layer: 2 x (4 + 3) 0.80 ms, 4 x (2 + 2 + 2 + 1) 0.84, 2 x (5 + 2) 0.85) were measured
    // with AVX2 only, so the AVX-512 fallbacks keep their powers of two and divisors. So were
    // five chunks (5 x 2 pixels: outputs of 40, 200 channels, where only 1 divided before and a
    // 1 x 12 tile paid a broadcast per FMA; Zen 3: 1x1 144 -> 40 on 14x14 0.040 -> 0.023 ms,
    // 120 -> 40 on 28x28 0.12-0.14 -> 0.09-0.10 ms, 80 -> 200 on 14x14 0.09-0.12 -> 0.07-0.09
    // ms, efficientnet_b3's stem 3 -> 40 (3x3, stride 2, SiLU) 1.6-2.0 -> 1.25-1.57 ms).
    struct Rules {
      bool odd_chunks, wider_ties, tails;
    };
    struct Choice {
      std::tuple<double, bool, int64_t, int64_t> key{-1, false, 0, 0};
      int64_t reg = 1, w = 1, h = 1;
    };
    const int64_t chunks = O / oc_bn;
    auto choose = [&](const Rules& rules) {
      Choice best;
      for (int64_t reg : oc_regs) {
        if ((reg == 3 || reg == 5) && !rules.odd_chunks) continue;
        // A chunk count reg does not divide: with tails, the last tile shifted inwards
        // recomputes chunks of the one before it (the useful share below).
        if (chunks % reg != 0 && (!rules.tails || reg > chunks)) continue;
        const double useful =
            static_cast<double>(chunks) / static_cast<double>((chunks + reg - 1) / reg * reg);
        const int64_t v = vecs * reg;
        const double slice = static_cast<double>(v * lanes * IC * KH * KW * 4);
        // Registers a tile of n pixels needs beyond the target's (accumulators, the step's
        // kernel vectors, one broadcast).
        auto over_budget = [&](int64_t n) { return v * n + v + 1 - registers; };
        // Cycles of one reduction step of a tile of n pixels.
        auto step = [&](int64_t n) {
          const double fma = v * n / 2.0, load = (v + n) / 1.5,
                       l2 = slice > l1_bytes ? 4.0 * lanes * v / 24.0 : 0.0;
          return std::max({fma, load, l2});
        };
        for (int64_t h = 1; h <= std::min<int64_t>(4, OH); ++h) {
          if (OH % h != 0) continue;
          for (int64_t w = 1; w <= std::min<int64_t>(32, OW); ++w) {
            const int64_t n = h * w, tail = OW % w;
            if (tail != 0 && (!rules.tails || w > autotune::kSmallSplitFactors)) continue;
            if (over_budget(n) > 0) continue;
            // A row of tiles: OW / w, and one more for the tail (shifted inwards: a whole tile
            // that recomputes some of the tile before it), against the FMAs of the row.
            const double row = static_cast<double>((OW + w - 1) / w) * step(n);
            const double eff = std::round(1000 * useful * (v * h * OW / 2.0) / row) / 1000;
            // Ties: a tile without a tail first (2 x (1 x 4) ran 0.94-1.00 of oneDNN on 56- and
            // 28-wide 3x3 layers where 2 x (1 x 6 + tail) ran 0.92-0.94), then more
            // accumulators.
            std::tuple<double, bool, int64_t, int64_t> key{eff, tail == 0, v * n,
                                                           rules.wider_ties ? -h : h};
            if (key > best.key) best = Choice{key, reg, w, h};
          }
        }
      }
      return best;
    };
    Choice best = choose(registers >= 32 ? Rules{false, false, false} : Rules{true, true, true});
    // AVX-512 takes a tile with a tail too where no divisor of the width gives the 8
    // accumulators that hide the FMA latency (two ports, four cycles): a prime width, as
    // Conv-TasNet's 1999-sample frames, took 1 pixel x 2 vectors and ran at 53% of the peak
    // (96% with 8 + a shifted tail). Inception's 17-wide maps keep 1 x 17 (17 accumulators:
    // 98%, where 4 x (6 + 6 + 5) ran 7% slower).
    if (registers >= 32 && std::get<2>(best.key) < 8) {
      const Choice tailed = choose(Rules{false, false, true});
      if (tailed.key > best.key) best = tailed;
    }
    const int64_t best_reg = best.reg, best_w = best.w, best_h = best.h;
    cfg.fallback_knob("oc_reg", best_reg);
    // acc_outer when the kernel is bigger than L2 (it comes from DRAM in a network) and the
    // task's accumulator small (it stays in L1 beside a kernel block): ResNet's 7x7x512 layers
    // ran 10-12% faster with cold caches (C12, 9.4 MB: 2.55 -> 2.24 ms; C10, 4.7 MB: 1.28 ->
    // 1.17 ms); C7 (1.2 MB, a 25 KB accumulator) ran 3-8% slower, and so did MobileNet-v2's
    // 7x7 1x1 layers with 1.2-1.6 MB kernels (M17p, M18: 0.63 -> 0.85-0.94 of oneDNN warm,
    // 0.88-0.98 -> 1.00-1.11 cold, without it). Kept with AVX2 (AMD EPYC, Zen 1): C10 ran
    // 3.96 ms with it, 4.21 ms without (warm, kiln-bench-ops).
    const double kernel_bytes = 4.0 * O * IC * KH * KW,
                 acc_bytes = 4.0 * best_reg * oc_bn * OH * OW;
    // (acc_outer tiles whole chunks: not with a shifted last tile.)
    const bool shifted = chunks % best_reg != 0;
    cfg.fallback_knob("acc_outer",
                      !shifted && kernel_bytes >= (2 << 20) && acc_bytes <= 16 * 1024 ? 1 : 0);
    cfg.fallback_split("tile_ow", {-1, best_w});
    cfg.fallback_split("tile_oh", {-1, best_h});
    cfg.fallback_knob("unroll_kw", KW <= 3 ? 1 : 0);
    cfg.fallback_knob("unroll_ic", 0);
  }
}

/// More concurrent sequential streams than the hardware prefetchers follow (the L2 streamers of
/// the x86 hosts measured track 16 to 32).
constexpr int64_t kMaxStreams = 16;

/// A 1x1 convolution's register tile reads th x ic_outer input streams (a row of the tile in
/// one channel block each), each a few pixels ahead of the previous tile's: with more streams
/// than the hardware prefetchers follow, every column tile waited on memory. At the start of
/// each ic_outer iteration, prefetch the next column tile's pixels of that block into L2 (one
/// line per pixel of 16 floats; `at` is the ic_outer loop). R(2+1)D's temporal 1x1 convs (27
/// input blocks, 5.4 MB of input per image) ran 66% -> 84-90% of the FMA peak, SegFormer's 1x1
/// convs over 16 and 64 blocks 34 -> 30 ms; where the input fits L2 or the streams are few
/// (MnasNet's, SqueezeNet's 1x1 convs) the prefetches only cost their instructions (2-5%).
void prefetch_next_column_tile(te::Stage& sa, const te::Tensor& data, const te::IterVar& at,
                               const Var& tile, const Var& col, bool rows_outer, int64_t chunks,
                               int64_t row_tiles, int64_t th, int64_t tw,
                               const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  // The strides: a 1x1 convolution's input rows and columns, (extent - 1) / (outputs - 1).
  const int64_t sh = out[2] > 1 ? (in[2] - 1) / (out[2] - 1) : 1;
  const int64_t sw = out[3] > 1 ? (in[3] - 1) / (out[3] - 1) : 1;
  // The task's batch index and row tile (tile fuses n, chunk and row tile in the order taken).
  Expr rt = rows_outer ? floormod(floordiv(Expr(tile), ci(chunks)), ci(row_tiles))
                       : floormod(Expr(tile), ci(row_tiles));
  Expr n = floordiv(Expr(tile), ci(chunks * row_tiles));
  for (int64_t r = 0; r < th; ++r)
    for (int64_t q = 0; q < tw; ++q)
      sa.prefetch(
          data, at,
          {n, at->var, (rt * ci(th) + ci(r)) * ci(sh), ((col + 1) * ci(tw) + ci(q)) * ci(sw), 0});
}

/// acc_outer: while the task's register tiles work through one ic_outer block of the kernel
/// (reg streams of KH x KW x ic_bn x oc_bn values, one per output-channel chunk), prefetch the
/// next block into L2, one cache line per iteration of the innermost reduction loop (more when
/// the block has more lines than the loop has iterations), so that the block's first row of
/// tiles finds it there. Without it the hardware prefetchers see the weights only in bursts
/// (each block is read from DRAM by the first row of tiles, then reused by the others) and the
/// FMAs wait on memory: C12 (9.4 MB of weights) ran 2.1 ms cold against 1.6 ms warm.
void prefetch_next_kernel_block(te::Stage& sa, const te::Tensor& kernel, const te::IterVar& tile,
                                const std::vector<te::IterVar>& rax, const te::IterVar& rows,
                                int64_t n_rows, const te::IterVar& cols, int64_t n_cols,
                                int64_t reg, int64_t out_chunks) {
  constexpr int64_t kLineFloats = 16;  // 64-byte cache lines
  std::vector<int64_t> ks = static_shape(kernel, kOp);
  const int64_t kh = ks[2], kw = ks[3], ic_bn = ks[4], oc_bn = ks[5];
  const int64_t stream_lines = kh * kw * ic_bn * oc_bn / kLineFloats;
  if (stream_lines == 0) return;
  const int64_t iters = n_rows * n_cols * kh * kw * ic_bn;
  const int64_t per_iter = (reg * stream_lines + iters - 1) / iters;
  // Iteration number t within the block: rows, cols, kh, kw, ic_inner (the loop order).
  Expr t = (((rows->var * ci(n_cols) + cols->var) * ci(kh) + rax[1]->var) * ci(kw) + rax[2]->var) *
               ci(ic_bn) +
           rax[3]->var;
  Expr chunk0 = floormod(tile->var, ci(out_chunks / reg)) * ci(reg);
  for (int64_t i = 0; i < per_iter; ++i) {
    Expr line = t * ci(per_iter) + ci(i);
    // Line `line` of the next block: stream line % reg (round robin), line / reg within it.
    sa.prefetch(kernel, rax[3],
                {chunk0 + floormod(line, ci(reg)), rax[0]->var + 1, 0, 0, 0,
                 floordiv(line, ci(reg)) * ci(kLineFloats)});
  }
}

}  // namespace

std::vector<int64_t> packed_conv2d_weight_shape(const std::vector<int64_t>& k, int64_t ic_bn,
                                                int64_t oc_bn) {
  const char* op = "pack_conv2d_weight";
  KILN_USER_CHECK(k.size() == 4) << op << ": expected an OIHW kernel, got " << shape_str(k);
  KILN_USER_CHECK(ic_bn > 0 && oc_bn > 0 && k[1] % ic_bn == 0 && k[0] % oc_bn == 0)
      << op << ": blocks (ic " << ic_bn << ", oc " << oc_bn << ") must divide the kernel's " << k[1]
      << " input and " << k[0] << " output channels (kernel " << shape_str(k) << ")";
  return {k[0] / oc_bn, k[1] / ic_bn, k[2], k[3], ic_bn, oc_bn};
}

te::Tensor pack_conv2d_weight(const te::Tensor& kernel, int64_t ic_bn, int64_t oc_bn,
                              const std::string& name) {
  std::vector<int64_t> ps =
      packed_conv2d_weight_shape(static_shape(kernel, "pack_conv2d_weight"), ic_bn, oc_bn);
  return te::compute(
      detail::to_exprs(ps),
      [&](const std::vector<Var>& i) {
        return kernel(i[0] * ci(oc_bn) + i[5], i[1] * ci(ic_bn) + i[4], i[2], i[3]);
      },
      name, detail::tag_of(tag::kInjective, "pack_conv2d_weight"));
}

std::vector<int64_t> conv2d_nchwc_shape(const std::vector<int64_t>& d,
                                        const std::vector<int64_t>& k, const Conv2DParams& p) {
  check_conv_params(p, kOp);
  KILN_USER_CHECK(d.size() == 5 && k.size() == 6)
      << kOp << ": expected data [N, C/x, H, W, x] and packed kernel [O/y, C/x, KH, KW, x, y], "
      << "got data " << shape_str(d) << " and kernel " << shape_str(k);
  KILN_USER_CHECK(p.groups == 1) << kOp << ": groups " << p.groups
                                 << " is not supported in the blocked layout (use conv2d_nchw, "
                                    "or depthwise_conv2d_nchwc for depthwise convolutions)";
  KILN_USER_CHECK(d[1] == k[1] && d[4] == k[4])
      << kOp << ": data " << shape_str(d) << " (" << d[1] * d[4] << " channels in blocks of "
      << d[4] << ") does not match packed kernel " << shape_str(k) << " (" << k[1] * k[4]
      << " input channels in blocks of " << k[4] << ")";
  return detail::nchwc_output_shape(d, k, p, kOp);
}

namespace detail {

te::Tensor conv_epilogue(const te::Tensor& conv, const EpilogueSpec& ep, const std::string& name,
                         const char* op) {
  if (ep.empty()) return conv;
  std::vector<int64_t> os = static_shape(conv, op);
  const int64_t O = os[1] * os[4];
  if (ep.bias.defined()) {
    std::vector<int64_t> bs = static_shape(ep.bias, op);
    KILN_USER_CHECK(bs == std::vector<int64_t>{O})
        << op << ": bias " << shape_str(bs) << " must have one value per output channel [" << O
        << "]";
  }
  if (ep.residual.defined()) {
    std::vector<int64_t> rs = static_shape(ep.residual, op);
    KILN_USER_CHECK(rs == os) << op << ": residual " << shape_str(rs)
                              << " must have the output's shape " << shape_str(os);
  }
  const int64_t y_bn = os[4];
  return te::compute(
      to_exprs(os),
      [&](Var n, Var ob, Var y, Var x, Var oi) {
        Expr v = conv(n, ob, y, x, oi);
        if (ep.bias.defined()) v = v + ep.bias(ob * ci(y_bn) + oi);
        if (ep.residual.defined()) v = v + ep.residual(n, ob, y, x, oi);
        if (ep.relu) v = max_bound(v, make_zero(v.dtype()));
        return v;
      },
      name + "_epilogue", tag_of(tag::kElemWise, "conv2d_epilogue"));
}

autotune::Instance conv_template_instance(
    Config& cfg, const std::vector<int64_t>& data_shape, const std::vector<int64_t>& kernel_shape,
    const char* kernel_name, int64_t out_channel, const std::vector<int64_t>& out_shape,
    const EpilogueFlags& ep,
    const std::function<te::Tensor(const te::Tensor&, const te::Tensor&, const EpilogueSpec&)>&
        compute,
    const std::function<void(Config&, te::Schedule&, const te::Tensor&)>& schedule) {
  const DataType f32 = DataType::Float(32);
  te::Tensor data = te::placeholder(to_exprs(data_shape), f32, "data");
  te::Tensor kernel = te::placeholder(to_exprs(kernel_shape), f32, kernel_name);
  std::vector<te::Tensor> args = {data, kernel};
  std::vector<bool> weights = {false, true};
  EpilogueSpec spec;
  spec.relu = ep.relu;
  if (ep.bias) {
    spec.bias = te::placeholder({ci(out_channel)}, f32, "bias");
    args.push_back(spec.bias);
    weights.push_back(true);
  }
  if (ep.residual) {
    spec.residual = te::placeholder(to_exprs(out_shape), f32, "residual");
    args.push_back(spec.residual);
    weights.push_back(false);
  }
  te::Tensor out = compute(data, kernel, spec);
  te::Schedule s = te::create_schedule({out});
  schedule(cfg, s, out);
  args.push_back(out);
  weights.push_back(false);
  return autotune::Instance{s, args, cfg, weights};
}

}  // namespace detail

namespace detail {

std::vector<int64_t> nchwc_output_shape(const std::vector<int64_t>& d,
                                        const std::vector<int64_t>& k, const Conv2DParams& p,
                                        const char* op) {
  int64_t oh =
      conv_out_extent(d[2], k[2], p.stride_h, p.dilation_h, p.padding.top, p.padding.bottom);
  int64_t ow =
      conv_out_extent(d[3], k[3], p.stride_w, p.dilation_w, p.padding.left, p.padding.right);
  KILN_USER_CHECK(oh > 0 && ow > 0)
      << op << ": the kernel " << k[2] << "x" << k[3] << " (dilation (" << p.dilation_h << ", "
      << p.dilation_w << ")) does not fit the padded input: data " << shape_str(d) << ", padding "
      << p.padding.str();
  return {d[0], k[0], oh, ow, k[5]};
}

te::Tensor conv2d_nchwc_main(const te::Tensor& data, const te::Tensor& kernel,
                             const std::vector<int64_t>& os, const Conv2DParams& p,
                             const std::function<Expr(Var ob, Var rco)>& input_block,
                             const std::string& name, const std::string& tag) {
  std::vector<int64_t> ks = static_shape(kernel, "conv2d_nchwc_main");
  te::Tensor pad = pad_spatial(data, 2, p.padding, name + "_pad");
  te::IterVar rco = te::reduce_axis({0, static_cast<int32_t>(ks[1])}, "ic_outer");
  te::IterVar kh = te::reduce_axis({0, static_cast<int32_t>(ks[2])}, "kh");
  te::IterVar kw = te::reduce_axis({0, static_cast<int32_t>(ks[3])}, "kw");
  te::IterVar rci = te::reduce_axis({0, static_cast<int32_t>(ks[4])}, "ic_inner");
  return te::compute(
      detail::to_exprs(os),
      [&](Var n, Var ob, Var y, Var x, Var oi) {
        Expr h = y * ci(p.stride_h) + kh->var * ci(p.dilation_h);
        Expr w = x * ci(p.stride_w) + kw->var * ci(p.dilation_w);
        return te::sum(
            pad(n, input_block(ob, rco->var), h, w, rci) * kernel(ob, rco, kh, kw, rci, oi),
            {rco, kh, kw, rci});
      },
      name, tag);
}

}  // namespace detail

te::Tensor conv2d_nchwc(const te::Tensor& data, const te::Tensor& kernel, const Conv2DParams& p,
                        const EpilogueSpec& ep, const std::string& name) {
  std::vector<int64_t> ds = static_shape(data, kOp), ks = static_shape(kernel, kOp);
  std::vector<int64_t> os = conv2d_nchwc_shape(ds, ks, p);
  te::Tensor conv = detail::conv2d_nchwc_main(
      data, kernel, os, p, [](Var, Var rco) { return Expr(rco); }, name, kOp);
  return detail::conv_epilogue(conv, ep, name, kOp);
}

Conv2DNCHWcLayout define_conv2d_nchwc_knobs(Config& cfg, const Conv2DWorkload& wl,
                                            const Target& target, ChannelBlocks blocks) {
  conv2d_nchw_shape(wl.data_shape(), wl.kernel_shape(), wl.params);  // validates
  KILN_USER_CHECK(wl.params.groups == 1)
      << kOp << ": groups " << wl.params.groups << " is not supported in the blocked layout";
  const int64_t lanes = std::max(1, target.vector_bits() / 32);
  auto [ic_bn, oc_bn] = define_block_knobs(cfg, wl.in_channel, wl.out_channel, lanes, blocks);
  define_schedule_knobs(cfg, wl.out_channel, wl.in_channel, wl.out_height(), wl.out_width(),
                        wl.kernel_h, wl.kernel_w, lanes, oc_bn, target.vector_registers());
  Conv2DNCHWcLayout l;
  l.ic_bn = ic_bn;
  l.oc_bn = oc_bn;
  l.data_layout = nchwc_layout(ic_bn);
  l.out_layout = nchwc_layout(oc_bn);
  l.data_shape = nchwc_shape(wl.data_shape(), ic_bn, kOp);
  l.kernel_shape = packed_conv2d_weight_shape(wl.kernel_shape(), ic_bn, oc_bn);
  l.out_shape = nchwc_shape(wl.out_shape(), oc_bn, kOp);
  return l;
}

void schedule_conv2d_nchwc(Config& cfg, te::Schedule& s, const te::Tensor& out,
                           const Target& target) {
  te::Tensor conv = find_tagged({out}, kOp);
  KILN_USER_CHECK(conv.defined()) << "schedule_conv2d_nchwc: no conv2d_nchwc stage feeds output '"
                                  << out.name() << "'";
  std::vector<int64_t> cs = static_shape(conv, kOp);
  KILN_USER_CHECK(static_shape(out, kOp) == cs)
      << "schedule_conv2d_nchwc: output '" << out.name() << "' must have the convolution's shape "
      << shape_str(cs);
  std::vector<te::Tensor> ins = detail::inputs_of(conv);
  te::Tensor pad = ins[0];
  std::vector<int64_t> ks = static_shape(ins[1], kOp), ds = static_shape(pad, kOp);
  const int64_t lanes = std::max(1, target.vector_bits() / 32);
  const int64_t ic_bn = ks[4], oc_bn = ks[5];
  // The blocks are the tensors' (a template defined its block knobs before building them).
  if (cfg.space().find("tile_ic") >= 0) {
    KILN_USER_CHECK(cfg.split("tile_ic").size[1] == ic_bn && cfg.split("tile_oc").size[1] == oc_bn)
        << "schedule_conv2d_nchwc: the config's channel blocks (tile_ic "
        << cfg.split("tile_ic").size[1] << ", tile_oc " << cfg.split("tile_oc").size[1]
        << ") differ from the tensors' (ic " << ic_bn << ", oc " << oc_bn << ")";
  }
  define_schedule_knobs(cfg, ks[0] * oc_bn, ks[1] * ic_bn, cs[2], cs[3], ks[2], ks[3], lanes, oc_bn,
                        target.vector_registers());

  inline_injective_consumers(s, {out}, {conv});
  if (detail::is_pad(pad)) detail::schedule_pad_root(s, pad, true);
  te::Tensor acc = detail::accumulator(s, conv, out);

  te::Stage so = s[out];
  auto ax = so.op_axis();
  const bool acc_outer = cfg.knob("acc_outer") != 0;
  // oc_reg chunks per register tile; where they do not divide the chunks, the last tile is
  // shifted inwards (recomputing chunks of the one before: EfficientNet-B3's 136- and
  // 232-channel outputs are 17 and 29 blocks of 8, where only one chunk divided, a tile of one
  // vector paying a broadcast per FMA); acc_outer tiles whole chunks (the largest halving that
  // divides).
  const int64_t want = std::min<int64_t>(cfg.knob("oc_reg"), cs[1]);
  const int64_t reg = acc_outer ? detail::oc_chunks_per_tile(want, cs[1]) : want;
  auto ob = so.split(ax[1], ci(reg), /*shift_tail=*/cs[1] % reg != 0);
  auto oh = cfg.split("tile_oh").apply(so, ax[2]);
  const int64_t th = cfg.split("tile_oh").size[1], tw = cfg.split("tile_ow").size[1];
  // A last column tile that does not fit is shifted inwards (te::Stage::split): whole register
  // tiles everywhere, where a guarded tail in the parallel loop (the same tail in every channel
  // chunk) left all but the first chunk's tiles on a slow path with a variable extent
  // (Conv-TasNet's 1x1 convs over 1999 frames in 8-wide tiles: 29 ms guarded, 14 ms shifted).
  // acc_outer tiles its accumulator itself.
  std::vector<te::IterVar> ow;
  if (!acc_outer && cs[3] % tw != 0 && cs[3] > tw) {
    auto [o, i] = so.split(ax[3], ci(tw), /*shift_tail=*/true);
    ow = {o, i};
  } else {
    ow = cfg.split("tile_ow").apply(so, ax[3]);
  }
  so.reorder({ax[0], ob.first, oh[0], ow[0], ob.second, oh[1], ow[1], ax[4]});
  // The parallel loop: batch, channel chunks and row tiles; with fewer than 16 of those (a
  // Conv1d's single row over a few channel chunks: WaveNet, QuartzNet) the column tiles too,
  // so that every thread gets work and the pool can balance it.
  const int64_t chunks = (cs[1] + reg - 1) / reg, row_tiles = (cs[2] + th - 1) / th;
  const int64_t rows = cs[0] * chunks * row_tiles;
  const bool by_columns = !acc_outer && rows < 16;
  // The order of the tasks (n, chunk, row tile): chunks outer, neighbours sharing their kernel
  // slice, reads the kernel once and the input once per chunk; rows outer, a row tile's input
  // serving every chunk while it sits in L2, reads the input once and the kernel once per row
  // tile. Rows outer where that reads less and the input does not stay in L2 anyway:
  // SegFormer's decoder (a 1x1 conv of 1024 -> 256 channels on 64x80, 21 MB of input against
  // 1 MB of kernel) read its input 8 times with chunks outer and ran at 45% of the FMA peak
  // (51 ms), 86% (27 ms) with rows outer. Where the input fits L2 the order only moved the
  // output's write streams: ShuffleNet's 24-channel 1x1 convs on 28x28 ran 9 -> 12 us.
  const double in_bytes = 4.0 * ds[1] * ds[2] * ds[3] * ds[4],
               k_bytes = 4.0 * ks[0] * ks[1] * ks[2] * ks[3] * ks[4] * ks[5];
  const bool rows_outer = !acc_outer && !by_columns && in_bytes > kL2Bytes &&
                          in_bytes * (chunks - 1) > k_bytes * (row_tiles - 1);
  if (rows_outer) so.reorder({ax[0], oh[0], ob.first});
  te::IterVar tile = acc_outer    ? so.fuse({ax[0], ob.first})
                     : by_columns ? so.fuse({ax[0], ob.first, oh[0], ow[0]})
                     : rows_outer ? so.fuse({ax[0], oh[0], ob.first})
                                  : so.fuse({ax[0], ob.first, oh[0]});
  so.parallel(tile);
  so.unroll(ob.second);
  so.unroll(oh[1]);
  so.unroll(ow[1]);
  vectorize_block(so, ax[4], oc_bn, lanes);

  te::Stage sa = s[acc];
  auto aax = sa.op_axis();
  auto rax = sa.op_reduce_axis();  // ic_outer, kh, kw, ic_inner
  if (!acc_outer) {
    // One register tile at a time, through the whole reduction.
    // Pixels outside channel chunks: each broadcast input value meets the step's V kernel
    // vectors right away, so one broadcast register is live at a time. With the chunks outside,
    // LLVM kept all n broadcasts live across the chunks and spilled accumulators once
    // V * n + n + V > 32 (2 vectors x 14 pixels: 5.6 ms against 1.4 ms for oneDNN on C2).
    sa.compute_at(so, by_columns ? tile : ow[0]);
    sa.reorder({aax[0], rax[0], rax[1], rax[2], rax[3], aax[2], aax[3], aax[1], aax[4]});
    sa.unroll(aax[2]);
    sa.unroll(aax[3]);
    if (!by_columns && ks[2] == 1 && ks[3] == 1 && ks[1] * th >= kMaxStreams &&
        in_bytes > kL2Bytes) {
      prefetch_next_column_tile(sa, pad, rax[0], tile->var, ow[0]->var, rows_outer, chunks,
                                row_tiles, th, tw, cs, ds);
    }
  } else {
    // acc_outer: the accumulator holds the task's whole output (every row, oc_reg chunks) in
    // memory, and each ic_outer block of the kernel (oc_reg x ic_bn x KH x KW vectors) is
    // applied to all of its register tiles before the next block: the kernel streams through
    // once per task instead of once per row of tiles, which matters when it comes from DRAM
    // (ResNet's 7x7x512 layers: 9.4 MB of weights, read at a few GB/s in a network).
    sa.compute_at(so, tile);
    auto ah = sa.split(aax[2], ci(cfg.split("tile_oh").size[1]));
    auto aw = sa.split(aax[3], ci(cfg.split("tile_ow").size[1]));
    sa.reorder({aax[0], rax[0], ah.first, aw.first, rax[1], rax[2], rax[3], ah.second, aw.second,
                aax[1], aax[4]});
    sa.unroll(ah.second);
    sa.unroll(aw.second);
    // Not with 16 vector registers (AVX2): the prefetch addresses (a division by oc_reg per
    // step) took registers the tile needed, and EfficientNet-B3's 7x7 1x1 layers (3.5 MB
    // kernels) ran 7.5 ms with them, 4.5 ms without (Zen 3, in the network; wide_resnet50_2's
    // acc_outer layers unchanged).
    if (target.vector_registers() > 16)
      prefetch_next_kernel_block(sa, ins[1], tile, rax, ah.first, cs[2] / th, aw.first,
                                 (cs[3] + tw - 1) / tw, reg, cs[1]);
  }
  sa.unroll(aax[1]);
  vectorize_block(sa, aax[4], oc_bn, lanes);
  if (cfg.knob("unroll_kw")) sa.unroll(rax[2]);
  // Not with acc_outer: its accumulator is memory that LLVM promotes to registers only after
  // the unrolled body is built, and a body of ic_inner x KW x tile load-FMA-stores took minutes
  // to compile (C6 with a 64-channel ic_inner, 4 vectors x 28 pixels: over 2 minutes in
  // VectorCombine, which stalled a tuning run). Nor past 16 channels (the same body with
  // register accumulators: 25 s).
  if (cfg.knob("unroll_ic") && !acc_outer && ic_bn <= 16) sa.unroll(rax[3]);
  // With 16 vector registers (AVX2) the loop over input-channel blocks stays a loop. LLVM
  // unrolled a short one fully (4 blocks of 8 channels: 384 FMAs in a row), hoisted the whole
  // kernel slice out of the pixel loop into spilled registers and scheduled each accumulator's
  // FMAs back to back, a chain of dependent FMAs: a 1x1 conv of 32 -> 192 channels on 56x56
  // ran at 45% of the FMA peak, 16% with a SiLU epilogue, and at 94% / 47% with the loop kept
  // (EfficientNet-B3's expansions, a Zen 3). A long loop (resnext's 32 blocks) was a loop
  // already. AVX-512's 32 registers: not measured with it, left as it was.
  if (!acc_outer && target.vector_registers() <= 16) sa.pragma(rax[0], "no_unroll");
}

te::Schedule schedule_conv2d_nchwc(const std::vector<te::Tensor>& outs, const Target& target) {
  KILN_USER_CHECK(!outs.empty()) << "schedule_conv2d_nchwc: no outputs";
  te::Schedule s = te::create_schedule(outs);
  Config cfg = Config::fallback();
  schedule_conv2d_nchwc(cfg, s, outs[0], target);
  return s;
}

autotune::Template conv2d_nchwc_template(const Conv2DWorkload& wl, const EpilogueFlags& ep,
                                         const Target& target, ChannelBlocks blocks) {
  // Version 2: the register tile's loop order changed (pixels outside channel chunks), so
  // records measured with version 1 no longer describe the same kernels. Version 3: the knob
  // acc_outer. Version 4: oc_reg 3 and tile_ow widths with a tail (the knobs' choices moved).
  // Version 5: acc_outer prefetches the next kernel block (the same configs, faster kernels).
  // Version 6: tasks over an input bigger than L2 may run rows outer, and 1x1 tiles reading
  // many input streams prefetch their next column tile (the same configs). Version 7: a last
  // column tile that does not fit is shifted inwards instead of guarded (the same configs).
  // Version 8: oc_reg 5; with 16 vector registers the ic_outer loop stays rolled and acc_outer
  // tiles do not prefetch (the same configs, other kernels on AVX2). Version 9: an oc_reg that
  // does not divide the chunks shifts the last tile inwards (it was halved until it divided).
  return {kOp, "9", [wl, ep, target, blocks](Config& cfg) {
            Conv2DNCHWcLayout l = define_conv2d_nchwc_knobs(cfg, wl, target, blocks);
            return detail::conv_template_instance(
                cfg, l.data_shape, l.kernel_shape, "packed_kernel", wl.out_channel, l.out_shape, ep,
                [&](const te::Tensor& d, const te::Tensor& k, const EpilogueSpec& spec) {
                  return conv2d_nchwc(d, k, wl.params, spec);
                },
                [&](Config& c, te::Schedule& s, const te::Tensor& out) {
                  schedule_conv2d_nchwc(c, s, out, target);
                });
          }};
}

}  // namespace kiln::topi
