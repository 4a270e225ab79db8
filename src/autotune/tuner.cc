// Tuners over indexable config spaces. Random and grid search; a genetic algorithm on knob-choice
// vectors; and the model-based tuner: an XGBoost ranking model retrained as measurements arrive
// and a parallel simulated-annealing explorer (AutoTVM's SimulatedAnnealingOptimizer) whose chains
// persist across plans: at each step every chain proposes a one-knob mutation, the model scores
// the proposals in one batch, and a proposal is accepted when it scores higher or with
// probability exp((new - old) / T), T cooling linearly to 0. The plan is picked from the
// best-scored points seen that were not yet visited, trading score for diversity (a point much like
// an earlier pick is penalized), with an epsilon fraction replaced by random points.
#include "kiln/autotune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "kiln/autotune/feature.h"
#include "kiln/support/error.h"

namespace kiln::autotune {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Tuner::Tuner(const Task& task, uint64_t seed) : task_(task), rng_(seed) {
  KILN_USER_CHECK(task_.space.indexable())
      << "tuner for " << task_.key() << ": the config space has 10^" << task_.space.log10_size()
      << " points, too many to index; the tuners need an indexable space";
}

Tuner::~Tuner() = default;

void Tuner::update(const std::vector<Config>& configs, const std::vector<MeasureResult>& results) {
  KILN_USER_CHECK(configs.size() == results.size())
      << "tuner update: " << configs.size() << " configs but " << results.size() << " results";
  for (const Config& c : configs) visited_.insert(c.index());
}

Config Tuner::take(uint64_t index) {
  visited_.insert(index);
  return task_.space.get(index);
}

bool Tuner::random_unvisited(uint64_t* index) {
  if (exhausted()) return false;
  for (int attempt = 0; attempt < 256; ++attempt) {
    uint64_t i = task_.space.random_index(rng_);
    if (!visited(i)) {
      *index = i;
      return true;
    }
  }
  // Nearly exhausted: scan from a random start.
  uint64_t n = task_.space.size(), start = task_.space.random_index(rng_);
  for (uint64_t k = 0; k < n; ++k) {
    uint64_t i = (start + k) % n;
    if (!visited(i)) {
      *index = i;
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------

std::vector<Config> RandomTuner::next_batch(int n) {
  std::vector<Config> out;
  uint64_t i;
  while (static_cast<int>(out.size()) < n && random_unvisited(&i)) out.push_back(take(i));
  return out;
}

std::vector<Config> GridTuner::next_batch(int n) {
  std::vector<Config> out;
  uint64_t size = task_.space.size();
  while (static_cast<int>(out.size()) < n && next_ < size) {
    uint64_t i = next_++;
    if (!visited(i)) out.push_back(take(i));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

GATuner::GATuner(const Task& task, uint64_t seed, GAOptions opt) : Tuner(task, seed), opt_(opt) {
  KILN_USER_CHECK(opt_.population >= 2 && opt_.elite >= 0 && opt_.elite < opt_.population)
      << "GA tuner: need population >= 2 and 0 <= elite < population, got " << opt_.population
      << " and " << opt_.elite;
}

void GATuner::update(const std::vector<Config>& configs,
                     const std::vector<MeasureResult>& results) {
  Tuner::update(configs, results);
  for (size_t i = 0; i < configs.size(); ++i) {
    const MeasureResult& r = results[i];
    if (r.ok() && r.relative() <= 0) all_relative_ = false;
    scored_.emplace_back(r.ok() ? 1.0 / r.mean_s : 0.0, configs[i].index());
    rel_scored_.emplace_back(r.ok() && r.relative() > 0 ? 1.0 / r.relative() : 0.0,
                             configs[i].index());
  }
  measured_in_generation_ += configs.size();
}

void GATuner::next_generation() {
  const ConfigSpace& space = task_.space;
  // Relative times rank measurements made minutes apart on one scale (MeasureResult::relative).
  std::vector<std::pair<double, uint64_t>> pop = all_relative_ ? rel_scored_ : scored_;
  std::sort(pop.begin(), pop.end(), std::greater<>());
  if (pop.size() > static_cast<size_t>(opt_.population)) pop.resize(opt_.population);
  std::unordered_set<uint64_t> chosen;
  if (pop.size() >= 2) {
    std::vector<double> w;
    double total = 0;
    for (auto& [f, i] : pop) total += f;
    for (auto& [f, i] : pop) w.push_back(total > 0 ? f + 1e-3 * total / pop.size() : 1.0);
    std::discrete_distribution<size_t> pick(w.begin(), w.end());
    std::uniform_real_distribution<double> u(0, 1);
    const auto& knobs = space.knobs();
    int want = opt_.population - opt_.elite;
    for (int attempt = 0; attempt < want * 20 && static_cast<int>(chosen.size()) < want;
         ++attempt) {
      std::vector<uint32_t> a = space.get(pop[pick(rng_)].second).choice();
      std::vector<uint32_t> b = space.get(pop[pick(rng_)].second).choice();
      std::vector<uint32_t> child(a.size());
      for (size_t k = 0; k < a.size(); ++k) {
        child[k] = (rng_() & 1) ? a[k] : b[k];
        if (u(rng_) < opt_.mutation_prob && knobs[k].candidates.size() > 1) {
          child[k] = static_cast<uint32_t>(rng_() % knobs[k].candidates.size());
        }
      }
      uint64_t idx = space.at(child).index();
      if (!visited(idx)) chosen.insert(idx);
    }
  }
  uint64_t i;
  while (static_cast<int>(chosen.size()) < opt_.population && random_unvisited(&i)) {
    chosen.insert(i);
    visited_.insert(i);  // reserve it while filling; take() marks it again
  }
  for (uint64_t c : chosen) {
    visited_.erase(c);
    pending_.push_back(c);
  }
  std::shuffle(pending_.begin(), pending_.end(), rng_);
  measured_in_generation_ = 0;
}

std::vector<Config> GATuner::next_batch(int n) {
  std::vector<Config> out;
  while (static_cast<int>(out.size()) < n) {
    while (!pending_.empty() && visited(pending_.back())) pending_.pop_back();
    if (pending_.empty()) {
      if (exhausted()) break;
      next_generation();
      if (pending_.empty()) break;
      continue;
    }
    uint64_t i = pending_.back();
    pending_.pop_back();
    out.push_back(take(i));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

ModelTuner::ModelTuner(const Task& task, uint64_t seed, ModelTunerOptions opt)
    : Tuner(task, seed), opt_(opt), model_(opt.xgb) {
  KILN_USER_CHECK(opt_.plan_size >= 1 && opt_.sa_chains >= 1 && opt_.sa_steps >= 1 &&
                  opt_.retrain_every >= 1 && opt_.diversity_pool >= 1)
      << "model tuner: plan_size, sa_chains, sa_steps, retrain_every and diversity_pool must be "
         "positive";
  KILN_USER_CHECK(opt_.diversity_penalty >= 0)
      << "model tuner: diversity_penalty must be >= 0, got " << opt_.diversity_penalty;
}

const std::vector<float>& ModelTuner::features(uint64_t index) {
  auto it = features_.find(index);
  if (it != features_.end()) return it->second;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> f;
  try {
    f = extract_features(task_.instantiate(task_.space.get(index)));
  } catch (const std::exception&) {
    f.assign(kFeatureLength, 0.f);
    invalid_.insert(index);
  }
  stats_.features += 1;
  stats_.feature_seconds += seconds_since(t0);
  return features_.emplace(index, std::move(f)).first->second;
}

void ModelTuner::update(const std::vector<Config>& configs,
                        const std::vector<MeasureResult>& results) {
  Tuner::update(configs, results);
  for (size_t i = 0; i < configs.size(); ++i) {
    measured_.push_back(configs[i].index());
    results_.push_back(results[i]);
  }
}

std::vector<double> ModelTuner::costs_of(const std::vector<MeasureResult>& results) const {
  bool rel = true;
  for (const MeasureResult& r : results) rel = rel && (!r.ok() || r.relative() > 0);
  std::vector<double> costs;
  for (const MeasureResult& r : results) {
    if (!r.ok())
      costs.push_back(std::numeric_limits<double>::infinity());
    else if (rel)
      costs.push_back(r.relative());
    else if (opt_.train_on_min && !r.runs.empty())
      costs.push_back(*std::min_element(r.runs.begin(), r.runs.end()));
    else
      costs.push_back(r.mean_s);
  }
  return costs;
}

std::vector<size_t> ModelTuner::for_training(const std::vector<MeasureResult>& results) const {
  MachineState state(opt_.slow_factor);
  for (const MeasureResult& r : results) state.observe(r);
  std::vector<size_t> keep;
  int fast = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok() && state.slow(results[i])) continue;
    keep.push_back(i);
    fast += results[i].ok();
  }
  if (fast >= opt_.min_train) return keep;
  std::vector<size_t> all(results.size());
  std::iota(all.begin(), all.end(), size_t{0});
  return all;
}

size_t ModelTuner::add_transfer(const Task& other, const std::vector<Record>& records) {
  std::vector<std::vector<float>> rows;
  std::vector<MeasureResult> results;
  const std::string key = other.key();
  for (const Record& r : records) {
    if (r.task != key || r.target != other.target || r.version != other.version || r.in_network())
      continue;
    try {
      Config c = Config::from_json(r.config, other.space);
      rows.push_back(extract_features(other.instantiate(c)));
      results.push_back(r.result);
    } catch (const std::exception&) {
      continue;  // a config that no longer fits or lowers teaches nothing
    }
  }
  std::vector<std::vector<float>> kept_rows;
  std::vector<MeasureResult> kept;
  for (size_t i : for_training(results)) {
    kept_rows.push_back(std::move(rows[i]));
    kept.push_back(results[i]);
  }
  transfer_.add_group(kept_rows, costs_of(kept));
  if (!kept_rows.empty()) transfer_changed_ = true;
  return kept_rows.size();
}

void ModelTuner::retrain() {
  TrainingSet ts = transfer_;
  std::vector<std::vector<float>> rows;
  std::vector<MeasureResult> results;
  const std::vector<size_t> keep = for_training(results_);
  for (size_t i : keep) {
    rows.push_back(features(measured_[i]));
    results.push_back(results_[i]);
  }
  stats_.slow_left_out = results_.size() - keep.size();
  if (ts.num_features == 0) ts.num_features = kFeatureLength;
  ts.add_group(rows, costs_of(results));
  model_.fit(ts);
  trained_on_ = measured_.size();
  transfer_changed_ = false;
}

std::vector<float> ModelTuner::predict(const std::vector<uint64_t>& points) {
  std::vector<float> x;
  x.reserve(points.size() * kFeatureLength);
  for (uint64_t p : points) {
    const std::vector<float>& f = features(p);
    x.insert(x.end(), f.begin(), f.end());
  }
  std::vector<float> s = model_.predict(x, points.size(), kFeatureLength);
  for (size_t i = 0; i < points.size(); ++i)
    if (invalid_.count(points[i])) s[i] = -1e30f;
  return s;
}

void ModelTuner::plan() {
  auto t0 = std::chrono::steady_clock::now();
  const ConfigSpace& space = task_.space;
  if (chains_.empty()) {
    for (int c = 0; c < opt_.sa_chains; ++c) chains_.push_back(space.random_index(rng_));
  }
  // The best unvisited points seen, kept sorted best first: the plan, or the pool it is picked
  // from for diversity.
  const int pool =
      opt_.diversity_penalty > 0 ? opt_.plan_size * opt_.diversity_pool : opt_.plan_size;
  std::vector<std::pair<float, uint64_t>> top;
  std::unordered_set<uint64_t> in_top;
  auto consider = [&](uint64_t p, float s) {
    if (visited(p) || in_top.count(p) || s <= -1e29f) return;
    if (static_cast<int>(top.size()) >= pool && s <= top.back().first) return;
    auto pos = std::upper_bound(top.begin(), top.end(), std::make_pair(s, p),
                                [](const auto& a, const auto& b) { return a.first > b.first; });
    top.insert(pos, {s, p});
    in_top.insert(p);
    if (static_cast<int>(top.size()) > pool) {
      in_top.erase(top.back().second);
      top.pop_back();
    }
  };
  std::vector<float> scores = predict(chains_);
  for (size_t c = 0; c < chains_.size(); ++c) consider(chains_[c], scores[c]);
  std::uniform_real_distribution<double> u(0, 1);
  for (int step = 0; step < opt_.sa_steps; ++step) {
    double temp = opt_.sa_temperature * (1.0 - static_cast<double>(step) / opt_.sa_steps);
    std::vector<uint64_t> proposal(chains_.size());
    for (size_t c = 0; c < chains_.size(); ++c) proposal[c] = space.mutate(chains_[c], rng_);
    std::vector<float> ps = predict(proposal);
    for (size_t c = 0; c < chains_.size(); ++c) {
      consider(proposal[c], ps[c]);
      double delta = static_cast<double>(ps[c]) - scores[c];
      if (delta >= 0 || (temp > 0 && u(rng_) < std::exp(delta / temp))) {
        chains_[c] = proposal[c];
        scores[c] = ps[c];
      }
    }
  }
  plan_.clear();
  if (opt_.diversity_penalty > 0 && !top.empty()) {
    // Greedy: the score normalized to [0, 1] over the pool, minus the penalty times the largest
    // overlap (fraction of equal knobs) with an earlier pick. Without it a plan fills with
    // variants of one point that differ in a knob the model has not learnt to tell apart.
    const float hi = top.front().first, lo = top.back().first;
    const float range = hi > lo ? hi - lo : 1.f;
    std::vector<std::vector<uint32_t>> choice;
    for (auto& [s, p] : top) choice.push_back(space.get(p).choice());
    std::vector<double> overlap(top.size(), 0.0);
    std::vector<bool> taken(top.size(), false);
    const size_t nk = choice[0].size();
    while (static_cast<int>(plan_.size()) < opt_.plan_size && plan_.size() < top.size()) {
      size_t best = 0;
      double best_v = -1e30;
      for (size_t i = 0; i < top.size(); ++i) {
        if (taken[i]) continue;
        double v = (top[i].first - lo) / range - opt_.diversity_penalty * overlap[i];
        if (v > best_v) best_v = v, best = i;
      }
      taken[best] = true;
      plan_.push_back(top[best].second);
      for (size_t i = 0; i < top.size(); ++i) {
        if (taken[i]) continue;
        size_t same = 0;
        for (size_t k = 0; k < nk; ++k) same += choice[i][k] == choice[best][k];
        overlap[i] = std::max(overlap[i], nk ? static_cast<double>(same) / nk : 0.0);
      }
    }
  } else {
    for (auto& [s, p] : top) plan_.push_back(p);
  }
  // Exploration: the tail of the plan is replaced by random points.
  size_t n_random = static_cast<size_t>(std::round(opt_.epsilon * opt_.plan_size));
  n_random = std::min(n_random, plan_.size());
  plan_.resize(plan_.size() - n_random);
  std::unordered_set<uint64_t> in_plan(plan_.begin(), plan_.end());
  for (size_t k = 0; k < n_random; ++k) {
    uint64_t i = space.random_index(rng_);
    if (!visited(i) && in_plan.insert(i).second) plan_.push_back(i);
  }
  std::reverse(plan_.begin(), plan_.end());  // next_batch pops from the back: best first
  stats_.plans += 1;
  stats_.plan_seconds += seconds_since(t0);
}

std::vector<Config> ModelTuner::next_batch(int n) {
  size_t fresh = measured_.size() - std::min(measured_.size(), trained_on_);
  bool can_train = static_cast<int>(measured_.size()) >= opt_.min_train ||
                   (transfer_.rows() > 0 && !measured_.empty());
  while (!plan_.empty() && visited(plan_.back())) plan_.pop_back();
  bool stale = plan_.empty() || transfer_changed_ ||
               fresh >= static_cast<size_t>(std::max(1, opt_.retrain_every));
  if (can_train && (fresh > 0 || transfer_changed_ || !model_.trained()) && stale) {
    retrain();
    plan();
  } else if (model_.trained() && plan_.empty()) {
    plan();
  }
  std::vector<Config> out;
  while (static_cast<int>(out.size()) < n && !plan_.empty()) {
    uint64_t i = plan_.back();
    plan_.pop_back();
    if (!visited(i)) out.push_back(take(i));
  }
  uint64_t i;
  while (static_cast<int>(out.size()) < n && random_unvisited(&i)) out.push_back(take(i));
  return out;
}

std::unique_ptr<Tuner> make_tuner(const std::string& kind, const Task& task, uint64_t seed) {
  if (kind == "xgb") return std::make_unique<ModelTuner>(task, seed);
  if (kind == "random") return std::make_unique<RandomTuner>(task, seed);
  if (kind == "grid") return std::make_unique<GridTuner>(task);
  if (kind == "ga") return std::make_unique<GATuner>(task, seed);
  KILN_ERROR << "unknown tuner '" << kind << "'; the tuners are: xgb, random, grid, ga";
}

}  // namespace kiln::autotune
