// Depthwise conv2d (NCHW with multipliers, NCHW[x]c) against the grouped-conv reference of
// conv_ref.h: odd sizes, strides 1/2, symmetric and asymmetric padding, dilation; the
// fallback config (padding inlined, pad_at 3) and random points of each template's space
// (every pad_at placement); the bias + relu epilogue; shape-rule errors by message.
#include <gtest/gtest.h>

#include "conv_ref.h"
#include "kiln/target/codegen.h"
#include "kiln/topi/depthwise_conv2d.h"
#include "topi_test_util.h"

namespace kiln::topi {
namespace {

using autotune::Config;
using autotune::Instance;
using runtime::NDArray;
using namespace testing;  // NOLINT

NDArray run_instance(const Instance& inst, const std::vector<NDArray>& inputs) {
  runtime::Module m = build(inst.sch, inst.args, host_target(), "f");
  NDArray out = poisoned(shape_of(inst.args.back()), f32);
  std::vector<NDArray> all = inputs;
  all.push_back(out);
  call(m.get_function("f"), all);
  return out;
}

Conv2DWorkload dw(int64_t n, int64_t c, int64_t h, int64_t w, int64_t mult, int64_t k,
                  int64_t stride, Padding2D pad, int64_t dil = 1) {
  Conv2DWorkload r;
  r.batch = n;
  r.in_channel = c;
  r.height = h;
  r.width = w;
  r.out_channel = c * mult;
  r.kernel_h = r.kernel_w = k;
  r.params.stride_h = r.params.stride_w = stride;
  r.params.padding = pad;
  r.params.dilation_h = r.params.dilation_w = dil;
  r.params.groups = c;
  return r;
}

TEST(DepthwiseShape, RulesAndErrors) {
  Conv2DParams p;
  p.padding = Padding2D::all(1);
  EXPECT_EQ(depthwise_conv2d_nchw_shape({1, 8, 7, 7}, {16, 1, 3, 3}, p), (Shape{1, 16, 7, 7}));
  EXPECT_EQ(depthwise_conv2d_nchwc_shape({1, 2, 7, 7, 16}, {2, 1, 3, 3, 1, 16}, p),
            (Shape{1, 2, 7, 7, 16}));
  EXPECT_NE(error_of([&] {
              depthwise_conv2d_nchw_shape({1, 8, 7, 7}, {12, 1, 3, 3}, p);
            })
                .find("depthwise_conv2d_nchw: kernel [12, 1, 3, 3] must have a multiple of the 8 "
                      "input channels"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              depthwise_conv2d_nchw_shape({1, 8, 7, 7}, {8, 2, 3, 3}, p);
            }).find("expected data [N, C, H, W] and kernel [C*M, 1, KH, KW]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              depthwise_conv2d_nchwc_shape({1, 2, 7, 7, 16}, {1, 1, 3, 3, 1, 16}, p);
            }).find("disagree on the channels (multiplier 1 only in the blocked layout)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              depthwise_conv2d_nchw_shape({1, 8, 2, 2}, {8, 1, 5, 5}, {});
            }).find("does not fit the padded input"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              define_depthwise_nchwc_knobs(*std::make_unique<Config>(Config::fallback()),
                                           dw(1, 8, 7, 7, 2, 3, 1, {}), host_target());
            }).find("only multiplier 1 is supported in the blocked layout"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              packed_depthwise_weight_shape({24, 1, 3, 3}, 16);
            }).find("pack_depthwise_weight: block 16 does not divide the 24 channels"),
            std::string::npos);
}

class DepthwiseNCHW : public ::testing::TestWithParam<Conv2DWorkload> {};

