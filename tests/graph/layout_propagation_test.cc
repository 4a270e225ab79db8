// Tests of layout propagation through the ops between convolutions (alter_op_layout): a
// DenseNet dense block (concat on channels), a video model's depth stacking (pad, slices and
// concat over [N·D, C, H, W]), a squeeze-and-excitation block (global pooling,
// 1x1 convolutions on one pixel, a per-channel scale that is not a constant), a split and
// concat (ShuffleNet's unit), broadcast operands and slices that do not keep whole blocks. Each
// graph is checked three ways: golden text of the pass's output (16-lane hosts), no tensor
// converted back and forth between blocked ops (detail::layout_round_trips), and the compiled
// graph at opt_level 2 against opt_level 0 on seeded random inputs.

#include <gtest/gtest.h>

#include <random>

#include "../../src/graph/layout_util.h"
#include "common/golden.h"
#include "graph/graph_test_util.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;
using Ints = std::vector<int64_t>;
using test_util::random_array;
const DataType f32 = DataType::Float(32);

/// The layout pass's output for `g` (types inferred first; dead nodes removed).
Graph altered(const Graph& g) {
  Graph a = dead_code_elimination(alter_op_layout(infer_types(g), Target::host()));
  a.verify("test");
  return a;
}

size_t count_op(const Graph& g, const std::string& op) {
  size_t k = 0;
  for (const Node& n : g.nodes()) k += n.is_op() && n.op == op;
  return k;
}

/// The round trips of `g` as text (empty when there are none).
std::string round_trips(const Graph& g) {
  std::string s;
  for (int i : detail::layout_round_trips(g))
    s += "%" + std::to_string(i) + " " + g.node(i).outputs[0].str() + "\n";
  return s;
}

/// The largest tensor a round trip of `g` blocks again (0 when there is none).
int64_t largest_round_trip(const Graph& g) {
  int64_t m = 0;
  for (int i : detail::layout_round_trips(g)) m = std::max(m, g.node(i).outputs[0].numel());
  return m;
}

bool host_has_16_lanes() { return test_util::host_lanes() == 16; }

/// conv2d of `x` with random weights [O, C, k, k] (weights of a trained net's scale).
Entry conv(Graph& g, std::mt19937& rng, Entry x, int64_t C, int64_t O, int64_t k,
           const std::string& name) {
  const float r = 1.0f / std::sqrt(static_cast<float>(C * k * k));
  Attrs a;
  if (k > 1) a.set("padding", Ints{k / 2, k / 2, k / 2, k / 2});
  return g.add_op(
      "conv2d", {x, g.add_constant(name + "_w", random_array({O, C, k, k}, rng, -r, r))}, a, name);
}

/// A pre-activation dense layer: per-channel scale and shift (a folded batch norm), relu, 1x1
/// conv to 4·growth channels, relu, 3x3 conv to `growth` channels.
Entry dense_layer(Graph& g, std::mt19937& rng, Entry x, int64_t C, int64_t growth,
                  const std::string& name) {
  Entry s = g.add_op("multiply",
                     {x, g.add_constant(name + "_scale", random_array({C, 1, 1}, rng, 0.5, 1.5))});
  s = g.add_op("add", {s, g.add_constant(name + "_shift", random_array({C, 1, 1}, rng))});
  s = g.add_op("relu", {s});
  Entry b = conv(g, rng, s, C, 4 * growth, 1, name + "_conv1");
  b = g.add_op("relu", {b});
  return conv(g, rng, b, 4 * growth, growth, 3, name + "_conv2");
}

// stem conv (8 → 32) → dense layer → concat → dense layer → concat of all three → transition
// 1x1 conv → 2x2 average pooling: torchvision's DenseNet concatenates all earlier features
// before every layer.
Graph dense_block(std::mt19937& rng) {
  Graph g;
  Entry x = g.add_input("x", {1, 8, 8, 8}, f32);
  Entry f0 = g.add_op("relu", {conv(g, rng, x, 8, 32, 3, "stem")});
  Entry f1 = dense_layer(g, rng, f0, 32, 16, "layer1");
  Entry c1 = g.add_op("concat", {f0, f1}, {{"axis", int64_t{1}}}, "cat1");
  Entry f2 = dense_layer(g, rng, c1, 48, 16, "layer2");
  Entry c2 = g.add_op("concat", {f0, f1, f2}, {{"axis", int64_t{-3}}}, "cat2");
  Entry t = conv(g, rng, c2, 64, 32, 1, "transition");
  g.add_output(g.add_op("avg_pool2d", {t}, {{"pool_size", Ints{2, 2}}, {"strides", Ints{2, 2}}}));
  return g;
}

TEST(AlterLayout, DenseBlockConcatenatesBlocked) {
  std::mt19937 rng(21);
  Graph g = dense_block(rng);
  Graph a = altered(g);
  // Only the graph's input is blocked and its result unblocked; both concats run on blocks.
  EXPECT_EQ(round_trips(a), "") << a.str();
  EXPECT_EQ(count_op(a, "layout_transform"), 2u) << a.str();
  for (const Node& n : a.nodes()) {
    if (n.is_op() && n.op == "concat") {
      EXPECT_EQ(n.outputs[0].shape.size(), 5u) << a.str();
    }
  }
  if (host_has_16_lanes()) {
    KILN_EXPECT_GOLDEN("alter_layout_dense_block", a.str());
  }
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 31).max_err, 1e-4);
}

