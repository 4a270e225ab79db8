// The rule-based scheduler as a tuning task (graph::generic_task): a node without a template
// (a MatMul of two activations, which dense_packed cannot take) yields an "auto_schedule" task
// keyed by its op, attributes and input types; points of its space other than the default build
// and compute the same product as the unscheduled loops; and a model compiled with a record of
// such a point uses it (the tuning report says so) and still computes the same result. The
// per-kernel report: the kernel says it runs opaque.generic, in KernelInfo and graph.json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/measured.h"
#include "graph/graph_test_util.h"
#include "kiln/autotune/record.h"
#include "kiln/graph/strategy.h"
#include "kiln/graph/tuning.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/tuning/tasks.h"
#include "topi/topi_test_util.h"

namespace kiln::tuning {
namespace {

using ::kiln::testing::measured;

using namespace kiln::graph;  // NOLINT: the graph API these tests build models with

const DataType f32 = DataType::Float(32);

/// a [24, 40] · b [40, 36] + 1: a product of two inputs, then an element-wise epilogue.
Graph activation_product() {
  Graph g;
  Entry a = g.add_input("a", {24, 40}, f32);
  Entry b = g.add_input("b", {40, 36}, f32);
  Entry p = g.add_op("matmul", {a, b}, {}, "mm");
  g.add_output(g.add_op("relu", {p}, {}, "act"));
  return g;
}

TEST(AutoScheduleTask, ANodeWithoutATemplateIsTunableAndEveryPointIsCorrect) {
  std::vector<TuningTask> tasks = extract_tuning_tasks(activation_product(), Target::host());
  ASSERT_EQ(tasks.size(), 1u);
  const autotune::Task& t = tasks[0].task;
  EXPECT_EQ(tasks[0].op, "auto_schedule");
  EXPECT_EQ(t.name, "auto_schedule");
  EXPECT_NE(t.workload.find("matmul"), std::string::npos) << t.workload;
  EXPECT_NE(t.workload.find("float32[24, 40]"), std::string::npos) << t.workload;
  for (const char* knob : {"tile_x", "tile_y", "tile_lanes", "tile_k", "unroll_k"})
    EXPECT_GE(t.space.find(knob), 0) << knob;
  ASSERT_GT(t.space.size(), 8u);

  // Points of the space against the unscheduled loops of the same compute.
  autotune::Instance ref = t.instantiate(autotune::Config::fallback());
  std::vector<te::Tensor> ins(ref.args.begin(), ref.args.end() - 1);
  std::vector<runtime::NDArray> data = {topi::testing::random_array({24, 40}, f32, 1),
                                        topi::testing::random_array({40, 36}, f32, 2)};
  std::vector<runtime::NDArray> want =
      topi::testing::run(te::create_schedule({ref.args.back()}), ins, {ref.args.back()}, data);
  for (uint64_t i = 0; i < t.space.size(); i += t.space.size() / 7) {
    autotune::Instance inst = t.instantiate(t.space.get(i));
    SCOPED_TRACE(inst.config.str());
    std::vector<te::Tensor> in2(inst.args.begin(), inst.args.end() - 1);
    std::vector<runtime::NDArray> got = topi::testing::run(inst.sch, in2, {inst.args.back()}, data);
    EXPECT_TRUE(topi::testing::all_close(got[0], want[0], {1e-4, 1e-4}));
  }
}

TEST(AutoScheduleTask, ACompiledModelUsesItsRecordAndSaysWhichKernelsAreGenerated) {
  Graph g = activation_product();
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 1u);
  const autotune::Task& t = tasks[0].task;
  autotune::Config pick = t.space.get(1);
  ASSERT_NE(pick, t.default_config());
  BuildOptions bo;
  bo.keep_ir = true;
  bo.tuning_records = {autotune::Record::make(t, pick, measured(1e-3))};
  CompiledModule tuned = build_module(g, Target::host(), bo);
  BuildOptions plain_opt;
  plain_opt.keep_ir = true;
  CompiledModule plain = build_module(g, Target::host(), plain_opt);
  ASSERT_GE(tuned.tuning_report.size(), 2u);
  EXPECT_EQ(tuned.tuning_report[0], "tuning log: 1 workload(s) tuned, 0 with default configs");
  EXPECT_NE(tuned.tuning_report[1].find("tuned   auto_schedule("), std::string::npos)
      << tuned.tuning_report[1];

  // The report: the product's kernel runs the rule-based scheduler.
  ASSERT_EQ(plain.kernels.size(), 1u);
  EXPECT_EQ(plain.kernels[0].impl, "opaque.generic");
  nlohmann::json j = nlohmann::json::parse(plain.graph_json);
  int generated = 0;
  for (const nlohmann::json& n : j["nodes"])
    if (n.contains("attrs") && n["attrs"].value("impl", "") == "opaque.generic") ++generated;
  EXPECT_EQ(generated, 1);

  // Both builds compute the same numbers.
  auto ea = runtime::GraphExecutor::create(tuned.graph_json, tuned.lib, tuned.params);
  auto eb = runtime::GraphExecutor::create(plain.graph_json, plain.lib, plain.params);
  std::mt19937 rng(3);
  runtime::NDArray a = test_util::random_array({24, 40}, rng);
  runtime::NDArray b = test_util::random_array({40, 36}, rng);
  for (auto* e : {&ea, &eb}) {
    e->set_input("a", a);
    e->set_input("b", b);
    e->run();
  }
  EXPECT_TRUE(topi::testing::all_close(ea.get_output(0), eb.get_output(0), {1e-4, 1e-4}));
}

}  // namespace
}  // namespace kiln::tuning
