// Whole-model tuning (tuning/tasks.h, graph/tuning.h): the tasks a model yields keep the default
// channel blocks, and compiling with a log uses its best records without adding layout
// transforms; the network check (tuning/network_check.h) times candidates inside the model, and
// compiling prefers those times.
#include "kiln/graph/tuning.h"

#include <gtest/gtest.h>

#include <set>

#include "common/error.h"
#include "common/measured.h"
#include "graph/graph_test_util.h"
#include "kiln/autotune/record.h"
#include "kiln/graph/transform.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/tuning/network_check.h"
#include "kiln/tuning/tasks.h"
#include "tuning/tuning_test_models.h"

namespace kiln::tuning {
namespace {

using ::kiln::testing::measured;

using namespace kiln::graph;  // NOLINT: the graph API these tests build models with

using test_util::random_array;
using Ints = std::vector<int64_t>;
const DataType f32 = DataType::Float(32);

using test_models::two_convs;

TEST(TuningTasks, KeepTheDefaultChannelBlocks) {
  std::mt19937 rng(1);
  Graph g = two_convs(rng);
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 2u);
  for (const TuningTask& t : tasks) {
    EXPECT_EQ(t.op, "conv2d");
    const autotune::Knob& ic = t.task.space.knob("tile_ic");
    const autotune::Knob& oc = t.task.space.knob("tile_oc");
    ASSERT_EQ(ic.candidates.size(), 1u);
    ASSERT_EQ(oc.candidates.size(), 1u);
    EXPECT_EQ(ic.candidates[0][1], test_util::host_lanes());
    EXPECT_EQ(oc.candidates[0][1], test_util::host_lanes());
  }
  // The operator tuned alone may choose its blocks: a larger space under the same key.
  topi::Conv2DWorkload wl{1, 32, 6, 6, 32, 3, 3, {}};
  wl.params.padding = topi::Padding2D::from({1, 1, 1, 1}, "test");
  autotune::Task fixed = conv2d_task(wl, Target::host());
  autotune::Task free = conv2d_task(wl, Target::host(), topi::ChannelBlocks::kTuned);
  EXPECT_EQ(fixed.key(), free.key());
  EXPECT_EQ(fixed.key(), tasks[0].task.key());
  EXPECT_GT(free.space.size(), fixed.space.size());
}

TEST(TuningTasks, CompileWithALogUsesDefaultBlockRecordsOnly) {
  std::mt19937 rng(2);
  Graph g = two_convs(rng);
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 2u);
  const autotune::Task& t = tasks[0].task;
  // A schedule other than the default (register tile of one pixel), and a faster record made
  // in the larger space with 8-channel blocks, which this graph cannot use.
  autotune::Config pick = t.space.get(0);
  ASSERT_NE(pick, t.default_config());
  topi::Conv2DWorkload wl{1, 32, 6, 6, 32, 3, 3, {}};
  wl.params.padding = topi::Padding2D::from({1, 1, 1, 1}, "test");
  autotune::Task free = conv2d_task(wl, Target::host(), topi::ChannelBlocks::kTuned);
  std::optional<autotune::Config> eight;
  for (uint64_t i = 0; i < free.space.size() && !eight; ++i)
    if (free.space.get(i).split("tile_ic").size[1] == 8) eight = free.space.get(i);
  ASSERT_TRUE(eight.has_value());
  BuildOptions bo;
  bo.tuning_records = {autotune::Record::make(t, pick, measured(2e-3)),
                       autotune::Record::make(free, *eight, measured(1e-3))};
  CompiledModule tuned = build_module(g, Target::host(), bo);
  CompiledModule plain = build_module(g, Target::host(), BuildOptions{});
  ASSERT_GE(tuned.tuning_report.size(), 3u);
  EXPECT_EQ(tuned.tuning_report[0], "tuning log: 1 workload(s) tuned, 1 with default configs");
  EXPECT_NE(tuned.tuning_report[1].find("used 1 record; ignored 1: 1 whose config does not fit"),
            std::string::npos)
      << tuned.tuning_report[1];
  // The same layouts as the untuned build: no extra transforms, the same kernel count.
  EXPECT_EQ(tuned.num_kernels, plain.num_kernels);

