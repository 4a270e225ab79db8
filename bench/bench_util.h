/// \file bench_util.h
/// \brief Shared helpers of the benchmarks in bench/: wall-clock timing with warm-up and
/// repetitions (min / median / max), a small command line parser, a readable table printer and
/// the JSON rows every benchmark writes with `--json FILE` (DESIGN.md, "Testing").
///
///   bench::CommandLine cl(argc, argv, {{"--size", "matrix size"}, {"--json", "output file"}});
///   bench::Timing t = bench::measure([&] { f(a, b, c); }, /*warmup=*/3, /*reps=*/10);
///   bench::write_json_rows(cl.get_string("--json", ""), rows);
///
/// Benchmarks are not tests: they never fail on timing, only on wrong results or bad input.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kiln::bench {

/// Milliseconds since an arbitrary fixed point (steady clock).
inline double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

/// The median of `v` (mean of the two middle values for an even count); 0 for an empty vector.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Times of the repetitions of one measurement, in milliseconds.
struct Timing {
  double min_ms = 0, median_ms = 0, max_ms = 0;
  std::vector<double> samples_ms;  ///< one per timed repetition, in run order
};

/// Runs `f` `warmup` times untimed, then `reps` times, timing each call separately.
inline Timing measure(const std::function<void()>& f, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) f();
  Timing t;
  for (int i = 0; i < reps; ++i) {
    double t0 = now_ms();
    f();
    t.samples_ms.push_back(now_ms() - t0);
  }
  if (!t.samples_ms.empty()) {
    t.min_ms = *std::min_element(t.samples_ms.begin(), t.samples_ms.end());
    t.max_ms = *std::max_element(t.samples_ms.begin(), t.samples_ms.end());
    t.median_ms = median(t.samples_ms);
  }
  return t;
}

/// Times several functions on a shared, noisy machine fairly: after `warmup` untimed calls of
/// each, runs `reps` rounds, each calling every function once in turn, so that a busy period
/// slows all of them alike. Returns one Timing per function, in order.
/// `before`, when given, runs untimed before every timed call (e.g. to evict the caches).
/// With `hot`, every timed call follows an untimed call of the same function, so each runs
/// with its own data in cache (the protocol of benchdnn and of TVM's time_evaluator, which
/// call one kernel back to back) instead of after the other function has evicted part of it.
inline std::vector<Timing> measure_interleaved(const std::vector<std::function<void()>>& fns,
                                               int warmup, int reps,
                                               const std::function<void()>& before = {},
                                               bool hot = false) {
  for (const auto& f : fns)
    for (int i = 0; i < warmup; ++i) f();
  std::vector<Timing> ts(fns.size());
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < fns.size(); ++i) {
      if (before) before();
      if (hot) fns[i]();
      double t0 = now_ms();
      fns[i]();
      ts[i].samples_ms.push_back(now_ms() - t0);
    }
  for (Timing& t : ts) {
    if (t.samples_ms.empty()) continue;
    t.min_ms = *std::min_element(t.samples_ms.begin(), t.samples_ms.end());
    t.max_ms = *std::max_element(t.samples_ms.begin(), t.samples_ms.end());
    t.median_ms = median(t.samples_ms);
  }
  return ts;
}

/// A minimal `--flag value` parser. Flags are declared with a help line; an undeclared flag,
/// a flag without its value, or a malformed number ends the program with a message.
class CommandLine {
 public:
  CommandLine(int argc, char** argv, std::vector<std::pair<std::string, std::string>> flags)
      : prog_(argc > 0 ? argv[0] : "bench"), flags_(std::move(flags)) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--help" || a == "-h") usage(0);
      if (!declared(a)) fail("unknown option '" + a + "'");
      if (i + 1 >= argc) fail("option '" + a + "' needs a value");
      values_[a] = argv[++i];
    }
  }
  /// True when `flag` was given.
  bool has(const std::string& flag) const { return values_.count(flag) != 0; }
  /// The value of `flag`, or `dflt` when it was not given.
  std::string get_string(const std::string& flag, const std::string& dflt) const {
    auto it = values_.find(flag);
    return it == values_.end() ? dflt : it->second;
  }
  /// The integer value of `flag`, or `dflt`; a value that is not an integer ends the program.
  long get_int(const std::string& flag, long dflt) const {
    auto it = values_.find(flag);
    if (it == values_.end()) return dflt;
    char* end = nullptr;
    long v = std::strtol(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0')
      fail("option '" + flag + "' expects an integer, got '" + it->second + "'");
    return v;
  }
  /// The number value of `flag`, or `dflt`; a value that is not a number ends the program.
  double get_double(const std::string& flag, double dflt) const {
    auto it = values_.find(flag);
    if (it == values_.end()) return dflt;
    char* end = nullptr;
    double v = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0')
      fail("option '" + flag + "' expects a number, got '" + it->second + "'");
    return v;
  }
  /// Prints the message and the usage to stderr and exits with status 2.
  [[noreturn]] void fail(const std::string& msg) const {
    std::cerr << prog_ << ": " << msg << "\n";
    usage(2);
  }

 private:
  bool declared(const std::string& f) const {
    for (const auto& [name, help] : flags_)
      if (name == f) return true;
    return false;
  }
  [[noreturn]] void usage(int status) const {
    std::ostream& os = status == 0 ? std::cout : std::cerr;
    os << "usage: " << prog_ << " [options]\n";
    for (const auto& [name, help] : flags_)
      os << "  " << std::left << std::setw(17) << name << help << "\n";
    std::exit(status);
  }

  std::string prog_;
  std::vector<std::pair<std::string, std::string>> flags_;
  std::map<std::string, std::string> values_;
};

