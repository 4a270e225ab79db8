// vectorize: For(kVectorized, extent L) -> straight-line vector code (TVM's Vectorizer).
// Loops are visited innermost first. For a vectorized loop, a mutator replaces the loop var by
// Ramp(min, 1, L) and rebuilds every expression that depends on it as an L-lane expression:
// scalars are broadcast where mixed, Ramp/Broadcast arithmetic is kept in closed form
// (ramp + c, ramp * c, floordiv/floormod of a ramp that stays inside one block), loads and
// stores take vector indices, and a guard on the var predicates every load and store under it
// (an `if_then_else` call becomes a Select of predicated loads); a commutative reduction's update
// marked attr::kReduceLanes combines the loop's lanes in a tree. Anything without a vector
// form throws CannotVectorize, caught at the loop, which then becomes serial: correctness
// before speed. Scalar parts of the result (ramp bases, broadcast values) are simplified with
// the arith analyzer.
#include <numeric>
#include <string>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/ir/structural.h"
#include "kiln/tir/transform.h"

namespace kiln::tir {
namespace {

struct CannotVectorize {
  std::string reason;
};

int lanes_of(const Expr& e) { return e.dtype().lanes(); }

bool loads_buffer(const Expr& e, const Var& buf) {
  bool found = false;
  post_order_visit(e, [&](const IRNode* n) {
    if (n->kind == NodeKind::Load && static_cast<const Load*>(n)->buffer_var.same_as(buf))
      found = true;
  });
  return found;
}

bool has_load(const Expr& e) {
  bool found = false;
  post_order_visit(e, [&](const IRNode* n) { found |= n->kind == NodeKind::Load; });
  return found;
}

/// Rewrites one loop body with the loop var as a vector.
class Vectorizer : public IRMutator {
 public:
  Vectorizer(const Var& var, const Expr& min, int lanes) : var_(var), lanes_(lanes) {
    ramp_ = Ramp::make(min, make_one(min.dtype()), lanes);
  }

 protected:
  using IRMutator::visit;

  [[noreturn]] static void fail(const std::string& why) { throw CannotVectorize{why}; }

  /// Broadcasts the scalar side so both have the same lanes.
  void unify(Expr& a, Expr& b) {
    int la = lanes_of(a), lb = lanes_of(b);
    if (la == lb) return;
    if (la == 1) {
      a = Broadcast::make(a, lb);
    } else if (lb == 1) {
      b = Broadcast::make(b, la);
    } else {
      fail("operands with " + std::to_string(la) + " and " + std::to_string(lb) + " lanes");
    }
  }
  Expr widen(const Expr& e, int lanes) {
    if (lanes_of(e) == lanes) return e;
    if (lanes_of(e) != 1) fail("value with unexpected lanes");
    return Broadcast::make(e, lanes);
  }
  /// The current predicate widened to `lanes`, and-ed with `p`.
  Expr with_pred(const Expr& p, int lanes) {
    Expr r = widen(p, lanes);
    if (pred_.defined()) r = r && widen(pred_, lanes);
    return r;
  }

  Expr visit(const Variable* op) override {
    if (op == var_.get()) return ramp_;
    auto it = remap_.find(Var(op));
    return it == remap_.end() ? Expr(op) : it->second;
  }

  template <typename T>
  Expr binary(const T* op) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return Expr(op);
    if (lanes_of(a) == 1 && lanes_of(b) == 1) return T::make(a, b);
    unify(a, b);
    constexpr NodeKind k = T::kKind;
    const Broadcast* ba = a.as<Broadcast>();
    const Broadcast* bb = b.as<Broadcast>();
    const Ramp* ra = a.as<Ramp>();
    const Ramp* rb = b.as<Ramp>();
    int n = lanes_of(a);
    if (ba && bb) return Broadcast::make(T::make(ba->value, bb->value), n);
    if constexpr (k == NodeKind::Add) {
      if (ra && bb) return Ramp::make(ra->base + bb->value, ra->stride, n);
      if (ba && rb) return Ramp::make(ba->value + rb->base, rb->stride, n);
      if (ra && rb) return Ramp::make(ra->base + rb->base, ra->stride + rb->stride, n);
    }
    if constexpr (k == NodeKind::Sub) {
      if (ra && bb) return Ramp::make(ra->base - bb->value, ra->stride, n);
      if (ba && rb) return Ramp::make(ba->value - rb->base, -rb->stride, n);
      if (ra && rb) return Ramp::make(ra->base - rb->base, ra->stride - rb->stride, n);
    }
    if constexpr (k == NodeKind::Mul) {
      if (ra && bb) return Ramp::make(ra->base * bb->value, ra->stride * bb->value, n);
      if (ba && rb) return Ramp::make(ba->value * rb->base, ba->value * rb->stride, n);
    }
    if constexpr (k == NodeKind::FloorDiv || k == NodeKind::FloorMod) {
      if (ra && bb) {
        if (Expr r = ramp_div_mod(ra, bb->value, k == NodeKind::FloorDiv); r.defined()) return r;
      }
    }
    if constexpr (k == NodeKind::Div || k == NodeKind::Mod || k == NodeKind::FloorDiv ||
                  k == NodeKind::FloorMod) {
      // Under a vector guard, masked-off lanes hold arbitrary values (a predicated load gives
      // 0): give them divisor 1 so that an integer division cannot trap.
      if (pred_.defined() && b.dtype().is_integer() && !bb)
        b = Select::make(widen(pred_, n), b, make_one(b.dtype()));
    }
    return T::make(a, b);
  }

