// Sequence-typed graph inputs and outputs of ONNX models, flattened into tensors: a sequence
// input `s` with element shapes given in ImportOptions::sequence_inputs becomes tensor inputs
// "s.0", "s.1", …, and a sequence output `t` becomes outputs "t.0", "t.1", …. Models built in
// memory (SequenceInsert/Construct/ConcatFromSequence, SequenceMap unrolled per element, If
// choosing sequences under a run-time condition) are compiled and run on seeded random inputs
// and compared with references computed here; SequenceProto files are read back; and the
// errors: a sequence input without its length and shapes, shapes that contradict the model, a
// sequence output without flattening, SequenceMap over sequences of different lengths.
#include <gtest/gtest.h>

#include <cmath>
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
using Shapes = std::vector<Ints>;
namespace fs = std::filesystem;

runtime::NDArray random_array(const Ints& shape, uint32_t seed) {
  runtime::NDArray a = runtime::NDArray::empty(shape, DataType::Float(32));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = d(gen);
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
Vec values(const runtime::NDArray& a) {
  return Vec(a.data_as<float>(), a.data_as<float>() + a.numel());
}

/// A tensor value info of `shape` (-1: symbolic).
OnnxValueInfo info(const std::string& name, const Ints& shape, DataType t = DataType::Float(32)) {
  OnnxValueInfo v{name, t, true, {}, ""};
  for (int64_t d : shape) v.shape.push_back(d < 0 ? OnnxDim{-1, "n"} : OnnxDim{d, ""});
  return v;
}
/// A sequence value info whose elements have `shape` (-1: symbolic).
OnnxValueInfo seq_info(const std::string& name, const Ints& shape) {
  OnnxValueInfo v = info(name, shape);
  v.kind = "sequence";
  return v;
}

OnnxModel model(std::vector<OnnxValueInfo> ins, std::vector<OnnxNode> nodes,
                std::vector<std::string> outs) {
  OnnxModel m;
  m.path = "seq.onnx";
  m.ir_version = 8;
  m.opsets[""] = 17;
  m.inputs = std::move(ins);
  m.nodes = std::move(nodes);
  for (const std::string& s : outs) m.outputs.push_back(named(s));
  return m;
}

struct Outputs {
  std::vector<std::string> names;
  std::vector<runtime::NDArray> outs;
};

/// Imports `m` with sequences flattened, compiles and runs it; the outputs with their names.
Outputs run(const OnnxModel& m, const ImportOptions& opt,
            const std::map<std::string, runtime::NDArray>& inputs) {
  ImportOptions o = opt;
  o.flatten_sequence_outputs = true;
  graph::Graph g = import_onnx(m, o);
  graph::CompiledModule cm = graph::build_module(g, Target::host(), {});
  runtime::GraphExecutor ex = runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m");
  for (const auto& [name, v] : inputs) ex.set_input(name, v);
  ex.run();
  Outputs r{ex.output_names(), {}};
  for (int i = 0; i < ex.num_outputs(); ++i) r.outs.push_back(ex.get_output(i));
  return r;
}

void expect_equal(const runtime::NDArray& got, const Ints& shape, const Vec& want,
                  const std::string& what) {
  ASSERT_EQ(got.shape(), shape) << what;
  ASSERT_EQ(got.dtype(), DataType::Float(32)) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.data_as<float>()[i], want[i], 1e-5f * (1 + std::abs(want[i])))
        << what << " element " << i;
}

