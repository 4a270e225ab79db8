// ONNX signal and sampling operators, end to end: one-node models built in memory (seeded
// random inputs) are imported, compiled and run, and compared with naive C++ references: DFT
// (complex inverse with a constant dft_length), STFT with a window given as a graph input, Det,
// GridSample (bicubic, border) and RoiAlign (max); MelWeightMatrix becomes a constant at import.
// Refusals must name the node and the op: unsupported attribute values, a computed
// frame_step, adaptive RoiAlign sampling, a DFT along the complex dimension.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
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
using cd = std::complex<double>;

runtime::NDArray array(const Ints& shape, const Vec& v) {
  runtime::NDArray a = runtime::NDArray::empty(shape, DataType::Float(32));
  std::copy(v.begin(), v.end(), a.data_as<float>());
  return a;
}

runtime::NDArray scalar_i64(int64_t v) {
  runtime::NDArray a = runtime::NDArray::empty({}, DataType::Int(64));
  a.data_as<int64_t>()[0] = v;
  return a;
}

Vec random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Vec v(n);
  for (float& x : v) x = d(gen);
  return v;
}

OnnxValueInfo info(const std::string& name, const Ints& shape, DataType t = DataType::Float(32)) {
  OnnxValueInfo v{name, t, true, {}};
  for (int64_t d : shape) v.shape.push_back(OnnxDim{d, ""});
  return v;
}

OnnxModel one_node(const std::string& op, int64_t opset, std::vector<std::string> inputs) {
  OnnxModel m;
  m.path = "signal.onnx";
  m.opsets[""] = opset;
  m.nodes = {OnnxNode{op, "", "n0", std::move(inputs), {"y"}, {}, false}};
  return m;
}

runtime::NDArray run1(const OnnxModel& m, const std::map<std::string, runtime::NDArray>& inputs) {
  graph::Graph g = import_onnx(m);
  graph::CompiledModule cm = graph::build_module(g, Target::host(), {});
  runtime::GraphExecutor ex = runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m");
  for (const auto& [name, v] : inputs) ex.set_input(name, v);
  ex.run();
  return ex.get_output(0);
}

void expect_close(const runtime::NDArray& got, const Vec& want, const Ints& shape, double tol) {
  test_util::expect_close_to(got, want, shape, static_cast<float>(tol), static_cast<float>(tol));
}

TEST(OnnxSignal, InverseComplexDftWithConstantLength) {
  const int64_t B = 2, L = 6, n = 8;
  Vec x = random_vec(B * L * 2, 1);
  OnnxModel m = one_node("DFT", 17, {"x", "len"});
  m.inputs = {info("x", {B, L, 2})};
  m.initializers["len"] = scalar_i64(n);
  m.nodes[0].attrs["inverse"] = int64_t{1};
  m.nodes[0].attrs["axis"] = int64_t{1};
  m.outputs = {info("y", {B, n, 2})};
  runtime::NDArray got = run1(m, {{"x", array({B, L, 2}, x)}});
  Vec want(B * n * 2);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < n; ++k) {
      cd acc = 0;
      for (int64_t j = 0; j < L; ++j)
        acc += cd(x[(b * L + j) * 2], x[(b * L + j) * 2 + 1]) *
               std::polar(1.0, 2 * M_PI * double(j * k) / double(n));
      acc /= double(n);
      want[(b * n + k) * 2] = static_cast<float>(acc.real());
      want[(b * n + k) * 2 + 1] = static_cast<float>(acc.imag());
    }
  expect_close(got, want, {B, n, 2}, 1e-5);
}

TEST(OnnxSignal, StftWithAWindowInput) {
  const int64_t L = 30, J = 8, step = 4, F = (L - J) / step + 1, K = J / 2 + 1;
  Vec x = random_vec(L, 2), w = random_vec(J, 3, 0.1f, 1.0f);
  OnnxModel m = one_node("STFT", 17, {"x", "step", "w"});
  m.inputs = {info("x", {1, L, 1}), info("w", {J})};
  m.initializers["step"] = scalar_i64(step);
  m.outputs = {info("y", {1, F, K, 2})};
  runtime::NDArray got = run1(m, {{"x", array({1, L, 1}, x)}, {"w", array({J}, w)}});
  Vec want(F * K * 2);
  for (int64_t f = 0; f < F; ++f)
    for (int64_t k = 0; k < K; ++k) {
      cd acc = 0;
      for (int64_t j = 0; j < J; ++j)
        acc += double(x[f * step + j] * w[j]) * std::polar(1.0, -2 * M_PI * double(j * k) / J);
      want[(f * K + k) * 2] = static_cast<float>(acc.real());
      want[(f * K + k) * 2 + 1] = static_cast<float>(acc.imag());
    }
  expect_close(got, want, {1, F, K, 2}, 1e-5);
}

