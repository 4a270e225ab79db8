// ONNX control flow and sequences, imported by unrolling sub-graphs at import time: models built
// in memory (If, Scan at opsets 8 and 9, Loop with a constant trip count and with a condition
// that turns false, a sequence round trip), compiled and run on seeded random inputs, compared
// with references computed here element by element; and the refusals: a trip count known only
// at run time, If branches of different types under a run-time condition, a sequence fed to a
// tensor operator, sequence-typed graph inputs and SequenceProto test data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "common/error.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"
#include "onnx_test_util.h"

namespace kiln::frontend {
namespace {

using test_util::graph;
using test_util::named;
using test_util::node;
using test_util::with_body;

using ::kiln::testing::error_of;
using Ints = std::vector<int64_t>;
using Vec = std::vector<float>;
namespace fs = std::filesystem;

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
runtime::NDArray ints(const Ints& v) {
  runtime::NDArray a = runtime::NDArray::empty({static_cast<int64_t>(v.size())}, DataType::Int(64));
  std::copy(v.begin(), v.end(), a.data_as<int64_t>());
  return a;
}
runtime::NDArray boolean(bool v) {
  runtime::NDArray a = runtime::NDArray::empty({}, DataType::Bool());
  a.data_as<uint8_t>()[0] = v ? 1 : 0;
  return a;
}

Vec random_vec(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  Vec v(n);
  for (float& x : v) x = d(gen);
  return v;
}

OnnxValueInfo info(const std::string& name, const Ints& shape, DataType t = DataType::Float(32)) {
  OnnxValueInfo v{name, t, true, {}, ""};
  for (int64_t d : shape) v.shape.push_back(OnnxDim{d, ""});
  return v;
}

OnnxModel model(int64_t opset, std::vector<OnnxValueInfo> ins, std::vector<OnnxNode> nodes,
                std::vector<std::string> outs) {
  OnnxModel m;
  m.path = "control.onnx";
  m.ir_version = 8;
  m.opsets[""] = opset;
  m.inputs = std::move(ins);
  m.nodes = std::move(nodes);
  for (const std::string& s : outs) m.outputs.push_back(named(s));
  return m;
}

using test_util::run;

void expect_close(const runtime::NDArray& got, const Vec& want, const Ints& shape,
                  const std::string& what) {
  test_util::expect_close_to(got, want, shape, 1e-5f, 1e-5f, what);
}

// If with a run-time condition: both branches (one with its own initializer, one reading the
// outer x) are imported and selected per run.
TEST(OnnxControl, IfWithRuntimeConditionSelectsEitherBranch) {
  Vec k = random_vec(6, 1);
  auto then_g =
      graph("then", {}, {node("Add", {"x", "k"}, {"t_out"})}, {"t_out"}, {{"k", array({2, 3}, k)}});
  auto else_g = graph("else", {}, {node("Mul", {"x", "x"}, {"e_out"})}, {"e_out"});
  OnnxNode n = with_body(with_body(node("If", {"cond"}, {"y"}), "then_branch", then_g),
                         "else_branch", else_g);
  OnnxModel m = model(13, {info("cond", {}, DataType::Bool()), info("x", {2, 3})}, {n}, {"y"});
  for (bool c : {true, false}) {
    Vec x = random_vec(6, c ? 2 : 3);
    std::vector<runtime::NDArray> out = run(m, {{"cond", boolean(c)}, {"x", array({2, 3}, x)}});
    ASSERT_EQ(out.size(), 1u);
    Vec want(6);
    for (size_t i = 0; i < 6; ++i) want[i] = c ? x[i] + k[i] : x[i] * x[i];
    expect_close(out[0], want, {2, 3}, c ? "then" : "else");
  }
}

// A constant condition imports the taken branch only, so the branches may differ in shape; a
// run-time one with such branches is refused with the reason.
TEST(OnnxControl, IfBranchesOfDifferentShapes) {
  auto then_g = graph("then", {}, {node("Add", {"x", "x"}, {"t_out"})}, {"t_out"});
  auto else_g = graph("else", {}, {node("ReduceSum", {"x"}, {"e_out"}, {{"keepdims", int64_t{0}}})},
                      {"e_out"});
  OnnxNode n = with_body(with_body(node("If", {"cond"}, {"y"}), "then_branch", then_g),
                         "else_branch", else_g);
  for (bool c : {true, false}) {
    OnnxModel m = model(11, {info("x", {2, 3})}, {n}, {"y"});
    m.initializers["cond"] = boolean(c);
    Vec x = random_vec(6, 4);
    std::vector<runtime::NDArray> out = run(m, {{"x", array({2, 3}, x)}});
    if (c) {
      Vec want(6);
      for (size_t i = 0; i < 6; ++i) want[i] = 2 * x[i];
      expect_close(out[0], want, {2, 3}, "then");
    } else {
      float s = 0;
      for (float v : x) s += v;
      expect_close(out[0], {s}, {}, "else");
    }
  }
  OnnxModel m = model(11, {info("cond", {}, DataType::Bool()), info("x", {2, 3})}, {n}, {"y"});
  std::string e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("node 'If_y' (If)"), std::string::npos) << e;
  EXPECT_NE(e.find("different types (then float32[2, 3], else float32[])"), std::string::npos) << e;
}

// Scan (opset 9): s' = s + x_t, y_t = s' * x_t; scanned in reverse, y stacked along axis 1.
TEST(OnnxControl, Scan9Unrolled) {
  const int64_t T = 4, D = 3;
  auto body =
      graph("body", {"s_in", "x_t"},
            {node("Add", {"s_in", "x_t"}, {"s_out"}), node("Mul", {"s_out", "x_t"}, {"y_t"})},
            {"s_out", "y_t"});
  OnnxNode n = with_body(node("Scan", {"s0", "x"}, {"s", "y"},
                              {{"num_scan_inputs", int64_t{1}},
                               {"scan_input_directions", Ints{1}},
                               {"scan_output_axes", Ints{-1}}}),
                         "body", body);
  OnnxModel m = model(11, {info("s0", {D}), info("x", {T, D})}, {n}, {"s", "y"});
  Vec s0 = random_vec(D, 5), x = random_vec(T * D, 6);
  std::vector<runtime::NDArray> out = run(m, {{"s0", array({D}, s0)}, {"x", array({T, D}, x)}});
  ASSERT_EQ(out.size(), 2u);
  Vec s = s0, y(T * D);
  for (int64_t t = 0; t < T; ++t) {
    int64_t src = T - 1 - t;  // reversed input
    for (int64_t d = 0; d < D; ++d) {
      s[d] += x[src * D + d];
      y[d * T + t] = s[d] * x[src * D + d];  // y[d, t]
    }
  }
  expect_close(out[0], s, {D}, "final state");
  expect_close(out[1], y, {D, T}, "scan output");
}

// Scan (opset 8): a batch axis first; each batch row scanned on its own.
TEST(OnnxControl, Scan8WithBatchAxis) {
  const int64_t B = 2, T = 3, D = 2;
  auto body = graph("body", {"s_in", "x_t"},
                    {node("Add", {"s_in", "x_t"}, {"s_out"}), node("Identity", {"s_out"}, {"y_t"})},
                    {"s_out", "y_t"});
  OnnxNode n = with_body(
      node("Scan", {"", "s0", "x"}, {"s", "y"}, {{"num_scan_inputs", int64_t{1}}}), "body", body);
  OnnxModel m = model(8, {info("s0", {B, D}), info("x", {B, T, D})}, {n}, {"s", "y"});
  Vec s0 = random_vec(B * D, 7), x = random_vec(B * T * D, 8);
  std::vector<runtime::NDArray> out =
      run(m, {{"s0", array({B, D}, s0)}, {"x", array({B, T, D}, x)}});
  Vec s = s0, y(B * T * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d) {
        s[b * D + d] += x[(b * T + t) * D + d];
        y[(b * T + t) * D + d] = s[b * D + d];
      }
  expect_close(out[0], s, {B, D}, "final state");
  expect_close(out[1], y, {B, T, D}, "scan output");
}

// Loop with a constant trip count: v' = v * a + x + i (x from the outer graph, i the iteration
// number), each v' also a scan output.
TEST(OnnxControl, LoopWithConstantTripCountUnrolled) {
  const int64_t N = 5, D = 3;
  auto body = graph(
      "body", {"i", "c_in", "v_in"},
      {node("Identity", {"c_in"}, {"c_out"}), node("Cast", {"i"}, {"fi"}, {{"to", int64_t{1}}}),
       node("Mul", {"v_in", "a"}, {"va"}), node("Add", {"va", "x"}, {"vx"}),
       node("Add", {"vx", "fi"}, {"v_out"}), node("Identity", {"v_out"}, {"scan"})},
      {"c_out", "v_out", "scan"}, {{"a", array({}, {0.5f})}});
  OnnxNode n = with_body(node("Loop", {"M", "", "v0"}, {"v", "vs"}), "body", body);
  OnnxModel m = model(13, {info("v0", {D}), info("x", {D})}, {n}, {"v", "vs"});
  m.initializers["M"] = scalar_i64(N);
  Vec v0 = random_vec(D, 9), x = random_vec(D, 10);
  std::vector<runtime::NDArray> out = run(m, {{"v0", array({D}, v0)}, {"x", array({D}, x)}});
  ASSERT_EQ(out.size(), 2u);
  Vec v = v0, vs;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t d = 0; d < D; ++d) {
      v[d] = v[d] * 0.5f + x[d] + static_cast<float>(i);
      vs.push_back(v[d]);
    }
  // vs is in iteration order: vs[i*D + d]
  expect_close(out[0], v, {D}, "final value");
  expect_close(out[1], vs, {N, D}, "scan output");
}

