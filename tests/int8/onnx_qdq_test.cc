// int8 quantized models against ONNX Runtime: small QDQ models written by ONNX Runtime's
// quantize_static (scripts/qdq_fixtures.py: conv 1x1 / 3x3 / 7x7 stride 2 / asymmetric padding /
// depthwise (stride 1 and 2, 16 / 32 / 40 channels) / grouped (8 groups of 4, 3 of 16, stride
// 2) / 24 and 40 outputs, Gemm, MatMul (2-D, and of [2, 6, K] data with a bias), a
// residual block, MobileNet-v2's inverted residual block; per-tensor and per-channel weights,
// uint8 and int8 activations, with and without bias, Relu and Clip) are imported, realized into
// integer products (quantize_realize), compiled for the host and run on the fixture's random
// input; the output must equal ONNX Runtime's int8 output within one quantization unit, and
// exactly on a VNNI CPU (the number of exact elements is printed). The fixtures are generated once
// per build folder into qdq-fixtures/ of the build folder with the Python of KILN_ORT_PYTHON (the
// benchmark venv, which has onnxruntime); without it the tests are skipped, saying why.
// KilnQuantize: `kiln quantize` on the residual block's float model writes a QDQ model that ONNX
// Runtime runs and Kiln realizes and matches within one unit, and names an empty calibration
// folder.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "common/temp_dir.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/graph/quantize_calibration.h"
#include "kiln/graph/transform.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/npy.h"
#include "kiln/target/target.h"

#ifndef KILN_ORT_PYTHON
#define KILN_ORT_PYTHON "python3"
#endif
#ifndef KILN_CLI
#define KILN_CLI "kiln"
#endif
#ifndef KILN_BINARY_DIR
#define KILN_BINARY_DIR "."
#endif
#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;
using runtime::NDArray;

/// The fixture folder, generated on first use; empty (with `why`) when it cannot be.
/// The Python that has onnxruntime.
std::string ort_python() {
  const char* py_env = std::getenv("KILN_ORT_PYTHON");
  return py_env && *py_env ? py_env : KILN_ORT_PYTHON;
}

const fs::path& fixtures(std::string* why) {
  static std::string reason;
  static const fs::path dir = []() -> fs::path {
    if (const char* d = std::getenv("KILN_QDQ_DIR"); d && *d) return d;
    const std::string py = ort_python();
    if (std::system((py + " -c 'import onnxruntime' >/dev/null 2>&1").c_str()) != 0) {
      reason = "no onnxruntime in " + py + " (set KILN_ORT_PYTHON to a Python that has it)";
      return {};
    }
    // Generated once per build folder (ctest runs each case in a process of its own), into a
    // temporary folder renamed into place, so that parallel cases never see half a folder;
    // again when the script is newer.
    const fs::path script = fs::path(KILN_SOURCE_DIR) / "scripts" / "qdq_fixtures.py";
    const fs::path d = fs::path(KILN_BINARY_DIR) / "qdq-fixtures";
    std::error_code ec;
    auto fresh = [&] {
      return fs::exists(d / "done") &&
             fs::last_write_time(d / "done", ec) >= fs::last_write_time(script, ec);
    };
    if (fresh()) return d;
    const fs::path tmp = d.string() + ".tmp" + std::to_string(::getpid());
    const std::string cmd =
        py + " " + script.string() + " " + tmp.string() + " >" + (tmp.string() + ".log") + " 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      reason = "scripts/qdq_fixtures.py failed (see " + tmp.string() + ".log)";
      return {};
    }
    std::ofstream(tmp / "done") << "ok\n";
    fs::remove(tmp.string() + ".log", ec);
    if (fresh()) {  // another process was first: use its folder (never replace a fresh one)
      fs::remove_all(tmp, ec);
      return d;
    }
    if (fs::exists(d)) {  // stale: the script changed
      const fs::path old = d.string() + ".old" + std::to_string(::getpid());
      fs::rename(d, old, ec);
      fs::remove_all(old, ec);
    }
    fs::rename(tmp, d, ec);
    if (!fs::exists(d / "done")) {
      reason = "cannot move the fixtures into " + d.string() + ": " + ec.message();
      return {};
    }
    fs::remove_all(tmp, ec);
    return d;
  }();
  *why = reason;
  return dir;
}

