/// \file tuner.h
/// \brief Tuners: what to measure next (TVM paper section 5.3; AutoTVM's tuners).
///
///  - ModelTuner ("xgb"): the cost model (cost_model.h) ranks candidates; a parallel simulated
///    annealing explorer walks the space guided by the model's predictions. Its chains keep their
///    state across rounds, so each round continues the walk under the retrained model. A round's
///    plan is the `plan_size` best predicted candidates not yet measured, with a fraction
///    `epsilon` replaced by random ones for exploration. Records of other tasks can warm-start
///    the model (add_transfer).
///  - RandomTuner: uniform sampling without replacement.
///  - GridTuner: point indices in order.
///  - GATuner: a genetic algorithm over knob choices (elitism, fitness-proportional selection,
///    uniform crossover, per-knob mutation).
/// Every tuner proposes each point at most once (also counting points fed to update() from a
/// log) and returns fewer than asked, finally none, when the space is exhausted. Spaces must be
/// indexable (ConfigSpace::indexable()).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/autotune/cost_model.h"
#include "kiln/autotune/record.h"
#include "kiln/autotune/task.h"

namespace kiln::autotune {

/// Proposes configs of one task.
class Tuner {
 public:
  /// Throws kiln::Error when the task's space is not indexable.
  Tuner(const Task& task, uint64_t seed);
  virtual ~Tuner();
  virtual std::string name() const = 0;
  const Task& task() const { return task_; }

  /// Up to n configs never proposed or measured before.
  virtual std::vector<Config> next_batch(int n) = 0;
  /// Results of measured configs (from the measurer, or from a log when resuming).
  virtual void update(const std::vector<Config>& configs,
                      const std::vector<MeasureResult>& results);
  /// True when the point was proposed or measured.
  bool visited(uint64_t index) const { return visited_.count(index) > 0; }
  /// True when every point was proposed or measured.
  bool exhausted() const { return visited_.size() >= task_.space.size(); }

 protected:
  /// Marks and returns the config of `index`.
  Config take(uint64_t index);
  /// A random point not visited yet (sampling, then a scan); false when none is left.
  bool random_unvisited(uint64_t* index);

  Task task_;
  std::mt19937_64 rng_;
  std::unordered_set<uint64_t> visited_;
};

class RandomTuner : public Tuner {
 public:
  explicit RandomTuner(const Task& task, uint64_t seed = 0) : Tuner(task, seed) {}
  std::string name() const override { return "random"; }
  std::vector<Config> next_batch(int n) override;
};

class GridTuner : public Tuner {
 public:
  explicit GridTuner(const Task& task) : Tuner(task, 0) {}
  std::string name() const override { return "grid"; }
  std::vector<Config> next_batch(int n) override;

 private:
  uint64_t next_ = 0;
};

struct GAOptions {
  int population = 32;
  int elite = 4;
  double mutation_prob = 0.1;  ///< per knob
};

class GATuner : public Tuner {
 public:
  explicit GATuner(const Task& task, uint64_t seed = 0, GAOptions opt = {});
  std::string name() const override { return "ga"; }
  std::vector<Config> next_batch(int n) override;
  void update(const std::vector<Config>& configs,
              const std::vector<MeasureResult>& results) override;