TEST(OnnxSignal, DetOfABatchNeedingPivoting) {
  // det [[0, a], [b, c]] = -a·b (a zero leading element); det of a permuted diagonal = ± the
  // product.
  Vec x = {0, 2, 3, 5, 0, 4, 7, 1};
  OnnxModel m = one_node("Det", 11, {"x"});
  m.inputs = {info("x", {2, 2, 2})};
  m.outputs = {info("y", {2})};
  runtime::NDArray got = run1(m, {{"x", array({2, 2, 2}, x)}});
  expect_close(got, {-6.0f, -28.0f}, {2}, 1e-6);
  OnnxModel m4 = one_node("Det", 11, {"x"});
  m4.inputs = {info("x", {4, 4})};
  m4.outputs = {info("y", {})};
  // Rows: e2·1, e3·(-2), e0·3, e1·4  -> a permutation matrix scaled; det = sign · (1·-2·3·4).
  Vec p(16, 0.0f);
  p[0 * 4 + 2] = 1;
  p[1 * 4 + 3] = -2;
  p[2 * 4 + 0] = 3;
  p[3 * 4 + 1] = 4;
  // The permutation (2, 3, 0, 1) is even: det = 1 · (-2) · 3 · 4 = -24.
  expect_close(run1(m4, {{"x", array({4, 4}, p)}}), {-24.0f}, {}, 1e-6);
}

TEST(OnnxSignal, MelWeightMatrixIsAConstant) {
  OnnxModel m = one_node("MelWeightMatrix", 17, {"bins", "len", "rate", "lo", "hi"});
  m.initializers["bins"] = scalar_i64(8);
  m.initializers["len"] = scalar_i64(16);
  m.initializers["rate"] = scalar_i64(8192);
  m.initializers["lo"] = array({}, {0.0f});
  m.initializers["hi"] = array({}, {4096.0f});
  m.outputs = {info("y", {9, 8})};
  graph::Graph g = graph::infer_types(import_onnx(m));
  const graph::Node& out = g.node(g.outputs()[0].node);
  ASSERT_TRUE(out.is_constant()) << g.str();
  ASSERT_EQ(out.value.shape(), (Ints{9, 8}));
  // Each mel filter is a triangle: its column sums to a positive weight, values in [0, 1].
  for (int64_t i = 0; i < 8; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < 9; ++j) {
      float v = out.value.data_as<float>()[j * 8 + i];
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 1.0f);
      sum += v;
    }
    EXPECT_GT(sum, 0.0) << "filter " << i;
  }
}

TEST(OnnxSignal, MelWeightMatrixNeedsConstantInputs) {
  OnnxModel m = one_node("MelWeightMatrix", 17, {"bins", "len", "rate", "lo", "hi"});
  m.inputs = {info("bins", {}, DataType::Int(64))};
  m.initializers["len"] = scalar_i64(16);
  m.initializers["rate"] = scalar_i64(8192);
  m.initializers["lo"] = array({}, {0.0f});
  m.initializers["hi"] = array({}, {4096.0f});
  m.outputs = {info("y", {9, 8})};
  std::string msg = error_of([&] { import_onnx(m); });
  EXPECT_NE(msg.find("node 'n0' (MelWeightMatrix): input 0 (num_mel_bins) must be a constant"),
            std::string::npos)
      << msg;
}

TEST(OnnxSignal, GridSampleBicubicBorderRuns) {
  Vec x = random_vec(1 * 2 * 3 * 4, 4), grid = random_vec(1 * 2 * 2 * 2, 5, -1.2f, 1.2f);
  OnnxModel m = one_node("GridSample", 16, {"x", "g"});
  m.inputs = {info("x", {1, 2, 3, 4}), info("g", {1, 2, 2, 2})};
  m.nodes[0].attrs["mode"] = std::string("bicubic");
  m.nodes[0].attrs["padding_mode"] = std::string("border");
  m.outputs = {info("y", {1, 2, 2, 2})};
  runtime::NDArray got = run1(m, {{"x", array({1, 2, 3, 4}, x)}, {"g", array({1, 2, 2, 2}, grid)}});
  // Random points (some outside): the shape and finite values (numerics: tests/topi).
  ASSERT_EQ(got.shape(), (Ints{1, 2, 2, 2}));
  for (int64_t i = 0; i < got.numel(); ++i) EXPECT_TRUE(std::isfinite(got.data_as<float>()[i]));
  // At pixel centres (align_corners = 0: x = (2·i + 1) / W − 1) the cubic weights are
  // (0, 1, 0, 0): the pixels come back.
  Vec centres = {(2 * 1 + 1) / 4.0f - 1, (2 * 0 + 1) / 3.0f - 1, (2 * 3 + 1) / 4.0f - 1,
                 (2 * 2 + 1) / 3.0f - 1, (2 * 0 + 1) / 4.0f - 1, (2 * 1 + 1) / 3.0f - 1,
                 (2 * 2 + 1) / 4.0f - 1, (2 * 2 + 1) / 3.0f - 1};
  runtime::NDArray at_centres =
      run1(m, {{"x", array({1, 2, 3, 4}, x)}, {"g", array({1, 2, 2, 2}, centres)}});
  Vec want;
  for (int64_t c = 0; c < 2; ++c)
    for (auto [yy, xx] : {std::pair{0, 1}, std::pair{2, 3}, std::pair{1, 0}, std::pair{2, 2}})
      want.push_back(x[(c * 3 + yy) * 4 + xx]);
  expect_close(at_centres, want, {1, 2, 2, 2}, 1e-5);
}