  /// floordiv/floormod of Ramp(base, s, n) by c when all lanes stay in one block of c.
  Expr ramp_div_mod(const Ramp* r, const Expr& c, bool div) {
    auto cv = as_const_int(c);
    auto sv = as_const_int(r->stride);
    if (!cv || !sv || *cv <= 0 || *sv < 0) return Expr();
    // base mod c takes values (base mod g) + g*t with g = gcd(coeff, c); the largest is
    // c - g + (base mod g). All lanes stay in one block when that plus the ramp span is < c.
    arith::ModularSet m = ana_.modular_set(r->base);
    int64_t g = std::gcd(m.coeff, *cv);
    if (g == 0) g = *cv;
    int64_t max_rem = *cv - g + ((m.base % g) + g) % g;
    if (max_rem + *sv * (r->lanes - 1) >= *cv) return Expr();
    if (div) return Broadcast::make(floordiv(r->base, c), r->lanes);
    return Ramp::make(floormod(r->base, c), r->stride, r->lanes);
  }

#define KILN_BINARY_NODE(T) \
  Expr visit(const T* op) override { return binary(op); }
#include "kiln/ir/node_kinds.def"

  Expr visit(const Cast* op) override {
    Expr v = mutate(op->value);
    if (v.same_as(op->value)) return Expr(op);
    return Cast::make(op->dtype.with_lanes(lanes_of(v)), v);
  }
  Expr visit(const Not* op) override {
    Expr a = mutate(op->a);
    return a.same_as(op->a) ? Expr(op) : Not::make(a);
  }
  Expr visit(const Select* op) override {
    Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value))
      return Expr(op);
    int n = std::max({lanes_of(c), lanes_of(t), lanes_of(f)});
    return Select::make(lanes_of(c) == 1 ? c : widen(c, n), widen(t, n), widen(f, n));
  }
  Expr visit(const Broadcast* op) override {
    Expr v = mutate(op->value);
    if (lanes_of(v) != 1) fail("broadcast of a value depending on the vectorized var");
    return v.same_as(op->value) ? Expr(op) : Broadcast::make(v, op->lanes);
  }
  Expr visit(const Ramp* op) override {
    Expr b = mutate(op->base), s = mutate(op->stride);
    if (lanes_of(b) != 1 || lanes_of(s) != 1) fail("nested vectorized loops");
    return (b.same_as(op->base) && s.same_as(op->stride)) ? Expr(op) : Ramp::make(b, s, op->lanes);
  }
  Expr visit(const Load* op) override {
    if (op->dtype.lanes() != 1) fail("vector load inside the loop");
    Expr idx = mutate(op->index), p = mutate(op->predicate);
    if (lanes_of(idx) == 1 && lanes_of(p) == 1 && !pred_.defined()) {
      return (idx.same_as(op->index) && p.same_as(op->predicate))
                 ? Expr(op)
                 : Load::make(op->dtype, op->buffer_var, idx, p);
    }
    // Under a vector guard even a uniform address is loaded lane by lane, masked.
    int n = lanes_;
    return Load::make(op->dtype.with_lanes(n), op->buffer_var, widen(idx, n), with_pred(p, n));
  }
  Expr visit(const Let* op) override {
    Expr v = mutate(op->value);
    Var nv = op->var;
    if (lanes_of(v) != 1) {
      nv = Var(op->var.name(), op->var.dtype().with_lanes(lanes_of(v)));
      remap_[op->var] = nv;
    }
    Expr b = mutate(op->body);
    if (v.same_as(op->value) && b.same_as(op->body)) return Expr(op);
    return Let::make(nv, v, b);
  }
  Expr visit(const Call* op) override {
    if (op->name == builtin::kLikely && op->args.size() == 1) return mutate(op->args[0]);
    if (op->name == builtin::kIfThenElse && op->args.size() == 3) {
      Expr c = mutate(op->args[0]);
      if (lanes_of(c) != 1) {
        Expr saved = pred_;
        pred_ = pred_.defined() ? (pred_ && c) : c;
        Expr t = widen(mutate(op->args[1]), lanes_of(c));
        pred_ = saved.defined() ? (saved && !c) : !c;
        Expr f = widen(mutate(op->args[2]), lanes_of(c));
        pred_ = saved;
        return Select::make(c, t, f);
      }
      // A scalar condition over vector branches stays a branch: only the chosen side is read.
      Expr t = mutate(op->args[1]), f = mutate(op->args[2]);
      int n = std::max(lanes_of(t), lanes_of(f));
      if (n > 1)
        return Call::make(op->dtype.with_lanes(n), op->name, {c, widen(t, n), widen(f, n)},
                          op->call_kind);
    }
    std::vector<Expr> args;
    bool changed = mutate_all(op->args, &args);
    if (!changed) {
      if (pred_.defined() && op->call_kind != CallKind::kPureIntrinsic &&
          op->call_kind != CallKind::kPureExtern)
        fail("call with side effects under a vector guard");
      return Expr(op);
    }
    int n = 1;
    for (const Expr& a : args) n = std::max(n, lanes_of(a));
    if (n == 1) return Call::make(op->dtype, op->name, args, op->call_kind);
    bool elementwise = op->call_kind == CallKind::kPureIntrinsic &&
                       op->name.rfind("kiln.", 0) != 0 && op->dtype.lanes() == 1;
    if (!elementwise) fail("call " + op->name + " has no vector form");
    for (Expr& a : args) a = widen(a, n);
    return Call::make(op->dtype.with_lanes(n), op->name, args, op->call_kind);
  }
  Expr visit(const Reduce*) override { fail("Reduce"); }
  Expr visit(const ProducerLoad*) override { fail("ProducerLoad"); }

  Stmt visit(const Store* op) override {
    Expr v = mutate(op->value), idx = mutate(op->index), p = mutate(op->predicate);
    if (lanes_of(idx) == 1) {
      if (lanes_of(v) != 1 || lanes_of(p) != 1 || pred_.defined())
        fail("store of a varying value to one address");
      if (has_load(v)) fail("repeated read-modify-write of one address");
      if (v.same_as(op->value) && idx.same_as(op->index) && p.same_as(op->predicate))
        return Stmt(op);
      return Store::make(op->buffer_var, v, idx, p);
    }
    int n = lanes_of(idx);
    if (lanes_of(v) != 1 && lanes_of(v) != n) fail("store value and index lanes differ");
    const Ramp* r = idx.as<Ramp>();
    bool distinct = r && as_const_int(r->stride) && *as_const_int(r->stride) != 0;
    if (!distinct && loads_buffer(v, op->buffer_var))
      fail("lanes may update one address of the stored buffer");
    return Store::make(op->buffer_var, widen(v, n), idx, with_pred(p, n));
  }
  Stmt visit(const IfThenElse* op) override {
    Expr c = mutate(op->condition);
    if (lanes_of(c) == 1) {
      Stmt t = mutate(op->then_case), e = mutate(op->else_case);
      if (c.same_as(op->condition) && t.same_as(op->then_case) && e.same_as(op->else_case))
        return Stmt(op);
      return IfThenElse::make(c, t, e);
    }
    // A guard on the vectorized var: predicate every access of both branches.
    Expr saved = pred_;
    pred_ = saved.defined() ? (saved && c) : c;
    Stmt t = mutate(op->then_case);
    Stmt e;
    if (op->else_case.defined()) {
      pred_ = saved.defined() ? (saved && !c) : !c;
      e = mutate(op->else_case);
    }
    pred_ = saved;
    return SeqStmt::make({t, e});
  }
  Stmt visit(const For* op) override {
    Expr mn = mutate(op->min), ex = mutate(op->extent);
    if (lanes_of(mn) != 1 || lanes_of(ex) != 1) fail("inner loop bounds depend on the var");
    Stmt b = mutate(op->body);
    if (mn.same_as(op->min) && ex.same_as(op->extent) && b.same_as(op->body)) return Stmt(op);
    return For::make(op->loop_var, mn, ex, op->for_kind, b, op->thread_tag);
  }
  Stmt visit(const LetStmt* op) override {
    Expr v = mutate(op->value);
    Var nv = op->var;
    if (lanes_of(v) != 1) {
      nv = Var(op->var.name(), op->var.dtype().with_lanes(lanes_of(v)));
      remap_[op->var] = nv;
    }
    Stmt b = mutate(op->body);
    if (v.same_as(op->value) && b.same_as(op->body)) return Stmt(op);
    return LetStmt::make(nv, v, b);
  }
  Stmt visit(const AttrStmt* op) override {
    if (op->key == attr::kReduceLanes) return reduce_lanes(op);
    Expr v = mutate(op->value);
    if (lanes_of(v) != 1) fail("attribute depends on the vectorized var");
    Stmt b = mutate(op->body);
    if (v.same_as(op->value) && b.same_as(op->body)) return Stmt(op);
    return AttrStmt::make(op->node, op->key, v, b);
  }
  Stmt visit(const AssertStmt* op) override {
    Expr c = mutate(op->condition);
    if (lanes_of(c) != 1) fail("assert depends on the vectorized var");
    Stmt b = mutate(op->body);
    if (c.same_as(op->condition) && b.same_as(op->body)) return Stmt(op);
    return AssertStmt::make(c, op->message, b);
  }
  Stmt visit(const Evaluate* op) override {
    Expr v = mutate(op->value);
    if (lanes_of(v) != 1) fail("evaluated expression depends on the vectorized var");
    if (pred_.defined() && !is_const(v)) fail("evaluate under a vector guard");
    return v.same_as(op->value) ? Stmt(op) : Evaluate::make(v);
  }
  Stmt visit(const Allocate*) override { fail("allocation inside the loop"); }

  /// A commutative reduction's update under the vectorized loop (attr::kReduceLanes): the
  /// source for all lanes (lanes a guard masks off give the identity), halved log2(lanes) times
  /// by combining its low and high halves, then combined once into the accumulator.
  Stmt reduce_lanes(const AttrStmt* op) {
    const LetStmt* let = op->body.as<LetStmt>();
    const Store* st = let ? let->body.as<Store>() : nullptr;
    if (!st) fail("reduce_lanes without its update");
    Expr src = mutate(let->value);
    const int n = lanes_of(src);
    if (n == 1 || (n & (n - 1)) != 0)
      fail("a reduction over " + std::to_string(n) + " lanes has no tree");
    if (lanes_of(mutate(st->index)) != 1 || lanes_of(mutate(st->predicate)) != 1)
      fail("reduction into an address the vectorized var moves");
    if (pred_.defined()) src = Select::make(widen(pred_, n), src, Broadcast::make(op->value, n));
    // The combiner as a function of (accumulator, element): the store's value with the loads of
    // the accumulator as `a` and the source as `b`.
    const DataType t = let->var.dtype();
    Var a(let->var.name() + ".acc", t);
    const Var& b = let->var;
    Expr comb = replace_load(st->value, st->buffer_var, st->index, a);
    if (!uses_var(comb, [&](const Variable* v) { return v == a.get(); }))
      fail("reduce_lanes: the update does not read its accumulator");
    std::vector<std::pair<Var, Expr>> steps;
    Var w(let->var.name() + ".lanes", t.with_lanes(n));
    steps.emplace_back(w, src);
    Expr saved = pred_;
    pred_ = Expr();
    for (int h = n / 2; h >= 1; h /= 2) {
      const DataType ht = t.with_lanes(h);
      Var lo(let->var.name() + ".lo", ht), hi(let->var.name() + ".hi", ht);
      steps.emplace_back(
          lo, Call::make(ht, builtin::kVectorSlice, {w, make_const(DataType::Int(32), 0)},
                         CallKind::kPureIntrinsic));
      steps.emplace_back(
          hi, Call::make(ht, builtin::kVectorSlice, {w, make_const(DataType::Int(32), h)},
                         CallKind::kPureIntrinsic));
      remap_[a] = lo;
      remap_[b] = hi;
      Var next(let->var.name() + ".lanes", ht);
      steps.emplace_back(next, mutate(comb));
      w = next;
    }
    remap_.erase(a);
    remap_.erase(b);
    pred_ = saved;
    Stmt body =
        Store::make(st->buffer_var, substitute(st->value, {{b, w}}), st->index, st->predicate);
    for (auto it = steps.rbegin(); it != steps.rend(); ++it)
      body = LetStmt::make(it->first, it->second, body);
    return body;
  }

  /// `e` with its loads of buffer[index] replaced by `by`.
  static Expr replace_load(const Expr& e, const Var& buffer, const Expr& index, const Var& by) {
    struct Replacer : IRMutator {
      const Var& buffer;
      const Expr& index;
      const Var& by;
      Replacer(const Var& bu, const Expr& i, const Var& v) : buffer(bu), index(i), by(v) {}
      using IRMutator::visit;
      Expr visit(const Load* op) override {
        if (op->buffer_var.same_as(buffer) && structural_equal(op->index, index)) return by;
        return IRMutator::visit(op);
      }
    };
    return Replacer(buffer, index, by).mutate(e);
  }
  Stmt visit(const ProducerStore*) override { fail("ProducerStore"); }
  Stmt visit(const ProducerRealize*) override { fail("ProducerRealize"); }

 private:
  Var var_;
  Expr ramp_;
  int lanes_;
  Expr pred_;
  VarMap<Expr> remap_;
  arith::Analyzer ana_;
};

