// Tests of diamond fusion and of the fusion cost check (fuse_ops, src/graph/fuse.cc) on the
// patterns of the models Kiln is judged on: SiLU x·sigmoid(x) after a convolution
// (EfficientNet, MobileNet v3), GELU after a dense behind a reshape (ViT, BERT, GPT-2: the
// erf and the tanh forms), the squeeze-and-excitation block (its [N,C,1,1] scale is read, not
// recomputed per pixel), a residual diamond and ViT's attention projections (epilogues through
// [M, 1, N]); the cost check on costly diamonds, broadcast reads, reductions and a chain of
// 3,000 diamonds. Golden fused-group text on the typed graphs and on the optimized (opt_level
// 2) graphs; the dense template's register tile in the TIR of reshaped epilogues; every graph
// built at opt_level 2 against opt_level 0 on seeded random inputs through the GraphExecutor,
// the fused build's buffers poisoned (NaN) first.

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/graph_test_util.h"
#include "kiln/graph/build_module.h"
#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"
#include "kiln/runtime/graph_executor.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;
const DataType f32 = DataType::Float(32);
using test_util::random_array;

std::string fused(const Graph& g) {
  Graph t = infer_types(g);
  return groups_str(t, fuse_ops(t));
}

/// The groups of the graph the build compiles (opt_level 2), as `kiln inspect --fused` has them.
std::string fused_optimized(const Graph& g) {
  Graph t = optimize(g, 2);
  return groups_str(t, fuse_ops(t));
}

Entry scalar(Graph& g, const std::string& name, float v) {
  NDArray a = NDArray::empty({}, f32);
  a.data_as<float>()[0] = v;
  return g.add_constant(name, a);
}

Attrs same_padding() { return {{"padding", std::vector<int64_t>{1, 1, 1, 1}}}; }

// conv2d → bias add → x·sigmoid(x).
Graph conv_silu(std::mt19937& rng) {
  const int C = 16;
  Graph g;
  Entry x = g.add_input("x", {1, 8, 10, 10}, f32);
  Entry c =
      g.add_op("conv2d", {x, g.add_constant("w", random_array({C, 8, 3, 3}, rng))}, same_padding());
  Entry a = g.add_op("add", {c, g.add_constant("b", random_array({1, C, 1, 1}, rng))});
  g.add_output(g.add_op("multiply", {a, g.add_op("sigmoid", {a})}));
  return g;
}

// dense [M, K] → reshape [1, M, N] → bias add → GELU (erf: x·0.5·(1 + erf(x / √2)), or tanh:
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))) → reshape [M, N] (ViT's and BERT's MLP).
Graph dense_gelu(std::mt19937& rng, bool tanh_form) {
  const int64_t M = 10, K = 32, N = 48;
  Graph g;
  Entry x = g.add_input("x", {M, K}, f32);
  Entry d = g.add_op("dense", {x, g.add_constant("w", random_array({N, K}, rng))});
  Entry r = g.add_op("reshape", {d}, {{"newshape", std::vector<int64_t>{1, M, N}}});
  Entry b = g.add_op("add", {r, g.add_constant("b", random_array({N}, rng))});
  Entry y;
  if (!tanh_form) {
    Entry e = g.add_op("erf", {g.add_op("divide", {b, scalar(g, "sqrt2", std::sqrt(2.0f))})});
    Entry h = g.add_op("multiply", {b, g.add_op("add", {e, scalar(g, "one", 1)})});
    y = g.add_op("multiply", {h, scalar(g, "half", 0.5f)});
  } else {
    Entry cube = g.add_op("power", {b, scalar(g, "three", 3)});
    Entry inner = g.add_op("add", {b, g.add_op("multiply", {cube, scalar(g, "k", 0.044715f)})});
    Entry t = g.add_op("tanh", {g.add_op("multiply", {inner, scalar(g, "s", 0.7978845608f)})});
    Entry h = g.add_op("multiply", {g.add_op("multiply", {b, scalar(g, "half", 0.5f)}),
                                    g.add_op("add", {t, scalar(g, "one", 1)})});
    y = h;
  }
  g.add_output(g.add_op("reshape", {y}, {{"newshape", std::vector<int64_t>{M, N}}}));
  return g;
}

