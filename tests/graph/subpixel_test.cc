// Tests of transposed convolutions by sub-pixel decomposition (alter_layout.cc,
// topi/subpixel.h): graphs of conv2d_transpose built at opt_level 2 (a conv2d_nchwc per phase,
// or one over the stacked phases, and a subpixel_interleave) run through the GraphExecutor against
// a naive C++ loop nest of the ONNX ConvTranspose definition on seeded random inputs, over kernels
// not divisible by the stride, stride 3, asymmetric padding, crops, output_padding and few output
// channels, and with groups (depthwise ones as a depthwise_conv2d_nchwc per phase); the rewritten
// graph's structure for a DCGAN-like chain (no dilate2d, no layout_transform between layers, the
// epilogue fused into the interleave); and the interleave's shape errors.

#include "kiln/topi/subpixel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "common/error.h"
#include "graph/graph_test_util.h"
#include "kiln/graph/build_module.h"
#include "kiln/graph/transform.h"
#include "kiln/runtime/graph_executor.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;
using Ints = std::vector<int64_t>;
using test_util::random_array;
const DataType f32 = DataType::Float(32);

struct Case {
  int64_t kh, kw, sh, sw;
  Ints pads;  // top, left, bottom, right
  int64_t oph, opw;
  int64_t n, h, w, c, o;
  int64_t groups = 1;
};

std::string describe(const Case& k) {
  std::string s = "K " + std::to_string(k.kh) + "x" + std::to_string(k.kw) + " s " +
                  std::to_string(k.sh) + "x" + std::to_string(k.sw) + " pads";
  for (int64_t p : k.pads) s += " " + std::to_string(p);
  return s + " outpad " + std::to_string(k.oph) + "," + std::to_string(k.opw) + " in " +
         std::to_string(k.n) + "x" + std::to_string(k.c) + "x" + std::to_string(k.h) + "x" +
         std::to_string(k.w) + " O " + std::to_string(k.o) + " groups " + std::to_string(k.groups);
}

/// ONNX ConvTranspose (dilation 1) by its definition: every input pixel scatters
/// x[n, c, i, j] · w[c, o', ky, kx] to output channel (c / Cg)·Og + o' at (s·i − pad_top + ky,
/// s·j − pad_left + kx), with Cg = C / groups, Og = O / groups.
NDArray reference(const NDArray& x, const NDArray& w, const Case& k) {
  const int64_t Cg = k.c / k.groups, Og = k.o / k.groups;
  const int64_t OH = k.sh * (k.h - 1) + k.oph + k.kh - k.pads[0] - k.pads[2];
  const int64_t OW = k.sw * (k.w - 1) + k.opw + k.kw - k.pads[1] - k.pads[3];
  std::vector<double> acc(static_cast<size_t>(k.n * k.o * OH * OW), 0.0);
  const float *xs = x.data_as<float>(), *ws = w.data_as<float>();
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t c = 0; c < k.c; ++c)
      for (int64_t i = 0; i < k.h; ++i)
        for (int64_t j = 0; j < k.w; ++j)
          for (int64_t og = 0; og < Og; ++og)
            for (int64_t ky = 0; ky < k.kh; ++ky)
              for (int64_t kx = 0; kx < k.kw; ++kx) {
                const int64_t y = k.sh * i - k.pads[0] + ky, z = k.sw * j - k.pads[1] + kx;
                if (y < 0 || y >= OH || z < 0 || z >= OW) continue;
                const int64_t o = c / Cg * Og + og;
                acc[static_cast<size_t>(((n * k.o + o) * OH + y) * OW + z)] +=
                    double(xs[((n * k.c + c) * k.h + i) * k.w + j]) *
                    ws[((c * Og + og) * k.kh + ky) * k.kw + kx];
              }
  NDArray r = NDArray::empty({k.n, k.o, OH, OW}, f32);
  for (size_t e = 0; e < acc.size(); ++e) r.data_as<float>()[e] = static_cast<float>(acc[e]);
  return r;
}

