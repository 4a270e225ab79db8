// aarch64 code run under qemu-user (issue 30). Each case compiles one graph twice, for this
// x86-64 host and for aarch64; the aarch64 module directory is run by the cross-built kiln-run
// under `qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu <model>` on the same seeded random inputs
// (written as .npy), and its outputs (read back from the files it writes into a fresh
// directory) must match the x86 build's within 1e-4 relative. Cases: one graph per strategy
// the `arm` key selects (NCHW4c convolution with its layout transforms, depthwise, dense,
// pooling, softmax, element-wise), SVE code at three vector lengths, the runtime's CPU feature
// check (an +sve or +dotprod module on a Cortex-A72 is refused with an error, not SIGILL), the
// paper's models mobilenet_v2, dqn and lstm_lm (the `models` fixture's ONNX files), and
// `kiln run --emulate` against `kiln run`. Without the cross compiler, qemu or the cross-built
// runner they skip, saying which is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <random>
#include <regex>
#include <sstream>

#include "arm/arm_test_util.h"
#include "common/error.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/npy.h"
#include "kiln/target/codegen.h"
#include "kiln/target/target.h"

namespace kiln::testing {
namespace {

using graph::Entry;
using graph::Graph;
using runtime::NDArray;
using Ints = std::vector<int64_t>;
const DataType f32 = DataType::Float(32);

NDArray random_array(Ints shape, std::mt19937& rng) {
  NDArray a = NDArray::empty(std::move(shape), f32);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = d(rng);
  return a;
}

/// What an emulated run of one module gave.
struct ArmRun {
  std::string dir;  ///< the module directory
  std::string asm_text;
};

/// Compiles `g` for this host and for `target` (aarch64), runs the host module with seeded
/// random inputs (or `inputs`), then the aarch64 module under qemu with each CPU model of
/// `cpus` on the same inputs, and compares every output.
ArmRun expect_same_on_arm(const Graph& g, const std::string& name, const std::string& target,
                          const std::vector<std::string>& cpus = {"max"},
                          std::map<std::string, NDArray> inputs = {}) {
  const std::string dir = fresh_dir(name);
  graph::CompiledModule host = graph::build_module(g, Target::host());
  runtime::GraphExecutor ex =
      runtime::GraphExecutor::create(host.graph_json, host.lib, host.params, "host");
  std::mt19937 rng(11);
  std::vector<std::string> args{dir + "/arm"};
  for (int i = 0; i < ex.num_inputs(); ++i) {
    runtime::TensorInfo info = ex.input_info(i);
    if (!inputs.count(info.name)) inputs[info.name] = random_array(info.shape, rng);
    std::string file = dir + "/in" + std::to_string(i) + ".npy";
    runtime::save_npy(file, inputs[info.name]);
    ex.set_input(info.name, inputs[info.name]);
    args.insert(args.end(), {"--input", info.name + "=" + file});
  }
  ex.run();
  ArmRun r;
  r.dir = dir + "/arm";
  graph::CompiledModule arm = graph::build_module(g, Target(target));
  r.asm_text = codegen::get_source(arm.lib, "asm");
  arm.save(r.dir);
  for (const std::string& cpu : cpus) {
    const std::string out = dir + "/out_" + std::to_string(&cpu - cpus.data());
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--output-dir", out});
    ProcessResult p = run_emulated(a, cpu);
    EXPECT_EQ(p.status, 0) << name << " on -cpu " << cpu << ":\n" << p.output;
    if (p.status != 0) continue;
    // The runner prints "output NAME: TYPE -> FILE" per output, in order (the two builds may
    // name an output differently: a layout transform on one, the op on the other).
    std::vector<std::string> files;
    std::istringstream lines(p.output);
    for (std::string line; std::getline(lines, line);) {
      size_t arrow = line.find(" -> ");
      if (line.rfind("output ", 0) == 0 && arrow != std::string::npos)
        files.push_back(line.substr(arrow + 4));
    }
    EXPECT_EQ(files.size(), static_cast<size_t>(ex.num_outputs())) << p.output;
    if (files.size() != static_cast<size_t>(ex.num_outputs())) continue;
    for (int i = 0; i < ex.num_outputs(); ++i) {
      NDArray got = runtime::load_npy(files[static_cast<size_t>(i)]);
      EXPECT_LT(relative_error(got, ex.get_output(i)), 1e-4)
          << name << " on -cpu " << cpu << ", output " << i << " (" << files[i] << ")";
    }
  }
  return r;
}

/// conv 3x3 + bias + relu, then conv 1x1: on `arm` the alter-layout pass moves the chain to
/// NCHW4c (128-bit NEON) with layout transforms at its edges.
Graph conv_chain() {
  std::mt19937 rng(1);
  Graph g;
  Entry x = g.add_input("data", {1, 8, 15, 15}, f32);
  Entry c = g.add_op("conv2d", {x, g.add_constant("w1", random_array({16, 8, 3, 3}, rng))},
                     {{"padding", Ints{1, 1, 1, 1}}}, "conv1");
  c = g.add_op("add", {c, g.add_constant("b1", random_array({1, 16, 1, 1}, rng))}, {}, "bias1");
  c = g.add_op("relu", {c}, {}, "relu1");
  c = g.add_op("conv2d", {c, g.add_constant("w2", random_array({12, 16, 1, 1}, rng))},
               {{"strides", Ints{2, 2}}}, "conv2");
  g.add_output(c);
  return g;
}

Graph depthwise() {
  std::mt19937 rng(2);
  Graph g;
  Entry x = g.add_input("data", {1, 16, 14, 14}, f32);
  Entry c =
      g.add_op("conv2d", {x, g.add_constant("w", random_array({16, 1, 3, 3}, rng))},
               {{"padding", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"groups", 16}}, "dw");
  g.add_output(g.add_op("relu", {c}, {}, "relu"));
  return g;
}

Graph dense_sigmoid() {
  std::mt19937 rng(3);
  Graph g;
  Entry x = g.add_input("data", {3, 64}, f32);
  Entry d = g.add_op("dense",
                     {x, g.add_constant("w", random_array({40, 64}, rng)),
                      g.add_constant("b", random_array({40}, rng))},
                     {}, "fc");
  g.add_output(g.add_op("sigmoid", {d}, {}, "sig"));
  return g;
}

Graph pooling() {
  Graph g;
  Entry x = g.add_input("data", {1, 8, 15, 15}, f32);
  Entry m =
      g.add_op("max_pool2d", {x},
               {{"pool_size", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"padding", Ints{1, 1, 1, 1}}},
               "maxpool");
  Entry a =
      g.add_op("avg_pool2d", {m}, {{"pool_size", Ints{2, 2}}, {"strides", Ints{2, 2}}}, "avgpool");
  g.add_output(a);
  g.add_output(g.add_op("global_avg_pool2d", {x}, {}, "gap"));
  return g;
}

Graph softmax_elemwise() {
  std::mt19937 rng(4);
  Graph g;
  Entry x = g.add_input("data", {5, 37}, f32);
  Entry y = g.add_input("other", {5, 37}, f32);
  Entry m = g.add_op("multiply", {x, y}, {}, "mul");
  Entry a = g.add_op("add", {m, g.add_constant("c", random_array({37}, rng))}, {}, "add");
  g.add_output(g.add_op("softmax", {a}, {}, "prob"));
  g.add_output(g.add_op("tanh", {a}, {}, "tanh"));
  return g;
}

struct OpCase {
  std::string name;
  std::function<Graph()> make;
};

/// How gtest (and so ctest's test names) print a case: its name.
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

class EmulatedOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(EmulatedOps, MatchX86) {
  KILN_REQUIRE_EMULATION();
  expect_same_on_arm(GetParam().make(), GetParam().name, kArmTarget);
}

INSTANTIATE_TEST_SUITE_P(Arm, EmulatedOps,
                         ::testing::Values(OpCase{"conv_nchw4c", conv_chain},
                                           OpCase{"depthwise", depthwise},
                                           OpCase{"dense", dense_sigmoid},
                                           OpCase{"pooling", pooling},
                                           OpCase{"softmax_elemwise", softmax_elemwise}),
                         [](const auto& info) { return info.param.name; });

TEST(ArmStrategies, Nchw4cBlocksForNeon) {
  // The strategies see 128-bit vectors and 32 registers: 4-lane channel blocks.
  graph::CompiledModule m = graph::build_module(conv_chain(), Target(kArmTarget));
  // graph.json records each kernel's implementation.
  int nchwc = 0;
  for (size_t p = 0;
       (p = m.graph_json.find("\"impl\":\"conv2d_nchwc.cpu\"", p)) != std::string::npos; ++p)
    ++nchwc;
  EXPECT_EQ(nchwc, 2) << m.graph_json;
  // The weights are packed once, at compile time, into [O/ob, I/ib, KH, KW, ib, ob] blocks
  // with ob = 4 lanes.
  int packed = 0;
  std::string shapes;
  for (const auto& [name, w] : m.params) {
    packed += w.shape().size() == 6 && w.shape().back() == 4;
    shapes += " " + name + runtime::shape_str(w.shape());
  }
  EXPECT_EQ(packed, 2) << shapes;
  std::string ir = codegen::get_source(m.lib, "ll");
  EXPECT_NE(ir.find("<4 x float>"), std::string::npos);
  EXPECT_EQ(ir.find("<16 x float>"), std::string::npos);
}

/// A 1x1 convolution of 24 to 6 channels on a 14x3 map whose weights are an input (no constant
/// for a layout hook to pack or pad to whole blocks), so it stays NCHW; its rows of 3 columns are
/// under one vector, so Kiln's schedule leaves them scalar and LLVM vectorizes the loops by
/// itself, with scalable (SVE) vectors when the target has +sve. (Rows of a vector or more get
/// Kiln's fixed-width vectors.)
Graph narrow_conv() {
  Graph g;
  Entry x = g.add_input("data", {1, 24, 14, 3}, f32);
  Entry c = g.add_op("conv2d", {x, g.add_input("w", {6, 24, 1, 1}, f32)}, {}, "conv");
  g.add_output(g.add_op("relu", {c}, {}, "relu"));
  return g;
}

TEST(EmulatedSve, VectorLengthsOneTwoAndFourTimes128) {
  KILN_REQUIRE_EMULATION();
  ArmRun r = expect_same_on_arm(narrow_conv(), "sve", "llvm -mtriple=aarch64-linux-gnu -mattr=+sve",
                                {"max,sve-max-vq=1", "max,sve-max-vq=2", "max,sve-max-vq=4"});
  // The code does use SVE (predicated, vector-length agnostic instructions on z registers).
  EXPECT_TRUE(std::regex_search(r.asm_text, std::regex("\\bz[0-9]+\\.[bhsd]\\b")))
      << "no SVE instruction in the module";
}

TEST(EmulatedFeatureGate, SveAndDotprodModulesAreRefusedOnCortexA72) {
  KILN_REQUIRE_EMULATION();
  const std::string dir = fresh_dir("gate");
  for (const std::string attr : {"+sve", "+dotprod"}) {
    const std::string target = "llvm -mtriple=aarch64-linux-gnu -mattr=" + attr;
    const std::string mod = dir + "/mod" + attr.substr(1);
    graph::build_module(dense_sigmoid(), Target(target)).save(mod);
    ProcessResult p = run_emulated({mod}, "cortex-a72");
    EXPECT_EQ(p.status, 1) << p.output;  // an error, not SIGILL (132)
    const std::string missing = "feature " + attr.substr(1);
    EXPECT_NE(p.output.find("kiln-run: error: Module::load: cannot load '" + mod +
                            "/lib.so': compiled for target '" + target + "', which needs the CPU " +
                            missing + ", and this CPU does not have"),
              std::string::npos)
        << p.output;
    // A CPU that has the features runs it.
    ProcessResult ok = run_emulated({mod}, attr == "+sve" ? "max" : "neoverse-n1");
    EXPECT_EQ(ok.status, 0) << ok.output;
  }
  std::filesystem::remove_all(dir);
}

std::string models_dir() {
  const char* d = std::getenv("KILN_MODELS_DIR");
  return d && *d ? d : "build/models";
}

class EmulatedModels : public ::testing::TestWithParam<std::string> {};

TEST_P(EmulatedModels, MatchX86) {
  KILN_REQUIRE_EMULATION();
  const std::string stem = models_dir() + "/" + GetParam();
  ASSERT_TRUE(std::filesystem::exists(stem + ".onnx"))
      << stem << ".onnx is missing: the `models` fixture (scripts/export_models.py) makes it";
  Graph g = frontend::import_onnx(stem + ".onnx");
  NDArray input = runtime::load_npy(stem + ".input.npy");
  // The model's only input, under its graph name.
  graph::CompiledModule probe = graph::build_module(g, Target::host());
  std::string in_name =
      runtime::GraphExecutor::create(probe.graph_json, probe.lib, probe.params, "probe")
          .input_info(0)
          .name;
  expect_same_on_arm(g, GetParam(), kArmTarget, {"max"}, {{in_name, input}});
}

INSTANTIATE_TEST_SUITE_P(Paper, EmulatedModels, ::testing::Values("mobilenet_v2", "dqn", "lstm_lm"),
                         [](const auto& info) { return info.param; });

TEST(EmulatedCli, RunEmulateMatchesRun) {
  KILN_REQUIRE_EMULATION();
  const std::string dir = fresh_dir("cli");
  const std::string kiln = KILN_CLI;
  for (const auto& [sub, target] :
       {std::pair{"host", "llvm -mcpu=native"}, std::pair{"arm", kArmTarget}}) {
    ProcessResult c = run_process({kiln, "compile", "builtin:resnet18", "--input-shape",
                                   "data=1,3,32,32", "--target", target, "-o", dir + "/" + sub});
    ASSERT_EQ(c.status, 0) << c.output;
  }
  ProcessResult host =
      run_process({kiln, "run", dir + "/host", "--seed", "7", "--output-dir", dir + "/o_host"});
  ASSERT_EQ(host.status, 0) << host.output;
  ProcessResult arm = run_process(
      {kiln, "run", dir + "/arm", "--emulate", "--seed", "7", "--output-dir", dir + "/o_arm"},
      {"KILN_AARCH64_RUNNER=" + std::string(KILN_AARCH64_RUNNER)});
  ASSERT_EQ(arm.status, 0) << arm.output;
  EXPECT_NE(arm.output.find("emulating llvm -mtriple=aarch64-linux-gnu on qemu-aarch64 -cpu max"),
            std::string::npos)
      << arm.output;
  // The same random input (run_module.cc is the same code on both), the same lines.
  EXPECT_NE(arm.output.find("input data: float32[1, 3, 32, 32] random (seed 7)"), std::string::npos)
      << arm.output;
  EXPECT_NE(arm.output.find("output fc: float32[1, 1000] -> " + dir + "/o_arm/fc.npy"),
            std::string::npos)
      << arm.output;
  EXPECT_LT(relative_error(runtime::load_npy(dir + "/o_arm/fc.npy"),
                           runtime::load_npy(dir + "/o_host/fc.npy")),
            1e-4);
  // --emulate on an x86 module says what it runs.
  ProcessResult x86 = run_process({kiln, "run", dir + "/host", "--emulate"});
  EXPECT_EQ(x86.status, 1);
  EXPECT_NE(x86.output.find("kiln run: error: --emulate runs aarch64 modules under qemu; '" + dir +
                            "/host' is compiled for target 'llvm -mcpu=native'"),
            std::string::npos)
      << x86.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::testing
