// Hostile inputs the importer turns into right answers (issue 26).
//
// Empty tensors: models whose input has a zero batch, zero channels or a zero inner
// dimension, through Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool, Gemm and
// MatMul, each imported, compiled at opt levels 0 and 3 and run on random inputs. An empty
// result comes back empty with the right shape; a product or convolution over an empty
// reduction (zero input channels, a zero inner dimension) gives its sum over nothing: the bias
// broadcast (Conv, Gemm), or zeros (MatMul), compared with that reference computed here. The
// importer replaces such values by constants (Converter::op, convert_nodes), so no kernel,
// layout or schedule template sees an empty axis; the graph it returns has no dead op left.
//
// NaN in Hardmax: the 1 goes to the first NaN of a row that has one (one_hot(argmax(x)) in
// PyTorch, and Kiln's ArgMax), else to the first maximum; checked on random rows with NaN at
// random places against that rule computed here, at opsets 11 (flattened trailing axes) and 13.
//
// Fuzzer findings (fuzz/onnx_import_fuzz.cc), each reduced to the model that reproduces it:
// Clip with both bounds after a node that cannot be typed (min_value of an unknown type: an
// internal error, now the type error of the earlier node); Slice before opset 10 without its
// 'starts' and 'ends' attributes (read past an empty list); Slice of constant shape values with
// a step of ±2^63 (signed overflow of the index); Reshape to a shape whose element count
// overflows int64 (signed overflow, now "cannot reshape").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "common/error.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"
#include "onnx_test_util.h"