// EfficientNet's MBConv tail: x → conv (→ C) → silu = a; s = sigmoid(conv(silu(conv(
// global_avg_pool(a))))) with `squeeze` channels in the middle; a · s → 1x1 projection.
Graph se_block(std::mt19937& rng, int64_t C, int64_t squeeze) {
  Graph g;
  Entry x = g.add_input("x", {1, 16, 8, 8}, f32);
  Entry a = conv(g, rng, x, 16, C, 3, "expand");
  a = g.add_op("multiply", {a, g.add_op("sigmoid", {a})}, {}, "silu");
  Entry p = g.add_op("global_avg_pool2d", {a}, {}, "pool");
  Entry r = conv(g, rng, p, C, squeeze, 1, "fc1");
  r = g.add_op("add", {r, g.add_constant("fc1_b", random_array({1, squeeze, 1, 1}, rng))});
  r = g.add_op("multiply", {r, g.add_op("sigmoid", {r})});
  Entry e = conv(g, rng, r, squeeze, C, 1, "fc2");
  e = g.add_op("add", {e, g.add_constant("fc2_b", random_array({1, C, 1, 1}, rng))});
  Entry s = g.add_op("sigmoid", {e}, {}, "scale");
  Entry y = g.add_op("multiply", {a, s}, {}, "excite");
  g.add_output(conv(g, rng, y, C, 32, 1, "project"));
  return g;
}

TEST(AlterLayout, SqueezeExcitationScalesBlocked) {
  std::mt19937 rng(22);
  // 8 squeezed channels: every convolution blocked, no transform inside the block.
  Graph g = se_block(rng, 48, 8);
  Graph a = altered(g);
  EXPECT_EQ(round_trips(a), "") << a.str();
  EXPECT_EQ(count_op(a, "layout_transform"), 2u) << a.str();
  EXPECT_EQ(count_op(a, "conv2d"), 0u) << a.str();
  if (host_has_16_lanes()) {
    KILN_EXPECT_GOLDEN("alter_layout_se_block", a.str());
  }
  // The excitation x · s (x's shape) is not fused as an epilogue of the convolution computing
  // s (one pixel): that would recompute s per pixel.
  for (const std::vector<int>& grp : fuse_ops(a)) {
    bool excite = false, conv = false;
    for (int i : grp) {
      excite = excite || a.node(i).name == "excite";
      conv = conv || a.node(i).op == "conv2d_nchwc";
    }
    EXPECT_FALSE(excite && conv) << groups_str(a, fuse_ops(a));
  }
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 32).max_err, 1e-4);
}

TEST(AlterLayout, SqueezeExcitationWithNarrowSqueeze) {
  // 6 squeezed channels (EfficientNet-B3's first SE blocks): a block of 6 for the one-pixel
  // convolutions; the 48 x 8 x 8 activation is never converted.
  std::mt19937 rng(23);
  Graph g = se_block(rng, 48, 6);
  Graph a = altered(g);
  EXPECT_EQ(round_trips(a), "") << a.str();
  EXPECT_EQ(count_op(a, "conv2d"), 0u) << a.str();
  EXPECT_EQ(count_op(a, "layout_transform"), 2u) << a.str();
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 33).max_err, 1e-4);
}

TEST(AlterLayout, ConcatBlocksAPlainInputOnce) {
  // The graph input x (NCHW) concatenated with a blocked conv output twice, on channels and on
  // rows: x is blocked once and both concats run blocked.
  std::mt19937 rng(30);
  Graph g;
  Entry x = g.add_input("x", {1, 16, 5, 5}, f32);
  Entry a = conv(g, rng, x, 16, 32, 3, "a");
  Entry c = g.add_op("concat", {x, a}, {{"axis", int64_t{1}}}, "on_channels");
  Entry b = conv(g, rng, c, 48, 16, 1, "b");
  Entry r = g.add_op("concat", {b, x}, {{"axis", int64_t{2}}}, "on_rows");
  g.add_output(conv(g, rng, r, 16, 16, 1, "out"));
  Graph t = altered(g);
  EXPECT_EQ(round_trips(t), "") << t.str();
  EXPECT_EQ(count_op(t, "layout_transform"), 2u) << t.str();  // x blocked, the result unblocked
  for (const Node& n : t.nodes()) {
    if (n.is_op() && n.op == "concat") {
      EXPECT_EQ(n.outputs[0].shape.size(), 5u) << t.str();
    }
  }
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 39).max_err, 1e-4);
}

// ShuffleNet-v2's unit: conv (→ 64) → split in two halves (Slice) → the second half through
// 1x1 conv → relu → 1x1 conv → concat with the first half → 1x1 conv.
Graph split_concat(std::mt19937& rng) {
  Graph g;
  Entry x = g.add_input("x", {1, 8, 6, 6}, f32);
  Entry a = g.add_op("relu", {conv(g, rng, x, 8, 64, 3, "stem")});
  Entry l = g.add_op("strided_slice", {a},
                     {{"begin", Ints{0}}, {"end", Ints{32}}, {"axes", Ints{1}}}, "left");
  Entry r =
      g.add_op("strided_slice", {a},
               {{"begin", Ints{32}}, {"end", Ints{int64_t{1} << 40}}, {"axes", Ints{-3}}}, "right");
  r = g.add_op("relu", {conv(g, rng, r, 32, 32, 1, "branch1")});
  r = conv(g, rng, r, 32, 32, 1, "branch2");
  Entry c = g.add_op("concat", {l, r}, {{"axis", int64_t{1}}}, "cat");
  g.add_output(conv(g, rng, c, 64, 32, 1, "out"));
  return g;
}

