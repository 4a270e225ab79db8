// Rewrite rules for vector integer expressions built from Broadcast and Ramp. Element-wise
// operators on two Broadcasts become one Broadcast of the scalar result; Ramps absorb additions,
// subtractions and constant scalings (Ramp(x, 1, 16) + Broadcast(y) -> Ramp(x + y, 1, 16));
// floor division and modulo of Ramp(b, s, n) by Broadcast(c) (c > 0) use the modulus of the
// base: when floormod(b, c) + s*(n-1) < c every lane lies in one period, so
// floordiv -> Broadcast(floordiv(b, c)) and floormod -> Ramp(floormod(b, c), s, n); when c
// divides s, floordiv -> Ramp(floordiv(b, c), s/c, n) and floormod -> Broadcast(floormod(b, c)).
#include "analyzer_impl.h"

namespace kiln::arith {

namespace {
Expr make_ramp(const Expr& base, const Expr& stride, int lanes) {
  if (is_zero(stride)) return Broadcast::make(base, lanes);
  return Ramp::make(base, stride, lanes);
}
}  // namespace

Expr Rewriter::rw_vector_binary(NodeKind k, const Expr& a, const Expr& b) {
  const Broadcast* ba = a.as<Broadcast>();
  const Broadcast* bb = b.as<Broadcast>();
  int lanes = a.dtype().lanes();
  if (ba && bb) return Broadcast::make(rebuild(k, ba->value, bb->value), lanes);
  const Ramp* ra = a.as<Ramp>();
  const Ramp* rb = b.as<Ramp>();
  switch (k) {
    case NodeKind::Add:
      if (ra && rb)
        return make_ramp(rw_add(ra->base, rb->base), rw_add(ra->stride, rb->stride), lanes);
      if (ra && bb) return make_ramp(rw_add(ra->base, bb->value), ra->stride, lanes);
      if (ba && rb) return make_ramp(rw_add(ba->value, rb->base), rb->stride, lanes);
      break;
    case NodeKind::Sub:
      if (ra && rb)
        return make_ramp(rw_sub(ra->base, rb->base), rw_sub(ra->stride, rb->stride), lanes);
      if (ra && bb) return make_ramp(rw_sub(ra->base, bb->value), ra->stride, lanes);
      if (ba && rb)
        return make_ramp(rw_sub(ba->value, rb->base),
                         rw_sub(make_zero(rb->stride.dtype()), rb->stride), lanes);
      break;
    case NodeKind::Mul:
      if (ra && bb)
        return make_ramp(rw_mul(ra->base, bb->value), rw_mul(ra->stride, bb->value), lanes);
      if (ba && rb)
        return make_ramp(rw_mul(ba->value, rb->base), rw_mul(ba->value, rb->stride), lanes);
      break;
    case NodeKind::FloorDiv:
    case NodeKind::FloorMod: {
      if (!ra || !bb || !is_index_type(ra->base.dtype())) break;
      const IntImm* c = bb->value.as<IntImm>();
      const IntImm* s = ra->stride.as<IntImm>();
      if (!c || c->value <= 0 || !s) break;
      bool div = k == NodeKind::FloorDiv;
      Expr cc = bb->value;
      if (s->value % c->value == 0) {
        if (div)
          return make_ramp(rw_floordiv(ra->base, cc), make_const(s->dtype, s->value / c->value),
                           lanes);
        return Broadcast::make(rw_floormod(ra->base, cc), lanes);
      }
      if (s->value < 0) break;
      Expr rem = rw_floormod(ra->base, cc);
      ConstIntBound rb_bound = ana_->bound(rem);
      int64_t span = s->value * (lanes - 1);
      if (rb_bound.min_value >= 0 && rb_bound.max_value != ConstIntBound::kPosInf &&
          rb_bound.max_value + span < c->value) {
        if (div) return Broadcast::make(rw_floordiv(ra->base, cc), lanes);
        return Ramp::make(rem, ra->stride, lanes);
      }
      break;
    }
    default:
      break;
  }
  return Expr();
}

Expr Rewriter::visit(const Ramp* op) {
  Expr base = mutate(op->base), stride = mutate(op->stride);
  if (is_zero(stride)) return Broadcast::make(base, op->lanes);
  if (base.same_as(op->base) && stride.same_as(op->stride)) return Expr(op);
  return Ramp::make(base, stride, op->lanes);
}

Expr Rewriter::visit(const Broadcast* op) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? Expr(op) : Broadcast::make(v, op->lanes);
}

}  // namespace kiln::arith
