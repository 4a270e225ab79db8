// The fidelity check (tuning/fidelity.h): Spearman's rank correlation against hand-computed
// values; a measurement path that ranks configs against the model is caught (both sides
// injected, so nothing here depends on timing); the real path times what it sampled.
#include "kiln/tuning/fidelity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/error.h"
#include "graph/graph_test_util.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/tuning/tasks.h"
#include "tuning/tuning_test_models.h"

namespace kiln::tuning {
namespace {

using namespace kiln::graph;  // NOLINT: the graph API the test model is built with

using test_util::random_array;

using test_models::two_convs;

TEST(Spearman, HandComputedValues) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4, 5}, {10, 20, 30, 40, 50}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}), -1.0);
  // Ranks differ by 1 in four places: 1 - 6·4 / (5·24) = 0.8.
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
  // Monotone but not linear: ranks only.
  EXPECT_DOUBLE_EQ(spearman({0.1, 0.2, 0.3, 9}, {1, 100, 1000, 1e6}), 1.0);
  // Ties share their mean rank: b's ranks are 1.5, 1.5, 3, 4; a's 1..4.
  // Pearson of (1,2,3,4) and (1.5,1.5,3,4) = 4.5 / sqrt(5 · 4.5).
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {7, 7, 8, 9}), 4.5 / std::sqrt(5 * 4.5), 1e-12);
  EXPECT_TRUE(std::isnan(spearman({1, 2}, {2, 1})));
  EXPECT_TRUE(std::isnan(spearman({1, 2, 3}, {4, 4, 4})));
}

/// Injected sides: config k of a task (in sampling order) takes iso[k] alone and net[k] inside.
struct Fake {
  std::map<size_t, std::vector<double>> net_ms;  ///< per task, per config in sampling order
  std::map<size_t, std::vector<double>> iso_s;
  int network_calls = 0;
};

FidelityOptions fake_options(Fake& f, const std::vector<TuningTask>& tasks) {
  FidelityOptions o;
  o.samples = 5;
  o.isolated = [&f, &tasks](const TuningTask& t, const std::vector<autotune::Config>& cs) {
    const size_t i = static_cast<size_t>(&t - tasks.data());
    std::vector<double> s = f.iso_s.at(i);
    s.resize(cs.size());
    return s;
  };
  o.in_network = [&f](const std::vector<Workload>& ws, std::vector<std::vector<Choice>>& cs) {
    ++f.network_calls;
    for (size_t w = 0; w < ws.size(); ++w) {
      std::map<size_t, size_t> seen;  // task -> configs of it so far
      for (Choice& c : cs[w]) {
        const size_t k = seen[c.task]++;
        // Two rounds; the fastest counts.
        c.per_round_ms = {f.net_ms.at(c.task)[k] * 1.5, f.net_ms.at(c.task)[k]};
      }
    }
  };
  return o;
}

