// Private to src/autotune/measure*.cc (the Measurer, split by concern): the process plumbing
// of measure_process.cc (pipes, deadlines, reaping children), the argument sets and the child's
// timing loop of measure_child.cc, and the state a Measurer keeps between batches.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kiln/autotune/measure.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"

namespace kiln::autotune {
namespace detail {

using Clock = std::chrono::steady_clock;

// ---- process plumbing (measure_process.cc) ----

/// Writes all `n` bytes of `p` to `fd` (retrying short writes; gives up on an error).
void write_all(int fd, const char* p, size_t n);
/// The time `s` seconds from now.
Clock::time_point after(double s);
double seconds_since(Clock::time_point t0);
/// Now, in seconds, on the measurement clock (MeasureOptions::clock).
double measure_now(const MeasureOptions& opt);
/// Reads the child's pipe `fd` into out.payload until EOF or `deadline` (then kills the child),
/// closes fd, reaps `pid` and records how it ended.
void collect(pid_t pid, int fd, Clock::time_point deadline, ChildOutcome& out);
/// In a child: runs `body(fd)`, reporting an escaping exception as {"error": "other"}, and
/// returns the exit code.
int run_body(const std::function<void(int fd)>& body, int fd);
/// In a child: no core files from a crashing candidate.
void no_core_dumps();

// ---- argument sets (measure_child.cc) ----

/// Argument copies with pre-packed call arguments.
struct ArgSet {
  std::vector<runtime::NDArray> arrays;
  std::vector<KilnValue> values;
  std::vector<int32_t> codes;
};

/// Fills `a` with NaN (floats) or 0xA5 bytes, so a kernel that skips an output is caught.
void poison(const runtime::NDArray& a);
/// Seeded random values: floats in [-1, 1), small integers of both signs, booleans.
void fill_random(const runtime::NDArray& a, std::mt19937& rng);
/// "" when `got` matches `want` within tolerance, else a description of the first mismatch.
std::string compare(const runtime::NDArray& got, const std::string& want, const std::string& name,
                    double rtol, double atol);

}  // namespace detail

struct Measurer::State {
  bool prepared = false;
  std::vector<std::string> names;
  std::vector<bool> is_output;
  std::vector<bool> rotated;  ///< per argument: copied per set (Instance::weights), else shared
  std::vector<std::vector<int64_t>> shapes;
  std::vector<DataType> dtypes;
  std::vector<detail::ArgSet> sets;
  size_t set_bytes = 0;                ///< bytes of one set (plan_rotation)
  std::vector<std::string> reference;  ///< per argument (outputs only): the default's bytes
  MeasureResult default_result;
  /// Argument sets of candidates whose arguments have other shapes than the default's (another
  /// layout of the same tensors), one per shape list: random inputs, no reference.
  std::map<std::vector<std::vector<int64_t>>, std::unique_ptr<State>> layouts;
  /// MeasureOptions::reference: the default config compiled in the measuring process (children
  /// inherit it), and the argument copies it runs on beside a candidate's.
  runtime::Module ref_module;
  runtime::PackedFunc ref_fn;
  std::unique_ptr<State> ref_args;
  /// With MeasureOptions::slow_wait_s, the reference repeats of the measurements so far (the
  /// default's own, then each kept pair's): their 10th percentile is the default's time in the
  /// machine's fast state.
  std::vector<double> ref_seen;
  /// The layouts' keys, oldest first: at most kMaxLayouts are kept (each holds rotate_bytes of
  /// arguments; a random search over channel blocks visited dozens and grew to 3 GB).
  std::deque<std::vector<std::vector<int64_t>>> layout_order;
};

namespace detail {

/// The child's side of a measurement (measure_child.cc): check run, warm-up, timed repeats (each
/// followed by one of the reference, when given); reports as JSON (plus output bytes) on `fd`.
void child_measure(int fd, const runtime::PackedFunc& fn, Measurer::State& st,
                   const MeasureOptions& opt, bool send_outputs, const runtime::PackedFunc* ref_fn,
                   Measurer::State* ref_st, double slow_ref_s);
/// Fills `st.sets` for `st.shapes` / `st.dtypes`: a first set of seeded random inputs and
/// poisoned outputs, and copies of it for rotation (together at least opt.rotate_bytes).
void make_arg_sets(Measurer::State& st, const MeasureOptions& opt);

}  // namespace detail
}  // namespace kiln::autotune