  // Same numbers as the untuned build on a random input.
  auto a = runtime::GraphExecutor::create(tuned.graph_json, tuned.lib, tuned.params);
  auto b = runtime::GraphExecutor::create(plain.graph_json, plain.lib, plain.params);
  runtime::NDArray x = random_array({1, 32, 6, 6}, rng);
  a.set_input("x", x);
  b.set_input("x", x);
  a.run();
  b.run();
  runtime::NDArray ya = a.get_output(0), yb = b.get_output(0);
  ASSERT_EQ(ya.shape(), yb.shape());
  for (int64_t k = 0; k < ya.numel(); ++k)
    ASSERT_NEAR(ya.data_as<float>()[k], yb.data_as<float>()[k],
                1e-4 * (1 + std::abs(yb.data_as<float>()[k])))
        << k;
}

// A dense whose N is not a multiple of the panel width computes whole panels and slices; the
// padded kernel defines its knobs for the layer's own N, so every tuned panel width applies (a
// width of 32 for N = 40 had failed to compile: the padded N = 64 offered other candidates).
TEST(TuningTasks, EveryPanelWidthOfAPaddedDenseCompiles) {
  std::mt19937 rng(9);
  const int64_t M = 3, K = 24, N = 40;
  Graph g;
  Entry x = g.add_input("x", {M, K}, f32);
  runtime::NDArray w = random_array({N, K}, rng);
  g.add_output(g.add_op("dense", {x, g.add_constant("w", w)}, {}, "fc"));
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 1u);
  const autotune::Task& t = tasks[0].task;
  runtime::NDArray xv = random_array({M, K}, rng);
  std::set<int64_t> widths;
  for (uint64_t i = 0; i < t.space.size(); ++i) {
    autotune::Config c = t.space.get(i);
    if (!widths.insert(c.knob("tile_x")).second) continue;
    BuildOptions bo;
    bo.tuning_records = {autotune::Record::make(t, c, measured(1e-3))};
    CompiledModule m = build_module(g, Target::host(), bo);
    auto ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
    ex.set_input("x", xv);
    ex.run();
    runtime::NDArray y = ex.get_output(0);
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{M, N}));
    for (int64_t r = 0; r < M; ++r)
      for (int64_t n = 0; n < N; ++n) {
        float want = 0;
        for (int64_t k = 0; k < K; ++k)
          want += xv.data_as<float>()[r * K + k] * w.data_as<float>()[n * K + k];
        ASSERT_NEAR(y.data_as<float>()[r * N + n], want, 1e-4f * (1 + std::abs(want)))
            << "tile_x " << c.knob("tile_x") << " at " << r << "," << n;
      }
  }
  EXPECT_EQ(widths, (std::set<int64_t>{16, 32, 48}));
}

// The --minutes budget follows the model's arithmetic: flops × nodes, small tasks floored at a
// quarter of the mean weight.
TEST(TuningBudget, SharesFollowTheModelsArithmetic) {
  auto task = [](double flops, size_t nodes) {
    TuningTask t;
    t.task.flops = flops;
    t.nodes.assign(nodes, "n");
    return t;
  };
  // Weights 300, 100, 100, 1 -> the floor is 0.25 · 501 / 4 = 31.3125.
  std::vector<TuningTask> tasks = {task(100, 3), task(100, 1), task(50, 2), task(1, 1)};
  std::vector<double> w = budget_weights(tasks, {0, 1, 2, 3});
  const double sum = 300 + 100 + 100 + 31.3125;
  ASSERT_EQ(w.size(), 4u);
  EXPECT_NEAR(w[0], 300 / sum, 1e-12);
  EXPECT_NEAR(w[1], 100 / sum, 1e-12);
  EXPECT_NEAR(w[2], 100 / sum, 1e-12);
  EXPECT_NEAR(w[3], 31.3125 / sum, 1e-12);
  // A selection: only those tasks share.
  std::vector<double> two = budget_weights(tasks, {1, 3});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NEAR(two[0], 100 / (100 + 12.625), 1e-12);  // floor 0.25 · 101 / 2
  EXPECT_TRUE(budget_weights(tasks, {}).empty());
}