// Loop whose condition (i < 2, folded at import time) ends it before the trip count.
TEST(OnnxControl, LoopEndsWhenConstantConditionTurnsFalse) {
  const int64_t D = 4;
  auto body = graph("body", {"i", "c_in", "v_in"},
                    {node("Less", {"i", "two"}, {"c_out"}), node("Add", {"v_in", "x"}, {"v_out"})},
                    {"c_out", "v_out"}, {{"two", scalar_i64(2)}});
  OnnxNode n = with_body(node("Loop", {"M", "c0", "v0"}, {"v"}), "body", body);
  OnnxModel m = model(13, {info("v0", {D}), info("x", {D})}, {n}, {"v"});
  m.initializers["M"] = scalar_i64(10);
  m.initializers["c0"] = boolean(true);
  Vec v0 = random_vec(D, 11), x = random_vec(D, 12);
  std::vector<runtime::NDArray> out = run(m, {{"v0", array({D}, v0)}, {"x", array({D}, x)}});
  Vec want(D);
  for (int64_t d = 0; d < D; ++d) want[d] = v0[d] + 3 * x[d];  // iterations 0, 1, 2
  expect_close(out[0], want, {D}, "final value");
}

TEST(OnnxControl, LoopWithRuntimeTripCountIsRefused) {
  auto body =
      graph("body", {"i", "c_in", "v_in"},
            {node("Identity", {"c_in"}, {"c_out"}), node("Add", {"v_in", "v_in"}, {"v_out"})},
            {"c_out", "v_out"});
  OnnxNode n = with_body(node("Loop", {"M", "", "v0"}, {"v"}), "body", body);
  OnnxModel m = model(13, {info("M", {}, DataType::Int(64)), info("v0", {2})}, {n}, {"v"});
  std::string e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("node 'Loop_v' (Loop): the trip count ('M') depends on a run-time input"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("must be a constant"), std::string::npos) << e;
  // A condition that depends on the data is refused the same way.
  auto body2 = graph("body", {"i", "c_in", "v_in"},
                     {node("Less", {"v_in", "v_in"}, {"c_vec"}),
                      node("ReduceMax", {"c_vec"}, {"c_out"}, {{"keepdims", int64_t{0}}}),
                      node("Add", {"v_in", "v_in"}, {"v_out"})},
                     {"c_out", "v_out"});
  OnnxNode n2 = with_body(node("Loop", {"", "c0", "v0"}, {"v"}), "body", body2);
  OnnxModel m2 = model(13, {info("c0", {}, DataType::Bool()), info("v0", {2})}, {n2}, {"v"});
  e = error_of([&] { import_onnx(m2); });
  EXPECT_NE(e.find("the condition ('c0') depends on a run-time input"), std::string::npos) << e;
}

