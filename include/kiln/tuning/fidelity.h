/// \file fidelity.h
/// \brief Does the tuner's isolated measurement predict a kernel's time inside the model?
///
/// The tuner times each candidate alone (autotune/measure.h: a forked child, rotated argument
/// copies); the model runs it between its neighbours. The cost model, the search and the final
/// choice all trust the isolated times, so they are only as good as their rank agreement with
/// the in-network times. measure_fidelity checks it, per task:
///
///   1. it samples configs of the task: the default and `samples - 1` distinct random points of
///      its space (seeded);
///   2. it times each in isolation, as `kiln tune` does (autotune::Measurer, same options; the
///      fastest repeat counts);
///   3. it times the ones that ran inside the compiled model (time_in_network: variant k gives
///      every workload its k-th config; the fastest of `rounds` interleaved rounds);
///   4. it reports per task the Spearman rank correlation of the two, and the ratio in-network /
///      isolated (geometric mean, lowest and highest), what picking by the isolated times costs
///      in the model (pick_regret), and flags a task whose correlation is below `min_spearman`.
///
///   tuning::FidelityOptions fo;
///   fo.network.set_inputs = [](runtime::GraphExecutor& ex) { ... };
///   tuning::FidelityReport r = tuning::measure_fidelity(g, target, tasks, {0, 3}, fo);
///   std::cout << r.table(tasks);
///
/// `kiln tune MODEL --log F --fidelity N` runs it from the command line. Either side can be
/// replaced (FidelityOptions::isolated, ::in_network), which the tests use to check the report
/// on known times without timing anything.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/autotune/measure.h"
#include "kiln/tuning/network_check.h"

namespace kiln::tuning {

struct FidelityOptions {
  int samples = 8;    ///< configs per task, the default included (at least 3)
  uint64_t seed = 0;  ///< of the random configs
  double min_spearman = 0.9;
  /// The in-network side: rounds, runs, threads, set_inputs (required), progress.
  NetworkCheckOptions network;
  /// The isolated side: the options `kiln tune` measures with.
  autotune::MeasureOptions measure;
  /// Replaces the isolated measurement: seconds per call of each config, in order (<= 0 or NaN:
  /// it failed, and the config is left out).
  std::function<std::vector<double>(const TuningTask&, const std::vector<autotune::Config>&)>
      isolated;
  /// Replaces time_in_network: fills each choice's per_round_ms.
  std::function<void(const std::vector<Workload>&, std::vector<std::vector<Choice>>&)> in_network;
};

/// One sampled config of a task.
struct ConfigTimes {
  autotune::Config config;
  double isolated_ms = 0;
  double network_ms = 0;  ///< the fastest round inside the model
};

struct TaskFidelity {
  size_t task = 0;                   ///< index into the task list
  std::vector<ConfigTimes> configs;  ///< those timed on both sides, the default first
  int failed = 0;                    ///< sampled configs that failed to compile or run alone
  double spearman = 0;               ///< NaN with fewer than 3 configs
  double ratio_geomean = 0, ratio_min = 0, ratio_max = 0;  ///< network_ms / isolated_ms
  /// What a tuner trusting the isolated times loses in the model: the in-network time of the
  /// config fastest alone over the fastest in-network time (1: it picks the model's best).
  /// Spearman counts swaps of configs within the noise as much as gross ones; this does not.
  double pick_regret = 0;
  /// The task's weight in the model: its default config's in-network time × the nodes it
  /// computes (ms per model run; 0 when the default did not run), so that a disagreement on a
  /// kernel of microseconds can be told from one that matters.
  double model_ms = 0;
  bool agrees = false;  ///< spearman >= min_spearman
};

struct FidelityReport {
  std::vector<TaskFidelity> tasks;
  /// The measurements, for the tuning log: isolated ones as the tuner writes them, in-network
  /// ones with Record::kNetworkProtocol (one per round).
  std::vector<autotune::Record> records;
  double seconds = 0;
  double min_spearman = 0.9;  ///< the bar the tasks were judged by
  /// One line per task: "task  op  configs  spearman  network/isolated (geomean, min-max)
  /// pick-regret  ms-in-model  ok",
  /// then "N of M tasks agree (Spearman >= 0.9)".
  std::string table(const std::vector<TuningTask>& tasks) const;
};

/// Checks the tasks `selected` (indices into `tasks`, extract_tuning_tasks of `g` with their
/// targets carrying opt.network.threads) as described above. Throws kiln::Error when the model
/// does not compile or run, or a default config cannot be measured.
FidelityReport measure_fidelity(const graph::Graph& g, const Target& target,
                                const std::vector<TuningTask>& tasks,
                                const std::vector<size_t>& selected, const FidelityOptions& opt);

/// Spearman's rank correlation of two equally long series (ties get their mean rank); NaN when
/// shorter than 3 or when either series is constant.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace kiln::tuning