int count_op(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.is_op() && n.op == op;
  return c;
}

/// Builds conv2d_transpose (then relu when `relu`) at opt_level 2, checks that the sub-pixel
/// rewrite happened (or, `rewritten` false, that the node stayed), runs it and compares with
/// the reference; returns the number of conv2d_nchwc or depthwise_conv2d_nchwc (1: the phases
/// stacked; sh·sw: one per phase).
int check_case(const Case& k, uint32_t seed, bool relu, bool rewritten = true) {
  SCOPED_TRACE(describe(k));
  std::mt19937 rng(seed);
  NDArray wv = random_array({k.c, k.o / k.groups, k.kh, k.kw}, rng);
  NDArray xv = random_array({k.n, k.c, k.h, k.w}, rng);
  Graph g;
  Entry x = g.add_input("x", {k.n, k.c, k.h, k.w}, f32);
  Entry t = g.add_op("conv2d_transpose", {x, g.add_constant("w", wv)},
                     {{"strides", Ints{k.sh, k.sw}},
                      {"padding", k.pads},
                      {"output_padding", Ints{k.oph, k.opw}},
                      {"groups", k.groups}},
                     "up");
  g.add_output(relu ? g.add_op("relu", {t}) : t);
  Graph a = optimize(g, 2, Target::host());
  EXPECT_EQ(count_op(a, "subpixel_interleave"), rewritten ? 1 : 0) << a.str();
  EXPECT_EQ(count_op(a, "dilate2d"), 0) << a.str();
  EXPECT_EQ(count_op(a, "conv2d_transpose"), rewritten ? 0 : 1) << a.str();

  const int convs = count_op(a, "conv2d_nchwc") + count_op(a, "depthwise_conv2d_nchwc");
  CompiledModule m = build_module(g, Target::host(), BuildOptions{2, true});
  auto e = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  e.set_input("x", xv);
  e.run();
  NDArray got = e.get_output(0), want = reference(xv, wv, k);
  EXPECT_EQ(got.shape(), want.shape());
  if (got.shape() != want.shape()) return convs;
  double worst = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double r = want.data_as<float>()[i];
    if (relu) r = std::max(r, 0.0);
    double d = std::abs(got.data_as<float>()[i] - r) / (1.0 + std::abs(r));
    worst = std::max(worst, std::isfinite(d) ? d : 1e9);
    bad += !(d < 1e-4);
  }
  EXPECT_EQ(bad, 0) << "worst relative error " << worst;
  return convs;
}