namespace kiln::frontend {
namespace {

using test_util::named;
using test_util::node;
using Ints = std::vector<int64_t>;

runtime::NDArray random_array(const Ints& shape, unsigned seed) {
  runtime::NDArray a = runtime::NDArray::empty(shape, DataType::Float(32));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = dist(rng);
  return a;
}

OnnxValueInfo input(const std::string& name, const Ints& shape) {
  OnnxValueInfo v{name, DataType::Float(32), true, {}, ""};
  for (int64_t d : shape) v.shape.push_back(OnnxDim{d, ""});
  return v;
}

/// A one-node model: input "x" of `shape`, initializers `inits`, output "y".
OnnxModel one_node(const std::string& op, const Ints& shape, std::vector<std::string> ins,
                   std::map<std::string, runtime::NDArray> inits,
                   std::map<std::string, OnnxAttr> attrs = {}) {
  OnnxModel m;
  m.path = "empty.onnx";
  m.ir_version = 8;
  m.opsets[""] = 17;
  m.inputs.push_back(input("x", shape));
  m.nodes.push_back(node(op, std::move(ins), {"y"}, std::move(attrs)));
  m.initializers = std::move(inits);
  m.outputs.push_back(named("y"));
  return m;
}

/// Imports, compiles at `opt_level`, runs on a random x and returns output "y".
runtime::NDArray run_at(const OnnxModel& m, int opt_level, const Ints& x_shape) {
  graph::Graph g = import_onnx(m);
  for (int k = 0; k < g.num_nodes(); ++k)
    EXPECT_FALSE(g.node(k).is_op() && g.node(k).op == "conv2d")
        << "a conv2d over an empty tensor is left in the imported graph";
  EXPECT_EQ(g.output_names(), std::vector<std::string>{"y"});
  graph::BuildOptions opt;
  opt.opt_level = opt_level;
  graph::CompiledModule cm = graph::build_module(g, Target::host(), opt);
  runtime::GraphExecutor ex = runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m");
  EXPECT_EQ(ex.output_names(), std::vector<std::string>{"y"});
  ex.set_input("x", random_array(x_shape, 7));
  ex.run();
  return ex.get_output(0);
}

struct EmptyCase {
  const char* name;
  std::string op;
  Ints x_shape;
  std::vector<std::string> ins;
  std::map<std::string, Ints> inits;  // random initializers by shape
  std::map<std::string, OnnxAttr> attrs;
  Ints y_shape;
};

std::vector<EmptyCase> empty_result_cases() {
  return {
      {"conv_zero_batch",
       "Conv",
       {0, 3, 5, 5},
       {"x", "w", "b"},
       {{"w", {4, 3, 3, 3}}, {"b", {4}}},
       {{"pads", Ints{1, 1, 1, 1}}},
       {0, 4, 5, 5}},
      {"conv_zero_out_channels",
       "Conv",
       {1, 3, 5, 5},
       {"x", "w"},
       {{"w", {0, 3, 3, 3}}},
       {},
       {1, 0, 3, 3}},
      {"conv_zero_batch_wide",
       "Conv",
       {0, 16, 8, 8},
       {"x", "w"},
       {{"w", {32, 16, 3, 3}}},
       {},
       {0, 32, 6, 6}},
      {"conv1d_zero_batch", "Conv", {0, 2, 9}, {"x", "w"}, {{"w", {3, 2, 3}}}, {}, {0, 3, 7}},
      {"conv_transpose_zero_batch",
       "ConvTranspose",
       {0, 3, 4, 4},
       {"x", "w"},
       {{"w", {3, 2, 3, 3}}},
       {},
       {0, 2, 6, 6}},
      {"maxpool_zero_batch",
       "MaxPool",
       {0, 2, 4, 4},
       {"x"},
       {},
       {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}},
       {0, 2, 2, 2}},
      {"avgpool_zero_channels",
       "AveragePool",
       {1, 0, 4, 4},
       {"x"},
       {},
       {{"kernel_shape", Ints{2, 2}}},
       {1, 0, 3, 3}},
      {"global_avgpool_zero_batch", "GlobalAveragePool", {0, 3, 4, 4}, {"x"}, {}, {}, {0, 3, 1, 1}},
      {"gemm_zero_rows",
       "Gemm",
       {0, 8},
       {"x", "w", "b"},
       {{"w", {4, 8}}, {"b", {4}}},
       {{"transB", int64_t{1}}},
       {0, 4}},
      {"matmul_zero_rows", "MatMul", {0, 8}, {"x", "w"}, {{"w", {8, 4}}}, {}, {0, 4}},
      {"matmul_zero_columns", "MatMul", {3, 8}, {"x", "w"}, {{"w", {8, 0}}}, {}, {3, 0}},
  };
}

OnnxModel model_of(const EmptyCase& c, std::map<std::string, runtime::NDArray>* inits_out) {
  std::map<std::string, runtime::NDArray> inits;
  unsigned seed = 1;
  for (const auto& [name, shape] : c.inits) inits[name] = random_array(shape, seed++);
  if (inits_out) *inits_out = inits;
  return one_node(c.op, c.x_shape, c.ins, inits, c.attrs);
}

TEST(OnnxEmpty, EmptyResultsCompileAndRunAtOptLevels0And3) {
  for (const EmptyCase& c : empty_result_cases()) {
    for (int level : {0, 3}) {
      SCOPED_TRACE(std::string(c.name) + " at opt level " + std::to_string(level));
      runtime::NDArray y = run_at(model_of(c, nullptr), level, c.x_shape);
      EXPECT_EQ(y.shape(), c.y_shape);
      EXPECT_EQ(y.numel(), 0);
      EXPECT_EQ(y.dtype(), DataType::Float(32));
    }
  }
}

TEST(OnnxEmpty, ConvOverZeroInputChannelsIsItsBias) {
  // y[n, o, h, w] = b[o]: the sum over no channels is 0.
  EmptyCase c{"conv_zero_in_channels",
              "Conv",
              {2, 0, 5, 5},
              {"x", "w", "b"},
              {{"w", {4, 0, 3, 3}}, {"b", {4}}},
              {{"pads", Ints{1, 1, 1, 1}}},
              {2, 4, 5, 5}};
  std::map<std::string, runtime::NDArray> inits;
  OnnxModel m = model_of(c, &inits);
  std::vector<float> want;
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 4; ++o)
      for (int k = 0; k < 25; ++k) want.push_back(inits["b"].data_as<float>()[o]);
  for (int level : {0, 3}) {
    SCOPED_TRACE("opt level " + std::to_string(level));
    test_util::expect_close_to(run_at(m, level, c.x_shape), want, c.y_shape, 0, 0);
  }
}

TEST(OnnxEmpty, GemmAndMatMulOverAZeroInnerDimension) {
  // Gemm: y = x · wᵀ + b with K = 0 is b on every row; MatMul: zeros.
  EmptyCase gemm{"gemm_k0",
                 "Gemm",
                 {3, 0},
                 {"x", "w", "b"},
                 {{"w", {4, 0}}, {"b", {4}}},
                 {{"transB", int64_t{1}}},
                 {3, 4}};
  std::map<std::string, runtime::NDArray> inits;
  OnnxModel gm = model_of(gemm, &inits);
  std::vector<float> want;
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 4; ++j) want.push_back(inits["b"].data_as<float>()[j]);
  EmptyCase mm{"matmul_k0", "MatMul", {3, 0}, {"x", "w"}, {{"w", {0, 5}}}, {}, {3, 5}};
  OnnxModel mmm = model_of(mm, nullptr);
  for (int level : {0, 3}) {
    SCOPED_TRACE("opt level " + std::to_string(level));
    test_util::expect_close_to(run_at(gm, level, gemm.x_shape), want, gemm.y_shape, 0, 0, "gemm");
    test_util::expect_close_to(run_at(mmm, level, mm.x_shape), std::vector<float>(15, 0.0f),
                               mm.y_shape, 0, 0, "matmul");
  }
}