TEST(AlterLayout, SplitAndConcatStayBlocked) {
  std::mt19937 rng(24);
  Graph g = split_concat(rng);
  Graph a = altered(g);
  EXPECT_EQ(round_trips(a), "") << a.str();
  EXPECT_EQ(count_op(a, "layout_transform"), 2u) << a.str();
  if (host_has_16_lanes()) {
    KILN_EXPECT_GOLDEN("alter_layout_split_concat", a.str());
  }
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 34).max_err, 1e-4);
}

// ShuffleNet-v2's unit with its channel shuffle: concat → reshape [N, 2, C/2, H, W] →
// transpose (0, 2, 1, 3, 4) → reshape [N, C, H, W] → split in halves, the second through a
// conv, concat again. The shuffle becomes one blocked channel_shuffle.
Graph shuffle_unit(std::mt19937& rng, int64_t C, int64_t H) {
  Graph g;
  Entry x = g.add_input("x", {1, 8, H, H}, f32);
  Entry a = g.add_op("relu", {conv(g, rng, x, 8, C / 2, 3, "stem")});
  Entry b = conv(g, rng, a, C / 2, C / 2, 1, "branch");
  Entry c = g.add_op("concat", {a, b}, {{"axis", int64_t{1}}}, "cat");
  Entry s = g.add_op("reshape", {c}, {{"newshape", Ints{1, 2, C / 2, H, H}}});
  s = g.add_op("transpose", {s}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  s = g.add_op("reshape", {s}, {{"newshape", Ints{1, -1, H, H}}}, "shuffle");
  Entry l =
      g.add_op("strided_slice", {s}, {{"begin", Ints{0}}, {"end", Ints{C / 2}}, {"axes", Ints{1}}});
  Entry r =
      g.add_op("strided_slice", {s}, {{"begin", Ints{C / 2}}, {"end", Ints{C}}, {"axes", Ints{1}}});
  r = g.add_op("relu", {conv(g, rng, r, C / 2, C / 2, 1, "branch2")});
  g.add_output(g.add_op("concat", {l, r}, {{"axis", int64_t{1}}}, "cat2"));
  return g;
}

TEST(AlterLayout, ChannelShuffleRunsBlocked) {
  std::mt19937 rng(25);
  Graph g = shuffle_unit(rng, 64, 6);
  Graph t = altered(g);
  EXPECT_EQ(round_trips(t), "") << t.str();
  EXPECT_EQ(count_op(t, "channel_shuffle"), 1u) << t.str();
  EXPECT_EQ(count_op(t, "transpose"), 0u) << t.str();
  EXPECT_EQ(count_op(t, "layout_transform"), 2u) << t.str();
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 35).max_err, 1e-4);
  // 48 channels: blocks of 12 (24 per half), the shuffle reading one block and writing another.
  Graph h = shuffle_unit(rng, 48, 5);
  EXPECT_EQ(count_op(altered(h), "channel_shuffle"), 1u) << altered(h).str();
  EXPECT_LT(test_util::compare_with_unoptimized(h, 2, 36).max_err, 1e-4);
}

