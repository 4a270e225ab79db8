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
//
// The zoo (--zoo 1, the default of kiln-bench-zoo, the same source built with
// KILN_BENCH_ZOO_DEFAULT=1; issue 27): the models of bench/zoo/export_zoo.py instead, i.e. sixteen
// models chosen for their operator families (torchvision CNNs and vision transformers, a
// BERT-base encoder, a GPT-2 decoder stack) plus the five above, against ONNX Runtime only by
// default, without the opt-level-0 build. It ends with a summary table: per model Kiln's and the
// baseline's medians, their ratio, the compile time and whether the model failed (export,
// import/compile, run, or a result off PyTorch's by more than 1e-4), and the geometric mean of the
// ratios per thread count. Every compile runs in a child process of its own (this binary with
// --child-compile) and every child under --timeout, so a model that crashes or hangs the compiler
// is reported with its error and counted, and the others still run.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
#include "kiln/support/allocator.h"
#include "kiln/support/error.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace bench = kiln::bench;
using kiln::runtime::NDArray;
using json = nlohmann::json;

#ifndef KILN_BENCH_ZOO_DEFAULT
#define KILN_BENCH_ZOO_DEFAULT 0
#endif

const std::vector<std::string> kPaperModels = {"resnet18", "mobilenet_v2", "dqn", "dcgan",
                                               "lstm_lm"};
/// A Kiln result off PyTorch's by more than this (max|kiln - torch| / max|torch|) is reported as
/// wrong in the summary (the end-to-end tests' tolerance).
constexpr double kMaxRelError = 1e-4;
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
/// stderr to `log_path`; returns its last stdout line parsed as JSON and its peak RSS. A child
/// still running after `timeout_s` seconds (0: no limit) is killed by SIGALRM and reported so.
ChildResult run_child(const std::vector<std::string>& argv,
                      const std::vector<std::string>& env_extra, const std::string& log_path,
                      unsigned timeout_s = 0) {
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
    if (timeout_s > 0) alarm(timeout_s);  // survives execv; SIGALRM's default action kills
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
    std::string why = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                      : WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM && timeout_s > 0
                          ? "timed out after " + std::to_string(timeout_s) + " s (--timeout)"
                      : WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status)) + " (" +
                                                  strsignal(WTERMSIG(status)) + ")"
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

/// --child-compile: import an ONNX file and compile it into the module directory --out (the
/// default build, or --opt-level, or with --tuning-log's records tuned on --tuning-threads
/// threads); print the time (import included), the kernel count and the first line of the
/// tuning report as JSON.
int child_compile(const bench::CommandLine& cl) {
  kiln::support::keep_freed_memory();  // as `kiln compile`
  try {
    const double t0 = bench::now_ms();
    kiln::graph::Graph g = kiln::frontend::import_onnx(cl.get_string("--child-compile", ""));
    kiln::graph::BuildOptions opt;
    opt.opt_level = static_cast<int>(cl.get_int("--opt-level", opt.opt_level));
    if (cl.has("--tuning-log")) {
      opt.tuning_records = kiln::autotune::load_records(cl.get_string("--tuning-log", "")).records;
      opt.tuning_threads = static_cast<int>(cl.get_int("--tuning-threads", 1));
    }
    kiln::graph::CompiledModule cm =
        kiln::graph::compile_to_directory(g, kiln::Target::host(), opt, cl.get_string("--out", ""));
    json j = {{"compile_s", (bench::now_ms() - t0) / 1e3},
              {"kernels", cm.num_kernels},
              {"peak_rss_kb", status_kb("VmHWM:")}};
    if (!cm.tuning_report.empty()) j["tuning_report"] = cm.tuning_report[0];
    std::cout << j.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    std::cout << json{{"error", e.what()}}.dump() << "\n";
    return 3;
  }
}

// ---------------------------------------------------------------------------------------------
// The tables