 private:
  void next_generation();
  GAOptions opt_;
  std::vector<uint64_t> pending_;  ///< the current generation's points not yet proposed
  /// (fitness, index) of every measurement: 1 / seconds, or 1 / relative() in rel_scored_.
  std::vector<std::pair<double, uint64_t>> scored_, rel_scored_;
  bool all_relative_ = true;  ///< every successful measurement has a relative() time
  size_t measured_in_generation_ = 0;
};

struct ModelTunerOptions {
  int plan_size = 32;           ///< candidates planned per model update
  double epsilon = 0.05;        ///< fraction of a plan drawn at random
  int sa_chains = 16;           ///< parallel annealing chains
  int sa_steps = 40;            ///< annealing steps per plan
  double sa_temperature = 1.0;  ///< start temperature (linearly cooled to 0 over the steps)
  int min_train = 8;            ///< measurements before the model is first trained
  int retrain_every = 8;        ///< new measurements that make the plan stale (model refit)
  /// Diversity of a plan: it is picked greedily from the best plan_size * diversity_pool points
  /// seen, each pick maximizing its score (normalized to [0, 1] over those points) minus
  /// diversity_penalty times its largest overlap (fraction of equal knobs) with an earlier pick;
  /// 0: the best scores alone. The defaults and retrain_every were chosen by replaying an
  /// exhaustive log of C12 over 40 seeds (kiln-bench-tuners --replay; README).
  double diversity_penalty = 1.0;
  int diversity_pool = 3;
  /// Without relative times (MeasureResult::relative), the model learns each measurement's
  /// fastest repeat instead of the mean of its repeats, so that a repeat slowed by another
  /// process does not misrank the config (replaying the C12 log: 24.2 -> 18.9 trials to 95% of
  /// the best; the C11 log: 22.0 either way).
  bool train_on_min = true;
  /// The model learns only the measurements made in the machine's fast state (MachineState
  /// with this factor), when at least min_train of them succeeded: one made in a slow period
  /// looks faster against the default than it is. 0: every measurement.
  double slow_factor = 1.2;
  XGBOptions xgb;
};

/// Timing of a model tuner's work per candidate scored.
struct ModelTunerStats {
  size_t features = 0;         ///< feature vectors computed (lowerings)
  double feature_seconds = 0;  ///< time spent lowering and analysing them
  size_t plans = 0;            ///< annealing runs
  double plan_seconds = 0;     ///< time spent in them (features and predictions included)
  /// Measurements of this task left out of the latest training as made in a slow period
  /// (ModelTunerOptions::slow_factor).
  size_t slow_left_out = 0;
};

class ModelTuner : public Tuner {
 public:
  explicit ModelTuner(const Task& task, uint64_t seed = 0, ModelTunerOptions opt = {});
  std::string name() const override { return "xgb"; }
  std::vector<Config> next_batch(int n) override;
  void update(const std::vector<Config>& configs,
              const std::vector<MeasureResult>& results) override;
  /// Warm-starts the model with measurements of another task (a group of its own). Records of
  /// other tasks, targets or template versions than `other`'s are skipped, and so are those
  /// made in a slow period (slow_factor, as for the task's own); returns the number used. The
  /// model is (re)trained at the next plan.
  size_t add_transfer(const Task& other, const std::vector<Record>& records);

  /// The cost model (its stats() time predictions).
  const XGBModel& model() const { return model_; }
  const ModelTunerStats& stats() const { return stats_; }
  /// The feature vector of a point (cached; zeros and invalid when the point fails to lower).
  const std::vector<float>& features(uint64_t index);

 private:
  void retrain();
  void plan();
  /// What the model learns of each of one task's measurements; +inf for a failure. Their
  /// relative() times when every successful one has one (the measurer timed the default
  /// alongside), else their seconds (the fastest repeat with train_on_min): a group is ranked
  /// on one scale.
  std::vector<double> costs_of(const std::vector<MeasureResult>& results) const;
  /// Indices of the measurements the model learns: failures, and the successes made in the
  /// machine's fast state (all of them when fewer than min_train successes are).
  std::vector<size_t> for_training(const std::vector<MeasureResult>& results) const;
  std::vector<float> predict(const std::vector<uint64_t>& points);

  ModelTunerOptions opt_;
  XGBModel model_;
  ModelTunerStats stats_;
  std::unordered_map<uint64_t, std::vector<float>> features_;
  std::unordered_set<uint64_t> invalid_;
  TrainingSet transfer_;
  std::vector<uint64_t> measured_;
  std::vector<MeasureResult> results_;  ///< of measured_
  size_t trained_on_ = 0;               ///< measurements the current model saw
  bool transfer_changed_ = false;
  std::vector<uint64_t> chains_;  ///< annealing state, kept across plans
  std::vector<uint64_t> plan_;    ///< planned points, best first
};

/// "xgb", "random", "grid" or "ga"; throws kiln::Error listing them for another name.
std::unique_ptr<Tuner> make_tuner(const std::string& kind, const Task& task, uint64_t seed = 0);

}  // namespace kiln::autotune
