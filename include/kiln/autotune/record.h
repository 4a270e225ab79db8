/// \file record.h
/// \brief Tuning records: one measurement per line of a JSON-lines log, appended and flushed as
/// measured, read back for resuming and for picking the best config of a task.
///
/// A line (keys sorted by the JSON writer):
///   {"config": {"index": 17, "knobs": {...}}, "costs": {"mean": 1.2e-4, "std": 3e-6,
///    "runs": [...], "ref_runs": [...]}, "error": null, "kiln_record": 1,
///    "task": "matmul(A:float32[...],...)",
///    "target": "llvm -mcpu=native; cpu=...; features=...", "template": "matmul",
///    "timestamp": 1700000000.5, "version": "1", "workload": "A:float32[...],..."}
/// A failed measurement has "costs": null and "error": {"kind": "crash", "message": "..."}.
///
/// Loading never crashes on a damaged log: a corrupt or partial line (a run killed mid-write
/// leaves at most one) is skipped with a warning naming the file and line. A record made for
/// another target or another template version is never applied silently: best_record() counts
/// what it used and what it ignored, and why.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kiln/autotune/task.h"

namespace kiln::autotune {

/// Why a measurement failed. kNone: it succeeded.
enum class ErrorKind : uint8_t {
  kNone,
  kInstantiate,  ///< the template threw for this config
  kCompile,      ///< lowering or code generation threw
  kRuntime,      ///< the function returned an error
  kCrash,        ///< the child process died (signal)
  kTimeout,      ///< the child process ran past the time limit and was killed
  kWrongResult,  ///< the output differs from the default config's output
  kOther,        ///< anything else (the child could not be started, ...)
};
/// "none", "instantiate", "compile", "runtime", "crash", "timeout", "wrong_result", "other".
const char* error_kind_name(ErrorKind k);
/// Inverse of error_kind_name; unknown names give kOther.
ErrorKind parse_error_kind(const std::string& s);

/// The outcome of measuring one candidate.
struct MeasureResult {
  ErrorKind error = ErrorKind::kNone;
  std::string error_msg;
  double mean_s = 0;         ///< mean seconds per call over the repeats
  double std_s = 0;          ///< standard deviation of the repeats
  std::vector<double> runs;  ///< seconds per call of each repeat
  /// Seconds per call of the task's default config, timed in the same process right after each
  /// repeat (MeasureOptions::reference): ref_runs[i] goes with runs[i]. Empty when not timed.
  std::vector<double> ref_runs;
  double compile_s = 0;  ///< time to instantiate, lower and compile
  /// Pairs timed and dropped because the reference ran slow (MeasureOptions::slow_wait_s);
  /// not logged.
  int slow_pairs = 0;
  bool ok() const { return error == ErrorKind::kNone; }
  /// The fastest repeat over the reference's fastest repeat: the time relative to the default
  /// config at the same moment. A shared machine has slow periods (another tenant's work slowed
  /// every conv2d here by 1.4-1.6x for up to a second, while the repeats within one measurement
  /// agreed to 3%), which move a measurement's seconds but not this ratio; each minimum, like the
  /// fastest repeat alone, is proof against a single repeat slowed by another process. 0 when
  /// there are no ref_runs (or they do not pair with runs).
  double relative() const;
};

/// How measurements of one task compare: by relative() when `relative` (every measurement
/// compared has it), else by mean seconds.
inline double comparable_cost(const MeasureResult& r, bool relative) {
  return relative ? r.relative() : r.mean_s;
}

/// The 10th percentile of `v` (its element at index size/10 in sorted order); 0 when empty.
double tenth_percentile(std::vector<double> v);

/// Tells the measurements made in the machine's slow state from the others, by the default
/// config timed beside each (MeasureResult::ref_runs). A shared machine has slow periods
/// (another tenant's work: every conv2d here 1.35-1.55x slower for 1-2 s on average, up to
/// 30 s, a quarter to two thirds of the time) and they slow the default more than many
/// candidates, so a measurement made in one looks 6-8% faster against the default than in the
/// fast state, and some by far more (one C12 config at 1.68x the default): as much as the gap
/// between the best configs and the default. A measurement is slow when its reference's
/// fastest repeat took more than `factor` x the 10th percentile of the reference repeats
/// observed so far (the default's time in the fast state).
class MachineState {
 public:
  static constexpr double kDefaultFactor = 1.2;
  explicit MachineState(double factor = kDefaultFactor) : factor_(factor) {}
  /// Counts the reference repeats of `r` (none for a failure or without a reference).
  void observe(const MeasureResult& r);
  /// factor x the 10th percentile of the reference repeats observed; 0 with none, or when
  /// factor <= 0 (nothing is slow).
  double limit() const;
  /// True when `r` has reference repeats, the fastest above limit().
  bool slow(const MeasureResult& r) const;
  size_t observed() const { return refs_.size(); }

 private:
  double factor_;
  std::vector<double> refs_;
  mutable double limit_ = -1;  ///< limit() since the last observe(); -1: not computed
};

/// One line of a log.
struct Record {
  std::string task;  ///< Task::key()
  std::string template_name;
  std::string version;
  std::string workload;
  std::string target;
  nlohmann::json config;  ///< Config::to_json()
  MeasureResult result;
  double timestamp = 0;  ///< seconds since the epoch
  /// How it was measured: empty for the tuner's measurement of the kernel alone (Measurer);
  /// kNetworkProtocol for its time per call inside a compiled model (graph::check_in_network),
  /// which best_record prefers.
  std::string protocol;