TEST(OnnxEmpty, AnEmptyValueFeedingLaterOpsStaysEmpty) {
  // Conv over a zero batch, then Relu and Add with a non-empty bias: every op of the chain is
  // empty, the imported graph holds no op at all.
  OnnxModel m = one_node("Conv", {0, 3, 4, 4}, {"x", "w"}, {{"w", random_array({2, 3, 1, 1}, 3)}});
  m.nodes[0].outputs = {"c"};
  m.nodes.push_back(node("Relu", {"c"}, {"r"}));
  m.nodes.push_back(node("Add", {"r", "bias"}, {"y"}));
  m.initializers["bias"] = random_array({2, 1, 1}, 4);
  graph::Graph g = import_onnx(m);
  for (int k = 0; k < g.num_nodes(); ++k)
    EXPECT_FALSE(g.node(k).is_op()) << "node " << k << " (" << g.node(k).op << ") is left";
  for (int level : {0, 3}) {
    runtime::NDArray y = run_at(m, level, {0, 3, 4, 4});
    EXPECT_EQ(y.shape(), (Ints{0, 2, 4, 4}));
  }
}

/// one_hot(argmax) along the last axis of rows of `len`: the first NaN, else the first max.
std::vector<float> hardmax_reference(const runtime::NDArray& x, int64_t len) {
  std::vector<float> y(static_cast<size_t>(x.numel()), 0.0f);
  const float* p = x.data_as<float>();
  for (int64_t r = 0; r < x.numel() / len; ++r) {
    int64_t best = 0;
    for (int64_t i = 0; i < len; ++i) {
      float v = p[r * len + i], b = p[r * len + best];
      if (std::isnan(b)) break;
      if (std::isnan(v) || v > b) best = i;
    }
    y[static_cast<size_t>(r * len + best)] = 1.0f;
  }
  return y;
}

TEST(OnnxNaN, HardmaxPutsTheOneAtTheFirstNaN) {
  std::mt19937 rng(26);
  for (int64_t opset : {11, 13}) {
    for (int trial = 0; trial < 4; ++trial) {
      SCOPED_TRACE("opset " + std::to_string(opset) + ", trial " + std::to_string(trial));
      // [rows, 3, 5]; opset 11 with axis 1 flattens the last two axes into rows of 15.
      Ints shape{6, 3, 5};
      runtime::NDArray x = random_array(shape, 100 + trial);
      float* p = x.data_as<float>();
      std::uniform_int_distribution<int64_t> at(0, x.numel() - 1);
      for (int k = 0; k < 10 + 5 * trial; ++k) p[at(rng)] = std::nanf("");
      p[0] = std::nanf("");                                        // a row that starts with NaN
      for (int i = 15; i < 30; ++i) p[i] = std::nanf("");          // a row of NaN only
      for (int i = 30; i < 45; ++i) p[i] = i == 40 ? 9.0f : 1.0f;  // no NaN: the max wins
      int64_t len = opset < 13 ? 15 : 5;
      OnnxModel m =
          one_node("Hardmax", shape, {"x"}, {}, {{"axis", opset < 13 ? int64_t{1} : int64_t{-1}}});
      m.opsets[""] = opset;
      graph::Graph g = import_onnx(m);
      graph::CompiledModule cm = graph::build_module(g, Target::host(), {});
      runtime::GraphExecutor ex =
          runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m");
      ex.set_input("x", x);
      ex.run();
      test_util::expect_close_to(ex.get_output(0), hardmax_reference(x, len), shape, 0, 0);
    }
  }
}

