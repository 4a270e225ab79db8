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
    bool all_supported = true, data_dependent = false;
    for (const OnnxNode& n : m.nodes) {
      all_supported &= std::find(ops.begin(), ops.end(), n.op_type) != ops.end();
      // Their outputs' static types are upper bounds (the run-time shape is smaller).
      data_dependent |=
          n.op_type == "NonZero" || n.op_type == "Unique" || n.op_type == "NonMaxSuppression";
    }
    if (!all_supported) continue;
    ++considered;
    try {
      graph::Graph g = graph::infer_types(import_onnx(m));
      for (size_t i = 0; i < g.outputs().size(); ++i) {
        fs::path ref = e.path() / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb");
        if (!fs::exists(ref)) continue;
        runtime::NDArray want = load_onnx_tensor(ref.string());
        const graph::TensorType& got = g.type_of(g.outputs()[i]);
        if (data_dependent) {
          ASSERT_EQ(got.shape.size(), want.shape().size()) << model << " output " << i;
          for (size_t d = 0; d < got.shape.size(); ++d)
            EXPECT_LE(want.shape()[d], got.shape[d]) << model << " output " << i << " axis " << d;
        } else {
          EXPECT_EQ(got.shape, want.shape()) << model << " output " << i;
        }
        DataType want_t = want.dtype();
        // ONNX 1.12's test data stores bfloat16 tensors as UINT16 bits.
        if (got.dtype.is_bfloat16() && want_t == DataType::UInt(16)) want_t = got.dtype;
        EXPECT_EQ(got.dtype, want_t) << model << " output " << i;
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
  fs::path model = kNodeTests / "test_bernoulli" / "model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string msg = error_of([&] { import_onnx(model.string()); });
  EXPECT_NE(msg.find("uses 1 unsupported ONNX operator:\n  Bernoulli (domain ai.onnx, opset 15, "
                     "node 'Bernoulli_0')"),
            std::string::npos)
      << msg;
}

TEST(OnnxImport, DropoutWithARunTimeTrainingModeIsRefusedNamingTheNode) {
  fs::path model = kNodeTests / "test_training_dropout" / "model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string msg = error_of([&] { import_onnx(model.string()); });
  EXPECT_NE(msg.find("node 'Dropout_0' (Dropout): input 2 (training_mode) must be a constant"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(model.string()), std::string::npos) << msg;
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

}  // namespace
}  // namespace kiln::frontend
