// Expression utilities of the arith layer: structural equality (free variables by identity, by
// ir::structural_equal), floor division on integers, and linear forms. A linear form is a list of
// (atom, coefficient) pairs plus a constant, parsed from Add/Sub/Mul-by-constant trees; equal atoms
// merge, and the rebuild is canonical (positive terms in first-appearance order, then subtracted
// terms, then the constant), so rebuilding a rebuilt form gives the same tree.
#include <cstdlib>

#include "analyzer_impl.h"
#include "kiln/ir/structural.h"

namespace kiln::arith {

// One structural equality (ir/structural.h): deep_equal is structural_equal with free variables
// by identity. Beyond identity, variables bound inside the trees (Let, Reduce axes) compare up
// to renaming, which keeps equal values equal; float constants compare bitwise (-0.0 and 0.0
// differ, so a rule that returns one operand of two "equal" ones never changes a sign, and a
// NaN equals itself); a Reduce compares by structure instead of by identity alone.
// The simplifier asks this on hot paths, mostly of expressions that differ at the root: those
// answers (and a variable's, an integer constant's) come without the walker, and agree with it.
bool deep_equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined() || a->kind != b->kind || a.dtype() != b.dtype()) return false;
  if (a->kind == NodeKind::Variable) return false;  // free, and not the same object
  if (a->kind == NodeKind::IntImm) return a.as<IntImm>()->value == b.as<IntImm>()->value;
  return structural_equal(a, b, /*map_free_vars=*/false);
}

int64_t floordiv_int(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floormod_int(int64_t a, int64_t b) { return a - floordiv_int(a, b) * b; }
int64_t gcd_int(int64_t a, int64_t b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b != 0) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// ---------------------------------------------------------------------------------------------
// Linear forms

void LinearForm::add_term(const Expr& atom, int64_t coeff) {
  if (coeff == 0) return;
  for (auto it = terms.begin(); it != terms.end(); ++it) {
    if (deep_equal(it->first, atom)) {
      if (__builtin_add_overflow(it->second, coeff, &it->second)) ok = false;
      if (it->second == 0) terms.erase(it);
      return;
    }
  }
  terms.emplace_back(atom, coeff);
}

void LinearForm::add(const LinearForm& o, int64_t scale) {
  if (!o.ok) ok = false;
  for (const auto& [atom, c] : o.terms) {
    int64_t s;
    if (__builtin_mul_overflow(c, scale, &s)) ok = false;
    add_term(atom, s);
  }
  int64_t s;
  if (__builtin_mul_overflow(o.constant, scale, &s) ||
      __builtin_add_overflow(constant, s, &constant))
    ok = false;
}

namespace {
void parse_linear(const Expr& e, int64_t scale, LinearForm* f) {
  if (!f->ok) return;
  if (const IntImm* i = e.as<IntImm>()) {
    int64_t s;
    if (__builtin_mul_overflow(i->value, scale, &s) ||
        __builtin_add_overflow(f->constant, s, &f->constant))
      f->ok = false;
    return;
  }
  if (const Add* a = e.as<Add>()) {
    parse_linear(a->a, scale, f);
    parse_linear(a->b, scale, f);
    return;
  }
  if (const Sub* s = e.as<Sub>()) {
    parse_linear(s->a, scale, f);
    if (scale == INT64_MIN) {
      f->ok = false;
      return;
    }
    parse_linear(s->b, -scale, f);
    return;
  }
  if (const Mul* m = e.as<Mul>()) {
    const IntImm* cb = m->b.as<IntImm>();
    const IntImm* ca = m->a.as<IntImm>();
    if (cb || ca) {
      int64_t s;
      if (__builtin_mul_overflow(scale, cb ? cb->value : ca->value, &s)) {
        f->ok = false;
        return;
      }
      parse_linear(cb ? m->a : m->b, s, f);
      return;
    }
  }
  f->add_term(e, scale);
}

Expr scaled(const Expr& atom, int64_t c, DataType t) {
  return c == 1 ? atom : Mul::make(atom, make_const(t, c));
}
}  // namespace

LinearForm to_linear(const Expr& e) {
  LinearForm f;
  parse_linear(e, 1, &f);
  return f;
}

Expr from_linear(const LinearForm& f, DataType t) {
  Expr sum;
  for (const auto& [atom, c] : f.terms) {
    if (c <= 0) continue;
    Expr term = scaled(atom, c, t);
    sum = sum.defined() ? Add::make(sum, term) : term;
  }
  if (!sum.defined()) sum = make_const(t, f.constant);
  for (const auto& [atom, c] : f.terms) {
    if (c >= 0) continue;
    if (c == INT64_MIN) {
      sum = Add::make(sum, scaled(atom, c, t));
      continue;
    }
    sum = Sub::make(sum, scaled(atom, -c, t));
  }
  bool has_positive = false;
  for (const auto& term : f.terms) has_positive |= term.second > 0;
  if (has_positive && f.constant > 0) sum = Add::make(sum, make_const(t, f.constant));
  if (has_positive && f.constant < 0 && f.constant != INT64_MIN)
    sum = Sub::make(sum, make_const(t, -f.constant));
  if (has_positive && f.constant == INT64_MIN) sum = Add::make(sum, make_const(t, f.constant));
  return sum;
}

}  // namespace kiln::arith
