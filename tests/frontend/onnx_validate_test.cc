// The importer's checks of invalid models and its limits, each on a model built here: one
// converter per ONNX op (the table refuses a second registration); a value written by two nodes
// (or by a node and a graph input, or by a sub-graph node and its enclosing graph); two
// initializers of one name (protobuf bytes); node input counts against the ONNX schema (too
// many, too few, a required input omitted); Loops whose trip count is 2^40, refused quickly with
// a condition that stays true and without a condition, and unrolled when the condition ends the
// loop early; the host evaluator of shape arithmetic, and shape arithmetic folded at import;
// input dimensions without a size (negative, symbolic, neither).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <set>

#include "../../src/frontend/onnx/converter.h"
#include "common/error.h"
#include "kiln/frontend/onnx.h"
#include "onnx_test_util.h"

namespace kiln::frontend {
namespace {

using ::kiln::testing::error_of;
using test_util::graph;
using test_util::named;
using test_util::node;
using test_util::with_body;
using Ints = std::vector<int64_t>;

OnnxValueInfo info(const std::string& name, const Ints& shape, DataType t = DataType::Float(32)) {
  OnnxValueInfo v{name, t, true, {}, ""};
  for (int64_t d : shape) v.shape.push_back(OnnxDim{d, ""});
  return v;
}

OnnxModel model(int64_t opset, std::vector<OnnxValueInfo> ins, std::vector<OnnxNode> nodes,
                std::vector<std::string> outs) {
  OnnxModel m;
  m.path = "v.onnx";
  m.ir_version = 8;
  m.opsets[""] = opset;
  m.inputs = std::move(ins);
  m.nodes = std::move(nodes);
  for (const std::string& s : outs) m.outputs.push_back(named(s));
  return m;
}

OnnxNode named_node(const std::string& name, const std::string& op, std::vector<std::string> in,
                    std::vector<std::string> out) {
  OnnxNode n = node(op, std::move(in), std::move(out));
  n.name = name;
  return n;
}

runtime::NDArray scalar_i64(int64_t v) {
  runtime::NDArray a = runtime::NDArray::empty({}, DataType::Int(64));
  a.data_as<int64_t>()[0] = v;
  return a;
}

runtime::NDArray boolean(bool v) {
  runtime::NDArray a = runtime::NDArray::empty({}, DataType::Bool());
  a.data_as<uint8_t>()[0] = v ? 1 : 0;
  return a;
}

TEST(OnnxConvertTable, ASecondConverterForAnOpIsAnInternalError) {
  onnx_import::ConvertTable t;
  t.add("Relu", onnx_import::unary("relu"));
  ASSERT_NE(t.find("Relu"), nullptr);
  std::string e = error_of([&] { t.add("Relu", onnx_import::unary("relu")); });
  EXPECT_NE(e.find("internal error"), std::string::npos) << e;
  EXPECT_NE(e.find("ONNX op 'Relu' has two converters"), std::string::npos) << e;
}

TEST(OnnxConvertTable, EveryOpHasOneConverter) {
  // Building the table registers every family once; a duplicate would throw here.
  std::vector<std::string> ops = supported_onnx_ops();
  EXPECT_GT(ops.size(), 150u);
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  EXPECT_EQ(std::set<std::string>(ops.begin(), ops.end()).size(), ops.size());
  for (const char* op :
       {"Conv", "Cast", "Identity", "Reshape", "Loop", "MaxPool", "TfIdfVectorizer"})
    EXPECT_TRUE(std::binary_search(ops.begin(), ops.end(), op)) << op;
}

TEST(OnnxValidate, InputDimensionsWithoutASizeAreNamedForWhatTheyAre) {
  auto import_with = [](OnnxDim d) {
    OnnxValueInfo x = info("x", {2, 1});
    x.shape[1] = d;
    return error_of([&] { import_onnx(model(13, {x}, {node("Relu", {"x"}, {"y"})}, {"y"}), {}); });
  };
  EXPECT_EQ(import_with(OnnxDim{-3, ""}),
            "'v.onnx': input 'x' dimension 1 is negative (-3); give the input's shape");
  EXPECT_EQ(import_with(OnnxDim{-1, "batch"}),
            "'v.onnx': input 'x' dimension 1 is symbolic ('batch'); give the input's shape");
  EXPECT_EQ(import_with(OnnxDim{-1, ""}),
            "'v.onnx': input 'x' dimension 1 has neither a value nor a name; give the input's "
            "shape");
}

TEST(OnnxValidate, TwoNodesWritingOneValue) {
  OnnxModel m =
      model(13, {info("x", {2})},
            {named_node("first", "Relu", {"x"}, {"y"}), named_node("second", "Neg", {"x"}, {"y"})},
            {"y"});
  EXPECT_EQ(error_of([&] { import_onnx(m); }),
            "'v.onnx', node 'second' (Neg): output 'y' is already written by node 'first' (Relu) "
            "(every ONNX value has one producer; a model that writes a value twice is invalid)");
  // A node writing a graph input.
  OnnxModel m2 = model(13, {info("x", {2})}, {named_node("n", "Relu", {"x"}, {"x"})}, {"x"});
  std::string e = error_of([&] { import_onnx(m2); });
  EXPECT_NE(e.find("node 'n' (Relu): output 'x' is already written by graph input 'x'"),
            std::string::npos)
      << e;
  // A node of a sub-graph writing a value of the enclosing graph.
  auto then_g = graph("then", {}, {named_node("inner", "Neg", {"x"}, {"y"})}, {"y"});
  auto else_g = graph("else", {}, {named_node("other", "Relu", {"x"}, {"z"})}, {"z"});
  OnnxNode n = with_body(with_body(named_node("if", "If", {"c"}, {"out"}), "then_branch", then_g),
                         "else_branch", else_g);
  OnnxModel m3 = model(13, {info("c", {}, DataType::Bool()), info("x", {2})},
                       {named_node("relu", "Relu", {"x"}, {"y"}), n}, {"out"});
  e = error_of([&] { import_onnx(m3); });
  EXPECT_NE(e.find("'v.onnx', sub-graph 'if.then_branch', node 'inner' (Neg): output 'y' is "
                   "already written by node 'relu' (Relu)"),
            std::string::npos)
      << e;
}

TEST(OnnxValidate, DuplicateInitializerNames) {
  // ModelProto{ir_version: 8, graph{node{input:"w" output:"z" op_type:"Relu"}
  // initializer{dims:1 data_type:1 name:"w" raw_data:<1.0f>} (twice) output{name:"z"}},
  // opset_import{version: 13}}.
  auto field = [](int num, const std::string& payload) {
    std::string s;
    s.push_back(static_cast<char>((num << 3) | 2));
    s.push_back(static_cast<char>(payload.size()));
    return s + payload;
  };
  std::string one("\x00\x00\x80\x3f", 4);
  std::string tensor = std::string("\x08\x01\x10\x01", 4) + field(8, "w") + field(9, one);
  std::string node = field(1, "w") + field(2, "z") + field(4, "Relu");
  std::string g = field(1, node) + field(5, tensor) + field(5, tensor) + field(12, field(1, "z"));
  std::string bytes =
      std::string("\x08\x08", 2) + field(7, g) + field(8, std::string("\x10\x0d", 2));
  EXPECT_EQ(error_of([&] { parse_onnx_model(bytes, "m.onnx"); }),
            "'m.onnx': initializer 'w' is defined twice (initializer names must be unique)");
  // One of them is fine.
  std::string g1 = field(1, node) + field(5, tensor) + field(12, field(1, "z"));
  OnnxModel ok = parse_onnx_model(
      std::string("\x08\x08", 2) + field(7, g1) + field(8, std::string("\x10\x0d", 2)), "m.onnx");
  EXPECT_EQ(ok.initializers.size(), 1u);
}

TEST(OnnxValidate, InputCountsFollowTheSchema) {
  // An extra input used to be ignored.
  OnnxModel m = model(13, {info("x", {2}), info("y", {2})},
                      {named_node("r", "Relu", {"x", "y"}, {"z"})}, {"z"});
  EXPECT_EQ(error_of([&] { import_onnx(m); }),
            "'v.onnx', node 'r' (Relu): 2 inputs given, but Relu (opset 13) takes at most 1");
  OnnxModel m2 = model(13, {info("x", {2})}, {named_node("a", "Add", {"x"}, {"z"})}, {"z"});
  EXPECT_EQ(error_of([&] { import_onnx(m2); }),
            "'v.onnx', node 'a' (Add): 1 input given, but Add (opset 13) needs at least 2");
  // A required input omitted (an empty name in its place).
  OnnxModel m3 = model(13, {info("a", {2, 2}), info("c", {2})},
                       {named_node("g", "Gemm", {"a", "", "c"}, {"z"})}, {"z"});
  EXPECT_EQ(error_of([&] { import_onnx(m3); }),
            "'v.onnx', node 'g' (Gemm): input 1 ('B') of Gemm (opset 13) is required, but it is "
            "omitted (an empty name)");
  // Too many outputs.
  OnnxModel m4 = model(13, {info("x", {2})}, {named_node("r", "Relu", {"x"}, {"z", "w"})}, {"z"});
  EXPECT_EQ(error_of([&] { import_onnx(m4); }),
            "'v.onnx', node 'r' (Relu): 2 outputs, but Relu (opset 13) has at most 1");
  // Variadic inputs and omitted optional ones are fine.
  OnnxModel ok = model(13, {info("x", {2}), info("y", {2})},
                       {named_node("s", "Sum", {"x", "y", "x"}, {"s1"}),
                        named_node("c", "Clip", {"s1", "", ""}, {"z"})},
                       {"z"});
  graph::Graph g = import_onnx(ok);
  EXPECT_EQ(g.outputs().size(), 1u);
}

// A Loop whose body keeps its condition true: with trip count 2^40 it is refused after
// kMaxUnroll iterations (the condition is folded on the host, its new ops only, so this ends
// quickly); without a condition the trip count alone is refused before unrolling.
TEST(OnnxValidate, LoopWithAHugeTripCountIsRefused) {
  const int64_t kTrip = int64_t{1} << 40;
  auto body =
      graph("body", {"i", "c_in", "v_in"},
            {node("Less", {"i", "big"}, {"c_out"}), node("Add", {"v_in", "v_in"}, {"v_out"})},
            {"c_out", "v_out"}, {{"big", scalar_i64(kTrip)}});
  OnnxNode n = with_body(node("Loop", {"M", "c0", "v0"}, {"v"}), "body", body);
  OnnxModel m = model(13, {info("v0", {2})}, {n}, {"v"});
  m.initializers["M"] = scalar_i64(kTrip);
  m.initializers["c0"] = boolean(true);
  std::string e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("node 'Loop_v' (Loop): the loop runs more than 4096 iterations, more than "
                   "Kiln unrolls (its condition is still true after 4096 iterations of at most "
                   "1099511627776)"),
            std::string::npos)
      << e;
  OnnxNode n2 = with_body(node("Loop", {"M", "", "v0"}, {"v"}), "body", body);
  OnnxModel m2 = model(13, {info("v0", {2})}, {n2}, {"v"});
  m2.initializers["M"] = scalar_i64(kTrip);
  EXPECT_EQ(error_of([&] { import_onnx(m2); }),
            "'v.onnx', node 'Loop_v' (Loop): the trip count is 1099511627776, more iterations "
            "than Kiln unrolls (4096)");
}

// A while loop (trip count 2^40, as exporters write INT64_MAX) whose condition turns false:
// unrolled to the iterations it runs.
TEST(OnnxValidate, LoopWithAHugeTripCountEndsByItsCondition) {
  const int64_t kTrip = int64_t{1} << 40;
  auto body = graph("body", {"i", "c_in", "v_in"},
                    {node("Less", {"i", "two"}, {"c_out"}), node("Add", {"v_in", "x"}, {"v_out"})},
                    {"c_out", "v_out"}, {{"two", scalar_i64(2)}});
  OnnxNode n = with_body(node("Loop", {"M", "c0", "v0"}, {"v"}), "body", body);
  OnnxModel m = model(13, {info("v0", {2}), info("x", {2})}, {n}, {"v"});
  m.initializers["M"] = scalar_i64(kTrip);
  m.initializers["c0"] = boolean(true);
  runtime::NDArray v0 = runtime::NDArray::empty({2}, DataType::Float(32));
  runtime::NDArray x = runtime::NDArray::empty({2}, DataType::Float(32));
  v0.data_as<float>()[0] = 1.5f, v0.data_as<float>()[1] = -2.0f;
  x.data_as<float>()[0] = 0.25f, x.data_as<float>()[1] = 3.0f;
  std::vector<runtime::NDArray> out = test_util::run(m, {{"v0", v0}, {"x", x}});
  ASSERT_EQ(out.size(), 1u);
  // Iterations 0, 1 and 2 run (the condition computed by iteration 2 is false).
  test_util::expect_close_to(out[0], {1.5f + 3 * 0.25f, -2.0f + 3 * 3.0f}, {2}, 1e-6f, 1e-6f);
}

// The host evaluator computes the exact small ops of shape arithmetic and declines the rest
// (float arithmetic, out-of-range indices, division by 0 or -1), which are then folded through
// the compiler.
TEST(OnnxValidate, HostEvaluatorTakesExactOpsOnly) {
  auto op = [](const std::string& name, graph::Attrs attrs = {}) {
    graph::Node n;
    n.op = name;
    n.name = name;
    n.attrs = std::move(attrs);
    return n;
  };
  runtime::NDArray v = runtime::NDArray::empty({3}, DataType::Int(64));
  for (int64_t k = 0; k < 3; ++k) v.data_as<int64_t>()[k] = 10 * (k + 1);  // [10, 20, 30]
  runtime::NDArray one = scalar_i64(1), big = scalar_i64(INT64_MAX);
  std::optional<runtime::NDArray> sum = onnx_import::eval_on_host(op("add"), {&v, &one});
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum->shape(), (Ints{3}));
  EXPECT_EQ(sum->data_as<int64_t>()[2], 31);
  // Integer arithmetic wraps as the generated code does.
  std::optional<runtime::NDArray> wrap = onnx_import::eval_on_host(op("add"), {&big, &one});
  ASSERT_TRUE(wrap);
  EXPECT_EQ(wrap->data_as<int64_t>()[0], INT64_MIN);
  std::optional<runtime::NDArray> less = onnx_import::eval_on_host(op("less"), {&one, &v});
  ASSERT_TRUE(less);
  EXPECT_EQ(less->dtype(), DataType::Bool());
  runtime::NDArray idx = runtime::NDArray::empty({2}, DataType::Int(64));
  idx.data_as<int64_t>()[0] = 2, idx.data_as<int64_t>()[1] = 0;
  std::optional<runtime::NDArray> taken =
      onnx_import::eval_on_host(op("take", {{"axis", int64_t{0}}}), {&v, &idx});
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->data_as<int64_t>()[0], 30);
  EXPECT_EQ(taken->data_as<int64_t>()[1], 10);
  idx.data_as<int64_t>()[0] = -2;  // from the end, as the compiled take wraps it
  taken = onnx_import::eval_on_host(op("take", {{"axis", int64_t{0}}}), {&v, &idx});
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->data_as<int64_t>()[0], 20);
  idx.data_as<int64_t>()[0] = 3;  // out of range: left to the compiler
  EXPECT_FALSE(onnx_import::eval_on_host(op("take", {{"axis", int64_t{0}}}), {&v, &idx}));
  idx.data_as<int64_t>()[0] = -4;
  EXPECT_FALSE(onnx_import::eval_on_host(op("take", {{"axis", int64_t{0}}}), {&v, &idx}));
  runtime::NDArray f = runtime::NDArray::empty({}, DataType::Float(32));
  f.data_as<float>()[0] = 0.1f;
  EXPECT_FALSE(onnx_import::eval_on_host(op("add"), {&f, &f}));
  // Integer division is floor division, as the compiled Div does it on the same values (the
  // window arithmetic of Swin's blocks: 172 JIT builds at import before the host took it);
  // a zero divisor, or -1, is left to the compiler.
  const std::vector<int64_t> num = {-7, 7, -7, 9, 0}, den = {2, -2, -2, 3, 5};
  runtime::NDArray a = runtime::NDArray::empty({5}, DataType::Int(64));
  runtime::NDArray b = runtime::NDArray::empty({5}, DataType::Int(64));
  std::copy(num.begin(), num.end(), a.data_as<int64_t>());
  std::copy(den.begin(), den.end(), b.data_as<int64_t>());
  std::optional<runtime::NDArray> q = onnx_import::eval_on_host(op("divide"), {&a, &b});
  ASSERT_TRUE(q);
  OnnxModel m = model(13, {info("a", {5}, DataType::Int(64)), info("b", {5}, DataType::Int(64))},
                      {node("Div", {"a", "b"}, {"q"})}, {"q"});
  std::vector<runtime::NDArray> compiled = test_util::run(m, {{"a", a}, {"b", b}});
  ASSERT_EQ(compiled.size(), 1u);
  for (int64_t k = 0; k < 5; ++k) {
    EXPECT_EQ(q->data_as<int64_t>()[k], compiled[0].data_as<int64_t>()[k]) << "element " << k;
    const int64_t floor_q = (num[k] - ((num[k] % den[k] + den[k]) % den[k])) / den[k];
    EXPECT_EQ(q->data_as<int64_t>()[k], floor_q) << "element " << k;
  }
  runtime::NDArray zero = scalar_i64(0), minus_one = scalar_i64(-1);
  EXPECT_FALSE(onnx_import::eval_on_host(op("divide"), {&v, &zero}));
  EXPECT_FALSE(onnx_import::eval_on_host(op("divide"), {&v, &minus_one}));
}

