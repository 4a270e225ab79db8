/// \file measure.h
/// \brief Measuring candidates: each is compiled and run in a forked child process of its own,
/// under a compile time limit and a run time limit, and checked against the default config's
/// output.
///
/// A Measurer belongs to one task. On first use it makes random inputs (seeded) for the task's
/// input tensors and runs the default (fallback) config in a child to get the reference output.
/// For each candidate:
///  1. the parent instantiates it (template and schedule; a template error is a kInstantiate);
///  2. a forked child lowers and compiles it (kiln::build, its own LLVM context), at most
///     `build_threads` children compiling at once; one that throws is a kCompile, and so is one
///     still compiling after compile_timeout_s (killed) or one that dies while compiling;
///  3. one child at a time, with no compile running, runs it: a check run on poisoned outputs
///     compared with the reference (|x - ref| <= atol * max(1, max|ref|) + rtol * |ref|;
///     integers exactly), then untimed calls (`warmup`, and at least one over every copy), then
///     `repeat` timed repeats of `number` calls each, with `number` chosen so that a repeat lasts
///     at least min_repeat_ms, each followed by a repeat of the default config (`reference`);
///     optionally, a pair whose reference ran slow (a slow period of the machine) is timed
///     again for a while (slow_wait_s, off by default).
///     Calls rotate over several copies of the weights (Instance::weights; of every argument
///     when the template marks none), together at least rotate_bytes, so that a call meets its
///     weights where a network leaves them; the activations and outputs stay in one copy, hot
///     in the cache as the producing layer leaves them (plan_rotation). The child reports through a
///     pipe and exits with _exit.
///  4. the parent waits up to timeout_s; a child that dies by a signal is a kCrash, one still
///     running is killed (SIGKILL) and is a kTimeout, a wrong output is a kWrongResult. None of
///     these stops the caller: each is an ordinary MeasureResult.
/// A candidate whose arguments have other shapes than the default's (a config that chooses
/// another data layout, such as other channel blocks of a blocked convolution) runs on its own
/// seeded inputs of those shapes, and its output is not compared (its elements are in another
/// order); it can still crash, hang or fail to compile like any other. The operator library's
/// tests check every template's sampled configs against references.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/autotune/record.h"
#include "kiln/autotune/task.h"

