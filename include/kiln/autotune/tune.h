/// \file tune.h
/// \brief The tuning loop: propose, measure, log, learn, until the trial budget is spent; resumes
/// from its log. This is the API behind `kiln tune`.
///
/// Tuning one task (e.g. from the command line, one call per extracted task):
///
///   using namespace kiln::autotune;
///   Task task = Task::make(Template{"dense", "1", fn}, Target::host());
///   std::unique_ptr<Tuner> tuner = make_tuner("xgb", task);       // or random, grid, ga
///   TuneOptions opt;
///   opt.n_trials = 1000;                 // total for this task, records already logged included
///   opt.log_path = "resnet18.jsonl";     // appended to; read first to resume
///   opt.measure.timeout_s = 10;          // per candidate
///   opt.measure.build_threads = 4;
///   opt.transfer_tasks = other_tasks;    // xgb: their logged records warm-start the model
///   opt.progress = [](const TuneProgress& p) { std::cerr << p.line() << "\r"; };
///   TuneResult r = tune(task, *tuner, opt);
///   // r.best: the best config measured (this run or logged); r.best_result.mean_s its time.
///
/// Compiling with a log (`kiln compile --tuning-log`): load_records(path) once, then per task
/// best_record(log.records, task) gives the config (or none: use Config::fallback()) and a
/// summary() of what was used and ignored (record.h).
///
/// Resuming: records of this task in the log that match its target and template version are fed
/// to the tuner first (so they are never measured again and the model learns from them) and count
/// toward n_trials. The default config is measured at every start (its output is the reference
/// every candidate is checked against); it is logged as a trial once.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/autotune/measure.h"
#include "kiln/autotune/record.h"
#include "kiln/autotune/task.h"
#include "kiln/autotune/tuner.h"

namespace kiln::autotune {

/// Where a tuning run stands; passed to the progress callback after every measurement.
struct TuneProgress {
  const Task* task = nullptr;
  int trials = 0;                       ///< measurements of this task so far, logged ones included
  int n_trials = 0;                     ///< the budget
  int resumed = 0;                      ///< of `trials`, read back from the log
  int errors = 0;                       ///< failed measurements (this run and logged)
  double best_s = 0;                    ///< best mean seconds so far (0: none yet)
  double default_s = 0;                 ///< the default config's mean seconds
  double best_gflops = 0;               ///< task.flops / best_s / 1e9 (0 when unknown)
  double elapsed_s = 0;                 ///< since tune() started
  double eta_s = 0;                     ///< estimated time for the remaining trials
  double time_budget_s = 0;             ///< TuneOptions::time_budget_s (0: none)
  const Config* last_config = nullptr;  ///< the latest measured config
  const MeasureResult* last_result = nullptr;  ///< and its result
  bool verifying = false;  ///< measuring the best configs again (TuneOptions::verify_top)
  /// "task 1/3 dense(...) trial 40/200 best 12.3 GFLOP/s (0.21 ms) elapsed 12 s, eta 48 s".
  std::string line() const;
};

struct TuneOptions {
  int n_trials = 100;    ///< total trials of this task, logged ones included
  int batch_size = 8;    ///< candidates proposed, compiled and measured per round
  std::string log_path;  ///< JSON-lines log; empty: no log, no resume
  MeasureOptions measure;
  /// Stop when this many trials in a row did not improve the best (0: never).
  int early_stopping = 0;
  /// Wall-clock seconds for this task's search (0: no limit): no new batch starts once they
  /// have passed since tune() began (the verification still runs).
  double time_budget_s = 0;
  /// For a ModelTuner: tasks whose records in the log warm-start the model (the task itself is
  /// skipped).
  std::vector<Task> transfer_tasks;
  /// After a search that measured new trials, the verify_top fastest configs and the default
  /// are measured again verify_rounds times (interleaved, every result logged), and the best config
  /// is the one with the lowest upper-median time over its records, the rule best_record applies
  /// when a model is compiled: one lucky measurement on a noisy machine does not pick the config.
  int verify_top = 0;
  int verify_rounds = 2;
  /// The verification and the final choice judge a config measured both in the machine's fast
  /// state and in its slow periods by its fast-state records (best_record's rule, with this
  /// MachineState factor; 0: by all).
  double slow_factor = MachineState::kDefaultFactor;
  std::function<void(const TuneProgress&)> progress;
};

struct TuneResult {
  std::optional<Config> best;  ///< the fastest successful config (this run or logged)
  MeasureResult best_result;
  /// The default config's measurement at the start (its upper median over this run's and the
  /// log's records of it, when it was measured more than once: verification).
  MeasureResult default_result;
  int trials = 0;            ///< measured in this run (the default's first record included)
  int resumed = 0;           ///< read back from the log
  int errors = 0;            ///< failed measurements among trials + resumed
  int verified = 0;          ///< measurements of the verification (not trials)
  int transfer_records = 0;  ///< records of other tasks used to warm-start the model
  std::vector<std::string> log_warnings;  ///< damaged log lines that were skipped
  double elapsed_s = 0;
  bool budget_spent = false;  ///< the search stopped at TuneOptions::time_budget_s
  /// The default's time over the best's (0 without a best): of their relative() times when
  /// both have one, else of their mean seconds.
  double speedup() const {
    if (!best) return 0;
    const bool rel = default_result.relative() > 0 && best_result.relative() > 0;
    const double b = comparable_cost(best_result, rel);
    return b > 0 ? comparable_cost(default_result, rel) / b : 0;
  }
};

/// Tunes `task` with `tuner` (made for the same task). Throws kiln::Error when the tuner belongs
/// to another task or the default config cannot be measured; a failing candidate is logged as
/// an error and tuning goes on.
TuneResult tune(const Task& task, Tuner& tuner, const TuneOptions& opt);

}  // namespace kiln::autotune
