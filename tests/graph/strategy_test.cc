// Op strategies (graph/strategy.h) and targets as data: the choices a conv2d gets on a CPU, the
// implementation recorded on every node by the optimizer (and read back by the build), a toy
// target kind with its own strategy compiling a model with the LLVM code generator, and batched
// products. Task extraction from the same records, and a new op defined entirely in a test file
// that compiles, tunes and runs, are whole-model tuning: tests/tuning/.
#include "kiln/graph/strategy.h"

#include <gtest/gtest.h>

#include <atomic>

#include "common/error.h"
#include "common/ptxas.h"
#include "graph_test_util.h"
#include "kiln/graph/build_module.h"
#include "kiln/graph/op_registry.h"
#include "kiln/graph/transform.h"
#include "kiln/graph/tuning.h"
#include "kiln/runtime/device_api.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/target/codegen.h"
#include "kiln/topi/schedule_injective.h"

namespace kiln::graph {
namespace {

using test_util::random_array;
using Ints = std::vector<int64_t>;
const DataType f32 = DataType::Float(32);

std::vector<std::string> names(const std::vector<Choice>& cs) {
  std::vector<std::string> r;
  for (const Choice& c : cs) r.push_back(c.impl);
  return r;
}

/// x [1, C, H, W] → conv 3x3 (C→C, padding 1) → relu.
Graph conv_relu(int64_t c, int64_t hw, std::mt19937& rng, int64_t groups = 1) {
  Graph g;
  Entry x = g.add_input("x", {1, c, hw, hw}, f32);
  Entry a = g.add_op("conv2d", {x, g.add_constant("w", random_array({c, c / groups, 3, 3}, rng))},
                     {{"padding", Ints{1, 1, 1, 1}}, {"groups", groups}}, "conv");
  g.add_output(g.add_op("relu", {a}, {}, "relu"));
  return g;
}

TEST(Strategy, Conv2dChoicesOnACpu) {
  std::mt19937 rng(1);
  const Target host = Target::host();
  Graph g = infer_types(conv_relu(32, 14, rng));
  const int conv = 2;
  ASSERT_EQ(g.node(conv).op, "conv2d");
  std::vector<std::string> got = names(strategy_choices(OpCall{g, conv, host}));
  // Winograd applies (3x3 stride 1); whether it outranks the direct template is
  // topi::prefer_winograd's call for this target. The NCHW schedule is the last resort.
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got.back(), "conv2d_nchw.cpu");
  EXPECT_TRUE((got[0] == "conv2d_winograd_nchwc.cpu" && got[1] == "conv2d_nchwc.cpu") ||
              (got[1] == "conv2d_winograd_nchwc.cpu" && got[0] == "conv2d_nchwc.cpu"));
  // relu has no strategy: its pattern kind's implementation.
  EXPECT_EQ(names(strategy_choices(OpCall{g, 3, host})),
            (std::vector<std::string>{"injective.generic"}));
  // Depthwise: the blocked depthwise template.
  Graph dw = infer_types(conv_relu(32, 14, rng, 32));
  EXPECT_EQ(names(strategy_choices(OpCall{dw, conv, host})),
            (std::vector<std::string>{"depthwise_conv2d_nchwc.cpu", "conv2d_nchw.cpu"}));
  // A GPU target (cuda or opencl): the shared-memory template, the fallback (one thread per
  // element) for what it cannot take; a depthwise conv only the fallback.
  for (const char* gpu : {"cuda", "opencl"}) {
    EXPECT_EQ(names(strategy_choices(OpCall{g, conv, Target(gpu)})),
              (std::vector<std::string>{"conv2d_tiled.gpu", "fallback.gpu"}));
    EXPECT_EQ(names(strategy_choices(OpCall{dw, conv, Target(gpu)})),
              (std::vector<std::string>{"fallback.gpu"}));
  }
}

// A whole graph for a GPU: the conv on its GPU template, the graph left in NCHW, the module's
// graph.json on the cuda device, its PTX accepted by ptxas; without a GPU the executor refuses
// it with the reason.
TEST(Strategy, AGraphBuildsForCuda) {
  std::mt19937 rng(3);
  const Target cuda("cuda -arch=sm_90");
  CompiledModule m = build_module(conv_relu(16, 10, rng), cuda, BuildOptions{});
  EXPECT_NE(m.graph_json.find("\"device\": \"cuda\""), std::string::npos) << m.graph_json;
  EXPECT_NE(m.graph_json.find("\"impl\":\"conv2d_tiled.gpu\""), std::string::npos) << m.graph_json;
  EXPECT_EQ(m.graph_json.find("nchwc"), std::string::npos) << m.graph_json;
  const std::string ptx = codegen::get_source(m.lib, "ptx");
  EXPECT_NE(ptx.find(".entry "), std::string::npos);
  if (!kiln::testing::find_ptxas().empty()) {
    EXPECT_EQ(kiln::testing::ptxas(ptx, "sm_90"), "");
  }
  std::string why;
  if (runtime::device_available(runtime::Device{kKilnCUDA, 0}, &why)) return;
  std::string msg = kiln::testing::error_of(
      [&] { runtime::GraphExecutor::create(m.graph_json, m.lib, m.params); });
  EXPECT_NE(msg.find("no CUDA device: " + why), std::string::npos) << msg;
}

// TopK: on a CPU one kernel calling the runtime's sort; a GPU kernel cannot call the runtime,
// so the layout pass rewrites the node into topk_ranks (rank counting in te computes), whose
// kernels run on the device.
TEST(Strategy, TopKAndCumSumOnAGpuAreRewrittenIntoTeComputes) {
  // TopK (a sort in the runtime on a CPU) counts ranks on a GPU; CumSum (a scan whose rows run
  // on the CPU's thread pool) sums each element's part of the axis.
  struct Case {
    std::string op;
    Attrs attrs;
    int outputs;
    std::string cpu_func, gpu_func;
  };
  for (const Case& c : {Case{"topk",
                             {{"k", int64_t{5}}, {"axis", int64_t{1}}},
                             2,
                             "fused_topk_0",
                             "fused_topk_ranks_0"},
                        Case{"cumsum",
                             {{"axis", int64_t{1}}, {"reverse", int64_t{1}}},
                             1,
                             "fused_cumsum_0",
                             "fused_cumsum_sums_0"}}) {
    SCOPED_TRACE(c.op);
    Graph g;
    Entry x = g.add_input("x", {4, 50}, f32);
    Entry t = g.add_op(c.op, {x}, c.attrs, c.op);
    for (int k = 0; k < c.outputs; ++k) g.add_output(Entry{t.node, k});
    CompiledModule cpu = build_module(g, Target::host(), BuildOptions{});
    EXPECT_NE(cpu.graph_json.find("\"func_name\":\"" + c.cpu_func + "\""), std::string::npos)
        << cpu.graph_json;
    const Target cuda("cuda -arch=sm_90");
    CompiledModule m = build_module(g, cuda, BuildOptions{});
    EXPECT_NE(m.graph_json.find("\"func_name\":\"" + c.gpu_func + "\""), std::string::npos)
        << m.graph_json;
    const std::string ptx = codegen::get_source(m.lib, "ptx");
    EXPECT_NE(ptx.find(".entry "), std::string::npos);
    EXPECT_EQ(ptx.find("kiln_topk"), std::string::npos);
    if (!kiln::testing::find_ptxas().empty()) {
      EXPECT_EQ(kiln::testing::ptxas(ptx, "sm_90"), "");
    }
  }
}

TEST(Strategy, EveryNodeCarriesItsImplementation) {
  std::mt19937 rng(2);
  Graph g = conv_relu(32, 6, rng);  // 6x6: too small for Winograd
  // opt_level 1 has no layout pass: the conv runs its NCHW schedule.
  Graph o1 = optimize(g, 1, Target::host());
  for (const Node& n : o1.nodes()) {
    if (!n.is_op()) continue;
    EXPECT_EQ(n.impl.name, n.op == "conv2d" ? "conv2d_nchw.cpu" : "injective.generic") << n.op;
  }
  // opt_level 2: the layout hook made the blocked node and recorded its template and task.
  Graph o2 = optimize(g, 2, Target::host());
  int blocked = 0;
  for (const Node& n : o2.nodes()) {
    if (!n.is_op()) continue;
    EXPECT_FALSE(n.impl.name.empty()) << n.op;
    if (n.op != "conv2d_nchwc") continue;
    ++blocked;
    EXPECT_EQ(n.impl.name, "conv2d_nchwc.cpu");
    ASSERT_TRUE(static_cast<bool>(n.impl.task));
    topi::Conv2DWorkload wl{1, 32, 6, 6, 32, 3, 3, {}};
    wl.params.padding = topi::Padding2D::from({1, 1, 1, 1}, "test");
    EXPECT_EQ(n.impl.task().key(), conv2d_task(wl, Target::host()).key());
  }
  EXPECT_EQ(blocked, 1);
  // Task extraction reads the same record: tests/tuning/task_extraction_test.cc.
}

TEST(Strategy, RegistryRefusesDuplicates) {
  EXPECT_NE(
      kiln::testing::error_of([] {
        register_implementation({"conv2d_nchwc.cpu", schedule_by_pattern, nullptr, nullptr, ""});
      }).find("'conv2d_nchwc.cpu' is registered already"),
      std::string::npos);
  EXPECT_NE(kiln::testing::error_of([] {
              register_strategy("conv2d", "cpu",
                                [](const OpCall&) { return std::vector<Choice>{}; });
            }).find("op 'conv2d' has a strategy for key 'cpu' already"),
            std::string::npos);
}

// ---- a toy target kind: data plus one strategy ------------------------------------------------

std::atomic<int> toy_conv_schedules{0};

TEST(Strategy, ToyTargetKindCompilesAModel) {
  // A test-only kind served by the LLVM code generator, whose only strategy is its own conv2d
  // implementation: the NCHW compute with a schedule that parallelizes the output channels.
  static bool registered = [] {
    TargetKind toy;
    toy.name = "toy";
    toy.keys = {"toy"};
    toy.options = {"mcpu", "mattr"};
    toy.codegen = "llvm";
    register_target_kind(toy);
    register_implementation({"conv2d.toy",
                             [](const ScheduleInput& in) {
                               ++toy_conv_schedules;
                               te::Schedule s = te::create_schedule(in.outs);
                               te::Stage st = s[in.outs[0]];
                               st.parallel(st.op_axis()[1]);
                               return s;
                             },
                             nullptr, nullptr, ""});
    register_strategy("conv2d", "toy", [](const OpCall&) {
      return std::vector<Choice>{{"conv2d.toy", 10, false}};
    });
    return true;
  }();
  ASSERT_TRUE(registered);
  std::mt19937 rng(3);
  Graph g = conv_relu(16, 8, rng);
  const Target toy("toy -mcpu=native");
  EXPECT_EQ(toy.keys(), (std::vector<std::string>{"toy"}));
  toy_conv_schedules = 0;
  CompiledModule m = build_module(g, toy, BuildOptions{});
  EXPECT_EQ(toy_conv_schedules.load(), 1);
  EXPECT_EQ(m.graph_json.find("conv2d_nchwc"), std::string::npos);  // no CPU layout hook
  CompiledModule ref = build_module(g, Target::host(), BuildOptions{0});
  runtime::NDArray x = random_array({1, 16, 8, 8}, rng);
  auto run = [&](const CompiledModule& cm) {
    auto e = runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params);
    e.set_input("x", x);
    e.run();
    return e.get_output(0);
  };
  runtime::NDArray a = run(ref), b = run(m);
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t k = 0; k < a.numel(); ++k)
    ASSERT_NEAR(a.data_as<float>()[k], b.data_as<float>()[k], 1e-4) << k;
  // A kind with no code generator is a clear error.
  EXPECT_NE(kiln::testing::error_of([&] {
              build_module(g, Target("vdla"), BuildOptions{});
            }).find("no code generator for target kind 'vdla' yet"),
            std::string::npos);
}

