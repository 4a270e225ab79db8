// The quantize_realize pass on hand-built graphs: which dequantize → product → quantize patterns
// become integer products, the constants it computes (the int32 bias, the float32 multipliers,
// the saturation bounds a Relu folds into), the patterns it must leave in float (weights with a
// non-zero zero point, a product read twice, per-channel activation scales), the integer Add,
// and a 10,000-node chain (no recursion).
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/graph/graph.h"
#include "kiln/graph/transform.h"
#include "kiln/target/target.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;
using Ints = std::vector<int64_t>;

template <typename T>
NDArray array(Ints shape, DataType t, const std::vector<T>& v) {
  NDArray a = NDArray::empty(std::move(shape), t);
  for (size_t k = 0; k < v.size(); ++k) a.data_as<T>()[k] = v[k];
  return a;
}

/// A CPU with integer kernels for every product here (AVX-512 VNNI) and one with none (AVX2):
/// the pass asks the target's strategies, whatever the host is.
const Target& vnni() {
  static const Target t("llvm -mcpu=cascadelake");
  return t;
}
const Target& avx2() {
  static const Target t("llvm -mcpu=haswell");
  return t;
}

NDArray scalar_f32(float v) { return array<float>({}, DataType::Float(32), {v}); }
NDArray scalar_s8(int8_t v) { return array<int8_t>({}, DataType::Int(8), {v}); }

struct ConvGraph {
  Graph g;
  Entry conv;  ///< the float conv2d
};

/// quantize(relu(conv2d(dequantize(x), dequantize(W)) + reshape(dequantize(bias)))), int8
/// activations, per-channel weight scales; `w_zp` the weights' zero point.
/// `pair` repeated to `n` values.
template <typename T>
std::vector<T> repeat(std::vector<T> pair, int64_t n) {
  std::vector<T> r;
  for (int64_t k = 0; k < n; ++k) r.push_back(pair[static_cast<size_t>(k % 2)]);
  return r;
}

ConvGraph conv_graph(int8_t w_zp = 0, bool second_reader = false, int64_t C = 4, int64_t O = 8,
                     int64_t H = 5) {
  ConvGraph r;
  Graph& g = r.g;
  // 8 output channels (a block of 8: fewer would take the float-sum path); channels 2-7 repeat
  // the scales and biases of channels 0 and 1.
  Entry x = g.add_input("x", {1, C, H, H}, DataType::Int(8));
  Entry dx = g.add_op("qnn_dequantize", {x, g.add_constant("sx", scalar_f32(0.5f)),
                                         g.add_constant("zx", scalar_s8(-3))});
  std::vector<int8_t> w(O * C * 9);
  for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<int8_t>(int(k % 7) - 3);
  Entry wc = g.add_constant("w", array<int8_t>({O, C, 3, 3}, DataType::Int(8), w));
  Entry sw = g.add_op("reshape",
                      {g.add_constant("sw", array<float>({O}, DataType::Float(32),
                                                         repeat<float>({0.25f, 0.125f}, O)))},
                      {{"newshape", Ints{O, 1, 1, 1}}});
  Entry dw = g.add_op("qnn_dequantize", {wc, sw, g.add_constant("zw", scalar_s8(w_zp))});
  r.conv = g.add_op("conv2d", {dx, dw}, {{"padding", Ints{1, 1, 1, 1}}}, "conv");
  Entry b = g.add_op(
      "qnn_dequantize",
      {g.add_constant("b", array<int32_t>({O}, DataType::Int(32), repeat<int32_t>({100, -7}, O))),
       g.add_constant("sb",
                      array<float>({O}, DataType::Float(32), repeat<float>({0.125f, 0.0625f}, O))),
       g.add_constant("zb", array<int32_t>({}, DataType::Int(32), {0}))});
  Entry bias = g.add_op("reshape", {b}, {{"newshape", Ints{1, O, 1, 1}}});
  Entry y = g.add_op("relu", {g.add_op("add", {r.conv, bias})});
  Entry q = g.add_op("qnn_quantize", {y, g.add_constant("sy", scalar_f32(2.0f)),
                                      g.add_constant("zy", scalar_s8(5))});
  g.add_output(q);
  if (second_reader) g.add_output(r.conv);
  return r;
}

int count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& k : g.nodes()) n += k.is_op() && k.op == op;
  return n;
}

const Node& only(const Graph& g, const std::string& op) {
  for (const Node& k : g.nodes())
    if (k.is_op() && k.op == op) return k;
  throw std::runtime_error("no " + op);
}

