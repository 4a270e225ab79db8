// Winograd F(2x2, 3x3) convolution in NCHW[x]c against the naive double-precision reference of
// conv_ref.h: seeded random inputs, NaN-poisoned outputs, output sizes that are and are not
// multiples of the tile, symmetric, asymmetric and no padding, batch 2, the fallback config and
// random points of the template's space, the fused epilogue; the host weight transform against
// its definition; shape-rule errors by message.
#include "kiln/topi/conv2d_winograd.h"

#include <gtest/gtest.h>

#include "conv_ref.h"
#include "topi_test_util.h"

namespace kiln::topi {
namespace {

using autotune::Config;
using autotune::Instance;
using runtime::NDArray;
using namespace testing;  // NOLINT

Conv2DWorkload wl(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, Padding2D pad) {
  Conv2DWorkload r;
  r.batch = n;
  r.in_channel = c;
  r.height = h;
  r.width = w;
  r.out_channel = o;
  r.kernel_h = r.kernel_w = 3;
  r.params.padding = pad;
  return r;
}

/// Runs the fallback and `samples` sampled configs of the template (with the given epilogue)
/// on random data against the reference convolution.
void check_winograd(const Conv2DWorkload& w, const EpilogueFlags& ep, int samples,
                    const Target& target = host_target()) {
  SCOPED_TRACE(w.str());
  NDArray data = random_array(w.data_shape(), f32, 31);
  NDArray kernel = random_array(w.kernel_shape(), f32, 32);
  NDArray bias = random_array({w.out_channel}, f32, 33);
  NDArray residual = random_array(w.out_shape(), f32, 34);
  NDArray want = ref_conv2d_nchw(data, kernel, w.params);
  apply_ref_epilogue(want, bias, residual, ep);
  autotune::Template t = conv2d_winograd_nchwc_template(w, ep, target);
  for (const Config& c : sample_configs(t, samples, 7)) {
    Instance inst = autotune::instantiate(t, c);
    SCOPED_TRACE(inst.config.str());
    WinogradLayout l = define_conv2d_winograd_knobs(inst.config, w, target);
    std::vector<NDArray> ins = {to_nchwc(data, l.ic_bn),
                                transform_winograd_weight(kernel, l.m, l.ic_bn, l.oc_bn)};
    if (ep.bias) ins.push_back(bias);
    if (ep.residual) ins.push_back(to_nchwc(residual, l.oc_bn));
    runtime::Module m = build(inst.sch, inst.args, target, "f");
    NDArray got = poisoned(l.out_shape, f32);
    std::vector<NDArray> all = ins;
    all.push_back(got);
    call(m.get_function("f"), all);
    EXPECT_TRUE(all_close(from_nchwc(got), want, {1e-4, 1e-4}));
  }
}

struct Case {
  Conv2DWorkload w;
  int samples;
};

class Conv2DWinograd : public ::testing::TestWithParam<Case> {};

TEST_P(Conv2DWinograd, FallbackAndSampledConfigs) {
  check_winograd(GetParam().w, {}, GetParam().samples);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2DWinograd,
    ::testing::Values(Case{wl(1, 16, 8, 8, 32, Padding2D::all(1)), 4},      // whole tiles
                      Case{wl(1, 32, 7, 7, 16, Padding2D::all(1)), 4},      // a partial tile
                      Case{wl(1, 16, 9, 6, 16, Padding2D{1, 0, 2, 1}), 3},  // asymmetric
                      Case{wl(1, 16, 9, 9, 16, Padding2D{}), 3},            // no padding
                      Case{wl(2, 8, 6, 5, 8, Padding2D::all(1)), 3},        // batch, 8 channels
                      Case{wl(1, 64, 14, 14, 64, Padding2D::all(1)), 2}));

TEST(Conv2DWinogradEpilogue, BiasReluResidual) {
  check_winograd(wl(1, 16, 7, 7, 32, Padding2D::all(1)), {true, true, true}, 2);
}

// F(4x4, 3x3) (alpha 6, not in the template's space yet) through the same compute and
// schedule.
TEST(Conv2DWinograd, TileSize4MatchesReference) {
  const Conv2DWorkload w = wl(1, 16, 10, 9, 16, Padding2D::all(1));
  NDArray data = random_array(w.data_shape(), f32, 41);
  NDArray kernel = random_array(w.kernel_shape(), f32, 42);
  te::Tensor d = input(nchwc_shape(w.data_shape(), 16), f32, "data");
  te::Tensor k = input(winograd_weight_shape(w.kernel_shape(), 4, 16, 16), f32, "u");
  te::Tensor out = conv2d_winograd_nchwc(d, k, w.params);
  te::Schedule s = te::create_schedule({out});
  Config cfg = Config::fallback();
  schedule_conv2d_winograd_nchwc(cfg, s, out, host_target());
  NDArray got =
      run(s, {d, k}, {out}, {to_nchwc(data, 16), transform_winograd_weight(kernel, 4, 16, 16)})[0];
  EXPECT_TRUE(all_close(from_nchwc(got), ref_conv2d_nchw(data, kernel, w.params), {1e-4, 1e-4}));
}

TEST(Conv2DWinograd, WeightTransformMatchesDefinition) {
  // U[e][v] = sum_{r,s} G[e][r] g[r][s] G[v][s] for F(2x2, 3x3), one channel pair, checked
  // against the matrix G written out here.
  const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  NDArray k = random_array({16, 16, 3, 3}, f32, 5);
  NDArray u = transform_winograd_weight(k, 2, 16, 16);
  ASSERT_EQ(u.shape(), (std::vector<int64_t>{4, 4, 1, 1, 16, 16}));
  for (int64_t o : {0, 7, 15})
    for (int64_t c : {0, 3, 15})
      for (int e = 0; e < 4; ++e)
        for (int v = 0; v < 4; ++v) {
          double want = 0;
          for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s)
              want += G[e][r] * k.data_as<float>()[((o * 16 + c) * 3 + r) * 3 + s] * G[v][s];
          const float got = u.data_as<float>()[((e * 4 + v) * 16 + c) * 16 + o];
          EXPECT_NEAR(got, want, 1e-6) << "o " << o << " c " << c << " e " << e << " v " << v;
        }
}

TEST(Conv2DWinograd, Avx2BlocksOfEight) {
  // The AVX2 target's 8-channel blocks and 16-register tiles (run on this AVX-512 host): the
  // default (F(4x4)) and sampled configs, with a bias and a residual, on 14x14 and 7x7 maps.
  const Target avx2("llvm -mcpu=znver1");
  check_winograd(wl(1, 24, 14, 14, 40, Padding2D::all(1)), {true, false, true}, 3, avx2);
  check_winograd(wl(1, 64, 7, 7, 48, Padding2D::all(1)), {}, 2, avx2);
}

TEST(Conv2DWinograd, PreferredByVectorWidth) {
  // Every candidate (7x7+ outputs) is computed by Winograd, with AVX-512 from 32 channels (a map
  // under 14x14 whose F(4x4) kernel would exceed 16 MB by F(2x2), below), with AVX2 from 16
  // channels; never a stride-2 layer nor a map under 7x7.
  const Target avx512("llvm -mcpu=skylake-avx512"), avx2("llvm -mcpu=znver1");
  const Conv2DWorkload c12 = wl(1, 512, 7, 7, 512, Padding2D::all(1)),
                       c2 = wl(1, 64, 56, 56, 64, Padding2D::all(1)),
                       narrow = wl(1, 16, 14, 14, 16, Padding2D::all(1)),
                       tiny = wl(1, 64, 5, 5, 64, Padding2D::all(1)),
                       alex = wl(1, 192, 13, 13, 384, Padding2D::all(1));
  Conv2DWorkload strided = c2;
  strided.params.stride_h = strided.params.stride_w = 2;
  EXPECT_TRUE(prefer_winograd(c12, avx512));  // by F(2x2): 16.8 MB transformed, not 38
  EXPECT_TRUE(prefer_winograd(c12, avx2));
  EXPECT_TRUE(prefer_winograd(alex, avx512));  // 2.6 MB transformed
  EXPECT_FALSE(prefer_winograd(tiny, avx512));
  EXPECT_TRUE(prefer_winograd(c2, avx512));
  EXPECT_TRUE(prefer_winograd(c2, avx2));
  EXPECT_FALSE(prefer_winograd(narrow, avx512));
  EXPECT_TRUE(prefer_winograd(narrow, avx2));
  EXPECT_FALSE(prefer_winograd(tiny, avx2));
  EXPECT_FALSE(prefer_winograd(strided, avx2));
  // The default tile: F(4x4), but F(2x2) where F(4x4)'s kernel would be large for its map.
  auto default_m = [](const Conv2DWorkload& w, const Target& t) {
    autotune::Config cfg = autotune::Config::fallback();
    return define_conv2d_winograd_knobs(cfg, w, t).m;
  };
  EXPECT_EQ(default_m(c2, avx512), 4);
  EXPECT_EQ(default_m(alex, avx512), 4);
  EXPECT_EQ(default_m(c12, avx2), 2);
  EXPECT_EQ(default_m(c12, avx512), 2);
}

TEST(Conv2DWinograd, ShapeErrors) {
  Conv2DParams s2;
  s2.stride_h = s2.stride_w = 2;
  EXPECT_NE(error_of([&] {
              conv2d_winograd_nchwc_shape({1, 1, 8, 8, 16}, {4, 4, 1, 1, 16, 16}, s2);
            }).find("conv2d_winograd_nchwc: needs strides and dilation 1 and groups 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              conv2d_winograd_nchwc_shape({1, 2, 8, 8, 8}, {4, 4, 1, 1, 16, 16}, {});
            }).find("does not match the transformed kernel"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              winograd_weight_shape({16, 16, 5, 5}, 2, 16, 16);
            }).find("expected a 3x3 OIHW kernel, got [16, 16, 5, 5]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              winograd_weight_shape({16, 16, 3, 3}, 3, 16, 16);
            }).find("tile size 3 is not supported"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::topi
