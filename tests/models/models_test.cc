// End-to-end model tests: whole networks exported from PyTorch (scripts/export_models.py, run by
// the ctest fixture kiln-test-models-export into KILN_MODELS_DIR) are imported from ONNX,
// compiled into a module directory, loaded back with the runtime's GraphExecutor, run on the
// saved random input and compared with PyTorch's output for that input. The error measure is
// max|kiln - torch| / max|torch| over the whole output (a NaN or shape mismatch fails). Each
// model is a separate test (ModelsTest.MatchesPyTorch/<model>_O<level>), and ctest runs each as
// its own entry, so a failure names the model and the stage (import, compile, load, run) that
// failed.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/ndarray_access.h"
#include "common/opencl.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/npy.h"
#include "kiln/support/error.h"

namespace {

using namespace kiln;  // NOLINT
using runtime::NDArray;
using Clock = std::chrono::steady_clock;

constexpr double kMaxRelError = 1e-4;

struct ModelCase {
  std::string model;   ///< file stem in KILN_MODELS_DIR
  int opt_level;       ///< graph::BuildOptions::opt_level
  std::string target;  ///< "" for the host CPU, else a GPU target ("opencl": PoCL on this CPU)
};

std::string case_name(const ModelCase& c) {
  std::string n = c.model + "_O" + std::to_string(c.opt_level);
  return c.target.empty() ? n : n + "_" + c.target;
}

/// How gtest prints a case in failure messages.
void PrintTo(const ModelCase& c, std::ostream* os) { *os << case_name(c); }

std::string models_dir() {
  const char* d = std::getenv("KILN_MODELS_DIR");
  return d && *d ? d : "build/models";
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// max|a - b| / max|b| over all elements; infinity for a NaN in `a`, a size mismatch or an
/// all-zero reference (which would make the measure meaningless).
double relative_error(const NDArray& a, const NDArray& b) {
  if (a.numel() != b.numel()) return INFINITY;
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = kiln::testing::element(a, i), y = kiln::testing::element(b, i);
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    num = std::max(num, std::abs(x - y));
    den = std::max(den, std::abs(y));
  }
  return den > 0 ? num / den : INFINITY;
}

class ModelsTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelsTest, MatchesPyTorch) {
  const ModelCase& c = GetParam();
  namespace fs = std::filesystem;
  fs::path dir = models_dir();
  fs::path onnx = dir / (c.model + ".onnx");
  fs::path input_file = dir / (c.model + ".input.npy");
  fs::path ref_file = dir / (c.model + ".ref.npy");
  ASSERT_TRUE(fs::exists(onnx)) << onnx << " is missing: run /usr/bin/python3 "
                                << "scripts/export_models.py " << dir.string()
                                << " (the ctest fixture kiln-test-models-export does; for the "
                                << "zoo's NAME_small, bench/zoo/export_zoo.py --small "
                                << dir.string() << ", the fixture kiln-test-zoo-export)";
  if (c.target == "opencl") {
    std::string why;
    if (!kiln::testing::opencl_device(&why)) GTEST_SKIP() << "no OpenCL device: " << why;
  }
  NDArray input = runtime::load_npy(input_file.string());
  NDArray ref = runtime::load_npy(ref_file.string());

  // Each stage reports its own failure, so "unsupported operator" and the like say where.
  auto t0 = Clock::now();
  graph::Graph g;
  try {
    g = frontend::import_onnx(onnx.string());
  } catch (const Error& e) {
    FAIL() << c.model << ": import failed: " << e.what();
  }
  double import_s = seconds_since(t0);

  fs::path module_dir = dir / (case_name(c) + ".kiln");
  graph::BuildOptions opt;
  opt.opt_level = c.opt_level;
  t0 = Clock::now();
  graph::CompiledModule m;
  try {
    m = graph::compile_to_directory(g, c.target.empty() ? Target::host() : Target(c.target), opt,
                                    module_dir.string());
  } catch (const Error& e) {
    FAIL() << c.model << ": compile (opt level " << c.opt_level << ") failed: " << e.what();
  }
  double compile_s = seconds_since(t0);

  runtime::GraphExecutor ex;
  try {
    ex = runtime::GraphExecutor::load(module_dir.string());
  } catch (const Error& e) {
    FAIL() << c.model << ": loading " << module_dir << " failed: " << e.what();
  }
  ASSERT_EQ(ex.num_inputs(), 1) << c.model;
  runtime::TensorInfo in_info = ex.input_info(0);
  EXPECT_EQ(in_info.shape, input.shape()) << c.model << ": input " << in_info.name;
  EXPECT_EQ(in_info.dtype, input.dtype()) << c.model << ": input " << in_info.name;
  ASSERT_GE(ex.num_outputs(), 1) << c.model;
  runtime::TensorInfo out_info = ex.output_info(0);
  ASSERT_EQ(out_info.shape, ref.shape()) << c.model << ": output " << out_info.name;
  ASSERT_EQ(out_info.dtype, DataType::Float(32)) << c.model << ": output " << out_info.name;

