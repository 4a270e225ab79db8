// `kiln bench MODEL.onnx|DIR`: latency of a model. A model file (or builtin:NAME) is compiled
// first (the compile time is reported); a directory is loaded as a compiled module. Inputs are
// seeded random values; after --warmup untimed runs, --repeat runs are timed one by one and
// their median, min and max printed in milliseconds, and with --json written to a file along
// with the model, threads, compile time, kernel count and memory-plan bytes. --profile N then
// times every node over --repeat runs and prints the N slowest with their share of the total,
// and each one's roofline: its floating-point operations and argument bytes (graph.json's
// per-kernel `flops` and `bytes`, tir/cost.h) over its time, against the machine's fp32 FMA
// peak and copy bandwidth measured in the same run with the same thread count.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

/// The machine's roofline, measured now: an fp32 multiply-add loop (12 independent vector
/// accumulators, the widest vectors the CPU has: AVX-512, AVX2 + FMA, else scalar) and a
/// buffer copy (bytes read + written), on `threads` threads at once.
struct Roofline {
  double gflops = 0, gbs = 0;
};

// 12 independent multiply-add chains a = a·m + c over vectors of type V, in a function
// compiled for the vector extension (a macro: lambdas would not inherit the target attribute).
#define KILN_FMA_CHAINS(V, SET1, FMA, SUM)                                      \
  V a[12];                                                                      \
  for (int k = 0; k < 12; ++k) a[k] = SET1(0.1f * static_cast<float>(k + 1));   \
  const V m = SET1(0.9999f), c = SET1(0.0001f);                                 \
  for (int64_t i = 0; i < iters; ++i) {                                         \
    a[0] = FMA(a[0], m, c), a[1] = FMA(a[1], m, c), a[2] = FMA(a[2], m, c);     \
    a[3] = FMA(a[3], m, c), a[4] = FMA(a[4], m, c), a[5] = FMA(a[5], m, c);     \
    a[6] = FMA(a[6], m, c), a[7] = FMA(a[7], m, c), a[8] = FMA(a[8], m, c);     \
    a[9] = FMA(a[9], m, c), a[10] = FMA(a[10], m, c), a[11] = FMA(a[11], m, c); \
  }                                                                             \
  double r = 0;                                                                 \
  for (int k = 0; k < 12; ++k) r += SUM(a[k]);                                  \
  return r;

double fma_chains_scalar(int64_t iters) {
  auto set1 = [](float v) { return v; };
  auto sum = [](float v) { return static_cast<double>(v); };
  KILN_FMA_CHAINS(float, set1, std::fma, sum)
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) inline double lane_sum_256(__m256 v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
__attribute__((target("avx512f"))) inline double lane_sum_512(__m512 v) {
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  double r = 0;
  for (float x : f) r += x;
  return r;
}
__attribute__((target("avx512f"))) double fma_chains_512(int64_t iters) {
  KILN_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, lane_sum_512)
}
__attribute__((target("avx2,fma"))) double fma_chains_256(int64_t iters) {
  KILN_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, lane_sum_256)
}
#endif
#undef KILN_FMA_CHAINS

/// Seconds for `f` run on `threads` threads at once (best of 3).
template <typename F>
double best_parallel_seconds(int threads, F f) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { f(t); });
    for (std::thread& th : pool) th.join();
    best = std::min(best, ms_since(t0) / 1e3);
  }
  return best;
}

Roofline measure_roofline(int threads) {
  threads = std::max(1, threads);
  Roofline r;
  const int64_t iters = 4'000'000;
  int lanes = 1;
  double (*fma)(int64_t) = fma_chains_scalar;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    fma = fma_chains_512;
    lanes = 16;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    fma = fma_chains_256;
    lanes = 8;
  }
#endif
  std::vector<double> sink(static_cast<size_t>(threads));  // keeps the loops' results live
  double s = best_parallel_seconds(threads, [&](int t) { sink[t] = fma(iters); });
  volatile double keep = std::accumulate(sink.begin(), sink.end(), 0.0);
  (void)keep;
  r.gflops = 2.0 * 12 * lanes * static_cast<double>(iters) * threads / s / 1e9;
  const size_t bytes = size_t{64} << 20;  // per thread, far beyond the caches
  std::vector<std::vector<char>> src(threads, std::vector<char>(bytes, 1)),
      dst(threads, std::vector<char>(bytes, 0));
  s = best_parallel_seconds(threads,
                            [&](int t) { std::memcpy(dst[t].data(), src[t].data(), bytes); });
  r.gbs = 2.0 * static_cast<double>(bytes) * threads / s / 1e9;
  return r;
}