// Squeeze-and-excitation: x = silu(conv(in)); s = sigmoid(conv(relu(conv(gap(x))))); x·s.
Graph se_block(std::mt19937& rng) {
  const int C = 16, R = 4;
  Graph g;
  Entry in = g.add_input("in", {1, 8, 8, 8}, f32);
  Entry c0 = g.add_op("conv2d", {in, g.add_constant("w0", random_array({C, 8, 3, 3}, rng))},
                      same_padding());
  Entry x = g.add_op("multiply", {c0, g.add_op("sigmoid", {c0})});
  Entry p = g.add_op("global_avg_pool2d", {x});
  Entry c1 = g.add_op("conv2d", {p, g.add_constant("w1", random_array({R, C, 1, 1}, rng))});
  Entry r = g.add_op(
      "relu", {g.add_op("add", {c1, g.add_constant("b1", random_array({1, R, 1, 1}, rng))})});
  Entry c2 = g.add_op("conv2d", {r, g.add_constant("w2", random_array({C, R, 1, 1}, rng))});
  Entry s = g.add_op(
      "sigmoid", {g.add_op("add", {c2, g.add_constant("b2", random_array({1, C, 1, 1}, rng))})});
  g.add_output(g.add_op("multiply", {x, s}));
  return g;
}

// r = relu(conv(in)); out = relu(conv(r) + r): r feeds the second convolution and the add.
Graph residual_diamond(std::mt19937& rng) {
  const int C = 8;
  Graph g;
  Entry in = g.add_input("in", {1, C, 8, 8}, f32);
  Entry r = g.add_op(
      "relu", {g.add_op("conv2d", {in, g.add_constant("w1", random_array({C, C, 3, 3}, rng))},
                        same_padding())});
  Entry c = g.add_op("conv2d", {r, g.add_constant("w2", random_array({C, C, 3, 3}, rng))},
                     same_padding());
  g.add_output(g.add_op("relu", {g.add_op("add", {c, r})}));
  return g;
}

TEST(FuseDiamond, SiluJoinsTheConvolution) {
  std::mt19937 rng(1);
  EXPECT_EQ(fused(conv_silu(rng)), "{conv2d %2, add %4, sigmoid %5, multiply %6}\n");
}

TEST(FuseDiamond, GeluJoinsTheDenseThroughReshapes) {
  std::mt19937 rng(2);
  EXPECT_EQ(fused(dense_gelu(rng, false)),
            "{dense %2, reshape %3, add %5, divide %7, erf %8, add %10, multiply %11, "
            "multiply %13, reshape %14}\n");
  EXPECT_EQ(fused(dense_gelu(rng, true)),
            "{dense %2, reshape %3, add %5, power %7, multiply %9, add %10, multiply %12, "
            "tanh %13, multiply %15, add %17, multiply %18, reshape %19}\n");
}

TEST(FuseDiamond, SqueezeExcitationReadsItsScale) {
  std::mt19937 rng(3);
  // The scale s ([1,16,1,1], computed by a convolution) is read by the final multiply, not
  // inlined into it; the block input x has two readers far apart and ends its group.
  EXPECT_EQ(fused(se_block(rng)),
            "{conv2d %2, sigmoid %3, multiply %4}\n"
            "{global_avg_pool2d %5}\n"
            "{conv2d %7, add %9, relu %10}\n"
            "{conv2d %12, add %14, sigmoid %15}\n"
            "{multiply %16}\n");
}

TEST(FuseDiamond, ResidualDiamondKeepsTheConvolutionOut) {
  std::mt19937 rng(4);
  // relu %3 feeds the convolution and the add: its diamond holds a convolution, so it is
  // written out once; the second convolution takes the add and the relu.
  EXPECT_EQ(fused(residual_diamond(rng)),
            "{conv2d %2, relu %3}\n"
            "{conv2d %5, add %6, relu %7}\n");
}