// Records carry the thread count they were measured with: a build for N threads uses only
// those, and says how many others it ignored.
TEST(TuningTasks, RecordsAreKeyedByThreadCount) {
  std::mt19937 rng(4);
  Graph g = two_convs(rng);
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 2u);
  const autotune::Task& t1 = tasks[0].task;
  autotune::Task t2 = autotune::with_threads(t1, 2);
  EXPECT_EQ(t1.target, autotune::target_key(Target::host()));
  EXPECT_EQ(t1.target.find("threads="), std::string::npos) << t1.target;
  EXPECT_EQ(t2.target, t1.target + "; threads=2");
  EXPECT_EQ(t2.key(), t1.key());  // the same workload, another target
  EXPECT_EQ(autotune::split_target_threads(t2.target), std::make_pair(t1.target, 2));
  EXPECT_EQ(autotune::split_target_threads(t1.target), std::make_pair(t1.target, 1));
  const autotune::Config a = t1.space.get(0), b = t1.space.get(1);
  ASSERT_NE(a, b);
  BuildOptions bo;
  bo.tuning_records = {autotune::Record::make(t1, a, measured(1e-3)),
                       autotune::Record::make(t2, b, measured(2e-3))};
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("tuning_threads " + std::to_string(threads));
    bo.tuning_threads = threads;
    CompiledModule m = build_module(g, Target::host(), bo);
    ASSERT_GE(m.tuning_report.size(), 2u);
    EXPECT_EQ(m.tuning_report[0], threads == 3
                                      ? "tuning log: 0 workload(s) tuned, 2 with default configs"
                                      : "tuning log: 1 workload(s) tuned, 1 with default configs");
    const std::string& line = m.tuning_report[1];
    if (threads == 3) {
      EXPECT_NE(line.find("ignored 2: 2 measured with another thread count"), std::string::npos)
          << line;
    } else {
      EXPECT_NE(line.find("used 1 record; ignored 1: 1 measured with another thread count"),
                std::string::npos)
          << line;
    }
  }
  bo.tuning_threads = 0;
  EXPECT_EQ(kiln::testing::error_of([&] { build_module(g, Target::host(), bo); }),
            "build_module: tuning_threads must be at least 1, got 0");
}

// A 3x3 stride-1 layer the compiler computes by Winograd yields a Winograd task and a direct
// one; compiling with records of both uses the faster algorithm, with its record.
TEST(TuningTasks, WinogradLayerTunesBothAlgorithms) {
  std::mt19937 rng(3);
  Graph g;
  Entry x = g.add_input("x", {1, 32, 14, 14}, f32);
  Entry a = g.add_op("conv2d", {x, g.add_constant("w", random_array({32, 32, 3, 3}, rng))},
                     {{"padding", Ints{1, 1, 1, 1}}}, "conv");
  g.add_output(g.add_op("relu", {a}));
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].op, "conv2d_winograd");
  EXPECT_EQ(tasks[1].op, "conv2d");
  const autotune::Task &wt = tasks[0].task, &dt = tasks[1].task;
  EXPECT_EQ(wt.key().rfind("conv2d_winograd_nchwc(conv2d N1 C32 H14 W14 O32 K3x3", 0), 0u)
      << wt.key();
  EXPECT_EQ(dt.key().rfind("conv2d_nchwc(conv2d N1 C32 H14 W14 O32 K3x3", 0), 0u) << dt.key();
  CompiledModule plain = build_module(g, Target::host(), BuildOptions{});
  EXPECT_NE(plain.graph_json.find("conv2d_winograd_nchwc"), std::string::npos);
  runtime::NDArray xv = random_array({1, 32, 14, 14}, rng);
  auto eb = runtime::GraphExecutor::create(plain.graph_json, plain.lib, plain.params);
  eb.set_input("x", xv);
  eb.run();
  runtime::NDArray yb = eb.get_output(0);
  // Winograd faster, then direct faster: the build follows the log, and agrees numerically.
  for (bool wino_faster : {true, false}) {
    SCOPED_TRACE(wino_faster ? "winograd faster" : "direct faster");
    BuildOptions bo;
    bo.tuning_records = {
        autotune::Record::make(wt, wt.space.get(1), measured(wino_faster ? 1e-3 : 3e-3)),
        autotune::Record::make(dt, dt.space.get(1), measured(2e-3))};
    CompiledModule tuned = build_module(g, Target::host(), bo);
    ASSERT_GE(tuned.tuning_report.size(), 2u);
    EXPECT_EQ(tuned.tuning_report[0], "tuning log: 1 workload(s) tuned, 0 with default configs");
    EXPECT_EQ(tuned.tuning_report[1].rfind(
                  wino_faster ? "tuned   conv2d_winograd_nchwc(" : "tuned   conv2d_nchwc(", 0),
              0u)
        << tuned.tuning_report[1];
    EXPECT_EQ(tuned.graph_json.find("conv2d_winograd_nchwc") != std::string::npos, wino_faster);
    auto ea = runtime::GraphExecutor::create(tuned.graph_json, tuned.lib, tuned.params);
    ea.set_input("x", xv);
    ea.run();
    runtime::NDArray ya = ea.get_output(0);
    for (int64_t k = 0; k < ya.numel(); ++k)
      ASSERT_NEAR(ya.data_as<float>()[k], yb.data_as<float>()[k],
                  1e-4 * (1 + std::abs(yb.data_as<float>()[k])))
          << k;
  }
}

