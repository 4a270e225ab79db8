// Expression utilities of the arith layer: structural equality (free variables by identity),
// floor division on integers, and linear forms. A linear form is a list of (atom, coefficient)
// pairs plus a constant, parsed from Add/Sub/Mul-by-constant trees; equal atoms merge, and the
// rebuild is canonical (positive terms in first-appearance order, then subtracted terms, then
// the constant), so rebuilding a rebuilt form gives the same tree.
#include <cstdlib>

#include "analyzer_impl.h"

namespace kiln::arith {

namespace {
bool equal_list(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!deep_equal(a[i], b[i])) return false;
  return true;
}
}  // namespace

bool deep_equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a->kind != b->kind || a.dtype() != b.dtype()) return false;
  switch (a->kind) {
    case NodeKind::IntImm:
      return a.as<IntImm>()->value == b.as<IntImm>()->value;
    case NodeKind::FloatImm:
      return a.as<FloatImm>()->value == b.as<FloatImm>()->value;
    case NodeKind::StringImm:
      return a.as<StringImm>()->value == b.as<StringImm>()->value;
    case NodeKind::Variable:
      return false;  // distinct objects
    case NodeKind::Cast:
      return deep_equal(a.as<Cast>()->value, b.as<Cast>()->value);
#define KILN_EXPR_NODE(T)
#define KILN_BINARY_NODE(T) \
  case NodeKind::T:         \
    return deep_equal(a.as<T>()->a, b.as<T>()->a) && deep_equal(a.as<T>()->b, b.as<T>()->b);
#include "kiln/ir/node_kinds.def"
    case NodeKind::Not:
      return deep_equal(a.as<Not>()->a, b.as<Not>()->a);
    case NodeKind::Select: {
      const Select *x = a.as<Select>(), *y = b.as<Select>();
      return deep_equal(x->condition, y->condition) && deep_equal(x->true_value, y->true_value) &&
             deep_equal(x->false_value, y->false_value);
    }
    case NodeKind::Load: {
      const Load *x = a.as<Load>(), *y = b.as<Load>();
      return x->buffer_var.same_as(y->buffer_var) && deep_equal(x->index, y->index) &&
             deep_equal(x->predicate, y->predicate);
    }
    case NodeKind::Ramp: {
      const Ramp *x = a.as<Ramp>(), *y = b.as<Ramp>();
      return x->lanes == y->lanes && deep_equal(x->base, y->base) &&
             deep_equal(x->stride, y->stride);
    }
    case NodeKind::Broadcast: {
      const Broadcast *x = a.as<Broadcast>(), *y = b.as<Broadcast>();
      return x->lanes == y->lanes && deep_equal(x->value, y->value);
    }
    case NodeKind::Let: {
      const Let *x = a.as<Let>(), *y = b.as<Let>();
      return x->var.same_as(y->var) && deep_equal(x->value, y->value) &&
             deep_equal(x->body, y->body);
    }
    case NodeKind::Call: {
      const Call *x = a.as<Call>(), *y = b.as<Call>();
      return x->name == y->name && x->call_kind == y->call_kind && equal_list(x->args, y->args);
    }
    case NodeKind::ProducerLoad: {
      const ProducerLoad *x = a.as<ProducerLoad>(), *y = b.as<ProducerLoad>();
      return x->producer.same_as(y->producer) && equal_list(x->indices, y->indices);
    }
    default:
      return false;  // Reduce: identity only
  }
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
