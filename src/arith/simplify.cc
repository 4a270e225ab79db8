// The rewrite simplifier's driver and its leaf/structural rules. Simplification is bottom-up:
// each node's operands are simplified first, then the node's family rules (rewrite_*.cc) run on
// the simplified operands. One pass is not always a fixpoint (a rule can expose another), so
// Analyzer::Impl::simplify repeats the pass until the tree stops changing, at most kMaxRounds
// times, which bounds the work. Variables bound to values are substituted; Let bodies are
// simplified with the bound variable's value or constant bound known.
#include "analyzer_impl.h"

namespace kiln::arith {

namespace {
constexpr int kMaxRounds = 6;

/// Saves and restores one variable's knowledge around a scope.
class ScopedVar {
 public:
  ScopedVar(Analyzer::Impl* ana, const Var& v) : ana_(ana), v_(v) {
    if (auto it = ana->var_values.find(v); it != ana->var_values.end()) value_ = it->second;
    if (auto it = ana->var_bounds.find(v); it != ana->var_bounds.end()) bound_ = it->second;
  }
  ~ScopedVar() {
    if (value_)
      ana_->var_values[v_] = *value_;
    else
      ana_->var_values.erase(v_);
    if (bound_)
      ana_->var_bounds[v_] = *bound_;
    else
      ana_->var_bounds.erase(v_);
  }

 private:
  Analyzer::Impl* ana_;
  Var v_;
  std::optional<Expr> value_;
  std::optional<ConstIntBound> bound_;
};
}  // namespace

Expr Analyzer::Impl::simplify(const Expr& e) {
  if (!e.defined()) return e;
  Expr cur = e;
  for (int i = 0; i < kMaxRounds; ++i) {
    Expr next = Rewriter(this).mutate(cur);
    if (deep_equal(next, cur)) return next;
    cur = next;
  }
  return cur;
}

bool Analyzer::Impl::can_prove(const Expr& cond) {
  Expr s = simplify(cond);
  auto v = as_const_int(s);
  return v && *v != 0;
}

Expr Rewriter::visit(const Variable* op) {
  auto it = ana_->var_values.find(Var(op));
  if (it != ana_->var_values.end()) return it->second;
  if (op->dtype.is_bool()) {
    if (auto f = ana_->lookup_fact(Expr(op))) return *f ? const_true() : const_false();
  }
  return Expr(op);
}

Expr Rewriter::visit(const Cast* op) {
  Expr v = mutate(op->value);
  if (v.dtype() == op->dtype) return v;
  if (is_const(v) && v.dtype().is_scalar()) return cast(op->dtype, v);
  if (const Broadcast* b = v.as<Broadcast>())
    return Broadcast::make(mutate(Cast::make(op->dtype.element_of(), b->value)), b->lanes);
  // Widening integer casts of a cast: cast(int64, cast(int32, x:int16)) -> cast(int64, x).
  if (const Cast* inner = v.as<Cast>()) {
    DataType a = inner->value.dtype(), m = v.dtype(), t = op->dtype;
    if (a.is_int() && m.is_int() && t.is_int() && a.bits() <= m.bits() && m.bits() <= t.bits())
      return Cast::make(t, inner->value);
  }
  return v.same_as(op->value) ? Expr(op) : Cast::make(op->dtype, v);
}

Expr Rewriter::visit(const Select* op) {
  return rw_select(mutate(op->condition), mutate(op->true_value), mutate(op->false_value));
}

Expr Rewriter::visit(const Let* op) {
  Expr value = mutate(op->value);
  ScopedVar scope(ana_, op->var);
  if (value.as<IntImm>() || value.as<Variable>()) {
    ana_->var_values[op->var] = value;
    ana_->var_bounds[op->var] = ana_->bound(value);
    return mutate(op->body);
  }
  ana_->var_values.erase(op->var);
  ana_->var_bounds[op->var] = ana_->bound(value);
  Expr body = mutate(op->body);
  const Variable* v = op->var.get();
  if (!uses_var(body, [v](const Variable* x) { return x == v; })) return body;
  if (value.same_as(op->value) && body.same_as(op->body)) return Expr(op);
  return Let::make(op->var, value, body);
}

Expr Rewriter::visit(const Call* op) {
  std::vector<Expr> args;
  bool changed = mutate_all(op->args, &args);
  if (op->name == builtin::kLikely && args.size() == 1 && is_const(args[0])) return args[0];
  if (op->name == builtin::kIfThenElse && args.size() == 3) {
    if (auto c = as_const_int(args[0])) return *c ? args[1] : args[2];
    if (deep_equal(args[1], args[2])) return args[1];
  }
  if (!changed) return Expr(op);
  return Call::make(op->dtype, op->name, std::move(args), op->call_kind);
}

Expr Rewriter::rebuild(NodeKind k, const Expr& a, const Expr& b) {
  switch (k) {
    case NodeKind::Add:
      return rw_add(a, b);
    case NodeKind::Sub:
      return rw_sub(a, b);
    case NodeKind::Mul:
      return rw_mul(a, b);
    case NodeKind::Div:
      return rw_truncdiv(a, b);
    case NodeKind::Mod:
      return rw_truncmod(a, b);
    case NodeKind::FloorDiv:
      return rw_floordiv(a, b);
    case NodeKind::FloorMod:
      return rw_floormod(a, b);
    case NodeKind::Min:
      return rw_min(a, b);
    case NodeKind::Max:
      return rw_max(a, b);
    case NodeKind::And:
      return rw_and(a, b);
    case NodeKind::Or:
      return rw_or(a, b);
    default:
      return rw_cmp(k, a, b);
  }
}

}  // namespace kiln::arith