TEST(Fidelity, CatchesAMeasurementPathThatRanksAgainstTheModel) {
  std::mt19937 rng(3);
  Graph g = two_convs(rng);
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 2u);
  Fake f;
  // Task 1: the isolated path is good (the model's times, 1.3x faster, same order but one swap
  // of two close configs). Task 2: the path is bad: it ranks the configs the other way round,
  // one of them failing alone.
  f.iso_s[0] = {1.0e-3, 2.0e-3, 3.0e-3, 4.0e-3, 5.0e-3};
  f.net_ms[0] = {1.3, 2.6, 3.9, 5.3, 5.2};
  f.iso_s[1] = {1.0e-3, 2.0e-3, 0, 3.0e-3, 4.0e-3};
  f.net_ms[1] = {4.0, 3.0, 2.0, 1.0};  // the failed config is not in the model
  FidelityOptions o = fake_options(f, tasks);
  FidelityReport r = measure_fidelity(g, Target::host(), tasks, {0, 1}, o);
  EXPECT_EQ(f.network_calls, 1);
  ASSERT_EQ(r.tasks.size(), 2u);
  const TaskFidelity &a = r.tasks[0], &b = r.tasks[1];
  ASSERT_EQ(a.configs.size(), 5u);
  EXPECT_EQ(a.configs[0].config.index(), tasks[0].task.default_config().index());
  EXPECT_DOUBLE_EQ(a.configs[3].isolated_ms, 4.0);
  EXPECT_DOUBLE_EQ(a.configs[3].network_ms, 5.3);
  EXPECT_NEAR(a.spearman, 0.9, 1e-12);  // one adjacent swap in 5: 1 - 6·2 / 120
  EXPECT_TRUE(a.agrees);
  EXPECT_NEAR(a.ratio_min, 1.04, 1e-12);
  EXPECT_NEAR(a.ratio_max, 1.325, 1e-12);
  EXPECT_EQ(b.failed, 1);
  ASSERT_EQ(b.configs.size(), 4u);
  EXPECT_DOUBLE_EQ(b.spearman, -1.0);
  EXPECT_FALSE(b.agrees);
  // Records: none from the injected isolated side; two rounds per config in the model.
  EXPECT_EQ(r.records.size(), 18u);
  for (const autotune::Record& rec : r.records) EXPECT_TRUE(rec.in_network());

  // Geomeans: (1.3³ · 1.325 · 1.04)^(1/5) = 1.248; 4 · 1.5 · 2/3 · 1/4 = 1.
  // Regret: task 1's fastest alone is the model's fastest; task 2's is 4x the model's fastest.
  EXPECT_DOUBLE_EQ(a.pick_regret, 1.0);
  EXPECT_DOUBLE_EQ(b.pick_regret, 4.0);
  // In the model: the default's fastest round × one node each.
  EXPECT_DOUBLE_EQ(a.model_ms, 1.3);
  EXPECT_DOUBLE_EQ(b.model_ms, 4.0);
  EXPECT_EQ(r.table(tasks),
            "task  op           configs  spearman  net/iso geomean   min   max  regret  model ms\n"
            "1/2   conv2d             5      0.90             1.25  1.04  1.32   1.000     1.300"
            "        ok\n"
            "2/2   conv2d  4 (1 failed)     -1.00             1.00  0.25  4.00   4.000     4.000"
            "  DISAGREE\n"
            "1 of 2 task(s) agree (Spearman >= 0.90), 25% of their time in the model\n");
}

TEST(Fidelity, TooFewSamplesIsAUserError) {
  std::mt19937 rng(3);
  Graph g = two_convs(rng);
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  FidelityOptions o;
  o.samples = 2;
  EXPECT_EQ(kiln::testing::error_of([&] { measure_fidelity(g, Target::host(), tasks, {0}, o); }),
            "fidelity: needs at least 3 configs per task for a rank correlation (got 2)");
}

// The real path: the sampled configs are measured alone (records logged) and inside the model.
// Only what was timed is asserted, never how fast.
TEST(Fidelity, RealPathTimesEverySampledConfigOnBothSides) {
  std::mt19937 rng(4);
  Graph g = two_convs(rng);
  std::vector<TuningTask> tasks = extract_tuning_tasks(g, Target::host());
  ASSERT_EQ(tasks.size(), 2u);
  FidelityOptions o;
  o.samples = 3;
  o.measure.repeat = 1;
  o.measure.min_repeat_ms = 0.1;
  o.measure.rotate_bytes = 1 << 20;
  o.network.rounds = 2;
  o.network.runs = 1;
  o.network.set_inputs = [&](runtime::GraphExecutor& ex) {
    ex.set_input("x", random_array({1, 32, 6, 6}, rng));
  };
  FidelityReport r = measure_fidelity(g, Target::host(), tasks, {1}, o);
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_EQ(r.tasks[0].task, 1u);
  EXPECT_EQ(r.tasks[0].configs.size() + r.tasks[0].failed, 3u);
  int isolated = 0, network = 0;
  for (const autotune::Record& rec : r.records) {
    EXPECT_EQ(rec.task, tasks[1].task.key());
    (rec.in_network() ? network : isolated) += 1;
  }
  EXPECT_EQ(isolated, 3);
  EXPECT_EQ(network, 2 * static_cast<int>(r.tasks[0].configs.size()));
  for (const ConfigTimes& c : r.tasks[0].configs) {
    EXPECT_GT(c.isolated_ms, 0);
    EXPECT_GT(c.network_ms, 0);
  }
}

}  // namespace
}  // namespace kiln::tuning
