// Tests of operator fusion (fuse_ops, src/graph/fuse.cc) and of fused compilation in
// build_module: golden groups for a residual block, long element-wise chains (capped groups),
// a costly diamond, a reduction with injective inputs and a 10,000-node chain; then
// build_module at opt_level 2 against opt_level 0 on the same graphs with seeded random inputs,
// both run through the GraphExecutor: same outputs, fewer kernels when fused.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

#include "graph/graph_test_util.h"
#include "kiln/graph/build_module.h"
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

// conv2d → batch_norm → relu, conv2d → add(residual) → relu.
Graph residual_block(std::mt19937& rng) {
  const int C = 4;
  Graph g;
  Entry x = g.add_input("x", {1, C, 8, 8}, f32);
  Attrs pad{{"padding", std::vector<int64_t>{1, 1, 1, 1}}};
  Entry c1 = g.add_op("conv2d", {x, g.add_constant("w1", random_array({C, C, 3, 3}, rng))}, pad);
  Entry bn = g.add_op("batch_norm", {c1, g.add_constant("gamma", random_array({C}, rng, 0.5, 1)),
                                     g.add_constant("beta", random_array({C}, rng)),
                                     g.add_constant("mean", random_array({C}, rng)),
                                     g.add_constant("var", random_array({C}, rng, 0.5, 1))});
  Entry r1 = g.add_op("relu", {bn});
  Entry c2 = g.add_op("conv2d", {r1, g.add_constant("w2", random_array({C, C, 3, 3}, rng))}, pad);
  Entry s = g.add_op("add", {c2, x});
  g.add_output(g.add_op("relu", {s}));
  return g;
}

Graph elemwise_chain(int n, int dim = 64) {
  static const char* ops[] = {"relu", "sigmoid", "tanh", "negative", "abs"};
  Graph g;
  Entry e = g.add_input("x", {4, dim}, f32);
  for (int i = 0; i < n; ++i) e = g.add_op(ops[i % 5], {e});
  g.add_output(e);
  return g;
}

TEST(Fuse, ResidualBlockGolden) {
  std::mt19937 rng(1);
  Graph g = residual_block(rng);
  // batch_norm is injective (not element-wise), so it does not join conv2d's epilogue; it
  // starts a group that takes the relu. The second conv2d takes add(residual) and relu.
  EXPECT_EQ(fused(g),
            "{conv2d %2}\n"
            "{batch_norm %7, relu %8}\n"
            "{conv2d %10, add %11, relu %12}\n");
}

TEST(Fuse, LongElemwiseChainIsCapped) {
  Graph t = infer_types(elemwise_chain(20));
  std::vector<std::vector<int>> groups = fuse_ops(t);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].size(), 16u);
  EXPECT_EQ(groups[1].size(), 4u);
  EXPECT_EQ(groups[0].front(), 1);
  EXPECT_EQ(groups[1].back(), 20);
  EXPECT_EQ(fuse_ops(t, 32).size(), 1u);
}

TEST(Fuse, CostlyDiamondAndGraphOutputEndTheGroup) {
  Graph g;
  Entry x = g.add_input("x", {8, 8}, f32);
  Entry a = g.add_op("exp", {x});
  Entry b = g.add_op("relu", {a});  // a has two consumers: b and c
  Entry c = g.add_op("sigmoid", {a});
  Entry d = g.add_op("add", {b, c});
  Entry e = g.add_op("tanh", {d});
  Entry f = g.add_op("abs", {e});  // e is also a graph output
  g.add_output(g.add_op("negative", {f}));
  g.add_output(e);
  // The diamond exp → {relu, sigmoid} → add: exp (a transcendental) is not computed twice per
  // element, so it stays alone; relu and sigmoid join the add. tanh, a graph output, ends its
  // group.
  EXPECT_EQ(fused(g),
            "{exp %1}\n"
            "{relu %2, sigmoid %3, add %4, tanh %5}\n"
            "{abs %6, negative %7}\n");
}

TEST(Fuse, ReductionTakesInjectiveInputs) {
  Graph g;
  Entry x = g.add_input("x", {4, 6, 8}, f32);
  Entry a = g.add_op("exp", {x});
  Entry t = g.add_op("transpose", {a}, {{"axes", std::vector<int64_t>{0, 2, 1}}});
  Entry s = g.add_op("sum", {t}, {{"axes", std::vector<int64_t>{2}}});
  Entry r = g.add_op("relu", {s});         // nothing joins after a reduction
  g.add_output(g.add_op("softmax", {r}));  // opaque: alone
  EXPECT_EQ(fused(g),
            "{exp %1, transpose %2, sum %3}\n"
            "{relu %4}\n"
            "{softmax %5}\n");
}

