// Tuning records: JSON round trip of successful and failed measurements, task and target keys,
// a log with a damaged last line (skipped with a warning naming file and line; appending after
// it keeps every new record), bad fields named, and the best-record lookup that counts and
// ignores records of another target or template version.
#include "kiln/autotune/record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "tune_templates.h"

namespace kiln::autotune {
namespace {

namespace fs = std::filesystem;

std::string temp_log(const std::string& name) {
  fs::path p = fs::temp_directory_path() /
               ("kiln-autotune-" + std::to_string(::getpid()) + "-" + name + ".jsonl");
  fs::remove(p);
  return p.string();
}

MeasureResult ok_result(double mean) {
  MeasureResult r;
  r.mean_s = mean;
  r.std_s = mean / 100;
  r.runs = {mean * 0.99, mean * 1.01};
  r.compile_s = 0.05;
  return r;
}

MeasureResult failed(ErrorKind k, const std::string& msg) {
  MeasureResult r;
  r.error = k;
  r.error_msg = msg;
  return r;
}

TEST(Task, KeysNameTemplateWorkloadAndTarget) {
  Task t = Task::make(test_templates::matmul_template(8));
  EXPECT_EQ(t.workload, "A:float32[8,8],B:float32[8,8],C:float32[8,8]");
  EXPECT_EQ(t.key(), "test_matmul(A:float32[8,8],B:float32[8,8],C:float32[8,8])");
  EXPECT_EQ(t.version, "1");
  // The target key resolves the host CPU: never the bare "native" string alone.
  EXPECT_NE(t.target.find("cpu="), std::string::npos) << t.target;
  EXPECT_NE(t.target.find("features="), std::string::npos) << t.target;
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * 8 * 8 * 8);
  Task other = Task::make(test_templates::matmul_template(8), Target("llvm -mcpu=skylake-avx512"));
  EXPECT_NE(other.target, t.target);
  EXPECT_EQ(other.key(), t.key());
}

TEST(Record, JsonRoundTrip) {
  Task t = Task::make(test_templates::matmul_template(8));
  Config c = t.space.get(7);
  Record a = Record::make(t, c, ok_result(1.5e-4));
  Record b = Record::from_json(nlohmann::json::parse(a.to_json().dump()));
  EXPECT_EQ(b.task, t.key());
  EXPECT_EQ(b.target, t.target);
  EXPECT_EQ(b.version, "1");
  EXPECT_EQ(b.template_name, "test_matmul");
  EXPECT_EQ(Config::from_json(b.config, t.space), c);
  EXPECT_TRUE(b.result.ok());
  EXPECT_DOUBLE_EQ(b.result.mean_s, 1.5e-4);
  EXPECT_DOUBLE_EQ(b.result.std_s, 1.5e-6);
  EXPECT_EQ(b.result.runs, a.result.runs);
  EXPECT_TRUE(b.result.ref_runs.empty());
  EXPECT_FALSE(a.to_json()["costs"].contains("ref_runs"));
  EXPECT_GT(b.timestamp, 1.6e9);
  // Timed against the default: ref_runs round-trip.
  Record p = a;
  p.result.ref_runs = {2e-4, 3e-4};
  ASSERT_EQ(p.result.runs.size(), 2u);
  EXPECT_EQ(Record::from_json(nlohmann::json::parse(p.to_json().dump())).result.ref_runs,
            p.result.ref_runs);

  Record e = Record::make(t, c, failed(ErrorKind::kCrash, "killed by signal 6"));
  Record f = Record::from_json(e.to_json());
  EXPECT_EQ(f.result.error, ErrorKind::kCrash);
  EXPECT_EQ(f.result.error_msg, "killed by signal 6");
  EXPECT_TRUE(e.to_json()["costs"].is_null());
  EXPECT_FALSE(e.to_json().contains("protocol"));  // the tuner's own measurement

  Record n = a;
  n.protocol = Record::kNetworkProtocol;
  EXPECT_EQ(n.to_json()["protocol"], "network");
  EXPECT_TRUE(Record::from_json(n.to_json()).in_network());
  EXPECT_FALSE(b.in_network());
  nlohmann::json bad = n.to_json();
  bad["protocol"] = "warm";
  EXPECT_EQ(kiln::testing::error_of([&] { Record::from_json(bad); }),
            "field 'protocol' must be \"network\" when present");
}

TEST(Record, BadFieldsAreNamed) {
  Task t = Task::make(test_templates::matmul_template(8));
  nlohmann::json j = Record::make(t, t.space.get(0), ok_result(1e-3)).to_json();
  nlohmann::json no_task = j;
  no_task.erase("task");
  EXPECT_NE(kiln::testing::error_of([&] {
              Record::from_json(no_task);
            }).find("missing string field 'task'"),
            std::string::npos);
  nlohmann::json bad_cost = j;
  bad_cost["costs"]["mean"] = -1;
  EXPECT_NE(kiln::testing::error_of([&] {
              Record::from_json(bad_cost);
            }).find("field 'costs' needs a positive number 'mean'"),
            std::string::npos);
  nlohmann::json short_ref = j;
  short_ref["costs"]["ref_runs"] = {1e-3};
  EXPECT_EQ(kiln::testing::error_of([&] { Record::from_json(short_ref); }),
            "field 'costs.ref_runs' must be an array as long as 'costs.runs'");
  nlohmann::json bad_ref = j;
  bad_ref["costs"]["ref_runs"] = nlohmann::json::array();
  for (size_t i = 0; i < j["costs"]["runs"].size(); ++i) bad_ref["costs"]["ref_runs"].push_back(0);
  EXPECT_EQ(kiln::testing::error_of([&] { Record::from_json(bad_ref); }),
            "field 'costs.ref_runs' must hold positive numbers");
}

TEST(MeasureResult, RelativeIsTheFastestRepeatOverTheReferences) {
  MeasureResult r;
  r.runs = {3e-3, 2e-3, 9e-3};
  r.mean_s = 4.5e-3;
  EXPECT_EQ(r.relative(), 0);  // not timed against the default
  r.ref_runs = {4e-3, 1.6e-3, 3e-3};
  EXPECT_DOUBLE_EQ(r.relative(), 2e-3 / 1.6e-3);
  r.runs.push_back(4e-3);
  EXPECT_EQ(r.relative(), 0);  // unpaired
  r.ref_runs.push_back(0.8e-3);
  EXPECT_DOUBLE_EQ(r.relative(), 2.5);
  r.ref_runs.back() = 0;  // a broken reference gives none
  EXPECT_EQ(r.relative(), 0);
  r.ref_runs.back() = 0.8e-3;
  // Compared by relative time, a measurement in a slow period (every time 1.5x) ranks as it is.
  MeasureResult slow = r;
  for (double* v : {&slow.runs[0], &slow.runs[1], &slow.runs[2], &slow.runs[3], &slow.ref_runs[0],
                    &slow.ref_runs[1], &slow.ref_runs[2], &slow.ref_runs[3], &slow.mean_s})
    *v *= 1.5;
  EXPECT_DOUBLE_EQ(comparable_cost(slow, true), comparable_cost(r, true));
  EXPECT_GT(comparable_cost(slow, false), comparable_cost(r, false));
}

TEST(RecordLog, BestRecordComparesRelativeTimesWhenEveryRecordHasOne) {
  // Config 1 measured in a slow period (3 ms, the default beside it 3 ms too), config 2 in a
  // fast one (2 ms against the default's 1 ms): by seconds 2 wins, by relative time 1.
  Task t = Task::make(test_templates::matmul_template(8));
  auto paired = [](double s, double ref) {
    MeasureResult r = ok_result(s);
    r.ref_runs.assign(r.runs.size(), ref);
    return r;
  };
  std::vector<Record> recs = {Record::make(t, t.space.get(1), paired(3e-3, 3e-3)),
                              Record::make(t, t.space.get(2), paired(2e-3, 1e-3))};
  EXPECT_EQ(best_record(recs, t).config, t.space.get(1));
  EXPECT_EQ(rank_configs(recs, t).front().config, t.space.get(1));
  // One record without the reference (an older log): all compare by seconds.
  recs.push_back(Record::make(t, t.space.get(3), ok_result(4e-3)));
  EXPECT_EQ(best_record(recs, t).config, t.space.get(2));
}

// Config 1 was measured twice in a slow period of the machine (its default beside it at 1.5
// ms, the fast state's 1 ms), looking 0.6x the default, and once in the fast state at 1.05x;
// config 2 twice in the fast state at 0.97-0.98x; config 3 once, in a slow period, at 1.1x. By
// the upper median of all records config 1 wins (0.62); by its fast-state record alone it is
// slower than config 2.
TEST(RecordLog, AConfigIsJudgedByItsFastStateRecords) {
  Task t = Task::make(test_templates::matmul_template(8));
  auto paired = [](double rel, double ref) {
    MeasureResult r = ok_result(rel * ref);
    r.runs = {rel * ref, rel * ref * 1.01};
    r.ref_runs = {ref, ref * 1.02};
    return r;
  };
  std::vector<Record> recs = {
      Record::make(t, t.space.get(0), paired(1.0, 1e-3)),
      Record::make(t, t.space.get(1), paired(0.6, 1.5e-3)),
      Record::make(t, t.space.get(2), paired(0.97, 1e-3)),
      Record::make(t, t.space.get(1), paired(1.05, 1e-3)),
      Record::make(t, t.space.get(3), paired(1.1, 1.5e-3)),
      Record::make(t, t.space.get(2), paired(0.98, 1.01e-3)),
      Record::make(t, t.space.get(1), paired(0.62, 1.45e-3)),
  };
  BestRecord b = best_record(recs, t);
  EXPECT_EQ(b.config, t.space.get(2));
  EXPECT_DOUBLE_EQ(b.best->result.relative(), 0.98);
  EXPECT_EQ(b.slow, 3u);
  EXPECT_EQ(b.summary(), "used 7 records, 3 in a slow period of the machine");
  std::vector<RankedConfig> r = rank_configs(recs, t);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].config, t.space.get(2));
  EXPECT_EQ(r[1].config, t.space.get(0));
  EXPECT_EQ(r[2].config, t.space.get(1));
  EXPECT_DOUBLE_EQ(r[2].result.relative(), 1.05);
  EXPECT_FALSE(r[2].slow_only);
  EXPECT_EQ(r[3].config, t.space.get(3));  // judged by its slow-period record, all it has
  EXPECT_TRUE(r[3].slow_only);
  EXPECT_EQ(r[3].records, 1u);
  // Every record counts with the state off (factor 0), or without references to tell it by.
  EXPECT_EQ(best_record(recs, t, Protocol::kPreferNetwork, 0).config, t.space.get(1));
  EXPECT_EQ(best_record(recs, t, Protocol::kPreferNetwork, 0).slow, 0u);
  for (Record& x : recs) x.result.ref_runs.clear();
  EXPECT_EQ(best_record(recs, t).config, t.space.get(1));
}

