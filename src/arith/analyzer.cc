// The Analyzer facade: variable bindings (ranges and values), scoped constraints, and the
// one-shot helpers. A constraint is split into its conjuncts; each comparison that isolates one
// variable with coefficient +-1 (v + rest OP 0 after moving everything to one side) tightens
// that variable's constant bound using the bound of `rest`, and every conjunct is also kept as
// a known fact that the comparison rules match literally. with_constraint restores all of it.
#include <algorithm>

#include "analyzer_impl.h"

namespace kiln::arith {

Analyzer::Analyzer() : impl_(std::make_unique<Impl>()) {}
Analyzer::~Analyzer() = default;

void Analyzer::bind(const Var& v, const Range& r) {
  KILN_ICHECK(v.defined() && r.defined()) << "Analyzer::bind of an undefined var or range";
  Expr mn = impl_->simplify(r->min);
  Expr ext = impl_->simplify(r->extent);
  impl_->var_values.erase(v);
  ConstIntBound lo = impl_->bound(mn);
  ConstIntBound hi =
      impl_->bound(impl_->simplify(Add::make(mn, Sub::make(ext, make_one(ext.dtype())))));
  ConstIntBound b;
  b.min_value = lo.min_value;
  b.max_value = hi.max_value;
  impl_->var_bounds[v] = b;
  if (!as_const_int(mn) || !as_const_int(ext)) {
    if (v.dtype() == mn.dtype()) {
      impl_->facts.push_back(impl_->simplify(GE::make(v, mn)));
      impl_->facts.push_back(impl_->simplify(LT::make(v, impl_->simplify(Add::make(mn, ext)))));
    }
  }
}

void Analyzer::bind(const Var& v, const Expr& value) {
  KILN_ICHECK(v.defined() && value.defined()) << "Analyzer::bind of an undefined var or value";
  Expr s = impl_->simplify(value);
  impl_->var_bounds[v] = impl_->bound(s);
  impl_->var_values[v] = s;
}

void Analyzer::with_constraint(const Expr& cond, const std::function<void()>& f) {
  VarMap<ConstIntBound> saved_bounds = impl_->var_bounds;
  size_t saved_facts = impl_->facts.size();
  struct Restore {
    Impl* impl;
    VarMap<ConstIntBound>* bounds;
    size_t facts;
    ~Restore() {
      impl->var_bounds = std::move(*bounds);
      impl->facts.resize(facts);
    }
  } restore{impl_.get(), &saved_bounds, saved_facts};
  impl_->add_constraint(cond);
  f();
}

void Analyzer::Impl::tighten(const Var& v, ConstIntBound b) {
  auto it = var_bounds.find(v);
  ConstIntBound cur = it != var_bounds.end() ? it->second : type_bound(v.dtype());
  cur.min_value = std::max(cur.min_value, b.min_value);
  cur.max_value = std::min(cur.max_value, b.max_value);
  var_bounds[v] = cur;
}

void Analyzer::Impl::add_constraint(const Expr& cond) {
  Expr c = simplify(cond);
  if (const And* a = c.as<And>()) {
    add_constraint(a->a);
    add_constraint(a->b);
    return;
  }
  if (const Call* call = c.as<Call>(); call && call->name == builtin::kLikely) {
    add_constraint(call->args[0]);
    return;
  }
  if (is_const(c)) return;
  facts.push_back(c);
  // Normalize to `d OP 0` with d = lhs - rhs.
  NodeKind k = c->kind;
  Expr lhs, rhs;
  // CASE lists stay on one line: clang-format 14 splits them differently on each run.
  // clang-format off
  switch (k) {
#define CASE(T)         \
  case NodeKind::T:     \
    lhs = c.as<T>()->a; \
    rhs = c.as<T>()->b; \
    break;
    CASE(LT) CASE(LE) CASE(GT) CASE(GE) CASE(EQ)
#undef CASE
    default: return;
  }
  // clang-format on
  if (!is_index_type(lhs.dtype())) return;
  LinearForm d = to_linear(Sub::make(lhs, rhs));
  if (!d.ok) return;
  for (const auto& [atom, coeff] : d.terms) {
    const Variable* var = atom.as<Variable>();
    if (!var || (coeff != 1 && coeff != -1)) continue;
    // coeff*v + rest OP 0  =>  v OP' -rest/coeff.
    LinearForm rest = d;
    rest.terms.clear();
    for (const auto& t : d.terms)
      if (!t.first.same_as(atom)) rest.terms.push_back(t);
    ConstIntBound rb = bound(from_linear(rest, lhs.dtype()));
    // v OP -rest when coeff == 1; flip when coeff == -1 (v OP' rest).
    int64_t lo, hi;  // bounds of the right-hand side r where coeff*v OP -rest
    if (coeff == 1) {
      lo = bound_neg(rb.max_value);
      hi = bound_neg(rb.min_value);
    } else {
      lo = rb.min_value;
      hi = rb.max_value;
    }
    ConstIntBound nb = type_bound(var->dtype);
    // Relation between v and r: for coeff == -1 the comparison flips.
    NodeKind rel = k;
    if (coeff == -1) {
      if (k == NodeKind::LT)
        rel = NodeKind::GT;
      else if (k == NodeKind::LE)
        rel = NodeKind::GE;
      else if (k == NodeKind::GT)
        rel = NodeKind::LT;
      else if (k == NodeKind::GE)
        rel = NodeKind::LE;
    }
    switch (rel) {
      case NodeKind::LT:
        nb.max_value = hi == ConstIntBound::kPosInf ? hi : hi - 1;
        break;
      case NodeKind::LE:
        nb.max_value = hi;
        break;
      case NodeKind::GT:
        nb.min_value = lo == ConstIntBound::kNegInf ? lo : lo + 1;
        break;
      case NodeKind::GE:
        nb.min_value = lo;
        break;
      case NodeKind::EQ:
        nb.min_value = lo;
        nb.max_value = hi;
        break;
      default:
        break;
    }
    tighten(Var(var), nb);
  }
}

std::optional<bool> Analyzer::Impl::lookup_fact(const Expr& cond) {
  for (const Expr& f : facts) {
    if (deep_equal(f, cond)) return true;
    if (const Not* n = cond.as<Not>(); n && deep_equal(f, n->a)) return false;
    if (const Not* n = f.as<Not>(); n && deep_equal(n->a, cond)) return false;
  }
  return std::nullopt;
}

Expr Analyzer::simplify(const Expr& e) { return impl_->simplify(e); }
bool Analyzer::can_prove(const Expr& cond) { return impl_->can_prove(cond); }
ConstIntBound Analyzer::const_int_bound(const Expr& e) { return impl_->bound(e); }
ModularSet Analyzer::modular_set(const Expr& e) { return impl_->modular(e); }
IntSet Analyzer::int_set(const Expr& e, const ir::VarMap<IntSet>& dom_map) {
  return impl_->eval_set(e, dom_map);
}

Expr simplify(const Expr& e) {
  Analyzer ana;
  return ana.simplify(e);
}

IntSet eval_set(const Expr& e, const ir::VarMap<IntSet>& dom_map) {
  Analyzer ana;
  return ana.int_set(e, dom_map);
}

}  // namespace kiln::arith
