// Element-wise unary operators. Each is one te compute whose body applies a scalar function to
// x at the same index; floating-point-only functions check the dtype up front so the error
// names the topi op rather than the intrinsic. Max-like ops (relu, clip, hard_sigmoid) keep a
// NaN input NaN, as PyTorch does (topi_util.h, max_bound).
#include "kiln/topi/elemwise.h"

#include <cmath>
#include <functional>

#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT

namespace {

te::Tensor unary(const te::Tensor& x, const std::string& op, const std::string& name,
                 const std::function<Expr(Expr)>& f) {
  detail::const_shape(x, op);  // static shapes only
  return te::compute(
      x->shape,
      [&](const std::vector<Var>& i) { return f(x(std::vector<Expr>(i.begin(), i.end()))); }, name,
      detail::tag_of(tag::kElemWise, op));
}

void require_float(const te::Tensor& x, const std::string& op) {
  KILN_USER_CHECK(x.defined()) << op << ": input tensor is undefined";
  KILN_USER_CHECK(x->dtype.is_float())
      << op << ": needs a floating-point input, got " << x->dtype << " (tensor " << x.name() << ")";
}

te::Tensor float_unary(const te::Tensor& x, const std::string& op, const std::string& name,
                       const std::function<Expr(Expr)>& f) {
  require_float(x, op);
  return unary(x, op, name, f);
}

}  // namespace

te::Tensor relu(const te::Tensor& x, const std::string& name) {
  return unary(x, "relu", name, [](Expr v) { return detail::max_bound(v, make_zero(v.dtype())); });
}

te::Tensor leaky_relu(const te::Tensor& x, double alpha, const std::string& name) {
  return float_unary(x, "leaky_relu", name, [alpha](Expr v) {
    return select(v > make_zero(v.dtype()), v, v * make_const(v.dtype(), alpha));
  });
}

te::Tensor clip(const te::Tensor& x, double lo, double hi, const std::string& name) {
  KILN_USER_CHECK(lo <= hi) << "clip: min " << lo << " is greater than max " << hi;
  return unary(x, "clip", name, [lo, hi](Expr v) {
    return detail::min_bound(detail::max_bound(v, make_const(v.dtype(), lo)),
                             make_const(v.dtype(), hi));
  });
}

te::Tensor sigmoid(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "sigmoid", name, [](Expr v) { return ir::sigmoid(v); });
}
te::Tensor tanh(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "tanh", name, [](Expr v) { return ir::tanh(v); });
}
te::Tensor exp(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "exp", name, [](Expr v) { return ir::exp(v); });
}
te::Tensor log(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "log", name, [](Expr v) { return ir::log(v); });
}
te::Tensor sqrt(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "sqrt", name, [](Expr v) { return ir::sqrt(v); });
}
te::Tensor rsqrt(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "rsqrt", name, [](Expr v) { return ir::rsqrt(v); });
}
te::Tensor erf(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "erf", name, [](Expr v) { return ir::erf(v); });
}
te::Tensor gelu(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "gelu", name, [](Expr v) {
    DataType t = v.dtype();
    return make_const(t, 0.5) * v *
           (make_one(t) + ir::erf(v * make_const(t, 0.70710678118654752440)));
  });
}
te::Tensor abs(const te::Tensor& x, const std::string& name) {
  return unary(x, "abs", name, [](Expr v) { return ir::abs(v); });
}
te::Tensor negative(const te::Tensor& x, const std::string& name) {
  return unary(x, "negative", name, [](Expr v) { return -v; });
}
te::Tensor floor(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "floor", name, [](Expr v) { return ir::floor(v); });
}
te::Tensor ceil(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "ceil", name, [](Expr v) { return ir::ceil(v); });
}
te::Tensor round(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "round", name, [](Expr v) { return ir::round(v); });
}
te::Tensor sign(const te::Tensor& x, const std::string& name) {
  return unary(x, "sign", name, [](Expr v) {
    DataType t = v.dtype();
    Expr z = make_zero(t);
    return select(v > z, make_one(t), select(v < z, make_const(t, -1), z));
  });
}
te::Tensor reciprocal(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "reciprocal", name, [](Expr v) { return make_one(v.dtype()) / v; });
}
te::Tensor softplus(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "softplus", name, [](Expr v) {
    DataType t = v.dtype();
    return ir::max(v, make_zero(t)) + ir::log(make_one(t) + ir::exp(-ir::abs(v)));
  });
}
te::Tensor hard_sigmoid(const te::Tensor& x, double alpha, double beta, const std::string& name) {
  return float_unary(x, "hard_sigmoid", name, [alpha, beta](Expr v) {
    DataType t = v.dtype();
    Expr y = v * make_const(t, alpha) + make_const(t, beta);
    return detail::min_bound(detail::max_bound(y, make_zero(t)), make_one(t));
  });
}
te::Tensor cast(const te::Tensor& x, DataType dtype, const std::string& name) {
  KILN_USER_CHECK(dtype.is_scalar() && !dtype.is_void() && !dtype.is_handle())
      << "cast: cannot cast to " << dtype;
  return unary(x, "cast", name, [dtype](Expr v) {
    if (dtype.is_bool()) return v != make_zero(v.dtype());
    return ir::cast(dtype, v);
  });
}
te::Tensor identity(const te::Tensor& x, const std::string& name) {
  return unary(x, "identity", name, [](Expr v) { return v; });
}

namespace {
/// A pure math call the code generators lower by name (LLVM intrinsic or libm).
Expr math_call(const char* fn, Expr v) {
  DataType t = v.dtype();
  return Call::make(t, fn, {std::move(v)}, CallKind::kPureIntrinsic);
}
}  // namespace

te::Tensor sin(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "sin", name, [](Expr v) { return math_call("sin", v); });
}
te::Tensor cos(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "cos", name, [](Expr v) { return math_call("cos", v); });
}
te::Tensor tan(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "tan", name, [](Expr v) { return math_call("tan", v); });
}
te::Tensor asin(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "asin", name, [](Expr v) { return math_call("asin", v); });
}
te::Tensor acos(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "acos", name, [](Expr v) { return math_call("acos", v); });
}
te::Tensor atan(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "atan", name, [](Expr v) { return math_call("atan", v); });
}
te::Tensor sinh(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "sinh", name, [](Expr v) { return math_call("sinh", v); });
}
te::Tensor cosh(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "cosh", name, [](Expr v) { return math_call("cosh", v); });
}
te::Tensor asinh(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "asinh", name, [](Expr v) {
    DataType t = v.dtype();
    Expr a = ir::abs(v);
    Expr y = ir::log(a + ir::sqrt(a * a + make_one(t)));
    return select(v < make_zero(t), -y, y);
  });
}
te::Tensor acosh(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "acosh", name,
                     [](Expr v) { return ir::log(v + ir::sqrt(v * v - make_one(v.dtype()))); });
}
te::Tensor atanh(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "atanh", name, [](Expr v) {
    DataType t = v.dtype();
    return make_const(t, 0.5) * ir::log((make_one(t) + v) / (make_one(t) - v));
  });
}
te::Tensor round_even(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "round_even", name, [](Expr v) { return math_call("nearbyint", v); });
}
te::Tensor isnan(const te::Tensor& x, const std::string& name) {
  return float_unary(x, "isnan", name, [](Expr v) { return v != v; });
}

}  // namespace kiln::topi