// A sequence input flattened into "s.0" … "s.2", an element inserted, the sequences given back as
// outputs (the input sequence itself, elements used twice) and concatenated.
TEST(OnnxSequenceIO, FlattenedRoundTrip) {
  OnnxModel m = model(
      {seq_info("s", {-1, 3}), info("x", {3})},
      {node("Unsqueeze", {"x", "zero"}, {"x2"}), node("SequenceInsert", {"s", "x2", "one"}, {"t"}),
       node("ConcatFromSequence", {"t"}, {"cat"}, {{"axis", int64_t{0}}}),
       node("SequenceConstruct", {"x2", "x2"}, {"d"})},
      {"t", "cat", "s", "d"});
  m.initializers["zero"] = ints({0});
  m.initializers["one"] = scalar_i64(1);
  Shapes shapes{{2, 3}, {4, 3}, {1, 3}};
  ImportOptions opt;
  opt.sequence_inputs["s"] = shapes;
  std::map<std::string, runtime::NDArray> in;
  std::vector<Vec> s;
  for (size_t k = 0; k < shapes.size(); ++k) {
    runtime::NDArray a = random_array(shapes[k], 10 + static_cast<uint32_t>(k));
    in["s." + std::to_string(k)] = a;
    s.push_back(values(a));
  }
  in["x"] = random_array({3}, 20);
  Vec x = values(in["x"]);
  Outputs r = run(m, opt, in);
  std::vector<std::string> names{"t.0", "t.1", "t.2", "t.3", "cat",
                                 "s.0", "s.1", "s.2", "d.0", "d.1"};
  ASSERT_EQ(r.names, names);
  // Reference: t = [s0, x, s1, s2]; cat = their rows in order.
  std::vector<Vec> t{s[0], x, s[1], s[2]};
  Shapes ts{shapes[0], {1, 3}, shapes[1], shapes[2]};
  Vec cat;
  for (size_t k = 0; k < 4; ++k) {
    expect_equal(r.outs[k], ts[k], t[k], "t." + std::to_string(k));
    cat.insert(cat.end(), t[k].begin(), t[k].end());
  }
  expect_equal(r.outs[4], {8, 3}, cat, "cat");
  for (size_t k = 0; k < 3; ++k) expect_equal(r.outs[5 + k], shapes[k], s[k], names[5 + k]);
  expect_equal(r.outs[8], {1, 3}, x, "d.0");
  expect_equal(r.outs[9], {1, 3}, x, "d.1");

  // An empty sequence input: no tensor inputs, the inserted element alone.
  opt.sequence_inputs["s"] = {};
  OnnxModel m2 =
      model({seq_info("s", {-1, 3}), info("x", {3})},
            {node("Unsqueeze", {"x", "zero"}, {"x2"}), node("SequenceInsert", {"s", "x2"}, {"t"})},
            {"t"});
  m2.initializers["zero"] = ints({0});
  Outputs r2 = run(m2, opt, {{"x", in["x"]}});
  ASSERT_EQ(r2.names, std::vector<std::string>{"t.0"});
  expect_equal(r2.outs[0], {1, 3}, x, "t.0 of the empty sequence");
}