// The first `n` points of `t`'s space other than its default config.
std::vector<autotune::Config> non_default_configs(const autotune::Task& t, size_t n) {
  const autotune::Config d = t.default_config();
  std::vector<autotune::Config> r;
  for (uint64_t i = 0; i < t.space.size() && r.size() < n; ++i)
    if (t.space.get(i) != d) r.push_back(t.space.get(i));
  return r;
}

// x [1, 32, 14, 14] → conv 3x3 (Winograd or direct) → relu → conv 1x1 → relu.
Graph winograd_then_pointwise(std::mt19937& rng) {
  Graph g;
  Entry x = g.add_input("x", {1, 32, 14, 14}, f32);
  Entry a = g.add_op("conv2d", {x, g.add_constant("w1", random_array({32, 32, 3, 3}, rng))},
                     {{"padding", Ints{1, 1, 1, 1}}}, "conv3x3");
  Entry b = g.add_op(
      "conv2d", {g.add_op("relu", {a}), g.add_constant("w2", random_array({32, 32, 1, 1}, rng))},
      {}, "conv1x1");
  g.add_output(g.add_op("relu", {b}));
  return g;
}

// In-network times outrank the tuner's: the log says Winograd is faster alone, the model says
// direct; compiling follows the model, for the algorithm and for the config.
TEST(TuningTasks, InNetworkTimesDecide) {
  std::mt19937 rng(5);
  Graph g = winograd_then_pointwise(rng);
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 3u);
  const autotune::Task &wt = tasks[0].task, &dt = tasks[1].task;
  std::vector<autotune::Config> dc = non_default_configs(dt, 2);
  auto net = [](autotune::Record r) {
    r.protocol = autotune::Record::kNetworkProtocol;
    return r;
  };
  BuildOptions bo;
  bo.tuning_records = {autotune::Record::make(wt, wt.space.get(1), measured(1e-3)),
                       autotune::Record::make(dt, dc[0], measured(2e-3)),
                       autotune::Record::make(dt, dc[1], measured(3e-3))};
  CompiledModule isolated = build_module(g, Target::host(), bo);
  EXPECT_NE(isolated.graph_json.find("conv2d_winograd_nchwc"), std::string::npos);
  bo.tuning_records.push_back(net(autotune::Record::make(wt, wt.space.get(1), measured(5e-3))));
  bo.tuning_records.push_back(net(autotune::Record::make(dt, dc[0], measured(4e-3))));
  bo.tuning_records.push_back(net(autotune::Record::make(dt, dc[1], measured(3.5e-3))));
  CompiledModule m = build_module(g, Target::host(), bo);
  EXPECT_EQ(m.graph_json.find("conv2d_winograd_nchwc"), std::string::npos);
  autotune::BestRecord b = autotune::best_record(bo.tuning_records, dt);
  EXPECT_TRUE(b.from_network);
  EXPECT_EQ(b.config, dc[1]);
  bool found = false;
  for (const std::string& line : m.tuning_report)
    if (line.rfind("tuned   conv2d_nchwc(conv2d N1 C32 H14 W14 O32 K3x3", 0) == 0) {
      found = true;
      EXPECT_NE(line.find("used 4 records, 2 timed inside a model: chosen by those"),
                std::string::npos)
          << line;
    }
  EXPECT_TRUE(found);
}

