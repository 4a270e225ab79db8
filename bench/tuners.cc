// kiln-bench-tuners: the TVM paper's Figure 12. For conv2d workloads of ResNet-18 (the paper's
// Table 2; C2, C6, C9 and C12 by default), the model-based tuner (xgb: gradient-boosted trees
// ranking candidates, simulated annealing), random search and a genetic algorithm each tune the
// conv2d_nchwc template with the same trial budget, in the same run and in lock-step: round
// after round, each tuner (in a shuffled order) proposes a batch of 8, which is measured and fed
// back to it, so that the slow and fast periods of a shared machine (whose clock drifts by 10-15%
// over minutes) fall on every tuner alike instead of on whichever ran during them. The default
// config is measured once per workload (the reference output) and given to every tuner. No
// tuner sees another's measurements. The best GFLOP/s found after every trial gives each
// tuner's curve. A config's speed (--metric relative) is its time against the default config
// timed after each repeat in the same process (MeasureResult::relative), scaled by the default's
// fastest repeat: this machine's slow periods outlast a measurement and had moved one config's
// measured time 1.0-2.4x within a run. A measurement made in a slow period (its reference ran
// over 1.2x the reference's usual time: --fast-state, autotune::MachineState) does not count in
// the curves: candidates look 6-8% faster against the default there, some far more, and such
// outliers had set the bar no tuner reached again. As in the paper, the curves are the search's own
// trials: the default config (Kiln's cost-model fallback, measured first as the reference
// output) is not one of them unless --count-default 1, since a default within 5% of the best
// would make every tuner "need" one trial and say nothing about the search.
// Every tuner runs once per seed (--seeds, default 0,1,2): one run decides little, since random
// search's luck and the model's first samples swing the trials needed several-fold between seeds.
// Printed per workload and seed: the trials each tuner needed to reach 95% of the best value any
// tuner found on that workload under any seed, and the ratio random / xgb (the paper's claim, and
// this benchmark's target: the model-based tuner needs at most a quarter of random search's
// trials), with the geometric mean over all (workload, seed) runs. The curves are written as CSV
// (workload,tuner,seed,trial,best_gflops) and plotted to a PNG by bench/plot_tuners.py
// (/usr/bin/python3 with matplotlib).
//
//   kiln-bench-tuners [--trials 200] [--workloads C2,C6,C9,C12] [--tuners xgb,random,ga]
//                     [--seeds 0,1,2] [--csv tuners.csv] [--png tuners.png] [--json FILE]
//                     [--keep-logs DIR]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_util.h"
#include "kiln/autotune/tune.h"
#include "kiln/autotune/tuner.h"
#include "kiln/graph/tuning.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/topi/conv2d.h"
#include "paper_layers.h"

namespace {

namespace bench = kiln::bench;
namespace autotune = kiln::autotune;
namespace topi = kiln::topi;

using Layer = bench::PaperLayer;

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) r.push_back(item);
  return r;
}

/// One tuner's run on one workload.
struct Run {
  std::string tuner;
  uint64_t seed = 0;
  std::vector<double> best;  ///< best GFLOP/s after search trial t+1 (--count-default: the
                             ///< default config is trial 1)
  double seconds = 0;        ///< time in this tuner's batches (planning and measuring them)
  double model_seconds = 0;  ///< xgb: time spent planning (features, training, annealing)
  int errors = 0;
  int slow_pairs = 0;  ///< pairs timed again because the reference ran slow (slow_wait_s)
  int waited = 0;      ///< measurements with such pairs
  int slow = 0;  ///< successful measurements made in a slow period (--fast-state), not counted
  double default_gflops = 0;
  /// The config behind best[t] (kNoPick before any success), and those configs by index.
  std::vector<uint64_t> pick;
  std::map<uint64_t, autotune::Config> pick_configs;
  std::vector<double> remeasured;  ///< --remeasure: the re-measured GFLOP/s of pick[t]
};

constexpr uint64_t kNoPick = ~uint64_t{0};

/// A table of trials to 95% and the random / xgb ratios behind its geometric mean.
struct Summary {
  explicit Summary(const std::vector<std::string>& header) : table(header) {}
  bench::Table table;
  std::vector<double> ratios;
  std::map<uint64_t, std::vector<double>> seed_ratios;

