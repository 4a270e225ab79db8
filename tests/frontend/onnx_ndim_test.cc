// ONNX Conv / pools over 1-D and 3-D windows, MaxPool's Indices and PRelu's per-channel slope
// (convert_ndim.cc), end to end: a one-node model built in memory (seeded random weights and
// inputs) is imported, compiled and run, and its outputs compared with a naive C++ reference of
// the ONNX definition. Covers a 1-D Conv with pads, strides, dilation, groups and bias (which
// must run as conv2d), auto_pad SAME_UPPER, a 3-D Conv with bias, 3-D Convs (strides,
// dilations, depth padding, groups, factorized kernels) run as one conv2d, MaxPool's Indices in
// both storage orders, global pools over 1 and 3 spatial axes, opset-6 PRelu with one slope per
// channel, and the refusal of a 4-D window, which must name the node and the op.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "common/error.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/graph/transform.h"
#include "kiln/runtime/graph_executor.h"
#include "onnx_test_util.h"

namespace kiln::frontend {
namespace {

using ::kiln::testing::error_of;
using Ints = std::vector<int64_t>;
using Vec = std::vector<float>;

runtime::NDArray array(const Ints& shape, const Vec& v) {
  runtime::NDArray a = runtime::NDArray::empty(shape, DataType::Float(32));
  std::copy(v.begin(), v.end(), a.data_as<float>());
  return a;
}

int64_t numel(const Ints& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

Vec random_vec(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  Vec v(static_cast<size_t>(n));
  for (float& x : v) {
    do x = d(gen);
    while (std::abs(x) < 0.05f);
  }
  return v;
}

OnnxValueInfo info(const std::string& name, const Ints& shape, DataType t = DataType::Float(32)) {
  OnnxValueInfo v{name, t, true, {}};
  for (int64_t d : shape) v.shape.push_back(OnnxDim{d, ""});
  return v;
}

using test_util::run;

void expect_close(const runtime::NDArray& got, const Vec& want, const Ints& shape) {
  test_util::expect_close_to(got, want, shape, 1e-4f, 1e-4f);
}

/// Conv over a 1-D window: x [N, C, L], w [O, C/g, K], bias [O].
Vec conv1d_ref(const Vec& x, const Vec& w, const Vec& b, Ints xs, Ints ws, int64_t stride,
               int64_t dil, int64_t pb, int64_t group, int64_t out_len) {
  int64_t N = xs[0], C = xs[1], L = xs[2], O = ws[0], cpg = ws[1], K = ws[2];
  int64_t opg = O / group;
  Vec y(static_cast<size_t>(N * O * out_len));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t t = 0; t < out_len; ++t) {
        double acc = b[o];
        for (int64_t c = 0; c < cpg; ++c)
          for (int64_t k = 0; k < K; ++k) {
            int64_t p = t * stride - pb + k * dil;
            if (p < 0 || p >= L) continue;
            acc += x[(n * C + (o / opg) * cpg + c) * L + p] * w[(o * cpg + c) * K + k];
          }
        y[(n * O + o) * out_len + t] = static_cast<float>(acc);
      }
  return y;
}

TEST(OnnxNdim, Conv1DWithAllAttributesRunsAsConv2D) {
  Ints xs{2, 4, 11}, ws{6, 2, 3};
  Vec x = random_vec(numel(xs), 1), w = random_vec(numel(ws), 2), b = random_vec(6, 3);
  OnnxModel m;
  m.path = "conv1d.onnx";
  m.opsets[""] = 13;
  m.inputs = {info("x", xs)};
  m.initializers["w"] = array(ws, w);
  m.initializers["b"] = array({6}, b);
  OnnxNode n{"Conv", "", "conv1", {"x", "w", "b"}, {"y"}, {}, false};
  n.attrs["strides"] = Ints{2};
  n.attrs["dilations"] = Ints{2};
  n.attrs["pads"] = Ints{2, 1};
  n.attrs["group"] = int64_t{2};
  m.nodes = {n};
  // (11 + 3 - 2·2 - 1) / 2 + 1 = 5
  m.outputs = {info("y", {2, 6, 5})};
  graph::Graph g;
  std::vector<runtime::NDArray> out = run(m, {{"x", array(xs, x)}}, &g);
  EXPECT_NE(g.str().find("conv2d("), std::string::npos) << g.str();
  ASSERT_EQ(out.size(), 1u);
  expect_close(out[0], conv1d_ref(x, w, b, xs, ws, 2, 2, 2, 2, 5), {2, 6, 5});
}

TEST(OnnxNdim, Conv1DSameUpperPadsAsOnnxSays) {
  Ints xs{1, 3, 8}, ws{2, 3, 4};
  Vec x = random_vec(numel(xs), 4), w = random_vec(numel(ws), 5);
  OnnxModel m;
  m.path = "conv1d_same.onnx";
  m.opsets[""] = 13;
  m.inputs = {info("x", xs)};
  m.initializers["w"] = array(ws, w);
  OnnxNode n{"Conv", "", "conv_same", {"x", "w"}, {"y"}, {}, false};
  n.attrs["auto_pad"] = std::string("SAME_UPPER");
  n.attrs["strides"] = Ints{3};
  m.nodes = {n};
  // out = ceil(8 / 3) = 3; total pad = (3 - 1)·3 + 4 - 8 = 2: 1 before, 1 after.
  m.outputs = {info("y", {1, 2, 3})};
  std::vector<runtime::NDArray> out = run(m, {{"x", array(xs, x)}});
  expect_close(out[0], conv1d_ref(x, w, Vec(2, 0.0f), xs, ws, 3, 1, 1, 1, 3), {1, 2, 3});
}

TEST(OnnxNdim, Conv3DWithBias) {
  Ints xs{1, 2, 4, 5, 6}, ws{3, 2, 2, 3, 2};
  Vec x = random_vec(numel(xs), 6), w = random_vec(numel(ws), 7), b = random_vec(3, 8);
  OnnxModel m;
  m.path = "conv3d.onnx";
  m.opsets[""] = 13;
  m.inputs = {info("x", xs)};
  m.initializers["w"] = array(ws, w);
  m.initializers["b"] = array({3}, b);
  OnnxNode n{"Conv", "", "conv3", {"x", "w", "b"}, {"y"}, {}, false};
  n.attrs["pads"] = Ints{1, 0, 1, 0, 1, 1};
  n.attrs["strides"] = Ints{1, 2, 1};
  m.nodes = {n};
  Ints os{1, 3, 4, 2, 7};
  m.outputs = {info("y", os)};
  std::vector<runtime::NDArray> out = run(m, {{"x", array(xs, x)}});
  Vec want(static_cast<size_t>(numel(os)));
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t z = 0; z < os[2]; ++z)
      for (int64_t y = 0; y < os[3]; ++y)
        for (int64_t q = 0; q < os[4]; ++q) {
          double acc = b[o];
          for (int64_t c = 0; c < 2; ++c)
            for (int64_t a = 0; a < 2; ++a)
              for (int64_t e = 0; e < 3; ++e)
                for (int64_t f = 0; f < 2; ++f) {
                  int64_t iz = z - 1 + a, iy = y * 2 + e, iq = q - 1 + f;
                  if (iz < 0 || iz >= 4 || iy >= 5 || iq < 0 || iq >= 6) continue;
                  acc += x[((c * 4 + iz) * 5 + iy) * 6 + iq] *
                         w[(((o * 2 + c) * 2 + a) * 3 + e) * 2 + f];
                }
          want[((o * 4 + z) * 2 + y) * 7 + q] = static_cast<float>(acc);
        }
  expect_close(out[0], want, os);
}

/// ONNX Conv over a 3-D window, computed naively: x [N, C, D, H, W], w [O, C/g, KD, KH, KW].
Vec conv3d_ref(const Vec& x, const Ints& xs, const Vec& w, const Ints& ws, const Ints& strides,
               const Ints& dil, const Ints& pads, int64_t group, Ints* os) {
  const int64_t N = xs[0], C = xs[1], O = ws[0], Cg = ws[1];
  Ints out{N, O};
  for (size_t a = 0; a < 3; ++a)
    out.push_back((xs[a + 2] + pads[a] + pads[a + 3] - dil[a] * (ws[a + 2] - 1) - 1) / strides[a] +
                  1);
  *os = out;
  Vec y(static_cast<size_t>(numel(out)));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t z = 0; z < out[2]; ++z)
        for (int64_t r = 0; r < out[3]; ++r)
          for (int64_t q = 0; q < out[4]; ++q) {
            double acc = 0;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t a = 0; a < ws[2]; ++a)
                for (int64_t e = 0; e < ws[3]; ++e)
                  for (int64_t f = 0; f < ws[4]; ++f) {
                    const int64_t iz = z * strides[0] - pads[0] + a * dil[0],
                                  iy = r * strides[1] - pads[1] + e * dil[1],
                                  iq = q * strides[2] - pads[2] + f * dil[2];
                    if (iz < 0 || iz >= xs[2] || iy < 0 || iy >= xs[3] || iq < 0 || iq >= xs[4])
                      continue;
                    const int64_t ci = o / (O / group) * Cg + c;
                    acc += x[static_cast<size_t>(
                               (((n * C + ci) * xs[2] + iz) * xs[3] + iy) * xs[4] + iq)] *
                           w[static_cast<size_t>((((o * Cg + c) * ws[2] + a) * ws[3] + e) * ws[4] +
                                                 f)];
                  }
            y[static_cast<size_t>((((n * O + o) * out[2] + z) * out[3] + r) * out[4] + q)] =
                static_cast<float>(acc);
          }
  return y;
}

