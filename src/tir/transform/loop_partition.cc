// loop_partition: splits loops so that `likely` conditions disappear from the main part.
// A top-down mutator keeps the ranges of the enclosing loops. At a partitionable loop (serial,
// parallel or unrolled, constant extent) it collects two kinds of conditions that depend on the
// loop var, each with the ranges of the loops between:
// * guards: `if (likely(c))` statements (from non-divisible splits);
// * expression conditions: the conjuncts of `c` in `if_then_else(likely(c), …)` calls and
//   `select(likely(c), …)` (padding: `0 <= ow*s + kw - p < W`).
// For each condition (guard, or one conjunct), a binary search finds the longest prefix
// [min, min+k) (or suffix) of the loop range on which the analyzer proves it for all values of
// the loops in between (the condition is affine in practice, so the proven set is an interval).
// Guards split the loop at the shortest such prefix (or suffix), as before. Expression conjuncts
// that hold on a prefix bound the end b of a middle part, those that hold on a suffix bound its
// start a; when a < b the loop becomes [min, a) [a, b) [b, end). The parts are then visited
// with their own ranges (or, for a serial or parallel loop whose body is a sequence in which
// some statements carry no such conditions, the loop is unswitched instead: only the checked
// statements get two copies, `if (v in [a, b)) unchecked else checked`, so that an
// accumulator's init and a fused epilogue are not copied into three parts; a depthwise
// convolution with a SiLU epilogue shrank from 42 to ~20 KB of code): guards and conjuncts
// proven true (false) are folded, an
// `if_then_else`/`select` whose condition folds to a constant becomes the chosen branch, and
// the rest is partitioned further in. Code growth is bounded: a loop is split on expression
// conditions only with at most kMaxConjuncts distinct conjuncts on its var, at most
// kMaxExprDepth such splits nest, and a conjunct that mentions the var of an enclosing loop
// already split on expression conditions is "spent" (its borders keep their checks instead of
// splitting the inner loops again). Correctness does not depend on monotonicity: a condition is
// only folded where it was proven over the whole range. A third kind of split: when every
// expression conjunct on the loop var has the form `v < c` (a concat choosing its input along
// v), the loop is cut at every such threshold, however many (up to kMaxThresholdCuts), so that
// a concat of K inputs becomes K loops each reading one input; the parts sit in a
// pragma_no_unroll attribute so that LLVM does not unroll each of them. Finally the `likely`
// wrappers of the conditions that remain are dropped.
#include <algorithm>
#include <functional>
#include <optional>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/ir/structural.h"
#include "kiln/tir/transform.h"
#include "loop_utils.h"