// Sequences: split, insert, erase, at (negative position), length, concatenation with and
// without a new axis.
TEST(OnnxControl, SequenceRoundTrip) {
  const int64_t R = 2;
  OnnxModel m = model(
      13, {info("x", {R, 6}), info("y", {R, 3})},
      {node("SplitToSequence", {"x", "split"}, {"s1"}, {{"axis", int64_t{1}}}),  // [2,2] [2,4]
       node("SequenceInsert", {"s1", "y", "one"}, {"s2"}),                       // x0 y x1
       node("SequenceErase", {"s2", "minus_one"}, {"s3"}),                       // x0 y
       node("SequenceInsert", {"s3", "y"}, {"s4"}),                              // x0 y y
       node("ConcatFromSequence", {"s4"}, {"cat"}, {{"axis", int64_t{-1}}}),     // [2, 8]
       node("SequenceAt", {"s4", "minus_one"}, {"last"}),                        // y
       node("SequenceLength", {"s4"}, {"len"}),
       node("SplitToSequence", {"y"}, {"rows"}, {{"keepdims", int64_t{0}}}),  // y[0], y[1]
       node("ConcatFromSequence", {"rows"}, {"stacked"},
            {{"axis", int64_t{1}}, {"new_axis", int64_t{1}}})},  // [3, 2] = yᵀ
      {"cat", "last", "len", "stacked"});
  m.initializers["split"] = ints({2, 4});
  m.initializers["one"] = scalar_i64(1);
  m.initializers["minus_one"] = scalar_i64(-1);
  Vec x = random_vec(R * 6, 13), y = random_vec(R * 3, 14);
  std::vector<runtime::NDArray> out = run(m, {{"x", array({R, 6}, x)}, {"y", array({R, 3}, y)}});
  ASSERT_EQ(out.size(), 4u);
  Vec cat;
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t k = 0; k < 2; ++k) cat.push_back(x[r * 6 + k]);
    for (int rep = 0; rep < 2; ++rep)
      for (int64_t k = 0; k < 3; ++k) cat.push_back(y[r * 3 + k]);
  }
  expect_close(out[0], cat, {R, 8}, "cat");
  expect_close(out[1], y, {R, 3}, "last");
  ASSERT_EQ(out[2].dtype(), DataType::Int(64));
  EXPECT_EQ(out[2].data_as<int64_t>()[0], 3);
  Vec yt;
  for (int64_t k = 0; k < 3; ++k)
    for (int64_t r = 0; r < R; ++r) yt.push_back(y[r * 3 + k]);
  expect_close(out[3], yt, {3, R}, "stacked");
}

