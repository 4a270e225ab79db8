// Helpers for topi operator tests: seeded random arrays (never zero), poisoned outputs,
// comparison with a tolerance by dtype, and a checker that builds a group of outputs twice —
// with the default te schedule and with a topi schedule — and compares every output with an
// independent naive reference. Adapted from tests/e2e/e2e_util.h, with bool support.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/ndarray_access.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/device_api.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/support/error.h"
#include "kiln/target/build.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/tir/lower.h"
#include "kiln/topi/schedule_injective.h"

namespace kiln::topi::testing {

using runtime::NDArray;
using Shape = std::vector<int64_t>;

const DataType f32 = DataType::Float(32);
const DataType i32 = DataType::Int(32);
const DataType i64 = DataType::Int(64);
const DataType boolean = DataType::Bool();

inline const Target& host_target() {
  static const Target t("llvm -mcpu=native");
  return t;
}

inline Shape shape_of(const te::Tensor& t) {
  Shape s;
  for (const ir::Expr& e : t->shape) s.push_back(*ir::as_const_int(e));
  return s;
}

using ::kiln::testing::element;
using ::kiln::testing::set_element;

/// Seeded random array: floats uniform in [lo, hi] with |x| >= 0.05; ints in [lo, hi] except 0
/// (when the range has anything else); bools random.
inline NDArray random_array(Shape shape, DataType t, uint32_t seed, double lo = -1.0,
                            double hi = 1.0) {
  NDArray a = NDArray::empty(std::move(shape), t);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (t.is_bool()) {
      set_element(a, i, rng() & 1);
    } else if (t.is_float()) {
      std::uniform_real_distribution<double> d(lo, hi);
      double v;
      do v = d(rng);
      while (std::abs(v) < 0.05 && (hi > 0.05 || lo < -0.05));
      set_element(a, i, v);
    } else {
      std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
      int64_t v;
      do v = d(rng);
      while (v == 0 && (lo < 0 || hi > 0));
      set_element(a, i, static_cast<double>(v));
    }
  }
  return a;
}

inline NDArray poisoned(Shape shape, DataType t) {
  NDArray a = NDArray::empty(std::move(shape), t);
  if (t == DataType::Float(32)) {
    for (int64_t i = 0; i < a.numel(); ++i)
      a.data_as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  } else {
    std::memset(a.data(), 0xCD, a.nbytes());
  }
  return a;
}

inline int64_t flat(const Shape& shape, const Shape& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

inline Shape unflat(const Shape& shape, int64_t f) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = f % shape[d];
    f /= shape[d];
  }
  return idx;
}

inline double at(const NDArray& a, const Shape& idx) { return element(a, flat(a.shape(), idx)); }

/// An array whose element at each multi-index is f(index).
template <typename F>
NDArray reference(Shape shape, DataType t, F&& f) {
  NDArray a = NDArray::empty(shape, t);
  for (int64_t i = 0; i < a.numel(); ++i) set_element(a, i, f(unflat(shape, i)));
  return a;
}

/// Numpy broadcasting read: element of `a` for an output index (trailing alignment).
inline double bcast_at(const NDArray& a, const Shape& out_idx) {
  const Shape& s = a.shape();
  Shape idx(s.size());
  size_t off = out_idx.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) idx[d] = s[d] == 1 ? 0 : out_idx[off + d];
  return at(a, idx);
}

struct Tolerance {
  double rtol = -1, atol = -1;
};