TEST(QuantizeRealize, PerChannelConvBecomesOneIntegerConvolution) {
  Graph g = quantize_realize(infer_types(conv_graph().g), vnni());
  ASSERT_EQ(count(g, "qnn_conv2d"), 1) << g.str();
  EXPECT_EQ(count(g, "conv2d") + count(g, "qnn_dequantize") + count(g, "relu"), 0) << g.str();
  const Node& c = only(g, "qnn_conv2d");
  EXPECT_EQ(c.name, "conv");
  EXPECT_EQ(c.attrs.get_int("x_zero_point"), -3);
  EXPECT_EQ(c.attrs.get_int("y_zero_point"), 5);
  EXPECT_EQ(c.attrs.get_int("out_min"), 5);  // the Relu: nothing below the zero point
  EXPECT_EQ(c.attrs.get_int("out_max"), 127);
  EXPECT_EQ(c.attrs.get_string("out_dtype"), "int8");
  EXPECT_EQ(c.attrs.get_ints("padding"), (Ints{1, 1, 1, 1}));
  // The bias scale is s_x·s_w (0.125, 0.0625): the int32 values as they are.
  const NDArray& bias = g.node(c.inputs[2].node).value;
  EXPECT_EQ(bias.data_as<int32_t>()[0], 100);
  EXPECT_EQ(bias.data_as<int32_t>()[1], -7);
  // Multipliers (s_x·s_w[o]) / s_y.
  const NDArray& m = g.node(c.inputs[3].node).value;
  EXPECT_FLOAT_EQ(m.data_as<float>()[0], 0.0625f);
  EXPECT_FLOAT_EQ(m.data_as<float>()[1], 0.03125f);
  EXPECT_EQ(g.node(c.inputs[1].node).value.dtype(), DataType::Int(8));
  EXPECT_EQ(g.type_of(Entry{g.num_nodes() - 1, 0}).dtype, DataType::Int(8));
}

TEST(QuantizeRealize, WithoutAnIntegerKernelTheFloatConvolutionComputesTheSums) {
  // AVX2 has no integer convolution kernel: the sums come from the float convolution on the
  // integer values (the data less its zero point, the int8 weights as floats), marked exact,
  // then the same requantisation (bias, multiplier, round half to even, bounds, zero point).
  Graph g = quantize_realize(infer_types(conv_graph().g), avx2());
  EXPECT_EQ(count(g, "qnn_conv2d"), 0) << g.str();
  ASSERT_EQ(count(g, "conv2d"), 1) << g.str();
  const Node& c = only(g, "conv2d");
  EXPECT_EQ(c.attrs.get_int("exact"), 1);
  EXPECT_EQ(c.attrs.get_ints("padding"), (Ints{1, 1, 1, 1}));
  const Node& dq = g.node(c.inputs[0].node);
  ASSERT_EQ(dq.op, "qnn_dequantize");
  EXPECT_EQ(g.node(dq.inputs[1].node).value.data_as<float>()[0], 1.0f);
  EXPECT_EQ(g.node(dq.inputs[2].node).value.data_as<int8_t>()[0], -3);
  const NDArray& w = g.node(c.inputs[1].node).value;
  ASSERT_EQ(w.dtype(), DataType::Float(32));
  for (int64_t k = 0; k < w.numel(); ++k) ASSERT_EQ(w.data_as<float>()[k], float(int(k % 7) - 3));
  EXPECT_EQ(count(g, "round_even"), 1) << g.str();
  const Node& clip = only(g, "clip");  // the Relu: nothing below the zero point (5)
  EXPECT_DOUBLE_EQ(clip.attrs.get_float("a_min"), 0.0);
  EXPECT_DOUBLE_EQ(clip.attrs.get_float("a_max"), 127.0 - 5);
  const Node& last = g.node(g.outputs()[0].node);
  EXPECT_EQ(last.op, "cast");
  EXPECT_EQ(last.name, "conv");
  EXPECT_EQ(g.type_of(g.outputs()[0]).dtype, DataType::Int(8));
  EXPECT_TRUE(structural_equal(g, infer_types(g))) << g.str();
}

