// Measurement. Each candidate gets a forked child of its own, which compiles it (kiln::build,
// its own LLVM context), reports that it compiled, waits for the parent's go, then runs the
// check / warm-up / timed repeats and writes a JSON report (plus, for the default config, the
// raw output bytes after a NUL) to a pipe. The parent instantiates the candidate first (cheap,
// and it decides which argument copies the child inherits), runs up to build_threads children
// compiling at once under the compile time limit, then lets them measure one at a time under
// the run time limit, so no compile runs while a candidate is timed. A compiler that crashes or
// runs past its limit costs one child, never the tuner. The child times its calls with
// MeasureOptions::clock (steady_clock unless a test injects a fake one); the limits on the
// children's time always use the real clock. This file holds the parent's side (instantiating,
// scheduling the children, interpreting their reports); measure_child.cc the child's timing loop
// and argument sets; measure_process.cc the fork / pipe / reap plumbing (run_in_child).
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
#include "measure_internal.h"

namespace kiln::autotune {

using detail::after;
using detail::child_measure;
using detail::Clock;
using detail::collect;
using detail::make_arg_sets;
using detail::no_core_dumps;
using detail::run_body;
using detail::seconds_since;
using detail::write_all;
using nlohmann::json;
using runtime::NDArray;

namespace {

/// A candidate instantiated in the parent (or why it could not be).
struct Prepared {
  Instance inst;
  MeasureResult failure;  ///< error set when instantiating failed
  /// The candidate's argument shapes when they differ from the default config's (a config that
  /// picks another data layout, e.g. other channel blocks); empty when they are the same.
  std::vector<std::vector<int64_t>> own_shapes;
};

/// Argument sets of other layouts kept at once (Measurer::State::layouts).
constexpr size_t kMaxLayouts = 4;

}  // namespace

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
  KILN_USER_CHECK(dflt.weights.empty() || dflt.weights.size() == dflt.args.size())
      << "measure " << task_.key() << ": the template marks " << dflt.weights.size()
      << " arguments as weights or not, but has " << dflt.args.size();
  for (size_t i = 0; i < dflt.args.size(); ++i) {
    const te::Tensor& t = dflt.args[i];
    st.rotated.push_back(dflt.weights.empty() || dflt.weights[i]);
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
    ra.rotated = st.rotated;
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
          alt->rotated = st.rotated;
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