/// Simplifies the maximal scalar integer sub-expressions of vector expressions (ramp bases and
/// strides, broadcast values, scalar indices).
class ScalarSimplifier : public IRMutator {
 public:
  Expr visit_expr(const Expr& e) override {
    if (e.dtype().is_scalar() && (e.dtype().is_int() || e.dtype().is_uint()) && !e.as<IntImm>() &&
        !e.as<Variable>())
      return ana_.simplify(e);
    return IRMutator::visit_expr(e);
  }

 private:
  arith::Analyzer ana_;
};

/// Most iterations of an unrolled loop around a vectorized one that LoopVectorizer unrolls
/// before vectorizing (the rows of schedule_injective.cc's unroll_short_row: up to 4 vectors).
constexpr int64_t kMaxUnrollFirst = 4;

bool has_vector_loop(const Stmt& s) {
  bool found = false;
  post_order_visit(s, [&](const IRNode* n) {
    found |=
        n->kind == NodeKind::For && static_cast<const For*>(n)->for_kind == ForKind::kVectorized;
  });
  return found;
}

class LoopVectorizer : public IRMutator {
 public:
  explicit LoopVectorizer(const VectorizeOptions& opt) : opt_(opt) {}

 protected:
  using IRMutator::visit;
  Stmt visit(const For* op) override {
    // A short unrolled loop around a vectorized one (a row of a few vectors, the last shifted
    // inwards: schedule_injective.cc) is unrolled first, so that each vector's start is a
    // constant when its indices are vectorized: a reshape's floormod(ramp, c) then stays in one
    // block (a ramp) where a symbolic start could not be shown to.
    if (auto ext = as_const_int(op->extent); op->for_kind == ForKind::kUnrolled && ext &&
                                             *ext > 0 && *ext <= kMaxUnrollFirst &&
                                             has_vector_loop(op->body)) {
      std::vector<Stmt> parts;
      for (int64_t i = 0; i < *ext; ++i)
        parts.push_back(mutate(ScalarSimplifier().mutate(substitute(
            op->body, {{op->loop_var, op->min + make_const(op->loop_var.dtype(), i)}}))));
      return SeqStmt::make(parts);
    }
    Stmt s = IRMutator::visit(op);
    op = s.as<For>();
    if (op->for_kind != ForKind::kVectorized) return s;
    auto serial = [&] {
      return For::make(op->loop_var, op->min, op->extent, ForKind::kSerial, op->body,
                       op->thread_tag);
    };
    auto ext = as_const_int(op->extent);
    if (!ext || *ext < 1 || *ext > opt_.max_lanes) return serial();
    if (*ext == 1) return substitute(op->body, {{op->loop_var, op->min}});
    try {
      Stmt body = Vectorizer(op->loop_var, op->min, static_cast<int>(*ext)).mutate(op->body);
      return ScalarSimplifier().mutate(body);
    } catch (const CannotVectorize&) {
      return serial();
    }
  }

 private:
  VectorizeOptions opt_;
};

}  // namespace

PrimFunc vectorize(PrimFunc f, const VectorizeOptions& opt) {
  Stmt body = LoopVectorizer(opt).mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace kiln::tir