/// A text table: a header row, then rows of cells; columns are right-aligned to their widest
/// cell, except the first, which is left-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& os) const {
    std::vector<size_t> w;
    for (const auto& r : rows_)
      for (size_t c = 0; c < r.size(); ++c) {
        if (w.size() <= c) w.push_back(0);
        w[c] = std::max(w[c], r[c].size());
      }
    for (size_t r = 0; r < rows_.size(); ++r) {
      for (size_t c = 0; c < rows_[r].size(); ++c) {
        if (c) os << "  ";
        os << (c == 0 ? std::left : std::right) << std::setw(static_cast<int>(w[c])) << rows_[r][c];
      }
      os << "\n";
      if (r == 0) {
        size_t total = 0;
        for (size_t x : w) total += x + 2;
        os << std::string(total > 2 ? total - 2 : 0, '-') << "\n";
      }
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

/// `v` with `digits` digits after the decimal point.
inline std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

/// One row of a benchmark's JSON output: `name`, `threads`, Kiln's times (`kiln_ms_min`,
/// `kiln_ms_median`, `kiln_ms_max`), then each baseline's `<baseline>_ms_median` and
/// `speedup_vs_<baseline>` (baseline median / Kiln median), then any extra numbers.
inline nlohmann::ordered_json make_row(
    const std::string& name, int threads, const Timing& kiln,
    const std::vector<std::pair<std::string, double>>& baseline_medians_ms) {
  nlohmann::ordered_json row;
  row["name"] = name;
  row["threads"] = threads;
  row["kiln_ms_min"] = kiln.min_ms;
  row["kiln_ms_median"] = kiln.median_ms;
  row["kiln_ms_max"] = kiln.max_ms;
  for (const auto& [base, ms] : baseline_medians_ms) {
    row[base + "_ms_median"] = ms;
    row["speedup_vs_" + base] = kiln.median_ms > 0 ? ms / kiln.median_ms : 0.0;
  }
  return row;
}

/// Writes `rows` as a JSON list to `path` (nothing when `path` is empty). Throws
/// std::runtime_error naming the file when it cannot be written.
inline void write_json_rows(const std::string& path,
                            const std::vector<nlohmann::ordered_json>& rows) {
  if (path.empty()) return;
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot open '" + path + "' for writing");
  f << nlohmann::ordered_json(rows).dump(2) << "\n";
  if (!f) throw std::runtime_error("error writing '" + path + "'");
}

// ---------------------------------------------------------------------------------------------
// Peak fp32 throughput of one core: independent FMA chains, enough to cover latency x ports.

inline constexpr int kPeakChains = 16;

__attribute__((target("avx512f"))) inline float fma_loop_avx512(long iters, float seed) {
  __m512 acc[kPeakChains];
  for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm512_set1_ps(seed + 0.001f * c);
  const __m512 mul = _mm512_set1_ps(0.9999999f), add = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], mul, add);
  }
  __m512 s = acc[0];
  for (int c = 1; c < kPeakChains; ++c) s = _mm512_add_ps(s, acc[c]);
  float lanes[16];  // (not _mm512_reduce_add_ps: GCC 12's header warns -Wuninitialized in it)
  _mm512_storeu_ps(lanes, s);
  float r = 0;
  for (float x : lanes) r += x;
  return r;
}

__attribute__((target("avx2,fma"))) inline float fma_loop_avx2(long iters, float seed) {
  __m256 acc[kPeakChains];
  for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm256_set1_ps(seed + 0.001f * c);
  const __m256 mul = _mm256_set1_ps(0.9999999f), add = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], mul, add);
  }
  __m256 s = acc[0];
  for (int c = 1; c < kPeakChains; ++c) s = _mm256_add_ps(s, acc[c]);
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  float r = 0;
  for (float x : lanes) r += x;
  return r;
}

/// Measured peak in GFLOP/s with `threads` threads each running the FMA loop (best of 5).
inline double measure_peak_gflops(int threads, bool avx512) {
  const long iters = 20'000'000;
  const double lanes = avx512 ? 16 : 8;
  const double flop_per_thread = 2.0 * lanes * kPeakChains * iters;
  std::atomic<float> sink{0};
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = now_ms();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        float r = avx512 ? fma_loop_avx512(iters, 1.0f + t) : fma_loop_avx2(iters, 1.0f + t);
        sink.store(sink.load() + r);
      });
    for (auto& th : pool) th.join();
    double ms = now_ms() - t0;
    best = std::max(best, flop_per_thread * threads / (ms * 1e6));
  }
  if (sink.load() == 12345.f) std::cout << "";  // keep the result alive
  return best;
}

}  // namespace kiln::bench
