// The fidelity check of the tuner's measurement (tuning/fidelity.h): sampled configs of each task
// timed alone (autotune::Measurer) and inside the compiled model (time_in_network), compared by
// Spearman's rank correlation and by their ratio.
#include "kiln/tuning/fidelity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "kiln/support/error.h"

namespace kiln::tuning {

using autotune::Config;
using autotune::Record;

namespace {

/// Mean ranks (1-based) of `v`, ties sharing the mean of their positions.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double mean = (static_cast<double>(i + j) / 2) + 1;
    for (size_t k = i; k <= j; ++k) r[order[k]] = mean;
    i = j + 1;
  }
  return r;
}

/// The default, then up to samples-1 distinct random points of the task's space.
std::vector<Config> sample_configs(const autotune::Task& task, int samples, uint64_t seed) {
  std::vector<Config> out{task.default_config()};
  std::set<uint64_t> seen{out[0].index()};
  std::mt19937_64 rng(seed);
  const uint64_t size = task.space.size();
  for (int tries = 0; static_cast<int>(out.size()) < samples && tries < samples * 20; ++tries) {
    Config c = task.space.random(rng);
    if (seen.insert(c.index()).second) out.push_back(std::move(c));
    if (seen.size() >= size) break;
  }
  return out;
}

std::string fixed(const char* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  KILN_ICHECK(a.size() == b.size()) << "spearman: series of " << a.size() << " and " << b.size();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (a.size() < 3) return nan;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double mean = (static_cast<double>(a.size()) + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : nan;
}

FidelityReport measure_fidelity(const graph::Graph& g, const Target& target,
                                const std::vector<TuningTask>& tasks,
                                const std::vector<size_t>& selected, const FidelityOptions& opt) {
  KILN_USER_CHECK(opt.samples >= 3)
      << "fidelity: needs at least 3 configs per task for a rank correlation (got " << opt.samples
      << ")";
  const auto t0 = std::chrono::steady_clock::now();
  auto say = [&](const std::string& s) {
    if (opt.network.progress) opt.network.progress(s);
  };
  FidelityReport rep;
  rep.min_spearman = opt.min_spearman;

  // 1-2. Sample and time alone; keep what ran.
  std::vector<std::vector<Config>> ok_configs(tasks.size());
  std::vector<std::vector<double>> isolated_ms(tasks.size());
  for (size_t t : selected) {
    KILN_USER_CHECK(t < tasks.size()) << "fidelity: no task " << t + 1;
    TaskFidelity tf;
    tf.task = t;
    const autotune::Task& task = tasks[t].task;
    const std::vector<Config> configs = sample_configs(task, opt.samples, opt.seed + t);
    say("task " + std::to_string(t + 1) + ": timing " + std::to_string(configs.size()) +
        " configs alone");
    std::vector<double> secs;
    if (opt.isolated) {
      secs = opt.isolated(tasks[t], configs);
      KILN_ICHECK(secs.size() == configs.size()) << "fidelity: isolated gave " << secs.size();
    } else {
      autotune::Measurer m(task, opt.measure);
      const std::vector<autotune::MeasureResult> rs = m.measure(configs);
      for (size_t i = 0; i < rs.size(); ++i) {
        // The fastest repeat, as the model side counts the fastest round: both in the machine's
        // fast state (a slow period of a shared machine had moved a config's mean by 1.5x).
        const std::vector<double>& runs = rs[i].runs;
        const double fastest =
            runs.empty() ? rs[i].mean_s : *std::min_element(runs.begin(), runs.end());
        secs.push_back(rs[i].ok() ? fastest : 0);
        rep.records.push_back(Record::make(task, configs[i], rs[i]));
      }
    }
    for (size_t i = 0; i < configs.size(); ++i) {
      if (secs[i] > 0) {
        ok_configs[t].push_back(configs[i]);
        isolated_ms[t].push_back(secs[i] * 1e3);
      } else {
        ++tf.failed;
      }
    }
    rep.tasks.push_back(std::move(tf));
  }

  // 3. Inside the model: every selected task's configs are choices of its workload.
  const std::vector<Workload> workloads = group_workloads(tasks);
  std::vector<std::vector<Choice>> choices(workloads.size());
  std::vector<std::pair<size_t, size_t>> where(tasks.size(), {0, 0});  // workload, first choice
  for (size_t w = 0; w < workloads.size(); ++w) {
    for (size_t t : workloads[w].tasks) {
      where[t] = {w, choices[w].size()};
      for (const Config& c : ok_configs[t]) choices[w].push_back(Choice{t, c, {}});
    }
    if (choices[w].empty()) {
      const size_t t = workloads[w].tasks[0];
      choices[w].push_back(Choice{t, tasks[t].task.default_config(), {}});
    }
  }
  if (opt.in_network) {
    opt.in_network(workloads, choices);
  } else {
    time_in_network(g, target, tasks, workloads, choices, opt.network);
  }

  // 4. Compare.
  for (TaskFidelity& tf : rep.tasks) {
    const size_t t = tf.task;
    const auto [w, first] = where[t];
    std::vector<double> iso, net;
    for (size_t i = 0; i < ok_configs[t].size(); ++i) {
      const Choice& c = choices[w][first + i];
      if (c.per_round_ms.empty()) continue;  // not timed: the model did not run it
      const double ms = *std::min_element(c.per_round_ms.begin(), c.per_round_ms.end());
      tf.configs.push_back(ConfigTimes{c.config, isolated_ms[t][i], ms});
      iso.push_back(isolated_ms[t][i]);
      net.push_back(ms);
      append_network_records(tasks[t].task, c, rep.records);
    }
    if (!tf.configs.empty() &&
        tf.configs[0].config.index() == tasks[t].task.default_config().index())
      tf.model_ms = tf.configs[0].network_ms * static_cast<double>(tasks[t].nodes.size());
    tf.spearman = spearman(iso, net);
    if (!iso.empty()) {
      double log_sum = 0;
      tf.ratio_min = std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < iso.size(); ++i) {
        const double r = net[i] / iso[i];
        log_sum += std::log(r);
        tf.ratio_min = std::min(tf.ratio_min, r);
        tf.ratio_max = std::max(tf.ratio_max, r);
      }
      tf.ratio_geomean = std::exp(log_sum / static_cast<double>(iso.size()));
    }
    if (!iso.empty()) {
      const size_t pick =
          static_cast<size_t>(std::min_element(iso.begin(), iso.end()) - iso.begin());
      tf.pick_regret = net[pick] / *std::min_element(net.begin(), net.end());
    }
    tf.agrees = tf.spearman >= opt.min_spearman;  // false for NaN
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

std::string FidelityReport::table(const std::vector<TuningTask>& all) const {
  std::vector<std::vector<std::string>> rows = {{"task", "op", "configs", "spearman",
                                                 "net/iso geomean", "min", "max", "regret",
                                                 "model ms", ""}};
  int agree = 0;
  double ms_all = 0, ms_agree = 0;
  for (const TaskFidelity& tf : tasks) {
    agree += tf.agrees;
    ms_all += tf.model_ms;
    if (tf.agrees) ms_agree += tf.model_ms;
    std::string n = std::to_string(tf.configs.size());
    if (tf.failed) n += " (" + std::to_string(tf.failed) + " failed)";
    rows.push_back({std::to_string(tf.task + 1) + "/" + std::to_string(all.size()), all[tf.task].op,
                    n, std::isnan(tf.spearman) ? "-" : fixed("%.2f", tf.spearman),
                    fixed("%.2f", tf.ratio_geomean), fixed("%.2f", tf.ratio_min),
                    fixed("%.2f", tf.ratio_max), fixed("%.3f", tf.pick_regret),
                    fixed("%.3f", tf.model_ms), tf.agrees ? "ok" : "DISAGREE"});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      const std::string pad(width[c] - r[c].size(), ' ');
      line += (c ? "  " : "") + (c < 2 ? r[c] + pad : pad + r[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += std::to_string(agree) + " of " + std::to_string(tasks.size()) +
         " task(s) agree (Spearman >= " + fixed("%.2f", min_spearman) + ")";
  if (ms_all > 0)
    out += ", " + fixed("%.0f", 100 * ms_agree / ms_all) + "% of their time in the model";
  out += "\n";
  return out;
}

}  // namespace kiln::tuning
