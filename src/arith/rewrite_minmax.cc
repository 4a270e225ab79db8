// Rewrite rules for Min and Max. Constants fold, equal operands collapse, nested constants merge
// (min(min(x, c1), c2) -> min(x, min(c1, c2))), and otherwise the constant bound of the
// simplified difference a - b decides the operand: min(x, y) -> x when x - y <= 0 is provable,
// which also covers min(x + c1, x + c2) -> x + min(c1, c2).
#include <algorithm>

#include "analyzer_impl.h"

namespace kiln::arith {

namespace {
/// -1: a <= b provable, 1: a >= b provable, 0: unknown.
int order(Rewriter* rw, Analyzer::Impl* ana, const Expr& a, const Expr& b) {
  ConstIntBound d = ana->bound(rw->rw_sub(a, b));
  if (d.max_value <= 0) return -1;
  if (d.min_value >= 0) return 1;
  return 0;
}
}  // namespace

Expr Rewriter::rw_min(const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  if (t.is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::Min, a, b); r.defined()) return r;
    return Min::make(a, b);
  }
  if (is_const(a) && is_const(b)) return min(a, b);
  if (deep_equal(a, b)) return a;
  if (!is_index_type(t)) return Min::make(a, b);
  if (is_const(a)) return rw_min(b, a);  // constants to the right
  if (const Min* m = a.as<Min>(); m && is_const(m->b) && is_const(b))
    return rw_min(m->a, min(m->b, b));
  int o = order(this, ana_, a, b);
  if (o < 0) return a;
  if (o > 0) return b;
  return Min::make(a, b);
}

Expr Rewriter::rw_max(const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  if (t.is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::Max, a, b); r.defined()) return r;
    return Max::make(a, b);
  }
  if (is_const(a) && is_const(b)) return max(a, b);
  if (deep_equal(a, b)) return a;
  if (!is_index_type(t)) return Max::make(a, b);
  if (is_const(a)) return rw_max(b, a);  // constants to the right
  if (const Max* m = a.as<Max>(); m && is_const(m->b) && is_const(b))
    return rw_max(m->a, max(m->b, b));
  int o = order(this, ana_, a, b);
  if (o < 0) return b;
  if (o > 0) return a;
  return Max::make(a, b);
}

Expr Rewriter::visit(const Min* op) { return rw_min(mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const Max* op) { return rw_max(mutate(op->a), mutate(op->b)); }

}  // namespace kiln::arith