TEST(OnnxNdim, Conv3DRunsAsOneConv2DOverTheDepthSlices) {
  // The importer stacks each output depth's input slices after the channels and runs one
  // conv2d: depth stride, dilation and asymmetric depth padding pick the slices, groups keep
  // each group's (channel, depth tap) pairs together, a batch of 2 (grouped, and not: depth
  // stacked over [N, D, C, H, W] rather than [D, C, H, W]), and a (1, 3, 3) and a (3, 1, 1)
  // kernel as R(2+1)D factorizes a 3-D convolution.
  struct Case {
    Ints xs, ws, strides, dil, pads;
    int64_t group;
  };
  for (const Case& k :
       {Case{{2, 4, 7, 5, 6}, {6, 2, 3, 2, 3}, {2, 1, 2}, {2, 1, 1}, {1, 0, 1, 2, 1, 0}, 2},
        Case{{1, 3, 4, 6, 6}, {5, 3, 1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1, 0, 1, 1}, 1},
        Case{{1, 5, 6, 3, 3}, {4, 5, 3, 1, 1}, {2, 1, 1}, {1, 1, 1}, {1, 0, 0, 1, 0, 0}, 1},
        Case{{2, 3, 5, 4, 4}, {4, 3, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 2, 1, 1}, 1}}) {
    SCOPED_TRACE(::testing::Message() << "weight " << k.ws[0] << "x" << k.ws[1] << "x" << k.ws[2]
                                      << "x" << k.ws[3] << "x" << k.ws[4]);
    Vec x = random_vec(numel(k.xs), 21), w = random_vec(numel(k.ws), 22);
    Ints os;
    Vec want = conv3d_ref(x, k.xs, w, k.ws, k.strides, k.dil, k.pads, k.group, &os);
    OnnxModel m;
    m.path = "conv3d_slices.onnx";
    m.opsets[""] = 13;
    m.inputs = {info("x", k.xs)};
    m.initializers["w"] = array(k.ws, w);
    OnnxNode n{"Conv", "", "conv3", {"x", "w"}, {"y"}, {}, false};
    n.attrs["pads"] = k.pads;
    n.attrs["strides"] = k.strides;
    n.attrs["dilations"] = k.dil;
    n.attrs["group"] = k.group;
    m.nodes = {n};
    m.outputs = {info("y", os)};
    graph::Graph g;
    std::vector<runtime::NDArray> out = run(m, {{"x", array(k.xs, x)}}, &g);
    expect_close(out[0], want, os);
    // No conv3d op is left: the 2-D convolution's schedules run it.
    EXPECT_EQ(g.str().find("conv3d"), std::string::npos) << g.str();
    EXPECT_NE(g.str().find("conv2d"), std::string::npos);
  }
}