// Transpose and strided_slice on the host (topi's index math) agree with the compiled ops on the
// same values: a permutation with a negative axis, and a slice with a negative stride (Swin's
// padding arithmetic reverses an [4, 2] pads tensor: 16 JIT builds at import before).
TEST(OnnxValidate, HostTransposeAndSliceAgreeWithTheCompiledOps) {
  auto op = [](const std::string& name, graph::Attrs attrs) {
    graph::Node n;
    n.op = name;
    n.name = name;
    n.attrs = std::move(attrs);
    return n;
  };
  runtime::NDArray x = runtime::NDArray::empty({2, 3, 4}, DataType::Int(64));
  for (int64_t k = 0; k < 24; ++k) x.data_as<int64_t>()[k] = 7 * k - 50;
  auto compiled = [&](OnnxNode n, std::map<std::string, runtime::NDArray> inits) {
    OnnxModel m = model(13, {info("x", {2, 3, 4}, DataType::Int(64))}, {std::move(n)}, {"y"});
    m.initializers = std::move(inits);
    std::vector<runtime::NDArray> out = test_util::run(m, {{"x", x}});
    EXPECT_EQ(out.size(), 1u);
    return out.at(0);
  };
  auto expect_same = [](const runtime::NDArray& host, const runtime::NDArray& ref) {
    ASSERT_EQ(host.shape(), ref.shape());
    for (int64_t k = 0; k < ref.numel(); ++k)
      EXPECT_EQ(host.data_as<int64_t>()[k], ref.data_as<int64_t>()[k]) << "element " << k;
  };
  std::optional<runtime::NDArray> t =
      onnx_import::eval_on_host(op("transpose", {{"axes", Ints{2, 0, -2}}}), {&x});
  ASSERT_TRUE(t);
  OnnxNode tn = node("Transpose", {"x"}, {"y"});
  tn.attrs["perm"] = Ints{2, 0, 1};
  expect_same(*t, compiled(tn, {}));
  std::optional<runtime::NDArray> sl =
      onnx_import::eval_on_host(op("strided_slice", {{"begin", Ints{-1, 0}},
                                                     {"end", Ints{-100, 4}},
                                                     {"strides", Ints{-1, 2}},
                                                     {"axes", Ints{1, 2}}}),
                                {&x});
  ASSERT_TRUE(sl);
  EXPECT_EQ(sl->shape(), (Ints{2, 3, 2}));
  auto ints = [](const Ints& v) {
    runtime::NDArray a =
        runtime::NDArray::empty({static_cast<int64_t>(v.size())}, DataType::Int(64));
    std::copy(v.begin(), v.end(), a.data_as<int64_t>());
    return a;
  };
  expect_same(*sl,
              compiled(node("Slice", {"x", "b", "e", "a", "s"}, {"y"}), {{"b", ints({-1, 0})},
                                                                         {"e", ints({-100, 4})},
                                                                         {"a", ints({1, 2})},
                                                                         {"s", ints({-1, 2})}}));
}