  t0 = Clock::now();
  try {
    ex.set_input(0, input);
    ex.run();
  } catch (const Error& e) {
    FAIL() << c.model << ": run failed: " << e.what();
  }
  double run_s = seconds_since(t0);
  NDArray out = ex.get_output(0);
  ASSERT_EQ(out.shape(), ref.shape()) << c.model;

  double rel = relative_error(out, ref);
  std::printf(
      "[ model    ] %s: relative error %.3g (import %.2f s, compile %.2f s, %d kernels, "
      "run %.3f s)\n",
      case_name(c).c_str(), rel, import_s, compile_s, m.num_kernels, run_s);
  RecordProperty("relative_error", std::to_string(rel));
  EXPECT_LT(rel, kMaxRelError) << c.model << " (opt level " << c.opt_level
                               << "): max|kiln - torch| / max|torch| = " << rel;
}

// Every model at the default opt level (fusion, BN folding), plus one CNN unoptimized.
const int kDefaultOpt = graph::BuildOptions{}.opt_level;
INSTANTIATE_TEST_SUITE_P(
    Models, ModelsTest,
    ::testing::Values(ModelCase{"resnet18", kDefaultOpt}, ModelCase{"mobilenet_v2", kDefaultOpt},
                      ModelCase{"dqn", kDefaultOpt}, ModelCase{"dcgan", kDefaultOpt},
                      ModelCase{"lstm_lm", kDefaultOpt}, ModelCase{"resnet18", 0}),
    [](const ::testing::TestParamInfo<ModelCase>& info) { return case_name(info.param); });

// The five models compiled for OpenCL (GPU schedules: thread binding, shared-memory tiles,
// barriers) and run on PoCL on this CPU.
INSTANTIATE_TEST_SUITE_P(OpenCL, ModelsTest,
                         ::testing::Values(ModelCase{"resnet18", kDefaultOpt, "opencl"},
                                           ModelCase{"mobilenet_v2", kDefaultOpt, "opencl"},
                                           ModelCase{"dqn", kDefaultOpt, "opencl"},
                                           ModelCase{"dcgan", kDefaultOpt, "opencl"},
                                           ModelCase{"lstm_lm", kDefaultOpt, "opencl"}),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           return case_name(info.param);
                         });

// The model zoo of kiln-bench-zoo (issue 27) in its small CI variants (bench/zoo/export_zoo.py
// --small, run by the ctest fixture kiln-test-zoo-export into the same directory): the CNNs at
// 64x64 (alexnet and vgg16_bn at 224x224), the transformers with 2 layers / one block per stage
// and sequence 16, the video models on a 4x32x32 clip. Their references are computed in float64.
INSTANTIATE_TEST_SUITE_P(
    Zoo, ModelsTest,
    ::testing::Values(
        ModelCase{"resnext50_32x4d_small", kDefaultOpt},
        ModelCase{"wide_resnet50_2_small", kDefaultOpt},
        ModelCase{"regnet_x_800mf_small", kDefaultOpt},
        ModelCase{"shufflenet_v2_x0_5_small", kDefaultOpt},
        ModelCase{"efficientnet_b3_small", kDefaultOpt},
        ModelCase{"efficientnet_v2_s_small", kDefaultOpt},
        ModelCase{"mobilenet_v3_large_small", kDefaultOpt},
        ModelCase{"mnasnet0_5_small", kDefaultOpt}, ModelCase{"densenet169_small", kDefaultOpt},
        ModelCase{"alexnet_small", kDefaultOpt}, ModelCase{"vgg16_bn_small", kDefaultOpt},
        ModelCase{"convnext_small_small", kDefaultOpt}, ModelCase{"vit_b_16_small", kDefaultOpt},
        ModelCase{"swin_t_small", kDefaultOpt}, ModelCase{"bert_base_small", kDefaultOpt},
        ModelCase{"gpt2_small_small", kDefaultOpt}, ModelCase{"r3d_18_small", kDefaultOpt},
        ModelCase{"r2plus1d_18_small", kDefaultOpt}),
    [](const ::testing::TestParamInfo<ModelCase>& info) { return case_name(info.param); });

}  // namespace