namespace kiln::tir {
namespace {

using Binding = std::pair<Var, Range>;

/// Most distinct expression conjuncts on one loop var for which the loop is still split.
constexpr size_t kMaxConjuncts = 4;
/// Most loops, nested in one another, split on expression conditions.
constexpr size_t kMaxExprDepth = 2;
/// Most serial or parallel loops between an unswitched loop and the statements it shares.
constexpr int kMaxUnswitchDepth = 2;
/// Most parts a loop is cut into on thresholds of its own var (a concat of that many inputs).
constexpr size_t kMaxThresholdCuts = 255;

const Call* as_likely(const Expr& e) {
  const Call* c = e.as<Call>();
  return (c && c->name == builtin::kLikely && c->args.size() == 1) ? c : nullptr;
}

bool mentions(const Expr& e, const Variable* v) {
  return uses_var(e, [&](const Variable* x) { return x == v; });
}

/// Appends the conjuncts of `e` (flattening nested Ands) to `out`.
void flatten_and(const Expr& e, std::vector<Expr>* out) {
  if (const And* a = e.as<And>()) {
    flatten_and(a->a, out);
    flatten_and(a->b, out);
  } else {
    out->push_back(e);
  }
}

/// True if `e` is affine in `v`: v appears only in sums, differences and products with terms
/// free of v (not under a division, modulo, min/max, load or call).
bool is_affine_in(const Expr& e, const Variable* v) {
  if (!mentions(e, v)) return true;
  if (e.as<Variable>()) return true;
  if (const Add* a = e.as<Add>()) return is_affine_in(a->a, v) && is_affine_in(a->b, v);
  if (const Sub* a = e.as<Sub>()) return is_affine_in(a->a, v) && is_affine_in(a->b, v);
  if (const Mul* m = e.as<Mul>()) {
    if (!mentions(m->a, v)) return is_affine_in(m->b, v);
    if (!mentions(m->b, v)) return is_affine_in(m->a, v);
  }
  return false;
}

/// True if `c` is an inequality between integer expressions affine in `v`.
bool is_affine_comparison(const Expr& c, const Variable* v) {
  auto sides = [&](const auto* b) {
    return b->a.dtype().is_int() && is_affine_in(b->a, v) && is_affine_in(b->b, v);
  };
  if (const LT* b = c.as<LT>()) return sides(b);
  if (const LE* b = c.as<LE>()) return sides(b);
  if (const GT* b = c.as<GT>()) return sides(b);
  if (const GE* b = c.as<GE>()) return sides(b);
  return false;
}

/// A condition found below a loop, with the ranges of the loops between.
struct Guard {
  Expr cond;
  std::vector<Binding> inner;
};

/// Collects the likely-guards (IfThenElse statements) and the likely expression conjuncts
/// (conditions of if_then_else calls and selects) that depend on `var`.
class GuardCollector : public IRVisitor {
 public:
  explicit GuardCollector(const Variable* var) : var_(var) {}
  std::vector<Guard> guards;
  std::vector<Guard> conjuncts;

 protected:
  using IRVisitor::visit;
  void visit(const For* op) override {
    inner_.emplace_back(op->loop_var, Range(op->min, op->extent));
    // For the conjuncts, an inner loop with a non-constant min (compute_at: min = outer*t)
    // counts from 0, so that the conjunct shows its dependence on the outer var.
    bool shifted = !is_const(op->min);
    if (shifted) {
      Var v0 = op->loop_var.copy_with_suffix("");
      shift_[op->loop_var] = v0 + substitute(op->min, shift_);
      shifted_inner_.emplace_back(v0, Range(make_zero(op->min.dtype()), op->extent));
    } else {
      shifted_inner_.push_back(inner_.back());
    }
    IRVisitor::visit(op);
    if (shifted) shift_.erase(op->loop_var);
    shifted_inner_.pop_back();
    inner_.pop_back();
  }
  void visit(const IfThenElse* op) override {
    if (const Call* l = as_likely(op->condition)) {
      if (mentions(l->args[0], var_)) guards.push_back({l->args[0], inner_});
    }
    IRVisitor::visit(op);
  }
  void visit(const Call* op) override {
    if (op->name == builtin::kIfThenElse && op->args.size() == 3) add_condition(op->args[0]);
    IRVisitor::visit(op);
  }
  void visit(const Select* op) override {
    add_condition(op->condition);
    IRVisitor::visit(op);
  }

 private:
  void add_condition(const Expr& c) {
    const Call* l = as_likely(c);
    if (!l || !l->dtype.is_scalar()) return;
    std::vector<Expr> parts;
    flatten_and(l->args[0], &parts);
    for (Expr p : parts) {
      if (!shift_.empty()) p = substitute(p, shift_);
      if (!mentions(p, var_)) continue;
      if (!is_affine_comparison(p, var_)) continue;  // not split on; its checks stay
      bool seen = std::any_of(conjuncts.begin(), conjuncts.end(),
                              [&](const Guard& g) { return structural_equal(g.cond, p); });
      if (!seen) conjuncts.push_back({p, shifted_inner_});
    }
  }

  const Variable* var_;
  std::vector<Binding> inner_, shifted_inner_;
  VarMap<Expr> shift_;
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

  /// True if `c` mentions the var of an enclosing loop already split on expression conditions.
  bool spent(const Expr& c) const {
    return uses_var(c, [&](const Variable* x) { return spent_.count(Var(x)) > 0; });
  }