// SequenceMap over two sequences (elements of different shapes) and a tensor, the body unrolled
// per element: y = a * b + c, and the shape of each element.
TEST(OnnxSequenceIO, SequenceMapUnrolled) {
  auto body = graph("map_body", {"in0", "in1", "in2"},
                    {node("Mul", {"in0", "in1"}, {"p"}), node("Add", {"p", "in2"}, {"out0"}),
                     node("Shape", {"in0"}, {"out1"})},
                    {"out0", "out1"});
  OnnxModel m =
      model({seq_info("a", {-1, 3}), seq_info("b", {-1, 3}), info("c", {3})},
            {with_body(node("SequenceMap", {"a", "b", "c"}, {"y", "shapes"}), "body", body)},
            {"y", "shapes"});
  Shapes shapes{{2, 3}, {1, 3}, {4, 3}};
  ImportOptions opt;
  opt.sequence_inputs["a"] = shapes;
  opt.sequence_inputs["b"] = shapes;
  std::map<std::string, runtime::NDArray> in;
  for (size_t k = 0; k < shapes.size(); ++k) {
    in["a." + std::to_string(k)] = random_array(shapes[k], 30 + static_cast<uint32_t>(k));
    in["b." + std::to_string(k)] = random_array(shapes[k], 40 + static_cast<uint32_t>(k));
  }
  in["c"] = random_array({3}, 50);
  Outputs r = run(m, opt, in);
  ASSERT_EQ(r.names,
            (std::vector<std::string>{"y.0", "y.1", "y.2", "shapes.0", "shapes.1", "shapes.2"}));
  Vec c = values(in["c"]);
  for (size_t k = 0; k < shapes.size(); ++k) {
    Vec a = values(in["a." + std::to_string(k)]), b = values(in["b." + std::to_string(k)]);
    Vec y(a.size());
    for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] * b[i] + c[i % 3];
    expect_equal(r.outs[k], shapes[k], y, "y." + std::to_string(k));
    const runtime::NDArray& sh = r.outs[3 + k];
    ASSERT_EQ(sh.dtype(), DataType::Int(64));
    ASSERT_EQ(sh.shape(), Ints{2});
    EXPECT_EQ(Ints(sh.data_as<int64_t>(), sh.data_as<int64_t>() + 2), shapes[k]);
  }

  // Sequences of different lengths.
  opt.sequence_inputs["b"] = {{2, 3}};
  std::string e = error_of([&] { import_onnx(m, opt); });
  EXPECT_NE(e.find("node 'SequenceMap_y' (SequenceMap): input 1 ('b') is a sequence of 1 "
                   "tensors, input 0 of 3"),
            std::string::npos)
      << e;
}

// If under a run-time condition chooses between two sequences of one length element by element.
TEST(OnnxSequenceIO, IfChoosesSequences) {
  auto then_g = graph("then", {}, {node("SequenceConstruct", {"x", "y"}, {"ts"})}, {"ts"});
  auto else_g = graph("else", {}, {node("SequenceConstruct", {"y", "x"}, {"es"})}, {"es"});
  OnnxModel m = model({info("cond", {}, DataType::Bool()), info("x", {2, 3}), info("y", {2, 3})},
                      {with_body(with_body(node("If", {"cond"}, {"r"}), "then_branch", then_g),
                                 "else_branch", else_g)},
                      {"r"});
  runtime::NDArray x = random_array({2, 3}, 60), y = random_array({2, 3}, 61);
  for (bool cv : {true, false}) {
    runtime::NDArray cond = runtime::NDArray::empty({}, DataType::Bool());
    cond.data_as<uint8_t>()[0] = cv ? 1 : 0;
    Outputs r = run(m, {}, {{"cond", cond}, {"x", x}, {"y", y}});
    ASSERT_EQ(r.names, (std::vector<std::string>{"r.0", "r.1"}));
    expect_equal(r.outs[0], {2, 3}, values(cv ? x : y), "r.0");
    expect_equal(r.outs[1], {2, 3}, values(cv ? y : x), "r.1");
  }
  // Sequences of different lengths cannot be chosen at run time.
  auto short_g = graph("else", {}, {node("SequenceConstruct", {"y"}, {"es"})}, {"es"});
  m.nodes[0].subgraphs["else_branch"] = short_g;
  std::string e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("the branches give output 0 ('r') sequences of different lengths (then 2, "
                   "else 1)"),
            std::string::npos)
      << e;
}

