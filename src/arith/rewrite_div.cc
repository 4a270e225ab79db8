// Rewrite rules for floor and truncating division and modulo. For a positive constant divisor
// c the dividend's linear form is split: terms whose coefficient c divides leave the division
// (floordiv(x*c + y, c) -> x + floordiv(y, c); floormod(x*c + y, c) -> floormod(y, c)), a
// constant of magnitude >= c is split by floor division, a common factor of all coefficients
// and c cancels in floordiv, and what remains is decided by constant bounds when it provably
// lies in one period [k*c, k*c + c) (floordiv -> k, floormod -> y - k*c). Nested forms fold:
// floordiv(floordiv(x, a), b) -> floordiv(x, a*b); floormod(floormod(x, a*b), a) ->
// floormod(x, a). All rules are exact for negative values (floor semantics).
#include "analyzer_impl.h"

namespace kiln::arith {

namespace {
/// Splits f's constant: keeps it when |k| < c, else floor-splits it into q*c + r.
void split_constant(LinearForm* rest, int64_t* q, int64_t c) {
  *q = 0;
  int64_t k = rest->constant;
  if (k > -c && k < c) return;
  *q = floordiv_int(k, c);
  rest->constant = floormod_int(k, c);
}

/// The period index k with bound b inside [k*c, k*c + c), if there is one.
std::optional<int64_t> single_period(const ConstIntBound& b, int64_t c) {
  if (b.min_value == ConstIntBound::kNegInf || b.max_value == ConstIntBound::kPosInf)
    return std::nullopt;
  int64_t lo = floordiv_int(b.min_value, c), hi = floordiv_int(b.max_value, c);
  if (lo != hi) return std::nullopt;
  return lo;
}
}  // namespace

Expr Rewriter::rw_floordiv(const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  if (t.is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::FloorDiv, a, b); r.defined()) return r;
    return FloorDiv::make(a, b);
  }
  const IntImm* cb = b.as<IntImm>();
  if (!cb || cb->value == 0) return FloorDiv::make(a, b);
  int64_t c = cb->value;
  if (const IntImm* ca = a.as<IntImm>()) return make_const(t, floordiv_int(ca->value, c));
  if (c == 1) return a;
  if (!is_index_type(t) || c < 0) return FloorDiv::make(a, b);
  // floordiv(floordiv(x, d), c) -> floordiv(x, d*c)
  if (const FloorDiv* inner = a.as<FloorDiv>()) {
    const IntImm* d = inner->b.as<IntImm>();
    int64_t dc;
    if (d && d->value > 0 && !__builtin_mul_overflow(d->value, c, &dc) &&
        dc <= type_bound(t).max_value)
      return rw_floordiv(inner->a, make_const(t, dc));
  }
  LinearForm f = to_linear(a);
  if (!f.ok) return FloorDiv::make(a, b);
  LinearForm out, rest;
  for (const auto& [atom, coeff] : f.terms) {
    if (coeff % c == 0)
      out.add_term(atom, coeff / c);
    else
      rest.add_term(atom, coeff);
  }
  rest.constant = f.constant;
  split_constant(&rest, &out.constant, c);
  // floordiv(g*y, g*m) -> floordiv(y, m)
  int64_t g = gcd_int(c, rest.constant);
  for (const auto& term : rest.terms) g = gcd_int(g, term.second);
  int64_t cc = c;
  if (g > 1 && !rest.terms.empty()) {
    for (auto& term : rest.terms) term.second /= g;
    rest.constant /= g;
    cc = c / g;
  }
  if (rest.terms.empty()) {
    out.constant += floordiv_int(rest.constant, cc);
    return from_linear(out, t);
  }
  Expr rest_e = from_linear(rest, t);
  if (auto k = single_period(ana_->bound(rest_e), cc)) {
    out.constant += *k;
    return from_linear(out, t);
  }
  // floordiv(g*y + r, g*m) -> floordiv(y, m) when 0 <= r < g: the terms whose coefficients g
  // divides (g a factor of the divisor) and a remainder r, the other terms and the constant,
  // that stays in [0, g). A row of 28 inside a reshape, read from a tile start that is no
  // multiple of the vector: floordiv(784*j + 28*i + min(16*o, 12) + v, 1568) with v < 16 is
  // floordiv(28*j + i, 56).
  for (const auto& [atom, coeff] : rest.terms) {
    const int64_t g = gcd_int(cc, coeff);
    if (g <= 1 || g == cc) continue;
    LinearForm big, small;
    for (const auto& [a2, k2] : rest.terms) (k2 % g == 0 ? big : small).add_term(a2, k2);
    small.constant = rest.constant;
    if (small.terms.empty() && small.constant == 0) continue;
    ConstIntBound sb = ana_->bound(from_linear(small, t));
    if (sb.min_value < 0 || sb.max_value == ConstIntBound::kPosInf || sb.max_value >= g) continue;
    for (auto& term : big.terms) term.second /= g;
    out.add_term(rw_floordiv(from_linear(big, t), make_const(t, cc / g)), 1);
    return from_linear(out, t);
  }
  Expr inner = cc == 1 ? rest_e : FloorDiv::make(rest_e, make_const(t, cc));
  if (out.terms.empty() && out.constant == 0) return inner;
  out.add_term(inner, 1);
  return from_linear(out, t);
}