TEST(OnnxFuzzFindings, ClipAfterANodeThatCannotBeTypedReportsThatNode) {
  // Mul of [2, 3] and [3, 3] does not broadcast; Clip's bounds are constants.
  OnnxModel m = one_node("Mul", {2, 3}, {"x", "b"}, {{"b", random_array({3, 3}, 1)}});
  m.nodes[0].outputs = {"m"};
  m.nodes.push_back(node("Clip", {"m", "lo", "hi"}, {"y"}));
  runtime::NDArray lo = random_array({}, 2), hi = random_array({}, 3);
  m.initializers["lo"] = lo;
  m.initializers["hi"] = hi;
  std::string e = ::kiln::testing::error_of([&] {
    graph::Graph g = import_onnx(m);
    graph::build_module(g, Target::host(), {});
  });
  EXPECT_NE(e.find("(multiply 'm') with inputs (float32[2, 3], float32[3, 3]): multiply: cannot "
                   "broadcast shapes [2, 3] and [3, 3]"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("internal"), std::string::npos) << e;
}

TEST(OnnxFuzzFindings, SliceBeforeOpset10WithoutStartsAndEnds) {
  OnnxModel m = one_node("Slice", {4}, {"x"}, {});
  m.opsets[""] = 9;
  EXPECT_EQ(::kiln::testing::error_of([&] { import_onnx(m); }),
            "'empty.onnx', node 'Slice_y' (Slice): attributes 'starts' and 'ends' are required "
            "(Slice before opset 10)");
}

runtime::NDArray i64(const Ints& v) {
  runtime::NDArray a = runtime::NDArray::empty({static_cast<int64_t>(v.size())}, DataType::Int(64));
  for (size_t i = 0; i < v.size(); ++i) a.data_as<int64_t>()[i] = v[i];
  return a;
}

TEST(OnnxFuzzFindings, SliceOfConstantShapeValuesWithAHugeStep) {
  // data = [10, 11, 12, 13], sliced on the host: one element each, no signed overflow.
  struct Case {
    int64_t start, end, step, want;
  } cases[] = {{1, 4, INT64_MAX, 11}, {3, -10, INT64_MIN, 13}, {-1, INT64_MIN, INT64_MIN, 13}};
  for (const Case& k : cases) {
    SCOPED_TRACE("start " + std::to_string(k.start) + ", step " + std::to_string(k.step));
    OnnxModel m = one_node("Slice", {2}, {"data", "st", "en", "ax", "sp"}, {});
    m.initializers = {{"data", i64({10, 11, 12, 13})},
                      {"st", i64({k.start})},
                      {"en", i64({k.end})},
                      {"ax", i64({0})},
                      {"sp", i64({k.step})}};
    graph::Graph g = import_onnx(m);
    graph::CompiledModule cm = graph::build_module(g, Target::host(), {});
    runtime::GraphExecutor ex =
        runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m");
    ex.set_input("x", random_array({2}, 5));  // unused
    ex.run();
    runtime::NDArray y = ex.get_output(0);
    ASSERT_EQ(y.shape(), Ints{1});
    EXPECT_EQ(y.data_as<int64_t>()[0], k.want);
  }
}

TEST(OnnxFuzzFindings, ReshapeToAShapeWhoseSizeOverflows) {
  // An input without elements (reshaped at import), then one with elements (the graph's rule).
  Ints huge{8589934595, 51677046505722};
  OnnxModel m = one_node("Reshape", {0, 3}, {"x", "s"}, {{"s", i64(huge)}});
  EXPECT_EQ(::kiln::testing::error_of([&] { import_onnx(m); }),
            "'empty.onnx', node 'Reshape_y' (Reshape): cannot reshape float32[0, 3] to "
            "[8589934595, 51677046505722]");
  m = one_node("Reshape", {2, 3}, {"x", "s"}, {{"s", i64(huge)}});
  std::string e = ::kiln::testing::error_of([&] {
    graph::Graph g = import_onnx(m);
    graph::build_module(g, Target::host(), {});
  });
  EXPECT_NE(e.find("reshape"), std::string::npos) << e;
  EXPECT_EQ(e.find("internal"), std::string::npos) << e;
}

TEST(OnnxFuzzFindings, TopKWhoseKIsNotOneValue) {
  // An empty k was read with .at(0): std::out_of_range escaped as "an unexpected error".
  for (const Ints& k : {Ints{}, Ints{1, 2}}) {
    OnnxModel m = one_node("TopK", {2, 5}, {"x", "k"}, {{"k", i64(k)}});
    EXPECT_EQ(::kiln::testing::error_of([&] { import_onnx(m); }),
              "'empty.onnx', node 'TopK_y' (TopK): input 1 (k) must hold one value; it holds " +
                  std::to_string(k.size()));
  }
}

}  // namespace
}  // namespace kiln::frontend
