// `kiln bench MODEL.onnx|DIR`: latency of a model. A model file (or builtin:NAME) is compiled
// first (the compile time is reported); a directory is loaded as a compiled module. Inputs are
// seeded random values; after --warmup untimed runs, --repeat runs are timed one by one and
// their median, min and max printed in milliseconds, and with --json written to a file along
// with the model, threads, compile time, kernel count and memory-plan bytes. --profile N then
// times every node over --repeat runs and prints the N slowest with their share of the total.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_common.h"
#include "kiln/autotune/record.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/support/error.h"
#include "kiln/target/target.h"

namespace kiln::cli {

namespace {

struct BenchOptions {
  std::string model, json_path, target = "llvm -mcpu=native";
  std::string tuning_log;
  int threads = 0, repeat = 10, warmup = 2, opt_level = 2, profile = 0;
  unsigned seed = 0;
  std::vector<std::string> shapes;
  std::vector<std::string> compile_flags;  ///< compile options given (an error for a directory)
};

/// Number of distinct functions the module directory's graph.json calls.
int kernels_of_directory(const std::string& dir) {
  std::string path = dir + "/graph.json";
  std::ifstream f(path);
  KILN_USER_CHECK(f.good()) << "cannot read '" << path << "'";
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  KILN_USER_CHECK(j.is_object() && j.contains("nodes") && j["nodes"].is_array())
      << "'" << path << "' is not a module graph";
  std::set<std::string> funcs;
  for (const nlohmann::json& n : j["nodes"])
    if (n.contains("attrs") && n["attrs"].contains("func_name"))
      funcs.insert(n["attrs"]["func_name"].get<std::string>());
  return static_cast<int>(funcs.size());
}

int bench(const BenchOptions& o) {
  apply_threads(o.threads);
  std::error_code ec;
  bool is_dir = std::filesystem::is_directory(o.model, ec);
  nlohmann::json report;
  report["model"] = o.model;
  runtime::GraphExecutor ex;
  if (is_dir) {
    for (const std::string& f : o.compile_flags)
      KILN_ERROR << f << " applies to a model file, not to the compiled module '" << o.model << "'";
    ex = runtime::GraphExecutor::load(o.model);
    report["compile_ms"] = nullptr;
    report["kernels"] = kernels_of_directory(o.model);
    report["opt_level"] = nullptr;
    std::printf("module %s: %d kernels, %s of storage\n", o.model.c_str(),
                report["kernels"].get<int>(), bytes_str(ex.storage_bytes()).c_str());
  } else {
    auto t0 = Clock::now();
    graph::Graph g = load_model(o.model, o.shapes);
    graph::BuildOptions bopt;
    bopt.opt_level = o.opt_level;
    if (!o.tuning_log.empty()) {
      KILN_USER_CHECK(std::filesystem::is_regular_file(o.tuning_log))
          << "--tuning-log '" << o.tuning_log << "': no such file";
      bopt.tuning_records = autotune::load_records(o.tuning_log).records;
      // The records measured with the thread count this benchmark runs with.
      bopt.tuning_threads = kiln_get_num_threads();
    }
    graph::CompiledModule m = graph::build_module(g, Target(o.target), bopt);
    double compile_ms = ms_since(t0);
    ex = executor_of(m, o.model);
    report["compile_ms"] = compile_ms;
    report["kernels"] = m.num_kernels;
    report["opt_level"] = o.opt_level;
    std::printf("compiled %s in %.0f ms (opt-level %d): %d kernels; %s\n", o.model.c_str(),
                compile_ms, o.opt_level, m.num_kernels, memory_summary(m).c_str());
    for (const std::string& line : m.tuning_report) std::printf("%s\n", line.c_str());
  }
  report["memory_plan_bytes"] = ex.storage_bytes();
  set_random_inputs(ex, o.seed);
  Latency l = time_runs(ex, o.warmup, o.repeat);
  int threads = kiln_get_num_threads();
  std::printf(
      "latency over %d runs (%d warm-up), %d thread(s): median %.3f ms, min %.3f ms, "
      "max %.3f ms\n",
      l.repeat, o.warmup, threads, l.median, l.min, l.max);
  if (o.profile > 0) {
    std::vector<runtime::NodeTime> nodes = ex.profile(o.repeat);
    double total = 0;
    for (const runtime::NodeTime& n : nodes) total += n.ms;
    std::vector<size_t> order(nodes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return nodes[a].ms > nodes[b].ms; });
    std::printf("profile over %d runs: %zu nodes, %.3f ms in kernels; the %d slowest:\n", o.repeat,
                nodes.size(), total, std::min<int>(o.profile, nodes.size()));
    nlohmann::json prof = nlohmann::json::array();
    for (size_t k = 0; k < order.size(); ++k) {
      const runtime::NodeTime& n = nodes[order[k]];
      if (static_cast<int>(k) < o.profile)
        std::printf("  %8.3f ms %5.1f%%  %s  (%s)\n", n.ms, total > 0 ? 100 * n.ms / total : 0.0,
                    n.name.c_str(), n.func_name.c_str());
      prof.push_back({{"name", n.name}, {"func", n.func_name}, {"ms", n.ms}});
    }
    report["profile"] = prof;
  }
  if (!o.json_path.empty()) {
    report["threads"] = threads;
    report["repeat"] = l.repeat;
    report["warmup"] = o.warmup;
    report["seed"] = o.seed;
    report["median_ms"] = l.median;
    report["min_ms"] = l.min;
    report["max_ms"] = l.max;
    std::ofstream f(o.json_path, std::ios::trunc);
    KILN_USER_CHECK(f.good()) << "--json: cannot write '" << o.json_path << "'";
    f << report.dump(2) << "\n";
    f.close();
    KILN_USER_CHECK(f.good()) << "--json: cannot write '" << o.json_path << "'";
    std::cout << "wrote " << o.json_path << "\n";
  }
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Latency (median / min / max ms) of a model file or a compiled module directory");
  cmd->add_option("model", o->model, std::string(kModelHelp) + "; or a module directory")
      ->required();
  add_threads_option(cmd, o->threads);
  cmd->add_option("--repeat", o->repeat, "Timed runs (default 10)")->check(int_range(1, 1000000));
  cmd->add_option("--warmup", o->warmup, "Untimed runs first (default 2)")
      ->check(int_range(0, 1000000));
  cmd->add_option("--json", o->json_path, "Also write the results to this JSON file");
  cmd->add_option("--opt-level", o->opt_level, "0: no graph optimization; 1-3: optimize")
      ->check(int_range(0, 3));
  cmd->add_option("--target", o->target, "Target, e.g. 'llvm -mcpu=native' (default)");
  cmd->add_option("--input-shape", o->shapes,
                  "NAME=D1,D2,...: shape of an input (needed for symbolic dimensions)");
  cmd->add_option("--seed", o->seed, "Seed of the random inputs (default 0)");
  cmd->add_option("--profile", o->profile,
                  "Then time every node over --repeat runs and print the N slowest")
      ->check(int_range(1, 1000000));
  cmd->add_option("--tuning-log", o->tuning_log,
                  "Use the best config of each workload in this `kiln tune` log (the records "
                  "tuned with --threads threads)");
  return {cmd, [o, cmd] {
            for (const char* f : {"--opt-level", "--target", "--input-shape", "--tuning-log"})
              if (cmd->count(f)) o->compile_flags.push_back(f);
            return bench(*o);
          }};
}

}  // namespace kiln::cli