TEST(OnnxNdim, DepthwiseConv3DIsASumOfDepthwiseConv2DsOverTheDepthTaps) {
  // X3D / MoViNet: groups = C, weight [M·C, 1, KD, KH, KW]. The importer adds KD depthwise
  // conv2d over the depth slices (each tap's kernel cut from the constant weight, or sliced
  // from a computed one), never a grouped conv2d of KD channels per group. Cases: one sample,
  // a batch of 2 with depth stride, dilation and asymmetric depth padding, a channel
  // multiplier of 2, and the weight given at run time.
  struct Case {
    Ints xs, ws, strides, dil, pads;
    bool weight_input;
  };
  for (const Case& k :
       {Case{{1, 16, 5, 6, 7}, {16, 1, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, false},
        Case{{2, 8, 7, 5, 6}, {8, 1, 3, 3, 1}, {2, 2, 1}, {2, 1, 1}, {2, 1, 0, 1, 0, 0}, false},
        Case{{1, 8, 4, 6, 6}, {16, 1, 2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1, 1, 1, 1}, false},
        Case{{1, 8, 4, 5, 5}, {8, 1, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, true}}) {
    SCOPED_TRACE(::testing::Message() << "x " << k.xs[1] << "x" << k.xs[2] << " weight " << k.ws[0]
                                      << "x" << k.ws[2] << " from input " << k.weight_input);
    const int64_t C = k.xs[1];
    Vec x = random_vec(numel(k.xs), 61), w = random_vec(numel(k.ws), 62);
    Ints os;
    Vec want = conv3d_ref(x, k.xs, w, k.ws, k.strides, k.dil, k.pads, C, &os);
    OnnxModel m;
    m.path = "conv3d_depthwise.onnx";
    m.opsets[""] = 13;
    m.inputs = {info("x", k.xs)};
    std::map<std::string, runtime::NDArray> feeds{{"x", array(k.xs, x)}};
    if (k.weight_input) {
      m.inputs.push_back(info("w", k.ws));
      feeds["w"] = array(k.ws, w);
    } else {
      m.initializers["w"] = array(k.ws, w);
    }
    OnnxNode n{"Conv", "", "conv3", {"x", "w"}, {"y"}, {}, false};
    n.attrs["pads"] = k.pads;
    n.attrs["strides"] = k.strides;
    n.attrs["dilations"] = k.dil;
    n.attrs["group"] = C;
    m.nodes = {n};
    m.outputs = {info("y", os)};
    graph::Graph g;
    std::vector<runtime::NDArray> out = run(m, feeds, &g);
    expect_close(out[0], want, os);
    const std::string text = g.str();
    size_t convs = 0;
    for (size_t p = text.find("= conv2d("); p != std::string::npos;
         p = text.find("= conv2d(", p + 1)) {
      EXPECT_NE(text.find("groups=" + std::to_string(C), p), std::string::npos) << text;
      ++convs;
    }
    EXPECT_EQ(convs, static_cast<size_t>(k.ws[2])) << text;
    EXPECT_EQ(text.find("conv3d"), std::string::npos) << text;
  }
}

/// ONNX ConvTranspose over a 3-D window (group 1), computed naively: x [N, C, D, H, W], w [C, O,
/// KD, KH, KW]; each input voxel scatters its products to the output voxels its taps reach.
Vec conv3d_transpose_ref(const Vec& x, const Ints& xs, const Vec& w, const Ints& ws, const Vec& b,
                         const Ints& strides, const Ints& pads, Ints* os) {
  const int64_t N = xs[0], C = xs[1], O = ws[1];
  Ints out{N, O};
  for (size_t a = 0; a < 3; ++a)
    out.push_back(strides[a] * (xs[a + 2] - 1) + ws[a + 2] - pads[a] - pads[a + 3]);
  *os = out;
  std::vector<double> y(static_cast<size_t>(numel(out)), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t v = 0; v < out[2] * out[3] * out[4]; ++v)
        y[static_cast<size_t>((n * O + o) * out[2] * out[3] * out[4] + v)] = b[o];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t z = 0; z < xs[2]; ++z)
        for (int64_t r = 0; r < xs[3]; ++r)
          for (int64_t q = 0; q < xs[4]; ++q)
            for (int64_t o = 0; o < O; ++o)
              for (int64_t a = 0; a < ws[2]; ++a)
                for (int64_t e = 0; e < ws[3]; ++e)
                  for (int64_t f = 0; f < ws[4]; ++f) {
                    const int64_t oz = z * strides[0] - pads[0] + a,
                                  oy = r * strides[1] - pads[1] + e,
                                  oq = q * strides[2] - pads[2] + f;
                    if (oz < 0 || oz >= out[2] || oy < 0 || oy >= out[3] || oq < 0 || oq >= out[4])
                      continue;
                    y[static_cast<size_t>((((n * O + o) * out[2] + oz) * out[3] + oy) * out[4] +
                                          oq)] +=
                        x[static_cast<size_t>((((n * C + c) * xs[2] + z) * xs[3] + r) * xs[4] +
                                              q)] *
                        w[static_cast<size_t>((((c * O + o) * ws[2] + a) * ws[3] + e) * ws[4] + f)];
                  }
  return Vec(y.begin(), y.end());
}

TEST(OnnxNdim, ConvTranspose3DWithDepthTapsThatDoNotOverlapRunsAsConv2DTranspose) {
  // A 3-D UNet's upsampling (kernel depth = depth stride, no depth padding) runs as one
  // conv2d_transpose over the depth-major input, the depth taps as output channels; H and W
  // keep their own strides and padding (here overlapping taps). Any other depth window (the
  // second case: overlapping depth taps and depth padding) keeps conv3d_transpose.
  struct Case {
    Ints xs, ws, strides, pads;
    bool as_2d;
  };
  for (const Case& k :
       {Case{{2, 3, 3, 4, 5}, {3, 4, 2, 3, 2}, {2, 2, 2}, {0, 1, 0, 0, 0, 1}, true},
        Case{{1, 2, 3, 3, 4}, {2, 3, 3, 2, 2}, {2, 1, 2}, {1, 0, 0, 0, 0, 1}, false}}) {
    SCOPED_TRACE(k.as_2d);
    Vec x = random_vec(numel(k.xs), 31), w = random_vec(numel(k.ws), 32),
        b = random_vec(k.ws[1], 33);
    Ints os;
    Vec want = conv3d_transpose_ref(x, k.xs, w, k.ws, b, k.strides, k.pads, &os);
    OnnxModel m;
    m.path = "convt3d.onnx";
    m.opsets[""] = 13;
    m.inputs = {info("x", k.xs)};
    m.initializers["w"] = array(k.ws, w);
    m.initializers["b"] = array({k.ws[1]}, b);
    OnnxNode n{"ConvTranspose", "", "up", {"x", "w", "b"}, {"y"}, {}, false};
    n.attrs["pads"] = k.pads;
    n.attrs["strides"] = k.strides;
    m.nodes = {n};
    m.outputs = {info("y", os)};
    graph::Graph g;
    std::vector<runtime::NDArray> out = run(m, {{"x", array(k.xs, x)}}, &g);
    expect_close(out[0], want, os);
    EXPECT_EQ(g.str().find("conv3d_transpose") == std::string::npos, k.as_2d) << g.str();
  }
}

TEST(OnnxNdim, GroupedConvTransposeIsOneNodeWhenDepthwise) {
  // x [1, C, 5, 6], w [C, O/g, 4, 4], stride 2, pads 1: a depthwise one (g = C = 16), one with a
  // channel multiplier (g = C = 8, O = 16) and two groups of 8 (split per group, concatenated).
  struct Case {
    int64_t c, o, g;
    bool one_node;
  };
  for (const Case& k : {Case{16, 16, 16, true}, Case{8, 16, 8, true}, Case{16, 8, 2, false}}) {
    SCOPED_TRACE(::testing::Message() << "C " << k.c << " O " << k.o << " group " << k.g);
    const Ints xs{1, k.c, 5, 6}, ws{k.c, k.o / k.g, 4, 4}, os{1, k.o, 10, 12};
    Vec x = random_vec(numel(xs), 51), w = random_vec(numel(ws), 52), b = random_vec(k.o, 53);
    // Each input pixel scatters x · w[c, o'] to output channel (c / Cg)·Og + o'.
    const int64_t Cg = k.c / k.g, Og = k.o / k.g;
    std::vector<double> y(static_cast<size_t>(numel(os)));
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t p = 0; p < 120; ++p) y[static_cast<size_t>(o * 120 + p)] = b[o];
    for (int64_t c = 0; c < k.c; ++c)
      for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 6; ++j)
          for (int64_t og = 0; og < Og; ++og)
            for (int64_t ky = 0; ky < 4; ++ky)
              for (int64_t kx = 0; kx < 4; ++kx) {
                const int64_t oy = 2 * i - 1 + ky, ox = 2 * j - 1 + kx;
                if (oy < 0 || oy >= 10 || ox < 0 || ox >= 12) continue;
                y[static_cast<size_t>(((c / Cg * Og + og) * 10 + oy) * 12 + ox)] +=
                    double(x[static_cast<size_t>((c * 5 + i) * 6 + j)]) *
                    w[static_cast<size_t>(((c * Og + og) * 4 + ky) * 4 + kx)];
              }
    OnnxModel m;
    m.path = "convt_grouped.onnx";
    m.opsets[""] = 13;
    m.inputs = {info("x", xs)};
    m.initializers["w"] = array(ws, w);
    m.initializers["b"] = array({k.o}, b);
    OnnxNode n{"ConvTranspose", "", "up", {"x", "w", "b"}, {"y"}, {}, false};
    n.attrs["pads"] = Ints{1, 1, 1, 1};
    n.attrs["strides"] = Ints{2, 2};
    n.attrs["group"] = k.g;
    m.nodes = {n};
    m.outputs = {info("y", os)};
    graph::Graph g;
    std::vector<runtime::NDArray> out = run(m, {{"x", array(xs, x)}}, &g);
    expect_close(out[0], Vec(y.begin(), y.end()), os);
    const std::string text = g.str();
    size_t nodes = 0;
    for (size_t at = text.find("conv2d_transpose("); at != std::string::npos;
         at = text.find("conv2d_transpose(", at + 1))
      ++nodes;
    EXPECT_EQ(nodes, k.one_node ? 1u : 2u) << text;
    EXPECT_EQ(text.find("groups=" + std::to_string(k.g)) != std::string::npos, k.one_node) << text;
  }
}

