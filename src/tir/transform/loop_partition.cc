// loop_partition: splits loops so that `if (likely(c))` guards disappear from the main part.
// A top-down mutator keeps the ranges of the enclosing loops. At a partitionable loop (serial,
// parallel or unrolled, constant extent) it collects the likely-guards of its body that depend
// on the loop var, with the ranges of the loops between. For each guard, a binary search finds
// the longest prefix [min, min+k) (or suffix) of the loop range on which the analyzer proves the
// condition for all values of the loops in between (the condition is affine in practice, so the
// proven set is an interval). The loop is split at the shortest such prefix (or suffix); the
// parts are then visited with their own ranges, where guards proven true (false) are replaced by
// their then (else) branch and the rest is partitioned further in. Correctness does not depend
// on monotonicity: a guard is only removed where it was proven over the whole range. Finally
// `likely` wrappers of the guards that remain are dropped.
#include <algorithm>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/tir/transform.h"
#include "loop_utils.h"

namespace kiln::tir {
namespace {

using Binding = std::pair<Var, Range>;

const Call* as_likely(const Expr& e) {
  const Call* c = e.as<Call>();
  return (c && c->name == builtin::kLikely && c->args.size() == 1) ? c : nullptr;
}

/// A likely-guard found below a loop, with the ranges of the loops between.
struct Guard {
  Expr cond;
  std::vector<Binding> inner;
};

class GuardCollector : public IRVisitor {
 public:
  explicit GuardCollector(const Variable* var) : var_(var) {}
  std::vector<Guard> guards;

 protected:
  using IRVisitor::visit;
  void visit(const For* op) override {
    inner_.emplace_back(op->loop_var, Range(op->min, op->extent));
    IRVisitor::visit(op);
    inner_.pop_back();
  }
  void visit(const IfThenElse* op) override {
    if (const Call* l = as_likely(op->condition)) {
      if (uses_var(l->args[0], [&](const Variable* v) { return v == var_; }))
        guards.push_back({l->args[0], inner_});
    }
    IRVisitor::visit(op);
  }

 private:
  const Variable* var_;
  std::vector<Binding> inner_;
};

class LoopPartitioner : public IRMutator {
 protected:
  using IRMutator::visit;

  /// Proves `cond` with the enclosing loops, `extra` and v in [lo, lo + n) bound.
  bool prove(const Expr& cond, const std::vector<Binding>& extra) {
    arith::Analyzer ana;
    for (const Binding& b : ctx_) ana.bind(b.first, b.second);
    for (const Binding& b : extra) ana.bind(b.first, b.second);
    return ana.can_prove(cond);
  }

  /// Longest k in [0, n] such that cond holds for v in [min, min+k) (from_end: the last k).
  int64_t proven_run(const Guard& g, const Var& v, const Expr& mn, int64_t n, bool from_end) {
    auto holds = [&](int64_t k) {
      std::vector<Binding> b = g.inner;
      Expr lo = from_end ? mn + make_const(mn.dtype(), n - k) : mn;
      b.emplace_back(v, Range(lo, make_const(mn.dtype(), k)));
      return prove(g.cond, b);
    };
    if (holds(n)) return n;
    int64_t lo = 0, hi = n;  // holds(lo) assumed (empty range), !holds(hi)
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      if (holds(mid))
        lo = mid;
      else
        hi = mid;
    }
    return lo;
  }

  Stmt visit(const For* op) override {
    auto ext = as_const_int(op->extent);
    bool kind_ok = op->for_kind == ForKind::kSerial || op->for_kind == ForKind::kParallel ||
                   op->for_kind == ForKind::kUnrolled;
    if (kind_ok && ext && *ext > 1) {
      GuardCollector gc(op->loop_var.get());
      gc.visit_stmt(op->body);
      int64_t n = *ext;
      int64_t prefix = n, suffix = n;
      for (const Guard& g : gc.guards) {
        int64_t p = proven_run(g, op->loop_var, op->min, n, false);
        if (p == n) continue;  // always true: removed below without a split
        if (p > 0) prefix = std::min(prefix, p);
        int64_t s = p > 0 ? 0 : proven_run(g, op->loop_var, op->min, n, true);
        if (s > 0) suffix = std::min(suffix, s);
      }
      int64_t split = -1;
      if (prefix < n) {
        split = prefix;
      } else if (suffix < n) {
        split = n - suffix;
      }
      if (split > 0 && split < n) {
        DataType t = op->loop_var.dtype();
        Stmt first = visit_loop(op, op->loop_var, op->min, make_const(t, split), op->body);
        Var v2 = op->loop_var.copy_with_suffix("");
        // Fresh variables for everything the copy binds: the two loops sit side by side.
        Stmt body2 = renew_defs(substitute(op->body, {{op->loop_var, v2}}));
        Stmt second =
            visit_loop(op, v2, op->min + make_const(t, split), make_const(t, n - split), body2);
        if (is_no_op(first)) return second;
        if (is_no_op(second)) return first;
        return SeqStmt::make({first, second});
      }
    }
    return visit_loop(op, op->loop_var, op->min, op->extent, op->body);
  }

  Stmt visit_loop(const For* op, const Var& v, const Expr& mn, const Expr& ex, const Stmt& b) {
    Expr mn2 = mutate(mn), ex2 = mutate(ex);
    ctx_.emplace_back(v, Range(mn2, ex2));
    Stmt body = mutate(b);
    ctx_.pop_back();
    if (is_no_op(body)) return make_no_op();  // e.g. a tail whose guard is always false
    if (v.same_as(op->loop_var) && mn2.same_as(op->min) && ex2.same_as(op->extent) &&
        body.same_as(op->body))
      return Stmt(op);
    return For::make(v, mn2, ex2, op->for_kind, body, op->thread_tag);
  }

  Stmt visit(const IfThenElse* op) override {
    if (const Call* l = as_likely(op->condition)) {
      const Expr& c = l->args[0];
      if (prove(c, {})) return mutate(op->then_case);
      if (prove(!c, {})) return op->else_case.defined() ? mutate(op->else_case) : make_no_op();
    }
    return IRMutator::visit(op);
  }

 private:
  std::vector<Binding> ctx_;
};

/// Drops `likely` wrappers.
class LikelyRemover : public IRMutator {
 protected:
  using IRMutator::visit;
  Expr visit(const Call* op) override {
    if (as_likely(Expr(op))) return mutate(op->args[0]);
    return IRMutator::visit(op);
  }
};

}  // namespace

PrimFunc loop_partition(PrimFunc f) {
  Stmt body = LoopPartitioner().mutate(f->body);
  body = LikelyRemover().mutate(body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace kiln::tir
