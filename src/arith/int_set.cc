// Symbolic interval sets. IntSet is a closed interval [min, max] whose ends are expressions (an
// undefined end is unbounded). eval_set evaluates an expression over intervals: variables in
// the domain map take their interval, every other subexpression free of domain variables is a
// single point (itself). + and - combine ends, * by a constant scales (swapping for negative
// constants), * of two intervals uses [min*min, max*max] when both are provably non-negative,
// floordiv by a positive constant divides the ends, floormod by a positive constant c is exact
// when the interval provably lies in one period and [0, c-1] otherwise, min/max combine ends,
// Select unites its branches, Let binds its variable's set. Every end is simplified.
#include "analyzer_impl.h"

namespace kiln::arith {

IntSet IntSet::interval(Expr min, Expr max) {
  IntSet s;
  s.min_ = std::move(min);
  s.max_ = std::move(max);
  return s;
}
IntSet IntSet::single_point(Expr point) { return interval(point, point); }
IntSet IntSet::from_range(const Range& r) {
  if (is_one(r->extent)) return single_point(r->min);
  return interval(r->min, simplify(r->min + r->extent - make_one(r->extent.dtype())));
}
IntSet IntSet::everything() { return IntSet(); }

bool IntSet::is_single_point() const {
  return min_.defined() && max_.defined() && (min_.same_as(max_) || deep_equal(min_, max_));
}

Range IntSet::cover_range(const Range& max_range) const {
  if (is_everything()) return max_range;
  KILN_ICHECK(has_lower_bound() || max_range.defined())
      << "cover_range: the set has no lower bound and no max_range is given";
  KILN_ICHECK(has_upper_bound() || max_range.defined())
      << "cover_range: the set has no upper bound and no max_range is given";
  Expr mn = has_lower_bound() ? min_ : max_range->min;
  Expr mx =
      has_upper_bound()
          ? max_
          : simplify(max_range->min + max_range->extent - make_one(max_range->extent.dtype()));
  if (is_single_point()) return Range(mn, make_one(mn.dtype()));
  return Range(mn, simplify(mx - mn + make_one(mn.dtype())));
}

IntSet union_sets(const std::vector<IntSet>& sets) {
  KILN_ICHECK(!sets.empty()) << "union_sets of no sets";
  Analyzer ana;
  Expr mn = sets[0].min(), mx = sets[0].max();
  for (size_t i = 1; i < sets.size(); ++i) {
    mn = mn.defined() && sets[i].min().defined() ? ana.simplify(min(mn, sets[i].min())) : Expr();
    mx = mx.defined() && sets[i].max().defined() ? ana.simplify(max(mx, sets[i].max())) : Expr();
  }
  return IntSet::interval(mn, mx);
}

IntSet intersect_sets(const std::vector<IntSet>& sets) {
  KILN_ICHECK(!sets.empty()) << "intersect_sets of no sets";
  Analyzer ana;
  Expr mn = sets[0].min(), mx = sets[0].max();
  for (size_t i = 1; i < sets.size(); ++i) {
    const IntSet& s = sets[i];
    if (s.min().defined()) mn = mn.defined() ? ana.simplify(max(mn, s.min())) : s.min();
    if (s.max().defined()) mx = mx.defined() ? ana.simplify(min(mx, s.max())) : s.max();
  }
  return IntSet::interval(mn, mx);
}

namespace {

class SetEvaluator : public ExprFunctor<IntSet(const Expr&)> {
 public:
  SetEvaluator(Analyzer::Impl* ana, const VarMap<IntSet>& dom) : ana_(ana), dom_(dom) {}

  IntSet eval(const Expr& e) {
    if (!uses_dom(e)) return IntSet::single_point(ana_->simplify(e));
    return visit_expr(e);
  }