TEST(Fuse, OpaqueAndOutFusableRules) {
  std::mt19937 rng(2);
  Graph g;
  Entry x = g.add_input("x", {4, 8}, f32);
  Entry r = g.add_op("relu", {x});
  Entry d = g.add_op("dense", {r, g.add_constant("w", random_array({8, 8}, rng))});  // no join
  Entry t = g.add_op("transpose", {d});  // injective: not an epilogue
  Entry sm = g.add_op("softmax", {t});
  g.add_output(g.add_op("exp", {sm}));  // nothing out of opaque
  EXPECT_EQ(fused(g),
            "{relu %1}\n"
            "{dense %3}\n"
            "{transpose %4}\n"
            "{softmax %5}\n"
            "{exp %6}\n");
}

TEST(Fuse, TenThousandNodeChain) {
  const int n = 10000;
  Graph t = infer_types(elemwise_chain(n, 4));
  auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<int>> groups = fuse_ops(t);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 1.0);
  EXPECT_EQ(groups.size(), static_cast<size_t>((n + 15) / 16));
  size_t total = 0;
  for (const auto& grp : groups) total += grp.size();
  EXPECT_EQ(total, static_cast<size_t>(n));
}

// Builds `g` at opt_level 0 and 2, runs both on the same random inputs, compares all outputs.
void expect_fused_matches_unfused(const Graph& g, uint32_t seed, const std::string& what) {
  test_util::LevelComparison c = test_util::compare_with_unoptimized(g, 2, seed);
  EXPECT_LT(c.kernels, c.kernels0) << what;
  EXPECT_LT(c.max_err, 1e-5) << what;
}

TEST(FuseBuild, ResidualBlockMatchesUnfused) {
  std::mt19937 rng(3);
  Graph g = residual_block(rng);
  g = infer_types(g);
  expect_fused_matches_unfused(g, 4, "residual block");
  CompiledModule m2 = build_module(g, Target::host());
  EXPECT_EQ(m2.num_kernels, 2);  // the batch_norm folds into conv 1's weights and epilogue
}

TEST(FuseBuild, ElemwiseChainMatchesUnfused) {
  Graph g = infer_types(elemwise_chain(20));
  expect_fused_matches_unfused(g, 5, "chain of 20");
  EXPECT_EQ(build_module(g, Target::host()).num_kernels, 2);
}

TEST(FuseBuild, TwoConsumersAndReductionMatchUnfused) {
  Graph g;
  Entry x = g.add_input("x", {4, 6, 8}, f32);
  Entry y = g.add_input("y", {8}, f32);
  Entry a = g.add_op("exp", {g.add_op("negative", {x})});
  Entry b = g.add_op("add", {a, y});   // broadcast
  Entry c = g.add_op("sigmoid", {a});  // a has two consumers
  Entry t = g.add_op("transpose", {g.add_op("multiply", {b, c})},
                     {{"axes", std::vector<int64_t>{0, 2, 1}}});
  Entry s = g.add_op("sum", {t}, {{"axes", std::vector<int64_t>{2}}});
  g.add_output(g.add_op("relu", {s}));
  g.add_output(b);
  g = infer_types(g);
  expect_fused_matches_unfused(g, 6, "two consumers + reduction");
}

TEST(FuseBuild, DenseEpilogueMatchesUnfused) {
  std::mt19937 rng(7);
  Graph g;
  Entry x = g.add_input("x", {8, 32}, f32);
  Entry d = g.add_op("dense", {x, g.add_constant("w", random_array({48, 32}, rng)),
                               g.add_constant("b", random_array({48}, rng))});
  Entry s = g.add_op("add", {d, g.add_input("res", {8, 48}, f32)});
  g.add_output(g.add_op("tanh", {g.add_op("relu", {s})}));
  g = infer_types(g);
  expect_fused_matches_unfused(g, 8, "dense epilogue");
  EXPECT_EQ(build_module(g, Target::host()).num_kernels, 1);
}

}  // namespace
}  // namespace kiln::graph