/// Prints a table, leaving out the columns (after the first) whose cells are all "-": the
/// runtimes and variants this run did not measure.
void print_table(std::ostream& os, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> keep;
  for (size_t c = 0; c < header.size(); ++c) {
    bool any = c == 0;
    for (const auto& r : rows) any = any || (c < r.size() && r[c] != "-");
    if (any) keep.push_back(c);
  }
  auto pick = [&](const std::vector<std::string>& r) {
    std::vector<std::string> out;
    for (size_t c : keep) out.push_back(c < r.size() ? r[c] : "-");
    return out;
  };
  bench::Table t(pick(header));
  for (const auto& r : rows) t.add_row(pick(r));
  t.print(os);
}

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
      {{"--zoo", "1: the model zoo of bench/zoo/export_zoo.py (default " +
                     std::to_string(KILN_BENCH_ZOO_DEFAULT) +
                     "); its defaults: --baselines ort --no-O0 1 --compile-threads 1 --cache "
                     "BUILD/models-zoo"},
       {"--models",
        "comma-separated subset of the models: resnet18,mobilenet_v2,dqn,dcgan,lstm_lm, or with "
        "--zoo 1 those of `bench/zoo/export_zoo.py --list`"},
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
       {"--compile-threads",
        "threads of Kiln's code generation (KILN_COMPILE_THREADS; default: all cores, 1 with "
        "--zoo 1)"},
       {"--timeout", "seconds before a compile or timing child is killed (default 1200)"},
       {"--child-run", "(internal) run this module directory and print JSON"},
       {"--child-compile", "(internal) compile this ONNX file into --out and print JSON"},
       {"--out", "(internal) the module directory of --child-compile"},
       {"--opt-level", "(internal) the opt level of --child-compile"},
       {"--tuning-threads", "(internal) the tuning records' thread count of --child-compile"},
       {"--input", "(internal) the input .npy of --child-run"},
       {"--ref", "(internal) the reference .npy of --child-run"}});
  if (cl.has("--child-run")) return child_run(cl);
  if (cl.has("--child-compile")) return child_compile(cl);

    // The source tree: KILN_SOURCE_DIR from CMake where set (ccache's base_dir turns __FILE__
    // into a path relative to the build directory), else this file's grandparent.
#ifdef KILN_SOURCE_DIR
  const fs::path default_source = KILN_SOURCE_DIR;
#else
  const fs::path default_source = fs::path(__FILE__).parent_path().parent_path();