TEST(FuseDiamond, OptimizedGraphsFuseTheSameWay) {
  std::mt19937 rng(5);
  // After layout alteration: blocked convolutions, packed dense; the edges' layout transforms.
  // The dense's reshape to 3-D and the GELU's reshape back cancel: simplify sinks the first
  // through the bias add and the GELU diamond.
  EXPECT_EQ(fused_optimized(conv_silu(rng)),
            "{layout_transform %1}\n"
            "{conv2d_nchwc %3, add %5, sigmoid %6, multiply %7}\n"
            "{layout_transform %8}\n");
  EXPECT_EQ(fused_optimized(dense_gelu(rng, false)),
            "{dense_packed %2, add %4, divide %6, erf %7, add %9, multiply %10, multiply %12}\n");
}

TEST(FuseCost, CheapDiamondFusesCostlyOneDoesNot) {
  // negative is one float op: inlined into both branches. exp (on the chain) is a
  // transcendental read by two nodes: its group ends there, rather than computing it twice per
  // element.
  Graph g;
  Entry x = g.add_input("x", {8, 8}, f32);
  Entry n = g.add_op("negative", {x});
  Entry a = g.add_op("add", {g.add_op("relu", {n}), g.add_op("abs", {n})});
  Entry e = g.add_op("exp", {a});
  g.add_output(g.add_op("multiply", {g.add_op("relu", {e}), g.add_op("sigmoid", {e})}));
  EXPECT_EQ(fused(g),
            "{negative %1, relu %2, abs %3, add %4, exp %5}\n"
            "{relu %6, sigmoid %7, multiply %8}\n");
}

TEST(FuseCost, DuplicationCountsWholeInlinedCones) {
  // 3,000 SiLU diamonds in a row, no recursion: a value inlined twice duplicates everything
  // inlined into it, so each diamond reads the previous one's result from memory instead of
  // recomputing 2, 4, 8, … sigmoids per element.
  const int n = 3000;
  Graph g;
  Entry e = g.add_op("relu", {g.add_input("x", {4, 16}, f32)});
  for (int i = 0; i < n; ++i) e = g.add_op("multiply", {e, g.add_op("sigmoid", {e})});
  g.add_output(e);
  Graph t = infer_types(g);
  std::vector<std::vector<int>> groups = fuse_ops(t);
  ASSERT_EQ(groups.size(), static_cast<size_t>(n));
  EXPECT_EQ(groups[0], (std::vector<int>{1, 2, 3}));
  for (int i = 1; i < n; ++i)
    EXPECT_EQ(groups[static_cast<size_t>(i)], (std::vector<int>{2 * i + 2, 2 * i + 3}));
}

TEST(FuseCost, BroadcastReadOfCostlyValueIsNotRecomputed) {
  // s = sigmoid(y) has 8 elements, x·s 512: recomputing the sigmoid per element costs more
  // than reading s. A negation (one float op) is recomputed.
  Graph g;
  Entry x = g.add_input("x", {64, 8}, f32);
  Entry y = g.add_input("y", {8}, f32);
  g.add_output(g.add_op("multiply", {x, g.add_op("sigmoid", {y})}));
  g.add_output(g.add_op("multiply", {x, g.add_op("negative", {y})}));
  EXPECT_EQ(fused(g),
            "{sigmoid %2}\n"
            "{multiply %3}\n"
            "{negative %4, multiply %5}\n");
}

TEST(FuseCost, ReductionIsNotInlinedIntoItsConsumer) {
  // A hand-written softmax: exp feeds the sum and the divide; the sum is never inlined into
  // the divide (it would be recomputed per element) and nothing joins after it.
  Graph g;
  Entry x = g.add_input("x", {4, 32}, f32);
  Entry e = g.add_op("exp", {x});
  Entry s = g.add_op("sum", {e}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}});
  g.add_output(g.add_op("divide", {e, s}));
  EXPECT_EQ(fused(g),
            "{exp %1}\n"
            "{sum %2}\n"
            "{divide %3}\n");
}

