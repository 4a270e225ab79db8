// Modular set analysis: for an integer expression, a pair (coeff, base) such that the value is
// always coeff * k + base for some integer k (coeff == 0: the constant base). Sums combine by
// the gcd of coefficients, products by gcd(c1*c2, c1*b2, c2*b1), floor division by a constant
// that divides both coefficient and base divides them, floor modulo reduces the base. The base
// is normalized into [0, coeff) when coeff > 0. Unknown expressions give (1, 0).
#include "analyzer_impl.h"

namespace kiln::arith {

namespace {
ModularSet make_set(int64_t coeff, int64_t base) {
  ModularSet m;
  coeff = coeff < 0 ? -coeff : coeff;
  m.coeff = coeff;
  m.base = coeff == 0 ? base : floormod_int(base, coeff);
  return m;
}
ModularSet everything() { return make_set(1, 0); }

class ModularEvaluator : public ExprFunctor<ModularSet(const Expr&)> {
 public:
  explicit ModularEvaluator(Analyzer::Impl* ana) : ana_(ana) {}
  ModularSet eval(const Expr& e) {
    if (!e.dtype().is_int() && !e.dtype().is_uint()) return everything();
    return visit_expr(e);
  }

 protected:
  using ExprFunctor::visit;
  ModularSet visit_expr_default(const BaseExprNode*) override { return everything(); }
  ModularSet visit(const IntImm* op) override { return make_set(0, op->value); }
  ModularSet visit(const Variable* op) override {
    auto it = ana_->var_values.find(Var(op));
    if (it != ana_->var_values.end()) return eval(it->second);
    auto b = ana_->var_bounds.find(Var(op));
    if (b != ana_->var_bounds.end() && b->second.min_value == b->second.max_value)
      return make_set(0, b->second.min_value);
    return everything();
  }
  ModularSet visit(const Add* op) override { return add(eval(op->a), eval(op->b), 1); }
  ModularSet visit(const Sub* op) override { return add(eval(op->a), eval(op->b), -1); }
  ModularSet visit(const Mul* op) override {
    ModularSet a = eval(op->a), b = eval(op->b);
    int64_t c1, c2, c3, base;
    if (__builtin_mul_overflow(a.coeff, b.coeff, &c1) ||
        __builtin_mul_overflow(a.coeff, b.base, &c2) ||
        __builtin_mul_overflow(b.coeff, a.base, &c3) ||
        __builtin_mul_overflow(a.base, b.base, &base))
      return everything();
    return make_set(gcd_int(gcd_int(c1, c2), c3), base);
  }
  ModularSet visit(const FloorDiv* op) override {
    ModularSet a = eval(op->a), b = eval(op->b);
    if (b.coeff != 0 || b.base == 0) return everything();
    int64_t c = b.base;
    if (a.coeff == 0) return make_set(0, floordiv_int(a.base, c));
    if (c > 0 && a.coeff % c == 0) return make_set(a.coeff / c, floordiv_int(a.base, c));
    return everything();
  }
  ModularSet visit(const FloorMod* op) override {
    ModularSet a = eval(op->a), b = eval(op->b);
    if (b.coeff != 0 || b.base <= 0) return everything();
    int64_t c = b.base;
    if (a.coeff == 0) return make_set(0, floormod_int(a.base, c));
    int64_t g = gcd_int(a.coeff, c);
    if (g == c) return make_set(0, floormod_int(a.base, c));
    return make_set(g, a.base);
  }
  ModularSet visit(const Min* op) override { return unite(eval(op->a), eval(op->b)); }
  ModularSet visit(const Max* op) override { return unite(eval(op->a), eval(op->b)); }
  ModularSet visit(const Select* op) override {
    return unite(eval(op->true_value), eval(op->false_value));
  }
  ModularSet visit(const Broadcast* op) override { return eval(op->value); }
  ModularSet visit(const Let* op) override {
    Var v = op->var;
    auto old = ana_->var_values.find(v);
    std::optional<Expr> saved;
    if (old != ana_->var_values.end()) saved = old->second;
    ana_->var_values[v] = op->value;
    ModularSet r = eval(op->body);
    if (saved)
      ana_->var_values[v] = *saved;
    else
      ana_->var_values.erase(v);
    return r;
  }
  ModularSet visit(const Cast* op) override {
    if (!op->value.dtype().is_int() && !op->value.dtype().is_uint()) return everything();
    if (op->dtype.bits() < op->value.dtype().bits()) return everything();
    return eval(op->value);
  }

 private:
  static ModularSet add(const ModularSet& a, const ModularSet& b, int64_t sign) {
    int64_t base;
    if (__builtin_mul_overflow(b.base, sign, &base) || __builtin_add_overflow(a.base, base, &base))
      return everything();
    return make_set(gcd_int(a.coeff, b.coeff), base);
  }
  static ModularSet unite(const ModularSet& a, const ModularSet& b) {
    int64_t d;
    if (__builtin_sub_overflow(a.base, b.base, &d)) return everything();
    return make_set(gcd_int(gcd_int(a.coeff, b.coeff), d), a.base);
  }
  Analyzer::Impl* ana_;
};
}  // namespace

ModularSet Analyzer::Impl::modular(const Expr& e) { return ModularEvaluator(this).eval(e); }

}  // namespace kiln::arith