namespace kiln::autotune {

struct MeasureOptions {
  int warmup = 1;              ///< untimed calls after the check run (at least one per copy)
  int repeat = 5;              ///< timed repeats (mean and standard deviation over these)
  double min_repeat_ms = 2.0;  ///< each repeat runs at least this long (number of calls adapts)
  int max_number = 10000;      ///< at most this many calls per repeat
  double timeout_s = 10;       ///< limit for one candidate's run (check + timing)
  /// Limit for compiling one candidate: a config whose code takes LLVM minutes (a huge unrolled
  /// body) is recorded as a compile error instead of stalling the tuner.
  double compile_timeout_s = 30;
  int build_threads = 2;  ///< candidates compiled at once; 1 = sequentially
  /// Rotated argument copies together span at least this: more than the L2 and about a
  /// network's weights (ResNet-18: 45 MB), so that a kernel meets its weights as it does inside a
  /// network, from L3 or DRAM. (With 8 MB, configs tuned for warm weights ran slower in ResNet-18
  /// than the defaults.) Only the weights rotate (Instance::weights): rotating the activations
  /// too read them from DRAM where the network finds them in L2, and ranked ResNet-18's small
  /// 1x1 convolutions and its classifier's configs against their in-network times
  /// (`kiln tune --fidelity`: Spearman 0.2-0.3).
  size_t rotate_bytes = 64u << 20;
  int max_copies = 64;  ///< at most this many argument copies
  bool check = true;    ///< compare outputs with the default config's
  /// Time the default config alongside: after each timed repeat of a candidate, a repeat of the
  /// default on arguments of its own, in the same process (MeasureResult::ref_runs and
  /// relative()). The default is compiled once, in the measuring process, and inherited by the
  /// children. On a shared machine the relative time ranks configs measured minutes apart; the
  /// seconds alone are moved by the machine's slow periods. Costs one more repeat per repeat.
  bool reference = true;
  /// With `reference`: measure in the machine's fast state (off by default). A shared machine
  /// has slow periods (in a Figure-12 run here 27-45% of the time, 0.7-1.3 s each on average,
  /// up to 10 s: another tenant's work slowed every conv2d 1.3-1.6x) and they slow the default
  /// more than many candidates: a config measured in one looked 6-8% faster against the
  /// default than in a fast period, as much as the spread of the best configs. With
  /// slow_wait_s > 0 a pair whose reference repeat takes more than slow_factor x the default's
  /// usual time (the 10th percentile of the reference repeats this Measurer has kept) is timed
  /// again, for at most slow_wait_s per candidate (and a quarter of timeout_s); after that the
  /// pairs are kept as they come (MeasureResult::slow_pairs counts those skipped). Measured
  /// (C12, 3 seeds of 3 tuners, 2 s): tuning took 2.9x as long, two thirds of the measurements
  /// waited, and in longer slow periods some were still taken slow, so it is not the default.
  double slow_wait_s = 0;
  double slow_factor = 1.2;
  double rtol = 1e-3, atol = 1e-4;
  uint32_t seed = 1;  ///< seed of the random inputs
  /// The clock the measuring child times with (repeats, the warm-up call that sizes them,
  /// slow_wait_s): seconds on a monotonic clock, read in the child. Empty (the default):
  /// std::chrono::steady_clock. A test sets a fake clock that its kernels advance, so that the
  /// timing logic is checked deterministically whatever else the machine runs. The time limits
  /// on child processes (timeout_s, compile_timeout_s) always use the real clock.
  std::function<double()> clock;
};

/// What a forked child reported.
struct ChildOutcome {
  enum Status : uint8_t { kExited, kSignaled, kTimedOut, kForkFailed } status = kExited;
  int code = 0;                  ///< exit code (kExited) or signal number (kSignaled)
  std::string payload;           ///< everything the child wrote to its pipe
  std::string describe() const;  ///< "exited with code 3", "killed by signal 11 (...)", ...
};

/// Forks; the child runs `body(fd)` (writing its report to fd), then _exit(0) (an exception
/// escaping body exits with 3 after writing its message); the parent collects what the child
/// wrote, waiting at most timeout_s before killing it. Core dumps are disabled in the child.
ChildOutcome run_in_child(const std::function<void(int fd)>& body, double timeout_s);

/// How a measurement rotates over argument copies.
struct RotationPlan {
  int copies = 1;        ///< argument sets: enough to span rotate_bytes, at most max_copies
  int warmup_calls = 0;  ///< untimed calls before timing: opt.warmup, and at least `copies`
};
/// The rotation for rotated arguments of `set_bytes` bytes in all (one copy; 0: one set).
RotationPlan plan_rotation(const MeasureOptions& opt, size_t set_bytes);

/// The reference time above which a pair is timed again (MeasureOptions::slow_wait_s):
/// slow_factor x the 10th percentile of `ref_repeats` (the reference repeats kept so far); 0,
/// timing every pair once, when there are none or the option is off.
double slow_reference_limit(const std::vector<double>& ref_repeats, const MeasureOptions& opt);

/// Measures candidates of one task.
class Measurer {
 public:
  /// Keeps a copy of `task`.
  explicit Measurer(const Task& task, MeasureOptions opt = {});
  ~Measurer();
  Measurer(const Measurer&) = delete;
  Measurer& operator=(const Measurer&) = delete;

  /// Measures each config (results in the same order). Never throws for a bad candidate.
  std::vector<MeasureResult> measure(const std::vector<Config>& configs);
  /// The default config's measurement (made on first use with the reference output). Throws
  /// kiln::Error naming the task when the default itself fails: without it nothing can be
  /// checked.
  const MeasureResult& default_result();
  const MeasureOptions& options() const { return opt_; }

  /// Inputs, argument copies and the reference output (measure.cc).
  struct State;

 private:
  Task task_;
  MeasureOptions opt_;
  std::unique_ptr<State> st_;
};

}  // namespace kiln::autotune
