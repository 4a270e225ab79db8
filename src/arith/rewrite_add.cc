// Rewrite rules for Add, Sub and Mul. Scalar signed integers go through a linear form: equal
// terms merge ((x*4 + y) - x*4 -> y, x + 1 - 1 -> x), constants fold and move to the right
// ((x + 2) + 3 -> x + 5), products with constants distribute, and the split/fuse identities
// (floordiv(x, c)*c + floormod(x, c) -> x, also across a second split; merge_div_mod) are
// recognized. Other types fold constants only;
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

/// Positive constant divisor of a FloorDiv / FloorMod, or 0.
int64_t divisor(const Expr& b) {
  const IntImm* c = b.as<IntImm>();
  return c && c->value > 0 ? c->value : 0;
}

/// True when floordiv(x, c) == floordiv(y, q) for every value: c = q*s and x = s*y + r with
/// r in [0, s) (a fused axis split again: x = outer*16 + inner, y = outer, s = 16).
bool same_quotient(const Expr& x, int64_t c, const Expr& y, int64_t q, Analyzer::Impl* ana) {
  if (deep_equal(x, y) && c == q) return true;
  if (c % q != 0) return false;
  const int64_t s = c / q;
  LinearForm r = to_linear(x);
  r.add(to_linear(y), -s);
  if (!r.ok) return false;
  ConstIntBound b = ana->bound(from_linear(r, x.dtype()));
  return b.min_value >= 0 && b.max_value < s;
}

/// The split/fuse identities on the terms of `f`, repeatedly:
///   floormod(x, c)*k + floormod(floordiv(x, c), d)*(k*c) -> floormod(x, c*d)*k
///   floormod(x, c)*k + floordiv(y, q)*(k*c) -> x*k   when floordiv(x, c) == floordiv(y, q)
/// (same_quotient; y = x, q = c the plain one). A fused index split again and unflattened,
/// floordiv(o, 196)*3136 + floormod(floordiv(o*16 + i, 56), 56)*56 + floormod(o*16 + i, 56),
/// folds back to o*16 + i.
void merge_div_mod(LinearForm* f, Analyzer::Impl* ana) {
  bool changed = true;
  while (changed && f->ok) {
    changed = false;
    for (size_t i = 0; i < f->terms.size() && !changed; ++i) {
      const FloorMod* m = f->terms[i].first.as<FloorMod>();
      const int64_t c = m ? divisor(m->b) : 0;
      if (!c) continue;
      const int64_t k = f->terms[i].second;
      int64_t kc;
      if (__builtin_mul_overflow(k, c, &kc)) continue;
      for (size_t j = 0; j < f->terms.size() && !changed; ++j) {
        if (j == i || f->terms[j].second != kc) continue;
        const Expr& t = f->terms[j].first;
        Expr merged;
        int64_t scale = k;
        if (const FloorDiv* d = t.as<FloorDiv>()) {
          const int64_t q = divisor(d->b);
          if (q && same_quotient(m->a, c, d->a, q, ana)) {
            merged = m->a;
          }
        } else if (const FloorMod* m2 = t.as<FloorMod>()) {
          const FloorDiv* inner = m2->a.as<FloorDiv>();
          const int64_t d = divisor(m2->b);
          int64_t cd;
          if (d && inner && divisor(inner->b) == c && deep_equal(inner->a, m->a) &&
              !__builtin_mul_overflow(c, d, &cd))
            merged = FloorMod::make(m->a, make_const(m->b.dtype(), cd));
        }
        if (!merged.defined()) continue;
        size_t hi = std::max(i, j), lo = std::min(i, j);
        f->terms.erase(f->terms.begin() + static_cast<ptrdiff_t>(hi));
        f->terms.erase(f->terms.begin() + static_cast<ptrdiff_t>(lo));
        if (merged.as<FloorMod>()) {
          f->add_term(merged, scale);
        } else {
          f->add(to_linear(merged), scale);
        }
        changed = true;
      }
    }
  }
}
}  // namespace

Expr Rewriter::rw_linear(const Expr& e) {
  LinearForm f = to_linear(e);
  if (!f.ok) return e;
  merge_div_mod(&f, ana_);
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