// ---- batched products: attention's matmuls of 3-D activations --------------------------------

TEST(Strategy, BatchedMatmulRunsTheBatchTemplateWithItsEpilogue) {
  // a [3, 13, 20] · b [3, 20, 37] + bias, relu: M = 13 is no multiple of the row tile and N = 37
  // none of the panel width (the product is padded to 48 columns and sliced).
  std::mt19937 rng(7);
  Graph g;
  Entry a = g.add_input("a", {3, 13, 20}, f32);
  Entry b = g.add_input("b", {3, 20, 37}, f32);
  runtime::NDArray bias = random_array({37}, rng);
  Entry p = g.add_op("matmul", {a, b}, {}, "qk");
  Entry s = g.add_op("add", {p, g.add_constant("bias", bias)}, {}, "bias_add");
  g.add_output(g.add_op("relu", {s}, {}, "relu"));

  Graph o = optimize(g, 3, Target::host());
  int batched = 0;
  for (const Node& n : o.nodes())
    if (n.is_op() && n.op == "matmul") {
      EXPECT_EQ(n.impl.name, "batch_matmul.cpu");
      ++batched;
    }
  EXPECT_EQ(batched, 1);

  CompiledModule m = build_module(g, Target::host(), BuildOptions{3, true});
  EXPECT_EQ(m.num_kernels, 1);  // the bias and relu are the product's epilogue
  auto e = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  runtime::NDArray av = random_array({3, 13, 20}, rng), bv = random_array({3, 20, 37}, rng);
  e.set_input("a", av);
  e.set_input("b", bv);
  e.run();
  runtime::NDArray out = e.get_output(0);
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{3, 13, 37}));
  double worst = 0;
  for (int64_t bi = 0; bi < 3; ++bi)
    for (int64_t i = 0; i < 13; ++i)
      for (int64_t j = 0; j < 37; ++j) {
        double acc = bias.data_as<float>()[j];
        for (int64_t k = 0; k < 20; ++k)
          acc += double(av.data_as<float>()[(bi * 13 + i) * 20 + k]) *
                 bv.data_as<float>()[(bi * 20 + k) * 37 + j];
        const double want = std::max(acc, 0.0);
        worst = std::max(worst, std::abs(want - out.data_as<float>()[(bi * 13 + i) * 37 + j]));
      }
  EXPECT_LT(worst, 1e-4);
}

}  // namespace
}  // namespace kiln::graph