TEST(OnnxNdim, GlobalPoolsOverOneAndThreeSpatialAxes) {
  // A video model's pooled Conv3d features (N, C, D, H, W) and a 1-D signal (N, C, L).
  for (const Ints& xs : {Ints{2, 3, 2, 3, 4}, Ints{1, 5, 7}}) {
    for (bool is_max : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << (is_max ? "GlobalMaxPool" : "GlobalAveragePool") << " rank " << xs.size());
      Vec x = random_vec(numel(xs), 17);
      OnnxModel m;
      m.path = "global_pool.onnx";
      m.opsets[""] = 13;
      m.inputs = {info("x", xs)};
      m.nodes = {OnnxNode{
          is_max ? "GlobalMaxPool" : "GlobalAveragePool", "", "pool", {"x"}, {"y"}, {}, false}};
      Ints os(xs.size(), 1);
      os[0] = xs[0];
      os[1] = xs[1];
      m.outputs = {info("y", os)};
      std::vector<runtime::NDArray> out = run(m, {{"x", array(xs, x)}});
      const int64_t inner = numel(xs) / (xs[0] * xs[1]);
      Vec want;
      for (int64_t nc = 0; nc < xs[0] * xs[1]; ++nc) {
        double acc = is_max ? -INFINITY : 0.0;
        for (int64_t i = 0; i < inner; ++i) {
          const double v = x[static_cast<size_t>(nc * inner + i)];
          acc = is_max ? std::max(acc, v) : acc + v;
        }
        want.push_back(static_cast<float>(is_max ? acc : acc / static_cast<double>(inner)));
      }
      expect_close(out[0], want, os);
    }
  }
}