TEST(OnnxSequenceIO, Errors) {
  OnnxModel m =
      model({seq_info("s", {-1, 3})},
            {node("ConcatFromSequence", {"s"}, {"cat"}, {{"axis", int64_t{0}}})}, {"cat"});
  // No length and element shapes for the sequence input.
  std::string e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("'seq.onnx': graph input 's' is a sequence value, which Kiln does not support "
                   "yet without its length and element shapes: give them in "
                   "ImportOptions::sequence_inputs"),
            std::string::npos)
      << e;
  // Shapes that contradict the model's declared element shape.
  ImportOptions opt;
  opt.sequence_inputs["s"] = {{2, 3}, {2, 4}};
  e = error_of([&] { import_onnx(m, opt); });
  EXPECT_NE(e.find("element 1 of sequence input 's' is given shape [2, 4], but the model declares "
                   "its elements [n, 3]"),
            std::string::npos)
      << e;
  // A name that is not a sequence input.
  opt.sequence_inputs = {{"t", {{2, 3}}}};
  e = error_of([&] { import_onnx(m, opt); });
  EXPECT_NE(e.find("ImportOptions::sequence_inputs names 't', which is not a sequence-typed graph "
                   "input of the model"),
            std::string::npos)
      << e;
  // A sequence output without flattening.
  OnnxModel m2 = model({info("x", {2})}, {node("SequenceConstruct", {"x"}, {"s"})}, {"s"});
  e = error_of([&] { import_onnx(m2); });
  EXPECT_NE(e.find("graph output 's' is a sequence value, which Kiln does not support yet (only "
                   "tensors) unless ImportOptions::flatten_sequence_outputs is set"),
            std::string::npos)
      << e;
}