Expr Rewriter::rw_floormod(const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  if (t.is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::FloorMod, a, b); r.defined()) return r;
    return FloorMod::make(a, b);
  }
  const IntImm* cb = b.as<IntImm>();
  if (!cb || cb->value == 0) return FloorMod::make(a, b);
  int64_t c = cb->value;
  if (const IntImm* ca = a.as<IntImm>()) return make_const(t, floormod_int(ca->value, c));
  if (c == 1 || c == -1) return make_zero(t);
  if (!is_index_type(t) || c < 0) return FloorMod::make(a, b);
  LinearForm f = to_linear(a);
  if (!f.ok) return FloorMod::make(a, b);
  LinearForm rest;
  for (const auto& [atom, coeff] : f.terms) {
    if (coeff % c == 0) continue;
    // floormod(floormod(x, m), c) -> floormod(x, c) when c divides m.
    const FloorMod* m = atom.as<FloorMod>();
    const IntImm* mc = m ? m->b.as<IntImm>() : nullptr;
    if (mc && mc->value > 0 && mc->value % c == 0) {
      rest.add(to_linear(m->a), coeff);
      continue;
    }
    rest.add_term(atom, coeff);
  }
  if (!rest.ok) return FloorMod::make(a, b);
  // Terms brought in by the nested rule may again be multiples of c.
  LinearForm kept;
  for (const auto& [atom, coeff] : rest.terms)
    if (coeff % c != 0) kept.add_term(atom, coeff);
  kept.constant = f.constant + rest.constant;
  int64_t q;
  split_constant(&kept, &q, c);
  if (kept.terms.empty()) return make_const(t, floormod_int(kept.constant, c));
  Expr rest_e = from_linear(kept, t);
  if (auto k = single_period(ana_->bound(rest_e), c)) {
    kept.constant -= *k * c;
    return from_linear(kept, t);
  }
  ModularSet ms = ana_->modular(rest_e);
  if (ms.coeff % c == 0) return make_const(t, floormod_int(ms.base, c));
  return FloorMod::make(rest_e, b);
}

Expr Rewriter::rw_truncdiv(const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  if (t.is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::Div, a, b); r.defined()) return r;
    return Div::make(a, b);
  }
  if (t.is_float()) {
    auto x = as_const_float(a), y = as_const_float(b);
    if (x && y && *y != 0) return make_const(t, *x / *y);
    return Div::make(a, b);
  }
  const IntImm* cb = b.as<IntImm>();
  if (!cb || cb->value == 0) return Div::make(a, b);
  if (const IntImm* ca = a.as<IntImm>()) {
    if (cb->value == -1 && ca->value == INT64_MIN) return Div::make(a, b);
    return make_const(t, ca->value / cb->value);
  }
  if (cb->value == 1) return a;
  if (is_index_type(t) && cb->value > 0) {
    ConstIntBound ba = ana_->bound(a);
    if (ba.min_value >= 0 && ba.max_value < cb->value) return make_zero(t);
  }
  return Div::make(a, b);
}

Expr Rewriter::rw_truncmod(const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  if (t.is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::Mod, a, b); r.defined()) return r;
    return Mod::make(a, b);
  }
  const IntImm* cb = b.as<IntImm>();
  if (t.is_float() || !cb || cb->value == 0) return Mod::make(a, b);
  if (const IntImm* ca = a.as<IntImm>()) {
    if (cb->value == -1) return make_zero(t);
    return make_const(t, ca->value % cb->value);
  }
  if (cb->value == 1 || cb->value == -1) return make_zero(t);
  if (is_index_type(t) && cb->value > 0) {
    ConstIntBound ba = ana_->bound(a);
    if (ba.min_value >= 0 && ba.max_value < cb->value) return a;
  }
  return Mod::make(a, b);
}

Expr Rewriter::visit(const FloorDiv* op) { return rw_floordiv(mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const FloorMod* op) { return rw_floormod(mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const Div* op) { return rw_truncdiv(mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const Mod* op) { return rw_truncmod(mutate(op->a), mutate(op->b)); }

}  // namespace kiln::arith