TEST(OnnxSignal, UnsupportedAttributeValuesNameTheNodeAndOp) {
  OnnxModel gs = one_node("GridSample", 16, {"x", "g"});
  gs.inputs = {info("x", {1, 1, 3, 3}), info("g", {1, 2, 2, 2})};
  gs.outputs = {info("y", {1, 1, 2, 2})};
  gs.nodes[0].attrs["mode"] = std::string("linear");  // opset 20's name, not opset 16's
  std::string msg = error_of([&] { import_onnx(gs); });
  EXPECT_NE(msg.find("node 'n0' (GridSample): mode 'linear' is not supported"), std::string::npos)
      << msg;
  gs.nodes[0].attrs["mode"] = std::string("bilinear");
  gs.nodes[0].attrs["padding_mode"] = std::string("wrap");
  msg = error_of([&] { import_onnx(gs); });
  EXPECT_NE(msg.find("node 'n0' (GridSample): padding_mode 'wrap' is not supported"),
            std::string::npos)
      << msg;

  OnnxModel ra = one_node("RoiAlign", 16, {"x", "r", "b"});
  ra.inputs = {info("x", {1, 1, 4, 4}), info("r", {2, 4}), info("b", {2}, DataType::Int(64))};
  ra.outputs = {info("y", {2, 1, 1, 1})};
  msg = error_of([&] { import_onnx(ra); });
  EXPECT_NE(msg.find("node 'n0' (RoiAlign): sampling_ratio 0 (adaptive"), std::string::npos) << msg;
  ra.nodes[0].attrs["sampling_ratio"] = int64_t{2};
  ra.nodes[0].attrs["mode"] = std::string("median");
  msg = error_of([&] { import_onnx(ra); });
  EXPECT_NE(msg.find("node 'n0' (RoiAlign): mode 'median' is not supported"), std::string::npos)
      << msg;

  OnnxModel dft = one_node("DFT", 17, {"x"});
  dft.inputs = {info("x", {2, 5, 2})};
  dft.outputs = {info("y", {2, 5, 2})};
  dft.nodes[0].attrs["axis"] = int64_t{2};
  msg = error_of([&] { import_onnx(dft); });
  EXPECT_NE(msg.find("node 'n0' (DFT): axis 2 is the complex dimension of"), std::string::npos)
      << msg;

  OnnxModel st = one_node("STFT", 17, {"x", "step"});
  st.inputs = {info("x", {1, 16, 1}), info("step", {}, DataType::Int(64))};
  st.outputs = {info("y", {1, 1, 9, 2})};
  msg = error_of([&] { import_onnx(st); });
  EXPECT_NE(msg.find("node 'n0' (STFT): input 1 (frame_step) must be a constant"),
            std::string::npos)
      << msg;
}

TEST(OnnxSignal, RoiAlignMaxRuns) {
  // One region covering pixel centres exactly: with output 1x1 and sampling ratio 1 the sample
  // is the region's centre; half_pixel shifts by -0.5, so region (1, 1)-(3, 3) samples (1.5, 1.5)
  // -> the bilinear max of weighted neighbours = 0.25 · max of the four pixels.
  Vec x = random_vec(16, 6, 0.1f, 1.0f);
  OnnxModel m = one_node("RoiAlign", 16, {"x", "r", "b"});
  m.inputs = {info("x", {1, 1, 4, 4})};
  m.initializers["r"] = array({1, 4}, {1.0f, 1.0f, 3.0f, 3.0f});
  runtime::NDArray b = runtime::NDArray::empty({1}, DataType::Int(64));
  b.data_as<int64_t>()[0] = 0;
  m.initializers["b"] = b;
  m.nodes[0].attrs["mode"] = std::string("max");
  m.nodes[0].attrs["sampling_ratio"] = int64_t{1};
  m.outputs = {info("y", {1, 1, 1, 1})};
  runtime::NDArray got = run1(m, {{"x", array({1, 1, 4, 4}, x)}});
  float want = 0.25f * std::max({x[1 * 4 + 1], x[1 * 4 + 2], x[2 * 4 + 1], x[2 * 4 + 2]});
  expect_close(got, {want}, {1, 1, 1, 1}, 1e-6);
}

}  // namespace
}  // namespace kiln::frontend