#endif
  const fs::path source = cl.get_string("--source", default_source);
  const fs::path self = fs::canonical("/proc/self/exe");
  const bool zoo = cl.get_int("--zoo", KILN_BENCH_ZOO_DEFAULT) != 0;
  const std::string tool = zoo ? "kiln-bench-zoo" : "kiln-bench-models";
  const fs::path cache = cl.get_string(
      "--cache", (self.parent_path().parent_path() / (zoo ? "models-zoo" : "models-bench")));
  std::string python = cl.get_string("--python", (source / ".venv-bench/bin/python").string());
  const fs::path exporter = source / (zoo ? "bench/zoo/export_zoo.py" : "scripts/export_models.py");
  // The known models: the paper's five, or the zoo's as its exporter lists them.
  std::vector<std::string> all_models = kPaperModels;
  if (zoo) {
    std::string listing;
    if (FILE* p = popen(("/usr/bin/python3 '" + exporter.string() + "' --list").c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) listing.append(buf, n);
      if (pclose(p) != 0) listing.clear();
    }
    all_models = split(listing.substr(0, listing.find('\n')), ',');
    if (all_models.empty()) {
      std::cerr << tool << ": '" << exporter.string() << " --list' failed\n";
      return 1;
    }
  }
  std::string all_list;
  for (const std::string& m : all_models) all_list += (all_list.empty() ? "" : ",") + m;
  const std::vector<std::string> models = split(cl.get_string("--models", all_list), ',');
  std::vector<int> threads;
  for (const std::string& t : split(cl.get_string("--threads", "1,2"), ',')) {
    int n = std::atoi(t.c_str());
    if (n < 1) cl.fail("--threads: '" + t + "' is not a positive thread count");
    threads.push_back(n);
  }
  for (const std::string& m : models)
    if (std::find(all_models.begin(), all_models.end(), m) == all_models.end())
      cl.fail("unknown model '" + m + "' (known: " + all_list + ")");
  const std::string reps = std::to_string(cl.get_int("--reps", 20));
  const std::string warmup = std::to_string(cl.get_int("--warmup", 3));
  const std::string max_s = std::to_string(cl.get_int("--max-seconds", 10));
  const int rounds = static_cast<int>(cl.get_int("--rounds", 1));
  if (rounds < 1) cl.fail("--rounds must be at least 1");
  const bool no_o0 = cl.get_int("--no-O0", zoo ? 1 : 0) != 0;
  const unsigned timeout_s = static_cast<unsigned>(cl.get_int("--timeout", 1200));
  // Code generation threads of the compile children (KILN_COMPILE_THREADS): "" = all cores.
  const std::string compile_threads = cl.has("--compile-threads")
                                          ? std::to_string(cl.get_int("--compile-threads", 1))
                                      : zoo ? "1"
                                            : "";
  std::string bl = cl.get_string("--baselines", zoo ? "ort" : "ort,torch,tvm");
  // --tuning-log FILE: also build each model with the log's best configs ("kiln tuned").
  std::vector<kiln::autotune::Record> tuning_records;
  if (cl.has("--tuning-log")) {
    kiln::autotune::RecordLog log = kiln::autotune::load_records(cl.get_string("--tuning-log", ""));
    for (const std::string& w : log.warnings) std::cerr << tool << ": " << w << "\n";
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
  std::string cmd =
      "/usr/bin/python3 '" + exporter.string() + "' '" + cache.string() + "' --models " + list;
  std::cout << tool << ": " << cmd << std::endl;
  // A model that fails to export is reported in its row below (its .onnx is missing).
  if (std::system(cmd.c_str()) != 0)
    std::cerr << tool << ": exporting some of the models failed (see above)\n";
  // Which baselines this Python can run.
  if (!baselines.empty()) {
    if (!fs::exists(python)) {
      std::cerr << tool << ": no " << python
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

  const std::vector<std::string> lat_header = {
      "model",  "thr",    "kiln",         "kiln -O0",       "kiln tuned",
      "ort",    "torch",  "tvm",          "vs ort",         "vs torch",
      "vs tvm", "vs -O0", "tuned vs ort", "tuned vs torch", "kiln err"};
  const std::vector<std::string> other_header = {
      "model",       "kiln compile s", "-O0 compile s", "kernels",  "-O0 kernels", "ort init s",
      "torch jit s", "tvm compile s",  "peak MiB kiln", "kiln -O0", "ort",         "torch",
      "tvm"};
  std::vector<std::vector<std::string>> lat, other;
  // The summary against the first baseline: per model and thread count, and the failures.
  const std::string base0 = baselines.empty() ? "" : baselines[0];
  std::vector<std::vector<std::string>> summary;
  std::map<int, std::vector<std::pair<std::string, double>>> ratios_at;  // threads -> (model, r)
  std::vector<std::string> failures;  // "model: what failed: error"
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
      if (!fs::exists(onnx)) {
        v.error = "export failed (no " + onnx + ")";
        std::cout << "  " << v.error << std::endl;
        continue;
      }
      // In a child process: a compiler crash or hang costs this variant, not the benchmark.
      std::vector<std::string> args = {
          self.string(), "--child-compile",          onnx, "--out", v.dir,
          "--opt-level", std::to_string(v.opt_level)};
      if (v.tuned) {
        args.insert(args.end(), {"--tuning-log", cl.get_string("--tuning-log", ""),
                                 "--tuning-threads", std::to_string(v.tuning_threads)});
      }
      std::vector<std::string> env;
      if (!compile_threads.empty()) env.push_back("KILN_COMPILE_THREADS=" + compile_threads);
      ChildResult c = run_child(
          args, env,
          (cache / (m + "." + v.key + ".t" + std::to_string(v.tuning_threads) + ".compile.log"))
              .string(),
          timeout_s);
      if (!c.out.contains("compile_s")) {
        v.error = c.out.value("error", std::string("no result"));
        std::cout << "  " << v.key << " (-O" << v.opt_level << ") compile failed: " << v.error
                  << std::endl;
        continue;
      }
      v.kernels = c.out["kernels"].get<int>();
      v.compile_s = c.out["compile_s"].get<double>();
      std::cout << "  " << v.key
                << (v.tuned ? " (" + std::to_string(v.tuning_threads) + "-thread records)" : "")
                << " (-O" << v.opt_level << ") compile " << bench::fixed(v.compile_s, 2) << " s, "
                << v.kernels << " kernels, peak " << bench::fixed(c.peak_mib, 0) << " MiB"
                << (c.out.contains("tuning_report")
                        ? "; " + c.out["tuning_report"].get<std::string>()
                        : "")
                << std::endl;
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
                (cache / (m + "." + v.key + ".t" + std::to_string(nt) + ".log")).string(),
                timeout_s));
          }
        };
        auto run_baselines = [&] {
          for (const std::string& b : baselines) {
            ChildResult r = run_child(
                {python, (source / "bench/baselines.py").string(), "--runtime", b, "--models-dir",
                 cache.string(), "--model", m, "--threads", std::to_string(nt), "--reps", reps,
                 "--warmup", warmup, "--max-seconds", max_s},
                {"OMP_NUM_THREADS=" + std::to_string(nt), "TVM_NUM_THREADS=" + std::to_string(nt)},
                (cache / (m + "." + b + ".t" + std::to_string(nt) + ".log")).string(), timeout_s);
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
        if (k == "kiln-O0" && no_o0) continue;  // not built (--no-O0)
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
      lat.push_back({m, std::to_string(nt), ms_cell(kj), ms_cell(get("kiln-O0")), ms_cell(tj),
                     ms_cell(get("ort")), ms_cell(get("torch")), ms_cell(get("tvm")),
                     ratio_cell(kj, get("ort")), ratio_cell(kj, get("torch")),
                     ratio_cell(kj, get("tvm")), ratio_cell(kj, get("kiln-O0")),
                     ratio_cell(tj, get("ort")), ratio_cell(tj, get("torch")), err_cell(kj)});
      // Status: the first thing that failed (each failure listed once, at the first thread
      // count), else whether Kiln's result is off PyTorch's.
      std::string status = "ok";
      auto fail = [&](const std::string& what, const std::string& err) {
        if (status == "ok") status = what;
        if (nt == threads[0]) failures.push_back(m + ": " + what + ": " + err);
      };
      if (!variants[0].error.empty()) {
        fail(variants[0].error.rfind("export failed", 0) == 0 ? "export failed" : "compile failed",
             variants[0].error);
      } else if (kj.contains("error")) {
        fail("run failed", kj["error"].get<std::string>());
      } else if (kj.contains("rel_error") && !(kj["rel_error"].get<double>() < kMaxRelError)) {
        fail("wrong result", "max|kiln - torch| / max|torch| = " + err_cell(kj));
      }
      if (!base0.empty() && get(base0).contains("error") && variants[0].error.empty())
        fail(base0 + " failed", get(base0)["error"].get<std::string>());
      if (!base0.empty() && kj.contains("median_ms") && get(base0).contains("median_ms"))
        ratios_at[nt].push_back(
            {m, get(base0)["median_ms"].get<double>() / kj["median_ms"].get<double>()});
      summary.push_back({m, std::to_string(nt), ms_cell(kj),
                         base0.empty() ? "-" : ms_cell(get(base0)),
                         base0.empty() ? "-" : ratio_cell(kj, get(base0)),
                         variants[0].error.empty() ? bench::fixed(variants[0].compile_s, 2) : "-",
                         variants[0].error.empty() ? std::to_string(variants[0].kernels) : "-",
                         err_cell(kj), status});
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
      row["status"] = status;
      row["kiln_compile_s"] = variants[0].compile_s;
      row["kiln_kernels"] = variants[0].kernels;
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
    other.push_back({m, variants[0].error.empty() ? bench::fixed(variants[0].compile_s, 2) : "fail",
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
  print_table(std::cout, lat_header, lat);
  std::cout << "\nCompile / set-up time (s) and peak resident memory, MiB, at " << threads[0]
            << " thread(s): whole process (growth over the started process before loading the "
               "model; for Python, after importing the framework)\n";
  print_table(std::cout, other_header, other);
  if (!base0.empty()) {
    std::cout << "\nSummary against " << base0 << ": median ms (min); ratio = " << base0
              << " median / Kiln median (>1: Kiln faster); compile s = Kiln's import + build"
              << (compile_threads.empty() ? "" : " on " + compile_threads + " thread(s)")
              << "; wrong result = kiln err >= " << kMaxRelError << "\n";
    print_table(
        std::cout,
        {"model", "thr", "kiln", base0, "ratio", "compile s", "kernels", "kiln err", "status"},
        summary);
    for (int nt : threads) {
      const auto& rs = ratios_at[nt];
      double log_sum = 0;
      int slower = 0;
      std::pair<std::string, double> worst = {"", INFINITY};
      for (const auto& [m, r] : rs) {
        log_sum += std::log(r);
        slower += r < 1;
        if (r < worst.second) worst = {m, r};
      }
      const double geomean = rs.empty() ? 0 : std::exp(log_sum / static_cast<double>(rs.size()));
      std::cout << "geomean " << base0 << " / kiln at " << nt
                << " thread(s): " << (rs.empty() ? "-" : bench::fixed(geomean, 2) + "x") << " over "
                << rs.size() << " of " << models.size() << " models";
      if (!rs.empty())
        std::cout << "; " << slower << " slower than " << base0 << ", the slowest " << worst.first
                  << " at " << bench::fixed(worst.second, 2) << "x";
      std::cout << "\n";
      nlohmann::ordered_json row;
      row["name"] = "geomean";
      row["threads"] = nt;
      row["speedup_vs_" + base0] = geomean;
      row["models"] = rs.size();
      row["models_total"] = models.size();
      rows.push_back(row);
    }
  }
  std::cout << failures.size() << " failure(s)" << (failures.empty() ? "" : ":") << "\n";
  for (const std::string& f : failures) std::cout << "  " << f << "\n";
  bench::write_json_rows(cl.get_string("--json", ""), rows);
  return 0;
}
