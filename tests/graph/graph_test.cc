// Graph IR and op registry: golden text of built graphs, type inference results, and the
// error messages for unknown ops, bad attributes and shape mismatches.

#include "kiln/graph/graph.h"

#include <gtest/gtest.h>

#include "common/golden.h"
#include "kiln/graph/op_registry.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"

namespace kiln::graph {
namespace {

const DataType f32 = DataType::Float(32);

runtime::NDArray filled(std::vector<int64_t> shape, float v) {
  runtime::NDArray a = runtime::NDArray::empty(std::move(shape), f32);
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = v;
  return a;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(GraphIR, BuildAndPrint) {
  Graph g;
  Entry x = g.add_input("data", {1, 3, 8, 8}, f32);
  Entry w = g.add_constant("w", filled({4, 3, 3, 3}, 0.5f));
  Entry c = g.add_op(
      "conv2d", {x, w},
      {{"strides", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1, 1, 1}}},
      "conv1");
  Entry r = g.add_op("relu", {c});
  Entry s = g.add_op("clip", {r}, {{"a_min", 0.0}, {"a_max", 6.0}});
  g.add_output(s);
  KILN_EXPECT_GOLDEN("graph_ir_build_and_print", g.str());
  Graph t = infer_types(g);
  t.verify("test");
  KILN_EXPECT_GOLDEN("graph_ir_build_and_print_2", t.str());
}

TEST(GraphIR, AttrValuesPrint) {
  Attrs a{{"i", int64_t{3}},
          {"f", 0.25},
          {"s", std::string("NCHW")},
          {"il", std::vector<int64_t>{1, -2}},
          {"fl", std::vector<double>{1.0, 1e-5}}};
  EXPECT_EQ(a.str(), "f=0.25, fl=[1.0, 1e-05], i=3, il=[1, -2], s=\"NCHW\"");
  EXPECT_EQ(a.get_float("i"), 3.0);
  EXPECT_NE(error_of([&] { a.get_int("s"); }).find("attribute 's' must be of kind int"),
            std::string::npos);
}

TEST(GraphIR, BuilderErrors) {
  Graph g;
  g.add_input("x", {2}, f32);
  EXPECT_NE(error_of([&] {
              g.add_constant("x", filled({2}, 1));
            }).find("constant name 'x' is already used by node %0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              g.add_op("relu", {Entry{5, 0}});
            }).find("reads %5.0, which is not an output of an earlier node"),
            std::string::npos);
}

TEST(GraphIR, TypesOfManyOps) {
  Graph g;
  Entry x = g.add_input("x", {2, 8, 6, 6}, f32);
  Entry mp = g.add_op(
      "max_pool2d", {x},
      {{"pool_size", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  Entry gp = g.add_op("global_avg_pool2d", {mp});
  Entry fl = g.add_op("flatten", {gp});
  Entry w = g.add_constant("w", filled({10, 8}, 1));
  Entry d = g.add_op("dense", {fl, w});
  Entry sm = g.add_op("softmax", {d});
  Entry tr = g.add_op("transpose", {sm});
  Entry cc = g.add_op("concat", {tr, tr}, {{"axis", int64_t{1}}});
  Entry sm2 = g.add_op("mean", {cc}, {{"axes", std::vector<int64_t>{0}}});
  Entry rs = g.add_op("reshape", {sm2}, {{"newshape", std::vector<int64_t>{2, -1}}});
  Entry mm = g.add_op("matmul", {rs, g.add_constant("m", filled({2, 3}, 1))});
  g.add_output(mm);
  Graph t = infer_types(g);
  std::string types;
  for (int i = 0; i < t.num_nodes(); ++i) types += t.node(i).outputs[0].str() + " ";
  EXPECT_EQ(types,
            "float32[2, 8, 6, 6] float32[2, 8, 3, 3] float32[2, 8, 1, 1] float32[2, 8] "
            "float32[10, 8] float32[2, 10] float32[2, 10] float32[10, 2] float32[10, 4] "
            "float32[4] float32[2, 2] float32[2, 3] float32[2, 3] ");
}

TEST(OpRegistry, HasOpsWithPatterns) {
  const OpRegistry& r = OpRegistry::global();
  using topi::OpPattern;
  std::vector<std::pair<const char*, OpPattern>> want = {
      {"add", OpPattern::kBroadcast},
      {"subtract", OpPattern::kBroadcast},
      {"multiply", OpPattern::kBroadcast},
      {"divide", OpPattern::kBroadcast},
      {"relu", OpPattern::kElemWise},
      {"sigmoid", OpPattern::kElemWise},
      {"tanh", OpPattern::kElemWise},
      {"exp", OpPattern::kElemWise},
      {"sqrt", OpPattern::kElemWise},
      {"clip", OpPattern::kElemWise},
      {"conv2d", OpPattern::kOutEWiseFusable},
      {"dense", OpPattern::kOutEWiseFusable},
      {"batch_norm", OpPattern::kInjective},
      {"max_pool2d", OpPattern::kOutEWiseFusable},
      {"avg_pool2d", OpPattern::kOutEWiseFusable},
      {"global_avg_pool2d", OpPattern::kOutEWiseFusable},
      {"softmax", OpPattern::kOpaque},
      {"reshape", OpPattern::kInjective},
      {"flatten", OpPattern::kInjective},
      {"transpose", OpPattern::kInjective},
      {"concat", OpPattern::kInjective},
      {"sum", OpPattern::kCommReduce},
      {"mean", OpPattern::kCommReduce},
      {"matmul", OpPattern::kOutEWiseFusable}};
  for (auto [name, p] : want) {
    const OpDef* d = r.find(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_EQ(d->pattern, p) << name;
  }
}

TEST(GraphErrors, UnknownOp) {
  Graph g;
  Entry x = g.add_input("x", {2}, f32);
  g.add_output(g.add_op("frobnicate", {x}, {}, "f1"));
  EXPECT_EQ(error_of([&] { infer_types(g); }),
            "infer_types: node %1 (frobnicate 'f1'): unknown op 'frobnicate'");
}

TEST(GraphErrors, MissingAndUnknownAttr) {
  Graph g;
  Entry x = g.add_input("x", {2}, f32);
  g.add_output(g.add_op("clip", {x}, {{"a_min", 0.0}}));
  EXPECT_EQ(error_of([&] { infer_types(g); }),
            "infer_types: node %1 (clip): op 'clip' requires attribute 'a_max' (float)");
  Graph h;
  Entry y = h.add_input("x", {2}, f32);
  h.add_output(h.add_op("relu", {y}, {{"alpha", 1.0}}));
  EXPECT_EQ(error_of([&] { infer_types(h); }),
            "infer_types: node %1 (relu): op 'relu' has no attribute 'alpha' (its attributes: "
            "none)");
  Graph k;
  Entry z = k.add_input("x", {2}, f32);
  k.add_output(k.add_op("transpose", {z}, {{"axes", std::string("x")}}));
  EXPECT_EQ(error_of([&] { infer_types(k); }),
            "infer_types: node %1 (transpose): op 'transpose': attribute 'axes' must be of kind "
            "int list, got string \"x\"");
}

TEST(GraphErrors, InputCount) {
  Graph g;
  Entry x = g.add_input("x", {2}, f32);
  g.add_output(g.add_op("add", {x}));
  EXPECT_EQ(error_of([&] { infer_types(g); }),
            "infer_types: node %1 (add): op 'add' takes 2 input(s), got 1");
}

TEST(GraphErrors, ShapeMismatch) {
  Graph g;
  Entry a = g.add_input("a", {2, 3}, f32);
  Entry b = g.add_input("b", {4}, f32);
  g.add_output(g.add_op("add", {a, b}, {}, "sum1"));
  std::string msg = error_of([&] { infer_types(g); });
  EXPECT_NE(msg.find("infer_types: node %2 (add 'sum1') with inputs (float32[2, 3], "
                     "float32[4]): "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos);
  EXPECT_NE(msg.find("[4]"), std::string::npos);

  Graph c;
  Entry d = c.add_input("d", {1, 3, 8, 8}, f32);
  Entry w = c.add_constant("w", filled({4, 5, 3, 3}, 1));
  c.add_output(c.add_op("conv2d", {d, w}, {}, "conv"));
  msg = error_of([&] { infer_types(c); });
  EXPECT_NE(msg.find("infer_types: node %2 (conv2d 'conv') with inputs (float32[1, 3, 8, 8], "
                     "float32[4, 5, 3, 3]): conv2d_nchw"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace kiln::graph
