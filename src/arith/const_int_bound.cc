// Constant integer bounds: a recursive interval evaluation over the expression with endpoints in
// int64, where INT64_MIN / INT64_MAX stand for -inf / +inf and every operation saturates.
// Variables take the bound recorded by Analyzer::bind / with_constraint, else their type's
// range; a result that leaves its type's range (and so may wrap) widens to the whole type;
// vector expressions are bounded over all lanes.
#include <algorithm>

#include "analyzer_impl.h"

namespace kiln::arith {

namespace {
constexpr int64_t kPos = ConstIntBound::kPosInf;
constexpr int64_t kNeg = ConstIntBound::kNegInf;

ConstIntBound make_bound(int64_t lo, int64_t hi) {
  ConstIntBound b;
  b.min_value = lo;
  b.max_value = hi;
  return b;
}
ConstIntBound everything() { return make_bound(kNeg, kPos); }

/// floor or trunc division of bound endpoints by a nonzero finite or infinite divisor.
int64_t bound_div(int64_t a, int64_t b, bool floor) {
  if (a == kPos || a == kNeg) {
    bool neg = (a == kNeg) != (b < 0);
    return neg ? kNeg : kPos;
  }
  if (b == kPos || b == kNeg) return 0;  // |a| finite over infinite: tends to 0 (or -1 floor)
  if (b == -1 && a == INT64_MIN) return kPos;
  return floor ? floordiv_int(a, b) : a / b;
}

ConstIntBound corners(const ConstIntBound& a, const ConstIntBound& b,
                      int64_t (*f)(int64_t, int64_t)) {
  int64_t v[4] = {f(a.min_value, b.min_value), f(a.min_value, b.max_value),
                  f(a.max_value, b.min_value), f(a.max_value, b.max_value)};
  return make_bound(*std::min_element(v, v + 4), *std::max_element(v, v + 4));
}

class BoundEvaluator : public ExprFunctor<ConstIntBound(const Expr&)> {
 public:
  explicit BoundEvaluator(Analyzer::Impl* ana) : ana_(ana) {}

  ConstIntBound eval(const Expr& e) {
    if (!e.dtype().is_int() && !e.dtype().is_uint() && !e.dtype().is_bool()) return everything();
    ConstIntBound r = visit_expr(e);
    ConstIntBound t = type_bound(e.dtype());
    // A result outside the type's range may wrap around: then anything in the type is possible.
    if (r.min_value < t.min_value || r.max_value > t.max_value) return t;
    return r;
  }

