// Importing ONNX models into the graph IR: the node conformance models of supported operators
// convert and their inferred output types equal the reference outputs' types; unsupported
// operators are listed all at once; symbolic dimensions need a shape.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/transform.h"

namespace kiln::frontend {
namespace {

using ::kiln::testing::error_of;
namespace fs = std::filesystem;

const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

TEST(OnnxImport, ConvWithPaddingImportsWithRightType) {
  fs::path dir = kNodeTests / "test_conv_with_strides_padding";
  if (!fs::exists(dir)) GTEST_SKIP() << "libonnx-testdata is not installed";
  graph::Graph g = graph::infer_types(import_onnx((dir / "model.onnx").string()));
  runtime::NDArray want = load_onnx_tensor((dir / "test_data_set_0/output_0.pb").string());
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.type_of(g.outputs()[0]).shape, want.shape());
  EXPECT_NE(g.str().find("conv2d("), std::string::npos) << g.str();
}

TEST(OnnxImport, SupportedNodeTestsConvertWithTheReferenceTypes) {
  if (!fs::exists(kNodeTests)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::vector<std::string> ops = supported_onnx_ops();
  int converted = 0, refused = 0, considered = 0;
  for (const auto& e : fs::directory_iterator(kNodeTests)) {
    fs::path model = e.path() / "model.onnx";
    if (!fs::exists(model)) continue;
    OnnxModel m = load_onnx_model(model.string());
    bool all_supported = true;
    for (const OnnxNode& n : m.nodes)
      all_supported &= std::find(ops.begin(), ops.end(), n.op_type) != ops.end();
    if (!all_supported) continue;
    ++considered;
    try {
      graph::Graph g = graph::infer_types(import_onnx(m));
      for (size_t i = 0; i < g.outputs().size(); ++i) {
        fs::path ref = e.path() / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb");
        if (!fs::exists(ref)) continue;
        runtime::NDArray want = load_onnx_tensor(ref.string());
        const graph::TensorType& got = g.type_of(g.outputs()[i]);
        EXPECT_EQ(got.shape, want.shape()) << model << " output " << i;
        EXPECT_EQ(got.dtype, want.dtype()) << model << " output " << i;
      }
      ++converted;
    } catch (const Error& err) {
      // An explicit refusal (an unsupported form of a supported op) must say where.
      std::string what = err.what();
      EXPECT_TRUE(what.find(model.string()) != std::string::npos ||
                  what.find("node %") != std::string::npos)
          << what;
      ++refused;
    }
  }
  std::cout << "ONNX node tests with supported ops: " << considered << "; converted " << converted
            << ", refused " << refused << "\n";
  EXPECT_GT(converted, 100);
}

TEST(OnnxImport, AllUnsupportedOperatorsInOneMessage) {
  fs::path model = kNodeTests / "test_det_2d" / "model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string msg = error_of([&] { import_onnx(model.string()); });
  EXPECT_NE(msg.find("uses 1 unsupported ONNX operator:\n  Det (domain ai.onnx, opset"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("node 'Det_0'"), std::string::npos) << msg;
}

TEST(OnnxImport, ThreeDimensionalPoolIsRefusedNamingTheNode) {
  fs::path model = kNodeTests / "test_maxpool_3d_default" / "model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string msg = error_of([&] { import_onnx(model.string()); });
  EXPECT_NE(msg.find("(MaxPool): a 3-D window (only 2-D) is not supported yet"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find(model.string()), std::string::npos) << msg;
}

TEST(OnnxImport, CastToBfloat16IsRefused) {
  fs::path model = kNodeTests / "test_cast_FLOAT_to_BFLOAT16" / "model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string msg = error_of([&] { import_onnx(model.string()); });
  EXPECT_NE(msg.find("(Cast): Cast to this element type is not supported yet"), std::string::npos)
      << msg;
}

TEST(OnnxImport, ThreeDimensionalConvTransposeAndDiagonalEinsumAreRefused) {
  struct Case {
    const char* test;
    const char* message;
  };
  for (Case k :
       {Case{"test_convtranspose_3d",
             "(ConvTranspose): ConvTranspose of a 5-D input (only 1-D and 2-D windows)"},
        Case{"test_einsum_batch_diagonal",
             "(Einsum): Einsum with a repeated subscript in one operand is not supported"}}) {
    fs::path model = kNodeTests / k.test / "model.onnx";
    if (!fs::exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
    std::string msg = error_of([&] { import_onnx(model.string()); });
    EXPECT_NE(msg.find(k.message), std::string::npos) << msg;
  }
}

TEST(OnnxImport, ResizeAndConvTransposeImportWithTheReferenceTypes) {
  for (const char* name : {"test_resize_upsample_scales_linear", "test_convtranspose",
                           "test_convtranspose_1d", "test_lstm_defaults"}) {
    fs::path dir = kNodeTests / name;
    if (!fs::exists(dir)) GTEST_SKIP() << "libonnx-testdata is not installed";
    OnnxModel m = load_onnx_model((dir / "model.onnx").string());
    if (std::string(name).find("resize") != std::string::npos) {
      // scales is a graph input in the test; a deployed model has it as a constant.
      m.initializers["scales"] =
          load_onnx_tensor((dir / "test_data_set_0" / "input_1.pb").string());
      m.inputs.resize(1);
    }
    graph::Graph g = graph::infer_types(import_onnx(m));
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      runtime::NDArray want = load_onnx_tensor(
          (dir / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb")).string());
      EXPECT_EQ(g.type_of(g.outputs()[i]).shape, want.shape()) << name << " output " << i;
    }
  }
}

TEST(OnnxImport, ShapeOfAComputedTensorBecomesAConstant) {
  fs::path model = kNodeTests / "test_shape" / "model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
  graph::Graph g = import_onnx(model.string());
  ASSERT_EQ(g.outputs().size(), 1u);
  const graph::Node& out = g.node(g.outputs()[0].node);
  ASSERT_TRUE(out.is_constant()) << g.str();
  runtime::NDArray want =
      load_onnx_tensor((kNodeTests / "test_shape" / "test_data_set_0/output_0.pb").string());
  ASSERT_EQ(out.value.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_EQ(out.value.data_as<int64_t>()[i], want.data_as<int64_t>()[i]);
}

TEST(OnnxImport, SplitAndTriluImportWithTheReferenceTypes) {
  for (const char* name : {"test_split_equal_parts_1d", "test_split_equal_parts_2d", "test_triu"}) {
    fs::path dir = kNodeTests / name;
    if (!fs::exists(dir)) GTEST_SKIP() << "libonnx-testdata is not installed";
    graph::Graph g = graph::infer_types(import_onnx((dir / "model.onnx").string()));
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      runtime::NDArray want = load_onnx_tensor(
          (dir / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb")).string());
      EXPECT_EQ(g.type_of(g.outputs()[i]).shape, want.shape()) << name << " output " << i;
    }
  }
}

TEST(OnnxImport, ModOfFloat16IsRefusedNamingTheNode) {
  fs::path model = kNodeTests / "test_mod_mixed_sign_float16" / "model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string msg = error_of([&] { import_onnx(model.string()); });
  EXPECT_NE(msg.find("node 'Mod_0' (Mod): Mod of float16 is not supported yet"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace kiln::frontend