TEST(AlterLayout, ChannelShuffleOfAPlainTensorStaysAsItIs) {
  // The reshape's input is NCHW (a graph input): nothing to keep blocked.
  Graph g;
  Entry x = g.add_input("x", {1, 12, 2, 2}, f32);
  Entry s = g.add_op("reshape", {x}, {{"newshape", Ints{1, 3, 4, 2, 2}}});
  s = g.add_op("transpose", {s}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  g.add_output(g.add_op("reshape", {s}, {{"newshape", Ints{1, 12, 2, 2}}}));
  Graph t = altered(g);
  EXPECT_EQ(count_op(t, "channel_shuffle"), 0u) << t.str();
  EXPECT_EQ(count_op(t, "transpose"), 1u) << t.str();
}

TEST(ChannelShuffleOp, RejectsBadLayoutsAndGroups) {
  auto type_error = [](std::vector<int64_t> shape, Attrs attrs) {
    Graph g;
    Entry x = g.add_input("x", std::move(shape), f32);
    g.add_output(g.add_op("channel_shuffle", {x}, std::move(attrs), "shuffle"));
    try {
      infer_types(g);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(
      type_error({1, 2, 3, 3, 16}, {{"groups", int64_t{2}}, {"layout", std::string("NCHW8c")}})
          .find("channel_shuffle: expected a [N, C/b, H, W, b] tensor for layout NCHW8c, got "
                "float32[1, 2, 3, 3, 16]"),
      std::string::npos);
  EXPECT_NE(type_error({1, 6, 3, 3}, {{"groups", int64_t{4}}})
                .find("channel_shuffle: 6 channels are not divisible into 4 groups"),
            std::string::npos);
  EXPECT_NE(type_error({1, 6, 3, 3}, {{"groups", int64_t{2}}, {"layout", std::string("NHWC")}})
                .find("channel_shuffle: layout 'NHWC' is neither NCHW nor NCHW<b>c"),
            std::string::npos);
}

TEST(AlterLayout, SlicesOfPartialBlocksComputeInNCHW) {
  // Channels 8..40 of a 64-channel blocked tensor, and every other channel: not whole blocks of
  // the host's lanes, so the slices read NCHW; the results stay right.
  std::mt19937 rng(26);
  Graph g;
  Entry x = g.add_input("x", {1, 8, 6, 6}, f32);
  Entry a = g.add_op("relu", {conv(g, rng, x, 8, 64, 3, "stem")});
  const int64_t L = test_util::host_lanes();
  Entry p = g.add_op("strided_slice", {a},
                     {{"begin", Ints{L / 2}}, {"end", Ints{L / 2 + 32}}, {"axes", Ints{1}}});
  Entry q = g.add_op(
      "strided_slice", {a},
      {{"begin", Ints{0, 0}}, {"end", Ints{64, 6}}, {"strides", Ints{2, 1}}, {"axes", Ints{1, 2}}});
  g.add_output(conv(g, rng, g.add_op("add", {p, q}), 32, 16, 1, "out"));
  Graph t = altered(g);
  for (const Node& n : t.nodes()) {
    if (n.is_op() && n.op == "strided_slice") {
      EXPECT_EQ(n.outputs[0].shape.size(), 4u) << t.str();
    }
  }
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 36).max_err, 1e-4);
}

TEST(AlterLayout, BroadcastOperandsAreBlockedNotTheActivation) {
  // A blocked activation times a computed per-channel scale [C, 1, 1] (3-D: reshaped, then
  // blocked), plus a computed spatial map [1, 1, H, W] (read as [1, 1, H, W, 1]), minus a
  // computed per-pixel-and-channel tensor [1, C, H, W] (a full operand, blocked).
  std::mt19937 rng(27);
  Graph g;
  Entry x = g.add_input("x", {1, 8, 6, 6}, f32);
  Entry s = g.add_input("s", {32, 1, 1}, f32);
  Entry m = g.add_input("m", {1, 1, 6, 6}, f32);
  Entry a = g.add_op("relu", {conv(g, rng, x, 8, 32, 3, "stem")});
  Entry y = g.add_op("multiply", {a, g.add_op("sigmoid", {s})}, {}, "scaled");
  y = g.add_op("add", {y, g.add_op("tanh", {m})}, {}, "masked");
  g.add_output(conv(g, rng, y, 32, 16, 1, "out"));
  Graph t = altered(g);
  EXPECT_EQ(round_trips(t), "") << t.str();
  // x and s blocked, the result unblocked; the activation never.
  EXPECT_EQ(count_op(t, "layout_transform"), 3u) << t.str();
  for (const Node& n : t.nodes()) {
    if (n.is_op() && n.op == "layout_transform") {
      EXPECT_LE(n.outputs[0].numel(), 16 * 36) << t.str();
    }
  }
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 37).max_err, 1e-4);
}

TEST(AlterLayout, DifferentlyBlockedOperandsMeetInAPowerOfTwoBlock) {
  // GhostNetV2's gate: 24 channels as two concatenated 12-channel halves (12c) times a
  // sigmoid map of 24 channels (8c), read by a convolution in 8c. Equal elements on both
  // sides: the product is computed in 8c, so the halves are converted once (in 12c it took a
  // second conversion back to 8c for the convolution).
  if (!host_has_16_lanes()) GTEST_SKIP() << "the channel blocks are chosen for 16 lanes";
  std::mt19937 rng(31);
  Graph g;
  Entry x = g.add_input("x", {1, 16, 8, 8}, f32);
  Entry prim = g.add_op("relu", {conv(g, rng, x, 16, 12, 1, "prim")});
  Entry cheap = g.add_op("relu", {conv(g, rng, prim, 12, 12, 3, "cheap")});
  Entry cat = g.add_op("concat", {prim, cheap}, {{"axis", int64_t{1}}}, "cat");
  Entry gate = g.add_op("sigmoid", {conv(g, rng, x, 16, 24, 1, "dfc")});
  Entry y = g.add_op("multiply", {cat, gate}, {}, "gated");
  g.add_output(conv(g, rng, y, 24, 24, 3, "down"));
  Graph t = altered(g);
  const Node* product = nullptr;
  for (const Node& n : t.nodes())
    if (n.is_op() && n.name == "gated") product = &n;
  ASSERT_NE(product, nullptr) << t.str();
  EXPECT_EQ(product->outputs[0].str(), "float32[1, 3, 8, 8, 8]") << t.str();
  EXPECT_EQ(count_op(t, "layout_transform"), 3u) << t.str();  // x, the halves, the result
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 41).max_err, 1e-4);
}

