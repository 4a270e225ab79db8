// Rewrite rules for comparisons, logic and Select. An integer comparison a OP b becomes a
// question about d = a - b in linear form: each relation reduces to one or two claims "e <= 0"
// (a < b is a - b + 1 <= 0), and a claim holds when the constant bound of e says so, or when a
// known fact f <= 0 (from with_constraint or a symbolic range) gives bound(e - f) <= 0. Undecided
// comparisons are rebuilt canonically: positive terms on the left, subtracted terms and the
// constant on the right (x + 2 < 5 -> x < 3; 1 - x < 4 -> -3 < x). And/Or/Not/Select fold
// constant operands, Not pushes into integer comparisons, and Select with equal branches
// collapses.
#include <algorithm>

#include "analyzer_impl.h"

namespace kiln::arith {

namespace {
LinearForm negated(const LinearForm& f) {
  LinearForm n;
  n.add(f, -1);
  return n;
}
LinearForm plus(LinearForm f, int64_t k) {
  if (__builtin_add_overflow(f.constant, k, &f.constant)) f.ok = false;
  return f;
}

/// The facts as claims e <= 0.
std::vector<LinearForm> fact_claims(Analyzer::Impl* ana) {
  std::vector<LinearForm> out;
  for (const Expr& f : ana->facts) {
    const Expr *a = nullptr, *b = nullptr;
    // CASE lists stay on one line: clang-format 14 splits them differently on each run.
    // clang-format off
    switch (f->kind) {
#define CASE(T)        \
  case NodeKind::T:    \
    a = &f.as<T>()->a; \
    b = &f.as<T>()->b; \
    break;
      CASE(LT) CASE(LE) CASE(GT) CASE(GE) CASE(EQ)
#undef CASE
      default: continue;
    }
    // clang-format on
    if (!is_index_type(a->dtype())) continue;
    LinearForm d = to_linear(Sub::make(*a, *b));
    if (!d.ok) continue;
    switch (f->kind) {
      case NodeKind::LT:
        out.push_back(plus(d, 1));
        break;
      case NodeKind::LE:
        out.push_back(d);
        break;
      case NodeKind::GT:
        out.push_back(plus(negated(d), 1));
        break;
      case NodeKind::GE:
        out.push_back(negated(d));
        break;
      default:
        out.push_back(d);
        out.push_back(negated(d));
        break;
    }
  }
  return out;
}

/// Whether e <= 0 is provable from constant bounds or a fact.
bool prove_le_zero(Analyzer::Impl* ana, const std::vector<LinearForm>& facts, const LinearForm& e,
                   DataType t) {
  if (!e.ok) return false;
  if (ana->bound(from_linear(e, t)).max_value <= 0) return true;
  for (const LinearForm& f : facts) {
    // A fact about values of another type (an int32 loop bound where e compares int64 values)
    // cannot be combined with e term by term.
    if (std::any_of(f.terms.begin(), f.terms.end(),
                    [&](const auto& term) { return term.first.dtype() != t; }))
      continue;
    LinearForm diff = e;
    diff.add(f, -1);
    if (diff.ok && ana->bound(from_linear(diff, t)).max_value <= 0) return true;
  }
  return false;
}

NodeKind negate_kind(NodeKind k) {
  switch (k) {
    case NodeKind::LT:
      return NodeKind::GE;
    case NodeKind::LE:
      return NodeKind::GT;
    case NodeKind::GT:
      return NodeKind::LE;
    case NodeKind::GE:
      return NodeKind::LT;
    case NodeKind::EQ:
      return NodeKind::NE;
    default:
      return NodeKind::EQ;
  }
}

Expr make_cmp(NodeKind k, const Expr& a, const Expr& b) {
  switch (k) {
    case NodeKind::LT:
      return LT::make(a, b);
    case NodeKind::LE:
      return LE::make(a, b);
    case NodeKind::GT:
      return GT::make(a, b);
    case NodeKind::GE:
      return GE::make(a, b);
    case NodeKind::EQ:
      return EQ::make(a, b);
    default:
      return NE::make(a, b);
  }
}

Expr fold_cmp(NodeKind k, const Expr& a, const Expr& b) {
  switch (k) {
    case NodeKind::LT:
      return a < b;
    case NodeKind::LE:
      return a <= b;
    case NodeKind::GT:
      return a > b;
    case NodeKind::GE:
      return a >= b;
    case NodeKind::EQ:
      return a == b;
    default:
      return a != b;
  }
}
}  // namespace

Expr Rewriter::rw_cmp(NodeKind k, const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  if (t.is_vector()) {
    if (Expr r = rw_vector_binary(k, a, b); r.defined()) return r;
    return make_cmp(k, a, b);
  }
  if (is_const(a) && is_const(b)) return fold_cmp(k, a, b);
  if (!is_index_type(t)) {
    if (!t.is_float() && deep_equal(a, b))
      return (k == NodeKind::EQ || k == NodeKind::LE || k == NodeKind::GE) ? const_true()
                                                                           : const_false();
    Expr r = make_cmp(k, a, b);
    if (auto f = ana_->lookup_fact(r)) return *f ? const_true() : const_false();
    return r;
  }
  LinearForm d = to_linear(Sub::make(a, b));
  if (!d.ok) return make_cmp(k, a, b);
  std::vector<LinearForm> facts = fact_claims(ana_);
  auto prove = [&](const LinearForm& e) { return prove_le_zero(ana_, facts, e, t); };
  std::optional<bool> decided;
  switch (k) {
    case NodeKind::LT:
      if (prove(plus(d, 1)))
        decided = true;
      else if (prove(negated(d)))
        decided = false;
      break;
    case NodeKind::LE:
      if (prove(d))
        decided = true;
      else if (prove(plus(negated(d), 1)))
        decided = false;
      break;
    case NodeKind::GT:
      if (prove(plus(negated(d), 1)))
        decided = true;
      else if (prove(d))
        decided = false;
      break;
    case NodeKind::GE:
      if (prove(negated(d)))
        decided = true;
      else if (prove(plus(d, 1)))
        decided = false;
      break;
    case NodeKind::EQ:
    case NodeKind::NE: {
      std::optional<bool> eq;
      if (prove(d) && prove(negated(d)))
        eq = true;
      else if (prove(plus(d, 1)) || prove(plus(negated(d), 1)))
        eq = false;
      else if (ana_->modular(from_linear(d, t)).base != 0)
        eq = false;  // d is never a multiple of its modulus' zero class
      if (eq) decided = k == NodeKind::EQ ? *eq : !*eq;
      break;
    }
    default:
      break;
  }
  if (decided) return *decided ? const_true() : const_false();
  // Canonical form: positive terms OP subtracted terms - constant.
  LinearForm lhs, rhs;
  for (const auto& [atom, coeff] : d.terms) {
    if (coeff > 0)
      lhs.add_term(atom, coeff);
    else
      rhs.add_term(atom, -coeff);
  }
  // With no positive term keep the constant on the left: -10 >= x, not 0 >= x + 10.
  if (lhs.terms.empty())
    lhs.constant = d.constant;
  else
    rhs.constant = -d.constant;
  return make_cmp(k, from_linear(lhs, t), from_linear(rhs, t));
}

Expr Rewriter::rw_and(const Expr& a, const Expr& b) {
  if (a.dtype().is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::And, a, b); r.defined()) return r;
  }
  if (auto x = as_const_int(a)) return *x ? b : a;
  if (auto y = as_const_int(b)) return *y ? a : b;
  if (deep_equal(a, b)) return a;
  if (const Not* n = b.as<Not>(); n && deep_equal(n->a, a)) return const_false(a.dtype().lanes());
  if (const Not* n = a.as<Not>(); n && deep_equal(n->a, b)) return const_false(a.dtype().lanes());
  return And::make(a, b);
}

