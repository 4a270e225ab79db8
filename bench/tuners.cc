// kiln-bench-tuners: the TVM paper's Figure 12. For conv2d workloads of ResNet-18 (the paper's
// Table 2; C2, C6, C9 and C12 by default), the model-based tuner (xgb: gradient-boosted trees
// ranking candidates, simulated annealing), random search and a genetic algorithm each tune the
// conv2d_nchwc template with the same trial budget, one after the other in the same run, each
// through autotune::tune() with its own fresh log (a temp file, removed afterwards), so no tuner
// sees another's measurements. The best GFLOP/s found after every trial gives each tuner's curve.
// As in the paper, the curves are the search's own trials: the default config (Kiln's
// cost-model fallback, measured first as the reference output) is not one of them unless
// --count-default 1, since a default within 5% of the best would make every tuner "need" one
// trial and say nothing about the search.
// Printed per workload: the trials each tuner needed to reach 95% of the best value any tuner
// found, and the ratio random / xgb (the paper's claim, and this benchmark's target: the
// model-based tuner needs at most a quarter of random search's trials). The curves are written
// as CSV (workload,tuner,trial,best_gflops) and plotted to a PNG by bench/plot_tuners.py
// (/usr/bin/python3 with matplotlib).
//
//   kiln-bench-tuners [--trials 200] [--workloads C2,C6,C9,C12] [--tuners xgb,random,ga]
//                     [--csv tuners.csv] [--png tuners.png] [--json FILE]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
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
  std::vector<double> best;  ///< best GFLOP/s after search trial t+1 (--count-default: the
                             ///< default config is trial 1)
  double seconds = 0;        ///< wall time of the tuning run
  double model_seconds = 0;  ///< xgb: time spent planning (features, training, annealing)
  int errors = 0;
  double default_gflops = 0;
};