TEST(QuantizeRealize, AFloatSumProductReadsTheLastOnesIntegersInFloat) {
  // conv_graph's convolution, then a second one on its int8 output: without an integer kernel
  // the second reads the first's requantized values less their zero point (the clip's output,
  // before + 5 and the cast to int8), not a dequantize of the int8 tensor (nothing narrows to 8
  // bits and widens back, no zero point is added to be subtracted again); a dequantize with
  // another zero point (4) adds the difference.
  for (int8_t zq : {5, 4}) {
    ConvGraph c = conv_graph();
    Graph& g = c.g;
    const Entry q = g.outputs()[0];
    Entry dq = g.add_op("qnn_dequantize", {q, g.add_constant("sq", scalar_f32(2.0f)),
                                           g.add_constant("zq", scalar_s8(zq))});
    std::vector<int8_t> w2(8 * 8);
    for (size_t k = 0; k < w2.size(); ++k) w2[k] = static_cast<int8_t>(int(k % 5) - 2);
    Entry dw2 =
        g.add_op("qnn_dequantize",
                 {g.add_constant("w2", array<int8_t>({8, 8, 1, 1}, DataType::Int(8), w2)),
                  g.add_constant("sw2", scalar_f32(0.5f)), g.add_constant("zw2", scalar_s8(0))});
    Entry conv2 = g.add_op("conv2d", {dq, dw2}, {}, "conv2");
    g.set_outputs({g.add_op("qnn_quantize", {conv2, g.add_constant("sy2", scalar_f32(4.0f)),
                                             g.add_constant("zy2", scalar_s8(-1))})});
    Graph r = quantize_realize(infer_types(g), avx2());
    EXPECT_EQ(count(r, "conv2d"), 2) << r.str();
    EXPECT_EQ(count(r, "qnn_dequantize"), 1) << r.str();  // of the graph's int8 input only
    EXPECT_EQ(count(r, "cast"), 1) << r.str();            // the result's
    int reads = 0;
    for (const Node& n : r.nodes()) {
      if (!n.is_op() || n.op != "conv2d" || r.node(n.inputs[0].node).op == "qnn_dequantize")
        continue;
      ++reads;
      const Node& in = r.node(n.inputs[0].node);
      if (zq == 5) {
        EXPECT_EQ(in.op, "clip") << r.str();
      } else {
        ASSERT_EQ(in.op, "add") << r.str();
        EXPECT_EQ(r.node(in.inputs[0].node).op, "clip") << r.str();
        EXPECT_EQ(r.node(in.inputs[1].node).value.data_as<float>()[0], 1.0f);  // 5 - 4
      }
    }
    EXPECT_EQ(reads, 1) << r.str();
    EXPECT_TRUE(structural_equal(r, infer_types(r))) << r.str();
  }
}

TEST(QuantizeRealize, DenseWithoutAnIntegerKernelTakesTheFloatDense) {
  Graph g;
  Entry x = g.add_input("x", {2, 16}, DataType::Int(8));
  Entry dx = g.add_op("qnn_dequantize", {x, g.add_constant("sx", scalar_f32(0.5f)),
                                         g.add_constant("zx", scalar_s8(1))});
  std::vector<int8_t> w(8 * 16);
  for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<int8_t>(int(k % 11) - 5);
  Entry dw =
      g.add_op("qnn_dequantize",
               {g.add_constant("w", array<int8_t>({8, 16}, DataType::Int(8), w)),
                g.add_constant("sw", scalar_f32(0.25f)), g.add_constant("zw", scalar_s8(0))});
  Entry d = g.add_op("dense", {dx, dw}, {}, "fc");
  g.add_output(g.add_op("qnn_quantize", {d, g.add_constant("sy", scalar_f32(1.0f)),
                                         g.add_constant("zy", scalar_s8(0))}));
  g = infer_types(g);
  Graph v = quantize_realize(g, vnni());
  EXPECT_EQ(count(v, "qnn_dense"), 1) << v.str();
  Graph a = quantize_realize(g, avx2());
  EXPECT_EQ(count(a, "qnn_dense"), 0) << a.str();
  ASSERT_EQ(count(a, "dense"), 1) << a.str();
  EXPECT_EQ(a.node(only(a, "dense").inputs[1].node).value.dtype(), DataType::Float(32));
  EXPECT_EQ(count(a, "round_even"), 1) << a.str();
  EXPECT_EQ(a.type_of(a.outputs()[0]), g.type_of(g.outputs()[0]));
}

