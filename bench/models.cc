// kiln-bench-models: whole models end to end, Kiln against ONNX Runtime, PyTorch and Apache TVM
// in the same run. The five models of the end-to-end tests (resnet18, mobilenet_v2, the Nature
// DQN, the DCGAN generator, a 2-layer LSTM language model; batch 1, fp32) are exported by
// scripts/export_models.py into a cache directory when missing. For each model the benchmark
// imports and compiles it at the default opt level (fused) and at opt level 0 (one kernel per
// op), timing the compile, then measures every runtime in a fresh child process of its own at 1
// and 2 threads: Kiln's GraphExecutor (this binary re-executed with --child-run, which touches
// only the runtime's code), and each baseline through bench/baselines.py in the venv that
// scripts/setup-bench-env.sh makes. A child reports its latency (median and min of up to --reps
// runs after --warmup, bounded by --max-seconds) and its output's error against PyTorch's
// reference, and its peak resident memory (VmHWM of /proc/self/status, read at its end; wait4's
// ru_maxrss would count the parent's image the child was forked from), so every runtime is
// measured alike, Python's interpreter and framework included for the baselines.
// With --tuning-log, each model is also built with the log's best configs (`kiln tune`) and
// timed as "kiln tuned" in the same run: at N threads with the records tuned on N threads
// (`kiln tune --threads N`) when the log has them, else with the 1-thread records.
// Speedups are baseline median / Kiln median: above 1 means Kiln is faster. Processes run one at
// a time, so a busy period on a shared machine slows whichever runs then: --rounds N measures
// every runtime N times, alternating which side goes first, and reports the median of the
// rounds' medians and each round's ratio.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kiln/autotune/record.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/npy.h"
#include "kiln/runtime/thread_pool.h"
#include "kiln/support/error.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace bench = kiln::bench;
using kiln::runtime::NDArray;
using json = nlohmann::json;

const std::vector<std::string> kAllModels = {"resnet18", "mobilenet_v2", "dqn", "dcgan", "lstm_lm"};
const std::vector<std::string> kBaselines = {"ort", "torch", "tvm"};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, sep);)
    if (!x.empty()) r.push_back(x);
  return r;
}

/// max|a - b| / max|b| (infinity for a NaN, a size mismatch or an all-zero reference).
double relative_error(const NDArray& a, const NDArray& b) {
  if (a.numel() != b.numel() || a.dtype() != kiln::DataType::Float(32) ||
      b.dtype() != kiln::DataType::Float(32))
    return INFINITY;
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.data_as<float>()[i], y = b.data_as<float>()[i];
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    num = std::max(num, std::abs(x - y));
    den = std::max(den, std::abs(y));
  }
  return den > 0 ? num / den : INFINITY;
}

// ---------------------------------------------------------------------------------------------
// Child processes

/// A field of /proc/self/status in KiB ("VmRSS:" now, "VmHWM:" peak); 0 if unreadable.
long status_kb(const std::string& field) {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + field.size());
  return 0;
}

/// What a child printed (its last line, as JSON) and its peak resident memory.
struct ChildResult {
  json out;             ///< {"error": ...} when the child failed or printed no JSON
  double peak_mib = 0;  ///< ru_maxrss of the child
};

/// Runs `argv` (argv[0] a path) with `env_extra` added to the environment, stdout captured,
/// stderr to `log_path`; returns its last stdout line parsed as JSON and its peak RSS.
ChildResult run_child(const std::vector<std::string>& argv,
                      const std::vector<std::string>& env_extra, const std::string& log_path) {
  ChildResult r;
  int pipefd[2];
  if (pipe(pipefd) != 0) {
    r.out = {{"error", "pipe() failed"}};
    return r;
  }
  std::cout.flush();
  pid_t pid = fork();
  if (pid < 0) {
    r.out = {{"error", "fork() failed"}};
    return r;
  }
  if (pid == 0) {
    dup2(pipefd[1], 1);
    close(pipefd[0]);
    close(pipefd[1]);
    int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) dup2(log, 2);
    for (const std::string& e : env_extra) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "exec %s failed\n", args[0]);
    _exit(127);
  }
  close(pipefd[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) text.append(buf, n);
  close(pipefd[0]);
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  // The child's own VmHWM when it reports one: ru_maxrss would also count the image of this
  // process that the child was forked from, before its exec.
  r.peak_mib = ru.ru_maxrss / 1024.0;
  std::vector<std::string> lines = split(text, '\n');
  try {
    r.out = lines.empty() ? json() : json::parse(lines.back());
  } catch (const std::exception&) {
    r.out = json();
  }
  if (r.out.is_object() && r.out.contains("peak_rss_kb"))
    r.peak_mib = r.out["peak_rss_kb"].get<double>() / 1024.0;
  if (!r.out.is_object()) {
    std::string why = WIFEXITED(status)     ? "exit status " + std::to_string(WEXITSTATUS(status))
                      : WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                            : "no result";
    r.out = {{"error", why + " (see " + log_path + ")"}};
  } else if (r.out.contains("error")) {
    r.out["error"] = r.out["error"].get<std::string>() + " (see " + log_path + ")";
  }
  return r;
}