TEST(FuseDiamond, EpilogueShapes) {
  EXPECT_TRUE(is_epilogue_shape({8, 48}, {8, 48}));
  EXPECT_TRUE(is_epilogue_shape({8, 48}, {1, 8, 48}));
  EXPECT_TRUE(is_epilogue_shape({8, 48}, {8, 1, 48}));
  EXPECT_TRUE(is_epilogue_shape({8, 48}, {1, 8, 1, 48}));
  EXPECT_TRUE(is_epilogue_shape({1, 48}, {1, 1, 48}));
  EXPECT_TRUE(is_epilogue_shape({1, 4, 8, 8, 16}, {1, 4, 8, 8, 16}));
  EXPECT_FALSE(is_epilogue_shape({8, 48}, {48, 8}));
  EXPECT_FALSE(is_epilogue_shape({8, 48}, {8, 48, 1}));  // N must stay the last axis
  EXPECT_FALSE(is_epilogue_shape({8, 48}, {2, 4, 48}));  // a split M is a real reshape
  EXPECT_FALSE(is_epilogue_shape({1, 4, 8, 8, 16}, {1, 1, 4, 8, 8, 16}));  // 2-D masters only
}

// ViT's attention projections: dense → reshape [M, 1, N] → bias (the QKV projection, whose
// sum feeds three slices), and dense → bias → reshape [M, 1, N] → transpose [1, M, N] →
// residual add (the output projection).
Graph attention_projections(std::mt19937& rng) {
  const int64_t M = 12, K = 32, N = 48;
  Graph g;
  Entry x = g.add_input("x", {M, K}, f32);
  Entry d = g.add_op("dense", {x, g.add_constant("wqkv", random_array({N, K}, rng))});
  Entry r = g.add_op("reshape", {d}, {{"newshape", std::vector<int64_t>{M, 1, N}}});
  Entry qkv = g.add_op("add", {r, g.add_constant("bqkv", random_array({N}, rng))});
  g.add_output(qkv);
  Entry o = g.add_op("dense", {x, g.add_constant("wo", random_array({N, K}, rng))});
  Entry ob = g.add_op("add", {o, g.add_constant("bo", random_array({N}, rng))});
  Entry t = g.add_op("transpose",
                     {g.add_op("reshape", {ob}, {{"newshape", std::vector<int64_t>{M, 1, N}}})},
                     {{"axes", std::vector<int64_t>{1, 0, 2}}});
  g.add_output(g.add_op("add", {t, g.add_input("residual", {1, M, N}, f32)}));
  return g;
}

TEST(FuseDiamond, EpilogueThroughUnitAxes) {
  std::mt19937 rng(6);
  EXPECT_EQ(fused(attention_projections(rng)),
            "{dense %2, reshape %3, add %5}\n"
            "{dense %7, add %9, reshape %10, transpose %11, add %13}\n");
}

/// What comparing the fused build with the unfused one found.
struct Comparison {
  double max_err = 0;  ///< max over outputs of |a - b| / (1 + |a|), a from opt_level 0
  int kernels0 = 0, kernels = 0;
};

// Builds `g` at opt_level 0 and 2 and runs both on the same seeded random inputs. The fused
// executor runs first on NaN inputs, so every buffer it has holds NaN (poisoned) when it runs
// on the real ones: an element its kernels fail to write shows as a non-finite output.
Comparison compare_poisoned(const Graph& graph, uint32_t seed) {
  Graph g = infer_types(graph);
  CompiledModule m0 = build_module(g, Target::host(), BuildOptions{0, true});
  CompiledModule m = build_module(g, Target::host(), BuildOptions{2, true});
  auto e0 = runtime::GraphExecutor::create(m0.graph_json, m0.lib, m0.params);
  auto e = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  for (int i : g.input_nodes()) {
    NDArray nan = NDArray::empty(g.node(i).outputs[0].shape, f32);
    for (int64_t k = 0; k < nan.numel(); ++k) nan.data_as<float>()[k] = std::nanf("");
    e.set_input(g.node(i).name, nan);
  }
  e.run();
  std::mt19937 rng(seed);
  for (int i : g.input_nodes()) {
    NDArray v = random_array(g.node(i).outputs[0].shape, rng);
    e0.set_input(g.node(i).name, v);
    e.set_input(g.node(i).name, v);
  }
  e0.run();
  e.run();
  Comparison r{0, m0.num_kernels, m.num_kernels};
  EXPECT_EQ(e0.num_outputs(), e.num_outputs());
  for (int o = 0; o < std::min(e0.num_outputs(), e.num_outputs()); ++o) {
    NDArray a = e0.get_output(o), b = e.get_output(o);
    EXPECT_EQ(a.shape(), b.shape()) << "output " << o;
    if (a.shape() != b.shape()) return {1e9, r.kernels0, r.kernels};
    for (int64_t k = 0; k < a.numel(); ++k) {
      double x = a.data_as<float>()[k], y = b.data_as<float>()[k];
      if (!std::isfinite(y)) return {1e9, r.kernels0, r.kernels};  // unwritten (poisoned)
      r.max_err = std::max(r.max_err, std::abs(x - y) / (1.0 + std::abs(x)));
    }
  }
  return r;
}