  /// The middle part [a, b) (offsets from the loop min) on which every expression conjunct that
  /// can be proven at an end of the loop holds; {0, n} when there is nothing to split on.
  std::pair<int64_t, int64_t> expr_split(const For* op, const std::vector<Guard>& conjuncts,
                                         int64_t n) {
    if (spent_.size() >= kMaxExprDepth) return {0, n};
    std::vector<const Guard*> live;
    for (const Guard& g : conjuncts)
      if (!spent(g.cond)) live.push_back(&g);
    if (live.empty() || live.size() > kMaxConjuncts) return {0, n};
    int64_t a = 0, b = n;
    for (const Guard* g : live) {
      int64_t p = proven_run(*g, op->loop_var, op->min, n, false);
      if (p == n) continue;  // always true: folded below without a split
      if (p > 0) {
        b = std::min(b, p);
        continue;
      }
      int64_t s = proven_run(*g, op->loop_var, op->min, n, true);
      if (s > 0) a = std::max(a, n - s);
    }
    if (a >= b) return {0, n};
    return {a, b};
  }

  /// When every expression conjunct on the loop var has the form `v < c` (v the loop var, c a
  /// constant: a concat choosing its input along v), the offsets inside (0, n) where they
  /// change value, increasing; else (or beyond kMaxThresholdCuts) nothing.
  static std::vector<int64_t> threshold_cuts(const For* op, const std::vector<Guard>& conjuncts,
                                             int64_t n) {
    auto mn = as_const_int(op->min);
    if (!mn) return {};
    std::vector<int64_t> cuts;
    for (const Guard& g : conjuncts) {
      const LT* lt = g.cond.as<LT>();
      auto c = lt ? as_const_int(lt->b) : std::nullopt;
      if (!c || lt->a.as<Variable>() != op->loop_var.get()) return {};
      if (*c - *mn > 0 && *c - *mn < n) cuts.push_back(*c - *mn);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    if (cuts.size() > kMaxThresholdCuts) return {};
    return cuts;
  }

  Stmt visit(const For* op) override {
    auto ext = as_const_int(op->extent);
    bool kind_ok = op->for_kind == ForKind::kSerial || op->for_kind == ForKind::kParallel ||
                   op->for_kind == ForKind::kUnrolled;
    if (kind_ok && ext && *ext > 1) {
      GuardCollector gc(op->loop_var.get());
      gc.visit_stmt(op->body);
      int64_t n = *ext;
      // Guards (if statements): one split, at the shortest proven prefix (or suffix).
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
      if (split > 0 && split < n) return split_loop(op, {split}, false);
      // Thresholds on the loop var itself (a concat's `c < offset` chain): one part per
      // interval, in each of which every such condition folds.
      if (std::vector<int64_t> cuts = threshold_cuts(op, gc.conjuncts, n); !cuts.empty()) {
        return AttrStmt::make(Ref<Object>(), attr::kPragmaNoUnroll,
                              make_const(DataType::Int(32), 1), split_loop(op, cuts, false));
      }
      // Expression conditions (padding): up to three parts, border / middle / border; or,
      // when part of the body has no such conditions, the checked statements in two copies.
      auto [a, b] = expr_split(op, gc.conjuncts, n);
      if (a > 0 || b < n) {
        if (op->for_kind != ForKind::kUnrolled) {
          if (std::optional<Stmt> u = unswitch(op, a, b)) return *u;
        }
        std::vector<int64_t> cuts;
        if (a > 0) cuts.push_back(a);
        if (b < n) cuts.push_back(b);
        return split_loop(op, cuts, true);
      }
    }
    return visit_loop(op, op->loop_var, op->min, op->extent, op->body);
  }

  /// Unswitching instead of splitting, for a loop whose body is a sequence (under
  /// allocations, lets, attributes and up to kMaxUnswitchDepth serial or parallel loops) in
  /// which only some statements carry likely conditions on the loop var: each such statement S
  /// becomes `if (v in [min+a, min+b)) S' else S`, S' visited with v in that range (its checks
  /// folded: visit(IfThenElse) narrows v's range in the then-case), S keeping its checks; the
  /// other statements (an accumulator's init, a fused epilogue with exp) are emitted once.
  /// Splitting the loop would copy them into each of the three parts. nullopt when every
  /// statement of the body has such conditions (nothing to share: split instead).
  std::optional<Stmt> unswitch(const For* op, int64_t a, int64_t b) {
    const Variable* v = op->loop_var.get();
    auto checked = [&](const Stmt& s) {
      GuardCollector gc(v);
      gc.visit_stmt(s);
      return !gc.guards.empty() || !gc.conjuncts.empty();
    };
    int64_t n = *as_const_int(op->extent);
    DataType t = op->loop_var.dtype();
    Expr lo = op->min + make_const(t, a), hi = op->min + make_const(t, b);
    Expr inside = a == 0   ? Expr(op->loop_var < hi)
                  : b == n ? Expr(op->loop_var >= lo)
                           : Expr(op->loop_var >= lo && op->loop_var < hi);
    bool shared = false;
    std::function<Stmt(const Stmt&, int)> rewrite = [&](const Stmt& s, int loops) -> Stmt {
      if (const Allocate* x = s.as<Allocate>())
        return Allocate::make(x->buffer_var, x->dtype, x->extents, x->condition,
                              rewrite(x->body, loops), x->scope);
      if (const LetStmt* x = s.as<LetStmt>())
        return LetStmt::make(x->var, x->value, rewrite(x->body, loops));
      if (const AttrStmt* x = s.as<AttrStmt>())
        return AttrStmt::make(x->node, x->key, x->value, rewrite(x->body, loops));
      if (const For* x = s.as<For>()) {
        bool rolled = x->for_kind == ForKind::kSerial || x->for_kind == ForKind::kParallel;
        if (!rolled || loops >= kMaxUnswitchDepth) return s;
        return For::make(x->loop_var, x->min, x->extent, x->for_kind, rewrite(x->body, loops + 1),
                         x->thread_tag);
      }
      const SeqStmt* seq = s.as<SeqStmt>();
      if (!seq) return s;
      std::vector<Stmt> parts;
      for (const Stmt& c : seq->seq) {
        if (!checked(c)) {
          shared = true;
          parts.push_back(c);
        } else {
          parts.push_back(IfThenElse::make(inside, renew_defs(c), c));
        }
      }
      return SeqStmt::make(parts);
    };
    Stmt body = rewrite(op->body, 0);
    if (!shared) return std::nullopt;
    spent_.insert(op->loop_var);
    Stmt r = visit_loop(op, op->loop_var, op->min, op->extent, body);
    spent_.erase(op->loop_var);
    return r;
  }

  /// The range of a loop var in the then-case of `if (v >= lo && v < hi)` (or one side of it,
  /// the other from the loop), as unswitch writes it; nullopt for any other condition.
  std::optional<Binding> implied_range(const Expr& cond) const {
    Expr lo, hi;
    const Variable* v = nullptr;
    auto side = [&](const Expr& c) {
      if (const GE* ge = c.as<GE>(); ge && ge->a.as<Variable>() && !lo.defined()) {
        v = v ? v : ge->a.as<Variable>();
        lo = ge->b;
        return ge->a.as<Variable>() == v;
      }
      if (const LT* lt = c.as<LT>(); lt && lt->a.as<Variable>() && !hi.defined()) {
        v = v ? v : lt->a.as<Variable>();
        hi = lt->b;
        return lt->a.as<Variable>() == v;
      }
      return false;
    };
    const And* both = cond.as<And>();
    if (both ? !(side(both->a) && side(both->b)) : !side(cond)) return std::nullopt;
    auto it = std::find_if(ctx_.rbegin(), ctx_.rend(),
                           [&](const Binding& x) { return x.first.get() == v; });
    if (it == ctx_.rend()) return std::nullopt;
    if (!lo.defined()) lo = it->second->min;
    if (!hi.defined()) hi = it->second->min + it->second->extent;
    arith::Analyzer ana;
    auto extent = as_const_int(ana.simplify(hi - lo));
    if (!extent || *extent <= 0) return std::nullopt;
    return Binding(it->first, Range(lo, make_const(lo.dtype(), *extent)));
  }

  /// Splits `op` at the offsets `cuts` (increasing, inside (0, n)) into consecutive loops; the
  /// first keeps the loop var, the others get fresh copies of the body.
  Stmt split_loop(const For* op, const std::vector<int64_t>& cuts, bool on_exprs) {
    int64_t n = *as_const_int(op->extent);
    DataType t = op->loop_var.dtype();
    std::vector<int64_t> ends = cuts;
    ends.push_back(n);
    std::vector<Stmt> parts;
    int64_t begin = 0;
    for (size_t k = 0; k < ends.size(); ++k) {
      Var v = op->loop_var;
      Stmt body = op->body;
      if (k > 0) {
        // Fresh variables for everything the copy binds: the loops sit side by side.
        v = op->loop_var.copy_with_suffix("");
        body = renew_defs(substitute(op->body, {{op->loop_var, v}}));
      }
      if (on_exprs) spent_.insert(v);
      Expr mn = begin == 0 ? op->min : op->min + make_const(t, begin);
      Stmt part = visit_loop(op, v, mn, make_const(t, ends[k] - begin), body);
      if (on_exprs) spent_.erase(v);
      if (!is_no_op(part)) parts.push_back(part);
      begin = ends[k];
    }
    if (parts.empty()) return make_no_op();
    return SeqStmt::make(parts);
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
    if (std::optional<Binding> r = implied_range(op->condition); r && op->else_case.defined()) {
      // An unswitched statement: the then-copy runs with the loop var in the middle range.
      ctx_.push_back(*r);
      Stmt then_case = mutate(op->then_case);
      ctx_.pop_back();
      return IfThenElse::make(op->condition, then_case, mutate(op->else_case));
    }
    if (const Call* l = as_likely(op->condition)) {
      const Expr& c = l->args[0];
      if (prove(c, {})) return mutate(op->then_case);
      if (prove(!c, {})) return op->else_case.defined() ? mutate(op->else_case) : make_no_op();
    }
    return IRMutator::visit(op);
  }

  /// Folds a likely expression condition with the enclosing ranges: true or false when proven,
  /// else likely(the conjuncts not proven true); the same handle when nothing folds.
  Expr fold_condition(const Expr& cond) {
    const Call* l = as_likely(cond);
    if (!l || !l->dtype.is_scalar() || ctx_.empty()) return mutate(cond);
    const Expr& c = l->args[0];
    if (prove(c, {})) return const_true();
    if (prove(!c, {})) return const_false();
    std::vector<Expr> parts;
    flatten_and(c, &parts);
    if (parts.size() < 2) return cond;
    std::vector<Expr> keep;
    for (const Expr& p : parts)
      if (!prove(p, {})) keep.push_back(p);
    if (keep.size() == parts.size()) return cond;
    Expr r = keep[0];
    for (size_t k = 1; k < keep.size(); ++k) r = And::make(r, keep[k]);
    return likely(r);
  }

  Expr visit(const Call* op) override {
    if (op->name != builtin::kIfThenElse || op->args.size() != 3 || !as_likely(op->args[0]))
      return IRMutator::visit(op);
    Expr c = fold_condition(op->args[0]);
    if (auto v = as_const_int(c)) return mutate(*v ? op->args[1] : op->args[2]);
    Expr t = mutate(op->args[1]), f = mutate(op->args[2]);
    if (c.same_as(op->args[0]) && t.same_as(op->args[1]) && f.same_as(op->args[2])) return Expr(op);
    return Call::make(op->dtype, op->name, {c, t, f}, op->call_kind);
  }

  Expr visit(const Select* op) override {
    if (!as_likely(op->condition)) return IRMutator::visit(op);
    Expr c = fold_condition(op->condition);
    if (auto v = as_const_int(c)) return mutate(*v ? op->true_value : op->false_value);
    Expr t = mutate(op->true_value), f = mutate(op->false_value);
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value))
      return Expr(op);
    return Select::make(c, t, f);
  }

 private:
  std::vector<Binding> ctx_;
  VarSet spent_;
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