/// One runtime's rounds as one result: the median of the rounds' medians, the least minimum,
/// the largest peak memory; the first error if every round failed.
ChildResult merge_rounds(const std::vector<ChildResult>& rs) {
  std::vector<double> medians;
  double min_ms = INFINITY;
  ChildResult merged;
  for (const ChildResult& r : rs) {
    if (!r.out.contains("median_ms")) continue;
    if (medians.empty()) merged = r;
    medians.push_back(r.out["median_ms"].get<double>());
    min_ms = std::min(min_ms, r.out["min_ms"].get<double>());
    merged.peak_mib = std::max(merged.peak_mib, r.peak_mib);
  }
  if (medians.empty()) return rs.front();
  merged.out["median_ms"] = bench::median(medians);
  merged.out["min_ms"] = min_ms;
  merged.out["rounds"] = medians.size();
  return merged;
}

/// Baseline median / Kiln median of each round both measured.
std::vector<double> round_ratios(const std::vector<ChildResult>& kiln,
                                 const std::vector<ChildResult>& base) {
  std::vector<double> r;
  for (size_t i = 0; i < std::min(kiln.size(), base.size()); ++i)
    if (kiln[i].out.contains("median_ms") && base[i].out.contains("median_ms"))
      r.push_back(base[i].out["median_ms"].get<double>() / kiln[i].out["median_ms"].get<double>());
  return r;
}

/// --child-run: load a module directory, run it on the input, print timing and error as JSON.
int child_run(const bench::CommandLine& cl) {
  try {
    const long rss_start_kb = status_kb("VmRSS:");
    kiln::runtime::set_num_threads(static_cast<int32_t>(cl.get_int("--threads", 1)));
    auto ex = kiln::runtime::GraphExecutor::load(cl.get_string("--child-run", ""));
    NDArray input = kiln::runtime::load_npy(cl.get_string("--input", ""));
    NDArray ref = kiln::runtime::load_npy(cl.get_string("--ref", ""));
    ex.set_input(0, input);
    ex.run();
    double err = relative_error(ex.get_output(0), ref);
    const int warmup = static_cast<int>(cl.get_int("--warmup", 3));
    const int reps = static_cast<int>(cl.get_int("--reps", 20));
    const double max_ms = 1000.0 * static_cast<double>(cl.get_int("--max-seconds", 10));
    for (int i = 0; i < warmup; ++i) ex.run();
    std::vector<double> t;
    double start = bench::now_ms();
    while (static_cast<int>(t.size()) < reps &&
           (t.size() < 3 || bench::now_ms() - start < max_ms)) {
      double t0 = bench::now_ms();
      ex.run();
      t.push_back(bench::now_ms() - t0);
    }
    json j = {{"runtime", "kiln"},
              {"min_ms", *std::min_element(t.begin(), t.end())},
              {"median_ms", bench::median(t)},
              {"reps", t.size()},
              {"rel_error", err},
              {"rss_after_import_kb", rss_start_kb},
              {"peak_rss_kb", status_kb("VmHWM:")}};
    std::cout << j.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    std::cout << json{{"error", e.what()}}.dump() << "\n";
    return 3;
  }
}

// ---------------------------------------------------------------------------------------------
// The table