  static double geomean(const std::vector<double>& v) {
    double lg = 0;
    for (double r : v) lg += std::log(r);
    return std::exp(lg / v.size());
  }
  void print_geomean(const std::string& what, size_t n_seeds) const {
    if (ratios.empty()) return;
    std::cout << "geomean random/xgb, " << what << ", over " << ratios.size()
              << " (workload, seed) runs where either reached 95% (a tuner that did not counts "
                 "at its budget): "
              << bench::fixed(geomean(ratios), 2) << " (target: >= 4)";
    if (n_seeds > 1) {
      std::cout << "; per seed:";
      for (auto& [seed, v] : seed_ratios)
        std::cout << " " << seed << ": " << bench::fixed(geomean(v), 2);
    }
    std::cout << "\n";
  }
};

/// The first trial (1-based) whose best reaches `target`; 0 when none does.
int trials_to_reach(const std::vector<double>& curve, double target) {
  for (size_t t = 0; t < curve.size(); ++t)
    if (curve[t] >= target) return static_cast<int>(t + 1);
  return 0;
}

/// An exhaustive log's measurements by config index (--replay).
using ReplayTable = std::unordered_map<uint64_t, autotune::MeasureResult>;

/// This task's records in `path` (same target and template version; the first record of each
/// config). Throws when the log holds none.
ReplayTable load_replay(const std::string& path, const autotune::Task& task) {
  ReplayTable table;
  for (const autotune::Record& r : autotune::load_records(path).records) {
    if (r.task != task.key() || r.target != task.target || r.version != task.version ||
        r.in_network())
      continue;
    autotune::Config c = autotune::Config::from_json(r.config, task.space);
    table.emplace(c.index(), r.result);
  }
  if (table.empty())
    throw std::runtime_error("--replay: '" + path + "' holds no record of " + task.key());
  return table;
}

/// One tuner racing the others on a (workload, seed).
struct Contender {
  std::unique_ptr<autotune::Tuner> tuner;
  Run* run = nullptr;
  std::unique_ptr<autotune::RecordWriter> log;  ///< --keep-logs
  int trials = 0;                               ///< measured so far (the default included)
  bool done = false;
};

/// Measures a batch of configs: on the machine (a Measurer) or by looking them up (--replay).
using MeasureFn =
    std::function<std::vector<autotune::MeasureResult>(const std::vector<autotune::Config>&)>;