/// Per node index (graph.json's "nodes"; names need not be unique), its kernel's (flops, bytes)
/// from the node's attrs (0 when absent) and the implementation its kernel's master runs
/// ("impl": a template's name, or opaque.generic for the rule-based scheduler; "" when absent).
struct KernelInfo {
  double flops = 0, bytes = 0;
  std::string impl;
};
std::map<int, KernelInfo> kernel_infos(const nlohmann::json& j) {
  std::map<int, KernelInfo> r;
  if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array()) return r;
  int index = 0;
  for (const nlohmann::json& n : j["nodes"]) {
    const int i = index++;
    if (!n.is_object() || !n.contains("attrs") || !n["attrs"].is_object()) continue;
    const nlohmann::json& a = n["attrs"];
    auto num = [&](const char* k) {
      return a.contains(k) && a[k].is_number() ? a[k].get<double>() : 0.0;
    };
    KernelInfo& k = r[i];
    k.flops = num("flops");
    k.bytes = num("bytes");
    if (a.contains("impl") && a["impl"].is_string()) k.impl = a["impl"].get<std::string>();
  }
  return r;
}

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
  nlohmann::json graph_json;  // for the profile's roofline
  if (is_dir) {
    for (const std::string& f : o.compile_flags)
      KILN_ERROR << f << " applies to a model file, not to the compiled module '" << o.model << "'";
    ex = runtime::GraphExecutor::load(o.model);
    if (o.profile > 0) {
      std::ifstream gf(o.model + "/graph.json");
      graph_json = nlohmann::json::parse(gf, nullptr, /*allow_exceptions=*/false);
    }
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
      bopt.tuning_records = load_tuning_log(o.tuning_log);
      // The records measured with the thread count this benchmark runs with.
      bopt.tuning_threads = kiln_get_num_threads();
    }
    graph::CompiledModule m = graph::build_module(g, Target(o.target), bopt);
    double compile_ms = ms_since(t0);
    ex = executor_of(m, o.model);
    if (o.profile > 0)
      graph_json = nlohmann::json::parse(m.graph_json, nullptr, /*allow_exceptions=*/false);
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
    const Roofline roof = measure_roofline(threads);
    const std::map<int, KernelInfo> infos = kernel_infos(graph_json);
    std::printf(
        "roofline, measured now on %d thread(s): %.1f GFLOP/s fp32 multiply-add peak, %.1f GB/s "
        "copy bandwidth\n",
        threads, roof.gflops, roof.gbs);
    std::printf("profile over %d runs: %zu nodes, %.3f ms in kernels; the %d slowest:\n", o.repeat,
                nodes.size(), total, std::min<int>(o.profile, nodes.size()));
    std::printf("        time  share   GFLOP/s     GB/s  of roofline  node  (kernel, impl)\n");
    nlohmann::json prof = nlohmann::json::array();
    for (size_t k = 0; k < order.size(); ++k) {
      const runtime::NodeTime& n = nodes[order[k]];
      auto it = infos.find(n.node);
      const KernelInfo info = it != infos.end() ? it->second : KernelInfo{0, 0, "?"};
      const double flops = info.flops, bytes = info.bytes;
      const double sec = n.ms / 1e3;
      // The roofline's time for this kernel: its operations at the peak or its bytes at the
      // bandwidth, whichever takes longer; the share of it the kernel reaches.
      const double bound = std::max(flops / (roof.gflops * 1e9), bytes / (roof.gbs * 1e9));
      const double gflops = sec > 0 ? flops / sec / 1e9 : 0, gbs = sec > 0 ? bytes / sec / 1e9 : 0;
      const double frac = sec > 0 ? bound / sec : 0;
      if (static_cast<int>(k) < o.profile)
        std::printf("  %8.3f ms %5.1f%%  %8.2f %8.2f  %9.1f%%   %s  (%s, %s)\n", n.ms,
                    total > 0 ? 100 * n.ms / total : 0.0, gflops, gbs, 100 * frac, n.name.c_str(),
                    n.func_name.c_str(), info.impl.empty() ? "?" : info.impl.c_str());
      prof.push_back({{"name", n.name},
                      {"node", n.node},
                      {"func", n.func_name},
                      {"ms", n.ms},
                      {"flops", flops},
                      {"bytes", bytes},
                      {"roofline_fraction", frac},
                      {"impl", it != infos.end() ? info.impl : ""}});
    }
    report["profile"] = prof;
    report["roofline"] = {{"gflops", roof.gflops}, {"gbs", roof.gbs}, {"threads", threads}};
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
