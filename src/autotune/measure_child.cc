// The measuring child's side (autotune/measure.h): argument sets (seeded random inputs,
// poisoned outputs, copies for rotation through the cache, plan_rotation), the check of a
// candidate's outputs against the default config's bytes, and the timing loop -- warm-up over
// every copy, repeats of enough calls for min_repeat_ms on MeasureOptions::clock, each paired
// with a repeat of the reference when given, a repeat retimed when the thread was preempted or
// (slow_wait_s) when the reference ran in a slow period of the machine.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "measure_internal.h"

namespace kiln::autotune {

using nlohmann::json;
using runtime::NDArray;

namespace detail {

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

}  // namespace detail

RotationPlan plan_rotation(const MeasureOptions& opt, size_t set_bytes) {
  RotationPlan p;
  // Nothing rotated (set_bytes 0: no argument is a weight): one set.
  p.copies =
      set_bytes == 0
          ? 1
          : static_cast<int>(std::clamp<size_t>((opt.rotate_bytes + set_bytes) / set_bytes, 1,
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

namespace {

using detail::ArgSet;
using detail::measure_now;
using detail::poison;

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

}  // namespace

namespace detail {

/// The child's side: check run, warm-up, timed repeats (each followed by one of the reference,
/// when given); report as JSON (plus output bytes).
void child_measure(int fd, const runtime::PackedFunc& fn, Measurer::State& st,
                   const MeasureOptions& opt, bool send_outputs, const runtime::PackedFunc* ref_fn,
                   Measurer::State* ref_st, double slow_ref_s) {
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
void make_arg_sets(Measurer::State& st, const MeasureOptions& opt) {
  // The rotation spans the rotated arguments only; the others are shared by every set.
  size_t set_bytes = 0;
  for (size_t i = 0; i < st.shapes.size(); ++i) {
    if (!st.rotated[i]) continue;
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
      NDArray a;
      if (c > 0 && !st.rotated[i]) {
        a = st.sets[0].arrays[i];  // one copy, shared: hot in the cache
      } else if (c == 0) {
        a = NDArray::empty(st.shapes[i], st.dtypes[i]);
        if (st.is_output[i]) {
          poison(a);
        } else {
          fill_random(a, rng);
        }
      } else {
        a = NDArray::empty(st.shapes[i], st.dtypes[i]);
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

}  // namespace detail
}  // namespace kiln::autotune