 protected:
  using ExprFunctor::visit;
  ConstIntBound visit_expr_default(const BaseExprNode* op) override {
    return type_bound(op->dtype);
  }
  ConstIntBound visit(const IntImm* op) override { return make_bound(op->value, op->value); }
  ConstIntBound visit(const Variable* op) override {
    Var v(op);
    auto it = ana_->var_bounds.find(v);
    if (it != ana_->var_bounds.end()) return it->second;
    return type_bound(op->dtype);
  }
  ConstIntBound visit(const Cast* op) override {
    ConstIntBound a = op->value.dtype().is_float() ? everything() : eval(op->value);
    ConstIntBound t = type_bound(op->dtype);
    if (a.min_value >= t.min_value && a.max_value <= t.max_value) return a;
    return t;
  }
  ConstIntBound visit(const Add* op) override {
    ConstIntBound a = eval(op->a), b = eval(op->b);
    return make_bound(lo_add(a.min_value, b.min_value), bound_add(a.max_value, b.max_value));
  }
  ConstIntBound visit(const Sub* op) override {
    ConstIntBound a = eval(op->a), b = eval(op->b);
    return make_bound(lo_add(a.min_value, bound_neg(b.max_value)),
                      bound_add(a.max_value, bound_neg(b.min_value)));
  }
  ConstIntBound visit(const Mul* op) override {
    return corners(eval(op->a), eval(op->b), bound_mul);
  }
  ConstIntBound visit(const FloorDiv* op) override { return divide(op->a, op->b, true); }
  ConstIntBound visit(const Div* op) override { return divide(op->a, op->b, false); }
  ConstIntBound visit(const FloorMod* op) override {
    ConstIntBound a = eval(op->a), b = eval(op->b);
    if (b.min_value > 0) {
      int64_t hi = b.max_value == kPos ? kPos : b.max_value - 1;
      if (a.min_value >= 0) return make_bound(0, std::min(a.max_value, hi));
      return make_bound(0, hi);
    }
    if (b.max_value < 0) {
      int64_t lo = b.min_value == kNeg ? kNeg : b.min_value + 1;
      if (a.max_value <= 0) return make_bound(std::max(a.min_value, lo), 0);
      return make_bound(lo, 0);
    }
    return everything();
  }
  ConstIntBound visit(const Mod* op) override {
    ConstIntBound a = eval(op->a), b = eval(op->b);
    int64_t m;  // largest |divisor|
    if (b.min_value > 0)
      m = b.max_value;
    else if (b.max_value < 0)
      m = bound_neg(b.min_value);
    else
      return everything();
    int64_t hi = m == kPos ? kPos : m - 1;
    if (a.min_value >= 0) return make_bound(0, std::min(a.max_value, hi));
    if (a.max_value <= 0) return make_bound(std::max(a.min_value, bound_neg(hi)), 0);
    return make_bound(std::max(a.min_value, bound_neg(hi)), std::min(a.max_value, hi));
  }
  ConstIntBound visit(const Min* op) override {
    ConstIntBound a = eval(op->a), b = eval(op->b);
    return make_bound(std::min(a.min_value, b.min_value), std::min(a.max_value, b.max_value));
  }
  ConstIntBound visit(const Max* op) override {
    ConstIntBound a = eval(op->a), b = eval(op->b);
    return make_bound(std::max(a.min_value, b.min_value), std::max(a.max_value, b.max_value));
  }
  ConstIntBound visit(const Select* op) override {
    ConstIntBound a = eval(op->true_value), b = eval(op->false_value);
    return make_bound(std::min(a.min_value, b.min_value), std::max(a.max_value, b.max_value));
  }
  ConstIntBound visit(const Broadcast* op) override { return eval(op->value); }
  ConstIntBound visit(const Ramp* op) override {
    ConstIntBound base = eval(op->base), stride = eval(op->stride);
    ConstIntBound span = corners(stride, make_bound(0, op->lanes - 1), bound_mul);
    return make_bound(lo_add(base.min_value, span.min_value),
                      bound_add(base.max_value, span.max_value));
  }
  ConstIntBound visit(const Let* op) override {
    Var v = op->var;
    auto old = ana_->var_bounds.find(v);
    std::optional<ConstIntBound> saved;
    if (old != ana_->var_bounds.end()) saved = old->second;
    ana_->var_bounds[v] = eval(op->value);
    ConstIntBound r = eval(op->body);
    if (saved)
      ana_->var_bounds[v] = *saved;
    else
      ana_->var_bounds.erase(v);
    return r;
  }
  ConstIntBound visit(const Call* op) override {
    if (op->name == builtin::kLikely && op->args.size() == 1) return eval(op->args[0]);
    if (op->name == builtin::kIfThenElse && op->args.size() == 3) {
      ConstIntBound a = eval(op->args[1]), b = eval(op->args[2]);
      return make_bound(std::min(a.min_value, b.min_value), std::max(a.max_value, b.max_value));
    }
    return type_bound(op->dtype);
  }

 private:
  /// Lower-bound addition: -inf wins over +inf.
  static int64_t lo_add(int64_t a, int64_t b) {
    if (a == kNeg || b == kNeg) return kNeg;
    return bound_add(a, b);
  }
  ConstIntBound divide(const Expr& ea, const Expr& eb, bool floor) {
    ConstIntBound a = eval(ea), b = eval(eb);
    if (b.min_value > 0 || b.max_value < 0) {
      int64_t v[4] = {
          bound_div(a.min_value, b.min_value, floor), bound_div(a.min_value, b.max_value, floor),
          bound_div(a.max_value, b.min_value, floor), bound_div(a.max_value, b.max_value, floor)};
      ConstIntBound r = make_bound(*std::min_element(v, v + 4), *std::max_element(v, v + 4));
      // A finite numerator over an infinite divisor floors to -1 when the signs differ.
      bool mixed = (a.min_value < 0 && b.min_value > 0) || (a.max_value > 0 && b.max_value < 0);
      if (floor && mixed) r.min_value = std::min(r.min_value, int64_t{-1});
      return r;
    }
    return everything();
  }

  Analyzer::Impl* ana_;
};
}  // namespace

ConstIntBound type_bound(DataType t) {
  if (t.is_bool()) return make_bound(0, 1);
  if (t.is_int()) {
    if (t.bits() >= 64) return everything();
    return make_bound(-(int64_t{1} << (t.bits() - 1)), (int64_t{1} << (t.bits() - 1)) - 1);
  }
  if (t.is_uint()) {
    if (t.bits() >= 63) return make_bound(0, kPos);
    return make_bound(0, (int64_t{1} << t.bits()) - 1);
  }
  return everything();
}

int64_t bound_add(int64_t a, int64_t b) {
  if (a == kPos || b == kPos) return kPos;
  if (a == kNeg || b == kNeg) return kNeg;
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? kPos : kNeg;
  return r;
}
int64_t bound_neg(int64_t a) {
  if (a == kPos) return kNeg;
  if (a == kNeg) return kPos;
  return -a;
}
int64_t bound_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  bool neg = (a < 0) != (b < 0);
  if (a == kPos || a == kNeg || b == kPos || b == kNeg) return neg ? kNeg : kPos;
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return neg ? kNeg : kPos;
  return r;
}

ConstIntBound Analyzer::Impl::bound(const Expr& e) { return BoundEvaluator(this).eval(e); }

}  // namespace kiln::arith
