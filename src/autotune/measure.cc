// Measurement. Each candidate gets a forked child of its own, which compiles it (kiln::build,
// its own LLVM context), reports that it compiled, waits for the parent's go, then runs the
// check / warm-up / timed repeats and writes a JSON report (plus, for the default config, the
// raw output bytes after a NUL) to a pipe. The parent instantiates the candidate first (cheap,
// and it decides which argument copies the child inherits), runs up to build_threads children
// compiling at once under the compile time limit, then lets them measure one at a time under
// the run time limit, so no compile runs while a candidate is timed. A compiler that crashes or
// runs past its limit costs one child, never the tuner. The child times its calls with
// MeasureOptions::clock (steady_clock unless a test injects a fake one); the limits on the
// children's time always use the real clock.
#include "kiln/autotune/measure.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "kiln/ir/op.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/support/error.h"
#include "kiln/target/build.h"

namespace kiln::autotune {

using nlohmann::json;
using runtime::NDArray;
using Clock = std::chrono::steady_clock;

namespace {

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

/// The time `s` seconds from now.
Clock::time_point after(double s) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Now, in seconds, on the measurement clock (MeasureOptions::clock).
double measure_now(const MeasureOptions& opt) {
  if (opt.clock) return opt.clock();
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

}  // namespace

std::string ChildOutcome::describe() const {
  std::ostringstream os;
  switch (status) {
    case kExited:
      os << "exited with code " << code;
      break;
    case kSignaled:
      os << "killed by signal " << code << " (" << strsignal(code) << ")";
      break;
    case kTimedOut:
      os << "timed out and was killed";
      break;
    case kForkFailed:
      os << "could not be started (fork failed: " << std::strerror(code) << ")";
      break;
  }
  return os.str();
}

namespace {

/// Reads the child's pipe `fd` into out.payload until EOF or `deadline` (then kills the child),
/// closes fd, reaps `pid` and records how it ended.
void collect(pid_t pid, int fd, Clock::time_point deadline, ChildOutcome& out) {
  bool timed_out = false;
  char buf[65536];
  for (;;) {
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::ceil(left * 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // the loop re-checks the deadline
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed its end (exited)
    out.payload.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    out.status = ChildOutcome::kTimedOut;
  } else if (WIFSIGNALED(status)) {
    out.status = ChildOutcome::kSignaled;
    out.code = WTERMSIG(status);
  } else {
    out.status = ChildOutcome::kExited;
    out.code = WEXITSTATUS(status);
  }
}

/// In a child: runs `body(fd)`, reporting an escaping exception as {"error": "other"}, and
/// returns the exit code.
int run_body(const std::function<void(int fd)>& body, int fd) {
  try {
    body(fd);
  } catch (const std::exception& e) {
    std::string msg = json({{"error", "other"}, {"message", e.what()}}).dump();
    write_all(fd, msg.data(), msg.size());
    return 3;
  } catch (...) {
    return 4;
  }
  return 0;
}

void no_core_dumps() {
  struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
}

}  // namespace

ChildOutcome run_in_child(const std::function<void(int fd)>& body, double timeout_s) {
  ChildOutcome out;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    out.status = ChildOutcome::kForkFailed;
    out.code = errno;
    return out;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    out.status = ChildOutcome::kForkFailed;
    out.code = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return out;
  }
  if (pid == 0) {
    ::close(fds[0]);
    no_core_dumps();
    int code = run_body(body, fds[1]);
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  collect(pid, fds[0], after(timeout_s), out);
  return out;
}

// ---------------------------------------------------------------------------------------------

namespace {

/// A candidate instantiated in the parent (or why it could not be).
struct Prepared {
  Instance inst;
  MeasureResult failure;  ///< error set when instantiating failed
  /// The candidate's argument shapes when they differ from the default config's (a config that
  /// picks another data layout, e.g. other channel blocks); empty when they are the same.
  std::vector<std::vector<int64_t>> own_shapes;
};

/// Argument copies with pre-packed call arguments.
struct ArgSet {
  std::vector<NDArray> arrays;
  std::vector<KilnValue> values;
  std::vector<int32_t> codes;
};

void poison(const NDArray& a) {
  if (a.dtype() == DataType::Float(32)) {
    std::fill_n(a.data_as<float>(), a.numel(), std::numeric_limits<float>::quiet_NaN());
  } else if (a.dtype() == DataType::Float(64)) {
    std::fill_n(a.data_as<double>(), a.numel(), std::numeric_limits<double>::quiet_NaN());
  } else {
    std::memset(a.data(), 0xA5, a.nbytes());
  }
}

void fill_random(const NDArray& a, std::mt19937& rng) {
  DataType t = a.dtype();
  if (t == DataType::Float(32)) {
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = d(rng);
  } else if (t == DataType::Float(64)) {
    std::uniform_real_distribution<double> d(-1., 1.);
    for (int64_t i = 0; i < a.numel(); ++i) a.data_as<double>()[i] = d(rng);
  } else if (t.is_bool()) {
    for (int64_t i = 0; i < a.numel(); ++i) a.data_as<uint8_t>()[i] = rng() & 1;
  } else {
    // Small integers: no overflow in typical arithmetic, values in both signs for signed types.
    auto* p = static_cast<uint8_t*>(a.data());
    for (size_t i = 0; i < a.nbytes(); ++i) p[i] = 0;
    int bytes = t.bytes();
    for (int64_t i = 0; i < a.numel(); ++i) {
      int64_t v = static_cast<int64_t>(rng() % 15) - (t.is_uint() ? 0 : 7);
      std::memcpy(p + i * bytes, &v, static_cast<size_t>(bytes));  // little-endian low bytes
    }
  }
}

/// "" when `got` matches `want` within tolerance, else a description of the first mismatch.
std::string compare(const NDArray& got, const std::string& want, const std::string& name,
                    double rtol, double atol) {
  DataType t = got.dtype();
  int64_t n = got.numel(), bad = 0, first = -1;
  double gv = 0, wv = 0;
  if (t == DataType::Float(32) || t == DataType::Float(64)) {
    auto at = [&](const void* p, int64_t i) {
      return t.bits() == 32 ? static_cast<double>(static_cast<const float*>(p)[i])
                            : static_cast<const double*>(p)[i];
    };
    double scale = 1;
    for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(at(want.data(), i)));
    for (int64_t i = 0; i < n; ++i) {
      double g = at(got.data(), i), w = at(want.data(), i);
      if (!(std::fabs(g - w) <= atol * scale + rtol * std::fabs(w))) {
        if (bad++ == 0) first = i, gv = g, wv = w;
      }
    }
  } else {
    size_t b = static_cast<size_t>(t.bytes());
    const char* g = static_cast<const char*>(got.data());
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(g + i * b, want.data() + i * b, b) != 0 && bad++ == 0) first = i;
    }
  }
  if (bad == 0) return "";
  std::ostringstream os;
  os << "output " << name << ": " << bad << " of " << n << " elements differ from the default "
     << "config's output; first at flat index " << first;
  if (t.is_float()) os << " (" << gv << " vs " << wv << ")";
  return os.str();
}

/// Argument sets of other layouts kept at once (Measurer::State::layouts).
constexpr size_t kMaxLayouts = 4;

}  // namespace