Expr Rewriter::rw_or(const Expr& a, const Expr& b) {
  if (a.dtype().is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::Or, a, b); r.defined()) return r;
  }
  if (auto x = as_const_int(a)) return *x ? a : b;
  if (auto y = as_const_int(b)) return *y ? b : a;
  if (deep_equal(a, b)) return a;
  if (const Not* n = b.as<Not>(); n && deep_equal(n->a, a)) return const_true(a.dtype().lanes());
  if (const Not* n = a.as<Not>(); n && deep_equal(n->a, b)) return const_true(a.dtype().lanes());
  return Or::make(a, b);
}

Expr Rewriter::rw_not(const Expr& a) {
  if (auto x = as_const_int(a))
    return *x ? const_false(a.dtype().lanes()) : const_true(a.dtype().lanes());
  if (const Not* n = a.as<Not>()) return n->a;
  if (const Broadcast* b = a.as<Broadcast>()) return Broadcast::make(rw_not(b->value), b->lanes);
  // CASE lists stay on one line: clang-format 14 splits them differently on each run.
  // clang-format off
  switch (a->kind) {
#define CASE(T)                                                                                    \
  case NodeKind::T: {                                                                              \
    const T* c = a.as<T>();                                                                        \
    if (is_index_type(c->a.dtype()) || NodeKind::T == NodeKind::EQ || NodeKind::T == NodeKind::NE) \
      return rw_cmp(negate_kind(NodeKind::T), c->a, c->b);                                         \
    break;                                                                                         \
  }
    CASE(LT) CASE(LE) CASE(GT) CASE(GE) CASE(EQ) CASE(NE)
#undef CASE
    default: break;
  }
  // clang-format on
  return Not::make(a);
}

Expr Rewriter::rw_select(const Expr& c, const Expr& t, const Expr& f) {
  if (auto x = as_const_int(c)) return *x ? t : f;
  if (deep_equal(t, f)) return t;
  if (const Not* n = c.as<Not>()) return rw_select(n->a, f, t);
  if (t.dtype().is_bool() && t.dtype() == c.dtype() && is_one(t) && is_zero(f)) return c;
  return Select::make(c, t, f);
}

Expr Rewriter::visit(const EQ* op) { return rw_cmp(NodeKind::EQ, mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const NE* op) { return rw_cmp(NodeKind::NE, mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const LT* op) { return rw_cmp(NodeKind::LT, mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const LE* op) { return rw_cmp(NodeKind::LE, mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const GT* op) { return rw_cmp(NodeKind::GT, mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const GE* op) { return rw_cmp(NodeKind::GE, mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const And* op) { return rw_and(mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const Or* op) { return rw_or(mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const Not* op) { return rw_not(mutate(op->a)); }

}  // namespace kiln::arith