double out_scale(const fs::path& json) {
  std::ifstream f(json);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t k = s.find(':');
  return k == std::string::npos ? 0 : std::atof(s.c_str() + k + 1);
}

/// The ops of `g`, counted.
std::map<std::string, int> op_counts(const graph::Graph& g) {
  std::map<std::string, int> r;
  for (const graph::Node& n : g.nodes())
    if (n.is_op()) ++r[n.op];
  return r;
}

/// Checks that every product of optimized graph `g` is realized: as an integer kernel, or, where
/// the target has none for it (no VNNI; grouped convolutions; channels in no block of 8), as a
/// float product on the integer values followed by its requantisation (one round_even each);
/// no plain int32 qnn_conv2d / qnn_dense is left (they run at a few percent of the peak). Returns
/// the number of products in float sums.
int check_products_realized(const graph::Graph& g) {
  std::map<std::string, int> ops = op_counts(g);
  const int floats = ops["conv2d"] + ops["conv2d_nchwc"] + ops["conv2d_grouped_nchwc"] +
                     ops["depthwise_conv2d_nchwc"] + ops["dense"] + ops["dense_packed"] +
                     ops["matmul"];
  EXPECT_EQ(floats, ops["round_even"]) << g.str();
  EXPECT_EQ(ops["qnn_conv2d"] + ops["qnn_dense"], 0) << g.str();
  EXPECT_GT(ops["qnn_conv2d_nchwc"] + ops["qnn_depthwise_conv2d_nchwc"] + ops["qnn_dense_packed"] +
                floats,
            0)
      << g.str();
  return floats;
}

class QdqModel : public ::testing::TestWithParam<std::string> {};

/// The largest difference between `got` and `want` in units of `step`; `exact` gets the count
/// of equal elements.
int64_t max_units(const NDArray& got, const NDArray& want, double step, int64_t* exact) {
  int64_t worst = 0;
  *exact = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const int64_t u =
        std::llround(std::abs(double(got.data_as<float>()[i]) - want.data_as<float>()[i]) / step);
    *exact += u == 0;
    worst = std::max(worst, u);
  }
  return worst;
}