TEST(OnnxControl, SequenceErrors) {
  // A sequence given to a tensor operator.
  OnnxModel m =
      model(13, {info("x", {2})},
            {node("SequenceConstruct", {"x", "x"}, {"s"}), node("Relu", {"s"}, {"y"})}, {"y"});
  std::string e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("node 'Relu_y' (Relu): input 0 ('s') is a sequence, which this operator does "
                   "not take"),
            std::string::npos)
      << e;
  // A position out of range.
  OnnxModel m2 = model(
      13, {info("x", {2})},
      {node("SequenceConstruct", {"x", "x"}, {"s"}), node("SequenceAt", {"s", "p"}, {"y"})}, {"y"});
  m2.initializers["p"] = scalar_i64(2);
  e = error_of([&] { import_onnx(m2); });
  EXPECT_NE(e.find("position 2 is out of range for a sequence of 2 tensors"), std::string::npos)
      << e;
  // A sequence as a graph output.
  OnnxModel m3 = model(13, {info("x", {2})}, {node("SequenceConstruct", {"x"}, {"s"})}, {"s"});
  e = error_of([&] { import_onnx(m3); });
  EXPECT_NE(e.find("graph output 's' is a sequence value, which Kiln does not support yet"),
            std::string::npos)
      << e;
}

