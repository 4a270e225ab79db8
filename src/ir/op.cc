// Expression builders: operand type matching (immediates adopt the other side's type, scalars
// broadcast, ints promote to floats and to the wider int) and constant folding of immediates
// and trivial identities (x+0, x*1, x*0 for ints, min/max/compare of constants).
#include "kiln/ir/op.h"

#include <cmath>
#include <limits>

#include "kiln/ir/functor.h"

namespace kiln::ir {

Expr make_const(DataType t, int64_t value) {
  if (t.is_float()) return make_const(t, static_cast<double>(value));
  Expr s = IntImm::make(t.element_of(), value);
  return t.lanes() > 1 ? Broadcast::make(s, t.lanes()) : s;
}
Expr make_const(DataType t, double value) {
  if (!t.is_float()) return make_const(t, static_cast<int64_t>(value));
  Expr s = FloatImm::make(t.element_of(), value);
  return t.lanes() > 1 ? Broadcast::make(s, t.lanes()) : s;
}
Expr make_zero(DataType t) { return make_const(t, int64_t{0}); }
Expr make_one(DataType t) { return make_const(t, int64_t{1}); }
Expr const_true(int lanes) { return make_const(DataType::Bool(lanes), int64_t{1}); }
Expr const_false(int lanes) { return make_const(DataType::Bool(lanes), int64_t{0}); }

std::optional<int64_t> as_const_int(const Expr& e) {
  if (!e.defined()) return std::nullopt;
  if (const IntImm* i = e.as<IntImm>()) return i->value;
  if (const Broadcast* b = e.as<Broadcast>()) return as_const_int(b->value);
  return std::nullopt;
}
std::optional<double> as_const_float(const Expr& e) {
  if (!e.defined()) return std::nullopt;
  if (const FloatImm* f = e.as<FloatImm>()) return f->value;
  if (const Broadcast* b = e.as<Broadcast>()) return as_const_float(b->value);
  return std::nullopt;
}
bool is_const_int(const Expr& e, int64_t value) {
  auto v = as_const_int(e);
  return v && *v == value;
}
bool is_const(const Expr& e) {
  return as_const_int(e).has_value() || as_const_float(e).has_value();
}

Expr max_value(DataType t) {
  DataType s = t.element_of();
  if (s.is_int())
    return make_const(t, s.bits() == 64 ? std::numeric_limits<int64_t>::max()
                                        : (int64_t{1} << (s.bits() - 1)) - 1);
  if (s.is_uint() || s.is_bool())
    return make_const(
        t, s.bits() >= 63 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << s.bits()) - 1);
  if (s.bits() == 64) return make_const(t, std::numeric_limits<double>::max());
  if (s.bits() == 32 || s.is_bfloat16())
    return make_const(t, static_cast<double>(std::numeric_limits<float>::max()));
  return make_const(t, 65504.0);
}
Expr min_value(DataType t) {
  DataType s = t.element_of();
  if (s.is_int())
    return make_const(
        t, s.bits() == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (s.bits() - 1)));
  if (s.is_uint() || s.is_bool()) return make_const(t, int64_t{0});
  if (s.bits() == 64) return make_const(t, std::numeric_limits<double>::lowest());
  if (s.bits() == 32 || s.is_bfloat16())
    return make_const(t, static_cast<double>(std::numeric_limits<float>::lowest()));
  return make_const(t, -65504.0);
}

Expr broadcast(Expr value, int lanes) {
  if (lanes == value.dtype().lanes()) return value;
  KILN_ICHECK(value.dtype().is_scalar()) << "broadcast of vector " << value.dtype();
  return Broadcast::make(std::move(value), lanes);
}

Expr cast(DataType t, Expr value) {
  KILN_ICHECK(value.defined()) << "cast of undefined value";
  if (value.dtype() == t) return value;
  if (auto i = as_const_int(value); i && value.dtype().is_scalar()) return make_const(t, *i);
  if (auto f = as_const_float(value); f && value.dtype().is_scalar()) {
    if (t.is_float()) return make_const(t, *f);
  }
  if (t.lanes() != value.dtype().lanes()) {
    KILN_ICHECK(value.dtype().is_scalar()) << "cast from " << value.dtype() << " to " << t;
    return Broadcast::make(cast(t.element_of(), value), t.lanes());
  }
  return Cast::make(t, std::move(value));
}