TEST(OnnxNdim, MaxPoolIndicesInBothStorageOrders) {
  Ints xs{2, 3, 6, 7};
  Vec x = random_vec(numel(xs), 9);
  for (int order : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "storage_order " << order);
    OnnxModel m;
    m.path = "maxpool_idx.onnx";
    m.opsets[""] = 12;
    m.inputs = {info("x", xs)};
    OnnxNode n{"MaxPool", "", "pool", {"x"}, {"y", "i"}, {}, false};
    n.attrs["kernel_shape"] = Ints{3, 2};
    n.attrs["strides"] = Ints{2, 2};
    n.attrs["pads"] = Ints{1, 0, 1, 1};
    n.attrs["storage_order"] = int64_t{order};
    m.nodes = {n};
    Ints os{2, 3, 3, 4};
    m.outputs = {info("y", os), info("i", os, DataType::Int(64))};
    std::vector<runtime::NDArray> out = run(m, {{"x", array(xs, x)}});
    ASSERT_EQ(out.size(), 2u);
    ASSERT_EQ(out[1].dtype(), DataType::Int(64));
    ASSERT_EQ(out[1].shape(), os);
    Vec want(static_cast<size_t>(numel(os)));
    std::vector<int64_t> want_idx(want.size());
    const int64_t H = 6, W = 7;
    for (int64_t nc = 0; nc < 6; ++nc)
      for (int64_t oh = 0; oh < 3; ++oh)
        for (int64_t ow = 0; ow < 4; ++ow) {
          float best = -std::numeric_limits<float>::infinity();
          int64_t arg = -1;
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 2; ++kw) {
              int64_t h = oh * 2 - 1 + kh, w = ow * 2 + kw;
              if (h < 0 || h >= H || w >= W) continue;
              float v = x[(nc * H + h) * W + w];
              if (v > best) {
                best = v;
                arg = nc * H * W + (order == 0 ? h * W + w : w * H + h);
              }
            }
          size_t k = static_cast<size_t>((nc * 3 + oh) * 4 + ow);
          want[k] = best;
          want_idx[k] = arg;
        }
    expect_close(out[0], want, os);
    for (size_t k = 0; k < want_idx.size(); ++k)
      EXPECT_EQ(out[1].data_as<int64_t>()[k], want_idx[k]) << "index " << k;
  }
}