struct Measurer::State {
  bool prepared = false;
  std::vector<std::string> names;
  std::vector<bool> is_output;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<DataType> dtypes;
  std::vector<ArgSet> sets;
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

Measurer::Measurer(const Task& task, MeasureOptions opt)
    : task_(task), opt_(opt), st_(std::make_unique<State>()) {
  KILN_USER_CHECK(opt_.repeat >= 1) << "measure options: repeat must be >= 1, got " << opt_.repeat;
  KILN_USER_CHECK(opt_.timeout_s > 0) << "measure options: timeout_s must be positive";
  KILN_USER_CHECK(opt_.compile_timeout_s > 0)
      << "measure options: compile_timeout_s must be positive";
}

Measurer::~Measurer() = default;

namespace {

Prepared prepare(const Task& task, const Config& cfg,
                 const std::vector<std::vector<int64_t>>& shapes,
                 const std::vector<DataType>& dtypes) {
  Prepared p;
  try {
    p.inst = task.instantiate(cfg);
  } catch (const std::exception& e) {
    p.failure.error = ErrorKind::kInstantiate;
    p.failure.error_msg = e.what();
    return p;
  }
  // The same arguments (count, dtypes) as the default config's; their shapes may differ when
  // the config picks another layout.
  bool same = p.inst.args.size() == shapes.size();
  for (size_t i = 0; same && i < shapes.size(); ++i) same = p.inst.args[i]->dtype == dtypes[i];
  if (!same) {
    p.failure.error = ErrorKind::kInstantiate;
    p.failure.error_msg = "config " + cfg.str() +
                          ": the template's arguments differ in number or dtype from the default "
                          "config's";
    return p;
  }
  std::vector<std::vector<int64_t>> own;
  for (const te::Tensor& t : p.inst.args) {
    std::vector<int64_t> shape;
    for (const ir::Expr& e : t->shape) {
      auto v = ir::as_const_int(e);
      if (!v) {
        p.failure.error = ErrorKind::kInstantiate;
        p.failure.error_msg =
            "config " + cfg.str() + ": argument " + t.name() + " has a non-constant shape";
        return p;
      }
      shape.push_back(*v);
    }
    own.push_back(std::move(shape));
  }
  if (own != shapes) p.own_shapes = std::move(own);
  return p;
}

}  // namespace

RotationPlan plan_rotation(const MeasureOptions& opt, size_t set_bytes) {
  RotationPlan p;
  p.copies = static_cast<int>(
      std::clamp<size_t>((opt.rotate_bytes + set_bytes) / std::max<size_t>(1, set_bytes), 1,
                         static_cast<size_t>(std::max(1, opt.max_copies))));
  // At least one pass over every copy. A copy's inputs are first read in the measuring child by
  // its first call, which (after the compiles between two candidates) finds them in DRAM and
  // their pages not yet in the TLB: timing such first touches had measured ResNet-18's 7x7x512
  // conv2d at 3.5 ms against 2.05 ms inside the network (whose weights were last read one run,
  // ~45 MB, earlier), and had ranked its Winograd kernel ahead of the direct one, the reverse of
  // the network. After a pass each copy was last read one rotation (rotate_bytes) earlier, like
  // a layer's weights in a network of that size.
  p.warmup_calls = std::max(std::max(0, opt.warmup), p.copies);
  return p;
}

/// Times this thread was preempted so far (involuntary context switches).
long involuntary_switches() {
  struct rusage ru;
  return ::getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

/// A kernel and the rotated argument copies it runs on, called in turn.
struct Rotor {
  const runtime::PackedFunc* fn;
  Measurer::State* st;
  const MeasureOptions* opt;  ///< its clock times the calls
  size_t next = 0;
  void call(const ArgSet& s) const {
    fn->call_packed(s.values.data(), s.codes.data(), static_cast<int32_t>(s.values.size()));
  }
  void step() {
    call(st->sets[next]);
    next = (next + 1) % st->sets.size();
  }
  /// Writes every rotated output once: the sets were made in the parent, and the first write to
  /// each of their pages in a forked child is a copy-on-write fault (an 800 KB output: ~200
  /// faults, which had doubled the measured time of a 1.5 ms conv2d).
  void touch_outputs(size_t from) {
    for (size_t c = from; c < st->sets.size(); ++c)
      for (size_t i = 0; i < st->sets[c].arrays.size(); ++i)
        if (st->is_output[i]) poison(st->sets[c].arrays[i]);
  }
  /// The untimed calls before timing, then the calls per repeat: enough for min_repeat_ms,
  /// judged from one timed call.
  int warm_up(const MeasureOptions& opt) {
    const int warm = plan_rotation(opt, st->set_bytes).warmup_calls;
    for (int i = 0; i < warm; ++i) step();
    const double t0 = measure_now(*this->opt);
    step();
    double one = std::max(1e-9, measure_now(*this->opt) - t0);
    return static_cast<int>(
        std::clamp(std::ceil(opt.min_repeat_ms * 1e-3 / one), 1.0, double(opt.max_number)));
  }
  /// One timed repeat of `number` calls: seconds per call. With `rewarm`, an untimed call first
  /// (on a single copy, the other kernel's repeat in between has evicted its data).
  double repeat(int number, bool rewarm) {
    if (rewarm) step();
    const double t = measure_now(*opt);
    for (int k = 0; k < number; ++k) step();
    return (measure_now(*opt) - t) / number;
  }
};

/// The child's side: check run, warm-up, timed repeats (each followed by one of the reference,
/// when given); report as JSON (plus output bytes).
static void child_measure(int fd, const runtime::PackedFunc& fn, Measurer::State& st,
                          const MeasureOptions& opt, bool send_outputs,
                          const runtime::PackedFunc* ref_fn, Measurer::State* ref_st,
                          double slow_ref_s) {
  json rep;
  try {
    Rotor cand{&fn, &st, &opt};
    const ArgSet& s0 = st.sets[0];
    for (size_t i = 0; i < s0.arrays.size(); ++i)
      if (st.is_output[i]) poison(s0.arrays[i]);
    cand.call(s0);
    if (opt.check && !send_outputs) {
      for (size_t i = 0; i < s0.arrays.size(); ++i) {
        if (!st.is_output[i]) continue;
        std::string diff = compare(s0.arrays[i], st.reference[i], st.names[i], opt.rtol, opt.atol);
        if (!diff.empty()) {
          rep = {{"error", "wrong_result"}, {"message", diff}};
          std::string text = rep.dump();
          write_all(fd, text.data(), text.size());
          return;
        }
      }
    }
    cand.touch_outputs(1);
    cand.next = 1 % st.sets.size();
    std::optional<Rotor> ref;
    if (ref_fn) {
      ref.emplace(Rotor{ref_fn, ref_st, &opt});
      ref->touch_outputs(0);
    }
    const int number = cand.warm_up(opt);
    const int ref_number = ref ? ref->warm_up(opt) : 0;
    // A repeat (or pair) during which the thread was preempted is timed again, up to `repeat`
    // extra times: on a machine busy with other work a preemption that fell on the reference's
    // repeats alone had made a candidate look 13x faster than the default. A pair whose
    // reference ran slower than slow_ref_s (a slow period of the machine) is timed again until
    // slow_wait_s has passed (MeasureOptions::slow_wait_s).
    std::vector<double> runs, ref_runs;
    const double wait_until =
        measure_now(opt) + std::clamp(opt.slow_wait_s, 0.0, opt.timeout_s / 4);
    int slow_pairs = 0;
    for (int redo = 0; static_cast<int>(runs.size()) < opt.repeat;) {
      const long switches = involuntary_switches();
      const double c = cand.repeat(number, ref && st.sets.size() == 1);
      const double rr = ref ? ref->repeat(ref_number, ref_st->sets.size() == 1) : 0;
      if (involuntary_switches() != switches && redo++ < opt.repeat) continue;
      if (ref && slow_ref_s > 0 && rr > slow_ref_s && measure_now(opt) < wait_until) {
        ++slow_pairs;
        continue;
      }
      runs.push_back(c);
      if (ref) ref_runs.push_back(rr);
    }
    rep = {{"runs", runs}, {"number", number}};
    if (ref) rep["ref_runs"] = ref_runs;
    if (slow_pairs) rep["slow_pairs"] = slow_pairs;
  } catch (const std::exception& e) {
    rep = {{"error", "runtime"}, {"message", e.what()}};
  }
  std::string text = rep.dump();
  write_all(fd, text.data(), text.size());
  if (send_outputs && !rep.contains("error")) {
    write_all(fd, "\0", 1);
    const ArgSet& s0 = st.sets[0];
    for (size_t i = 0; i < s0.arrays.size(); ++i) {
      if (st.is_output[i])
        write_all(fd, static_cast<const char*>(s0.arrays[i].data()), s0.arrays[i].nbytes());
    }
  }
}

/// Fills `st.sets` for `st.shapes` / `st.dtypes`: a first set of seeded random inputs and
/// poisoned outputs, and copies of it for rotation (together at least opt.rotate_bytes).
static void make_arg_sets(Measurer::State& st, const MeasureOptions& opt) {
  size_t set_bytes = 0;
  for (size_t i = 0; i < st.shapes.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : st.shapes[i]) n *= d;
    set_bytes += static_cast<size_t>(n) * st.dtypes[i].bytes();
  }
  st.set_bytes = set_bytes;
  const size_t copies = static_cast<size_t>(plan_rotation(opt, set_bytes).copies);
  std::mt19937 rng(opt.seed);
  for (size_t c = 0; c < copies; ++c) {
    ArgSet s;
    for (size_t i = 0; i < st.shapes.size(); ++i) {
      NDArray a = NDArray::empty(st.shapes[i], st.dtypes[i]);
      if (c == 0) {
        if (st.is_output[i]) {
          poison(a);
        } else {
          fill_random(a, rng);
        }
      } else {
        a.copy_from(st.sets[0].arrays[i].data(), a.nbytes());
      }
      KilnValue v;
      v.v_handle = a.raw();
      s.values.push_back(v);
      s.codes.push_back(kKilnArrayHandle);
      s.arrays.push_back(a);
    }
    st.sets.push_back(std::move(s));
  }
}

namespace {

/// A measurement report (ChildOutcome of the measuring part) as a MeasureResult; for the
/// default config (`outputs` set) also the output bytes after the report's NUL.
MeasureResult interpret(const ChildOutcome& oc, const MeasureOptions& opt, std::string* outputs) {
  MeasureResult r;
  if (oc.status == ChildOutcome::kSignaled) {
    r.error = ErrorKind::kCrash;
    r.error_msg = "the candidate's process was " + oc.describe();
    return r;
  }
  if (oc.status == ChildOutcome::kTimedOut) {
    std::ostringstream os;
    os << "the candidate ran longer than the time limit (" << opt.timeout_s << " s) and was killed";
    r.error = ErrorKind::kTimeout;
    r.error_msg = os.str();
    return r;
  }
  if (oc.status == ChildOutcome::kForkFailed) {
    r.error = ErrorKind::kOther;
    r.error_msg = "the measurement process " + oc.describe();
    return r;
  }
  size_t nul = oc.payload.find('\0');
  json rep = json::parse(oc.payload.substr(0, nul), nullptr, /*allow_exceptions=*/false);
  if (!rep.is_object()) {
    r.error = ErrorKind::kOther;
    r.error_msg = "the candidate's process " + oc.describe() + " without a report";
    return r;
  }
  if (rep.contains("error") && rep["error"].is_string()) {
    r.error = parse_error_kind(rep["error"].get<std::string>());
    r.error_msg = rep.value("message", std::string());
    return r;
  }
  if (!rep.contains("runs") || !rep["runs"].is_array() || rep["runs"].empty()) {
    r.error = ErrorKind::kOther;
    r.error_msg = "the candidate's process " + oc.describe() + " with an incomplete report";
    return r;
  }
  for (const json& x : rep["runs"]) r.runs.push_back(x.is_number() ? x.get<double>() : 0.0);
  if (rep.contains("ref_runs") && rep["ref_runs"].is_array()) {
    for (const json& x : rep["ref_runs"])
      r.ref_runs.push_back(x.is_number() ? x.get<double>() : 0.0);
  }
  if (rep.contains("slow_pairs") && rep["slow_pairs"].is_number_integer())
    r.slow_pairs = rep["slow_pairs"].get<int>();
  double sum = 0, sq = 0;
  for (double x : r.runs) sum += x;
  r.mean_s = sum / r.runs.size();
  for (double x : r.runs) sq += (x - r.mean_s) * (x - r.mean_s);
  r.std_s = std::sqrt(sq / r.runs.size());
  if (outputs) {
    *outputs = nul == std::string::npos ? std::string() : oc.payload.substr(nul + 1);
  }
  return r;
}

/// What to measure: an instantiated candidate, the argument copies it runs on and how.
struct Job {
  const Prepared* cand;
  Measurer::State* st;
  MeasureOptions opt;
  bool send_outputs = false;
  /// The reference timed after each repeat (MeasureOptions::reference): the parent's compiled
  /// default (`ref_fn`), or with `ref_self` the candidate itself (the default's measurement);
  /// on arguments of its own (`ref_st`). None when ref_st is null.
  const runtime::PackedFunc* ref_fn = nullptr;
  bool ref_self = false;
  Measurer::State* ref_st = nullptr;
  /// A pair whose reference repeat is slower than this is timed again (0: never); see
  /// MeasureOptions::slow_wait_s.
  double slow_ref_s = 0;
};

/// The child process of one candidate. It compiles, writes one line to its pipe
/// ({"compile_s": s} and, when compiling threw, "compile_error"), waits for the parent's go
/// byte, then measures and reports like run_in_child's body.
struct CandidateChild {
  pid_t pid = -1;
  int from_child = -1;  ///< the child's reports
  int to_child = -1;    ///< the go byte
  ChildOutcome outcome;
  bool compiled = false;     ///< its compile line has arrived
  bool ended = false;        ///< reaped already (it died or was killed while compiling)
  bool fork_failed = false;  ///< never started
  double compile_s = 0;
  std::string compile_error;