void expect_matches_unfused(const Graph& g, uint32_t seed, int kernels, const std::string& what) {
  Comparison c = compare_poisoned(g, seed);
  EXPECT_EQ(c.kernels, kernels) << what;
  EXPECT_LT(c.max_err, 1e-5) << what;
}

TEST(FuseDiamondBuild, SiluMatchesUnfused) {
  std::mt19937 rng(11);
  // {NCHW → NCHW16c or 8c}, {conv, bias, silu}, {→ NCHW}.
  expect_matches_unfused(conv_silu(rng), 12, 3, "conv + silu");
}

TEST(FuseDiamondBuild, GeluMatchesUnfused) {
  std::mt19937 rng(13);
  expect_matches_unfused(dense_gelu(rng, false), 14, 1, "dense + gelu (erf)");
  expect_matches_unfused(dense_gelu(rng, true), 15, 1, "dense + gelu (tanh)");
}

TEST(FuseDiamondBuild, EpilogueThroughUnitAxesMatchesUnfused) {
  std::mt19937 rng(21);
  expect_matches_unfused(attention_projections(rng), 22, 2, "attention projections");
}

// The dense template schedules an epilogue through reshapes: its accumulator is a register
// tile, not the whole [M, N] product (a flat-index reshape inlined into the epilogue once made
// bound inference compute the whole product per tile).
TEST(FuseDiamondBuild, DenseEpilogueKeepsTheTemplatesTiles) {
  const int64_t M = 64, K = 32, N = 128;
  std::mt19937 rng(23);
  Graph g;
  Entry x = g.add_input("x", {M, K}, f32);
  Entry d = g.add_op("dense", {x, g.add_constant("w", random_array({N, K}, rng))});
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{1, M, N}, std::vector<int64_t>{M, 1, N}}) {
    Entry r = g.add_op("reshape", {d}, {{"newshape", shape}});
    Entry b = g.add_op("add",
                       {r, g.add_constant("b" + std::to_string(shape[0]), random_array({N}, rng))});
    g.add_output(g.add_op("multiply", {b, g.add_op("sigmoid", {b})}));
    d = g.add_op("dense",
                 {x, g.add_constant("w" + std::to_string(shape[0]), random_array({N, K}, rng))});
  }
  g.add_output(d);
  CompiledModule m = build_module(infer_types(g), Target::host(), BuildOptions{2, true, true});
  int epilogues = 0;
  for (const KernelInfo& k : m.kernels) {
    if (k.group.find("dense_packed") == std::string::npos) continue;
    epilogues += k.group.find("sigmoid") != std::string::npos;
    size_t at = k.tir.find("allocate dense");
    ASSERT_NE(at, std::string::npos) << k.tir;
    size_t star = k.tir.find("* ", at);
    int64_t elems = std::stoll(k.tir.substr(star + 2));
    EXPECT_LT(elems, M * N / 4) << k.group << "\n" << k.tir;
    EXPECT_NE(k.tir.find("parallel for"), std::string::npos) << k.tir;
  }
  EXPECT_EQ(epilogues, 2);
  expect_matches_unfused(g, 24, 3, "dense epilogues through reshapes");
}

TEST(FuseDiamondBuild, SqueezeExcitationMatchesUnfused) {
  std::mt19937 rng(17);
  Comparison c = compare_poisoned(se_block(rng), 18);
  EXPECT_LT(c.kernels, c.kernels0);
  EXPECT_LT(c.max_err, 1e-5);
}

TEST(FuseDiamondBuild, ResidualDiamondMatchesUnfused) {
  std::mt19937 rng(19);
  // {→ NCHWc}, {conv, relu}, {conv, add, relu}, {→ NCHW}.
  expect_matches_unfused(residual_diamond(rng), 20, 4, "residual diamond");
}

}  // namespace
}  // namespace kiln::graph