TEST_P(DepthwiseNCHW, FallbackAndSampledConfigs) {
  const Conv2DWorkload w = GetParam();
  SCOPED_TRACE(w.str());
  NDArray data = random_array(w.data_shape(), f32, 1);
  NDArray kernel = random_array(w.kernel_shape(), f32, 2);
  NDArray want = ref_conv2d_nchw(data, kernel, w.params);
  autotune::Template t = depthwise_conv2d_nchw_template(w, host_target());
  for (const Config& c : sample_configs(t, 3, 3)) {
    Instance inst = autotune::instantiate(t, c);
    SCOPED_TRACE(inst.config.str());
    EXPECT_TRUE(all_close(run_instance(inst, {data, kernel}), want, {1e-4, 1e-4}));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DepthwiseNCHW,
                         ::testing::Values(dw(1, 4, 13, 13, 1, 3, 1, Padding2D::all(1)),
                                           dw(2, 3, 13, 11, 2, 3, 2, Padding2D{0, 1, 2, 1}),
                                           dw(1, 5, 9, 9, 1, 3, 1, Padding2D::all(2), 2),
                                           dw(1, 4, 7, 7, 3, 1, 1, Padding2D{})));

class DepthwiseNCHWc : public ::testing::TestWithParam<Conv2DWorkload> {};

void check_nchwc(const Conv2DWorkload& w, bool bias_relu, int samples, uint64_t seed) {
  SCOPED_TRACE(w.str());
  NDArray data = random_array(w.data_shape(), f32, 5);
  NDArray kernel = random_array(w.kernel_shape(), f32, 6);
  NDArray bias = random_array({w.in_channel}, f32, 7);
  NDArray want = ref_conv2d_nchw(data, kernel, w.params);
  if (bias_relu) {
    const int64_t hw = w.out_height() * w.out_width();
    float* r = want.data_as<float>();
    for (int64_t i = 0; i < want.numel(); ++i)
      r[i] = std::max(r[i] + bias.data_as<float>()[(i / hw) % w.in_channel], 0.0f);
  }
  autotune::Template t = depthwise_conv2d_nchwc_template(w, host_target(), bias_relu);
  for (const Config& c : sample_configs(t, samples, seed)) {
    Instance inst = autotune::instantiate(t, c);
    SCOPED_TRACE(inst.config.str());
    int64_t bn = define_depthwise_nchwc_knobs(inst.config, w, host_target());
    std::vector<NDArray> ins = {to_nchwc(data, bn), pack_depthwise_ref(kernel, bn)};
    if (bias_relu) ins.push_back(bias);
    EXPECT_TRUE(all_close(from_nchwc(run_instance(inst, ins)), want, {1e-4, 1e-4}));
  }
}

TEST_P(DepthwiseNCHWc, FallbackAndSampledConfigs) { check_nchwc(GetParam(), false, 6, 17); }

INSTANTIATE_TEST_SUITE_P(Shapes, DepthwiseNCHWc,
                         ::testing::Values(dw(1, 32, 13, 13, 1, 3, 1, Padding2D::all(1)),
                                           dw(1, 16, 13, 11, 1, 3, 2, Padding2D{0, 1, 2, 1}),
                                           dw(2, 8, 7, 7, 1, 3, 1, Padding2D::all(2), 2),
                                           dw(1, 16, 7, 7, 1, 5, 2, Padding2D::all(2)),
                                           dw(1, 16, 1, 1, 1, 1, 1, Padding2D{}),
                                           // Several ow tiles and row tiles: the inline
                                           // padding's interior / border parts (stride 1, 2).
                                           dw(1, 32, 30, 30, 1, 3, 1, Padding2D::all(1)),
                                           dw(1, 16, 29, 31, 1, 3, 2, Padding2D::all(1))));

TEST(DepthwiseNCHWc, FallbackInlinesThePadding) {
  Conv2DWorkload w = dw(1, 32, 30, 30, 1, 3, 2, Padding2D::all(1));
  autotune::Template t = depthwise_conv2d_nchwc_template(w, host_target());
  Instance inst = autotune::instantiate(t, Config::fallback());
  EXPECT_EQ(inst.config.knob("pad_at"), 3) << inst.config.str();
}

TEST(DepthwiseNCHWc, RegisterTileAddressesNeedNoSignExtension) {
  // The input loads of the register tile index `kh*row + chunk*plane + tile*224 - 464`-like
  // sums; emitted in 64 bits they fold into the address. Emitted as 32-bit sums with one
  // sign extension each, the kh loop spent a leal and a movslq per input vector (34 movslq
  // after the first FMA for this layer, D5 of the paper, 33 us against 21 us now).
  Conv2DWorkload w = dw(1, 256, 28, 28, 1, 3, 1, Padding2D::all(1));
  Target avx512("llvm -mcpu=skylake-avx512");
  Instance inst =
      autotune::instantiate(depthwise_conv2d_nchwc_template(w, avx512), Config::fallback());
  std::string s = codegen::get_source(build(inst.sch, inst.args, avx512, "f"), "asm");
  size_t fma = s.find("vfmadd");
  ASSERT_NE(fma, std::string::npos) << s;
  EXPECT_EQ(s.find("movslq", fma), std::string::npos) << s.substr(fma);
}

TEST(DepthwiseNCHWcEpilogue, BiasRelu) {
  check_nchwc(dw(1, 32, 7, 7, 1, 3, 1, Padding2D::all(1)), true, 2, 4);
}

TEST(DepthwiseNCHWc, PackWeightCompute) {
  te::Tensor k = input({32, 1, 3, 3}, f32, "k");
  te::Tensor pk = pack_depthwise_weight(k, 16);
  NDArray kd = random_array({32, 1, 3, 3}, f32, 9);
  te::Schedule s = te::create_schedule({pk});
  EXPECT_TRUE(all_close(run(s, {k}, {pk}, {kd})[0], pack_depthwise_ref(kd, 16)));
}

}  // namespace
}  // namespace kiln::topi
