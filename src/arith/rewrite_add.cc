// Rewrite rules for Add, Sub and Mul. Scalar signed integers go through a linear form: equal
// terms merge ((x*4 + y) - x*4 -> y, x + 1 - 1 -> x), constants fold and move to the right
// ((x + 2) + 3 -> x + 5), products with constants distribute, and the split/fuse identity
// floordiv(x, c)*c + floormod(x, c) -> x is recognized. Other types fold constants only;
// vectors lift over Broadcast and Ramp (rewrite_vector.cc).
#include "analyzer_impl.h"

namespace kiln::arith {

namespace {
/// Folds two scalar immediates with the ir builders (which fold); undefined otherwise.
template <typename F>
Expr fold_consts(const Expr& a, const Expr& b, F f) {
  if (a.dtype().is_scalar() && is_const(a) && is_const(b)) return f(a, b);
  return Expr();
}

/// floordiv(x, c)*(k*c) + floormod(x, c)*k -> x*k, repeatedly.
void merge_div_mod(LinearForm* f) {
  bool changed = true;
  while (changed && f->ok) {
    changed = false;
    for (size_t i = 0; i < f->terms.size() && !changed; ++i) {
      const FloorMod* m = f->terms[i].first.as<FloorMod>();
      if (!m) continue;
      const IntImm* c = m->b.as<IntImm>();
      if (!c || c->value <= 0) continue;
      int64_t k = f->terms[i].second;
      for (size_t j = 0; j < f->terms.size(); ++j) {
        const FloorDiv* d = f->terms[j].first.as<FloorDiv>();
        if (!d || !deep_equal(d->a, m->a) || !deep_equal(d->b, m->b)) continue;
        int64_t kc;
        if (__builtin_mul_overflow(k, c->value, &kc) || f->terms[j].second != kc) continue;
        Expr x = m->a;
        size_t hi = std::max(i, j), lo = std::min(i, j);
        f->terms.erase(f->terms.begin() + hi);
        f->terms.erase(f->terms.begin() + lo);
        f->add(to_linear(x), k);
        changed = true;
        break;
      }
    }
  }
}
}  // namespace

Expr Rewriter::rw_linear(const Expr& e) {
  LinearForm f = to_linear(e);
  if (!f.ok) return e;
  merge_div_mod(&f);
  if (!f.ok) return e;
  return from_linear(f, e.dtype());
}

Expr Rewriter::rw_add(const Expr& a, const Expr& b) {
  if (a.dtype().is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::Add, a, b); r.defined()) return r;
    return Add::make(a, b);
  }
  if (Expr r = fold_consts(a, b, [](Expr x, Expr y) { return x + y; }); r.defined()) return r;
  if (is_index_type(a.dtype())) return rw_linear(Add::make(a, b));
  if (!a.dtype().is_float() && is_zero(b)) return a;
  if (!a.dtype().is_float() && is_zero(a)) return b;
  return Add::make(a, b);
}

Expr Rewriter::rw_sub(const Expr& a, const Expr& b) {
  if (a.dtype().is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::Sub, a, b); r.defined()) return r;
    return Sub::make(a, b);
  }
  if (Expr r = fold_consts(a, b, [](Expr x, Expr y) { return x - y; }); r.defined()) return r;
  if (is_index_type(a.dtype())) return rw_linear(Sub::make(a, b));
  if (!a.dtype().is_float() && is_zero(b)) return a;
  return Sub::make(a, b);
}

Expr Rewriter::rw_mul(const Expr& a, const Expr& b) {
  if (a.dtype().is_vector()) {
    if (Expr r = rw_vector_binary(NodeKind::Mul, a, b); r.defined()) return r;
    return Mul::make(a, b);
  }
  if (Expr r = fold_consts(a, b, [](Expr x, Expr y) { return x * y; }); r.defined()) return r;
  // A product of two non-constants stays one atom; a constant scales the other side.
  if (is_index_type(a.dtype())) return rw_linear(Mul::make(a, b));
  if (!a.dtype().is_float()) {
    if (is_one(b)) return a;
    if (is_one(a)) return b;
    if (is_zero(a) || is_zero(b)) return make_zero(a.dtype());
  }
  return Mul::make(a, b);
}

Expr Rewriter::visit(const Add* op) { return rw_add(mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const Sub* op) { return rw_sub(mutate(op->a), mutate(op->b)); }
Expr Rewriter::visit(const Mul* op) { return rw_mul(mutate(op->a), mutate(op->b)); }

}  // namespace kiln::arith
