// Reading ONNX models and tensors: a known conformance model read field by field, every model
// of Debian's ONNX node test suite read without a crash (each either loads or is refused with a
// kiln::Error), and the errors for missing, truncated and foreign files; weights in an external
// data file written and read back, and the errors for a tampered one.
#include "kiln/frontend/onnx_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "kiln/frontend/onnx_writer.h"

namespace kiln::frontend {
namespace {

using ::kiln::testing::error_of;
namespace fs = std::filesystem;

const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

TEST(OnnxModel, ReadsAbsModelAndItsTestData) {
  fs::path dir = kNodeTests / "test_abs";
  if (!fs::exists(dir)) GTEST_SKIP() << "libonnx-testdata is not installed";
  OnnxModel m = load_onnx_model((dir / "model.onnx").string());
  EXPECT_EQ(m.default_opset(), 13);
  ASSERT_EQ(m.nodes.size(), 1u);
  EXPECT_EQ(m.nodes[0].op_type, "Abs");
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "x");
  EXPECT_EQ(m.inputs[0].dtype, DataType::Float(32));
  ASSERT_EQ(m.inputs[0].shape.size(), 3u);
  EXPECT_EQ(m.inputs[0].shape[0].size, 3);
  EXPECT_EQ(m.inputs[0].shape[2].size, 5);
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_EQ(m.outputs[0].name, "y");
  // The test data: output is |input|, element by element.
  runtime::NDArray in = load_onnx_tensor((dir / "test_data_set_0/input_0.pb").string());
  runtime::NDArray out = load_onnx_tensor((dir / "test_data_set_0/output_0.pb").string());
  ASSERT_EQ(in.shape(), (std::vector<int64_t>{3, 4, 5}));
  ASSERT_EQ(out.shape(), in.shape());
  bool some_negative = false;
  for (int64_t i = 0; i < in.numel(); ++i) {
    float x = in.data_as<float>()[i];
    some_negative |= x < 0;
    EXPECT_EQ(out.data_as<float>()[i], std::fabs(x)) << "element " << i;
  }
  EXPECT_TRUE(some_negative);
}

TEST(OnnxModel, ReadsAttributesAndInitializers) {
  fs::path dir = kNodeTests / "test_conv_with_strides_padding";
  if (!fs::exists(dir)) GTEST_SKIP() << "libonnx-testdata is not installed";
  OnnxModel m = load_onnx_model((dir / "model.onnx").string());
  ASSERT_EQ(m.nodes.size(), 1u);
  const OnnxNode& n = m.nodes[0];
  EXPECT_EQ(n.op_type, "Conv");
  ASSERT_TRUE(n.attrs.count("strides"));
  EXPECT_EQ(std::get<std::vector<int64_t>>(n.attrs.at("strides")), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(n.attrs.at("pads")), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(OnnxModel, EveryNodeTestModelLoadsOrIsRefusedCleanly) {
  if (!fs::exists(kNodeTests)) GTEST_SKIP() << "libonnx-testdata is not installed";
  int loaded = 0, refused = 0, tensors = 0;
  std::vector<std::string> refusals;
  for (const auto& e : fs::directory_iterator(kNodeTests)) {
    fs::path model = e.path() / "model.onnx";
    if (!fs::exists(model)) continue;
    try {
      OnnxModel m = load_onnx_model(model.string());
      EXPECT_FALSE(m.nodes.empty()) << model;
      ++loaded;
    } catch (const Error& err) {
      ++refused;
      refusals.push_back(err.what());
      EXPECT_NE(std::string(err.what()).find(model.string()), std::string::npos) << err.what();
    }
    for (const auto& d : fs::directory_iterator(e.path())) {
      if (!d.is_directory()) continue;
      for (const auto& f : fs::directory_iterator(d.path())) {
        try {
          load_onnx_tensor(f.path().string());
          ++tensors;
        } catch (const Error&) {
          // sequences/maps/strings in some tests: refused with an error, never a crash
        }
      }
    }
  }
  std::cout << "ONNX node tests: " << loaded << " models read, " << refused << " refused, "
            << tensors << " test tensors read\n";
  for (size_t i = 0; i < refusals.size() && i < 5; ++i) std::cout << "  " << refusals[i] << "\n";
  // Nearly all of the suite is plain tensors; refusals are the few string/sequence models.
  EXPECT_GT(loaded, 800);
}

TEST(OnnxModel, Errors) {
  EXPECT_EQ(error_of([] { load_onnx_model("/nonexistent/model.onnx"); }),
            "ONNX model '/nonexistent/model.onnx': cannot open: No such file or directory");
  fs::path tmp = fs::temp_directory_path() / "kiln_frontend_test";
  fs::create_directories(tmp);
  // A directory is refused before anything is mapped; an empty file parses to no graph.
  EXPECT_EQ(error_of([&] { load_onnx_model(tmp.string()); }),
            "ONNX model '" + tmp.string() + "': not a regular file (a directory)");
  std::string empty_path = (tmp / "empty.onnx").string();
  std::ofstream(empty_path).close();
  EXPECT_EQ(error_of([&] { load_onnx_model(empty_path); }),
            "'" + empty_path + "' is not an ONNX model: it has no graph");
  // A text file is not a model.
  std::string text_path = (tmp / "notes.onnx").string();
  std::ofstream(text_path) << "this is not an onnx file\n";
  std::string msg = error_of([&] { load_onnx_model(text_path); });
  EXPECT_NE(msg.find("'" + text_path + "' is not"), std::string::npos) << msg;
  // A truncated model.
  fs::path src = kNodeTests / "test_conv_with_strides_padding" / "model.onnx";
  if (fs::exists(src)) {
    std::ifstream f(src, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::string cut_path = (tmp / "truncated.onnx").string();
    std::ofstream(cut_path, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 3);
    msg = error_of([&] { load_onnx_model(cut_path); });
    EXPECT_NE(msg.find(cut_path), std::string::npos) << msg;
  }
  fs::remove_all(tmp);
}

TEST(OnnxModel, UndefinedNodeInputIsNamed) {
  // A model whose node reads a value nothing defines, built as protobuf text would be
  // cumbersome; instead splice: a graph with input x and a node reading "y".
  // Bytes of ModelProto{ir_version: 8, graph{node{input:"y" output:"z" op_type:"Relu"}
  // input{name:"x"} output{name:"z"}}, opset_import{version: 13}}.
  std::string g;
  auto field = [](int num, const std::string& payload) {
    std::string s;
    s.push_back(static_cast<char>((num << 3) | 2));
    s.push_back(static_cast<char>(payload.size()));
    return s + payload;
  };
  std::string node = field(1, "y") + field(2, "z") + field(4, "Relu");
  g = field(1, node) + field(11, field(1, "x")) + field(12, field(1, "z"));
  std::string model =
      std::string("\x08\x08", 2) + field(7, g) + field(8, std::string("\x10\x0d", 2));
  std::string msg = error_of([&] { parse_onnx_model(model, "m.onnx"); });
  EXPECT_EQ(msg,
            "'m.onnx', node 'Relu_0' (Relu): input 'y' is not a graph input, an initializer or an "
            "output of an earlier node");
}

std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// `path` with the first `from` in it replaced by `to` (of the same length: protobuf's length
/// prefixes stay right).
void splice(const fs::path& path, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::string bytes = file_bytes(path);
  size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  bytes.replace(at, from.size(), to);
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(OnnxModel, WeightsInAnExternalDataFileAreWrittenAndReadBack) {
  fs::path dir = fs::temp_directory_path() / "kiln_external_data_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A Gemm's weights (random float32 [24, 40], 3840 bytes) and an int64 shape (24 bytes); the
  // writer puts the tensors of at least 16 bytes in "weights.bin", the smaller bias inside.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  OnnxModel m;
  m.opsets[""] = 13;
  m.initializers["w"] = runtime::NDArray::empty({24, 40}, DataType::Float(32));
  for (int64_t i = 0; i < 24 * 40; ++i) m.initializers["w"].data_as<float>()[i] = normal(rng);
  m.initializers["shape"] = runtime::NDArray::empty({3}, DataType::Int(64));
  for (int64_t i = 0; i < 3; ++i) m.initializers["shape"].data_as<int64_t>()[i] = 1000 + 7 * i;
  m.initializers["b"] = runtime::NDArray::empty({2}, DataType::Float(32));
  m.initializers["b"].data_as<float>()[0] = 0.25f;
  m.initializers["b"].data_as<float>()[1] = -3.5f;
  m.inputs.push_back({"x", DataType::Float(32)});
  m.outputs.push_back({"y", DataType::Float(32)});
  m.nodes.push_back({"Gemm", "", "gemm", {"x", "w", "b"}, {"y"}});
  const fs::path model = dir / "model.onnx", data = dir / "weights.bin";
  save_onnx_model(m, model.string(), {"weights.bin", 16});
  ASSERT_TRUE(fs::exists(data));
  EXPECT_GE(fs::file_size(data), 3840u + 24u);
  EXPECT_LT(fs::file_size(model), 1000u);  // the weights are not in the model
  OnnxModel r = load_onnx_model(model.string());
  ASSERT_EQ(r.initializers.size(), 3u);
  for (const auto& [name, a] : m.initializers) {
    const runtime::NDArray& b = r.initializers.at(name);
    EXPECT_EQ(b.shape(), a.shape()) << name;
    EXPECT_EQ(b.dtype(), a.dtype()) << name;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << name;
  }
  // Read through a relative path (the data file is found next to the model, not in the
  // current folder).
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.parent_path());
  EXPECT_EQ(load_onnx_model(dir.filename() / "model.onnx").initializers.at("w").nbytes(), 3840u);
  fs::current_path(cwd);

  // Parsed from bytes, the model has no folder to find its data file in.
  EXPECT_EQ(error_of([&] { parse_onnx_model(file_bytes(model), "bytes"); }),
            "'bytes': tensor 'shape' keeps its data in the external file 'weights.bin', which is "
            "found next to the model file: load the model from its file, not from bytes");
  // A data file too short for the last tensor, then missing.
  const std::string whole = file_bytes(data);
  std::ofstream(data, std::ios::binary) << whole.substr(0, whole.size() - 1);
  EXPECT_NE(error_of([&] {
              load_onnx_model(model.string());
            }).find("tensor 'w' has 3840 bytes at offset "),
            std::string::npos);
  fs::remove(data);
  EXPECT_EQ(error_of([&] { load_onnx_model(model.string()); }),
            "'" + model.string() + "': tensor 'shape': its external data file '" + data.string() +
                "': cannot open: No such file or directory");
  std::ofstream(data, std::ios::binary) << whole;
  // Locations outside the model's folder are refused before any file is opened.
  const std::string outside =
      "'" + model.string() + "': tensor 'shape' names its external data file '";
  const std::string rule =
      "': the location must be a path inside the model's folder (relative, "
      "without '..')";
  splice(model, "weights.bin", "../ghts.bin");
  EXPECT_EQ(error_of([&] { load_onnx_model(model.string()); }), outside + "../ghts.bin" + rule);
  splice(model, "../ghts.bin", "/etc/passwd");
  EXPECT_EQ(error_of([&] { load_onnx_model(model.string()); }), outside + "/etc/passwd" + rule);
  // An offset that is not a number.
  splice(model, "/etc/passwd", "weights.bin");
  const std::string bytes = file_bytes(model);
  const size_t at = bytes.find("offset") + 8;  // the value's first digit, after its tag and length
  std::string tampered = bytes;
  tampered[at] = 'x';
  std::ofstream(model, std::ios::binary) << tampered;
  EXPECT_NE(error_of([&] {
              load_onnx_model(model.string());
            }).find("has the external data entry offset = 'x"),
            std::string::npos);
  // The writer takes a file name for the data, not a path.
  EXPECT_EQ(error_of([&] {
              save_onnx_model(m, model.string(), {"../w.bin", 16});
            }),
            "writing ONNX: the external data file '../w.bin' must be a file name (it is written "
            "next to the model)");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::frontend