  void close_pipes() {
    if (from_child >= 0) ::close(from_child);
    if (to_child >= 0) ::close(to_child);
    from_child = to_child = -1;
  }
};

/// Forks `kid`'s child for `job`; `siblings` (kid among them) are the batch's children, whose
/// pipe ends the new child closes.
void spawn(CandidateChild& kid, const Job& job, const Task& task,
           const std::vector<CandidateChild>& siblings) {
  int up[2], down[2];
  if (::pipe2(up, O_CLOEXEC) != 0) {
    kid.fork_failed = true;
    kid.outcome.code = errno;
    return;
  }
  if (::pipe2(down, O_CLOEXEC) != 0) {
    kid.fork_failed = true;
    kid.outcome.code = errno;
    ::close(up[0]);
    ::close(up[1]);
    return;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    kid.fork_failed = true;
    kid.outcome.code = errno;
    for (int fd : {up[0], up[1], down[0], down[1]}) ::close(fd);
    return;
  }
  if (pid == 0) {
    ::close(up[0]);
    ::close(down[1]);
    for (const CandidateChild& o : siblings) {  // inherited pipe ends of earlier siblings
      if (o.from_child >= 0) ::close(o.from_child);
      if (o.to_child >= 0) ::close(o.to_child);
    }
    no_core_dumps();
    auto t0 = Clock::now();
    runtime::Module mod;
    runtime::PackedFunc fn;
    json line;
    try {
      mod =
          kiln::build(job.cand->inst.sch, job.cand->inst.args, task.build_target, "kiln_candidate");
      fn = mod.get_function("kiln_candidate");
    } catch (const std::exception& e) {
      line["compile_error"] = e.what();
    }
    line["compile_s"] = seconds_since(t0);
    std::string text = line.dump() + "\n";
    write_all(up[1], text.data(), text.size());
    if (line.contains("compile_error")) ::_exit(0);
    char go = 0;
    ssize_t n;
    while ((n = ::read(down[0], &go, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1) ::_exit(0);  // the parent gave up on it
    int code = run_body(
        [&](int fd) {
          const runtime::PackedFunc* ref = job.ref_st ? (job.ref_self ? &fn : job.ref_fn) : nullptr;
          child_measure(fd, fn, *job.st, job.opt, job.send_outputs, ref, job.ref_st,
                        job.slow_ref_s);
        },
        up[1]);
    ::close(up[1]);
    ::_exit(code);
  }
  ::close(up[1]);
  ::close(down[0]);
  kid.pid = pid;
  kid.from_child = up[0];
  kid.to_child = down[1];
}

/// Waits until every child has written its compile line, or died, or the compile time limit
/// passed (those still compiling are killed).
void wait_compiled(std::vector<CandidateChild>& kids, double limit_s) {
  auto deadline = after(limit_s);
  char buf[4096];
  for (;;) {
    std::vector<struct pollfd> fds;
    std::vector<CandidateChild*> who;
    for (CandidateChild& k : kids) {
      if (k.fork_failed || k.ended || k.compiled) continue;
      fds.push_back({k.from_child, POLLIN, 0});
      who.push_back(&k);
    }
    if (fds.empty()) return;
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) {
      for (CandidateChild* k : who) {
        // collect() with a past deadline kills and reaps it.
        collect(k->pid, k->from_child, Clock::now(), k->outcome);
        k->from_child = -1;
        k->close_pipes();
        k->ended = true;
      }
      return;
    }
    int r = ::poll(fds.data(), fds.size(), static_cast<int>(std::ceil(left * 1000)));
    if (r <= 0) continue;  // EINTR or the deadline: the loop re-checks
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      CandidateChild& k = *who[i];
      ssize_t n = ::read(k.from_child, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) k.outcome.payload.append(buf, static_cast<size_t>(n));
      size_t eol = k.outcome.payload.find('\n');
      if (eol != std::string::npos) {
        json line = json::parse(k.outcome.payload.substr(0, eol), nullptr, false);
        k.outcome.payload.erase(0, eol + 1);
        k.compiled = true;
        if (line.is_object()) {
          k.compile_s = line.value("compile_s", 0.0);
          if (line.contains("compile_error"))
            k.compile_error = line["compile_error"].get<std::string>();
        } else {
          k.compile_error = "the compile report was unreadable";
        }
      } else if (n <= 0) {  // EOF before the line: it died while compiling
        collect(k.pid, k.from_child, after(10), k.outcome);
        k.from_child = -1;
        k.close_pipes();
        k.ended = true;
      }
    }
  }
}

/// Writes the go byte to a waiting child. A child that has died meanwhile must not take the
/// tuner with it: SIGPIPE is blocked for the write, and one it raised is consumed (the child's
/// end then shows as what it was when collected).
void send_go(int fd) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  const char go = 1;
  ssize_t n;
  while ((n = ::write(fd, &go, 1)) < 0 && errno == EINTR) {
  }
  if (n < 0 && errno == EPIPE) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

/// Runs one batch of `jobs` (the caller passes at most build_threads): their children compile
/// at once, then measure one at a time. `outputs`, for a single job with send_outputs,
/// receives its output bytes.
std::vector<MeasureResult> run_jobs(const std::vector<Job>& jobs, const Task& task,
                                    const MeasureOptions& opt, std::string* outputs) {
  std::vector<MeasureResult> results(jobs.size());
  std::vector<CandidateChild> kids(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) spawn(kids[i], jobs[i], task, kids);
  wait_compiled(kids, opt.compile_timeout_s);
  for (size_t i = 0; i < jobs.size(); ++i) {
    CandidateChild& k = kids[i];
    MeasureResult& r = results[i];
    std::ostringstream os;
    if (k.fork_failed) {
      r.error = ErrorKind::kOther;
      r.error_msg = std::string("the candidate's process could not be started (fork failed: ") +
                    std::strerror(k.outcome.code) + ")";
    } else if (k.ended) {
      r.error = ErrorKind::kCompile;
      if (k.outcome.status == ChildOutcome::kTimedOut)
        os << "compiling took longer than the compile time limit (" << opt.compile_timeout_s
           << " s); the compiling process was killed";
      else if (k.outcome.status == ChildOutcome::kSignaled)
        os << "the compiler crashed: its process was " << k.outcome.describe();
      else
        os << "the compiling process " << k.outcome.describe() << " before it had compiled";
      r.error_msg = os.str();
      if (k.outcome.status == ChildOutcome::kTimedOut) r.compile_s = opt.compile_timeout_s;
    } else if (!k.compile_error.empty()) {
      k.close_pipes();
      int status = 0;
      while (::waitpid(k.pid, &status, 0) < 0 && errno == EINTR) {
      }
      r.error = ErrorKind::kCompile;
      r.error_msg = k.compile_error;
      r.compile_s = k.compile_s;
    } else {
      send_go(k.to_child);
      ::close(k.to_child);
      k.to_child = -1;
      collect(k.pid, k.from_child, after(jobs[i].opt.timeout_s), k.outcome);
      k.from_child = -1;
      r = interpret(k.outcome, jobs[i].opt, jobs[i].send_outputs ? outputs : nullptr);
      r.compile_s = k.compile_s;
    }
  }
  for (CandidateChild& k : kids) k.close_pipes();
  return results;
}

}  // namespace

double slow_reference_limit(const std::vector<double>& ref_seen, const MeasureOptions& opt) {
  if (opt.slow_wait_s <= 0 || opt.slow_factor <= 0) return 0;
  return tenth_percentile(ref_seen) * opt.slow_factor;
}

const MeasureResult& Measurer::default_result() {
  State& st = *st_;
  if (st.prepared) return st.default_result;
  Instance dflt = task_.instantiate(Config::fallback());
  for (const te::Tensor& t : dflt.args) {
    st.names.push_back(t.name());
    st.is_output.push_back(t->op->kind != te::OpKind::kPlaceholder);
    st.dtypes.push_back(t->dtype);
    std::vector<int64_t> shape;
    for (const ir::Expr& e : t->shape) {
      auto v = ir::as_const_int(e);
      KILN_USER_CHECK(v.has_value())
          << "measure " << task_.key() << ": argument " << t.name() << " has a non-constant shape";
      shape.push_back(*v);
    }
    st.shapes.push_back(shape);
  }
  make_arg_sets(st, opt_);
  if (opt_.reference) {
    st.ref_args = std::make_unique<State>();
    State& ra = *st.ref_args;
    ra.names = st.names;
    ra.is_output = st.is_output;
    ra.dtypes = st.dtypes;
    ra.shapes = st.shapes;
    make_arg_sets(ra, opt_);
  }
  Prepared p = prepare(task_, Config::fallback(), st.shapes, st.dtypes);
  MeasureResult r = p.failure;
  std::string outputs;
  if (r.ok()) {
    Job job{&p, &st, opt_, true};
    job.ref_self = true;  // paired with itself, so that its relative() is ~1 like the others'
    job.ref_st = st.ref_args.get();
    r = run_jobs({job}, task_, opt_, &outputs)[0];
  }
  KILN_USER_CHECK(r.ok()) << "measure " << task_.key() << ": the default config failed ("
                          << error_kind_name(r.error) << "): " << r.error_msg
                          << "; its output is the reference candidates are checked against";
  st.reference.resize(st.shapes.size());
  size_t off = 0;
  for (size_t i = 0; i < st.shapes.size(); ++i) {
    if (!st.is_output[i]) continue;
    size_t n = st.sets[0].arrays[i].nbytes();
    KILN_ICHECK(off + n <= outputs.size()) << "measure: the default's output report is short";
    st.reference[i] = outputs.substr(off, n);
    off += n;
  }
  if (opt_.reference) {
    // Compiled here once (it just compiled and ran in a child); every child inherits the code.
    st.ref_module = kiln::build(p.inst.sch, p.inst.args, task_.build_target, "kiln_reference");
    st.ref_fn = st.ref_module.get_function("kiln_reference");
  }
  st.ref_seen = r.ref_runs;
  st.default_result = r;
  st.prepared = true;
  return st.default_result;
}

std::vector<MeasureResult> Measurer::measure(const std::vector<Config>& configs) {
  default_result();
  State& st = *st_;
  std::vector<MeasureResult> results(configs.size());
  MeasureOptions unchecked = opt_;
  unchecked.check = false;
  // A chunk of build_threads candidates at a time (run_jobs compiles that many at once), so
  // that at most kMaxLayouts argument copies of other layouts, plus the chunk's, exist at once.
  const size_t chunk = static_cast<size_t>(std::max(1, opt_.build_threads));
  const bool gate = opt_.reference && opt_.slow_wait_s > 0;  // MeasureOptions::slow_wait_s
  for (size_t begin = 0; begin < configs.size(); begin += chunk) {
    const size_t end = std::min(configs.size(), begin + chunk);
    std::vector<Prepared> cands;
    cands.reserve(end - begin);
    std::vector<Job> jobs;
    std::vector<size_t> job_of;
    const double slow_ref_s = gate ? slow_reference_limit(st.ref_seen, opt_) : 0;
    for (size_t i = begin; i < end; ++i) {
      cands.push_back(prepare(task_, configs[i], st.shapes, st.dtypes));
      const Prepared& p = cands.back();
      if (!p.failure.ok()) {
        results[i] = p.failure;
        continue;
      }
      if (p.own_shapes.empty()) {
        jobs.push_back({&p, &st, opt_});
      } else {
        // Another layout of the same tensors: its own seeded inputs, and no comparison with
        // the default's output (whose elements are in another order).
        std::unique_ptr<State>& alt = st.layouts[p.own_shapes];
        if (!alt) {
          alt = std::make_unique<State>();
          alt->names = st.names;
          alt->is_output = st.is_output;
          alt->dtypes = st.dtypes;
          alt->shapes = p.own_shapes;
          make_arg_sets(*alt, opt_);
          st.layout_order.push_back(p.own_shapes);
        }
        jobs.push_back({&p, alt.get(), unchecked});
      }
      if (opt_.reference) {
        jobs.back().ref_fn = &st.ref_fn;
        jobs.back().ref_st = st.ref_args.get();
        jobs.back().slow_ref_s = slow_ref_s;
      }
      job_of.push_back(i);
    }
    std::vector<MeasureResult> measured = run_jobs(jobs, task_, opt_, nullptr);
    for (size_t j = 0; j < jobs.size(); ++j) {
      const MeasureResult& r = measured[j];
      if (gate && r.ok() && r.ref_runs.size() == r.runs.size())
        st.ref_seen.insert(st.ref_seen.end(), r.ref_runs.begin(), r.ref_runs.end());
      results[job_of[j]] = std::move(measured[j]);
    }
    // Only now: the chunk's jobs pointed at their copies.
    while (st.layout_order.size() > kMaxLayouts) {
      st.layouts.erase(st.layout_order.front());
      st.layout_order.pop_front();
    }
  }
  return results;
}

}  // namespace kiln::autotune
