// Whole-model tuning reads the strategies' records (tuning/tasks.h): task extraction yields one
// task per tunable implementation a node's strategy offers (a direct convolution, a grouped one,
// a batched product), and a new op defined entirely in this file -- compute, CPU strategy and
// tunable template -- imports, compiles, tunes a few trials and runs correctly without touching
// the compiler (docs/adding-an-op.md walks through it).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "graph/graph_test_util.h"
#include "kiln/autotune/record.h"
#include "kiln/autotune/tune.h"
#include "kiln/autotune/tuner.h"
#include "kiln/graph/op_registry.h"
#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"
#include "kiln/graph/tuning.h"
#include "kiln/ir/op.h"
#include "kiln/topi/schedule_injective.h"
#include "kiln/tuning/tasks.h"

namespace kiln::tuning {
namespace {

using namespace kiln::graph;  // NOLINT: the graph API these tests build models with
using test_util::random_array;
using Ints = std::vector<int64_t>;
const DataType f32 = DataType::Float(32);

TEST(TaskExtraction, ReadsTheStrategiesChoice) {
  // x [1, 32, 6, 6] → conv 3x3 (padding 1) → relu; 6x6 is too small for Winograd.
  std::mt19937 rng(2);
  Graph g;
  Entry x = g.add_input("x", {1, 32, 6, 6}, f32);
  Entry a = g.add_op("conv2d", {x, g.add_constant("w", random_array({32, 32, 3, 3}, rng))},
                     {{"padding", Ints{1, 1, 1, 1}}}, "conv");
  g.add_output(g.add_op("relu", {a}, {}, "relu"));
  // One direct task, named by the template's label, keyed as the layout hook records it.
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].op, "conv2d");
  EXPECT_EQ(tasks[0].nodes, (std::vector<std::string>{"conv"}));
  topi::Conv2DWorkload wl{1, 32, 6, 6, 32, 3, 3, {}};
  wl.params.padding = topi::Padding2D::from({1, 1, 1, 1}, "test");
  EXPECT_EQ(tasks[0].task.key(), conv2d_task(wl, Target::host()).key());
}

TEST(TaskExtraction, PaddedChannelsAreTunedAsTheyRun) {
  // 61 output channels run as a blocked convolution over 64 (the layout hook pads them to whole
  // vector blocks): the task is the padded workload, so that the tuned config is the one used.
  if (Target::host().vector_bits() != 512) GTEST_SKIP() << "16-lane host only";
  std::mt19937 rng(4);
  Graph g;
  Entry x = g.add_input("x", {1, 16, 9, 9}, f32);
  g.add_output(g.add_op("conv2d", {x, g.add_constant("w", random_array({61, 16, 3, 3}, rng))},
                        {{"padding", Ints{1, 1, 1, 1}}}, "conv"));
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  topi::Conv2DWorkload wl{1, 16, 9, 9, 64, 3, 3, {}};
  wl.params.padding = topi::Padding2D::from({1, 1, 1, 1}, "test");
  const std::string want = conv2d_task(wl, Target::host()).key();
  bool found = false;
  for (const TuningTask& t : tasks) found = found || t.task.key() == want;
  EXPECT_TRUE(found) << want;
}

TEST(TaskExtraction, DepthMultipliersAndComputedWeightsAreTunedAsTheyRun) {
  // A depthwise conv with channel multiplier 2 runs as two depthwise convs of multiplier 1
  // (the task: 16 -> 16 channels); a conv whose weights are a graph input (computed at run time)
  // runs conv2d_nchwc over a packing node (the task: its workload, unpadded).
  std::mt19937 rng(6);
  Graph g;
  Entry x = g.add_input("x", {1, 16, 10, 10}, f32);
  Entry w = g.add_input("w", {24, 32, 1, 1}, f32);
  Entry d = g.add_op("conv2d", {x, g.add_constant("wd", random_array({32, 1, 3, 3}, rng))},
                     {{"padding", Ints{1, 1, 1, 1}}, {"groups", int64_t{16}}}, "dw");
  g.add_output(g.add_op("conv2d", {g.add_op("relu", {d}), w}, {}, "mixed"));
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  topi::Conv2DWorkload dw{1, 16, 10, 10, 16, 3, 3, {}};
  dw.params.padding = topi::Padding2D::from({1, 1, 1, 1}, "test");
  dw.params.groups = 16;
  const topi::Conv2DWorkload mixed{1, 32, 10, 10, 24, 1, 1, {}};
  std::map<std::string, std::vector<std::string>> nodes;
  for (const TuningTask& t : tasks) nodes[t.task.key()] = t.nodes;
  EXPECT_EQ(nodes[depthwise_conv2d_task(dw, Target::host()).key()],
            (std::vector<std::string>{"dw"}));
  EXPECT_EQ(nodes[conv2d_task(mixed, Target::host()).key()], (std::vector<std::string>{"mixed"}));
}

