// Tuning records as JSON lines: serialization of one measurement, an append-only writer that
// flushes and fsyncs every line (and first terminates a line left unterminated by a crash), a
// loader (regular files only, bounded) that skips damaged lines with a warning, and the
// best-record lookup that ignores, and counts, records made for another target or template
// version.
#include "kiln/autotune/record.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "kiln/support/error.h"
#include "kiln/support/file.h"

namespace kiln::autotune {

using nlohmann::json;

const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::kNone:
      return "none";
    case ErrorKind::kInstantiate:
      return "instantiate";
    case ErrorKind::kCompile:
      return "compile";
    case ErrorKind::kRuntime:
      return "runtime";
    case ErrorKind::kCrash:
      return "crash";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kWrongResult:
      return "wrong_result";
    case ErrorKind::kOther:
      return "other";
  }
  return "other";
}

ErrorKind parse_error_kind(const std::string& s) {
  for (ErrorKind k :
       {ErrorKind::kNone, ErrorKind::kInstantiate, ErrorKind::kCompile, ErrorKind::kRuntime,
        ErrorKind::kCrash, ErrorKind::kTimeout, ErrorKind::kWrongResult}) {
    if (s == error_kind_name(k)) return k;
  }
  return ErrorKind::kOther;
}

double MeasureResult::relative() const {
  if (ref_runs.empty() || ref_runs.size() != runs.size()) return 0;
  for (size_t i = 0; i < runs.size(); ++i)
    if (!(runs[i] > 0 && ref_runs[i] > 0)) return 0;
  return *std::min_element(runs.begin(), runs.end()) /
         *std::min_element(ref_runs.begin(), ref_runs.end());
}

double tenth_percentile(std::vector<double> v) {
  if (v.empty()) return 0;
  auto p10 = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 10);
  std::nth_element(v.begin(), p10, v.end());
  return *p10;
}

void MachineState::observe(const MeasureResult& r) {
  if (!r.ok() || r.ref_runs.empty()) return;
  refs_.insert(refs_.end(), r.ref_runs.begin(), r.ref_runs.end());
  limit_ = -1;
}

double MachineState::limit() const {
  if (limit_ < 0) limit_ = factor_ > 0 ? tenth_percentile(refs_) * factor_ : 0;
  return limit_;
}

bool MachineState::slow(const MeasureResult& r) const {
  if (r.ref_runs.empty()) return false;
  const double lim = limit();
  return lim > 0 && *std::min_element(r.ref_runs.begin(), r.ref_runs.end()) > lim;
}

Record Record::make(const Task& task, const Config& cfg, const MeasureResult& r) {
  Record rec;
  rec.task = task.key();
  rec.template_name = task.name;
  rec.version = task.version;
  rec.workload = task.workload;
  rec.target = task.target;
  rec.config = cfg.to_json();
  rec.result = r;
  rec.timestamp =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return rec;
}

json Record::to_json() const {
  json j;
  j["kiln_record"] = 1;
  j["task"] = task;
  j["template"] = template_name;
  j["version"] = version;
  j["workload"] = workload;
  j["target"] = target;
  j["config"] = config;
  j["timestamp"] = timestamp;
  j["compile_s"] = result.compile_s;
  if (!protocol.empty()) j["protocol"] = protocol;
  if (result.ok()) {
    j["costs"] = {{"mean", result.mean_s}, {"std", result.std_s}, {"runs", result.runs}};
    if (!result.ref_runs.empty()) j["costs"]["ref_runs"] = result.ref_runs;
    j["error"] = nullptr;
  } else {
    j["costs"] = nullptr;
    j["error"] = {{"kind", error_kind_name(result.error)}, {"message", result.error_msg}};
  }
  return j;
}

