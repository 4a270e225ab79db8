// NaN and ±inf through every element-wise, broadcast, reduction, softmax and pooling operator
// (issue 26): seeded random inputs mixed with NaN, +inf and -inf, built with the default te
// schedule and with the operator's CPU schedule, against naive C++ references that spell out
// PyTorch's semantics (checked against torch 1.13 on this machine): max-like ops (relu, clip,
// hard_sigmoid, maximum / minimum, reduce max / min, max pooling) give NaN for a NaN input
// wherever it sits; argmax / argmin and max pooling's indices point at the first NaN; sign(NaN)
// is 0; the rest is IEEE arithmetic. std::fmax drops NaN, so the references never use it.
// Outputs are poisoned with a finite sentinel (not NaN) before every run, so an element the
// kernel never wrote cannot pass for an expected NaN; NaN positions and infinities must match
// exactly, finite values within a tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/autotune/space.h"
#include "kiln/topi/broadcast.h"
#include "kiln/topi/conv_nd.h"
#include "kiln/topi/elemwise.h"
#include "kiln/topi/nn_norm.h"
#include "kiln/topi/pooling.h"
#include "kiln/topi/reduction.h"
#include "topi/topi_test_util.h"

namespace kiln::topi::testing {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

/// Seeded values uniform in [-3, 3] (|x| >= 0.05), each replaced with probability `p` by NaN,
/// and with probability `p` each by +inf and by -inf.
NDArray special_array(Shape shape, uint32_t seed, double p) {
  NDArray a = random_array(std::move(shape), f32, seed, -3.0, 3.0);
  std::mt19937 rng(seed * 7919u + 1);
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t i = 0; i < a.numel(); ++i) {
    double r = u(rng);
    if (r < p)
      set_element(a, i, kNaN);
    else if (r < 2 * p)
      set_element(a, i, kInf);
    else if (r < 3 * p)
      set_element(a, i, -kInf);
  }
  return a;
}

/// Builds `outs` over `inputs` under `s`, runs it on `data` with every output first filled
/// with a finite sentinel, and returns the outputs.
std::vector<NDArray> run_sentinel(const te::Schedule& s, const std::vector<te::Tensor>& inputs,
                                  const std::vector<te::Tensor>& outs,
                                  const std::vector<NDArray>& data) {
  std::vector<te::Tensor> args = inputs;
  args.insert(args.end(), outs.begin(), outs.end());
  runtime::Module m = build(s, args, host_target(), "f");
  std::vector<NDArray> all = data, res;
  for (const te::Tensor& t : outs) {
    NDArray a = NDArray::empty(shape_of(t), t->dtype);
    if (t->dtype.is_float()) {
      for (int64_t i = 0; i < a.numel(); ++i) set_element(a, i, -12345.0);
    } else {
      std::memset(a.data(), 0x5A, a.nbytes());
    }
    res.push_back(a);
    all.push_back(a);
  }
  call(m.get_function("f"), all);
  return res;
}

/// Compares `out` (under the default schedule and under `sched`) with `want`.
void check_special(const std::vector<te::Tensor>& inputs, const te::Tensor& out,
                   const std::vector<NDArray>& data, const NDArray& want,
                   const std::function<te::Schedule(const std::vector<te::Tensor>&)>& sched,
                   Tolerance tol = {1e-4, 1e-5}) {
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "default schedule" : "CPU schedule");
    te::Schedule s = variant == 0 ? te::create_schedule({out}) : sched({out});
    std::vector<NDArray> got;
    try {
      got = run_sentinel(s, inputs, {out}, data);
    } catch (const Error& e) {
      ADD_FAILURE() << "build/run failed: " << e.what();
      return;
    }
    EXPECT_TRUE(all_close(got[0], want, tol)) << "output " << out.name();
  }
}

std::vector<ir::Expr> exprs(const Shape& s) {
  std::vector<ir::Expr> r;
  for (int64_t v : s) r.push_back(ir::Expr(static_cast<int32_t>(v)));
  return r;
}

te::Schedule injective(const std::vector<te::Tensor>& outs) {
  return schedule_injective(outs, host_target());
}