// Test data holding a SequenceProto (not a TensorProto) is recognised, not misread as a tensor
// with a huge shape.
TEST(OnnxControl, SequenceTestDataIsRefused) {
  fs::path dir = fs::temp_directory_path() / ("kiln_control_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // SequenceProto{name: "seq", elem_type: TENSOR, tensor_values: [float32[2] raw]}
  std::string one{"\x0a\x03seq\x10\x01\x1a\x0e\x08\x02\x10\x01\x4a\x08", 15};
  one += std::string(8, '\0');
  // An empty sequence: SequenceProto{name: "empty_seq", elem_type: TENSOR}
  std::string none{
      "\x0a\x09"
      "empty_seq\x10\x01",
      13};
  for (const auto& [file, bytes, name] :
       {std::tuple{"one.pb", one, "seq"}, std::tuple{"none.pb", none, "empty_seq"}}) {
    fs::path p = dir / file;
    std::ofstream(p, std::ios::binary) << bytes;
    std::string e = error_of([&] { load_onnx_tensor(p.string()); });
    EXPECT_NE(e.find(std::string("(value '") + name +
                     "') is a sequence (or optional) value, which Kiln does not support yet"),
              std::string::npos)
        << e;
  }
  fs::remove_all(dir);
}

// A model whose graph input or output is a sequence (or an optional sequence) is read (the
// reader notes the kind), and refused when it is imported without the sequence's shapes.
TEST(OnnxControl, SequenceGraphInputIsRefused) {
  fs::path node = "/usr/share/libonnx-testdata/data/node";
  if (!fs::exists(node)) GTEST_SKIP() << "libonnx-testdata is not installed";
  OnnxModel m = load_onnx_model((node / "test_sequence_insert_at_back/model.onnx").string());
  ASSERT_EQ(m.inputs.size(), 2u);
  EXPECT_EQ(m.inputs[0].kind, "sequence");
  EXPECT_EQ(m.inputs[1].kind, "");
  std::string e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("graph input 'sequence' is a sequence value, which Kiln does not support yet"),
            std::string::npos)
      << e;
  // An optional sequence input is read as optional (held value described) and, like a plain
  // sequence input, needs its element shapes.
  OnnxModel opt = load_onnx_model((node / "test_identity_opt/model.onnx").string());
  ASSERT_EQ(opt.inputs.size(), 1u);
  EXPECT_TRUE(opt.inputs[0].optional);
  EXPECT_EQ(opt.inputs[0].kind, "sequence");
  e = error_of([&] { import_onnx(opt); });
  EXPECT_NE(e.find("graph input 'opt_in' is a sequence value, which Kiln does not support yet "
                   "without its length and element shapes"),
            std::string::npos)
      << e;
  // Its test data (an OptionalProto) is recognised as well.
  e = error_of(
      [&] { load_onnx_tensor((node / "test_identity_opt/test_data_set_0/input_0.pb").string()); });
  EXPECT_NE(e.find("(value 'opt_in') is a sequence (or optional) value"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln::frontend