  static constexpr const char* kNetworkProtocol = "network";
  bool in_network() const { return protocol == kNetworkProtocol; }

  /// The record of measuring `cfg` for `task` now.
  static Record make(const Task& task, const Config& cfg, const MeasureResult& r);
  nlohmann::json to_json() const;
  /// Parses one line's JSON; throws kiln::Error naming the missing or malformed field.
  static Record from_json(const nlohmann::json& j);
};

/// Appends records to a log: one line each, flushed (fflush + fsync) before write() returns, so
/// a crash loses at most the line being written. A file that does not end in a newline (a line
/// cut short by a crash) gets one first, so the damage stays on its own line. Thread-safe.
class RecordWriter {
 public:
  /// Opens (creating) `path` for appending; throws kiln::Error naming the path on failure.
  explicit RecordWriter(const std::string& path);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;
  void write(const Record& r);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::mutex mu_;
};

/// What load_records found.
struct RecordLog {
  std::vector<Record> records;
  /// One per skipped line: "log.jsonl:12: skipped a corrupt line (...)".
  std::vector<std::string> warnings;
  size_t skipped = 0;
};

/// Reads every record of `path`. A missing file is an empty log; a path that is not a regular
/// file (a FIFO, a device) or a file over 1 GiB is a kiln::Error naming it. Corrupt or partial
/// lines are skipped, each with a warning (also printed to stderr when `print_warnings`).
RecordLog load_records(const std::string& path, bool print_warnings = true);

/// The best record of a task and what was used or ignored to find it.
struct BestRecord {
  /// The record of the fastest config, if any: configs are compared by the upper median of
  /// their successful records (a config measured again, e.g. by tune()'s verification, is
  /// judged by its typical time rather than its luckiest one), in-network ones by their
  /// fastest (see best_record); `best` is that record. A config with a failed record (crash,
  /// time-out, wrong result) is never chosen.
  std::optional<Record> best;
  Config config = Config::fallback();  ///< best's config parsed against the task's space
  size_t used = 0;                     ///< records of this task, target and version that parsed
  size_t failed = 0;                   ///< ... of which were failed measurements
  size_t other_target = 0;             ///< records of this task made for another target
  /// records of this task for this target measured with another thread count (target_key)
  size_t other_threads = 0;
  size_t other_version = 0;  ///< records of this task made by another template version
  size_t bad_config = 0;     ///< records whose config does not parse against the space
  size_t network = 0;        ///< used records measured inside a model (Record::in_network)
  /// Records of the ranked configs made in a slow period of the machine (MachineState), which
  /// do not judge a config with records made in its fast state (see best_record).
  size_t slow = 0;
  /// True when `best` was chosen among in-network records (see best_record).
  bool from_network = false;
  /// "used 40 records (3 failed); ignored 2 for another target, 1 for template version 0".
  std::string summary() const;
};

/// Which records best_record and rank_configs compare.
enum class Protocol : uint8_t {
  kPreferNetwork,  ///< the in-network records when any config has one, else the tuner's
  kIsolated,       ///< the tuner's records only
};

/// Picks the fastest config of `task` among `records` (by the upper median of its successful
/// records: of their relative times when every record compared has one, else of their
/// seconds); records of other tasks are not counted, those of this task for another target or
/// template version are counted and ignored. Compared by relative times, a config measured
/// both in the machine's fast state and in a slow period (MachineState with `slow_factor`, by
/// the references of all the task's records; 0: off) is judged by its fast-state records
/// alone: in a slow period configs look 6-8% faster against the default, and a few by far more
/// (one C12 config at 1.68x the default), as much as the gap between the best configs and the
/// default; a config measured only in slow periods is judged by those. With kPreferNetwork, when
/// some config of the task was timed inside a model (Record::in_network), the choice is among those
/// configs by their in-network times: a kernel alone, with its arguments rotated through the cache,
/// can rank two configs differently from the model it runs in. An in-network config counts its
/// fastest record (one round of graph::check_in_network each): a round falls in the machine's fast
/// or slow state (another tenant's work slowed ResNet-18's direct 7x7x512 conv2d 1.45x and its
/// Winograd 1.1x, so the states rank them differently), a kernel cannot run faster than it
/// does in the fast state, and the fastest round is the one that state is known from.
BestRecord best_record(const std::vector<Record>& records, const Task& task,
                       Protocol protocol = Protocol::kPreferNetwork,
                       double slow_factor = MachineState::kDefaultFactor);

/// A config and the time of the record best_record's rule takes for it.
struct RankedConfig {
  Config config;
  /// mean seconds of that record: the upper median (in-network records: the fastest)
  double median_s = 0;
  size_t records = 0;
  MeasureResult result;  ///< that record's measurement
  /// Every record of the config was made in a slow period of the machine (see best_record), so
  /// its time is likely flattered.
  bool slow_only = false;
};
/// Every config of `task` with successful records of `protocol` (never one with a failed
/// record), fastest first by best_record's rule.
std::vector<RankedConfig> rank_configs(const std::vector<Record>& records, const Task& task,
                                       Protocol protocol = Protocol::kIsolated,
                                       double slow_factor = MachineState::kDefaultFactor);

}  // namespace kiln::autotune