/// The first trial (1-based) whose best reaches `target`; 0 when none does.
int trials_to_reach(const std::vector<double>& curve, double target) {
  for (size_t t = 0; t < curve.size(); ++t)
    if (curve[t] >= target) return static_cast<int>(t + 1);
  return 0;
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
       {"--seed", "seed of the tuners (default 0)"},
       {"--repeat", "timed repeats per measurement (default 5)"},
       {"--rotate-mb", "argument copies rotated per measurement, MB (default 64, as kiln tune)"},
       {"--metric", "a config's speed in the curves: min (of the repeats, default) or mean"},
       {"--count-default",
        "1: the default config (measured first, as the reference) counts as every tuner's "
        "first trial; 0 (default): the curves are the search's own trials, as in the paper"},
       {"--csv", "curves as CSV (default tuners.csv)"},
       {"--png", "plot of the curves (default: the CSV's name with .png; 'none': no plot)"},
       {"--plot-script", "plotting script (default: plot_tuners.py beside this source)"},
       {"--json", "also write one JSON row per workload to this file"}});
  const int trials = static_cast<int>(cl.get_int("--trials", 200));
  const int threads = static_cast<int>(cl.get_int("--threads", 1));
  const int build_threads = static_cast<int>(cl.get_int("--build-threads", 2));
  const uint64_t seed = static_cast<uint64_t>(cl.get_int("--seed", 0));
  const int repeat = static_cast<int>(cl.get_int("--repeat", 5));
  const int64_t rotate_mb = cl.get_int("--rotate-mb", 64);
  const std::string metric = cl.get_string("--metric", "min");
  if (metric != "min" && metric != "mean") cl.fail("--metric: 'min' or 'mean'");
  const bool use_min = metric == "min";
  const bool count_default = cl.get_int("--count-default", 0) != 0;
  if (repeat < 1) cl.fail("--repeat must be >= 1");
  if (rotate_mb < 0) cl.fail("--rotate-mb must be >= 0");
  if (trials < 2) cl.fail("--trials must be at least 2");
  if (threads < 1 || build_threads < 1) cl.fail("--threads and --build-threads must be >= 1");
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
            << "a config's speed: " << metric << " of " << repeat << " timed repeats; " << trials
            << " trials per tuner and workload; tuners:";
  for (const std::string& t : tuners) std::cout << " " << t;
  std::cout << "\n" << std::endl;

  std::ofstream csv(csv_path);
  if (!csv) {
    std::cerr << "kiln-bench-tuners: cannot write '" << csv_path << "'\n";
    return 2;
  }
  csv << "workload,tuner,trial,best_gflops\n";
  std::vector<std::string> header = {"layer", "configs", "best GFLOP/s"};
  for (const std::string& t : tuners) header.push_back(t + " trials@95%");
  const bool ratio = std::count(tuners.begin(), tuners.end(), "xgb") &&
                     std::count(tuners.begin(), tuners.end(), "random");
  if (ratio) header.push_back("random/xgb");
  std::string failed_header;
  for (const std::string& t : tuners) failed_header += (failed_header.empty() ? "" : "/") + t;
  header.push_back("failed " + failed_header);
  for (const std::string& t : tuners) header.push_back(t + " s");
  bench::Table table(header);
  std::vector<nlohmann::ordered_json> rows;
  std::vector<double> ratios;
  const double t_all = bench::now_ms();

  for (const Layer& l : chosen) {
    topi::Conv2DWorkload w = bench::paper_workload(l);
    autotune::Task task = kiln::graph::conv2d_task(w, target, topi::ChannelBlocks::kTuned);
    std::cout << l.name << ": " << w.str() << ", " << bench::fixed(task.flops / 1e6, 1)
              << " MFLOP, " << task.space.size() << " configs\n";
    std::vector<Run> runs;
    /// GFLOP/s of a measurement by the chosen metric; 0 for a failed one.
    auto speed = [&](const autotune::MeasureResult& m) {
      if (!m.ok()) return 0.0;
      double s = m.mean_s;
      if (use_min && !m.runs.empty()) s = *std::min_element(m.runs.begin(), m.runs.end());
      return s > 0 ? task.flops / s / 1e9 : 0.0;
    };
    for (const std::string& name : tuners) {
      std::string log = (std::filesystem::temp_directory_path() /
                         ("kiln-bench-tuners-" + std::to_string(::getpid()) + "-" + l.name + "-" +
                          name + ".jsonl"))
                            .string();
      std::filesystem::remove(log);
      Run run;
      run.tuner = name;
      std::unique_ptr<autotune::Tuner> tuner = autotune::make_tuner(name, task, seed);
      autotune::TuneOptions opt;
      // The default is trial 1 of every tune(); without --count-default the budget and the
      // curve are the search's trials after it.
      const int skip = count_default ? 0 : 1;
      opt.n_trials = trials + skip;
      opt.log_path = log;
      opt.measure.build_threads = build_threads;
      opt.measure.repeat = repeat;
      opt.measure.rotate_bytes = static_cast<size_t>(rotate_mb) << 20;
      opt.progress = [&](const autotune::TuneProgress& p) {
        const int t = p.trials - skip;  // this trial's number on the curve
        if (t < 1 || p.verifying) return;
        // The latest trial's speed by the chosen metric (the tuner itself ranks by the mean).
        double g = p.last_result ? speed(*p.last_result) : 0;
        double before = run.best.empty() ? 0 : run.best.back();
        run.best.resize(static_cast<size_t>(t), before);
        run.best[static_cast<size_t>(t - 1)] = std::max(before, g);
        if (!tty) return;
        std::fprintf(stderr, "\r  %-6s trial %d/%d best %.2f GFLOP/s, %.0f s\033[K", name.c_str(),
                     t, trials, run.best.back(), p.elapsed_s);
      };
      autotune::TuneResult r;
      try {
        r = autotune::tune(task, *tuner, opt);
      } catch (const std::exception& e) {
        std::cerr << "\nkiln-bench-tuners: " << l.name << " " << name << ": " << e.what() << "\n";
        std::filesystem::remove(log);
        return 1;
      }
      std::filesystem::remove(log);
      if (tty) std::fprintf(stderr, "\r\033[K");
      // Trials reported out of order never happen (one at a time), but a gap is filled forward.
      for (size_t t = 1; t < run.best.size(); ++t)
        run.best[t] = std::max(run.best[t], run.best[t - 1]);
      run.seconds = r.elapsed_s;
      run.errors = r.errors;
      run.default_gflops = speed(r.default_result);
      if (auto* mt = dynamic_cast<autotune::ModelTuner*>(tuner.get()))
        run.model_seconds = mt->stats().plan_seconds;
      std::cout << "  " << name << ": best "
                << bench::fixed(run.best.empty() ? 0 : run.best.back(), 2) << " GFLOP/s after "
                << run.best.size() << " trials (default " << bench::fixed(run.default_gflops, 2)
                << "), " << r.errors << " failed, " << bench::fixed(run.seconds, 1) << " s";
      if (run.model_seconds > 0)
        std::cout << " (" << bench::fixed(run.model_seconds, 1) << " s in the cost model)";
      std::cout << std::endl;
      for (size_t t = 0; t < run.best.size(); ++t)
        csv << l.name << "," << name << "," << t + 1 << "," << run.best[t] << "\n";
      runs.push_back(std::move(run));
    }
    double best_all = 0;
    for (const Run& r : runs)
      if (!r.best.empty()) best_all = std::max(best_all, r.best.back());
    std::vector<std::string> cells = {l.name, std::to_string(task.space.size()),
                                      bench::fixed(best_all, 2)};
    nlohmann::ordered_json row;
    row["name"] = l.name;
    row["workload"] = w.str();
    row["configs"] = task.space.size();
    row["trials"] = trials;
    row["best_gflops"] = best_all;
    int xgb_n = 0, random_n = 0;
    for (const Run& r : runs) {
      int n = trials_to_reach(r.best, 0.95 * best_all);
      cells.push_back(n ? std::to_string(n) : ">" + std::to_string(r.best.size()));
      row[r.tuner + "_trials_to_95"] = n ? nlohmann::ordered_json(n) : nlohmann::ordered_json();
      row[r.tuner + "_best_gflops"] = r.best.empty() ? 0.0 : r.best.back();
      row[r.tuner + "_seconds"] = r.seconds;
      if (r.tuner == "xgb") xgb_n = n;
      if (r.tuner == "random") random_n = n;
    }
    if (ratio) {
      // A tuner that never reached 95% is counted at its budget (a lower bound on its need).
      double rn = random_n ? random_n : trials, xn = xgb_n ? xgb_n : trials;
      std::string cell = bench::fixed(rn / xn, 2);
      if (!random_n && !xgb_n) {
        cell = "n/a";  // neither reached 95% (a third tuner found the best)
      } else {
        if (!random_n) cell = ">=" + cell;
        if (!xgb_n) cell = "<=" + cell;
        row["random_over_xgb"] = rn / xn;
        ratios.push_back(rn / xn);
      }
      cells.push_back(cell);
    }
    std::string failed;
    for (const Run& r : runs) failed += (failed.empty() ? "" : "/") + std::to_string(r.errors);
    cells.push_back(failed);
    for (const Run& r : runs) cells.push_back(bench::fixed(r.seconds, 0));
    table.add_row(cells);
    rows.push_back(row);
    std::cout << "\n";
  }
  csv.close();

  std::cout << "trials each tuner needed to reach 95% of the best GFLOP/s any tuner found:\n";
  table.print(std::cout);
  if (!ratios.empty()) {
    double lg = 0;
    for (double r : ratios) lg += std::log(r);
    std::cout << "geomean random/xgb (workloads where either reached 95%; a tuner that did not "
                 "counts at its budget): "
              << bench::fixed(std::exp(lg / ratios.size()), 2) << " (target: >= 4)\n";
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