TEST(AlterLayout, PlainBigOperandKeepsTheOpInNCHW) {
  // A plain 32 x 6 x 6 tensor times a blocked per-channel scale: blocking the big operand
  // costs more than unblocking the small one, so the multiply computes in NCHW.
  std::mt19937 rng(28);
  Graph g;
  Entry x = g.add_input("x", {1, 32, 6, 6}, f32);
  Entry s = g.add_op("global_avg_pool2d", {conv(g, rng, x, 32, 32, 1, "conv")});
  g.add_output(g.add_op("multiply", {g.add_op("softmax", {x}, {{"axis", int64_t{1}}}), s}));
  Graph t = altered(g);
  for (const Node& n : t.nodes()) {
    if (n.is_op() && n.op == "multiply") {
      EXPECT_EQ(n.outputs[0].shape.size(), 4u) << t.str();
    }
  }
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 38).max_err, 1e-4);
}

// A factorized (2+1)-D video block as the ONNX importer writes it: a spatial conv over
// [D, C, H, W] goes back to [1, C, D, H, W] (reshape, transpose), gets a batch norm and a ReLU
// there, moves to [D, C, H, W] again, and the temporal (3, 1, 1) conv stacks three depth
// slices of its padded input on the channels for a 1x1 conv. simplify sinks the moves through
// the batch norm and the ReLU until they cancel, the scale folds into the first conv, and the
// pad, the slices and the concat run on channel blocks: no transpose is left and only the
// input and the result change layout.
TEST(AlterLayout, VideoDepthStackStaysBlocked) {
  std::mt19937 rng(41);
  const int64_t D = 4, C = 16, S = 6;
  Graph g;
  Entry x = g.add_input("x", {D, C, S, S}, f32);
  Entry y = conv(g, rng, x, C, C, 3, "spatial");
  y = g.add_op("reshape", {y}, {{"newshape", Ints{1, D, C, S, S}}});
  y = g.add_op("transpose", {y}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  y = g.add_op("batch_norm", {y, g.add_constant("gamma", random_array({C}, rng, 0.5, 1.5)),
                              g.add_constant("beta", random_array({C}, rng)),
                              g.add_constant("mean", random_array({C}, rng)),
                              g.add_constant("var", random_array({C}, rng, 0.5, 1.5))});
  y = g.add_op("relu", {y});
  y = g.add_op("transpose", {y}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  y = g.add_op("reshape", {y}, {{"newshape", Ints{D, C, S, S}}});
  y = g.add_op("pad", {y}, {{"pad_before", Ints{1, 0, 0, 0}}, {"pad_after", Ints{1, 0, 0, 0}}});
  std::vector<Entry> taps;
  for (int64_t k = 0; k < 3; ++k)
    taps.push_back(g.add_op("strided_slice", {y},
                            {{"begin", Ints{k}}, {"end", Ints{k + D}}, {"axes", Ints{0}}}));
  Entry t = g.add_op("concat", taps, {{"axis", int64_t{1}}});
  g.add_output(conv(g, rng, t, 3 * C, C, 1, "temporal"));
  Graph o = optimize(g, 2);
  EXPECT_EQ(count_op(o, "transpose"), 0u) << o.str();
  EXPECT_EQ(count_op(o, "batch_norm") + count_op(o, "multiply"), 0u) << o.str();
  EXPECT_EQ(round_trips(o), "") << o.str();
  EXPECT_EQ(count_op(o, "layout_transform"), 2u) << o.str();
  for (const Node& n : o.nodes()) {
    if (n.is_op() && (n.op == "pad" || n.op == "strided_slice" || n.op == "concat")) {
      EXPECT_EQ(n.outputs[0].shape.size(), 5u) << n.op << "\n" << o.str();
    }
  }
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 41).max_err, 1e-4);
}

// A 1-D convolution stack as the ONNX importer writes it: each Conv1d is a conv2d over a unit
// height between unsqueeze and squeeze, with a bias and a GELU-like tail on [N, C, L] between
// two. simplify sinks the squeeze below the element-wise ops until it meets the next unsqueeze,
// and the stack stays blocked.
TEST(AlterLayout, Conv1dStackStaysBlocked) {
  std::mt19937 rng(43);
  const int64_t C = 16, L = 24;
  Graph g;
  Entry x = g.add_input("x", {1, C, L}, f32);
  for (int layer = 0; layer < 3; ++layer) {
    const std::string name = "conv" + std::to_string(layer);
    Entry u = g.add_op("unsqueeze", {x}, {{"axes", Ints{2}}});
    Entry w = g.add_constant(name + "_w", random_array({C, C, 1, 3}, rng, -0.25f, 0.25f));
    Entry y = g.add_op("conv2d", {u, w}, {{"padding", Ints{0, 1, 0, 1}}}, name);
    y = g.add_op("squeeze", {y}, {{"axes", Ints{2}}});
    y = g.add_op("add", {y, g.add_constant(name + "_b", random_array({1, C, 1}, rng))});
    Entry e = g.add_op(
        "erf", {g.add_op("multiply", {y, g.add_constant(name + "_k", random_array({}, rng))})});
    x = g.add_op("multiply", {y, e});
  }
  g.add_output(x);
  Graph o = optimize(g, 2);
  EXPECT_EQ(count_op(o, "squeeze") + count_op(o, "unsqueeze"), 2u) << o.str();
  EXPECT_EQ(round_trips(o), "") << o.str();
  EXPECT_EQ(count_op(o, "layout_transform"), 2u) << o.str();
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 43).max_err, 1e-4);
}

