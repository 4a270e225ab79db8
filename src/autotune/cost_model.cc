// The gradient-boosted-tree cost model over libxgboost's C API: a DMatrix from row-major floats
// with labels and group sizes, a booster trained for a fixed number of rounds with the ranking
// objective, and batch prediction timed end to end (matrix creation included).
#include "kiln/autotune/cost_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "kiln/support/error.h"

namespace kiln::autotune {

namespace {

void xgb_check(int rc, const char* what) {
  KILN_USER_CHECK(rc == 0) << "xgboost: " << what << " failed: " << XGBGetLastError();
}

/// Owns a DMatrix handle.
struct DMatrix {
  DMatrixHandle h = nullptr;
  DMatrix(const float* x, size_t rows, size_t cols) {
    xgb_check(XGDMatrixCreateFromMat(x, rows, cols, std::nanf(""), &h), "XGDMatrixCreateFromMat");
  }
  ~DMatrix() {
    if (h) XGDMatrixFree(h);
  }
};

}  // namespace

void TrainingSet::add_group(const std::vector<std::vector<float>>& features,
                            const std::vector<double>& costs) {
  KILN_USER_CHECK(features.size() == costs.size())
      << "training set: " << features.size() << " feature rows but " << costs.size() << " costs";
  if (features.empty()) return;
  if (num_features == 0) num_features = features[0].size();
  double best = 0;
  for (double c : costs)
    if (std::isfinite(c) && c > 0 && (best == 0 || c < best)) best = c;
  for (size_t i = 0; i < features.size(); ++i) {
    KILN_USER_CHECK(features[i].size() == num_features)
        << "training set: row " << i << " has " << features[i].size() << " features, expected "
        << num_features;
    x.insert(x.end(), features[i].begin(), features[i].end());
    double c = costs[i];
    y.push_back(std::isfinite(c) && c > 0 && best > 0 ? static_cast<float>(best / c) : 0.f);
  }
  groups.push_back(static_cast<unsigned>(features.size()));
}

XGBModel::XGBModel(XGBOptions opt) : opt_(std::move(opt)) {}

XGBModel::~XGBModel() {
  if (booster_) XGBoosterFree(booster_);
}

void XGBModel::fit(const TrainingSet& data) {
  KILN_USER_CHECK(data.rows() > 0 && data.num_features > 0)
      << "cost model: cannot train on an empty training set";
  auto t0 = std::chrono::steady_clock::now();
  DMatrix d(data.x.data(), data.rows(), data.num_features);
  xgb_check(XGDMatrixSetFloatInfo(d.h, "label", data.y.data(), data.rows()), "setting labels");
  if (!data.groups.empty()) {
    xgb_check(XGDMatrixSetUIntInfo(d.h, "group", data.groups.data(), data.groups.size()),
              "setting groups");
  }
  BoosterHandle b = nullptr;
  xgb_check(XGBoosterCreate(&d.h, 1, &b), "XGBoosterCreate");
  auto set = [&](const char* k, const std::string& v) {
    int rc = XGBoosterSetParam(b, k, v.c_str());
    if (rc != 0) XGBoosterFree(b);
    xgb_check(rc, (std::string("setting parameter ") + k).c_str());
  };
  set("objective", opt_.objective);
  set("max_depth", std::to_string(opt_.max_depth));
  set("eta", std::to_string(opt_.eta));
  set("min_child_weight", std::to_string(opt_.min_child_weight));
  set("subsample", std::to_string(opt_.subsample));
  set("nthread", std::to_string(opt_.nthread));
  set("seed", std::to_string(opt_.seed));
  set("verbosity", "0");
  set("tree_method", "exact");
  for (int i = 0; i < opt_.rounds; ++i) {
    int rc = XGBoosterUpdateOneIter(b, i, d.h);
    if (rc != 0) XGBoosterFree(b);
    xgb_check(rc, "XGBoosterUpdateOneIter");
  }
  if (booster_) XGBoosterFree(booster_);
  booster_ = b;
  stats_.fits += 1;
  stats_.fit_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<float> XGBModel::predict(const std::vector<float>& x, size_t rows,
                                     size_t num_features) {
  KILN_USER_CHECK(trained()) << "cost model: predict before the model was trained";
  KILN_USER_CHECK(x.size() == rows * num_features)
      << "cost model: " << x.size() << " values for " << rows << " rows of " << num_features;
  if (rows == 0) return {};
  auto t0 = std::chrono::steady_clock::now();
  DMatrix d(x.data(), rows, num_features);
  bst_ulong n = 0;
  const float* out = nullptr;
  xgb_check(XGBoosterPredict(booster_, d.h, 0, 0, 0, &n, &out), "XGBoosterPredict");
  KILN_ICHECK(n == rows) << "xgboost returned " << n << " predictions for " << rows << " rows";
  std::vector<float> r(out, out + n);
  stats_.calls += 1;
  stats_.rows += rows;
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<float> XGBModel::predict(const std::vector<std::vector<float>>& rows) {
  if (rows.empty()) return {};
  size_t nf = rows[0].size();
  std::vector<float> x;
  x.reserve(rows.size() * nf);
  for (const auto& r : rows) {
    KILN_USER_CHECK(r.size() == nf) << "cost model: rows of different lengths";
    x.insert(x.end(), r.begin(), r.end());
  }
  return predict(x, rows.size(), nf);
}

}  // namespace kiln::autotune