TEST(RecordLog, CorruptLastLineIsSkippedWithAWarning) {
  Task t = Task::make(test_templates::matmul_template(8));
  std::string path = temp_log("corrupt");
  {
    RecordWriter w(path);
    for (int i = 0; i < 3; ++i) w.write(Record::make(t, t.space.get(i), ok_result(1e-3 + i)));
  }
  {
    // A run killed mid-write: half a line, no newline.
    std::ofstream out(path, std::ios::app);
    out << R"({"kiln_record": 1, "task": "test_matmul(A:flo)";
  }
  RecordLog log = load_records(path, /*print_warnings=*/false);
  EXPECT_EQ(log.records.size(), 3u);
  EXPECT_EQ(log.skipped, 1u);
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_NE(log.warnings[0].find(path + ":4: skipped a corrupt or partial record"),
            std::string::npos)
      << log.warnings[0];

  // Appending after the damage: the writer ends the broken line first, so no record is lost.
  {
    RecordWriter w(path);
    w.write(Record::make(t, t.space.get(3), ok_result(5e-4)));
    w.write(Record::make(t, t.space.get(4), failed(ErrorKind::kTimeout, "too slow")));
  }
  log = load_records(path, false);
  ASSERT_EQ(log.records.size(), 5u);
  EXPECT_EQ(log.skipped, 1u);
  EXPECT_EQ(Config::from_json(log.records[3].config, t.space), t.space.get(3));
  EXPECT_EQ(log.records[4].result.error, ErrorKind::kTimeout);

  // A missing file is an empty log.
  fs::remove(path);
  EXPECT_TRUE(load_records(path, false).records.empty());
}