TEST(Subpixel, MatchesNaiveTransposedConvolution) {
  const std::vector<Case> cases = {
      {4, 4, 2, 2, {1, 1, 1, 1}, 0, 0, 1, 4, 4, 32, 16},  // DCGAN's layers
      {4, 4, 2, 2, {1, 1, 1, 1}, 0, 0, 1, 8, 8, 16, 3},   // DCGAN's last layer (O = 3)
      {3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 1, 5, 6, 16, 16},  // K % s != 0, output_padding
      {5, 5, 3, 3, {2, 1, 0, 2}, 1, 2, 1, 5, 4, 8, 16},   // stride 3, asymmetric pads
      {3, 4, 2, 3, {0, 2, 1, 0}, 1, 0, 2, 4, 3, 16, 8},   // per-axis K and s, batch 2
      {3, 3, 2, 2, {3, 3, 3, 3}, 0, 0, 1, 6, 6, 16, 16},  // padding > K − 1 (a crop)
      {2, 2, 2, 2, {0, 0, 0, 0}, 0, 0, 1, 3, 5, 12, 24},  // O = 24: output in 12-blocks
      {1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 4, 4, 16, 16},  // one tap; phases with no tap
      {4, 4, 2, 2, {1, 1, 1, 1}, 0, 0, 1, 4, 4, 20, 5},   // odd C and O
      {4, 4, 1, 1, {0, 0, 0, 0}, 0, 0, 1, 1, 1, 20, 32},  // DCGAN's first: 1x1 → 4x4
      {3, 3, 2, 2, {1, 0, 0, 1}, 1, 0, 1, 1, 1, 8, 16},   // one pixel, stride < K
      {3, 2, 1, 2, {1, 0, 1, 0}, 0, 1, 1, 1, 5, 16, 16},  // one row, stride 1 along it
  };
  uint32_t seed = 11;
  std::vector<int> convs;
  for (const Case& k : cases) convs.push_back(check_case(k, seed++, false));
  // One conv per phase where every phase has taps and outputs and the host's channel block
  // (its vector lanes) divides O; else the stacked phases (few channels, K < s, a phase without
  // outputs). O = 8 and O = 24 are blocked with 8 lanes (AVX2), not with 16 (AVX-512).
  const int64_t L = test_util::host_lanes();
  if (L != 8 && L != 16) GTEST_SKIP() << "expectations written for 8 or 16 lanes, host has " << L;
  const int per_phase8 = L == 8 ? 6 : 1, per_phase24 = L == 8 ? 4 : 1;
  EXPECT_EQ(convs, (std::vector<int>{4, 1, 4, 9, per_phase8, 4, per_phase24, 1, 1, 16, 1, 1}));
  check_case(cases[0], 99, true);
  check_case(cases[1], 98, true);
}

TEST(Subpixel, DepthwiseTransposedConvolutionRunsADepthwiseConvolutionPerPhase) {
  // groups = C, one output channel per group (FCN-style learnable up-sampling).
  const std::vector<Case> cases = {
      {4, 4, 2, 2, {1, 1, 1, 1}, 0, 0, 1, 8, 8, 32, 32, 32},  // k 4, s 2: 2x2 taps per phase
      {3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 1, 5, 6, 16, 16, 16},  // K % s != 0, output_padding
      {5, 5, 3, 3, {2, 1, 0, 2}, 1, 2, 2, 5, 4, 16, 16, 16},  // stride 3, asymmetric, batch 2
      {4, 3, 2, 1, {1, 1, 1, 1}, 0, 0, 1, 6, 7, 64, 64, 64},  // stride 1 along x
  };
  uint32_t seed = 31;
  std::vector<int> convs;
  for (const Case& k : cases) convs.push_back(check_case(k, seed++, false));
  EXPECT_EQ(convs, (std::vector<int>{4, 4, 9, 2}));
  check_case(cases[0], 77, true);
  // Not rewritten, computed by the grouped NCHW compute: too few channels for a vector block,
  // a channel multiplier of 2, and groups that are not depthwise.
  check_case({4, 4, 2, 2, {1, 1, 1, 1}, 0, 0, 1, 4, 4, 6, 6, 6}, 41, false, false);
  check_case({4, 4, 2, 2, {1, 1, 1, 1}, 0, 0, 1, 4, 4, 16, 32, 16}, 42, false, false);
  check_case({3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 1, 4, 5, 16, 8, 2}, 43, true, false);
}

