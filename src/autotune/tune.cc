// The tuning loop. Reads the log (resume: this task's records for the same target and template
// version are fed to the tuner and count as trials; other tasks' records can warm-start a model
// tuner), measures the default (the reference output, logged once), then repeats: ask the tuner
// for a batch, measure it, append each result to the log as it is known, tell the tuner, report
// progress; until the budget, the space or the patience (early stopping) runs out.
#include "kiln/autotune/tune.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <unordered_set>

#include "kiln/support/error.h"

namespace kiln::autotune {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::string TuneProgress::line() const {
  std::ostringstream os;
  char buf[64];
  os << (task ? task->key() : std::string("?")) << " trial " << trials;
  if (time_budget_s <= 0 || n_trials < 1000000) os << "/" << n_trials;
  if (verifying) os << " (verifying the best)";
  if (best_s > 0) {
    std::snprintf(buf, sizeof buf, " best %.3f ms", best_s * 1e3);
    os << buf;
    if (best_gflops > 0) {
      std::snprintf(buf, sizeof buf, " (%.2f GFLOP/s)", best_gflops);
      os << buf;
    }
    if (default_s > 0) {
      std::snprintf(buf, sizeof buf, ", %.2fx the default", default_s / best_s);
      os << buf;
    }
  }
  if (errors) os << ", " << errors << " failed";
  double eta = eta_s;
  if (time_budget_s > 0) eta = std::min(eta, std::max(0.0, time_budget_s - elapsed_s));
  std::snprintf(buf, sizeof buf, ", elapsed %.0f s, eta %.0f s", elapsed_s, eta);
  os << buf;
  return os.str();
}

TuneResult tune(const Task& task, Tuner& tuner, const TuneOptions& opt) {
  auto t_start = std::chrono::steady_clock::now();
  KILN_USER_CHECK(tuner.task().key() == task.key() && tuner.task().version == task.version &&
                  tuner.task().target == task.target)
      << "tune: the " << tuner.name() << " tuner was made for task " << tuner.task().key()
      << ", not for " << task.key();
  KILN_USER_CHECK(opt.batch_size >= 1) << "tune: batch_size must be >= 1, got " << opt.batch_size;
  TuneResult res;
  TuneProgress prog;
  prog.task = &task;
  prog.n_trials = opt.n_trials;
  prog.time_budget_s = opt.time_budget_s;

  // This task's records, logged ones included, for the verification and the final choice.
  std::vector<Record> mine;
  // Measurements compare by their relative times (MeasureResult::relative: against the default
  // timed alongside) when every one has one; a log of records without (an older Kiln, or
  // MeasureOptions::reference off) makes them compare by seconds.
  bool use_rel = opt.measure.reference;
  auto cost = [&](const MeasureResult& r) { return comparable_cost(r, use_rel); };
  // The best so far, for the progress display and early stopping.
  auto consider = [&](const Config& c, const MeasureResult& r) {
    if (!r.ok()) {
      ++res.errors;
      return;
    }
    if (!res.best || cost(r) < cost(res.best_result)) {
      res.best = c;
      res.best_result = r;
    }
  };

  // Resume from the log; warm-start from other tasks' records.
  std::vector<Record> records;
  if (!opt.log_path.empty()) {
    RecordLog log = load_records(opt.log_path);
    res.log_warnings = std::move(log.warnings);
    records = std::move(log.records);
  }
  if (auto* mt = dynamic_cast<ModelTuner*>(&tuner)) {
    for (const Task& other : opt.transfer_tasks) {
      if (other.key() == task.key()) continue;
      res.transfer_records += static_cast<int>(mt->add_transfer(other, records));
    }
  }
  std::unordered_set<uint64_t> logged;
  {
    std::vector<Config> cfgs;
    std::vector<MeasureResult> results;
    const std::string key = task.key();
    for (const Record& r : records)
      if (r.task == key && r.target == task.target && r.version == task.version &&
          !r.in_network() && r.result.ok() && r.result.relative() <= 0)
        use_rel = false;
    for (const Record& r : records) {
      if (r.task != key || r.target != task.target || r.version != task.version || r.in_network())
        continue;  // in-network times (graph::check_in_network) are not trials
      Config c = Config::fallback();
      try {
        c = Config::from_json(r.config, task.space);
      } catch (const Error&) {
        continue;
      }
      mine.push_back(r);
      if (!logged.insert(c.index()).second) continue;  // a verification's re-measurement
      cfgs.push_back(c);
      results.push_back(r.result);
      consider(c, r.result);
    }
    res.resumed = static_cast<int>(cfgs.size());
    if (!cfgs.empty()) tuner.update(cfgs, results);
  }
  records.clear();

  std::unique_ptr<RecordWriter> writer;
  if (!opt.log_path.empty()) writer = std::make_unique<RecordWriter>(opt.log_path);
  auto log = [&](const Config& c, const MeasureResult& r) {
    mine.push_back(Record::make(task, c, r));
    if (writer) writer->write(mine.back());
  };

  Measurer measurer(task, opt.measure);
  res.default_result = measurer.default_result();
  prog.default_s = res.default_result.mean_s;
  auto report = [&](const Config* c, const MeasureResult* r, double loop_s, int measured_now) {
    prog.trials = res.resumed + res.trials;
    prog.resumed = res.resumed;
    prog.errors = res.errors;
    prog.best_s = res.best ? res.best_result.mean_s : 0;
    prog.best_gflops = prog.best_s > 0 && task.flops > 0 ? task.flops / prog.best_s / 1e9 : 0;
    prog.elapsed_s = seconds_since(t_start);
    int left = std::max(0, opt.n_trials - prog.trials);
    prog.eta_s = measured_now > 0 ? loop_s / measured_now * left : 0;
    prog.last_config = c;
    prog.last_result = r;
    if (opt.progress) opt.progress(prog);
  };

  // The default is a trial like any other, logged once.
  Config d = task.default_config();
  {
    if (!logged.count(d.index()) && res.resumed < opt.n_trials) {
      log(d, res.default_result);
      tuner.update({d}, {res.default_result});
      consider(d, res.default_result);
      ++res.trials;
      report(&d, &res.default_result, 0, 0);
    }
  }

  auto t_loop = std::chrono::steady_clock::now();
  int measured_now = 0, since_best = 0;
  while (res.resumed + res.trials < opt.n_trials) {
    if (opt.early_stopping > 0 && since_best >= opt.early_stopping) break;
    if (opt.time_budget_s > 0 && seconds_since(t_start) >= opt.time_budget_s) {
      res.budget_spent = true;
      break;
    }
    int want = std::min(opt.batch_size, opt.n_trials - res.resumed - res.trials);
    std::vector<Config> batch = tuner.next_batch(want);
    if (batch.empty()) break;  // the space is exhausted
    std::vector<MeasureResult> results = measurer.measure(batch);
    for (size_t i = 0; i < batch.size(); ++i) {
      log(batch[i], results[i]);
      double before = res.best ? cost(res.best_result) : 0;
      consider(batch[i], results[i]);
      bool improved = res.best && cost(res.best_result) != before;
      since_best = improved ? 0 : since_best + 1;
      ++res.trials;
      ++measured_now;
      report(&batch[i], &results[i], seconds_since(t_loop), measured_now);
    }
    tuner.update(batch, results);
  }

  // Verification: the fastest configs and the default again, interleaved.
  // Only after a search that measured something (a resumed run with its budget spent adds
  // nothing).
  if (opt.verify_top > 0 && res.best && res.trials > 0) {
    std::vector<Config> top{d};
    for (const RankedConfig& rc : rank_configs(mine, task, Protocol::kIsolated, opt.slow_factor)) {
      if (static_cast<int>(top.size()) > opt.verify_top) break;
      if (rc.config.index() != d.index()) top.push_back(rc.config);
    }
    prog.verifying = true;
    for (int round = 0; round < opt.verify_rounds; ++round) {
      std::vector<MeasureResult> results = measurer.measure(top);
      for (size_t i = 0; i < top.size(); ++i) {
        log(top[i], results[i]);
        ++res.verified;
        report(&top[i], &results[i], 0, 0);
      }
    }
  }

  // The best config by best_record's rule (the upper median of each config's records, its
  // fast-state ones when it has any; never a config that once failed), so compiling with the
  // log picks the same config.
  {
    std::vector<RankedConfig> ranking =
        rank_configs(mine, task, Protocol::kIsolated, opt.slow_factor);
    res.best.reset();
    if (!ranking.empty()) {
      res.best = ranking.front().config;
      res.best_result = ranking.front().result;
    }
    // The default judged alike, so the reported speedup compares like with like.
    for (const RankedConfig& rc : ranking)
      if (rc.config.index() == d.index()) res.default_result = rc.result;
  }
  res.elapsed_s = seconds_since(t_start);
  return res;
}

}  // namespace kiln::autotune