namespace {

bool is_imm(const Expr& e) { return e.as<IntImm>() || e.as<FloatImm>(); }

/// Brings a and b to one type (see the header) or throws naming both types.
void match_types(Expr& a, Expr& b, const char* op) {
  KILN_USER_CHECK(a.defined() && b.defined()) << "operator " << op << " on an undefined value";
  DataType ta = a.dtype(), tb = b.dtype();
  if (ta == tb) return;
  if (ta.lanes() != tb.lanes()) {
    if (ta.is_scalar()) {
      a = broadcast(cast(tb.element_of(), a), tb.lanes());
    } else if (tb.is_scalar()) {
      b = broadcast(cast(ta.element_of(), b), ta.lanes());
    }
    ta = a.dtype();
    tb = b.dtype();
    if (ta == tb) return;
  }
  // An immediate adopts the other side's type, except that a float immediate never becomes an
  // int (i + 0.5 promotes i to float rather than truncating 0.5).
  auto adopts = [](const Expr& imm, DataType other) {
    const Expr& v = imm.as<Broadcast>() ? imm.as<Broadcast>()->value : imm;
    return is_imm(v) && (other.is_float() || !v.dtype().is_float());
  };
  if (adopts(b, ta)) {
    b = cast(ta, b);
  } else if (adopts(a, tb)) {
    a = cast(tb, a);
  } else if (ta.is_float() && !tb.is_float()) {
    b = cast(ta, b);
  } else if (tb.is_float() && !ta.is_float()) {
    a = cast(tb, a);
  } else if (ta.is_float() && tb.is_float()) {
    if (ta.bits() < tb.bits())
      a = cast(tb, a);
    else
      b = cast(ta, b);
  } else if ((ta.is_int() || ta.is_uint()) && (tb.is_int() || tb.is_uint())) {
    if (ta.bits() < tb.bits())
      a = cast(tb, a);
    else if (tb.bits() < ta.bits())
      b = cast(ta, b);
    else
      KILN_ERROR << "operator " << op << ": cannot mix " << ta << " and " << tb;
  } else {
    KILN_ERROR << "operator " << op << ": cannot match types " << ta << " and " << tb;
  }
  KILN_ICHECK(a.dtype() == b.dtype()) << "match_types " << a.dtype() << " " << b.dtype();
}

int64_t floordiv_i(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floormod_i(int64_t a, int64_t b) { return a - floordiv_i(a, b) * b; }

/// Folds scalar integer/float immediates; returns an undefined Expr when it cannot.
template <typename FI, typename FF>
Expr fold(const Expr& a, const Expr& b, FI fi, FF ff) {
  if (!a.dtype().is_scalar()) return Expr();
  const IntImm* ia = a.as<IntImm>();
  const IntImm* ib = b.as<IntImm>();
  if (ia && ib) return fi(ia->value, ib->value);
  const FloatImm* fa = a.as<FloatImm>();
  const FloatImm* fb = b.as<FloatImm>();
  if (fa && fb) return ff(fa->value, fb->value);
  return Expr();
}

}  // namespace

Expr operator+(Expr a, Expr b) {
  match_types(a, b, "+");
  DataType t = a.dtype();
  if (Expr r = fold(
          a, b, [&](int64_t x, int64_t y) { return make_const(t, x + y); },
          [&](double x, double y) { return make_const(t, x + y); });
      r.defined())
    return r;
  if (is_zero(b) && !t.is_float()) return a;
  if (is_zero(a) && !t.is_float()) return b;
  return Add::make(a, b);
}

Expr operator-(Expr a, Expr b) {
  match_types(a, b, "-");
  DataType t = a.dtype();
  if (Expr r = fold(
          a, b, [&](int64_t x, int64_t y) { return make_const(t, x - y); },
          [&](double x, double y) { return make_const(t, x - y); });
      r.defined())
    return r;
  if (is_zero(b) && !t.is_float()) return a;
  return Sub::make(a, b);
}

Expr operator*(Expr a, Expr b) {
  match_types(a, b, "*");
  DataType t = a.dtype();
  if (Expr r = fold(
          a, b, [&](int64_t x, int64_t y) { return make_const(t, x * y); },
          [&](double x, double y) { return make_const(t, x * y); });
      r.defined())
    return r;
  if (!t.is_float()) {
    if (is_one(b)) return a;
    if (is_one(a)) return b;
    if (is_zero(a)) return a;
    if (is_zero(b)) return b;
  }
  return Mul::make(a, b);
}

Expr operator/(Expr a, Expr b) {
  match_types(a, b, "/");
  if (a.dtype().is_float()) {
    DataType t = a.dtype();
    if (Expr r = fold(
            a, b, [&](int64_t, int64_t) { return Expr(); },
            [&](double x, double y) { return make_const(t, x / y); });
        r.defined())
      return r;
    return Div::make(a, b);
  }
  return floordiv(a, b);
}

Expr operator%(Expr a, Expr b) {
  match_types(a, b, "%");
  KILN_USER_CHECK(!a.dtype().is_float()) << "operator % on floating-point " << a.dtype();
  return floormod(a, b);
}

Expr operator-(Expr a) {
  if (auto i = as_const_int(a); i && a.dtype().is_scalar()) return make_const(a.dtype(), -*i);
  if (auto f = as_const_float(a); f && a.dtype().is_scalar()) return make_const(a.dtype(), -*f);
  return make_zero(a.dtype()) - a;
}

Expr floordiv(Expr a, Expr b) {
  match_types(a, b, "floordiv");
  DataType t = a.dtype();
  KILN_USER_CHECK(!t.is_float()) << "floordiv on floating-point " << t;
  if (auto y = as_const_int(b); y && *y == 0) KILN_ERROR << "floordiv by constant zero";
  if (Expr r = fold(
          a, b, [&](int64_t x, int64_t y) { return make_const(t, floordiv_i(x, y)); },
          [&](double, double) { return Expr(); });
      r.defined())
    return r;
  if (is_one(b)) return a;
  return FloorDiv::make(a, b);
}

Expr floormod(Expr a, Expr b) {
  match_types(a, b, "floormod");
  DataType t = a.dtype();
  KILN_USER_CHECK(!t.is_float()) << "floormod on floating-point " << t;
  if (auto y = as_const_int(b); y && *y == 0) KILN_ERROR << "floormod by constant zero";
  if (Expr r = fold(
          a, b, [&](int64_t x, int64_t y) { return make_const(t, floormod_i(x, y)); },
          [&](double, double) { return Expr(); });
      r.defined())
    return r;
  if (is_one(b)) return make_zero(t);
  return FloorMod::make(a, b);
}

Expr truncdiv(Expr a, Expr b) {
  match_types(a, b, "truncdiv");
  DataType t = a.dtype();
  if (auto y = as_const_int(b); y && *y == 0) KILN_ERROR << "truncdiv by constant zero";
  if (Expr r = fold(
          a, b, [&](int64_t x, int64_t y) { return make_const(t, x / y); },
          [&](double x, double y) { return make_const(t, x / y); });
      r.defined())
    return r;
  if (is_one(b)) return a;
  return Div::make(a, b);
}

Expr truncmod(Expr a, Expr b) {
  match_types(a, b, "truncmod");
  DataType t = a.dtype();
  if (auto y = as_const_int(b); y && *y == 0) KILN_ERROR << "truncmod by constant zero";
  if (Expr r = fold(
          a, b, [&](int64_t x, int64_t y) { return make_const(t, x % y); },
          [&](double, double) { return Expr(); });
      r.defined())
    return r;
  return Mod::make(a, b);
}

Expr min(Expr a, Expr b) {
  match_types(a, b, "min");
  DataType t = a.dtype();
  if (Expr r = fold(
          a, b, [&](int64_t x, int64_t y) { return make_const(t, std::min(x, y)); },
          [&](double x, double y) { return make_const(t, std::min(x, y)); });
      r.defined())
    return r;
  if (a.same_as(b)) return a;
  return Min::make(a, b);
}

Expr max(Expr a, Expr b) {
  match_types(a, b, "max");
  DataType t = a.dtype();
  if (Expr r = fold(
          a, b, [&](int64_t x, int64_t y) { return make_const(t, std::max(x, y)); },
          [&](double x, double y) { return make_const(t, std::max(x, y)); });
      r.defined())
    return r;
  if (a.same_as(b)) return a;
  return Max::make(a, b);
}

namespace {
template <typename Node, typename Cmp>
Expr compare(Expr a, Expr b, const char* name, Cmp cmp) {
  match_types(a, b, name);
  if (Expr r = fold(
          a, b, [&](int64_t x, int64_t y) { return cmp(x, y) ? const_true() : const_false(); },
          [&](double x, double y) { return cmp(x, y) ? const_true() : const_false(); });
      r.defined())
    return r;
  return Node::make(a, b);
}
}  // namespace

Expr operator==(Expr a, Expr b) {
  return compare<EQ>(a, b, "==", [](auto x, auto y) { return x == y; });
}
Expr operator!=(Expr a, Expr b) {
  return compare<NE>(a, b, "!=", [](auto x, auto y) { return x != y; });
}
Expr operator<(Expr a, Expr b) {
  return compare<LT>(a, b, "<", [](auto x, auto y) { return x < y; });
}
Expr operator<=(Expr a, Expr b) {
  return compare<LE>(a, b, "<=", [](auto x, auto y) { return x <= y; });
}
Expr operator>(Expr a, Expr b) {
  return compare<GT>(a, b, ">", [](auto x, auto y) { return x > y; });
}
Expr operator>=(Expr a, Expr b) {
  return compare<GE>(a, b, ">=", [](auto x, auto y) { return x >= y; });
}

Expr operator&&(Expr a, Expr b) {
  match_types(a, b, "&&");
  KILN_USER_CHECK(a.dtype().is_bool()) << "operator && on " << a.dtype();
  if (auto x = as_const_int(a)) return *x ? b : a;
  if (auto y = as_const_int(b)) return *y ? a : b;
  return And::make(a, b);
}
Expr operator||(Expr a, Expr b) {
  match_types(a, b, "||");
  KILN_USER_CHECK(a.dtype().is_bool()) << "operator || on " << a.dtype();
  if (auto x = as_const_int(a)) return *x ? a : b;
  if (auto y = as_const_int(b)) return *y ? b : a;
  return Or::make(a, b);
}
Expr operator!(Expr a) {
  KILN_USER_CHECK(a.dtype().is_bool()) << "operator ! on " << a.dtype();
  if (auto x = as_const_int(a))
    return *x ? const_false(a.dtype().lanes()) : const_true(a.dtype().lanes());
  return Not::make(a);
}

Expr select(Expr cond, Expr t, Expr f) {
  match_types(t, f, "select");
  if (auto c = as_const_int(cond)) return *c ? t : f;
  return Select::make(cond, t, f);
}

Expr ceildiv(Expr a, Expr b) { return floordiv(a + b - 1, b); }

namespace {
Expr unary_intrin(const char* name, Expr x) {
  KILN_USER_CHECK(x.defined()) << name << " of an undefined value";
  KILN_USER_CHECK(x.dtype().is_float())
      << name << " needs a floating-point argument, got " << x.dtype();
  return Call::make(x.dtype(), name, {x}, CallKind::kPureIntrinsic);
}
}  // namespace

Expr exp(Expr x) { return unary_intrin("exp", x); }
Expr log(Expr x) { return unary_intrin("log", x); }
Expr sqrt(Expr x) { return unary_intrin("sqrt", x); }
Expr rsqrt(Expr x) { return make_one(x.dtype()) / sqrt(x); }
Expr tanh(Expr x) { return unary_intrin("tanh", x); }
Expr sigmoid(Expr x) { return unary_intrin("sigmoid", x); }
Expr erf(Expr x) { return unary_intrin("erf", x); }
Expr floor(Expr x) { return unary_intrin("floor", x); }
Expr ceil(Expr x) { return unary_intrin("ceil", x); }
Expr round(Expr x) { return unary_intrin("round", x); }
Expr abs(Expr x) {
  if (x.dtype().is_float()) return unary_intrin("fabs", x);
  if (x.dtype().is_uint() || x.dtype().is_bool()) return x;
  return select(x >= make_zero(x.dtype()), x, -x);
}
Expr pow(Expr x, Expr y) {
  match_types(x, y, "pow");
  KILN_USER_CHECK(x.dtype().is_float()) << "pow needs floating-point arguments, got " << x.dtype();
  return Call::make(x.dtype(), "pow", {x, y}, CallKind::kPureIntrinsic);
}
Expr fma(Expr a, Expr b, Expr c) {
  match_types(a, b, "fma");
  match_types(a, c, "fma");
  match_types(b, c, "fma");
  return Call::make(a.dtype(), "fma", {a, b, c}, CallKind::kPureIntrinsic);
}
Expr likely(Expr cond) {
  if (is_const(cond)) return cond;
  return Call::make(cond.dtype(), builtin::kLikely, {cond}, CallKind::kPureIntrinsic);
}
Expr if_then_else(Expr cond, Expr t, Expr f) {
  match_types(t, f, "if_then_else");
  if (auto c = as_const_int(cond)) return *c ? t : f;
  return Call::make(t.dtype(), builtin::kIfThenElse, {cond, t, f}, CallKind::kPureIntrinsic);
}

}  // namespace kiln::ir
