// Measurement. The parent compiles a batch of candidates on a few threads (each kiln::build has
// its own LLVM context; the function is resolved, and so JIT-materialized, before any fork),
// then forks one child per candidate. The child inherits the compiled code and the argument
// copies, runs the check / warm-up / timed repeats, and writes a JSON report (plus, for the
// default config, the raw output bytes after a NUL) to a pipe; the parent polls the pipe with a
// deadline and classifies the child's end (exit, signal, timeout). No compile threads are alive
// while a child is forked.
#include "kiln/autotune/measure.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

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

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
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
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    int code = 0;
    try {
      body(fds[1]);
    } catch (const std::exception& e) {
      std::string msg = json({{"error", "other"}, {"message", e.what()}}).dump();
      write_all(fds[1], msg.data(), msg.size());
      code = 3;
    } catch (...) {
      code = 4;
    }
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  char buf[65536];
  for (;;) {
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::ceil(left * 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // the loop re-checks the deadline
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed its end (exited)
    out.payload.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
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
  return out;
}

// ---------------------------------------------------------------------------------------------

namespace {

/// One compiled candidate (or why it is not).
struct Built {
  runtime::Module mod;
  runtime::PackedFunc fn;
  MeasureResult failure;  ///< error set when compiling failed
  double compile_s = 0;
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
  std::vector<std::string> reference;  ///< per argument (outputs only): the default's bytes
  MeasureResult default_result;
  /// Argument sets of candidates whose arguments have other shapes than the default's (another
  /// layout of the same tensors), one per shape list: random inputs, no reference.
  std::map<std::vector<std::vector<int64_t>>, std::unique_ptr<State>> layouts;
  /// The layouts' keys, oldest first: at most kMaxLayouts are kept (each holds rotate_bytes of
  /// arguments; a random search over channel blocks visited dozens and grew to 3 GB).
  std::deque<std::vector<std::vector<int64_t>>> layout_order;
};

Measurer::Measurer(const Task& task, MeasureOptions opt)
    : task_(task), opt_(opt), st_(std::make_unique<State>()) {
  KILN_USER_CHECK(opt_.repeat >= 1) << "measure options: repeat must be >= 1, got " << opt_.repeat;
  KILN_USER_CHECK(opt_.timeout_s > 0) << "measure options: timeout_s must be positive";
}

Measurer::~Measurer() = default;

namespace {

Built compile(const Task& task, const Config& cfg, const std::vector<std::vector<int64_t>>& shapes,
              const std::vector<DataType>& dtypes) {
  Built b;
  auto t0 = Clock::now();
  Instance inst;
  try {
    inst = task.instantiate(cfg);
  } catch (const std::exception& e) {
    b.failure.error = ErrorKind::kInstantiate;
    b.failure.error_msg = e.what();
    return b;
  }
  // The same arguments (count, dtypes) as the default config's; their shapes may differ when
  // the config picks another layout.
  bool same = inst.args.size() == shapes.size();
  for (size_t i = 0; same && i < shapes.size(); ++i) same = inst.args[i]->dtype == dtypes[i];
  if (!same) {
    b.failure.error = ErrorKind::kInstantiate;
    b.failure.error_msg = "config " + cfg.str() +
                          ": the template's arguments differ in number or dtype from the default "
                          "config's";
    return b;
  }
  std::vector<std::vector<int64_t>> own;
  for (const te::Tensor& t : inst.args) {
    std::vector<int64_t> shape;
    for (const ir::Expr& e : t->shape) {
      auto v = ir::as_const_int(e);
      if (!v) {
        b.failure.error = ErrorKind::kInstantiate;
        b.failure.error_msg =
            "config " + cfg.str() + ": argument " + t.name() + " has a non-constant shape";
        return b;
      }
      shape.push_back(*v);
    }
    own.push_back(std::move(shape));
  }
  if (own != shapes) b.own_shapes = std::move(own);
  try {
    b.mod = kiln::build(inst.sch, inst.args, task.build_target, "kiln_candidate");
    b.fn = b.mod.get_function("kiln_candidate");
  } catch (const std::exception& e) {
    b.failure.error = ErrorKind::kCompile;
    b.failure.error_msg = e.what();
  }
  b.compile_s = seconds_since(t0);
  b.failure.compile_s = b.compile_s;
  return b;
}

}  // namespace

/// The child's side: check run, warm-up, timed repeats; report as JSON (plus output bytes).
static void child_measure(int fd, const runtime::PackedFunc& fn, Measurer::State& st,
                          const MeasureOptions& opt, bool send_outputs) {
  auto call = [&](const ArgSet& s) {
    fn.call_packed(s.values.data(), s.codes.data(), static_cast<int32_t>(s.values.size()));
  };
  json rep;
  try {
    const ArgSet& s0 = st.sets[0];
    for (size_t i = 0; i < s0.arrays.size(); ++i)
      if (st.is_output[i]) poison(s0.arrays[i]);
    call(s0);
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
    // Write every rotated output once before timing: the sets were made in the parent, and the
    // first write to each of their pages in this forked child is a copy-on-write fault (an
    // 800 KB output: ~200 faults, which had doubled the measured time of a 1.5 ms conv2d).
    for (size_t c = 1; c < st.sets.size(); ++c)
      for (size_t i = 0; i < st.sets[c].arrays.size(); ++i)
        if (st.is_output[i]) poison(st.sets[c].arrays[i]);
    size_t next = 1 % st.sets.size();
    auto step = [&] {
      call(st.sets[next]);
      next = (next + 1) % st.sets.size();
    };
    for (int i = 0; i < opt.warmup; ++i) step();
    // Calls per repeat: enough for min_repeat_ms, judged from one timed call.
    auto t0 = Clock::now();
    step();
    double one = std::max(1e-9, seconds_since(t0));
    int number = static_cast<int>(
        std::clamp(std::ceil(opt.min_repeat_ms * 1e-3 / one), 1.0, double(opt.max_number)));
    std::vector<double> runs;
    for (int r = 0; r < opt.repeat; ++r) {
      auto t = Clock::now();
      for (int k = 0; k < number; ++k) step();
      runs.push_back(seconds_since(t) / number);
    }
    rep = {{"runs", runs}, {"number", number}};
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

namespace {

/// Runs a compiled candidate in a child and turns what happened into a MeasureResult; for the
/// default config (`outputs` set) also returns the output bytes.
MeasureResult run_candidate(const Built& b, Measurer::State& st, const MeasureOptions& opt,
                            std::string* outputs) {
  MeasureResult r;
  r.compile_s = b.compile_s;
  ChildOutcome oc = run_in_child(
      [&](int fd) { child_measure(fd, b.fn, st, opt, outputs != nullptr); }, opt.timeout_s);
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

}  // namespace

/// Fills `st.sets` for `st.shapes` / `st.dtypes`: a first set of seeded random inputs and
/// poisoned outputs, and copies of it for rotation (together at least opt.rotate_bytes).
static void make_arg_sets(Measurer::State& st, const MeasureOptions& opt) {
  size_t set_bytes = 0;
  for (size_t i = 0; i < st.shapes.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : st.shapes[i]) n *= d;
    set_bytes += static_cast<size_t>(n) * st.dtypes[i].bytes();
  }
  size_t copies =
      std::clamp<size_t>((opt.rotate_bytes + set_bytes) / std::max<size_t>(1, set_bytes), 1,
                         static_cast<size_t>(std::max(1, opt.max_copies)));
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

const MeasureResult& Measurer::default_result() {
  State& st = *st_;
  if (st.prepared) return st.default_result;
  Instance dflt = task_.instantiate(Config::fallback());
  size_t set_bytes = 0;
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
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    set_bytes += static_cast<size_t>(n) * t->dtype.bytes();
  }
  (void)set_bytes;
  make_arg_sets(st, opt_);
  Built b = compile(task_, Config::fallback(), st.shapes, st.dtypes);
  MeasureResult r = b.failure;
  std::string outputs;
  if (r.ok()) r = run_candidate(b, st, opt_, &outputs);
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
  st.default_result = r;
  st.prepared = true;
  return st.default_result;
}

std::vector<MeasureResult> Measurer::measure(const std::vector<Config>& configs) {
  default_result();
  State& st = *st_;
  std::vector<Built> built(configs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < configs.size();)
      built[i] = compile(task_, configs[i], st.shapes, st.dtypes);
  };
  size_t nthreads = std::min<size_t>(std::max(1, opt_.build_threads), configs.size());
  std::vector<std::thread> threads;
  for (size_t t = 1; t < nthreads; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();

  std::vector<MeasureResult> results;
  for (Built& b : built) {
    if (!b.failure.ok()) {
      results.push_back(b.failure);
    } else if (b.own_shapes.empty()) {
      results.push_back(run_candidate(b, st, opt_, nullptr));
    } else {
      // Another layout of the same tensors: its own seeded inputs, and no comparison with the
      // default's output (whose elements are in another order).
      std::unique_ptr<State>& alt = st.layouts[b.own_shapes];
      if (!alt) {
        st.layout_order.push_back(b.own_shapes);
        if (st.layout_order.size() > kMaxLayouts) {
          st.layouts.erase(st.layout_order.front());
          st.layout_order.pop_front();
        }
        alt = std::make_unique<State>();
        alt->names = st.names;
        alt->is_output = st.is_output;
        alt->dtypes = st.dtypes;
        alt->shapes = b.own_shapes;
        make_arg_sets(*alt, opt_);
      }
      MeasureOptions unchecked = opt_;
      unchecked.check = false;
      results.push_back(run_candidate(b, *alt, unchecked, nullptr));
    }
    b = Built();  // release the module's code
  }
  return results;
}

}  // namespace kiln::autotune