// The check compiles one variant per candidate and attributes each kernel's time to its
// workload's candidate: every candidate gets one in-network record per round.
TEST(NetworkCheck, TimesEveryCandidateInsideTheModel) {
  std::mt19937 rng(6);
  Graph g = winograd_then_pointwise(rng);
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 3u);
  ASSERT_EQ(tasks[0].op, "conv2d_winograd");
  ASSERT_EQ(tasks[1].op, "conv2d");
  ASSERT_EQ(tasks[2].op, "conv2d");
  const autotune::Task &wt = tasks[0].task, &dt = tasks[1].task, &pt = tasks[2].task;
  std::vector<autotune::Config> wc = non_default_configs(wt, 2), dc = non_default_configs(dt, 1),
                                pc = non_default_configs(pt, 3);
  ASSERT_EQ(wc.size(), 2u);
  std::vector<autotune::Record> log = {autotune::Record::make(wt, wc[0], measured(1e-3)),
                                       autotune::Record::make(wt, wc[1], measured(1.5e-3)),
                                       autotune::Record::make(dt, dc[0], measured(2e-3)),
                                       autotune::Record::make(pt, pc[0], measured(1e-4)),
                                       autotune::Record::make(pt, pc[1], measured(2e-4)),
                                       autotune::Record::make(pt, pc[2], measured(3e-4))};
  NetworkCheckOptions opt;
  opt.rounds = 2;
  opt.runs = 2;
  opt.set_inputs = [&](runtime::GraphExecutor& ex) {
    ex.set_input("x", random_array({1, 32, 14, 14}, rng));
  };
  NetworkCheckResult r = check_in_network(g, Target::host(), tasks, log, opt);
  EXPECT_EQ(r.variants, 4);
  // 3x3: Winograd tuned, its default (the untuned algorithm), direct tuned, Winograd 2nd;
  // 1x1: tuned, default, 2nd, 3rd. Each in one variant: one record per round.
  std::map<std::pair<std::string, uint64_t>, int> count;
  for (const autotune::Record& rec : r.records) {
    EXPECT_TRUE(rec.in_network());
    EXPECT_GT(rec.result.mean_s, 0);
    const autotune::Task& t = rec.task == wt.key() ? wt : rec.task == dt.key() ? dt : pt;
    ++count[{rec.task, autotune::Config::from_json(rec.config, t.space).index()}];
  }
  EXPECT_EQ(r.records.size(), 16u);
  EXPECT_EQ(count.size(), 8u);
  for (const auto& [key, n] : count) EXPECT_EQ(n, 2) << key.first << " config " << key.second;
  EXPECT_EQ((count[{wt.key(), wc[1].index()}]), 2);
  EXPECT_EQ((count[{dt.key(), dc[0].index()}]), 2);
  ASSERT_EQ(r.lines.size(), 2u);
  EXPECT_NE(r.lines[0].find("conv2d_winograd_nchwc tuned"), std::string::npos) << r.lines[0];
  EXPECT_NE(r.lines[0].find("conv2d_winograd_nchwc default"), std::string::npos) << r.lines[0];
  EXPECT_NE(r.lines[0].find("conv2d_nchwc tuned"), std::string::npos) << r.lines[0];
  EXPECT_NE(r.lines[1].find(": tuned "), std::string::npos) << r.lines[1];

  opt.candidates = 1;
  EXPECT_EQ(kiln::testing::error_of([&] { check_in_network(g, Target::host(), tasks, log, opt); }),
            "check_in_network: needs at least 2 candidates, 1 round and 1 run (got 1, 2, 2)");
}

}  // namespace
}  // namespace kiln::tuning