TEST(QuantizeRealize, FloatSumsNeverTakeWinograd) {
  // A 3x3 64 -> 64 convolution on 14x14 takes Winograd in float on AVX2; its integer sums
  // computed in float must not (the transformed operands are no integers: sums would round).
  Graph q = optimize(infer_types(conv_graph(0, false, 64, 64, 14).g), 2, avx2());
  EXPECT_EQ(count(q, "conv2d_winograd_nchwc"), 0) << q.str();
  ASSERT_EQ(count(q, "conv2d_nchwc"), 1) << q.str();
  // Nor does the multiplier fold into the weights (batch-norm folding): they stay integers.
  const NDArray& packed = q.node(only(q, "conv2d_nchwc").inputs[1].node).value;
  ASSERT_EQ(packed.dtype(), DataType::Float(32));
  for (int64_t k = 0; k < packed.numel(); ++k)
    ASSERT_EQ(packed.data_as<float>()[k], std::nearbyint(packed.data_as<float>()[k])) << k;
  Graph f;
  Entry x = f.add_input("x", {1, 64, 14, 14}, DataType::Float(32));
  NDArray w = NDArray::empty({64, 64, 3, 3}, DataType::Float(32));
  for (int64_t k = 0; k < w.numel(); ++k) w.data_as<float>()[k] = float(k % 7) - 3;
  f.add_output(
      f.add_op("conv2d", {x, f.add_constant("w", w)}, {{"padding", Ints{1, 1, 1, 1}}}, "conv"));
  Graph fo = optimize(infer_types(f), 2, avx2());
  EXPECT_EQ(count(fo, "conv2d_winograd_nchwc"), 1) << fo.str();
}

TEST(QuantizeRealize, LeavesWeightsWithAZeroPointInFloat) {
  Graph in = infer_types(conv_graph(/*w_zp=*/2).g);
  Graph g = quantize_realize(in, vnni());
  EXPECT_EQ(count(g, "qnn_conv2d"), 0) << g.str();
  EXPECT_EQ(count(g, "conv2d"), 1);
  EXPECT_TRUE(structural_equal(in, g));
}

TEST(QuantizeRealize, LeavesAProductReadTwiceInFloat) {
  Graph g = quantize_realize(infer_types(conv_graph(0, /*second_reader=*/true).g), vnni());
  EXPECT_EQ(count(g, "qnn_conv2d"), 0) << g.str();
  EXPECT_EQ(count(g, "conv2d"), 1);
}

TEST(QuantizeRealize, AddOfTwoQuantizedTensorsBecomesAnIntegerAdd) {
  Graph g;
  Entry a = g.add_input("a", {1, 8}, DataType::Int(8));
  Entry b = g.add_input("b", {1, 8}, DataType::Int(8));
  Entry da = g.add_op("qnn_dequantize", {a, g.add_constant("sa", scalar_f32(0.5f)),
                                         g.add_constant("za", scalar_s8(1))});
  Entry db = g.add_op("qnn_dequantize", {b, g.add_constant("sb", scalar_f32(0.25f)),
                                         g.add_constant("zb", scalar_s8(-2))});
  Entry s = g.add_op("add", {da, db}, {}, "sum");
  g.add_output(g.add_op("qnn_quantize", {s, g.add_constant("sy", scalar_f32(1.0f)),
                                         g.add_constant("zy", scalar_s8(3))}));
  Graph r = quantize_realize(infer_types(g), vnni());
  ASSERT_EQ(count(r, "qnn_add"), 1) << r.str();
  const Node& n = only(r, "qnn_add");
  EXPECT_DOUBLE_EQ(n.attrs.get_float("ratio_a"), 0.5);
  EXPECT_DOUBLE_EQ(n.attrs.get_float("ratio_b"), 0.25);
  EXPECT_DOUBLE_EQ(n.attrs.get_float("fixed"), 3.0 - (0.5 * 1 + 0.25 * -2));
  EXPECT_EQ(n.attrs.get_int("out_min"), -128);
}