// GhostNet's ghost module: a 1x1 conv to 24 channels (blocks of 8) and a cheap depthwise conv
// of it, concatenated into 48 channels and sliced to all 48, then a stride-2 depthwise conv.
// The slice keeps every element (simplify drops it) and the untuned depthwise conv reads the
// blocks of 8 its producers wrote, where its own default block would be 16: no layout_transform
// between the concat and it.
TEST(AlterLayout, DepthwiseConvReadsItsProducersBlock) {
  std::mt19937 rng(45);
  const int64_t C = 8, H = 24, S = 12;
  Graph g;
  Entry x = g.add_input("x", {1, C, S, S}, f32);
  Entry a = g.add_op("relu", {conv(g, rng, x, C, H, 1, "primary")});
  Entry dw_w = g.add_constant("cheap_w", random_array({H, 1, 3, 3}, rng, -0.3f, 0.3f));
  Entry b = g.add_op("relu",
                     {g.add_op("conv2d", {a, dw_w},
                               {{"padding", Ints{1, 1, 1, 1}}, {"groups", int64_t{H}}}, "cheap")});
  Entry cat = g.add_op("concat", {a, b}, {{"axis", int64_t{1}}}, "cat");
  Entry sl = g.add_op("strided_slice", {cat},
                      {{"begin", Ints{0}}, {"end", Ints{2 * H}}, {"axes", Ints{1}}}, "slice");
  Entry w2 = g.add_constant("dw_w", random_array({2 * H, 1, 3, 3}, rng, -0.3f, 0.3f));
  Entry d = g.add_op(
      "conv2d", {sl, w2},
      {{"padding", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"groups", int64_t{2 * H}}}, "dw");
  g.add_output(conv(g, rng, d, 2 * H, 16, 1, "project"));
  Graph o = optimize(g, 2);
  EXPECT_EQ(count_op(o, "strided_slice"), 0u) << o.str();
  int found = 0;
  for (const Node& n : o.nodes()) {
    if (n.is_op() && n.op == "depthwise_conv2d_nchwc" && n.name == "dw") {
      ++found;
      EXPECT_EQ(n.outputs[0].shape.back(), 8) << o.str();
      EXPECT_EQ(o.node(n.inputs[0].node).op, "concat") << o.str();
    }
  }
  EXPECT_EQ(found, 1) << o.str();
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 45).max_err, 1e-4);
}

// A bilinear 2x upsampling as the ONNX importer writes Resize (per axis: two takes of the
// input rows or columns, each times its weights, added) between two convolutions, as in
// SegFormer's and FPN decoders: the takes gather rows and columns of the blocked tensor, so
// nothing is converted between the convolutions.
TEST(AlterLayout, ResizeTapsOfABlockedTensorStayBlocked) {
  std::mt19937 rng(47);
  const int64_t C = 32, S = 6;
  Graph g;
  Entry x = g.add_input("x", {1, 8, S, S}, f32);
  Entry y = g.add_op("relu", {conv(g, rng, x, 8, C, 3, "head")});
  for (int64_t axis : {2, -1}) {
    NDArray i0 = NDArray::empty({2 * S}, DataType::Int(64));
    NDArray i1 = NDArray::empty({2 * S}, DataType::Int(64));
    for (int64_t o = 0; o < 2 * S; ++o) {
      i0.data_as<int64_t>()[o] = std::max<int64_t>(0, (o - 1) / 2);
      i1.data_as<int64_t>()[o] = std::min<int64_t>(S - 1, (o + 1) / 2);
    }
    const Ints wshape = axis == 2 ? Ints{2 * S, 1} : Ints{2 * S};
    std::vector<Entry> taps;
    for (const NDArray& idx : {i0, i1}) {
      const std::string k = std::to_string(axis) + "_" + std::to_string(taps.size());
      Entry t = g.add_op("take", {y, g.add_constant("idx" + k, idx)}, {{"axis", axis}});
      taps.push_back(g.add_op("multiply", {t, g.add_constant("w" + k, random_array(wshape, rng))}));
    }
    y = g.add_op("add", taps);
  }
  g.add_output(conv(g, rng, y, C, 16, 1, "tail"));
  Graph o = optimize(g, 2);
  EXPECT_EQ(round_trips(o), "") << o.str();
  EXPECT_EQ(count_op(o, "layout_transform"), 2u) << o.str();  // x in, the result out
  int takes = 0;
  for (const Node& n : o.nodes()) {
    if (n.is_op() && n.op == "take") {
      ++takes;
      EXPECT_EQ(n.outputs[0].shape.size(), 5u) << o.str();
    }
  }
  EXPECT_EQ(takes, 4) << o.str();
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 47).max_err, 1e-4);
}