// SequenceProto files (the test suites' data of sequence values) are read back as their
// tensors; a TensorProto is not taken for a sequence.
TEST(OnnxSequenceIO, LoadSequence) {
  fs::path dir = fs::temp_directory_path() / ("kiln_seqio_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  float v[2] = {1.5f, -2.25f};
  std::string raw(reinterpret_cast<const char*>(v), 8);
  // TensorProto{dims: [2], data_type: FLOAT, raw_data: v}
  std::string tensor = std::string("\x08\x02\x10\x01\x4a\x08", 6) + raw;
  // SequenceProto{name: "seq", elem_type: TENSOR, tensor_values: [tensor, tensor]}
  std::string seq = std::string("\x0a\x03seq\x10\x01", 7);
  for (int k = 0; k < 2; ++k) seq += std::string("\x1a\x0e", 2) + tensor;
  std::ofstream(dir / "seq.pb", std::ios::binary) << seq;
  std::ofstream(dir / "tensor.pb", std::ios::binary) << tensor;
  std::vector<runtime::NDArray> items = load_onnx_sequence((dir / "seq.pb").string());
  ASSERT_EQ(items.size(), 2u);
  for (const runtime::NDArray& a : items) {
    ASSERT_EQ(a.shape(), Ints{2});
    EXPECT_EQ(values(a), (Vec{1.5f, -2.25f}));
  }
  std::string e = error_of([&] { load_onnx_sequence((dir / "tensor.pb").string()); });
  EXPECT_NE(e.find("tensor.pb' is not a serialized ONNX SequenceProto"), std::string::npos) << e;
  fs::remove_all(dir);
}

// Optional values, resolved at import time. A present optional tensor input is the tensor input
// of the same name; OptionalHasElement is a constant; OptionalGetElement gives the tensor.
TEST(OnnxOptional, PresentInputComputes) {
  OnnxValueInfo o = info("o", {2, 3});
  o.optional = true;
  OnnxModel m = model({o},
                      {node("OptionalHasElement", {"o"}, {"has"}),
                       node("OptionalGetElement", {"o"}, {"x"}), node("Mul", {"x", "x"}, {"y"}),
                       node("Optional", {"y"}, {"oy"}), node("Identity", {"oy"}, {"oy2"})},
                      {"has", "y", "oy2"});
  runtime::NDArray x = random_array({2, 3}, 31);
  Outputs r = run(m, {}, {{"o", x}});
  ASSERT_EQ(r.outs.size(), 3u);
  ASSERT_EQ(r.outs[0].dtype(), DataType::Bool());
  EXPECT_EQ(r.outs[0].data_as<uint8_t>()[0], 1);
  Vec xs = values(x), sq;
  for (float v : xs) sq.push_back(v * v);
  expect_equal(r.outs[1], {2, 3}, sq, "y");
  expect_equal(r.outs[2], {2, 3}, sq, "the optional output's tensor");
}

// An empty optional input (ImportOptions::empty_optional_inputs): OptionalHasElement is false,
// Optional() with no input is empty too, and what cannot be computed is a clear error.
TEST(OnnxOptional, EmptyInput) {
  OnnxValueInfo o = info("o", {4});
  o.optional = true;
  ImportOptions opt;
  opt.empty_optional_inputs = {"o"};
  OnnxModel has =
      model({o, info("x", {4})},
            {node("OptionalHasElement", {"o"}, {"h1"}), node("Optional", {}, {"e"}),
             node("OptionalHasElement", {"e"}, {"h2"}), node("OptionalHasElement", {"x"}, {"h3"})},
            {"h1", "h2", "h3"});
  Outputs r = run(has, opt, {{"x", random_array({4}, 3)}});
  ASSERT_EQ(r.outs.size(), 3u);
  EXPECT_EQ(r.outs[0].data_as<uint8_t>()[0], 0);
  EXPECT_EQ(r.outs[1].data_as<uint8_t>()[0], 0);
  EXPECT_EQ(r.outs[2].data_as<uint8_t>()[0], 1);  // a plain tensor always has its element

  OnnxModel get = model({o}, {node("OptionalGetElement", {"o"}, {"x"})}, {"x"});
  EXPECT_NE(error_of([&] { import_onnx(get, opt); })
                .find("node 'OptionalGetElement_x' (OptionalGetElement): input 0 ('o') is an "
                      "empty optional, which has no element to get"),
            std::string::npos);
  OnnxModel out = model({o}, {node("Identity", {"o"}, {"p"})}, {"p"});
  EXPECT_NE(error_of([&] {
              import_onnx(out, opt);
            }).find("graph output 'p' is an empty optional value, which Kiln cannot return"),
            std::string::npos);
  OnnxModel direct = model({o}, {node("Relu", {"o"}, {"y"})}, {"y"});
  EXPECT_NE(error_of([&] {
              import_onnx(direct, {});
            }).find("input 0 ('o') is an optional value, which this operator does not take"),
            std::string::npos);
  ImportOptions wrong;
  wrong.empty_optional_inputs = {"x"};
  EXPECT_NE(error_of([&] { import_onnx(has, wrong); })
                .find("ImportOptions::empty_optional_inputs names 'x', which is not an "
                      "optional-typed graph input"),
            std::string::npos);
}

// If whose branches give an empty optional and an optional sequence: a constant condition takes
// one branch; a run-time condition cannot decide emptiness and is refused.
TEST(OnnxOptional, IfBranches) {
  auto empty_branch = graph("then", {}, {node("Optional", {}, {"oe"})}, {"oe"});
  auto seq_branch = graph(
      "else", {}, {node("SequenceConstruct", {"x", "x"}, {"s"}), node("Optional", {"s"}, {"os"})},
      {"os"});
  auto make = [&](std::vector<OnnxValueInfo> ins) {
    OnnxModel m = model(std::move(ins),
                        {with_body(with_body(node("If", {"c"}, {"r"}), "then_branch", empty_branch),
                                   "else_branch", seq_branch)},
                        {"r"});
    return m;
  };
  OnnxModel m = make({info("x", {3})});
  runtime::NDArray f = runtime::NDArray::empty({}, DataType::Bool());
  f.data_as<uint8_t>()[0] = 0;
  m.initializers["c"] = f;
  runtime::NDArray x = random_array({3}, 5);
  Outputs r = run(m, {}, {{"x", x}});
  ASSERT_EQ(r.names, (std::vector<std::string>{"r.0", "r.1"}));
  expect_equal(r.outs[0], {3}, values(x), "r.0");
  expect_equal(r.outs[1], {3}, values(x), "r.1");

  OnnxModel rt = make({info("c", {}, DataType::Bool()), info("x", {3})});
  EXPECT_NE(error_of([&] { import_onnx(rt, {}); })
                .find("an empty optional in one and a value in the other, so the condition must "
                      "be a constant"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::frontend
