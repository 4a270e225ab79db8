// `kiln tune MODEL --log FILE.jsonl`: auto-tunes the tunable operator workloads of a model (TVM
// paper section 5). The model is imported like `kiln compile` does, its unique tunable workloads
// are extracted (tuning/tasks.h: conv2d, depthwise conv2d and dense after the graph passes) and
// listed, then tuned one by one (autotune/tune.h) with a one-line live progress display on
// stderr; every measurement is appended to the log as it is made. Run again with the same log, a
// task resumes where it stopped: its logged trials count toward --trials and are never measured
// again. At the end a table gives each task's default and best GFLOP/s, then (--network-check)
// the best configs, the defaults and the runners-up are timed inside the compiled model
// (tuning/network_check.h) and those times appended to the log too. `kiln compile --tuning-log
// FILE` then builds the model with the best logged config of each workload.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "cli_common.h"
#include "kiln/autotune/tune.h"
#include "kiln/autotune/tuner.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/support/error.h"
#include "kiln/target/target.h"
#include "kiln/tuning/fidelity.h"
#include "kiln/tuning/log.h"
#include "kiln/tuning/network_check.h"
#include "kiln/tuning/tasks.h"

namespace kiln::cli {

namespace {

const std::vector<std::string> kTuners = {"xgb", "random", "grid", "ga"};

struct TuneCmdOptions {
  std::string model, log, tuner = "xgb", target = "llvm -mcpu=native", tasks;
  int trials = 0, threads = 1, early_stopping = 0, batch = 8, build_threads = 2, verify = 4,
      network_check = tuning::NetworkCheckOptions{}.rounds, fidelity = 0;
  double timeout_s = 10, compile_timeout_s = 30, minutes = 0;
  unsigned seed = 0;
  bool no_transfer = false;
  std::vector<std::string> shapes;
};

/// Parses --tasks "1,3,5-7" (1-based, as listed) against `n` tasks; user errors name the item.
std::vector<size_t> parse_task_selection(const std::string& spec, size_t n) {
  std::set<size_t> picked;
  std::stringstream ss(spec);
  std::string item;
  auto number = [&](const std::string& s) -> size_t {
    KILN_USER_CHECK(!s.empty() && s.find_first_not_of("0123456789") == std::string::npos &&
                    s.size() < 10)
        << "--tasks '" << spec << "': '" << item << "' is not a task number or range (i or i-j)";
    size_t v = std::stoul(s);
    KILN_USER_CHECK(v >= 1 && v <= n)
        << "--tasks '" << spec << "': there is no task " << v << "; the model has " << n
        << " tunable task(s), numbered 1-" << n;
    return v;
  };
  while (std::getline(ss, item, ',')) {
    size_t dash = item.find('-');
    if (dash == std::string::npos) {
      picked.insert(number(item));
      continue;
    }
    size_t a = number(item.substr(0, dash)), b = number(item.substr(dash + 1));
    KILN_USER_CHECK(a <= b) << "--tasks '" << spec << "': empty range '" << item << "'";
    for (size_t i = a; i <= b; ++i) picked.insert(i);
  }
  KILN_USER_CHECK(!picked.empty()) << "--tasks '" << spec << "' selects no task";
  std::vector<size_t> r;
  for (size_t i : picked) r.push_back(i - 1);
  return r;
}

double gflops(const autotune::Task& t, double seconds) {
  return t.flops > 0 && seconds > 0 ? t.flops / seconds / 1e9 : 0;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// The live progress display: on a terminal one line rewritten in place; otherwise (a log file,
/// a test) a line every tenth of the budget.
class ProgressDisplay {
 public:
  ProgressDisplay() : tty_(::isatty(STDERR_FILENO) != 0) {}

  void show(size_t i, size_t n, const std::string& op, const autotune::TuneProgress& p) {
    // line() starts with the task's key (the long workload string): show "task i/n op" instead.
    std::string line = p.line();
    const std::string key = p.task ? p.task->key() : "";
    if (!key.empty() && line.compare(0, key.size(), key) == 0) line = line.substr(key.size());
    line = "task " + std::to_string(i + 1) + "/" + std::to_string(n) + " " + op + line;
    if (tty_) {
      // Longer than the terminal, the line would wrap and "\r" would not reach its start.
      struct winsize ws {};
      if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 8 && line.size() >= ws.ws_col)
        line = line.substr(0, ws.ws_col - 1);
      std::cerr << "\r" << line << "\033[K" << std::flush;
      open_ = true;
      return;
    }
    if (p.verifying) return;  // the task's summary line counts the verification runs
    // Ten lines per task; under a time budget without a trial cap, one per 16 trials.
    int step = p.time_budget_s > 0 && p.n_trials >= 1000000 ? 16 : std::max(1, p.n_trials / 10);
    if (p.trials == p.n_trials || p.trials % step == 0) std::cerr << line << "\n";
  }
  /// Ends the in-place line (before other output).
  void finish() {
    if (open_) std::cerr << "\n";
    open_ = false;
  }

 private:
  bool tty_;
  bool open_ = false;
};

struct TaskOutcome {
  size_t index = 0;
  bool ok = false;
  autotune::TuneResult result;
};

/// The network check (tuning/network_check.h) after tuning: its records go to the log.
void check_in_model(const TuneCmdOptions& o, const graph::Graph& g, const Target& target,
                    const std::vector<tuning::TuningTask>& tasks) {
  tuning::NetworkCheckOptions nopt;
  nopt.rounds = o.network_check;
  nopt.threads = o.threads;
  nopt.set_inputs = [](runtime::GraphExecutor& ex) { set_random_inputs(ex, 0); };
  nopt.progress = [](const std::string& s) {
    std::fprintf(stderr, "\rnetwork check: %-40s", s.c_str());
    std::fflush(stderr);
  };
  std::printf("\ntiming the candidates inside the model (%d rounds)\n", o.network_check);
  std::fflush(stdout);
  tuning::NetworkCheckResult r =
      tuning::check_in_network(g, target, tasks, autotune::load_records(o.log).records, nopt);
  std::fprintf(stderr, "\r%-56s\r", "");
  tuning::append_records(o.log, r.records);
  std::printf("%d model variants compiled and profiled in %.1f s; %zu in-model times logged\n",
              r.variants, r.seconds, r.records.size());
  for (const std::string& line : r.lines) std::printf("  %s\n", line.c_str());
}

/// --fidelity: the selected tasks' sampled configs timed alone and inside the model
/// (tuning/fidelity.h) instead of tuning; every time goes to the log.
int check_fidelity(const TuneCmdOptions& o, const graph::Graph& g, const Target& target,
                   const std::vector<tuning::TuningTask>& tasks,
                   const std::vector<size_t>& selected, const autotune::MeasureOptions& mopt) {
  tuning::FidelityOptions fo;
  fo.samples = o.fidelity;
  fo.seed = o.seed;
  fo.measure = mopt;
  fo.network.rounds = std::max(1, o.network_check);
  fo.network.threads = o.threads;
  fo.network.set_inputs = [](runtime::GraphExecutor& ex) { set_random_inputs(ex, 0); };
  fo.network.progress = [](const std::string& s) {
    std::fprintf(stderr, "\rfidelity: %-50s", s.c_str());
    std::fflush(stderr);
  };
  std::printf(
      "fidelity: %d configs of each of %zu task(s), alone and inside the model (%d "
      "rounds)\n",
      o.fidelity, selected.size(), fo.network.rounds);
  std::fflush(stdout);
  tuning::FidelityReport r = tuning::measure_fidelity(g, target, tasks, selected, fo);
  std::fprintf(stderr, "\r%-62s\r", "");
  tuning::append_records(o.log, r.records);
  std::printf("\n%s", r.table(tasks).c_str());
  std::printf("%zu times logged to %s in %.1f s\n", r.records.size(), o.log.c_str(), r.seconds);
  return 0;
}

int tune_model(TuneCmdOptions o) {
  if (o.trials == 0) o.trials = o.minutes > 0 ? 1000000 : 200;
  KILN_USER_CHECK(std::find(kTuners.begin(), kTuners.end(), o.tuner) != kTuners.end())
      << "--tuner '" << o.tuner << "': unknown tuner; choose one of xgb, random, grid, ga";
  tuning::check_log_path(o.log);
  auto t0 = Clock::now();
  graph::Graph g = load_model(o.model, o.shapes);
  Target target(o.target);
  std::vector<tuning::TuningTask> tasks = tuning::extract_tuning_tasks(g, target);
  // Records are filed under the thread count they were measured with.
  for (tuning::TuningTask& t : tasks) t.task = autotune::with_threads(std::move(t.task), o.threads);
  std::printf("%s: %zu tunable task(s) (%.0f ms)\n", o.model.c_str(), tasks.size(), ms_since(t0));
  if (tasks.empty()) {
    std::printf(
        "nothing to tune: the model has no conv2d, depthwise conv2d or dense operator "
        "with constant weights\n");
    return 0;
  }
  const size_t n = tasks.size();
  for (size_t i = 0; i < n; ++i) {
    const tuning::TuningTask& t = tasks[i];
    std::string nodes;
    for (size_t k = 0; k < t.nodes.size(); ++k) {
      if (k == 3) {
        nodes += ", ... (" + std::to_string(t.nodes.size()) + " nodes)";
        break;
      }
      nodes += (k ? ", " : "") + t.nodes[k];
    }
    std::printf("  %*zu/%zu %-16s %s  %.1f MFLOP, %llu configs; nodes: %s\n",
                static_cast<int>(std::to_string(n).size()), i + 1, n, t.op.c_str(),
                t.task.workload.c_str(), t.task.flops / 1e6,
                static_cast<unsigned long long>(t.task.space.size()), nodes.c_str());
  }
  std::vector<size_t> selected;
  if (o.tasks.empty()) {
    for (size_t i = 0; i < n; ++i) selected.push_back(i);
  } else {
    selected = parse_task_selection(o.tasks, n);
  }
  autotune::MeasureOptions mopt;
  mopt.timeout_s = o.timeout_s;
  mopt.compile_timeout_s = o.compile_timeout_s;
  mopt.build_threads = o.build_threads;
  kiln_set_num_threads(o.threads);  // inherited by the forked measuring children
  if (o.fidelity > 0) return check_fidelity(o, g, target, tasks, selected, mopt);
  std::printf(
      "tuning %zu task(s) with the %s tuner, %s, kernels on %d thread(s); log %s\n",
      selected.size(), o.tuner.c_str(),
      o.trials >= 1000000 ? "no trial cap" : (std::to_string(o.trials) + " trials each").c_str(),
      o.threads, o.log.c_str());
  if (o.minutes > 0)
    std::printf(
        "time budget: %g min in all; each task gets a share of the time left by its share of the "
        "model's arithmetic\n",
        o.minutes);
  std::fflush(stdout);

  autotune::TuneOptions topt;
  topt.measure = mopt;
  topt.n_trials = o.trials;
  topt.batch_size = o.batch;
  topt.log_path = o.log;
  topt.early_stopping = o.early_stopping;
  topt.verify_top = o.verify;

  ProgressDisplay display;
  std::vector<TaskOutcome> outcomes;
  int failed_tasks = 0;
  const auto t_start = Clock::now();
  const std::vector<double> weights = tuning::budget_weights(tasks, selected);
  double weight_left = 1;
  for (size_t k = 0; k < selected.size(); ++k) {
    const size_t i = selected[k];
    const tuning::TuningTask& t = tasks[i];
    TaskOutcome out;
    out.index = i;
    autotune::TuneOptions opt = topt;
    if (o.minutes > 0) {
      // Its weight's share of what is left (tuning::budget_weights): a task that stops early
      // (small space, resumed) leaves its time to the ones after it. The verification runs past
      // the share.
      const double spent = std::chrono::duration<double>(Clock::now() - t_start).count();
      opt.time_budget_s =
          std::max(1.0, (o.minutes * 60 - spent) * std::min(1.0, weights[k] / weight_left));
    }
    weight_left -= weights[k];
    if (!o.no_transfer && o.tuner == "xgb")
      for (const tuning::TuningTask& other : tasks)
        if (other.task.name == t.task.name && other.task.key() != t.task.key())
          opt.transfer_tasks.push_back(other.task);
    opt.progress = [&](const autotune::TuneProgress& p) { display.show(i, n, t.op, p); };
    try {
      std::unique_ptr<autotune::Tuner> tuner = autotune::make_tuner(o.tuner, t.task, o.seed);
      out.result = autotune::tune(t.task, *tuner, opt);
      out.ok = true;
    } catch (const Error& e) {
      display.finish();
      std::fprintf(stderr, "task %zu/%zu %s: error: %s\n", i + 1, n, t.op.c_str(), e.what());
      ++failed_tasks;
      outcomes.push_back(std::move(out));
      continue;
    }
    display.finish();
    const autotune::TuneResult& r = out.result;
    std::printf("task %zu/%zu %s: %d trials (%d resumed from the log, %d new", i + 1, n,
                t.op.c_str(), r.resumed + r.trials, r.resumed, r.trials);
    if (r.errors) std::printf(", %d failed", r.errors);
    if (r.transfer_records) std::printf(", %d records of other tasks used", r.transfer_records);
    if (r.verified) std::printf(", %d verification runs", r.verified);
    if (r.budget_spent)
      std::printf(", stopped at its %.0f s share of the budget", opt.time_budget_s);
    std::printf("), best %.2f GFLOP/s, %.2fx the default, %.1f s\n",
                gflops(t.task, r.best_result.mean_s), r.speedup(), r.elapsed_s);
    std::fflush(stdout);
    outcomes.push_back(std::move(out));
  }

  // The summary table.
  std::vector<std::vector<std::string>> rows = {
      {"task", "op", "default GFLOP/s", "best GFLOP/s", "speedup", "trials"}};
  for (const TaskOutcome& out : outcomes) {
    const tuning::TuningTask& t = tasks[out.index];
    std::string id = std::to_string(out.index + 1) + "/" + std::to_string(n);
    if (!out.ok) {
      rows.push_back({id, t.op, "-", "-", "failed", "-"});
      continue;
    }
    const autotune::TuneResult& r = out.result;
    rows.push_back({id, t.op, fmt("%.2f", gflops(t.task, r.default_result.mean_s)),
                    fmt("%.2f", gflops(t.task, r.best_result.mean_s)), fmt("%.2fx", r.speedup()),
                    std::to_string(r.resumed + r.trials)});
  }
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
  std::printf("\n");
  for (size_t k = 0; k < rows.size(); ++k) {
    for (size_t c = 0; c < rows[k].size(); ++c)
      std::printf(c < 2 ? "%s%-*s" : "%s%*s", c ? "  " : "", static_cast<int>(w[c]),
                  rows[k][c].c_str());
    std::printf("\n");
  }
  if (o.network_check > 0 && failed_tasks == 0) check_in_model(o, g, target, tasks);
  const std::string threads_flag =
      o.threads > 1 ? " --tuning-threads " + std::to_string(o.threads) : std::string();
  std::printf("\ntuned in %.1f s; log %s; compile with: kiln compile %s -o OUT --tuning-log %s%s\n",
              ms_since(t0) / 1e3, o.log.c_str(), o.model.c_str(), o.log.c_str(),
              threads_flag.c_str());
  KILN_USER_CHECK(failed_tasks == 0)
      << failed_tasks << " of " << outcomes.size() << " task(s) could not be tuned (see above)";
  return 0;
}

}  // namespace

Command add_tune_command(CLI::App& app) {
  auto o = std::make_shared<TuneCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Auto-tune the model's conv2d / dense workloads, appending measurements to a log");
  cmd->add_option("model", o->model, kModelHelp)->required();
  cmd->add_option("--log", o->log,
                  "JSON-lines tuning log: appended to; trials already in it are resumed")
      ->required();
  cmd->add_option("--trials", o->trials,
                  "Trials per task, logged ones included (default 200, or no cap with --minutes)")
      ->check(int_range(1, 1000000));
  cmd->add_option("--minutes", o->minutes,
                  "Wall-clock budget for the whole model, shared by the tasks' shares of the "
                  "model's arithmetic; time a task leaves goes to the ones after it (--trials, if "
                  "given, still caps a task). Default 0: no budget")
      ->check(real_range(0.0, 100000.0));
  cmd->add_option("--tuner", o->tuner, "xgb (cost model, default), random, grid or ga");
  cmd->add_option("--threads", o->threads, "Threads the measured kernels run with (default 1)")
      ->check(int_range(1, 1024));
  cmd->add_option("--timeout", o->timeout_s, "Seconds one candidate may run (default 10)")
      ->check(real_range(0.1, 3600.0));
  cmd->add_option("--compile-timeout", o->compile_timeout_s,
                  "Seconds compiling one candidate may take (default 30)")
      ->check(real_range(0.1, 3600.0));
  cmd->add_option("--input-shape", o->shapes,
                  "NAME=D1,D2,...: shape of an input (needed for symbolic dimensions)");
  cmd->add_option("--tasks", o->tasks, "Tune only these tasks, as listed: e.g. 1,3 or 2-4");
  cmd->add_option("--early-stopping", o->early_stopping,
                  "Stop a task after N trials without improvement (default 0: never)")
      ->check(int_range(0, 1000000));
  cmd->add_option("--target", o->target, "Target, e.g. 'llvm -mcpu=native' (default)");
  cmd->add_option("--batch", o->batch, "Candidates proposed and measured per round (default 8)")
      ->check(int_range(1, 1024));
  cmd->add_option("--build-threads", o->build_threads, "Candidates compiled at once (default 2)")
      ->check(int_range(1, 256));
  cmd->add_option("--seed", o->seed, "Seed of the tuner (default 0)");
  cmd->add_option("--verify", o->verify,
                  "After each task, measure its N fastest configs and the default twice more "
                  "and keep the fastest by median (default 4; 0: off)")
      ->check(int_range(0, 1000000));
  cmd->add_option("--network-check", o->network_check,
                  "After tuning, time each workload's best configs, its default and its "
                  "runners-up inside the compiled model, this many rounds, and log those times; "
                  "compiling prefers them, each config by its fastest round (default 12; 0: "
                  "off)")
      ->check(int_range(0, 1000000));
  cmd->add_option("--fidelity", o->fidelity,
                  "Instead of tuning, time N configs of each task (the default and random ones) "
                  "alone and inside the model (--network-check rounds) and report their rank "
                  "correlation per task; the times go to the log")
      ->check(int_range(3, 1000));
  cmd->add_flag("--no-transfer", o->no_transfer,
                "xgb: do not warm-start the model with logged records of the model's other tasks");
  return {cmd, [o] { return tune_model(*o); }};
}

}  // namespace kiln::cli