TEST(OnnxNdim, PReluOpset6SlopeIsPerChannel) {
  Ints xs{2, 3, 4, 5};
  Vec x = random_vec(numel(xs), 10), s = random_vec(3, 11);
  OnnxModel m;
  m.path = "prelu6.onnx";
  m.opsets[""] = 6;
  m.inputs = {info("x", xs)};
  m.initializers["s"] = array({3}, s);
  m.nodes = {OnnxNode{"PRelu", "", "prelu", {"x", "s"}, {"y"}, {}, false}};
  m.outputs = {info("y", xs)};
  std::vector<runtime::NDArray> out = run(m, {{"x", array(xs, x)}});
  Vec want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    size_t c = (i / 20) % 3;
    want[i] = x[i] < 0 ? x[i] * s[c] : x[i];
  }
  expect_close(out[0], want, xs);
}

TEST(OnnxNdim, FourDimensionalWindowIsRefusedNamingNodeAndOp) {
  OnnxModel m;
  m.path = "pool4d.onnx";
  m.opsets[""] = 13;
  m.inputs = {info("x", {1, 1, 3, 3, 3, 3})};
  OnnxNode n{"AveragePool", "", "pool4", {"x"}, {"y"}, {}, false};
  n.attrs["kernel_shape"] = Ints{2, 2, 2, 2};
  m.nodes = {n};
  m.outputs = {info("y", {1, 1, 2, 2, 2, 2})};
  std::string msg = error_of([&] { import_onnx(m); });
  EXPECT_NE(msg.find("node 'pool4' (AveragePool): a 4-D window (only 1-D, 2-D and 3-D) is not "
                     "supported yet"),
            std::string::npos)
      << msg;

  OnnxModel c = m;
  c.path = "conv4d.onnx";
  c.initializers["w"] = array({1, 1, 2, 2, 2, 2}, random_vec(16, 12));
  c.nodes = {OnnxNode{"Conv", "", "conv4", {"x", "w"}, {"y"}, {}, false}};
  msg = error_of([&] { import_onnx(c); });
  EXPECT_NE(msg.find("node 'conv4' (Conv): a 4-D window (only 1-D, 2-D and 3-D) is not "
                     "supported yet"),
            std::string::npos)
      << msg;

  c.nodes = {OnnxNode{"ConvTranspose", "", "convt4", {"x", "w"}, {"y"}, {}, false}};
  msg = error_of([&] { import_onnx(c); });
  EXPECT_NE(msg.find("node 'convt4' (ConvTranspose): a 4-D window (only 1-D, 2-D and 3-D) is "
                     "not supported yet"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace kiln::frontend