TEST(TaskExtraction, BatchedMatmul) {
  Graph g;
  Entry a = g.add_input("a", {3, 13, 20}, f32);
  Entry b = g.add_input("b", {3, 20, 37}, f32);
  g.add_output(g.add_op("relu", {g.add_op("matmul", {a, b}, {}, "qk")}, {}, "relu"));
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].op, "batch_matmul");
  EXPECT_EQ(tasks[0].nodes, (std::vector<std::string>{"qk"}));
}

TEST(TaskExtraction, GroupedConvolution) {
  // x [1, 32, 8, 8] → 1x1 (32 → 64) → relu → grouped 3x3 (64 → 64, 4 groups) → relu → 1x1.
  std::mt19937 rng(2);
  Graph g;
  Entry x = g.add_input("x", {1, 32, 8, 8}, f32);
  Entry a = g.add_op(
      "relu", {g.add_op("conv2d", {x, g.add_constant("w1", random_array({64, 32, 1, 1}, rng))}, {},
                        "conv1")});
  Entry b = g.add_op("conv2d", {a, g.add_constant("w2", random_array({64, 16, 3, 3}, rng))},
                     {{"padding", Ints{1, 1, 1, 1}}, {"groups", int64_t{4}}}, "grouped");
  g.add_output(g.add_op(
      "conv2d", {g.add_op("relu", {b}), g.add_constant("w3", random_array({32, 64, 1, 1}, rng))},
      {}, "conv3"));
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  int grouped = 0;
  for (const TuningTask& t : tasks) {
    if (t.op != "conv2d_grouped") continue;
    ++grouped;
    EXPECT_EQ(t.task.name, "conv2d_grouped_nchwc");
    EXPECT_EQ(t.nodes, std::vector<std::string>{"grouped"});
    EXPECT_NE(t.task.key().find("groups 4"), std::string::npos) << t.task.key();
    // The layout is pinned; the schedule knobs are tunable.
    EXPECT_EQ(t.task.space.knob("tile_ic").candidates.size(), 1u);
    EXPECT_GT(t.task.space.knob("tile_ow").candidates.size(), 1u);
  }
  EXPECT_EQ(grouped, 1);
}

// ---- a new op from this file: compute, strategy and a tunable template ----------------------

/// y = x * scale + 1 over a [rows, cols] tensor.
te::Tensor scale_add(const te::Tensor& x, double scale, const std::string& name) {
  return te::compute(
      x->shape,
      [&](ir::Var i, ir::Var j) {
        return x(i, j) * ir::make_const(x->dtype, scale) + ir::make_const(x->dtype, 1.0);
      },
      name, topi::tag::kElemWise);
}

/// The template's schedule: rows split by a tuned factor, the inner columns vectorized.
void schedule_scale_add(autotune::Config& cfg, te::Schedule& s, const te::Tensor& out) {
  te::Stage st = s[out];
  const int64_t cols = *ir::as_const_int(out->shape[1]);
  cfg.define_split("tile_x", cols, 2, autotune::SplitPolicy::kFactors, 16);
  if (cfg.is_fallback()) cfg.fallback_split("tile_x", {-1, 1});
  std::vector<te::IterVar> x = cfg.split("tile_x").apply(st, st.op_axis()[1]);
  st.vectorize(x[1]);
}