std::string ms_cell(const json& j) {
  if (!j.is_object() || !j.contains("median_ms")) return "-";
  return bench::fixed(j["median_ms"].get<double>(), 2) + " (" +
         bench::fixed(j["min_ms"].get<double>(), 2) + ")";
}

std::string ratio_cell(const json& kiln, const json& base) {
  if (!kiln.contains("median_ms") || !base.contains("median_ms")) return "-";
  return bench::fixed(base["median_ms"].get<double>() / kiln["median_ms"].get<double>(), 2) + "x";
}

std::string err_cell(const json& j) {
  if (!j.contains("rel_error")) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1e", j["rel_error"].get<double>());
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  bench::CommandLine cl(
      argc, argv,
      {{"--models", "comma-separated subset of resnet18,mobilenet_v2,dqn,dcgan,lstm_lm"},
       {"--threads", "comma-separated thread counts (default 1,2)"},
       {"--reps", "timed runs per measurement, at most (default 20)"},
       {"--warmup", "untimed runs before timing (default 3)"},
       {"--max-seconds", "stop timing a measurement after this many seconds (default 10)"},
       {"--baselines", "comma-separated subset of ort,torch,tvm, or none (default: all)"},
       {"--cache", "directory of exported models and compiled modules"},
       {"--python", "Python of the baselines (default SOURCE/.venv-bench/bin/python)"},
       {"--source", "Kiln's source tree (default: where this file was compiled from)"},
       {"--json", "write the result rows to this file"},
       {"--tuning-log", "also time each model built with this tuning log's configs (kiln tune)"},
       {"--rounds",
        "measure every runtime this many times, alternating, and report the median of the "
        "rounds' medians (default 1; more rounds average out a busy period on a shared "
        "machine)"},
       {"--no-O0", "1: skip the opt-level-0 build (the slowest to time)"},
       {"--child-run", "(internal) run this module directory and print JSON"},
       {"--input", "(internal) the input .npy of --child-run"},
       {"--ref", "(internal) the reference .npy of --child-run"}});
  if (cl.has("--child-run")) return child_run(cl);

  const fs::path source = cl.get_string("--source", fs::path(__FILE__).parent_path().parent_path());
  const fs::path self = fs::canonical("/proc/self/exe");
  const fs::path cache =
      cl.get_string("--cache", (self.parent_path().parent_path() / "models-bench"));
  std::string python = cl.get_string("--python", (source / ".venv-bench/bin/python").string());
  const std::vector<std::string> models =
      split(cl.get_string("--models", "resnet18,mobilenet_v2,dqn,dcgan,lstm_lm"), ',');
  std::vector<int> threads;
  for (const std::string& t : split(cl.get_string("--threads", "1,2"), ',')) {
    int n = std::atoi(t.c_str());
    if (n < 1) cl.fail("--threads: '" + t + "' is not a positive thread count");
    threads.push_back(n);
  }
  for (const std::string& m : models)
    if (std::find(kAllModels.begin(), kAllModels.end(), m) == kAllModels.end())
      cl.fail("unknown model '" + m + "'");
  const std::string reps = std::to_string(cl.get_int("--reps", 20));
  const std::string warmup = std::to_string(cl.get_int("--warmup", 3));
  const std::string max_s = std::to_string(cl.get_int("--max-seconds", 10));
  const int rounds = static_cast<int>(cl.get_int("--rounds", 1));
  if (rounds < 1) cl.fail("--rounds must be at least 1");
  const bool no_o0 = cl.get_int("--no-O0", 0) != 0;
  std::string bl = cl.get_string("--baselines", "ort,torch,tvm");
  // --tuning-log FILE: also build each model with the log's best configs ("kiln tuned").
  std::vector<kiln::autotune::Record> tuning_records;
  if (cl.has("--tuning-log")) {
    kiln::autotune::RecordLog log = kiln::autotune::load_records(cl.get_string("--tuning-log", ""));
    for (const std::string& w : log.warnings) std::cerr << "kiln-bench-models: " << w << "\n";
    tuning_records = std::move(log.records);
    if (tuning_records.empty()) cl.fail("--tuning-log: the log holds no records");
  }
  // The thread count of the records a tuned build running on nt threads uses: nt when the log
  // has records measured with nt threads (their target ends in "; threads=nt"), else 1.
  auto record_threads = [&](int nt) {
    for (const kiln::autotune::Record& r : tuning_records)
      if (kiln::autotune::split_target_threads(r.target).second == nt) return nt;
    return 1;
  };
  std::vector<std::string> baselines = bl == "none" ? std::vector<std::string>{} : split(bl, ',');
  for (const std::string& b : baselines)
    if (std::find(kBaselines.begin(), kBaselines.end(), b) == kBaselines.end())
      cl.fail("unknown baseline '" + b + "'");

  // The models, exported when missing (the script skips those up to date).
  fs::create_directories(cache);
  std::string list;
  for (const std::string& m : models) list += (list.empty() ? "" : ",") + m;
  std::string cmd = "/usr/bin/python3 '" + (source / "scripts/export_models.py").string() + "' '" +
                    cache.string() + "' --models " + list;
  std::cout << "kiln-bench-models: " << cmd << std::endl;
  if (std::system(cmd.c_str()) != 0) {
    std::cerr << "kiln-bench-models: exporting the models failed\n";
    return 1;
  }
  // Which baselines this Python can run.
  if (!baselines.empty()) {
    if (!fs::exists(python)) {
      std::cerr << "kiln-bench-models: no " << python
                << " (run scripts/setup-bench-env.sh); using /usr/bin/python3\n";
      python = "/usr/bin/python3";
    }
    ChildResult avail =
        run_child({python, (source / "bench/baselines.py").string(), "--runtime", "list"}, {},
                  (cache / "baselines-list.log").string());
    std::vector<std::string> kept;
    for (const std::string& b : baselines) {
      if (avail.out.contains(b) && avail.out[b] == true)
        kept.push_back(b);
      else
        std::cout << "baseline " << b << " unavailable: "
                  << (avail.out.contains(b) ? avail.out[b].dump() : avail.out.dump()) << "\n";
    }
    baselines = kept;
  }
  std::cout << "CPU threads available: " << std::thread::hardware_concurrency()
            << "; timings: median (min) ms of up to " << reps << " runs after " << warmup
            << " warm-up runs\n\n";

  bench::Table lat({"model", "thr", "kiln", "kiln -O0", "kiln tuned", "ort", "torch", "tvm",
                    "vs ort", "vs torch", "vs tvm", "vs -O0", "tuned vs ort", "tuned vs torch",
                    "kiln err"});
  bench::Table other({"model", "kiln compile s", "-O0 compile s", "kernels", "-O0 kernels",
                      "ort init s", "torch jit s", "tvm compile s", "peak MiB kiln", "kiln -O0",
                      "ort", "torch", "tvm"});
  std::vector<nlohmann::ordered_json> rows;
  for (const std::string& m : models) {
    std::cout << "== " << m << std::endl;
    const std::string onnx = (cache / (m + ".onnx")).string();
    const std::string input = (cache / (m + ".input.npy")).string();
    const std::string ref = (cache / (m + ".ref.npy")).string();
    // Compile: import + build + save, at the default level and at 0.
    // Variants: the default build, opt level 0, and (with --tuning-log) the tuned build.
    // The tuned build uses the records measured with the thread count it runs with (kiln tune
    // --threads N), else the 1-thread ones: one tuned variant per record thread count needed.
    struct Variant {
      std::string key;
      int opt_level;
      bool tuned = false;
      int tuning_threads = 1;
      std::string dir, error;
      double compile_s = 0;
      int kernels = 0;
    };
    std::vector<Variant> variants = {{"kiln", kiln::graph::BuildOptions{}.opt_level},
                                     {"kiln-O0", 0}};
    if (no_o0) variants[1].error = "skipped (--no-O0)";
    if (!tuning_records.empty()) {
      std::set<int> counts;
      for (int nt : threads) counts.insert(record_threads(nt));
      for (int c : counts)
        variants.push_back({"kiln-tuned", kiln::graph::BuildOptions{}.opt_level, true, c});
    }
    for (Variant& v : variants) {
      if (!v.error.empty()) continue;
      v.dir = (cache / (m +
                        (v.tuned ? "_tuned_t" + std::to_string(v.tuning_threads)
                                 : "_O" + std::to_string(v.opt_level)) +
                        ".kiln"))
                  .string();
      double t0 = bench::now_ms();
      try {
        kiln::graph::Graph g = kiln::frontend::import_onnx(onnx);
        kiln::graph::BuildOptions opt;
        opt.opt_level = v.opt_level;
        if (v.tuned) {
          opt.tuning_records = tuning_records;
          opt.tuning_threads = v.tuning_threads;
        }
        kiln::graph::CompiledModule cm =
            kiln::graph::compile_to_directory(g, kiln::Target::host(), opt, v.dir);
        v.kernels = cm.num_kernels;
        v.compile_s = (bench::now_ms() - t0) / 1e3;
        std::cout << "  " << v.key
                  << (v.tuned ? " (" + std::to_string(v.tuning_threads) + "-thread records)" : "")
                  << " (-O" << v.opt_level << ") compile " << bench::fixed(v.compile_s, 2) << " s, "
                  << v.kernels << " kernels"
                  << (v.tuned && !cm.tuning_report.empty() ? "; " + cm.tuning_report[0] : "")
                  << std::endl;
      } catch (const std::exception& e) {
        v.error = e.what();
        std::cout << "  kiln -O" << v.opt_level << " compile failed: " << v.error << std::endl;
      }
    }
    std::map<std::string, ChildResult> peak_at_1;  // memory column: the first thread count
    std::map<std::string, json> compile_of;
    for (int nt : threads) {
      // Every runtime once per round; odd rounds run the baselines first, so that neither side
      // always follows the other's warm-up of the machine.
      std::map<std::string, std::vector<ChildResult>> by_round;
      for (int round = 0; round < rounds; ++round) {
        auto run_kiln = [&] {
          for (const Variant& v : variants) {
            if (!v.error.empty() || (v.tuned && v.tuning_threads != record_threads(nt))) continue;
            by_round[v.key].push_back(run_child(
                {self.string(), "--child-run", v.dir, "--input", input, "--ref", ref, "--threads",
                 std::to_string(nt), "--reps", reps, "--warmup", warmup, "--max-seconds", max_s},
                {"KILN_NUM_THREADS=" + std::to_string(nt)},
                (cache / (m + "." + v.key + ".t" + std::to_string(nt) + ".log")).string()));
          }
        };
        auto run_baselines = [&] {
          for (const std::string& b : baselines) {
            ChildResult r = run_child(
                {python, (source / "bench/baselines.py").string(), "--runtime", b, "--models-dir",
                 cache.string(), "--model", m, "--threads", std::to_string(nt), "--reps", reps,
                 "--warmup", warmup, "--max-seconds", max_s},
                {"OMP_NUM_THREADS=" + std::to_string(nt), "TVM_NUM_THREADS=" + std::to_string(nt)},
                (cache / (m + "." + b + ".t" + std::to_string(nt) + ".log")).string());
            if (r.out.contains("compile_ms")) compile_of[b] = r.out;
            by_round[b].push_back(std::move(r));
          }
        };
        if (round % 2 == 0) {
          run_kiln();
          run_baselines();
        } else {
          run_baselines();
          run_kiln();
        }
      }
      std::map<std::string, ChildResult> res;
      for (const Variant& v : variants)
        if (!v.error.empty()) res[v.key].out = {{"error", v.error}};
      for (auto& [k, rs] : by_round) res[k] = merge_rounds(rs);
      if (rounds > 1) {
        for (const char* k : {"kiln", "kiln-tuned"}) {
          if (!by_round.count(k)) continue;
          for (const std::string& b : baselines) {
            std::vector<double> ratios = round_ratios(by_round[k], by_round[b]);
            if (ratios.empty()) continue;
            std::cout << "  " << nt << " thr " << b << " / " << k << " per round:";
            for (double r : ratios) std::cout << " " << bench::fixed(r, 2);
            std::cout << " (median " << bench::fixed(bench::median(ratios), 2) << ")\n";
          }
        }
      }
      for (auto& [k, r] : res) {
        std::cout << "  " << nt << " thr " << k << ": ";
        if (r.out.contains("error"))
          std::cout << "error: " << r.out["error"].get<std::string>() << "\n";
        else
          std::cout << ms_cell(r.out) << " ms, err " << err_cell(r.out) << ", peak "
                    << bench::fixed(r.peak_mib, 0) << " MiB"
                    << (r.out.contains("variant") ? ", " + r.out["variant"].get<std::string>() : "")
                    << "\n";
      }
      std::cout.flush();
      auto get = [&](const std::string& k) { return res.count(k) ? res[k].out : json::object(); };
      const json kj = get("kiln");
      const json tj = get("kiln-tuned");
      lat.add_row({m, std::to_string(nt), ms_cell(kj), ms_cell(get("kiln-O0")), ms_cell(tj),
                   ms_cell(get("ort")), ms_cell(get("torch")), ms_cell(get("tvm")),
                   ratio_cell(kj, get("ort")), ratio_cell(kj, get("torch")),
                   ratio_cell(kj, get("tvm")), ratio_cell(kj, get("kiln-O0")),
                   ratio_cell(tj, get("ort")), ratio_cell(tj, get("torch")), err_cell(kj)});
      if (peak_at_1.empty()) peak_at_1 = res;
      // JSON row (bench_util.h conventions).
      bench::Timing kt;
      if (kj.contains("median_ms")) {
        kt.min_ms = kj["min_ms"];
        kt.median_ms = kj["median_ms"];
      }
      std::vector<std::pair<std::string, double>> meds;
      for (const std::string& b :
           std::vector<std::string>{"kiln-O0", "kiln-tuned", "ort", "torch", "tvm"})
        if (get(b).contains("median_ms"))
          meds.push_back({b == "kiln-O0"      ? "kiln_O0"
                          : b == "kiln-tuned" ? "kiln_tuned"
                                              : b,
                          get(b)["median_ms"]});
      nlohmann::ordered_json row = bench::make_row(m, nt, kt, meds);
      row["kiln_compile_s"] = variants[0].compile_s;
      row["kiln_O0_compile_s"] = variants[1].compile_s;
      for (auto& [k, r] : res) {
        std::string name = k == "kiln-O0" ? "kiln_O0" : k == "kiln-tuned" ? "kiln_tuned" : k;
        row[name + "_peak_mib"] = r.peak_mib;
        if (r.out.contains("rel_error")) row[name + "_rel_error"] = r.out["rel_error"];
        if (r.out.contains("error")) row[name + "_error"] = r.out["error"];
      }
      rows.push_back(row);
    }
    auto secs = [&](const std::string& b) {
      return compile_of.count(b) ? bench::fixed(compile_of[b]["compile_ms"].get<double>() / 1e3, 2)
                                 : std::string("-");
    };
    // "total (growth)": the growth is the peak minus the resident size of the started,
    // model-less process (for Python, after importing the framework).
    auto peak = [&](const std::string& k) {
      if (!peak_at_1.count(k) || !peak_at_1[k].out.contains("median_ms")) return std::string("-");
      const ChildResult& r = peak_at_1[k];
      double base = r.out.value("rss_after_import_kb", 0.0) / 1024.0;
      return bench::fixed(r.peak_mib, 0) + " (" + bench::fixed(r.peak_mib - base, 0) + ")";
    };
    other.add_row({m, variants[0].error.empty() ? bench::fixed(variants[0].compile_s, 2) : "fail",
                   variants[1].error.empty() ? bench::fixed(variants[1].compile_s, 2)
                   : no_o0                   ? "-"
                                             : "fail",
                   std::to_string(variants[0].kernels),
                   variants[1].error.empty() ? std::to_string(variants[1].kernels) : "-",
                   secs("ort"), secs("torch"), secs("tvm"), peak("kiln"), peak("kiln-O0"),
                   peak("ort"), peak("torch"), peak("tvm")});
  }
  std::cout << "\nLatency, ms: median (min); vs X = X median / Kiln median (>1: Kiln faster); "
               "kiln err = max|kiln - torch| / max|torch|\n";
  lat.print(std::cout);
  std::cout << "\nCompile / set-up time (s) and peak resident memory, MiB, at " << threads[0]
            << " thread(s): whole process (growth over the started process before loading the "
               "model; for Python, after importing the framework)\n";
  other.print(std::cout);
  bench::write_json_rows(cl.get_string("--json", ""), rows);
  return 0;
}
