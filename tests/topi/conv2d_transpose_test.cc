// conv2d_transpose (NCHW) against the scatter reference of conv_ref.h: DCGAN-like stride 2
// with padding and output_padding, odd sizes, stride 1 and 3, dilation, asymmetric padding;
// the fallback config and random points of the template's space; shape-rule errors.
#include "kiln/topi/conv2d_transpose.h"

#include <gtest/gtest.h>

#include "conv_ref.h"
#include "topi_test_util.h"

namespace kiln::topi {
namespace {

using autotune::Config;
using autotune::Instance;
using runtime::NDArray;
using namespace testing;  // NOLINT

struct Case {
  int64_t n, c, h, w, o, k, stride;
  Padding2D pad;
  int64_t out_pad, dil;
};

Conv2DTransposeWorkload make(const Case& c) {
  Conv2DTransposeWorkload t;
  Conv2DWorkload& w = t.conv;
  w.batch = c.n;
  w.in_channel = c.c;
  w.height = c.h;
  w.width = c.w;
  w.out_channel = c.o;
  w.kernel_h = w.kernel_w = c.k;
  w.params.stride_h = w.params.stride_w = c.stride;
  w.params.padding = c.pad;
  w.params.dilation_h = w.params.dilation_w = c.dil;
  t.output_padding_h = t.output_padding_w = c.out_pad;
  return t;
}

TEST(Conv2DTransposeShape, RulesAndErrors) {
  Conv2DParams p;
  p.stride_h = p.stride_w = 2;
  p.padding = Padding2D::all(1);
  // DCGAN: 4x4 kernel, stride 2, pad 1 doubles the size.
  EXPECT_EQ(conv2d_transpose_nchw_shape({1, 16, 4, 4}, {16, 8, 4, 4}, p), (Shape{1, 8, 8, 8}));
  EXPECT_EQ(conv2d_transpose_nchw_shape({1, 4, 7, 7}, {4, 3, 3, 3}, p, 1, 1),
            (Shape{1, 3, 14, 14}));
  EXPECT_NE(error_of([&] {
              conv2d_transpose_nchw_shape({1, 4, 7, 7}, {5, 3, 3, 3}, p);
            })
                .find("conv2d_transpose_nchw: kernel [5, 3, 3, 3] has 5 input channels, data "
                      "[1, 4, 7, 7] has 4"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              conv2d_transpose_nchw_shape({1, 4, 7, 7}, {4, 3, 3, 3}, p, 2, 0);
            }).find("output_padding (2, 0) must be non-negative and smaller than the stride"),
            std::string::npos);
  // Groups: the kernel holds O/g output channels.
  p.groups = 2;
  EXPECT_EQ(conv2d_transpose_nchw_shape({1, 4, 7, 7}, {4, 3, 4, 4}, p), (Shape{1, 6, 14, 14}));
  p.groups = 3;
  EXPECT_NE(error_of([&] {
              conv2d_transpose_nchw_shape({1, 4, 7, 7}, {4, 3, 3, 3}, p);
            }).find("conv2d_transpose_nchw: 4 input channels do not split into 3 groups"),
            std::string::npos);
}

class Conv2DTranspose : public ::testing::TestWithParam<Case> {};

TEST_P(Conv2DTranspose, FallbackAndSampledConfigs) {
  Conv2DTransposeWorkload wl = make(GetParam());
  const Conv2DWorkload& w = wl.conv;
  SCOPED_TRACE(w.str());
  NDArray data = random_array(w.data_shape(), f32, 1);
  NDArray kernel = random_array({w.in_channel, w.out_channel, w.kernel_h, w.kernel_w}, f32, 2);
  NDArray want =
      ref_conv2d_transpose_nchw(data, kernel, w.params, wl.output_padding_h, wl.output_padding_w);
  autotune::Template t = conv2d_transpose_nchw_template(wl, host_target());
  for (const Config& c : sample_configs(t, 3, 5)) {
    Instance inst = autotune::instantiate(t, c);
    SCOPED_TRACE(inst.config.str());
    ASSERT_EQ(shape_of(inst.args.back()), want.shape());
    runtime::Module m = build(inst.sch, inst.args, host_target(), "f");
    NDArray out = poisoned(want.shape(), f32);
    call(m.get_function("f"), {data, kernel, out});
    EXPECT_TRUE(all_close(out, want, {1e-4, 1e-4}));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2DTranspose,
                         ::testing::Values(Case{1, 16, 4, 4, 8, 4, 2, Padding2D::all(1), 0,
                                                1},  // DCGAN layer
                                           Case{2, 4, 7, 7, 3, 3, 2, Padding2D::all(1), 1, 1},
                                           Case{1, 3, 13, 11, 5, 3, 1, Padding2D::all(1), 0, 1},
                                           Case{1, 4, 5, 5, 4, 3, 3, Padding2D{0, 1, 2, 0}, 2, 1},
                                           Case{1, 2, 6, 6, 3, 3, 2, Padding2D::all(2), 0, 2},
                                           Case{1, 3, 1, 1, 4, 4, 1, Padding2D{}, 0, 1}));

}  // namespace
}  // namespace kiln::topi