Record Record::from_json(const json& j) {
  KILN_USER_CHECK(j.is_object()) << "not a JSON object";
  auto str = [&](const char* key) -> std::string {
    KILN_USER_CHECK(j.contains(key) && j[key].is_string())
        << "missing string field '" << key << "'";
    return j[key].get<std::string>();
  };
  Record r;
  r.task = str("task");
  r.template_name = str("template");
  r.version = str("version");
  r.workload = str("workload");
  r.target = str("target");
  KILN_USER_CHECK(j.contains("config") && j["config"].is_object()) << "missing field 'config'";
  r.config = j["config"];
  if (j.contains("timestamp") && j["timestamp"].is_number()) r.timestamp = j["timestamp"];
  if (j.contains("compile_s") && j["compile_s"].is_number()) r.result.compile_s = j["compile_s"];
  if (j.contains("protocol")) {
    KILN_USER_CHECK(j["protocol"].is_string() && j["protocol"] == kNetworkProtocol)
        << "field 'protocol' must be \"" << kNetworkProtocol << "\" when present";
    r.protocol = kNetworkProtocol;
  }
  const json& err = j.contains("error") ? j["error"] : json();
  if (err.is_object()) {
    KILN_USER_CHECK(err.contains("kind") && err["kind"].is_string())
        << "field 'error' has no string 'kind'";
    r.result.error = parse_error_kind(err["kind"]);
    if (r.result.error == ErrorKind::kNone) r.result.error = ErrorKind::kOther;
    if (err.contains("message") && err["message"].is_string()) r.result.error_msg = err["message"];
  } else {
    KILN_USER_CHECK(err.is_null()) << "field 'error' must be null or an object";
    KILN_USER_CHECK(j.contains("costs") && j["costs"].is_object())
        << "a successful record needs field 'costs'";
    const json& c = j["costs"];
    KILN_USER_CHECK(c.contains("mean") && c["mean"].is_number() && c["mean"].get<double>() > 0)
        << "field 'costs' needs a positive number 'mean'";
    r.result.mean_s = c["mean"];
    if (c.contains("std") && c["std"].is_number()) r.result.std_s = c["std"];
    if (c.contains("runs") && c["runs"].is_array()) {
      for (const json& x : c["runs"]) {
        KILN_USER_CHECK(x.is_number()) << "field 'costs.runs' must hold numbers";
        r.result.runs.push_back(x);
      }
    }
    if (c.contains("ref_runs")) {
      const json& rr = c["ref_runs"];
      KILN_USER_CHECK(rr.is_array() && rr.size() == r.result.runs.size())
          << "field 'costs.ref_runs' must be an array as long as 'costs.runs'";
      for (const json& x : rr) {
        KILN_USER_CHECK(x.is_number() && x.get<double>() > 0)
            << "field 'costs.ref_runs' must hold positive numbers";
        r.result.ref_runs.push_back(x);
      }
    }
  }
  return r;
}

RecordWriter::RecordWriter(const std::string& path) : path_(path) {
  // Terminate a line cut short by a crash, so the next record starts on a line of its own.
  bool needs_newline = false;
  if (std::FILE* in = std::fopen(path.c_str(), "rb")) {
    if (std::fseek(in, -1, SEEK_END) == 0) needs_newline = std::fgetc(in) != '\n';
    std::fclose(in);
  }
  f_ = std::fopen(path.c_str(), "ab");
  KILN_USER_CHECK(f_ != nullptr) << "tuning log " << path << ": cannot open for appending";
  if (needs_newline) {
    std::fputc('\n', f_);
    std::fflush(f_);
  }
}

RecordWriter::~RecordWriter() {
  if (f_) std::fclose(f_);
}

void RecordWriter::write(const Record& r) {
  std::string line = r.to_json().dump() + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = std::fwrite(line.data(), 1, line.size(), f_);
  bool ok = n == line.size() && std::fflush(f_) == 0;
  KILN_USER_CHECK(ok) << "tuning log " << path_ << ": write failed";
  ::fsync(::fileno(f_));
}

RecordLog load_records(const std::string& path, bool print_warnings) {
  RecordLog log;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return log;
  // A regular file of at most 1 GiB, read whole (support/file.h): a FIFO or a link to
  // /dev/zero given as the log is an error naming it, not a hang.
  std::istringstream in(support::read_file(path, "tuning log '" + path + "'"));
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      json j = json::parse(line);
      log.records.push_back(Record::from_json(j));
    } catch (const std::exception& e) {
      std::string what = e.what();
      if (what.size() > 160) what = what.substr(0, 160) + "...";
      std::ostringstream os;
      os << path << ":" << lineno << ": skipped a corrupt or partial record (" << what << ")";
      log.warnings.push_back(os.str());
      ++log.skipped;
      if (print_warnings) std::cerr << "warning: " << os.str() << "\n";
    }
  }
  return log;
}

std::string BestRecord::summary() const {
  std::ostringstream os;
  os << "used " << used << " record" << (used == 1 ? "" : "s");
  if (failed) os << " (" << failed << " failed)";
  if (network)
    os << ", " << network << " timed inside a model" << (from_network ? ": chosen by those" : "");
  if (slow) os << ", " << slow << " in a slow period of the machine";
  size_t ignored = other_target + other_threads + other_version + bad_config;
  if (ignored) {
    os << "; ignored " << ignored << ":";
    const char* sep = " ";
    if (other_target) os << sep << other_target << " for another target", sep = ", ";
    if (other_threads)
      os << sep << other_threads << " measured with another thread count", sep = ", ";
    if (other_version) os << sep << other_version << " for another template version", sep = ", ";
    if (bad_config) os << sep << bad_config << " whose config does not fit the space";
  }
  return os.str();
}