// Shape arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) folds to constants at
// import: the imported graph holds the reshape with the computed shape.
TEST(OnnxValidate, ShapeArithmeticFoldsToAConstantShape) {
  OnnxModel m = model(13, {info("x", {2, 3, 4})},
                      {node("Shape", {"x"}, {"s"}), node("Gather", {"s", "i0"}, {"d0"}),
                       node("Unsqueeze", {"d0", "ax"}, {"d0v"}),
                       node("Concat", {"d0v", "minus1"}, {"shape"}, {{"axis", int64_t{0}}}),
                       node("Reshape", {"x", "shape"}, {"y"})},
                      {"y"});
  m.initializers["i0"] = scalar_i64(0);
  runtime::NDArray ax = runtime::NDArray::empty({1}, DataType::Int(64));
  ax.data_as<int64_t>()[0] = 0;
  m.initializers["ax"] = ax;
  runtime::NDArray minus1 = runtime::NDArray::empty({1}, DataType::Int(64));
  minus1.data_as<int64_t>()[0] = -1;
  m.initializers["minus1"] = minus1;
  graph::Graph g = graph::infer_types(import_onnx(m));
  EXPECT_EQ(g.type_of(g.outputs()[0]).shape, (Ints{2, 12}));
}

}  // namespace
}  // namespace kiln::frontend