// A 3-D UNet's skip connection as the ONNX importer writes its convolutions (conv2d over the
// depth-major [D, C, H, W], moved back to [1, C, D, H, W] after each): the decoder concatenates
// an upsampled map (a plain 5-D input here) with the encoder's output on the channels, and the
// next convolution moves the concat back to [D, 2C, H, W]. simplify hoists that move above
// the concat, where it cancels the encoder's move: the concat joins two [D, C, H, W] tensors
// on their channels, blocked, and the encoder's output is not converted.
TEST(AlterLayout, SkipConcatOfA3DConvStaysBlocked) {
  std::mt19937 rng(53);
  const int64_t D = 4, C = 16, S = 6;
  Graph g;
  Entry x = g.add_input("x", {D, C, S, S}, f32);
  Entry up = g.add_input("up", {1, C, D, S, S}, f32);
  Entry e = g.add_op("relu", {conv(g, rng, x, C, C, 3, "encoder")});
  e = g.add_op("reshape", {e}, {{"newshape", Ints{1, D, C, S, S}}});
  e = g.add_op("transpose", {e}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  Entry cat = g.add_op("concat", {g.add_op("relu", {up}), e}, {{"axis", int64_t{1}}}, "skip");
  Entry t = g.add_op("transpose", {cat}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  t = g.add_op("reshape", {t}, {{"newshape", Ints{D, 2 * C, S, S}}});
  g.add_output(conv(g, rng, t, 2 * C, C, 3, "decoder"));
  Graph o = optimize(g, 2);
  EXPECT_EQ(count_op(o, "concat"), 1u) << o.str();
  for (const Node& n : o.nodes())
    if (n.is_op() && n.op == "concat" && host_has_16_lanes())
      EXPECT_EQ(n.outputs[0].shape, (Ints{D, 2, S, S, 16})) << o.str();
  EXPECT_EQ(round_trips(o), "") << o.str();
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 53).max_err, 1e-4);
}

// A two-stage detector's box head: RoIAlign over a convolution's map, then the flattened bins.
// RoIAlign pools the blocked map as it is (each tap a vector of channels) instead of reading
// it back in NCHW, where every channel gathered.
TEST(AlterLayout, RoiAlignPoolsABlockedMap) {
  std::mt19937 rng(55);
  const int64_t C = 32, S = 12, R = 5;
  Graph g;
  Entry x = g.add_input("x", {1, 8, S, S}, f32);
  Entry f = g.add_op("relu", {conv(g, rng, x, 8, C, 3, "backbone")});
  NDArray boxes = NDArray::empty({R, 4}, f32);
  for (int64_t r = 0; r < R; ++r) {
    const float x1 = float(r), y1 = float(r) / 2;
    const float b[4] = {x1, y1, x1 + 5.5f, y1 + 4.25f};
    std::copy(b, b + 4, boxes.data_as<float>() + r * 4);
  }
  NDArray batch = NDArray::empty({R}, DataType::Int(64));
  std::fill(batch.data_as<int64_t>(), batch.data_as<int64_t>() + R, 0);
  Attrs ra{{"output_height", int64_t{3}},
           {"output_width", int64_t{3}},
           {"sampling_ratio", int64_t{2}},
           {"spatial_scale", 1.0}};
  Entry p = g.add_op(
      "roi_align", {f, g.add_constant("boxes", boxes), g.add_constant("batch", batch)}, ra, "roi");
  g.add_output(g.add_op("flatten", {p}));
  Graph o = optimize(g, 2);
  int found = 0;
  for (const Node& n : o.nodes())
    if (n.is_op() && n.op == "roi_align") {
      ++found;
      EXPECT_EQ(o.type_of(n.inputs[0]).shape.size(), 5u) << o.str();
      EXPECT_NE(o.node(n.inputs[0].node).op, "layout_transform") << o.str();
    }
  EXPECT_EQ(found, 1) << o.str();
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 55).max_err, 1e-4);
}

/// A float32 scalar.
NDArray scalar(float v) {
  NDArray a = NDArray::empty({}, f32);
  *a.data_as<float>() = v;
  return a;
}

/// The mean nodes of `g` and the ranks of their inputs, as text ("5 5 " for two blocked ones).
std::string mean_input_ranks(const Graph& g) {
  std::string s;
  for (const Node& n : g.nodes())
    if (n.is_op() && n.op == "mean") s += std::to_string(g.type_of(n.inputs[0]).shape.size()) + " ";
  return s;
}

/// A layer norm over all of `x`'s non-batch axes `axes` as exported ops: mean, x − mean, the
/// mean of its square, + eps, sqrt, divide, then a per-channel scale and shift of shape `pc`.
Entry global_norm(Graph& g, std::mt19937& rng, Entry x, const Ints& axes, const Ints& pc,
                  const std::string& name) {
  Attrs mean_attrs{{"axes", axes}, {"keepdims", int64_t{1}}};
  Entry mu = g.add_op("mean", {x}, mean_attrs, name + "_mean");
  Entry d = g.add_op("subtract", {x, mu});
  Entry var = g.add_op("mean", {g.add_op("multiply", {d, d})}, mean_attrs, name + "_var");
  Entry sd =
      g.add_op("sqrt", {g.add_op("add", {var, g.add_constant(name + "_eps", scalar(1e-5f))})});
  Entry y = g.add_op("divide", {d, sd});
  y = g.add_op("multiply", {y, g.add_constant(name + "_g", random_array(pc, rng, 0.5f, 1.5f))});
  return g.add_op("add", {y, g.add_constant(name + "_b", random_array(pc, rng))});
}