 protected:
  using ExprFunctor::visit;
  IntSet visit_expr_default(const BaseExprNode* op) override {
    if (op->dtype.is_bool()) return IntSet::interval(const_false(), const_true());
    return IntSet::everything();
  }
  IntSet visit(const Variable* op) override {
    auto it = dom_.find(Var(op));
    if (it != dom_.end()) return it->second;
    return IntSet::single_point(Expr(op));
  }
  IntSet visit(const Add* op) override {
    IntSet a = eval(op->a), b = eval(op->b);
    return make(lift2(a.min(), b.min(), [](Expr x, Expr y) { return x + y; }),
                lift2(a.max(), b.max(), [](Expr x, Expr y) { return x + y; }));
  }
  IntSet visit(const Sub* op) override {
    IntSet a = eval(op->a), b = eval(op->b);
    return make(lift2(a.min(), b.max(), [](Expr x, Expr y) { return x - y; }),
                lift2(a.max(), b.min(), [](Expr x, Expr y) { return x - y; }));
  }
  IntSet visit(const Mul* op) override {
    IntSet a = eval(op->a), b = eval(op->b);
    if (b.is_single_point()) return scale(a, b.min());
    if (a.is_single_point()) return scale(b, a.min());
    if (a.has_lower_bound() && b.has_lower_bound() && nonneg(a.min()) && nonneg(b.min())) {
      return make(a.min() * b.min(), lift2(a.max(), b.max(), [](Expr x, Expr y) { return x * y; }));
    }
    return IntSet::everything();
  }
  IntSet visit(const FloorDiv* op) override { return divide(op->a, op->b, true); }
  IntSet visit(const Div* op) override { return divide(op->a, op->b, false); }
  IntSet visit(const FloorMod* op) override {
    IntSet a = eval(op->a), b = eval(op->b);
    if (!b.is_single_point()) {
      if (b.has_upper_bound() && b.has_lower_bound() && positive(b.min()))
        return make(make_zero(op->dtype), b.max() - make_one(op->dtype));
      return IntSet::everything();
    }
    Expr c = b.min();
    if (!positive(c)) return IntSet::everything();
    if (a.has_lower_bound() && a.has_upper_bound()) {
      Expr q1 = ana_->simplify(floordiv(a.min(), c));
      Expr q2 = ana_->simplify(floordiv(a.max(), c));
      if (deep_equal(q1, q2) || ana_->can_prove(EQ::make(q1, q2)))
        return make(a.min() - q1 * c, a.max() - q1 * c);
    }
    return make(make_zero(op->dtype), c - make_one(op->dtype));
  }
  IntSet visit(const Mod* op) override {
    IntSet a = eval(op->a), b = eval(op->b);
    if (!b.is_single_point() || !positive(b.min())) return IntSet::everything();
    Expr c = b.min();
    if (a.has_lower_bound() && nonneg(a.min())) {
      if (a.has_upper_bound() && ana_->can_prove(LT::make(a.max(), c))) return a;
      return make(make_zero(op->dtype), c - make_one(op->dtype));
    }
    return make(make_one(op->dtype) - c, c - make_one(op->dtype));
  }
  IntSet visit(const Min* op) override {
    IntSet a = eval(op->a), b = eval(op->b);
    Expr lo = a.min().defined() && b.min().defined() ? min(a.min(), b.min()) : Expr();
    Expr hi = !a.max().defined() ? b.max() : !b.max().defined() ? a.max() : min(a.max(), b.max());
    return make(lo, hi);
  }
  IntSet visit(const Max* op) override {
    IntSet a = eval(op->a), b = eval(op->b);
    Expr lo = !a.min().defined() ? b.min() : !b.min().defined() ? a.min() : max(a.min(), b.min());
    Expr hi = a.max().defined() && b.max().defined() ? max(a.max(), b.max()) : Expr();
    return make(lo, hi);
  }
  IntSet visit(const Select* op) override {
    return union_sets({eval(op->true_value), eval(op->false_value)});
  }
  IntSet visit(const Cast* op) override {
    DataType from = op->value.dtype(), to = op->dtype;
    if ((from.is_int() || from.is_uint()) && (to.is_int() || to.is_uint()) &&
        to.bits() >= from.bits() && from.is_int() == to.is_int()) {
      IntSet a = eval(op->value);
      return make(a.min().defined() ? cast(to, a.min()) : Expr(),
                  a.max().defined() ? cast(to, a.max()) : Expr());
    }
    return visit_expr_default(op);
  }
  IntSet visit(const Let* op) override {
    IntSet v = eval(op->value);
    VarMap<IntSet> dom = dom_;
    dom[op->var] = v;
    return SetEvaluator(ana_, dom).eval(op->body);
  }
  IntSet visit(const Broadcast* op) override { return eval(op->value); }
  IntSet visit(const Ramp* op) override {
    IntSet base = eval(op->base);
    Expr span = op->stride * make_const(op->stride.dtype(), op->lanes - 1);
    IntSet s = eval(span);
    IntSet zero_to_span = union_sets({IntSet::single_point(make_zero(op->stride.dtype())), s});
    return make(lift2(base.min(), zero_to_span.min(), [](Expr x, Expr y) { return x + y; }),
                lift2(base.max(), zero_to_span.max(), [](Expr x, Expr y) { return x + y; }));
  }
  IntSet visit(const Call* op) override {
    if (op->name == builtin::kLikely && op->args.size() == 1) return eval(op->args[0]);
    return visit_expr_default(op);
  }

 private:
  bool uses_dom(const Expr& e) {
    if (dom_.empty()) return false;
    return uses_var(e, [this](const Variable* v) { return dom_.count(Var(v)) != 0; });
  }
  template <typename F>
  static Expr lift2(const Expr& a, const Expr& b, F f) {
    if (!a.defined() || !b.defined()) return Expr();
    return f(a, b);
  }
  IntSet make(const Expr& lo, const Expr& hi) {
    return IntSet::interval(lo.defined() ? ana_->simplify(lo) : lo,
                            hi.defined() ? ana_->simplify(hi) : hi);
  }
  bool nonneg(const Expr& e) { return ana_->can_prove(GE::make(e, make_zero(e.dtype()))); }
  bool positive(const Expr& e) { return ana_->can_prove(GT::make(e, make_zero(e.dtype()))); }
  bool negative(const Expr& e) { return ana_->can_prove(LT::make(e, make_zero(e.dtype()))); }

  IntSet scale(const IntSet& a, const Expr& c) {
    if (is_zero(c)) return IntSet::single_point(c);
    auto mul = [&](const Expr& x) { return x.defined() ? Expr(x * c) : Expr(); };
    if (positive(c)) return make(mul(a.min()), mul(a.max()));
    if (negative(c)) return make(mul(a.max()), mul(a.min()));
    return IntSet::everything();
  }
  IntSet divide(const Expr& ea, const Expr& eb, bool floor) {
    IntSet a = eval(ea), b = eval(eb);
    if (!b.is_single_point()) return IntSet::everything();
    Expr c = b.min();
    auto div = [&](const Expr& x) {
      if (!x.defined()) return Expr();
      return floor ? floordiv(x, c) : truncdiv(x, c);
    };
    if (positive(c)) return make(div(a.min()), div(a.max()));
    if (negative(c)) return make(div(a.max()), div(a.min()));
    return IntSet::everything();
  }

  Analyzer::Impl* ana_;
  const VarMap<IntSet>& dom_;
};

}  // namespace

IntSet Analyzer::Impl::eval_set(const Expr& e, const VarMap<IntSet>& dom) {
  return SetEvaluator(this, dom).eval(e);
}

}  // namespace kiln::arith