inline ::testing::AssertionResult all_close(const NDArray& got, const NDArray& want,
                                            Tolerance tol = {}) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << got.dtype() << " vs " << want.dtype();
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << runtime::shape_str(got.shape()) << " vs "
                                         << runtime::shape_str(want.shape());
  DataType t = got.dtype();
  double rtol = tol.rtol >= 0 ? tol.rtol : t.is_float() ? 1e-5 : 0;
  double atol = tol.atol >= 0 ? tol.atol : t.is_float() ? 1e-5 : 0;
  int64_t bad = 0;
  std::ostringstream os;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = element(got, i), w = element(want, i);
    bool ok = t.is_float() ? (std::isfinite(w) ? std::abs(g - w) <= atol + rtol * std::abs(w)
                                               : (std::isnan(w) ? std::isnan(g) : g == w))
                           : g == w;
    if (!ok) {
      if (bad < 6)
        os << "\n  at " << runtime::shape_str(unflat(got.shape(), i)) << ": got " << g
           << ", expected " << w;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.numel() << " elements differ" << os.str();
}

inline void call(const runtime::PackedFunc& f, const std::vector<NDArray>& args) {
  std::vector<KilnValue> v(args.size() + 1);
  std::vector<int32_t> c(args.size() + 1);
  for (size_t i = 0; i < args.size(); ++i) {
    v[i].v_handle = args[i].raw();
    c[i] = kKilnArrayHandle;
  }
  f.call_packed(v.data(), c.data(), static_cast<int32_t>(args.size()));
}

/// Builds `s` with `inputs` then `outs` as arguments for `target` and runs it once on `data`
/// (host arrays) on `dev`: inputs and poisoned outputs are copied there, the outputs back.
inline std::vector<NDArray> run(const te::Schedule& s, const std::vector<te::Tensor>& inputs,
                                const std::vector<te::Tensor>& outs,
                                const std::vector<NDArray>& data,
                                const Target& target = host_target(),
                                runtime::Device dev = runtime::Device::cpu()) {
  std::vector<te::Tensor> args = inputs;
  args.insert(args.end(), outs.begin(), outs.end());
  runtime::Module m = build(s, args, target, "f");
  std::vector<NDArray> all, res;
  for (const NDArray& d : data) all.push_back(dev.type == kKilnCPU ? d : d.to(dev));
  for (const te::Tensor& t : outs) {
    NDArray p = poisoned(shape_of(t), t->dtype);
    res.push_back(dev.type == kKilnCPU ? p : p.to(dev));
    all.push_back(res.back());
  }
  call(m.get_function("f"), all);
  if (dev.type != kKilnCPU) {
    runtime::device_synchronize(dev);
    for (NDArray& r : res) r = r.to(runtime::Device::cpu());
  }
  return res;
}

using ScheduleFn = std::function<te::Schedule(const std::vector<te::Tensor>&, const Target&)>;

/// Runs `outs` under the default schedule and under `sched` and compares each output with
/// `want` (the lowered IR of the topi schedule is printed on a mismatch).
inline void check(const std::vector<te::Tensor>& inputs, const std::vector<te::Tensor>& outs,
                  const std::vector<NDArray>& data, const std::vector<NDArray>& want,
                  const ScheduleFn& sched = schedule_injective, Tolerance tol = {}) {
  ASSERT_EQ(outs.size(), want.size());
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "default schedule" : "topi schedule");
    te::Schedule s = variant == 0 ? te::create_schedule(outs) : sched(outs, host_target());
    std::vector<NDArray> got;
    try {
      got = run(s, inputs, outs, data);
    } catch (const Error& e) {
      ADD_FAILURE() << "build/run failed: " << e.what();
      return;
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      std::vector<te::Tensor> args = inputs;
      args.insert(args.end(), outs.begin(), outs.end());
      EXPECT_TRUE(all_close(got[k], want[k], tol))
          << "output " << outs[k].name() << "\n"
          << (variant ? tir::to_string(lower(s, args, "f")) : "");
    }
  }
}

/// The message of the kiln::Error `f` throws (a test failure when none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no kiln::Error thrown";
  return "";
}

inline te::Tensor input(const Shape& s, DataType t, const std::string& name) {
  std::vector<ir::Expr> e;
  for (int64_t v : s) e.push_back(ir::Expr(static_cast<int32_t>(v)));
  return te::placeholder(e, t, name);
}

}  // namespace kiln::topi::testing