autotune::Task scale_add_task(int64_t rows, int64_t cols, const Target& target) {
  autotune::Template t{"test_scale_add", "1", [rows, cols](autotune::Config& cfg) {
                         te::Tensor x = te::placeholder({rows, cols}, DataType::Float(32), "x");
                         te::Tensor y = scale_add(x, 2.0, "y");
                         te::Schedule s = te::create_schedule({y});
                         schedule_scale_add(cfg, s, y);
                         return autotune::Instance{s, {x, y}};
                       }};
  return autotune::Task::make(t, target,
                              "scale_add " + std::to_string(rows) + "x" + std::to_string(cols));
}

void register_scale_add_op() {
  OpDef def;
  def.name = "test_scale_add";
  def.attrs = {{"scale", AttrKind::kFloat, 1.0}};
  def.pattern = topi::OpPattern::kOutEWiseFusable;
  def.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& name) {
    return std::vector<te::Tensor>{scale_add(in[0], a.get_float("scale"), name)};
  };
  OpRegistry::register_op(def);
  register_implementation({"test_scale_add.cpu",
                           [](const ScheduleInput& in) {
                             te::Schedule s = te::create_schedule(in.outs);
                             schedule_scale_add(in.config, s, in.outs[0]);
                             return s;
                           },
                           [](const OpCall& c) {
                             const TensorType& t = c.input_type(0);
                             return scale_add_task(t.shape[0], t.shape[1], c.target);
                           },
                           nullptr, "scale_add"});
  register_strategy("test_scale_add", "cpu", [](const OpCall&) {
    return std::vector<Choice>{{"test_scale_add.cpu", 10, false}};
  });
}

TEST(Strategy, NewOpFromATestCompilesTunesAndRuns) {
  static bool registered = (register_scale_add_op(), true);
  ASSERT_TRUE(registered);
  Graph g;
  Entry x = g.add_input("x", {8, 64}, f32);
  g.add_output(g.add_op("test_scale_add", {x}, {{"scale", 2.0}}, "sa"));
  const Target host = Target::host();
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, host);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].op, "scale_add");
  EXPECT_EQ(tasks[0].task.key(), "test_scale_add(scale_add 8x64)");
  // A few trials of a real tune, logged.
  const std::string log =
      (std::filesystem::temp_directory_path() / "kiln_strategy_test_scale_add.jsonl").string();
  std::filesystem::remove(log);
  autotune::TuneOptions opt;
  opt.n_trials = 4;
  opt.batch_size = 2;
  opt.log_path = log;
  opt.measure.repeat = 1;
  opt.measure.min_repeat_ms = 0.05;
  opt.measure.rotate_bytes = 0;
  autotune::RandomTuner tuner(tasks[0].task, /*seed=*/1);
  autotune::TuneResult res = autotune::tune(tasks[0].task, tuner, opt);
  EXPECT_GE(res.trials, 1);
  ASSERT_TRUE(res.best.has_value());
  BuildOptions bo;
  bo.tuning_records = autotune::load_records(log).records;
  CompiledModule m = build_module(g, host, bo);
  ASSERT_GE(m.tuning_report.size(), 2u);
  EXPECT_EQ(m.tuning_report[0], "tuning log: 1 workload(s) tuned, 0 with default configs");
  EXPECT_EQ(m.tuning_report[1].rfind("tuned   test_scale_add(scale_add 8x64)", 0), 0u);
  std::mt19937 rng4(4);
  runtime::NDArray xv = random_array({8, 64}, rng4);
  auto e = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  e.set_input("x", xv);
  runtime::NDArray out = e.get_output(0);
  std::fill(out.data_as<float>(), out.data_as<float>() + out.numel(), std::nanf(""));
  e.run();
  out = e.get_output(0);
  for (int64_t k = 0; k < xv.numel(); ++k)
    ASSERT_FLOAT_EQ(out.data_as<float>()[k], xv.data_as<float>()[k] * 2.0f + 1.0f) << k;
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace kiln::tuning
