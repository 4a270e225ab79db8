// Grouped convolutions through the graph compiler: the CPU strategy rewrites a grouped conv2d
// (1 < groups, not depthwise) into conv2d_grouped_nchwc running conv2d_grouped_nchwc.cpu, blocked
// tensors flow from and to the 1x1 convolutions around it without layout transforms when the
// group width is a multiple of the block, the compiled models match opt_level 0 on random
// inputs (task extraction yields the grouped task: tests/tuning/task_extraction_test.cc).
#include <gtest/gtest.h>

#include <random>

#include "graph/graph_test_util.h"
#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"

namespace kiln::graph {
namespace {

using test_util::random_array;
using Ints = std::vector<int64_t>;
const DataType f32 = DataType::Float(32);

// A ResNeXt / RegNet bottleneck: x [1, C, S, S] → 1x1 (C → W) → relu → grouped 3x3 (W → W,
// `groups`, `stride`) → relu → 1x1 (W → C) → sigmoid.
Graph bottleneck(std::mt19937& rng, int64_t C, int64_t W, int64_t groups, int64_t S,
                 int64_t stride) {
  Graph g;
  Entry x = g.add_input("x", {1, C, S, S}, f32);
  Entry a =
      g.add_op("conv2d", {x, g.add_constant("w1", random_array({W, C, 1, 1}, rng))}, {}, "conv1");
  a = g.add_op("relu", {a});
  Entry b = g.add_op(
      "conv2d", {a, g.add_constant("w2", random_array({W, W / groups, 3, 3}, rng))},
      {{"padding", Ints{1, 1, 1, 1}}, {"strides", Ints{stride, stride}}, {"groups", groups}},
      "grouped");
  b = g.add_op("relu", {b});
  Entry c =
      g.add_op("conv2d", {b, g.add_constant("w3", random_array({C, W, 1, 1}, rng))}, {}, "conv3");
  g.add_output(g.add_op("sigmoid", {c}));
  return g;
}

const Node* node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.name == name) return &n;
  return nullptr;
}

TEST(GroupedConv, StrategyOffersTheGroupedTemplate) {
  std::mt19937 rng(3);
  Graph g = infer_types(bottleneck(rng, 32, 64, 4, 8, 1));
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).name != "grouped") continue;
    std::vector<std::string> got;
    for (const Choice& c : strategy_choices(OpCall{g, i, Target::host()})) got.push_back(c.impl);
    EXPECT_EQ(got, (std::vector<std::string>{"conv2d_grouped_nchwc.cpu", "conv2d_nchw.cpu"}));
  }
}

TEST(GroupedConv, RewrittenToTheBlockedGroupedImplementation) {
  std::mt19937 rng(1);
  // Width 16: a multiple of the default block with AVX2 and AVX-512 alike.
  Graph g = bottleneck(rng, 32, 64, 4, 8, 1);
  Graph a = alter_op_layout(infer_types(g), Target::host());
  const Node* n = node_named(a, "grouped");
  ASSERT_NE(n, nullptr) << a.str();
  EXPECT_EQ(n->op, "conv2d_grouped_nchwc") << a.str();
  EXPECT_EQ(n->impl.name, "conv2d_grouped_nchwc.cpu");
  EXPECT_EQ(n->attrs.get_int("groups"), 4);
  const int64_t lanes = test_util::host_lanes();
  EXPECT_EQ(n->outputs[0].shape, (Ints{1, 64 / lanes, 8, 8, lanes}));
  // Its input comes from the blocked relu of the first 1x1 convolution, and its output feeds
  // the blocked relu of the last one: no layout transform between them.
  const Node& producer = a.node(n->inputs[0].node);
  EXPECT_EQ(producer.op, "relu") << a.str();
  EXPECT_EQ(a.node(producer.inputs[0].node).op, "conv2d_nchwc") << a.str();
  int transforms = 0;
  for (const Node& m : a.nodes()) transforms += m.op == "layout_transform";
  EXPECT_EQ(transforms, 2) << a.str();  // x in, the output back to NCHW
}

TEST(GroupedConv, CompiledModelsMatchUnoptimized) {
  struct Case {
    int64_t C, W, groups, S, stride;
  };
  for (const Case& c : {Case{32, 64, 4, 8, 1},     // width 16
                        Case{32, 32, 8, 9, 2},     // width 4
                        Case{16, 64, 8, 7, 1},     // width 8
                        Case{16, 48, 2, 8, 2},     // width 24
                        Case{32, 128, 32, 6, 1}})  // 32 groups of 4
  {
    SCOPED_TRACE("C " + std::to_string(c.C) + " W " + std::to_string(c.W) + " groups " +
                 std::to_string(c.groups) + " stride " + std::to_string(c.stride));
    std::mt19937 rng(static_cast<uint32_t>(c.W + c.groups));
    Graph g = bottleneck(rng, c.C, c.W, c.groups, c.S, c.stride);
    Graph a = alter_op_layout(infer_types(g), Target::host());
    const Node* n = node_named(a, "grouped");
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->impl.name, "conv2d_grouped_nchwc.cpu") << a.str();
    EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 7).max_err, 1e-4);
  }
}

TEST(GroupedConv, NonConstantWeightsKeepTheNCHWSchedule) {
  Graph g;
  Entry x = g.add_input("x", {1, 16, 6, 6}, f32);
  Entry w = g.add_input("w", {16, 4, 3, 3}, f32);
  g.add_output(g.add_op("conv2d", {x, w}, {{"groups", 4}}, "grouped"));
  Graph a = optimize(g, 2, Target::host());
  const Node* n = node_named(a, "grouped");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->op, "conv2d");
  EXPECT_EQ(n->impl.name, "conv2d_nchw.cpu");
}

}  // namespace
}  // namespace kiln::graph