// x → [conv2d_transpose → scale/shift per channel → relu] × 2 → conv2d_transpose(O = 3) → tanh
TEST(Subpixel, DcganChainStaysBlocked) {
  std::mt19937 rng(5);
  Graph g;
  Entry h = g.add_input("x", {1, 64, 4, 4}, f32);
  const Ints chans = {64, 32, 16};
  for (size_t l = 0; l + 1 < chans.size(); ++l) {
    const int64_t C = chans[l], O = chans[l + 1];
    Entry t =
        g.add_op("conv2d_transpose",
                 {h, g.add_constant("w" + std::to_string(l), random_array({C, O, 4, 4}, rng))},
                 {{"strides", Ints{2, 2}}, {"padding", Ints{1, 1, 1, 1}}});
    Entry s = g.add_op("multiply", {t, g.add_constant("scale" + std::to_string(l),
                                                      random_array({1, O, 1, 1}, rng, 0.5, 1.5))});
    Entry b = g.add_op(
        "add", {s, g.add_constant("shift" + std::to_string(l), random_array({1, O, 1, 1}, rng))});
    h = g.add_op("relu", {b});
  }
  Entry t =
      g.add_op("conv2d_transpose", {h, g.add_constant("w_rgb", random_array({16, 3, 4, 4}, rng))},
               {{"strides", Ints{2, 2}}, {"padding", Ints{1, 1, 1, 1}}});
  g.add_output(g.add_op("tanh", {t}));
  Graph a = optimize(g, 2, Target::host());
  const std::string text = a.str();
  // The hidden layers: one conv2d_nchwc per phase (4 each); the last (O = 3): one stacked.
  EXPECT_EQ(count_op(a, "conv2d_nchwc"), 9) << text;
  EXPECT_EQ(count_op(a, "subpixel_interleave"), 3) << text;
  EXPECT_EQ(count_op(a, "dilate2d"), 0) << text;
  // Only the graph input is transformed into the blocked layout.
  EXPECT_EQ(count_op(a, "layout_transform"), 1) << text;
  EXPECT_NE(text.find("layout_transform(%0"), std::string::npos) << text;
  // The interleaves of the hidden layers write blocks of the host's lanes; the last one NCHW.
  const std::string L = std::to_string(test_util::host_lanes());
  const std::string b32 = std::to_string(32 / test_util::host_lanes()),
                    b16 = std::to_string(16 / test_util::host_lanes());
  EXPECT_NE(text.find("channels=32, offset=[0, 0], out_block=" + L +
                      ", out_size=[8, 8], "
                      "phase_offsets=[-1, 0, -1, 0], shift=[1, 1], strides=[2, 2]) : "
                      "float32[1, " +
                      b32 + ", 8, 8, " + L + "]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("channels=16, offset=[0, 0], out_block=" + L +
                      ", out_size=[16, 16], "
                      "phase_offsets=[-1, 0, -1, 0], shift=[1, 1], strides=[2, 2]) : "
                      "float32[1, " +
                      b16 + ", 16, 16, " + L + "]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(%31, channels=3, offset=[0, 0], out_block=0, out_size=[32, 32], "
                      "phase_offsets=[], shift=[1, 1], strides=[2, 2]) : float32[1, 3, 32, 32]"),
            std::string::npos)
      << text;
  // Each interleave heads a group with its epilogue: {interleave, multiply, add, relu}.
  const std::string groups = groups_str(a, fuse_ops(a));
  size_t fused = 0;
  for (size_t p = groups.find("{subpixel_interleave"); p != std::string::npos;
       p = groups.find("{subpixel_interleave", p + 1)) {
    const std::string grp = groups.substr(p, groups.find('}', p) - p);
    fused += grp.find("relu") != std::string::npos || grp.find("tanh") != std::string::npos;
  }
  EXPECT_EQ(fused, 3u) << groups;
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 7).max_err, 1e-4);
}

TEST(Subpixel, StrideOneAndDilationKeepThePlainRewrite) {
  std::mt19937 rng(3);
  Graph g;
  Entry x = g.add_input("x", {1, 16, 5, 5}, f32);
  Entry a =
      g.add_op("conv2d_transpose", {x, g.add_constant("w", random_array({16, 16, 3, 3}, rng))},
               {{"strides", Ints{1, 1}}});
  Entry b =
      g.add_op("conv2d_transpose", {a, g.add_constant("v", random_array({16, 16, 3, 3}, rng))},
               {{"strides", Ints{2, 2}}, {"dilation", Ints{2, 2}}});
  g.add_output(b);
  Graph o = optimize(g, 2, Target::host());
  EXPECT_EQ(count_op(o, "subpixel_interleave"), 0) << o.str();
  EXPECT_EQ(count_op(o, "dilate2d"), 1) << o.str();
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 4).max_err, 1e-4);
}