TEST(RecordLog, BestRecordIgnoresOtherTargetsAndVersions) {
  Task t = Task::make(test_templates::matmul_template(8));
  Task v2 = Task::make(test_templates::matmul_template(8, "2"));
  Task avx512 = Task::make(test_templates::matmul_template(8), Target("llvm -mcpu=skylake-avx512"));
  Task other = Task::make(test_templates::matmul_template(16));
  std::vector<Record> recs = {
      Record::make(t, t.space.get(1), ok_result(3e-3)),
      Record::make(t, t.space.get(2), ok_result(2e-3)),
      Record::make(t, t.space.get(3), failed(ErrorKind::kWrongResult, "differs")),
      // Faster, but not applicable: another template version / target.
      Record::make(v2, v2.space.get(4), ok_result(1e-6)),
      Record::make(avx512, avx512.space.get(5), ok_result(1e-6)),
      Record::make(avx512, avx512.space.get(6), ok_result(1e-6)),
      // Another workload: not counted at all.
      Record::make(other, other.space.get(0), ok_result(1e-7)),
  };
  // A record whose config does not fit the space (a knob the template no longer has).
  Record bad = Record::make(t, t.space.get(0), ok_result(1e-8));
  bad.config["knobs"]["gone"] = 1;
  recs.push_back(bad);

  BestRecord b = best_record(recs, t);
  ASSERT_TRUE(b.best.has_value());
  EXPECT_DOUBLE_EQ(b.best->result.mean_s, 2e-3);
  EXPECT_EQ(b.config, t.space.get(2));
  EXPECT_EQ(b.used, 3u);
  EXPECT_EQ(b.failed, 1u);
  EXPECT_EQ(b.other_version, 1u);
  EXPECT_EQ(b.other_target, 2u);
  EXPECT_EQ(b.bad_config, 1u);
  EXPECT_EQ(b.summary(),
            "used 3 records (1 failed); ignored 4: 2 for another target, 1 for another template "
            "version, 1 whose config does not fit the space");

  BestRecord none = best_record(recs, Task::make(test_templates::matmul_template(32)));
  EXPECT_FALSE(none.best.has_value());
  EXPECT_EQ(none.summary(), "used 0 records");
}