// Conv-TasNet's separation block as the ONNX importer writes it: 1-D convolutions (conv2d over
// a unit height between unsqueeze and squeeze), PReLU as where(x < 0, x·a, x) and a global
// layer norm over channels and time ([N, C, L] means over axes 1 and 2). simplify sinks the
// squeeze through the where and through the means (over the 4-D tensor's axes 1 and 3), and
// the means reduce the blocked tensor: nothing is converted between the convolutions.
TEST(AlterLayout, Conv1dGlobalLayerNormStaysBlocked) {
  std::mt19937 rng(49);
  const int64_t C = 32, L = 40;
  Graph g;
  Entry x = g.add_input("x", {1, C, L}, f32);
  Entry zero = g.add_constant("zero", scalar(0.0f));
  for (int layer = 0; layer < 2; ++layer) {
    const std::string name = "conv" + std::to_string(layer);
    Entry u = g.add_op("unsqueeze", {x}, {{"axes", Ints{2}}});
    Entry w = g.add_constant(name + "_w", random_array({C, C, 1, 3}, rng, -0.2f, 0.2f));
    Entry y = g.add_op("conv2d", {u, w}, {{"padding", Ints{0, 1, 0, 1}}}, name);
    y = g.add_op("squeeze", {y}, {{"axes", Ints{2}}});
    Entry neg = g.add_op("less", {y, zero});
    Entry scaled = g.add_op("multiply", {y, g.add_constant(name + "_a", scalar(0.25f))});
    y = g.add_op("where", {neg, scaled, y}, {}, name + "_prelu");
    x = global_norm(g, rng, y, {1, 2}, {1, C, 1}, name + "_gln");
  }
  g.add_output(x);
  Graph o = optimize(g, 2);
  EXPECT_EQ(count_op(o, "squeeze") + count_op(o, "unsqueeze"), 2u) << o.str();
  EXPECT_EQ(round_trips(o), "") << o.str();
  EXPECT_EQ(count_op(o, "layout_transform"), 2u) << o.str();
  if (host_has_16_lanes()) EXPECT_EQ(mean_input_ranks(o), "5 5 5 5 ") << o.str();
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 49).max_err, 1e-4);
}

// PoolFormer's GroupNorm with one group between convolutions, as exported: a reshape of
// [N, C, H, W] to [N, 1, C·H·W] and a normalization over its last axis, back to [N, C, H, W]
// and a per-channel scale and shift. The means reduce over whole axes of the blocked tensor
// (simplify sinks the reshape through them): no layout_transform between the convolutions.
TEST(AlterLayout, GroupNormWithOneGroupStaysBlocked) {
  std::mt19937 rng(51);
  const int64_t C = 32, S = 10;
  Graph g;
  Entry x = g.add_input("x", {1, C, S, S}, f32);
  Entry y = conv(g, rng, x, C, C, 3, "conv1");
  Entry r = g.add_op("reshape", {y}, {{"newshape", Ints{1, 1, C * S * S}}});
  Entry mu = g.add_op("mean", {r}, {{"axes", Ints{2}}, {"keepdims", int64_t{1}}});
  Entry d = g.add_op("subtract", {r, mu});
  Entry var = g.add_op("mean", {g.add_op("multiply", {d, d})},
                       {{"axes", Ints{2}}, {"keepdims", int64_t{1}}});
  Entry n = g.add_op(
      "divide",
      {d, g.add_op("sqrt", {g.add_op("add", {var, g.add_constant("eps", scalar(1e-5f))})})});
  n = g.add_op("reshape", {n}, {{"newshape", Ints{1, C, S, S}}});
  n = g.add_op("multiply", {n, g.add_constant("gamma", random_array({C, 1, 1}, rng, 0.5f, 1.5f))});
  n = g.add_op("add", {n, g.add_constant("beta", random_array({C, 1, 1}, rng))});
  g.add_output(conv(g, rng, n, C, C, 1, "conv2"));
  Graph o = optimize(g, 2);
  EXPECT_EQ(round_trips(o), "") << o.str();
  EXPECT_EQ(count_op(o, "layout_transform"), 2u) << o.str();
  if (host_has_16_lanes()) EXPECT_EQ(mean_input_ranks(o), "5 5 ") << o.str();
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 51).max_err, 1e-4);
}

TEST(LayoutRoundTrips, FindsATensorConvertedBackAndForth) {
  // conv → softmax over channels (an op that needs NCHW) → conv: the softmax's result is
  // blocked again, a round trip of 32 x 5 x 5 values.
  std::mt19937 rng(29);
  Graph g;
  Entry x = g.add_input("x", {1, 32, 5, 5}, f32);
  Entry a = conv(g, rng, x, 32, 32, 1, "a");
  Entry s = g.add_op("softmax", {a}, {{"axis", int64_t{1}}});
  g.add_output(conv(g, rng, s, 32, 32, 1, "b"));
  Graph t = altered(g);
  ASSERT_EQ(detail::layout_round_trips(t).size(), 1u) << t.str();
  EXPECT_EQ(largest_round_trip(t), 32 * 25);
  // The graph's own input blocked is not a round trip.
  Graph h;
  Entry y = h.add_input("y", {1, 32, 5, 5}, f32);
  h.add_output(conv(h, rng, y, 32, 32, 1, "c"));
  EXPECT_TRUE(detail::layout_round_trips(altered(h)).empty());
}

}  // namespace
}  // namespace kiln::graph