TEST_P(QdqModel, MatchesOnnxRuntimeWithinOneUnit) {
  std::string why;
  const fs::path& dir = fixtures(&why);
  if (dir.empty()) GTEST_SKIP() << why;
  const std::string name = GetParam();
  graph::Graph g = import_onnx((dir / (name + ".onnx")).string());

  // Every product is realized: an integer kernel where the host has one, else the float product
  // on the integer values (below for a grouped convolution, everywhere without VNNI).
  graph::Graph opt = graph::optimize(g, 2, Target::host());
  std::map<std::string, int> ops = op_counts(opt);
  const bool float_sums = name.rfind("grouped", 0) == 0 || name.rfind("conv_o12", 0) == 0;
  check_products_realized(opt);
  // The residual Add and the pooling run in integers too (QLinearAdd / QLinearGlobalAveragePool).
  if (name.rfind("residual", 0) == 0) {
    EXPECT_EQ(ops["qnn_add"], 1) << opt.str();
  }
  if (name.rfind("pool", 0) == 0) {
    EXPECT_EQ(ops["qnn_global_avg_pool2d"], 1) << opt.str();
  }
  // MaxPool between a dequantize and a quantize of the same parameters pools the integers:
  // int8, carried as uint8 between VNNI kernels (which multiply unsigned data), as int8 where
  // the float products read them.
  for (const graph::Node& n : opt.nodes()) {
    if (n.is_op() && n.op == "max_pool2d") {
      EXPECT_EQ(opt.type_of(n.inputs[0]).dtype,
                Target::host().has_feature("avx512vnni") ? DataType::UInt(8) : DataType::Int(8))
          << opt.str();
    }
  }
  if (name.find("maxpool") != std::string::npos) {
    EXPECT_EQ(ops["max_pool2d"], 1) << opt.str();
  }
  // A convolution no integer kernel takes (grouped and not depthwise, or 12 output channels: no
  // block of 8) gets its integer sums from the blocked float convolution on integer-valued data
  // and weights, requantised as ONNX Runtime does (exact: every element below equals ONNX
  // Runtime's).
  if (float_sums) {
    EXPECT_EQ(ops["qnn_conv2d"], 0) << opt.str();
    EXPECT_EQ(ops["conv2d_grouped_nchwc"] + ops["conv2d_nchwc"], 1) << opt.str();
    EXPECT_EQ(ops["round_even"], 1) << opt.str();
  }
  // On a VNNI CPU every product takes an NCHWc kernel (convolutions with 8k outputs the VNNI
  // one, depthwise convolutions the int32 one), and an int8 chain of 16- and 8-channel blocks
  // (MobileNet-v2's inverted residual block: 24 → 96 → depthwise → 24, + x) runs without a
  // layout transform inside it: only the model's float input and output are converted.
  if (Target::host().has_feature("avx512vnni")) {
    EXPECT_EQ(ops["qnn_conv2d"] + ops["qnn_dense"], 0) << opt.str();
    const bool depthwise =
        name.find("depthwise") != std::string::npos || name.rfind("inverted_residual", 0) == 0;
    EXPECT_EQ(ops["qnn_depthwise_conv2d_nchwc"], depthwise ? 1 : 0) << opt.str();
    if (name.rfind("inverted_residual", 0) == 0) {
      EXPECT_EQ(ops["qnn_conv2d_nchwc"], 2) << opt.str();
      EXPECT_LE(ops["layout_transform"], 2) << opt.str();
      EXPECT_EQ(ops["qnn_add"], name.find("_s2_") == std::string::npos ? 1 : 0) << opt.str();
    }
    // Each int8 NCHWc convolution carries its tuning task (kiln tune tunes it, a log's best
    // config is built), keyed by its logical workload.
    for (const graph::Node& n : opt.nodes()) {
      if (!n.is_op() || (n.op != "qnn_conv2d_nchwc" && n.op != "qnn_depthwise_conv2d_nchwc"))
        continue;
      ASSERT_TRUE(static_cast<bool>(n.impl.task)) << n.name;
      const std::string key = n.impl.task().key();
      EXPECT_EQ(key.rfind(n.op == "qnn_conv2d_nchwc"
                              ? "qnn_conv2d_nchwc_cpu(qnn_conv2d N1 C"
                              : "qnn_depthwise_conv2d_nchwc_cpu(qnn_depthwise conv2d N1 C",
                          0),
                0u)
          << key;
    }
  }

  graph::CompiledModule cm = graph::build_module(g, Target::host(), {});
  runtime::GraphExecutor ex = runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m");
  ex.set_input("x", runtime::load_npy((dir / (name + "_in.npy")).string()));
  ex.run();
  NDArray got = ex.get_output(0);
  NDArray want = runtime::load_npy((dir / (name + "_ort.npy")).string());
  const double s = out_scale(dir / (name + ".json"));
  ASSERT_GT(s, 0);
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), DataType::Float(32));
  int64_t exact = 0;
  const int64_t worst = max_units(got, want, s, &exact);
  std::cout << name << ": " << exact << " of " << want.numel()
            << " elements equal to ONNX Runtime's, the others within " << worst << " unit(s)\n";
  if (Target::host().has_feature("avx512vnni")) {
    // On a VNNI CPU ONNX Runtime's int8 kernels accumulate exactly too: every element equal.
    EXPECT_EQ(worst, 0) << name;
  } else {
    // Without VNNI, MLAS's u8 x s8 kernels sum pairs of products in int16 and saturate (a
    // Zen 3 host: 4 of 1600 elements 71 units off): the reference is then ONNX Runtime with its
    // graph optimizations off, which dequantizes, computes in float and quantizes.
    NDArray ref = runtime::load_npy((dir / (name + "_ort_float.npy")).string());
    ASSERT_EQ(got.shape(), ref.shape());
    const int64_t worst_float = max_units(got, ref, s, &exact);
    std::cout << name << ": " << exact << " of " << ref.numel()
              << " elements equal to ONNX Runtime's float path, the others within " << worst_float
              << " unit(s)\n";
    EXPECT_LE(worst_float, 1) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ort, QdqModel,
    ::testing::Values("conv3x3_pc_s8_bias_relu", "conv3x3_pc_u8_bias", "conv1x1_pt_u8_nobias",
                      "conv1x1_pt_s8_relu", "conv7x7_s2_stem_s8", "conv3x3_s2_asym_s8",
                      "conv3x3_clip6_s8", "conv_o24_s8", "depthwise_s8", "gemm_pc_s8_bias",
                      "gemm_pt_u8_bias", "matmul_pt_s8", "residual_s8", "residual_u8",
                      "pool_head_s8", "depthwise_s2_u8_relu", "depthwise_c40_clip6_s8",
                      "conv_c24_to_o40_u8", "inverted_residual_s8", "inverted_residual_s2_u8",
                      "stem_maxpool_s8", "grouped_relu_s8", "grouped_s2_u8", "matmul_rows_u8_bias",
                      "conv_o12_relu_s8"),
    [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

/// Fixtures on CPUs with fewer features: AVX-512 without VNNI (the int8 depthwise kernel, the
/// other products' integer sums from float products) and AVX2 (every product's sums from the
/// float product): within one unit of ONNX Runtime's output there too (of its float path on a
/// host without VNNI, where its own int8 kernels saturate: MatchesOnnxRuntimeWithinOneUnit).
TEST(QdqModelOtherTargets, FallbacksMatchOnnxRuntime) {
  std::string why;
  const fs::path& dir = fixtures(&why);
  if (dir.empty()) GTEST_SKIP() << why;
  const Target host = Target::host();
  std::vector<std::string> targets;
  if (host.has_feature("avx2")) targets.push_back("llvm -mcpu=haswell");
  if (host.has_feature("avx512f") && host.has_feature("avx512bw"))
    targets.push_back("llvm -mcpu=skylake-avx512");
  if (targets.empty()) GTEST_SKIP() << "the host runs neither AVX2 nor AVX-512 code";
  for (const std::string& t : targets) {
    const Target target(t);
    for (const char* name : {"inverted_residual_s8", "depthwise_c40_clip6_s8",
                             "conv3x3_pc_s8_bias_relu", "gemm_pc_s8_bias", "matmul_rows_u8_bias"}) {
      graph::Graph g = import_onnx((dir / (std::string(name) + ".onnx")).string());
      const graph::Graph opt = graph::optimize(g, 2, target);
      check_products_realized(opt);
      std::map<std::string, int> ops = op_counts(opt);
      EXPECT_EQ(ops["qnn_conv2d_nchwc"], 0) << t << " " << name;  // no VNNI
      const std::string n = name;
      const bool depthwise =
          n.find("depthwise") != std::string::npos || n.rfind("inverted_residual", 0) == 0;
      EXPECT_EQ(ops["qnn_depthwise_conv2d_nchwc"],
                depthwise && target.has_feature("avx512f") ? 1 : 0)
          << t << " " << name;
      graph::CompiledModule cm = graph::build_module(g, target, {});
      runtime::GraphExecutor ex =
          runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m");
      ex.set_input("x", runtime::load_npy((dir / (std::string(name) + "_in.npy")).string()));
      ex.run();
      const char* ref = host.has_feature("avx512vnni") ? "_ort.npy" : "_ort_float.npy";
      NDArray want = runtime::load_npy((dir / (std::string(name) + ref)).string());
      const double s = out_scale(dir / (std::string(name) + ".json"));
      NDArray got = ex.get_output(0);
      ASSERT_EQ(got.shape(), want.shape());
      int64_t worst = 0;
      for (int64_t i = 0; i < want.numel(); ++i)
        worst = std::max<int64_t>(
            worst,
            std::llround(std::abs(double(got.data_as<float>()[i]) - want.data_as<float>()[i]) / s));
      EXPECT_LE(worst, 1) << t << " " << name;
    }
  }
}

/// Runs `cmd`; returns its exit status and its output (stdout and stderr).
int run_command(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out->append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/// A folder of this process for what a test writes (the fixtures are shared; removed at exit).
fs::path scratch() {
  static const fs::path d = kiln::testing::test_temp_dir("int8_test");
  return d;
}

/// `kiln quantize --method METHOD` of the residual block's float model: ONNX Runtime runs the
/// written model, Kiln realizes it and agrees with ONNX Runtime within one unit, and it stays
/// close to the float model.
void check_kiln_quantize(const fs::path& dir, const std::string& method) {
  const fs::path work = scratch();
  const fs::path out = work / ("kiln_quantized_" + method + ".onnx");
  std::string log;
  ASSERT_EQ(
      run_command(std::string(KILN_CLI) + " quantize " + (dir / "quantize_src_fp32.onnx").string() +
                      " -o " + out.string() + " --calibrate " + (dir / "calibration").string() +
                      " --method " + method,
                  &log),
      0)
      << log;
  EXPECT_NE(log.find("2 products"), std::string::npos) << log;
  EXPECT_NE(log.find("(" + method + " over 8 calibration samples)"), std::string::npos) << log;
  // ONNX Runtime loads and runs it.
  const fs::path x = dir / "residual_s8_in.npy",
                 y = work / ("kiln_quantized_" + method + "_ort.npy");
  std::string ort_log;
  ASSERT_EQ(run_command(ort_python() + " " + KILN_SOURCE_DIR + "/scripts/qdq_fixtures.py --ort " +
                            out.string() + " " + x.string() + " " + y.string(),
                        &ort_log),
            0)
      << ort_log;
  // Kiln realizes every product and the residual Add in integers and agrees with it.
  graph::Graph g = import_onnx(out.string());
  const graph::Graph opt = graph::optimize(g, 2, Target::host());
  EXPECT_EQ(check_products_realized(opt), Target::host().has_feature("avx512vnni") ? 0 : 2);
  EXPECT_EQ(op_counts(opt)["qnn_add"], 1);
  graph::CompiledModule cm = graph::build_module(g, Target::host(), {});
  runtime::GraphExecutor ex = runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m");
  ex.set_input("x", runtime::load_npy(x.string()));
  ex.run();
  int64_t exact = 0;
  const int64_t worst =
      max_units(ex.get_output(0), runtime::load_npy(y.string()),
                out_scale(work / ("kiln_quantized_" + method + "_ort.json")), &exact);
  EXPECT_LE(worst, 1) << exact << " exact";
  // And the quantized model stays close to the float one.
  graph::Graph gf = import_onnx((dir / "quantize_src_fp32.onnx").string());
  graph::CompiledModule cf = graph::build_module(gf, Target::host(), {});
  runtime::GraphExecutor ef = runtime::GraphExecutor::create(cf.graph_json, cf.lib, cf.params, "f");
  ef.set_input("x", runtime::load_npy(x.string()));
  ef.run();
  NDArray a = ex.get_output(0), b = ef.get_output(0);
  double num = 0, den = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    num = std::max(num, std::abs(double(a.data_as<float>()[i]) - b.data_as<float>()[i]));
    den = std::max(den, std::abs(double(b.data_as<float>()[i])));
  }
  double l2 = 0, n2 = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = double(a.data_as<float>()[i]) - b.data_as<float>()[i];
    l2 += d * d;
    n2 += double(b.data_as<float>()[i]) * b.data_as<float>()[i];
  }
  std::cout << method << ": int8 vs float32: max error " << num << " of " << den << ", relative L2 "
            << std::sqrt(l2 / n2) << "\n";
  EXPECT_LT(num / den, 0.1) << method << ": int8 vs float32: max error " << num << " of " << den;
  EXPECT_LT(std::sqrt(l2 / n2), 0.05) << method;
}

TEST(KilnQuantize, WritesAQdqModelThatOnnxRuntimeAndKilnRunAlike) {
  std::string why;
  const fs::path& dir = fixtures(&why);
  if (dir.empty()) GTEST_SKIP() << why;
  check_kiln_quantize(dir, "minmax");
}

TEST(KilnQuantize, EntropyCalibrationToo) {
  std::string why;
  const fs::path& dir = fixtures(&why);
  if (dir.empty()) GTEST_SKIP() << why;
  check_kiln_quantize(dir, "entropy");
}

TEST(EntropyCalibration, RangeOfTheCalibrationSamplesIsOnnxRuntimes) {
  // The residual block's 8 calibration inputs, collected one at a time: the histogram grows
  // past its first 128 bins as later samples widen the range, as ONNX Runtime's does.
  std::string why;
  const fs::path& dir = fixtures(&why);
  if (dir.empty()) GTEST_SKIP() << why;
  const fs::path batch = dir / "calibration" / "batch.npy", out = scratch() / "entropy.json";
  std::string log;
  ASSERT_EQ(run_command(ort_python() + " " + KILN_SOURCE_DIR + "/scripts/qdq_fixtures.py " +
                            "--entropy-range " + batch.string() + " " + out.string(),
                        &log),
            0)
      << log;
  std::ifstream f(out);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto field = [&](const std::string& k) {
    const size_t at = text.find("\"" + k + "\":");
    EXPECT_NE(at, std::string::npos) << k << " in " << text;
    return at == std::string::npos ? 0.0 : std::atof(text.c_str() + at + k.size() + 3);
  };
  NDArray x = runtime::load_npy(batch.string());
  const int64_t n = x.shape()[0], per = x.numel() / n;
  graph::Histogram h;
  for (int64_t s = 0; s < n; ++s) h.add(x.data_as<float>() + s * per, per, 128);
  const auto [lo, hi] = graph::entropy_range(h, 128);
  EXPECT_EQ(double(h.counts.size()), field("bins"));
  EXPECT_GT(h.counts.size(), 128u);
  EXPECT_NEAR(lo, field("lo"), 1e-5 * std::abs(lo));
  EXPECT_NEAR(hi, field("hi"), 1e-5 * std::abs(hi));
}

TEST(KilnQuantize, SaysWhatIsWrongWithTheCalibrationFolder) {
  std::string why;
  const fs::path& dir = fixtures(&why);
  if (dir.empty()) GTEST_SKIP() << why;
  const fs::path empty = scratch() / "empty_calibration";
  fs::create_directories(empty);
  std::string log;
  EXPECT_EQ(run_command(std::string(KILN_CLI) + " quantize " +
                            (dir / "quantize_src_fp32.onnx").string() + " -o " +
                            (scratch() / "never.onnx").string() + " --calibrate " + empty.string(),
                        &log),
            1);
  EXPECT_NE(log.find("kiln quantize: no .npy files in '" + empty.string() + "' to calibrate on"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace kiln::frontend