TEST(RecordLog, BestRecordJudgesAConfigByItsMedian) {
  // Config 1 was measured once lucky (1 ms) and twice more at 3 ms; config 2 twice at 2 ms.
  // By the upper median config 2 wins; config 3's single record counts as it is.
  Task t = Task::make(test_templates::matmul_template(8));
  std::vector<Record> recs = {
      Record::make(t, t.space.get(1), ok_result(1e-3)),
      Record::make(t, t.space.get(2), ok_result(2e-3)),
      Record::make(t, t.space.get(3), ok_result(2.5e-3)),
      Record::make(t, t.space.get(1), ok_result(3e-3)),
      Record::make(t, t.space.get(2), ok_result(2e-3)),
      Record::make(t, t.space.get(1), ok_result(3e-3)),
  };
  BestRecord b = best_record(recs, t);
  ASSERT_TRUE(b.best.has_value());
  EXPECT_EQ(b.config, t.space.get(2));
  EXPECT_DOUBLE_EQ(b.best->result.mean_s, 2e-3);
  EXPECT_EQ(b.used, 6u);
  // Of two records the slower one counts: config 1 at (1, 3) ms loses to config 3's 2.5 ms.
  recs.erase(recs.begin() + 5);
  recs.erase(recs.begin() + 4);
  recs.erase(recs.begin() + 1);
  b = best_record(recs, t);
  EXPECT_EQ(b.config, t.space.get(3));
  // A config that once failed (here: a wrong result) is disqualified, however fast it was.
  recs.push_back(Record::make(t, t.space.get(3), failed(ErrorKind::kWrongResult, "differs")));
  b = best_record(recs, t);
  EXPECT_EQ(b.config, t.space.get(1));
}