/// tune()'s loop for several tuners in lock-step, so that a shared machine's slow and fast
/// periods fall on every tuner alike: the default first (the reference, measured once and given
/// to every tuner as its trial 1), then rounds; in each round every tuner, in a shuffled order,
/// proposes a batch of tune()'s default size, which is measured, logged and fed back before the
/// next tuner's batch. A tuner stops at `n_trials` (the default included) or when its space is
/// exhausted. `on_trial` sees every trial of every tuner, the default's first.
void race(const autotune::Task& task, std::vector<Contender>& contenders,
          const autotune::MeasureResult& default_result, const MeasureFn& measure, int n_trials,
          uint64_t seed,
          const std::function<void(Contender&, const autotune::Config&,
                                   const autotune::MeasureResult&)>& on_trial) {
  const int batch_size = autotune::TuneOptions{}.batch_size;
  autotune::Config d = task.default_config();
  for (Contender& c : contenders) {
    const double t0 = bench::now_ms();
    c.tuner->update({d}, {default_result});
    c.run->seconds += (bench::now_ms() - t0) / 1e3;
    if (c.log) c.log->write(autotune::Record::make(task, d, default_result));
    c.trials = 1;
    on_trial(c, d, default_result);
  }
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<size_t> order(contenders.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (;;) {
    std::shuffle(order.begin(), order.end(), rng);
    bool any = false;
    for (size_t i : order) {
      Contender& c = contenders[i];
      if (c.done || c.trials >= n_trials) continue;
      const double t0 = bench::now_ms();
      std::vector<autotune::Config> batch =
          c.tuner->next_batch(std::min(batch_size, n_trials - c.trials));
      if (batch.empty()) {  // the space is exhausted
        c.done = true;
        continue;
      }
      any = true;
      std::vector<autotune::MeasureResult> results = measure(batch);
      for (size_t k = 0; k < batch.size(); ++k) {
        if (!results[k].ok()) ++c.run->errors;
        c.run->slow_pairs += results[k].slow_pairs;
        c.run->waited += results[k].slow_pairs > 0;
        if (c.log) c.log->write(autotune::Record::make(task, batch[k], results[k]));
        ++c.trials;
        on_trial(c, batch[k], results[k]);
      }
      c.tuner->update(batch, results);
      c.run->seconds += (bench::now_ms() - t0) / 1e3;
    }
    if (!any) break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::CommandLine cl(
      argc, argv,
      {{"--trials", "trial budget per tuner and workload (default 200)"},
       {"--workloads", "comma-separated layers of C1-C12 (default C2,C6,C9,C12)"},
       {"--tuners", "comma-separated tuners (default xgb,random,ga; also grid)"},
       {"--threads", "threads the measured kernels run with (default 1)"},
       {"--build-threads", "candidates compiled at once (default 2)"},
       {"--seeds",
        "seeds and ranges (0,1,2 or 0-19); every tuner runs once per seed (default 0-2)"},
       {"--repeat", "timed repeats per measurement (default 5)"},
       {"--rotate-mb", "argument copies rotated per measurement, MB (default 64, as kiln tune)"},
       {"--metric",
        "a config's speed in the curves: relative (default; its time against the default "
        "config's, timed after each repeat in the same process, times the default's fastest "
        "repeat), min (of the repeats; the default with --replay) or mean"},
       {"--slow-wait",
        "with --metric relative: seconds a measurement may wait out a slow period of the "
        "machine, timing again the pairs whose reference ran slow (MeasureOptions::slow_wait_s; "
        "default 0: off)"},
       {"--fast-state",
        "with --metric relative: a measurement whose reference (the default timed beside it) "
        "ran more than this factor x the 10th percentile of the references so far was made in "
        "a slow period of the machine, when candidates look faster against the default than "
        "they are, and does not count in the curves or the re-measured medians "
        "(autotune::MachineState; default 1.2; 0: every measurement counts)"},
       {"--xgb-fast-state",
        "xgb: ModelTunerOptions::slow_factor, the model learns fast-state measurements only "
        "(default 1.2; 0: all)"},
       {"--count-default",
        "1: the default config (measured first, as the reference) counts as every tuner's "
        "first trial; 0 (default): the curves are the search's own trials, as in the paper"},
       {"--csv", "curves as CSV (default tuners.csv)"},
       {"--png", "plot of the curves (default: the CSV's name with .png; 'none': no plot)"},
       {"--plot-script", "plotting script (default: plot_tuners.py beside this source)"},
       {"--json", "also write one JSON row per workload to this file"},
       {"--xgb-diversity", "xgb: ModelTunerOptions::diversity_penalty (default 1; 0: off)"},
       {"--xgb-refit", "xgb: ModelTunerOptions::retrain_every (default 8)"},
       {"--xgb-cost",
        "xgb: what the model learns of a measurement: min (default) or mean of its repeats"},
       {"--remeasure",
        "rounds in which every config that was some run's best so far is measured again after "
        "the search, for a second table free of one measurement's luck (default 3; 0: off)"},
       {"--replay",
        "replay an exhaustive log of the workloads (a grid tune kept with --keep-logs) instead "
        "of measuring: the tuners look their trials up; for comparing tuners over many seeds"},
       {"--keep-logs",
        "keep each tuner's record log in this directory (default: temp files, removed)"}});
  const int trials = static_cast<int>(cl.get_int("--trials", 200));
  const int threads = static_cast<int>(cl.get_int("--threads", 1));
  const int build_threads = static_cast<int>(cl.get_int("--build-threads", 2));
  std::vector<uint64_t> seeds;
  for (const std::string& v : split_list(cl.get_string("--seeds", "0,1,2"))) {
    // A seed or a range A-B.
    char* end = nullptr;
    unsigned long long lo = std::strtoull(v.c_str(), &end, 10), hi = lo;
    if (end != v.c_str() && *end == '-') {
      const char* rest = end + 1;
      hi = std::strtoull(rest, &end, 10);
      if (end == rest) end = const_cast<char*>(v.c_str());  // "A-": not a range
    }
    if (v[0] == '-' || end == v.c_str() || *end != '\0' || hi < lo || hi - lo > 10000)
      cl.fail("--seeds: '" + v + "' is neither a seed nor a range A-B");
    for (unsigned long long x = lo; x <= hi; ++x)
      if (std::find(seeds.begin(), seeds.end(), x) == seeds.end()) seeds.push_back(x);
  }
  if (seeds.empty()) cl.fail("--seeds: no seed given");
  const int repeat = static_cast<int>(cl.get_int("--repeat", 5));
  const int64_t rotate_mb = cl.get_int("--rotate-mb", 64);
  const std::string replay_log = cl.get_string("--replay", "");
  const std::string metric = cl.get_string("--metric", replay_log.empty() ? "relative" : "min");
  if (metric != "min" && metric != "mean" && metric != "relative")
    cl.fail("--metric: 'relative', 'min' or 'mean'");
  const bool use_min = metric == "min", use_relative = metric == "relative";
  const bool count_default = cl.get_int("--count-default", 0) != 0;
  if (repeat < 1) cl.fail("--repeat must be >= 1");
  const double slow_wait = cl.get_double("--slow-wait", 0);
  if (!(slow_wait >= 0)) cl.fail("--slow-wait must be >= 0");
  const double fast_state = use_relative ? cl.get_double("--fast-state", 1.2) : 0;
  if (!(fast_state >= 0)) cl.fail("--fast-state must be >= 0");
  if (rotate_mb < 0) cl.fail("--rotate-mb must be >= 0");
  if (trials < 2) cl.fail("--trials must be at least 2");
  if (threads < 1 || build_threads < 1) cl.fail("--threads and --build-threads must be >= 1");
  // How every measurement of the run is made: the tuners' trials and --remeasure alike.
  autotune::MeasureOptions measure_opt;
  measure_opt.build_threads = build_threads;
  measure_opt.repeat = repeat;
  measure_opt.rotate_bytes = static_cast<size_t>(rotate_mb) << 20;
  measure_opt.reference = use_relative;
  measure_opt.slow_wait_s = slow_wait;
  std::vector<std::string> tuners = split_list(cl.get_string("--tuners", "xgb,random,ga"));
  for (const std::string& t : tuners)
    if (t != "xgb" && t != "random" && t != "ga" && t != "grid")
      cl.fail("--tuners: unknown tuner '" + t + "' (xgb, random, ga, grid)");
  if (tuners.empty()) cl.fail("--tuners: no tuner given");
  std::vector<Layer> chosen;
  for (const std::string& name : split_list(cl.get_string("--workloads", "C2,C6,C9,C12"))) {
    const std::vector<Layer>& all = bench::paper_layers();
    auto it = std::find_if(all.begin(), all.end(),
                           [&](const Layer& l) { return l.name == name && !l.depthwise; });
    if (it == all.end()) cl.fail("--workloads: unknown layer '" + name + "' (C1-C12)");
    chosen.push_back(*it);
  }
  if (chosen.empty()) cl.fail("--workloads: no workload given");
  const int remeasure = static_cast<int>(cl.get_int("--remeasure", 3));
  autotune::ModelTunerOptions xgb_options;
  {
    xgb_options.diversity_penalty = cl.get_double("--xgb-diversity", xgb_options.diversity_penalty);
    if (!(xgb_options.diversity_penalty >= 0)) cl.fail("--xgb-diversity must be >= 0");
    xgb_options.retrain_every =
        static_cast<int>(cl.get_int("--xgb-refit", xgb_options.retrain_every));
    if (xgb_options.retrain_every < 1) cl.fail("--xgb-refit must be >= 1");
    const std::string cost = cl.get_string("--xgb-cost", xgb_options.train_on_min ? "min" : "mean");
    if (cost != "min" && cost != "mean") cl.fail("--xgb-cost: 'min' or 'mean'");
    xgb_options.train_on_min = cost == "min";
    xgb_options.slow_factor = cl.get_double("--xgb-fast-state", xgb_options.slow_factor);
    if (!(xgb_options.slow_factor >= 0)) cl.fail("--xgb-fast-state must be >= 0");
  }
  if (remeasure < 0) cl.fail("--remeasure must be >= 0");
  const std::string keep_logs = cl.get_string("--keep-logs", "");
  if (!keep_logs.empty()) std::filesystem::create_directories(keep_logs);
  const std::string csv_path = cl.get_string("--csv", "tuners.csv");
  std::string png_path = cl.get_string("--png", "");
  if (png_path.empty())
    png_path = std::filesystem::path(csv_path).replace_extension(".png").string();
  const std::string script = cl.get_string(
      "--plot-script", (std::filesystem::path(__FILE__).parent_path() / "plot_tuners.py").string());

  kiln_set_num_threads(threads);  // inherited by the forked measuring children
  const kiln::Target target = kiln::Target::host();
  const bool tty = ::isatty(STDERR_FILENO) != 0;  // live progress on a terminal only
  std::cout << "kiln-bench-tuners: TVM paper Figure 12, conv2d_nchwc template, batch 1, fp32\n"
            << "target: " << target.str() << "; kernels on " << threads << " thread(s); "
            << "a config's speed: " << metric << " of " << repeat << " timed repeats";
  if (use_relative && slow_wait > 0)
    std::cout << " (slow periods waited out for up to " << slow_wait << " s)";
  if (fast_state > 0)
    std::cout << "; measurements whose reference ran over " << fast_state
              << "x its usual time (slow periods) not counted";
  std::cout << "; " << trials << " trials per tuner and workload; tuners:";
  for (const std::string& t : tuners) std::cout << " " << t;
  std::cout << "; seeds:";
  for (uint64_t seed : seeds) std::cout << " " << seed;
  if (!replay_log.empty()) std::cout << "\nreplaying " << replay_log << ": nothing is measured";
  std::cout << "\n" << std::endl;

  std::ofstream csv(csv_path);
  if (!csv) {
    std::cerr << "kiln-bench-tuners: cannot write '" << csv_path << "'\n";
    return 2;
  }
  csv << "workload,tuner,seed,trial,best_gflops\n";
  std::vector<std::string> header = {"layer", "seed", "configs", "best GFLOP/s"};
  for (const std::string& t : tuners) header.push_back(t + " trials@95%");
  const bool ratio = std::count(tuners.begin(), tuners.end(), "xgb") &&
                     std::count(tuners.begin(), tuners.end(), "random");
  if (ratio) header.push_back("random/xgb");
  std::string failed_header;
  for (const std::string& t : tuners) failed_header += (failed_header.empty() ? "" : "/") + t;
  header.push_back("failed " + failed_header);
  header.push_back("seconds " + failed_header);
  Summary measured(header), remeasured(header), against_remeasured(header);
  std::vector<nlohmann::ordered_json> rows;
  const double t_all = bench::now_ms();
  std::ofstream recsv;
  if (remeasure > 0 && replay_log.empty()) {
    std::string path =
        std::filesystem::path(csv_path).replace_extension("").string() + "-remeasured.csv";
    recsv.open(path);
    recsv << "workload,tuner,seed,trial,gflops\n";
  }

  // One table row per seed of a workload: the trials each tuner's curve (Run::best, or
  // Run::remeasured) needed to reach 95% of the best value of any run's curve on the workload,
  // or of `bar_curve`'s best when given.
  auto summarize = [&](const std::string& layer, uint64_t configs, const std::vector<Run>& runs,
                       std::vector<double> Run::*curve, const std::string& prefix, Summary& sum,
                       std::map<uint64_t, nlohmann::ordered_json>& seed_rows,
                       std::vector<double> Run::*bar_curve = nullptr) {
    double best_all = 0;
    for (const Run& r : runs)
      for (double g : r.*(bar_curve ? bar_curve : curve)) best_all = std::max(best_all, g);
    for (uint64_t seed : seeds) {
      std::vector<std::string> cells = {layer, std::to_string(seed), std::to_string(configs),
                                        bench::fixed(best_all, 2)};
      nlohmann::ordered_json& row = seed_rows[seed];
      row[prefix + "best_gflops"] = best_all;
      int xgb_n = 0, random_n = 0;
      std::string failed, secs;
      for (const Run& r : runs) {
        if (r.seed != seed) continue;
        const std::vector<double>& c = r.*curve;
        int n = trials_to_reach(c, 0.95 * best_all);
        cells.push_back(n ? std::to_string(n) : ">" + std::to_string(c.size()));
        row[prefix + r.tuner + "_trials_to_95"] =
            n ? nlohmann::ordered_json(n) : nlohmann::ordered_json();
        row[prefix + r.tuner + "_final_gflops"] = c.empty() ? 0.0 : c.back();
        row[r.tuner + "_seconds"] = r.seconds;
        if (r.tuner == "xgb") xgb_n = n;
        if (r.tuner == "random") random_n = n;
        failed += (failed.empty() ? "" : "/") + std::to_string(r.errors);
        secs += (secs.empty() ? "" : "/") + bench::fixed(r.seconds, 0);
      }
      if (ratio) {
        // A tuner that never reached 95% is counted at its budget (a bound on its need).
        double rn = random_n ? random_n : trials, xn = xgb_n ? xgb_n : trials;
        std::string cell = bench::fixed(rn / xn, 2);
        if (!random_n && !xgb_n) {
          cell = "n/a";  // neither reached 95% (a third tuner or another seed found the best)
        } else {
          if (!random_n) cell = ">=" + cell;
          if (!xgb_n) cell = "<=" + cell;
          row[prefix + "random_over_xgb"] = rn / xn;
          sum.ratios.push_back(rn / xn);
          sum.seed_ratios[seed].push_back(rn / xn);
        }
        cells.push_back(cell);
      }
      cells.push_back(failed);
      cells.push_back(secs);
      sum.table.add_row(cells);
    }
  };

  for (const Layer& l : chosen) {
    topi::Conv2DWorkload w = bench::paper_workload(l);
    autotune::Task task = kiln::graph::conv2d_task(w, target, topi::ChannelBlocks::kTuned);
    std::cout << l.name << ": " << w.str() << ", " << bench::fixed(task.flops / 1e6, 1)
              << " MFLOP, " << task.space.size() << " configs\n";
    std::vector<Run> runs;
    ReplayTable replay_table;
    /// --metric relative: the default's fastest repeat (of itself and of its reference runs),
    /// which turns relative times into seconds.
    double unit_s = 0;
    /// GFLOP/s of a measurement by the chosen metric; 0 for a failed one.
    auto speed = [&](const autotune::MeasureResult& m) {
      if (!m.ok()) return 0.0;
      double s = m.mean_s;
      if (use_min && !m.runs.empty()) s = *std::min_element(m.runs.begin(), m.runs.end());
      if (use_relative) s = m.relative() * unit_s;
      return s > 0 ? task.flops / s / 1e9 : 0.0;
    };
    std::unique_ptr<autotune::Measurer> measurer;  // one per workload: the default measured once
    autotune::MeasureResult default_result;
    MeasureFn measure;
    // --fast-state: the machine's state at each measurement, from every measurement of the
    // workload so far (all tuners', in the order made).
    autotune::MachineState state(fast_state);
    try {
      if (!replay_log.empty()) {
        replay_table = load_replay(replay_log, task);
        measure = [&](const std::vector<autotune::Config>& batch) {
          std::vector<autotune::MeasureResult> results;
          for (const autotune::Config& c : batch) {
            auto it = replay_table.find(c.index());
            if (it == replay_table.end())
              throw std::runtime_error(
                  "--replay: config " + std::to_string(c.index()) +
                  " is not in the log; a replay needs every config of the space "
                  "(kiln-bench-tuners --tuners grid --keep-logs DIR)");
            results.push_back(it->second);
          }
          return results;
        };
        default_result = measure({task.default_config()})[0];
      } else {
        measurer = std::make_unique<autotune::Measurer>(task, measure_opt);
        default_result = measurer->default_result();
        measure = [&](const std::vector<autotune::Config>& batch) {
          std::vector<autotune::MeasureResult> results = measurer->measure(batch);
          for (const autotune::MeasureResult& r : results) state.observe(r);
          return results;
        };
      }
    } catch (const std::exception& e) {
      std::cerr << "kiln-bench-tuners: " << l.name << ": " << e.what() << "\n";
      return 1;
    }
    if (use_relative) {
      if (default_result.relative() <= 0) {
        std::cerr << "kiln-bench-tuners: " << l.name
                  << ": --metric relative needs measurements timed against the default (a "
                     "replayed log without them: use --metric min)\n";
        return 1;
      }
      state.observe(default_result);
      for (const std::vector<double>* v : {&default_result.runs, &default_result.ref_runs})
        for (double x : *v)
          if (x > 0 && (unit_s == 0 || x < unit_s)) unit_s = x;
    }
    // The default is trial 1 of every race; without --count-default the budget and the curve
    // are the search's trials after it.
    const int skip = count_default ? 0 : 1;
    for (uint64_t seed : seeds) {
      const size_t first = runs.size();
      runs.resize(first + tuners.size());
      std::vector<Contender> contenders;
      for (size_t i = 0; i < tuners.size(); ++i) {
        Run& run = runs[first + i];
        run.tuner = tuners[i];
        run.seed = seed;
        run.default_gflops = speed(default_result);
        Contender c;
        c.run = &run;
        c.tuner = tuners[i] == "xgb"
                      ? std::make_unique<autotune::ModelTuner>(task, seed, xgb_options)
                      : autotune::make_tuner(tuners[i], task, seed);
        if (!keep_logs.empty()) {
          std::filesystem::path log =
              std::filesystem::path(keep_logs) /
              (l.name + "-" + tuners[i] + "-seed" + std::to_string(seed) + ".jsonl");
          std::filesystem::remove(log);
          c.log = std::make_unique<autotune::RecordWriter>(log.string());
        }
        contenders.push_back(std::move(c));
      }
      auto on_trial = [&](Contender& c, const autotune::Config& config,
                          const autotune::MeasureResult& result) {
        Run& run = *c.run;
        const int t = c.trials - skip;  // this trial's number on the curve
        if (t < 1) return;
        double g = speed(result);
        if (g > 0 && state.slow(result)) {
          g = 0;
          ++run.slow;
        }
        double before = run.best.empty() ? 0 : run.best.back();
        run.best.resize(static_cast<size_t>(t), before);
        run.pick.resize(static_cast<size_t>(t), run.pick.empty() ? kNoPick : run.pick.back());
        if (g > before) {
          run.best[static_cast<size_t>(t - 1)] = g;
          run.pick[static_cast<size_t>(t - 1)] = config.index();
          run.pick_configs.emplace(config.index(), config);
        }
        if (!tty) return;
        std::fprintf(stderr, "\r  seed %llu %-6s trial %d/%d best %.2f GFLOP/s\033[K",
                     static_cast<unsigned long long>(seed), run.tuner.c_str(), t, trials,
                     run.best.back());
      };
      try {
        race(task, contenders, default_result, measure, trials + skip, seed, on_trial);
      } catch (const std::exception& e) {
        std::cerr << "\nkiln-bench-tuners: " << l.name << " seed " << seed << ": " << e.what()
                  << "\n";
        return 1;
      }
      if (tty) std::fprintf(stderr, "\r\033[K");
      for (size_t i = 0; i < tuners.size(); ++i) {
        Run& run = runs[first + i];
        if (auto* mt = dynamic_cast<autotune::ModelTuner*>(contenders[i].tuner.get()))
          run.model_seconds = mt->stats().plan_seconds;
        std::cout << "  seed " << seed << " " << run.tuner << ": best "
                  << bench::fixed(run.best.empty() ? 0 : run.best.back(), 2) << " GFLOP/s after "
                  << run.best.size() << " trials (default " << bench::fixed(run.default_gflops, 2)
                  << "), " << run.errors << " failed, " << bench::fixed(run.seconds, 1) << " s";
        if (run.slow > 0) std::cout << ", " << run.slow << " in a slow period (not counted)";
        if (run.waited > 0)
          std::cout << ", " << run.waited << " measurements waited out a slow period ("
                    << run.slow_pairs << " pairs timed again)";
        if (run.model_seconds > 0)
          std::cout << " (" << bench::fixed(run.model_seconds, 1) << " s in the cost model)";
        std::cout << std::endl;
        for (size_t t = 0; t < run.best.size(); ++t)
          csv << l.name << "," << run.tuner << "," << seed << "," << t + 1 << "," << run.best[t]
              << "\n";
      }
    }
    // --remeasure: every config that was some run's best so far, measured again in rounds
    // (interleaved, in a shuffled order each round); its speed is the median over the rounds.
    if (remeasure > 0 && replay_log.empty()) {
      std::map<uint64_t, autotune::Config> picks;
      for (const Run& r : runs) picks.insert(r.pick_configs.begin(), r.pick_configs.end());
      std::vector<autotune::Config> configs;
      for (auto& [i, c] : picks) configs.push_back(c);
      std::map<uint64_t, std::vector<double>> speeds, fast_speeds;
      std::mt19937_64 rng(12345);
      const double t0 = bench::now_ms();
      for (int round = 0; round < remeasure; ++round) {
        std::shuffle(configs.begin(), configs.end(), rng);
        std::vector<autotune::MeasureResult> results = measurer->measure(configs);
        for (size_t i = 0; i < configs.size(); ++i) {
          speeds[configs[i].index()].push_back(speed(results[i]));
          if (!state.slow(results[i])) fast_speeds[configs[i].index()].push_back(speed(results[i]));
        }
      }
      // The median over the rounds in the fast state (--fast-state), or over all when none was.
      std::map<uint64_t, double> value;
      for (auto& [i, all] : speeds) {
        std::vector<double>& v = fast_speeds[i].empty() ? all : fast_speeds[i];
        std::sort(v.begin(), v.end());
        value[i] = v[v.size() / 2];
      }
      for (Run& r : runs) {
        r.remeasured.clear();
        for (uint64_t i : r.pick) r.remeasured.push_back(i == kNoPick ? 0.0 : value[i]);
        for (size_t t = 0; t < r.remeasured.size(); ++t)
          recsv << l.name << "," << r.tuner << "," << r.seed << "," << t + 1 << ","
                << r.remeasured[t] << "\n";
      }
      std::cout << "  re-measured the " << configs.size() << " configs that were a run's best, "
                << remeasure << " rounds, " << bench::fixed((bench::now_ms() - t0) / 1e3, 0)
                << " s\n";
    }
    std::map<uint64_t, nlohmann::ordered_json> seed_rows;
    for (uint64_t seed : seeds) {
      nlohmann::ordered_json& row = seed_rows[seed];
      row["name"] = l.name;
      row["seed"] = seed;
      row["workload"] = w.str();
      row["configs"] = task.space.size();
      row["trials"] = trials;
    }
    summarize(l.name, task.space.size(), runs, &Run::best, "", measured, seed_rows);
    if (remeasure > 0 && replay_log.empty()) {
      summarize(l.name, task.space.size(), runs, &Run::remeasured, "remeasured_", remeasured,
                seed_rows);
      summarize(l.name, task.space.size(), runs, &Run::best, "search_vs_remeasured_",
                against_remeasured, seed_rows, &Run::remeasured);
    }
    for (auto& [seed, row] : seed_rows) rows.push_back(row);
    std::cout << "\n";
  }
  csv.close();

  std::cout << "trials each tuner needed to reach 95% of the best GFLOP/s any tuner found, as "
               "measured during the search (the paper's curves):\n";
  measured.table.print(std::cout);
  measured.print_geomean("measured", seeds.size());
  if (remeasure > 0 && replay_log.empty()) {
    std::cout << "\nthe same with each run's best-so-far config re-measured (" << remeasure
              << " rounds, median): what a user stopping at that trial would get, without the "
                 "luck of one measurement:\n";
    remeasured.table.print(std::cout);
    remeasured.print_geomean("re-measured", seeds.size());
    std::cout << "\nthe search's curves (the first table's) against 95% of the best re-measured "
                 "config: a bar that one lucky measurement cannot raise:\n";
    against_remeasured.table.print(std::cout);
    against_remeasured.print_geomean("search against the re-measured best", seeds.size());
  }
  std::cout << "total " << bench::fixed((bench::now_ms() - t_all) / 1e3, 0) << " s\n";
  std::cout << "curves: " << csv_path << "\n";
  bench::write_json_rows(cl.get_string("--json", ""), rows);

  if (png_path != "none") {
    std::string cmd = "/usr/bin/python3 '" + script + "' '" + csv_path + "' '" + png_path + "'";
    int rc = std::system(cmd.c_str());
    if (rc != 0)
      std::cerr << "kiln-bench-tuners: plotting failed (" << cmd << "); the CSV is complete\n";
    else
      std::cout << "plot: " << png_path << "\n";
  }
  return 0;
}