TEST(QuantizeRealize, MaxPoolBetweenEqualQuantizationsPoolsTheIntegers) {
  for (float sy : {0.5f, 0.25f}) {  // the output's scale: x's own, then another
    Graph g;
    Entry x = g.add_input("x", {1, 16, 8, 8}, DataType::Int(8));
    Entry dx = g.add_op("qnn_dequantize", {x, g.add_constant("sx", scalar_f32(0.5f)),
                                           g.add_constant("zx", scalar_s8(3))});
    Attrs a;
    a.set("pool_size", Ints{3, 3}).set("strides", Ints{2, 2}).set("padding", Ints{1, 1, 1, 1});
    Entry mp = g.add_op("max_pool2d", {dx}, a, "pool");
    g.add_output(g.add_op("qnn_quantize", {mp, g.add_constant("sy", scalar_f32(sy)),
                                           g.add_constant("zy", scalar_s8(3))}));
    Graph r = quantize_realize(infer_types(g), vnni());
    if (sy == 0.5f) {
      ASSERT_EQ(count(r, "max_pool2d"), 1) << r.str();
      EXPECT_EQ(count(r, "qnn_dequantize") + count(r, "qnn_quantize"), 0) << r.str();
      const Node& p = only(r, "max_pool2d");
      EXPECT_EQ(p.name, "pool");
      EXPECT_EQ(r.type_of(p.inputs[0]).dtype, DataType::Int(8));
      EXPECT_EQ(p.attrs.get_ints("strides"), (Ints{2, 2}));
    } else {
      EXPECT_EQ(count(r, "qnn_dequantize"), 1) << r.str();  // another scale: stays in float
    }
  }
}

TEST(QuantizeRealize, Int8ActivationsBetweenIntegerOpsAreCarriedAsUint8) {
  // conv_graph's conv, its output dequantized: the int8 tensor between the conv and the
  // dequantize becomes uint8 (+128); the graph's int8 input and float output keep their types.
  ConvGraph c = conv_graph();
  Graph& g = c.g;
  const Entry q = g.outputs()[0];
  g.set_outputs({g.add_op("qnn_dequantize", {q, g.add_constant("sq", scalar_f32(2.0f)),
                                             g.add_constant("zq", scalar_s8(5))})});
  Graph r = quantize_realize(infer_types(g), vnni());
  const Node& conv = only(r, "qnn_conv2d");
  EXPECT_EQ(r.type_of(conv.inputs[0]).dtype, DataType::Int(8));  // the graph's input
  EXPECT_EQ(conv.attrs.get_int("x_zero_point"), -3);
  EXPECT_EQ(conv.attrs.get_string("out_dtype"), "uint8");
  EXPECT_EQ(conv.attrs.get_int("y_zero_point"), 5 + 128);
  EXPECT_EQ(conv.attrs.get_int("out_min"), 5 + 128);  // the Relu, shifted
  EXPECT_EQ(conv.attrs.get_int("out_max"), 255);
  const Node& dq = only(r, "qnn_dequantize");
  EXPECT_EQ(r.type_of(dq.inputs[0]).dtype, DataType::UInt(8));
  const NDArray& zp = r.node(dq.inputs[2].node).value;
  ASSERT_EQ(zp.dtype(), DataType::UInt(8));
  EXPECT_EQ(zp.data_as<uint8_t>()[0], 133);
  EXPECT_EQ(r.type_of(r.outputs()[0]).dtype, DataType::Float(32));
  // Types as infer_types derives them from the new attributes.
  EXPECT_TRUE(structural_equal(r, infer_types(r))) << r.str();
}

TEST(QuantizeRealize, PerChannelActivationScalesStayInFloat) {
  Graph g;
  Entry a = g.add_input("a", {1, 2}, DataType::Int(8));
  Entry b = g.add_input("b", {1, 2}, DataType::Int(8));
  Entry sa = g.add_constant("sa", array<float>({2}, DataType::Float(32), {0.5f, 0.25f}));
  Entry da = g.add_op("qnn_dequantize", {a, sa, g.add_constant("za", scalar_s8(0))});
  Entry db = g.add_op("qnn_dequantize", {b, g.add_constant("sb", scalar_f32(0.25f)),
                                         g.add_constant("zb", scalar_s8(0))});
  g.add_output(
      g.add_op("qnn_quantize", {g.add_op("add", {da, db}), g.add_constant("sy", scalar_f32(1.0f)),
                                g.add_constant("zy", scalar_s8(0))}));
  Graph r = quantize_realize(infer_types(g), vnni());
  EXPECT_EQ(count(r, "qnn_add"), 0) << r.str();
}

TEST(QuantizeRealize, WalksATenThousandNodeChainWithoutRecursion) {
  Graph g;
  Entry e = g.add_input("x", {4}, DataType::Float(32));
  for (int i = 0; i < 10000; ++i) e = g.add_op("relu", {e});
  g.add_output(e);
  Graph r = quantize_realize(infer_types(g), vnni());
  EXPECT_EQ(r.num_nodes(), g.num_nodes());
}

}  // namespace
}  // namespace kiln::graph
