// Reading ONNX models and tensors: a known conformance model read field by field, every model
// of Debian's ONNX node test suite read without a crash (each either loads or is refused with a
// kiln::Error), and the errors for missing, truncated and foreign files.
#include "kiln/frontend/onnx_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/error.h"

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

}  // namespace
}  // namespace kiln::frontend