// In the model a config counts its fastest round: rounds in the machine's slow periods moved
// config 1 (2.0 ms in the fast state) more than config 2 (2.2 ms); by their medians 2 would win.
TEST(RecordLog, InNetworkConfigsCompareTheirFastestRound) {
  Task t = Task::make(test_templates::matmul_template(8));
  std::vector<Record> recs;
  for (auto [config, ms] : std::vector<std::pair<int, double>>{
           {1, 2.6}, {2, 2.3}, {1, 2.0}, {2, 2.2}, {1, 2.6}, {2, 2.3}}) {
    recs.push_back(Record::make(t, t.space.get(config), ok_result(ms * 1e-3)));
    recs.back().protocol = Record::kNetworkProtocol;
  }
  BestRecord b = best_record(recs, t);
  EXPECT_EQ(b.config, t.space.get(1));
  EXPECT_DOUBLE_EQ(b.best->result.mean_s, 2.0e-3);
  std::vector<RankedConfig> r = rank_configs(recs, t, Protocol::kPreferNetwork);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[1].median_s, 2.2e-3);
  // The tuner's own records still count their upper median.
  for (Record& x : recs) x.protocol.clear();
  EXPECT_EQ(best_record(recs, t).config, t.space.get(2));
}

TEST(RecordLog, InNetworkRecordsOutrankTheTunersOwn) {
  // Alone, config 1 beats 2 and 3; inside the model, 2 beats 1, and 3 was never timed there.
  Task t = Task::make(test_templates::matmul_template(8));
  auto net = [](Record r) {
    r.protocol = Record::kNetworkProtocol;
    return r;
  };
  std::vector<Record> recs = {
      Record::make(t, t.space.get(1), ok_result(1e-3)),
      Record::make(t, t.space.get(2), ok_result(2e-3)),
      Record::make(t, t.space.get(3), ok_result(1.5e-3)),
      net(Record::make(t, t.space.get(1), ok_result(4e-3))),
      net(Record::make(t, t.space.get(2), ok_result(3e-3))),
      net(Record::make(t, t.space.get(2), ok_result(3.2e-3))),
  };
  BestRecord b = best_record(recs, t);
  EXPECT_EQ(b.config, t.space.get(2));
  EXPECT_TRUE(b.from_network);
  EXPECT_DOUBLE_EQ(b.best->result.mean_s, 3e-3);  // the fastest of its rounds in the model
  EXPECT_EQ(b.used, 6u);
  EXPECT_EQ(b.network, 3u);
  EXPECT_EQ(b.summary(), "used 6 records, 3 timed inside a model: chosen by those");
  BestRecord alone = best_record(recs, t, Protocol::kIsolated);
  EXPECT_EQ(alone.config, t.space.get(1));
  EXPECT_FALSE(alone.from_network);

  std::vector<RankedConfig> r = rank_configs(recs, t);  // the tuner's ranking
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].config, t.space.get(1));
  EXPECT_EQ(r[1].config, t.space.get(3));
  EXPECT_EQ(r[2].config, t.space.get(2));
  std::vector<RankedConfig> rn = rank_configs(recs, t, Protocol::kPreferNetwork);
  ASSERT_EQ(rn.size(), 2u);
  EXPECT_EQ(rn[0].config, t.space.get(2));
  EXPECT_EQ(rn[0].records, 2u);
  EXPECT_DOUBLE_EQ(rn[1].median_s, 4e-3);

  // A failure inside the model disqualifies too.
  recs.push_back(net(Record::make(t, t.space.get(2), failed(ErrorKind::kRuntime, "x"))));
  b = best_record(recs, t);
  EXPECT_EQ(b.config, t.space.get(1));
  EXPECT_TRUE(b.from_network);
}

}  // namespace
}  // namespace kiln::autotune
