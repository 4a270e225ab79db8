// Helpers for end-to-end tests (te schedule -> lower -> LLVM -> run): seeded random arrays that
// are never zero, poisoned outputs, comparison with a tolerance chosen by dtype, and
// build-and-run shorthands.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/ndarray_access.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/support/error.h"
#include "kiln/target/build.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/tir/lower.h"

namespace kiln::e2e {

using runtime::NDArray;

/// The target every e2e test compiles for.
inline const Target& host_target() {
  static const Target t("llvm -mcpu=native");
  return t;
}

/// The static shape of a tensor (every extent must be a constant).
inline std::vector<int64_t> shape_of(const te::Tensor& t) {
  std::vector<int64_t> s;
  for (const ir::Expr& e : t->shape) {
    auto v = ir::as_const_int(e);
    KILN_ICHECK(v.has_value()) << "e2e: tensor " << t.name() << " has a non-constant shape";
    s.push_back(*v);
  }
  return s;
}

using ::kiln::testing::element;
using ::kiln::testing::set_element;

/// A seeded random array. Floats: uniform in [lo, hi] with |x| >= min_abs (never zero). Ints:
/// uniform integers in [lo, hi] except 0 (when the range holds anything else).
inline NDArray random_array(std::vector<int64_t> shape, DataType t, uint32_t seed, double lo = -1.0,
                            double hi = 1.0, double min_abs = 0.05) {
  NDArray a = NDArray::empty(std::move(shape), t);
  std::mt19937 rng(seed);
  if (t.is_float()) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = 0; i < a.numel(); ++i) {
      double v;
      do v = d(rng);
      while (std::abs(v) < min_abs && (hi > min_abs || lo < -min_abs));
      set_element(a, i, v);
    }
  } else {
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (int64_t i = 0; i < a.numel(); ++i) {
      int64_t v;
      do v = d(rng);
      while (v == 0 && (lo < 0 || hi > 0) && !(lo == 0 && hi == 0));
      set_element(a, i, static_cast<double>(v));
    }
  }
  return a;
}

/// Fills `a` with NaN (floats) or 0xCD bytes (everything else).
inline void poison(const NDArray& a) {
  if (a.dtype() == DataType::Float(32)) {
    for (int64_t i = 0; i < a.numel(); ++i)
      a.data_as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  } else if (a.dtype() == DataType::Float(64)) {
    for (int64_t i = 0; i < a.numel(); ++i)
      a.data_as<double>()[i] = std::numeric_limits<double>::quiet_NaN();
  } else {
    std::memset(a.data(), 0xCD, a.nbytes());
  }
}

/// A new poisoned array.
inline NDArray poisoned(std::vector<int64_t> shape, DataType t) {
  NDArray a = NDArray::empty(std::move(shape), t);
  poison(a);
  return a;
}

/// Row-major flat index.
inline int64_t flat(const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

/// Multi-index of a flat position.
inline std::vector<int64_t> unflat(const std::vector<int64_t>& shape, int64_t f) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = f % shape[d];
    f /= shape[d];
  }
  return idx;
}

/// Default tolerances by dtype: float32 rel+abs 1e-5 (scaled by `loose`), float64 1e-12, ints
/// exact.
struct Tolerance {
  double rtol = -1, atol = -1;  ///< negative: choose by dtype
};

/// Compares element-wise; the message names the first mismatches with their indices.
inline ::testing::AssertionResult all_close(const NDArray& got, const NDArray& want,
                                            Tolerance tol = {}) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure()
           << "dtype " << got.dtype() << " vs expected " << want.dtype();
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << runtime::shape_str(got.shape())
                                         << " vs expected " << runtime::shape_str(want.shape());
  DataType t = got.dtype();
  double rtol = tol.rtol, atol = tol.atol;
  if (rtol < 0) rtol = t == DataType::Float(64) ? 1e-12 : t.is_float() ? 1e-5 : 0;
  if (atol < 0) atol = t == DataType::Float(64) ? 1e-12 : t.is_float() ? 1e-5 : 0;
  int64_t bad = 0;
  std::ostringstream os;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = element(got, i), w = element(want, i);
    bool ok;
    if (t.is_float()) {
      ok = std::isfinite(g) == std::isfinite(w) &&
           (!std::isfinite(w) ? (std::isnan(g) == std::isnan(w) && (std::isnan(g) || g == w))
                              : std::abs(g - w) <= atol + rtol * std::abs(w));
    } else {
      ok = g == w;
    }
    if (!ok) {
      if (bad < 8) {
        os << "\n  at " << runtime::shape_str(unflat(got.shape(), i)) << ": got " << g
           << ", expected " << w;
      }
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.numel() << " elements differ (" << t
                                       << ", rtol " << rtol << ", atol " << atol << ")" << os.str();
}

/// Calls `f` with arrays (any count; argument errors surface as kiln::Error).
inline void call(const runtime::PackedFunc& f, const std::vector<NDArray>& args) {
  std::vector<KilnValue> v(args.size() + 1);
  std::vector<int32_t> c(args.size() + 1);
  for (size_t i = 0; i < args.size(); ++i) {
    v[i].v_handle = args[i].raw();
    c[i] = kKilnArrayHandle;
  }
  f.call_packed(v.data(), c.data(), static_cast<int32_t>(args.size()));
}

/// Compiles `sch` for the host as function `name` taking `args`.
inline runtime::Module build_host(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                  const std::string& name = "f") {
  return build(sch, args, host_target(), name);
}

/// Builds `sch` and runs it once: `inputs` bind the first inputs.size() of `args`; the rest are
/// outputs, allocated poisoned from their tensors' shapes and dtypes, and returned.
inline std::vector<NDArray> build_and_run(const te::Schedule& sch,
                                          const std::vector<te::Tensor>& args,
                                          const std::vector<NDArray>& inputs,
                                          const std::string& name = "f") {
  runtime::Module m = build_host(sch, args, name);
  std::vector<NDArray> all = inputs, outs;
  for (size_t i = inputs.size(); i < args.size(); ++i) {
    outs.push_back(poisoned(shape_of(args[i]), args[i]->dtype));
    all.push_back(outs.back());
  }
  call(m.get_function(name), all);
  return outs;
}

/// The lowered IR of a schedule, as text (for failure messages).
inline std::string lowered_text(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                const std::string& name = "f") {
  try {
    return tir::to_string(lower(sch, args, name));
  } catch (const Error& e) {
    return std::string("<lower failed: ") + e.what() + ">";
  }
}

/// The message of the kiln::Error `f` throws (a test failure when it throws none).
using ::kiln::testing::error_of;

/// An array whose element at each multi-index is `f(index)` (for naive references).
template <typename F>
NDArray reference(std::vector<int64_t> shape, DataType t, F&& f) {
  NDArray a = NDArray::empty(shape, t);
  for (int64_t i = 0; i < a.numel(); ++i) set_element(a, i, f(unflat(shape, i)));
  return a;
}

/// Element of `a` at a multi-index.
inline double at(const NDArray& a, const std::vector<int64_t>& idx) {
  return element(a, flat(a.shape(), idx));
}

}  // namespace kiln::e2e
