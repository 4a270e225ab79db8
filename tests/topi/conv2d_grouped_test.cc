// Tests of the blocked grouped convolution (topi/conv2d_grouped.h): the input blocks each output
// block reads (integer and expression forms agree), the blocks chosen per group width, the
// packed kernel, shape-rule errors by message, and the generated kernels (fallback and sampled
// configs, strides 1 and 2, padding, dilation, an epilogue) against the naive double-precision
// NCHW reference on seeded random inputs with poisoned outputs.
#include "kiln/topi/conv2d_grouped.h"

#include <gtest/gtest.h>

#include "conv_ref.h"
#include "kiln/arith/analyzer.h"
#include "topi_test_util.h"

namespace kiln::topi {
namespace {

using autotune::Config;
using autotune::Instance;
using runtime::NDArray;
using namespace testing;  // NOLINT

Conv2DWorkload gwl(int64_t c, int64_t hw, int64_t o, int64_t k, int64_t stride, Padding2D pad,
                   int64_t groups, int64_t dil = 1, int64_t n = 1) {
  Conv2DWorkload r;
  r.batch = n;
  r.in_channel = c;
  r.height = r.width = hw;
  r.out_channel = o;
  r.kernel_h = r.kernel_w = k;
  r.params.stride_h = r.params.stride_w = stride;
  r.params.padding = pad;
  r.params.dilation_h = r.params.dilation_w = dil;
  r.params.groups = groups;
  return r;
}

NDArray run_instance(const Instance& inst, const std::vector<NDArray>& inputs,
                     const Target& target = host_target()) {
  runtime::Module m = build(inst.sch, inst.args, target, "f");
  NDArray out = poisoned(shape_of(inst.args.back()), f32);
  std::vector<NDArray> all = inputs;
  all.push_back(out);
  call(m.get_function("f"), all);
  return out;
}

/// The input blocks output block ob must see (those holding its groups' input channels).
std::pair<int64_t, int64_t> needed(const GroupedConv2DBlocks& b, int64_t ob) {
  int64_t lo = INT64_MAX, hi = -1;
  for (int64_t o = ob * b.oc_bn; o < (ob + 1) * b.oc_bn; ++o) {
    const int64_t g = o / b.out_per_group();
    lo = std::min(lo, g * b.in_per_group() / b.ic_bn);
    hi = std::max(hi, ((g + 1) * b.in_per_group() - 1) / b.ic_bn);
  }
  return {lo, hi};
}

TEST(GroupedBlocks, EveryOutputBlockSeesItsGroupsInputs) {
  struct Case {
    int64_t C, O, G, ic, oc, span;
  };
  for (const Case& c : {Case{64, 64, 4, 16, 16, 1},     // width 16: one block, exact
                        Case{128, 128, 32, 16, 16, 1},  // width 4: 4 groups per block
                        Case{256, 256, 8, 16, 16, 2},   // width 32: two blocks
                        Case{48, 48, 2, 16, 16, 3},     // width 24 in 16-wide blocks
                        Case{48, 48, 2, 8, 8, 3},       // width 24 in 8-wide blocks, exact
                        Case{112, 112, 2, 16, 16, 7},   // width 56 straddling
                        Case{16, 32, 4, 8, 8, 1},       // 4 inputs, 8 outputs per group
                        Case{32, 16, 2, 16, 8, 1}}) {   // 16 inputs, 8 outputs per group
    GroupedConv2DBlocks b = GroupedConv2DBlocks::make(c.C, c.O, c.G, c.ic, c.oc, "test");
    SCOPED_TRACE(b.str());
    EXPECT_EQ(b.span, c.span);
    arith::Analyzer an;
    for (int64_t ob = 0; ob < c.O / c.oc; ++ob) {
      const int64_t first = b.first_input_block(ob);
      auto [lo, hi] = needed(b, ob);
      EXPECT_LE(first, lo) << "ob " << ob;
      EXPECT_GE(first + b.span - 1, hi) << "ob " << ob;
      EXPECT_GE(first, 0);
      EXPECT_LE(first + b.span, c.C / c.ic);
      std::optional<int64_t> e =
          ir::as_const_int(an.simplify(b.first_input_block(ir::Expr(static_cast<int32_t>(ob)))));
      ASSERT_TRUE(e.has_value());
      EXPECT_EQ(*e, first) << "ob " << ob;
    }
  }
}

TEST(GroupedBlocks, ChosenPerGroupWidth) {
  const Target avx512("llvm -mcpu=skylake-avx512"), avx2("llvm -mcpu=znver1");
  auto blocks = [](const Conv2DWorkload& w, const Target& t) {
    GroupedConv2DBlocks b = choose_grouped_conv2d_blocks(w, t);
    return std::to_string(b.ic_bn) + "/" + std::to_string(b.oc_bn) + " R" + std::to_string(b.span);
  };
  const Padding2D p1 = Padding2D::all(1);
  // RegNet (width 16) and ResNeXt's wider layers keep the lanes-wide blocks of their neighbours.
  EXPECT_EQ(blocks(gwl(128, 28, 128, 3, 1, p1, 8), avx512), "16/16 R1");
  EXPECT_EQ(blocks(gwl(1024, 7, 1024, 3, 1, p1, 32), avx512), "16/16 R2");
  // Widths 24 and 56: 8-wide blocks, no zero multiply-add.
  EXPECT_EQ(blocks(gwl(48, 28, 48, 3, 1, p1, 2), avx512), "8/8 R3");
  EXPECT_EQ(blocks(gwl(112, 28, 112, 3, 1, p1, 2), avx512), "8/8 R7");
  // Widths 8 and 4 (ResNeXt): the neighbours' 16-wide blocks, two or four groups per block.
  EXPECT_EQ(blocks(gwl(256, 28, 256, 3, 1, p1, 32), avx512), "16/16 R1");
  EXPECT_EQ(blocks(gwl(128, 28, 128, 3, 1, p1, 32), avx512), "16/16 R1");
  // Two input channels per group: 16-wide blocks would waste 8x, 8-wide ones 4x.
  EXPECT_EQ(blocks(gwl(64, 28, 64, 3, 1, p1, 32), avx512), "8/8 R1");
  // AVX2: 8 lanes.
  EXPECT_EQ(blocks(gwl(128, 28, 128, 3, 1, p1, 8), avx2), "8/8 R2");
  EXPECT_EQ(blocks(gwl(128, 28, 128, 3, 1, p1, 32), avx2), "8/8 R1");
}

TEST(GroupedBlocks, Errors) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const Target t("llvm -mcpu=skylake-avx512");
  EXPECT_NE(message([&] { choose_grouped_conv2d_blocks(gwl(32, 8, 32, 3, 1, {}, 32), t); })
                .find("conv2d_grouped_nchwc: groups 32 with 32 input and 32 output channels is "
                      "not a grouped convolution"),
            std::string::npos);
  EXPECT_NE(message([&] {
              choose_grouped_conv2d_blocks(gwl(32, 8, 32, 3, 1, {}, 1), t);
            }).find("is not a grouped convolution"),
            std::string::npos);
  EXPECT_NE(message([] {
              GroupedConv2DBlocks::make(48, 48, 5, 16, 16, "op");
            }).find("op: groups 5 must divide the 48 input and 48 output channels"),
            std::string::npos);
  Conv2DParams p;
  p.groups = 4;
  EXPECT_NE(message([&] {
              conv2d_grouped_nchwc_shape({1, 4, 8, 8, 16}, {4, 2, 3, 3, 16, 16}, p);
            })
                .find("conv2d_grouped_nchwc: packed kernel [4, 2, 3, 3, 16, 16] reads 2 input "
                      "blocks per output block, but data [1, 4, 8, 8, 16] with groups 4, blocks "
                      "ic 16 oc 16, span 1 needs 1"),
            std::string::npos);
  EXPECT_NE(message([&] {
              conv2d_grouped_nchwc_shape({1, 4, 8, 8, 16}, {4, 1, 3, 3, 8, 16}, p);
            })
                .find("conv2d_grouped_nchwc: data [1, 4, 8, 8, 16] has input blocks of 16 "
                      "channels but packed kernel [4, 1, 3, 3, 8, 16] blocks of 8"),
            std::string::npos);
  EXPECT_EQ(conv2d_grouped_nchwc_shape({1, 4, 8, 8, 16}, {4, 1, 3, 3, 16, 16}, p),
            (std::vector<int64_t>{1, 4, 6, 6, 16}));
}

TEST(GroupedBlocks, PackedKernelIsTheGroupsBlockDiagonal) {
  // Width 4 in 8-wide blocks: each block holds two groups; entries pairing channels of
  // different groups are zero, the others the kernel's.
  NDArray w = random_array({16, 4, 3, 3}, f32, 3);
  GroupedConv2DBlocks b = GroupedConv2DBlocks::make(16, 16, 4, 8, 8, "test");
  NDArray p = pack_grouped_conv2d_weight(w, b);
  ASSERT_EQ(p.shape(), (std::vector<int64_t>{2, 1, 3, 3, 8, 8}));
  for (int64_t ob = 0; ob < 2; ++ob)
    for (int64_t t = 0; t < 9; ++t)
      for (int64_t i = 0; i < 8; ++i)
        for (int64_t o = 0; o < 8; ++o) {
          const float got = p.data_as<float>()[((ob * 9 + t) * 8 + i) * 8 + o];
          const int64_t oc = ob * 8 + o, ic = ob * 8 + i;
          const float want = oc / 4 == ic / 4 ? w.data_as<float>()[(oc * 4 + ic % 4) * 9 + t] : 0;
          ASSERT_EQ(got, want) << ob << " " << t << " " << i << " " << o;
        }
}

/// Runs the template's fallback and `samples` sampled configs against the reference.
void check_grouped(const Conv2DWorkload& w, const EpilogueFlags& ep, int samples, uint64_t seed,
                   const Target& target = host_target()) {
  SCOPED_TRACE(w.str());
  autotune::Template t = conv2d_grouped_nchwc_template(w, ep, target);
  NDArray data = random_array(w.data_shape(), f32, 11);
  NDArray kernel = random_array(w.kernel_shape(), f32, 12);
  NDArray bias = random_array({w.out_channel}, f32, 13);
  NDArray residual = random_array(w.out_shape(), f32, 14);
  NDArray want = ref_conv2d_nchw(data, kernel, w.params);
  apply_ref_epilogue(want, bias, residual, ep);
  GroupedConv2DBlocks b = choose_grouped_conv2d_blocks(w, target);
  SCOPED_TRACE(b.str());
  for (const Config& c : sample_configs(t, samples, seed)) {
    Instance inst = autotune::instantiate(t, c);
    SCOPED_TRACE(inst.config.str());
    std::vector<NDArray> ins = {to_nchwc(data, b.ic_bn), pack_grouped_conv2d_weight(kernel, b)};
    if (ep.bias) ins.push_back(bias);
    if (ep.residual) ins.push_back(to_nchwc(residual, b.oc_bn));
    NDArray got = run_instance(inst, ins, target);
    EXPECT_EQ(got.shape(), nchwc_shape(w.out_shape(), b.oc_bn));
    EXPECT_TRUE(all_close(from_nchwc(got), want, {1e-4, 1e-4}));
  }
}

struct GroupedCase {
  Conv2DWorkload w;
  int samples;
};

class Conv2DGroupedNCHWc : public ::testing::TestWithParam<GroupedCase> {};

TEST_P(Conv2DGroupedNCHWc, FallbackAndSampledConfigs) {
  check_grouped(GetParam().w, {}, GetParam().samples, 31);
}

INSTANTIATE_TEST_SUITE_P(Widths, Conv2DGroupedNCHWc,
                         ::testing::Values(
                             // width 16 (RegNet), 2 groups, stride 1
                             GroupedCase{gwl(32, 9, 32, 3, 1, Padding2D::all(1), 2), 3},
                             // width 4 (ResNeXt's first stage), 8 groups, stride 2
                             GroupedCase{gwl(32, 11, 32, 3, 2, Padding2D::all(1), 8), 3},
                             // width 8, 8 groups, asymmetric padding
                             GroupedCase{gwl(64, 8, 64, 3, 1, Padding2D{1, 0, 2, 1}, 8), 2},
                             // width 24, 2 groups, stride 2
                             GroupedCase{gwl(48, 10, 48, 3, 2, Padding2D::all(1), 2), 2},
                             // width 56, 2 groups
                             GroupedCase{gwl(112, 7, 112, 3, 1, Padding2D::all(1), 2), 2},
                             // width 32 (two blocks per group), 4 groups, dilation 2, batch 2
                             GroupedCase{gwl(128, 9, 128, 3, 1, Padding2D::all(2), 4, 2, 2), 2},
                             // 32 groups of 4 (ResNeXt 32x4d), stride 2
                             GroupedCase{gwl(128, 8, 128, 3, 2, Padding2D::all(1), 32), 1},
                             // a channel multiplier: 4 inputs and 8 outputs per group
                             GroupedCase{gwl(16, 7, 32, 3, 1, Padding2D::all(1), 4), 2},
                             // 2 input channels per group: 8-wide blocks of four groups
                             GroupedCase{gwl(64, 6, 64, 3, 1, Padding2D::all(1), 32), 1},
                             // 1x1 grouped
                             GroupedCase{gwl(64, 6, 32, 1, 1, Padding2D{}, 4), 2}));

TEST(Conv2DGroupedNCHWcEpilogue, BiasReluResidual) {
  check_grouped(gwl(64, 7, 64, 3, 1, Padding2D::all(1), 4), {true, true, true}, 2, 5);
}

TEST(Conv2DGroupedNCHWc, Avx2BlocksMatchTheReference) {
  // 8-lane blocks and the 16-register tile rules: width 16 reads two blocks per group, width 4
  // puts two groups in a block. AVX2 code runs on any AVX2 or AVX-512 host.
  if (host_target().vector_bits() < 256) GTEST_SKIP() << "the host has no AVX2";
  const Target avx2("llvm -mcpu=znver1");
  check_grouped(gwl(64, 9, 64, 3, 1, Padding2D::all(1), 4), {}, 2, 41, avx2);
  check_grouped(gwl(32, 10, 32, 3, 2, Padding2D::all(1), 8), {true, true, false}, 1, 42, avx2);
}

TEST(Conv2DGroupedNCHWc, StraddlingBlocksMatchTheReference) {
  // Width 24 in 16-wide blocks (blocks the template would not pick): output block 1 holds
  // channels of both groups and reads three input blocks; the last block's start is clamped.
  const Conv2DWorkload w = gwl(48, 7, 48, 3, 1, Padding2D::all(1), 2);
  const GroupedConv2DBlocks b = GroupedConv2DBlocks::make(48, 48, 2, 16, 16, "test");
  NDArray data = random_array(w.data_shape(), f32, 21);
  NDArray kernel = random_array(w.kernel_shape(), f32, 22);
  te::Tensor d = input(nchwc_shape(w.data_shape(), 16), f32, "data");
  te::Tensor k = input(packed_grouped_conv2d_weight_shape(w.kernel_shape(), b), f32, "kernel");
  te::Tensor out = conv2d_grouped_nchwc(d, k, w.params);
  te::Schedule s = te::create_schedule({out});
  Config cfg = Config::fallback();
  schedule_conv2d_grouped_nchwc(cfg, s, out, host_target());
  runtime::Module m = build(s, {d, k, out}, host_target(), "f");
  NDArray got = poisoned(nchwc_shape(w.out_shape(), 16), f32);
  call(m.get_function("f"), {to_nchwc(data, 16), pack_grouped_conv2d_weight(kernel, b), got});
  EXPECT_TRUE(all_close(from_nchwc(got), ref_conv2d_nchw(data, kernel, w.params), {1e-4, 1e-4}));
}

}  // namespace
}  // namespace kiln::topi