namespace {

/// The successful records of one config (keyed by its JSON).
struct PerConfig {
  explicit PerConfig(Config c) : config(std::move(c)) {}
  Config config;
  std::vector<const Record*> isolated, network;
  bool failed = false;
};

/// Groups the usable records of `task` by config, counting what was used and ignored in `b`.
std::map<std::string, PerConfig> group_records(const std::vector<Record>& records, const Task& task,
                                               BestRecord& b) {
  std::map<std::string, PerConfig> by_config;
  const std::string key = task.key();
  for (const Record& r : records) {
    if (r.task != key) continue;
    if (r.target != task.target) {
      const bool same_cpu =
          split_target_threads(r.target).first == split_target_threads(task.target).first;
      ++(same_cpu ? b.other_threads : b.other_target);
      continue;
    }
    if (r.version != task.version) {
      ++b.other_version;
      continue;
    }
    Config cfg = Config::fallback();
    try {
      cfg = Config::from_json(r.config, task.space);
    } catch (const Error&) {
      ++b.bad_config;
      continue;
    }
    ++b.used;
    if (r.in_network()) ++b.network;
    auto [it, fresh] = by_config.try_emplace(cfg.to_json().dump(), cfg);
    if (!r.result.ok()) {
      ++b.failed;
      it->second.failed = true;
      continue;
    }
    (r.in_network() ? it->second.network : it->second.isolated).push_back(&r);
  }
  return by_config;
}

/// One ranked config: the record its time is taken from, and whether all its records were made
/// in a slow period.
struct Judged {
  PerConfig* config;
  const Record* record;
  bool slow_only;
};

/// Configs ranked by the upper median of their records of one protocol (of two records, the
/// slower one), or in-network by their fastest (best_record), fastest first; a config with a
/// failed record is left out. Compared by relative times, a config's records made in a slow
/// period of the machine (MachineState with `slow_factor`) count only when it has no others;
/// `slow` counts them.
std::vector<Judged> ranked(std::map<std::string, PerConfig>& by_config, bool network,
                           double slow_factor, size_t* slow = nullptr) {
  // Relative times (MeasureResult::relative) when every record has one, else seconds.
  bool rel = true;
  for (auto& [key, c] : by_config)
    for (const Record* x : network ? c.network : c.isolated) rel = rel && x->result.relative() > 0;
  auto cost = [rel](const Record* x) { return comparable_cost(x->result, rel); };
  // The machine's state by the references timed beside the tuner's records (the in-network
  // protocol has none and takes each config's fastest round instead).
  MachineState state(rel && !network ? slow_factor : 0);
  for (auto& [key, c] : by_config)
    if (!c.failed && !network)
      for (const Record* x : c.isolated) state.observe(x->result);
  std::vector<Judged> r;
  for (auto& [key, c] : by_config) {
    std::vector<const Record*>& recs = network ? c.network : c.isolated;
    if (c.failed || recs.empty()) continue;  // a crash or wrong result disqualifies
    std::vector<const Record*> fast;
    for (const Record* x : recs)
      if (!state.slow(x->result)) fast.push_back(x);
    if (slow) *slow += recs.size() - fast.size();
    std::vector<const Record*>& judged = fast.empty() ? recs : fast;
    std::sort(judged.begin(), judged.end(),
              [&](const Record* x, const Record* y) { return cost(x) < cost(y); });
    r.push_back(Judged{&c, judged[network ? 0 : judged.size() / 2], fast.empty()});
  }
  std::stable_sort(r.begin(), r.end(), [&](const Judged& x, const Judged& y) {
    return cost(x.record) < cost(y.record);
  });
  return r;
}

}  // namespace

BestRecord best_record(const std::vector<Record>& records, const Task& task, Protocol protocol,
                       double slow_factor) {
  BestRecord b;
  std::map<std::string, PerConfig> by_config = group_records(records, task, b);
  auto pick = [&](bool network) {
    std::vector<Judged> r = ranked(by_config, network, slow_factor, network ? nullptr : &b.slow);
    if (r.empty()) return false;
    b.best = *r.front().record;
    b.config = r.front().config->config;
    b.from_network = network;
    return true;
  };
  if (protocol == Protocol::kPreferNetwork && pick(true)) return b;
  pick(false);
  return b;
}

std::vector<RankedConfig> rank_configs(const std::vector<Record>& records, const Task& task,
                                       Protocol protocol, double slow_factor) {
  BestRecord counts;
  std::map<std::string, PerConfig> by_config = group_records(records, task, counts);
  bool network = false;
  std::vector<Judged> r = ranked(by_config, false, slow_factor);
  if (protocol == Protocol::kPreferNetwork) {
    std::vector<Judged> n = ranked(by_config, true, slow_factor);
    if (!n.empty()) {
      r = std::move(n);
      network = true;
    }
  }
  std::vector<RankedConfig> out;
  for (const Judged& j : r) {
    const PerConfig& c = *j.config;
    out.push_back(RankedConfig{c.config, j.record->result.mean_s,
                               (network ? c.network : c.isolated).size(), j.record->result,
                               j.slow_only});
  }
  return out;
}

}  // namespace kiln::autotune
