/// \file cost_model.h
/// \brief The learned cost model: gradient-boosted trees (libxgboost's C API) trained with a
/// ranking objective on loop-program features (TVM paper section 5.2).
///
/// Rows are feature vectors (feature.h) of measured candidates; a row's label is its throughput
/// relative to the best of its group (best cost / cost, 0 for a failed candidate), so higher is
/// faster. Rows are grouped by task: with the default objective `rank:pairwise` only rows of the
/// same group are compared, which is what lets records of other workloads (transfer learning)
/// share one model with the task being tuned. Predictions are scores: only their order matters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::autotune {

struct XGBOptions {
  std::string objective = "rank:pairwise";
  int rounds = 50;  ///< boosting rounds per fit
  int max_depth = 3;
  double eta = 0.3;  ///< learning rate
  double min_child_weight = 1;
  double subsample = 1;
  int nthread = 1;
  uint64_t seed = 0;
};

/// Training data: rows in groups; see the file comment for the labels.
struct TrainingSet {
  std::vector<float> x;          ///< row-major, `num_features` per row
  std::vector<float> y;          ///< one label per row
  std::vector<unsigned> groups;  ///< row counts of consecutive groups
  size_t num_features = 0;
  size_t rows() const { return y.size(); }
  /// Appends one group: feature rows and their costs in seconds (<= 0 or not finite: failed).
  /// Labels are best cost / cost. Throws when a row's length differs from num_features.
  void add_group(const std::vector<std::vector<float>>& features, const std::vector<double>& costs);
};

/// Gradient-boosted trees through libxgboost (one booster, retrained from scratch by fit()).
class XGBModel {
 public:
  explicit XGBModel(XGBOptions opt = {});
  ~XGBModel();
  XGBModel(const XGBModel&) = delete;
  XGBModel& operator=(const XGBModel&) = delete;

  /// Trains a new booster on `data` (replacing the old one). Throws kiln::Error with xgboost's
  /// message on failure, or when data is empty.
  void fit(const TrainingSet& data);
  /// Scores of `rows` rows of `num_features` values (row-major); higher = predicted faster.
  /// Requires trained(). Timed: see predict_stats().
  std::vector<float> predict(const std::vector<float>& x, size_t rows, size_t num_features);
  std::vector<float> predict(const std::vector<std::vector<float>>& rows);
  bool trained() const { return booster_ != nullptr; }

  /// Cumulative prediction timing (the call into xgboost, matrix creation included).
  struct Stats {
    size_t calls = 0, rows = 0;
    double seconds = 0;
    size_t fits = 0;
    double fit_seconds = 0;
    double seconds_per_row() const { return rows ? seconds / rows : 0; }
  };
  const Stats& stats() const { return stats_; }

 private:
  XGBOptions opt_;
  void* booster_ = nullptr;
  Stats stats_;
};

}  // namespace kiln::autotune