TEST(Subpixel, PlanAndShapeErrors) {
  // DCGAN: K 4, s 2, pad 1 → 2 taps, one pixel of padding each side, (H + 1) positions.
  topi::SubpixelAxis a = topi::plan_subpixel_axis(4, 4, 2, 1, 8);
  EXPECT_EQ(a.taps, 2);
  EXPECT_EQ(a.pad_lo, 1);
  EXPECT_EQ(a.pad_hi, 1);
  EXPECT_EQ(a.offset, 0);
  EXPECT_EQ(a.conv_extent, 5);
  // ... or per phase: q = y + 1 even (y odd) starts at input 1 with no padding before; odd
  // (y even) at input 0 with one pixel before; H positions each.
  topi::SubpixelAxis p0 = topi::plan_subpixel_phase(4, 4, 2, 1, 8, 0),
                     p1 = topi::plan_subpixel_phase(4, 4, 2, 1, 8, 1);
  EXPECT_EQ(Ints({p0.taps, p0.pad_lo, p0.pad_hi, p0.offset, p0.conv_extent}),
            Ints({2, 0, 1, -1, 4}));
  EXPECT_EQ(Ints({p1.taps, p1.pad_lo, p1.pad_hi, p1.offset, p1.conv_extent}),
            Ints({2, 1, 0, 0, 4}));
  // K 3, s 2: the phases (q mod 2) have 2 and 1 taps; K 1: phase 1 has none.
  EXPECT_EQ(topi::plan_subpixel_phase(5, 3, 2, 1, 10, 0).taps, 2);  // taps 0, 2
  EXPECT_EQ(topi::plan_subpixel_phase(5, 3, 2, 1, 10, 1).taps, 1);  // tap 1
  EXPECT_EQ(topi::plan_subpixel_phase(5, 1, 2, 0, 10, 1).taps, 0);
  topi::SubpixelParams p;
  p.stride_h = p.stride_w = 2;
  p.shift_h = p.shift_w = 1;
  p.out_h = p.out_w = 8;
  p.channels = 16;
  p.out_block = 16;
  EXPECT_EQ(topi::subpixel_interleave_shape({1, 4, 5, 5, 16}, p), (Ints{1, 1, 8, 8, 16}));
  EXPECT_NE(testing::error_of([&] {
              topi::subpixel_interleave_shape({1, 3, 5, 5, 16}, p);
            }).find("4 phases of 16 channels need 64 input channels"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              topi::subpixel_interleave_shape({1, 4, 4, 5, 16}, p);
            }).find("output height 8 reads phase positions [0, 5) of 4"),
            std::string::npos);
  // One input per phase: each phase's positions are checked against its own tensor.
  p.phase_offsets_h = p.phase_offsets_w = {-1, 0};
  EXPECT_EQ(topi::subpixel_interleave_shape(std::vector<Ints>(4, Ints{1, 1, 4, 4, 16}), p),
            (Ints{1, 1, 8, 8, 16}));
  EXPECT_NE(testing::error_of([&] {
              topi::subpixel_interleave_shape(
                  {{1, 1, 4, 4, 16}, {1, 1, 4, 4, 16}, {1, 1, 4, 3, 16}, {1, 1, 4, 4, 16}}, p);
            }).find("phase 2: output width 8 reads positions [0, 4) of 3"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              topi::subpixel_interleave_shape(std::vector<Ints>(3, Ints{1, 1, 4, 4, 16}), p);
            }).find("strides (2, 2) need 4 phase inputs, got 3"),
            std::string::npos);
  p.phase_offsets_h.clear();
  p.phase_offsets_w.clear();
  p.out_block = 5;
  EXPECT_NE(testing::error_of([&] {
              topi::subpixel_interleave_shape({1, 4, 5, 5, 16}, p);
            }).find("output block 5 does not divide 16 channels"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::graph