// ---------------------------------------------------------------------------------------------
// PyTorch semantics, written out.

double relu_ref(double x) { return std::isnan(x) ? x : (x < 0 ? 0.0 : x); }
double clip_ref(double x, double lo, double hi) {
  if (std::isnan(x)) return x;
  return x < lo ? lo : (x > hi ? hi : x);
}
double max_ref(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  return a > b ? a : b;
}
double min_ref(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  return a < b ? a : b;
}

TEST(NanInf, UnaryOps) {
  const Shape shape{5, 37};
  NDArray xv = special_array(shape, 11, 0.1);
  te::Tensor x = te::placeholder({5, 37}, f32, "x");
  using Fn = std::function<double(double)>;
  struct Case {
    const char* name;
    te::Tensor out;
    Fn ref;
  };
  const double a = 0.2, b = 0.5;
  std::vector<Case> cases = {
      {"relu", relu(x), relu_ref},
      {"leaky_relu", leaky_relu(x, 0.1), [](double v) { return v > 0 ? v : v * 0.1; }},
      {"clip", clip(x, -0.5, 0.5), [](double v) { return clip_ref(v, -0.5, 0.5); }},
      {"hard_sigmoid", hard_sigmoid(x, a, b),
       [&](double v) { return clip_ref(v * a + b, 0.0, 1.0); }},
      {"sigmoid", sigmoid(x), [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
      {"tanh", tanh(x), [](double v) { return std::tanh(v); }},
      {"exp", exp(x), [](double v) { return std::exp(v); }},
      {"log", log(x), [](double v) { return std::log(v); }},
      {"sqrt", sqrt(x), [](double v) { return std::sqrt(v); }},
      {"rsqrt", rsqrt(x), [](double v) { return 1.0 / std::sqrt(v); }},
      {"erf", erf(x), [](double v) { return std::erf(v); }},
      // -inf * (1 + erf(-inf)) = -inf * 0 = NaN, as in PyTorch.
      {"gelu", gelu(x), [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }},
      {"abs", abs(x), [](double v) { return std::abs(v); }},
      {"negative", negative(x), [](double v) { return -v; }},
      {"floor", floor(x), [](double v) { return std::floor(v); }},
      {"ceil", ceil(x), [](double v) { return std::ceil(v); }},
      {"round", round(x), [](double v) { return std::round(v); }},
      {"round_even", round_even(x), [](double v) { return std::nearbyint(v); }},
      // torch.sign(nan) is 0.
      {"sign", sign(x), [](double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); }},
      {"reciprocal", reciprocal(x), [](double v) { return 1.0 / v; }},
      {"softplus", softplus(x),
       [](double v) { return std::isnan(v) ? v : (v > 20 ? v : std::log1p(std::exp(v))); }},
      {"identity", identity(x), [](double v) { return v; }},
      {"sin", sin(x), [](double v) { return std::sin(v); }},
      {"cos", cos(x), [](double v) { return std::cos(v); }},
      {"tan", tan(x), [](double v) { return std::tan(v); }},
      {"asin", asin(x), [](double v) { return std::asin(v); }},
      {"acos", acos(x), [](double v) { return std::acos(v); }},
      {"atan", atan(x), [](double v) { return std::atan(v); }},
      {"sinh", sinh(x), [](double v) { return std::sinh(v); }},
      {"cosh", cosh(x), [](double v) { return std::cosh(v); }},
      {"asinh", asinh(x), [](double v) { return std::asinh(v); }},
      {"acosh", acosh(x), [](double v) { return std::acosh(v); }},
      {"atanh", atanh(x), [](double v) { return std::atanh(v); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    NDArray want = reference(shape, f32, [&](const Shape& i) {
      return static_cast<double>(static_cast<float>(c.ref(at(xv, i))));
    });
    check_special({x}, c.out, {xv}, want, injective);
  }
  SCOPED_TRACE("isnan");
  NDArray want = reference(shape, boolean, [&](const Shape& i) { return std::isnan(at(xv, i)); });
  check_special({x}, isnan(x), {xv}, want, injective);
}

TEST(NanInf, BinaryOps) {
  const Shape sa{6, 40}, sb{40};
  NDArray av = special_array(sa, 21, 0.1), bv = special_array(sb, 22, 0.1);
  te::Tensor A = te::placeholder({6, 40}, f32, "A"), B = te::placeholder({40}, f32, "B");
  using Fn = std::function<double(double, double)>;
  struct Case {
    const char* name;
    te::Tensor out;
    Fn ref;
  };
  std::vector<Case> cases = {
      {"add", add(A, B), [](double x, double y) { return x + y; }},
      {"subtract", subtract(A, B), [](double x, double y) { return x - y; }},
      {"multiply", multiply(A, B), [](double x, double y) { return x * y; }},
      {"divide", divide(A, B), [](double x, double y) { return x / y; }},
      {"power", power(A, B), [](double x, double y) { return std::pow(x, y); }},
      {"maximum", maximum(A, B), max_ref},
      {"minimum", minimum(A, B), min_ref},
      // Swapped operands: NaN in either position.
      {"maximum_ba", maximum(B, A), [](double x, double y) { return max_ref(y, x); }},
      {"minimum_ba", minimum(B, A), [](double x, double y) { return min_ref(y, x); }},
      {"equal", equal(A, B), [](double x, double y) -> double { return x == y; }},
      {"not_equal", not_equal(A, B), [](double x, double y) -> double { return x != y; }},
      {"less", less(A, B), [](double x, double y) -> double { return x < y; }},
      {"less_equal", less_equal(A, B), [](double x, double y) -> double { return x <= y; }},
      {"greater", greater(A, B), [](double x, double y) -> double { return x > y; }},
      {"greater_equal", greater_equal(A, B), [](double x, double y) -> double { return x >= y; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    NDArray want = reference(sa, c.out->dtype, [&](const Shape& i) {
      double r = c.ref(at(av, i), bcast_at(bv, i));
      return c.out->dtype.is_bool() ? r : static_cast<double>(static_cast<float>(r));
    });
    check_special({A, B}, c.out, {av, bv}, want, injective);
  }
}

/// Naive reduction along axis 1 of [R, K, S] (or over everything when `all`): the elements of
/// one output position in order, handed to `f`.
template <typename F>
NDArray reduce_ref(const NDArray& x, bool all, DataType t, F&& f) {
  const Shape& s = x.shape();
  Shape out = all ? Shape{} : Shape{s[0], s[2]};
  return reference(out, t, [&](const Shape& o) {
    std::vector<double> v;
    for (int64_t r = 0; r < s[0]; ++r)
      for (int64_t k = 0; k < s[1]; ++k)
        for (int64_t q = 0; q < s[2]; ++q)
          if (all || (r == o[0] && q == o[1])) v.push_back(at(x, {r, k, q}));
    return f(v);
  });
}

double max_of(const std::vector<double>& v) {
  double m = -kInf;
  for (double e : v) m = max_ref(m, e);
  return m;
}
double min_of(const std::vector<double>& v) {
  double m = kInf;
  for (double e : v) m = min_ref(m, e);
  return m;
}
/// torch.argmax: the first NaN, else the first maximum.
double argext_of(const std::vector<double>& v, bool is_max) {
  size_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<double>(i);
    if (is_max ? v[i] > v[best] : v[i] < v[best]) best = i;
  }
  return static_cast<double>(best);
}

TEST(NanInf, Reductions) {
  // 1 in 40 elements NaN (and 1 in 40 each ±inf): some rows hold a NaN, some an infinity of
  // either sign or both, some neither.
  const Shape shape{3, 24, 7};
  NDArray xv = special_array(shape, 31, 0.025);
  te::Tensor x = te::placeholder({3, 24, 7}, f32, "x");
  auto sched = [](const std::vector<te::Tensor>& outs) {
    return schedule_reduce(outs, host_target());
  };
  auto sum_of = [](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += e;
    return s;
  };
  auto prod_of = [](const std::vector<double>& v) {
    double s = 1;
    for (double e : v) s *= e;
    return s;
  };
  for (bool all : {false, true}) {
    SCOPED_TRACE(all ? "all axes" : "axis 1");
    std::vector<int> axes = all ? std::vector<int>{} : std::vector<int>{1};
    const double n = all ? 3 * 24 * 7 : 24;
    Tolerance loose{1e-4, 1e-4};
    check_special({x}, sum(x, axes), {xv}, reduce_ref(xv, all, f32, sum_of), sched, loose);
    check_special({x}, mean(x, axes), {xv},
                  reduce_ref(xv, all, f32, [&](const auto& v) { return sum_of(v) / n; }), sched,
                  loose);
    check_special({x}, prod(x, axes), {xv}, reduce_ref(xv, all, f32, prod_of), sched, loose);
    check_special({x}, max(x, axes), {xv}, reduce_ref(xv, all, f32, max_of), sched);
    check_special({x}, min(x, axes), {xv}, reduce_ref(xv, all, f32, min_of), sched);
    std::vector<int> arg_axes = all ? std::vector<int>{0, 1, 2} : axes;
    check_special({x}, argmax(x, arg_axes), {xv},
                  reduce_ref(xv, all, i64, [](const auto& v) { return argext_of(v, true); }),
                  sched);
    check_special({x}, argmin(x, arg_axes), {xv},
                  reduce_ref(xv, all, i64, [](const auto& v) { return argext_of(v, false); }),
                  sched);
  }
}

TEST(NanInf, ReduceMaxOfTheIssuesVectors) {
  // issue 26: [nan, 1, -1, 2] gave 2 and [3, nan, -2, nan] gave nan.
  te::Tensor x = te::placeholder({2, 4}, f32, "x");
  NDArray xv = NDArray::empty({2, 4}, f32);
  const double rows[2][4] = {{kNaN, 1, -1, 2}, {3, kNaN, -2, kNaN}};
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 4; ++k) set_element(xv, r * 4 + k, rows[r][k]);
  NDArray nan2 = reference({2}, f32, [](const Shape&) { return kNaN; });
  auto sched = [](const std::vector<te::Tensor>& outs) {
    return schedule_reduce(outs, host_target());
  };
  check_special({x}, max(x, {1}), {xv}, nan2, sched);
  check_special({x}, min(x, {1}), {xv}, nan2, sched);
  NDArray first_nan = reference({2}, i64, [](const Shape& i) { return i[0] == 0 ? 0.0 : 1.0; });
  check_special({x}, argmax(x, {1}), {xv}, first_nan, sched);
  check_special({x}, argmin(x, {1}), {xv}, first_nan, sched);
}

TEST(NanInf, SoftmaxRows) {
  // A row with a NaN or a +inf is all NaN (+inf - +inf); a row with only -inf among finite
  // values has 0 there (log_softmax: -inf).
  const Shape shape{12, 16};
  NDArray xv = special_array(shape, 41, 0.02);
  te::Tensor x = te::placeholder({12, 16}, f32, "x");
  auto sched = [](const std::vector<te::Tensor>& outs) {
    return schedule_softmax(outs, host_target());
  };
  for (bool log_form : {false, true}) {
    SCOPED_TRACE(log_form ? "log_softmax" : "softmax");
    NDArray want = reference(shape, f32, [&](const Shape& i) {
      double m = -kInf;
      for (int64_t k = 0; k < shape[1]; ++k) m = max_ref(m, at(xv, {i[0], k}));
      double s = 0;
      for (int64_t k = 0; k < shape[1]; ++k) s += std::exp(at(xv, {i[0], k}) - m);
      double d = at(xv, i) - m;
      return log_form ? d - std::log(s) : std::exp(d) / s;
    });
    check_special({x}, log_form ? log_softmax(x) : softmax(x), {xv}, want, sched);
  }
}

/// Naive 2-D pooling of x [N, C, H, W] (or [N, C/16, H, W, 16]), PyTorch semantics: max is NaN
/// when any tap is NaN; avg sums the taps inside the input (count excludes the padding).
NDArray pool_ref(const NDArray& x, PoolType t, int64_t k, int64_t s, int64_t p) {
  const Shape& xs = x.shape();
  const int64_t H = xs[2], W = xs[3];
  const int64_t OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
  Shape out = xs;
  out[2] = OH;
  out[3] = OW;
  return reference(out, f32, [&](const Shape& o) {
    double m = -kInf, sum = 0;
    int64_t count = 0;
    for (int64_t ky = 0; ky < k; ++ky)
      for (int64_t kx = 0; kx < k; ++kx) {
        int64_t y = o[2] * s - p + ky, xx = o[3] * s - p + kx;
        if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
        Shape idx = o;
        idx[2] = y;
        idx[3] = xx;
        double v = at(x, idx);
        m = max_ref(m, v);
        sum += v;
        ++count;
      }
    return t == PoolType::kMax ? m : sum / static_cast<double>(count);
  });
}

TEST(NanInf, Pooling2D) {
  auto sched = [](const std::vector<te::Tensor>& outs) {
    return schedule_pool(outs, host_target());
  };
  for (const char* layout : {"NCHW", "NCHW16c"}) {
    SCOPED_TRACE(layout);
    Shape shape = std::string(layout) != "NCHW" ? Shape{1, 2, 9, 11, 16} : Shape{2, 3, 9, 11};
    NDArray xv = special_array(shape, 51, 0.03);
    te::Tensor x = te::placeholder(exprs(shape), f32, "x");
    Pool2DAttrs a;
    a.kernel = {3, 3};
    a.stride = {2, 2};
    a.padding = {1, 1, 1, 1};
    a.count_include_pad = false;
    for (PoolType t : {PoolType::kMax, PoolType::kAvg}) {
      SCOPED_TRACE(pool_type_name(t));
      check_special({x}, pool2d(x, t, a, layout), {xv}, pool_ref(xv, t, 3, 2, 1), sched);
      // Global pooling: one window over the whole plane.
      Shape gs = shape;
      gs[2] = gs[3] = 1;
      NDArray want = reference(gs, f32, [&](const Shape& o) {
        double m = -kInf, sum = 0;
        for (int64_t y = 0; y < shape[2]; ++y)
          for (int64_t xx = 0; xx < shape[3]; ++xx) {
            Shape idx = o;
            idx[2] = y;
            idx[3] = xx;
            m = max_ref(m, at(xv, idx));
            sum += at(xv, idx);
          }
        return t == PoolType::kMax ? m : sum / static_cast<double>(shape[2] * shape[3]);
      });
      check_special({x}, global_pool2d(x, t, layout), {xv}, want, sched, {1e-4, 1e-4});
    }
  }
}

TEST(NanInf, MaxPoolNdAndIndices) {
  // 1-D max pooling over [1, 2, 12] with kernel 3, stride 2, no padding; the index of a window
  // holding a NaN is the first NaN's (torch.nn.functional.max_pool1d(return_indices=True)).
  const Shape shape{1, 2, 12};
  NDArray xv = special_array(shape, 61, 0.08);
  te::Tensor x = te::placeholder({1, 2, 12}, f32, "x");
  PoolNdAttrs a;
  a.kernel = {3};
  a.stride = {2};
  a.dilation = {1};
  a.padding = {0, 0};
  const Shape os{1, 2, 5};
  NDArray want = reference(os, f32, [&](const Shape& o) {
    double m = -kInf;
    for (int64_t k = 0; k < 3; ++k) m = max_ref(m, at(xv, {o[0], o[1], o[2] * 2 + k}));
    return m;
  });
  NDArray want_idx = reference(os, i64, [&](const Shape& o) {
    std::vector<double> v;
    for (int64_t k = 0; k < 3; ++k) v.push_back(at(xv, {o[0], o[1], o[2] * 2 + k}));
    return static_cast<double>(o[1] * 12 + o[2] * 2) + argext_of(v, true);
  });
  auto dflt = [](const std::vector<te::Tensor>& outs) { return te::create_schedule(outs); };
  check_special({x}, pool_nd(x, PoolType::kMax, a), {xv}, want, dflt);
  check_special({x}, max_pool_nd_indices(x, a, 0), {xv}, want_idx, dflt);
}

}  // namespace
}  // namespace kiln::topi::testing
