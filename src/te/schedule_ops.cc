// Bound inference and loop-nest generation for schedules.
//
// Bound inference visits stages from consumers to producers. For a producer P and a consumer
// D, the loops around D's computation split in two: those that also enclose P's attachment
// point (their variables stay symbolic: P is recomputed per iteration) and the rest (relaxed
// over their ranges). Evaluating D's reads of P as integer sets under that relaxation gives
// the region of P that must exist, hence the ranges of P's root axes (a P in shared memory is
// relaxed over the GPU thread loops too: the block fills it together); split and fuse
// relations then give the leaf ranges. Loop generation emits, for each stage, its leaf loops
// outermost first; root-axis values are recovered from leaf variables by inverting the
// relations (parent = outer * factor + inner + min; outer = fused / inner_extent, …), and
// a `likely` guard protects each root axis whose value can exceed its range (a split that
// does not divide). Stages are assembled from the outputs backwards: a root stage wraps the
// program built so far in its realize; an attached stage is injected at a marker that every
// generated loop carries.
#include "kiln/te/schedule_ops.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "tensorize.h"

namespace kiln::te {

namespace {

constexpr const char* kLoopScope = "loop_scope";

const TensorNode* as_tensor(const Producer& p) {
  const auto* t = dynamic_cast<const TensorNode*>(p.get());
  KILN_ICHECK(t) << "producer is not a tensor";
  return t;
}

/// The stage computing tensor t, if t belongs to the schedule.
Stage stage_of(const ScheduleNode* s, const TensorNode* t) {
  auto it = s->stage_map.find(t->op.get());
  return it == s->stage_map.end() ? Stage() : it->second;
}

/// Substitutes the bodies of inlined stages into an expression, repeatedly.
class Inliner : public IRMutator {
 public:
  explicit Inliner(const ScheduleNode* s) : s_(s) {}

 protected:
  using IRMutator::visit;
  Expr visit(const ProducerLoad* op) override {
    Expr e = IRMutator::visit(op);
    const ProducerLoad* pl = e.as<ProducerLoad>();
    Stage st = stage_of(s_, as_tensor(pl->producer));
    if (!st.defined() || st->attach_type != AttachType::kInline) return e;
    const auto* c = static_cast<const ComputeOpNode*>(st->op.get());
    VarMap<Expr> m;
    for (size_t i = 0; i < c->axis.size(); ++i) m[c->axis[i]->var] = pl->indices[i];
    return mutate(substitute(c->body[as_tensor(pl->producer)->value_index], m));
  }

 private:
  const ScheduleNode* s_;
};

/// A loop: (stage, leaf iter var).
using LoopSet = std::unordered_set<const IterVarNode*>;

/// Loops that enclose the computation of stage `st` from outside it (its attachment chain).
LoopSet enclosing_loops(const Stage& st) {
  LoopSet out;
  Stage cur = st;
  int guard = 0;
  while (cur->attach_type == AttachType::kScope) {
    KILN_USER_CHECK(++guard < 10000) << "compute_at forms a cycle at stage '" << st->name() << "'";
    const Stage& parent = cur->attach_stage;
    int idx = parent->leaf_index(cur->attach_ivar);
    KILN_USER_CHECK(idx >= 0) << "stage '" << cur->name() << "' is computed at axis '"
                              << cur->attach_ivar->var.name() << "' of stage '" << parent->name()
                              << "', which is no longer one of its loops (it was split or fused "
                                 "after compute_at)";
    for (int i = 0; i <= idx; ++i) out.insert(parent->leaf_iter_vars[i].get());
    cur = parent;
  }
  return out;
}

/// Whether split `r` shifts its last tile inwards under bounds `b`: asked for, constant
/// extents, a factor that does not divide the extent and is not longer than it.
bool shifts_tail(const IterVarRelation& r, const BoundMap& b) {
  if (r.kind != IterVarRelation::kSplit || !r.shift_tail) return false;
  auto pe = as_const_int(b.at(r.parent.get())->extent);
  auto ie = as_const_int(b.at(r.inner.get())->extent);
  return pe && ie && *ie > 0 && *pe >= *ie && *pe % *ie != 0;
}

/// Value of each root (and intermediate) iter var in terms of the leaf vars.
std::unordered_map<const IterVarNode*, Expr> pass_up_index(const StageNode* st, const BoundMap& b) {
  std::unordered_map<const IterVarNode*, Expr> v;
  for (const IterVar& iv : st->leaf_iter_vars) v[iv.get()] = iv->var;
  for (auto it = st->relations.rbegin(); it != st->relations.rend(); ++it) {
    const IterVarRelation& r = *it;
    if (r.kind == IterVarRelation::kSplit) {
      Expr inner_ext = b.at(r.inner.get())->extent;
      Expr pmin = b.at(r.parent.get())->min;
      Expr start = v.at(r.outer.get()) * inner_ext;
      // The last tile ends where the parent ends: start = min(outer * f, extent - f).
      if (shifts_tail(r, b)) start = min(start, b.at(r.parent.get())->extent - inner_ext);
      v[r.parent.get()] = start + v.at(r.inner.get()) + pmin;
    } else {
      const Range& ro = b.at(r.outer.get());
      const Range& ri = b.at(r.inner.get());
      Expr f = v.at(r.fused.get());
      v[r.outer.get()] = floordiv(f, ri->extent) + ro->min;
      v[r.inner.get()] = floormod(f, ri->extent) + ri->min;
    }
  }
  return v;
}

/// Ranges of derived iter vars from the root ranges.
void pass_down_domain(const StageNode* st, BoundMap* b, arith::Analyzer* ana) {
  for (const IterVarRelation& r : st->relations) {
    if (r.kind == IterVarRelation::kSplit) {
      const Range& p = b->at(r.parent.get());
      Expr ext = p->extent;
      Expr zero = make_zero(ext.dtype());
      if (r.factor.defined()) {
        Expr f = r.factor;
        auto ce = as_const_int(ana->simplify(ext));
        auto cf = as_const_int(f);
        if (ce && cf && *cf > *ce) f = make_const(ext.dtype(), *ce);  // factor beyond extent
        (*b)[r.outer.get()] = Range(zero, ana->simplify(ceildiv(ext, f)));
        (*b)[r.inner.get()] = Range(zero, f);
      } else {
        (*b)[r.outer.get()] = Range(zero, r.nparts);
        (*b)[r.inner.get()] = Range(zero, ana->simplify(ceildiv(ext, r.nparts)));
      }
    } else {
      const Range& o = b->at(r.outer.get());
      const Range& i = b->at(r.inner.get());
      (*b)[r.fused.get()] =
          Range(make_zero(o->extent.dtype()), ana->simplify(o->extent * i->extent));
    }
    for (const IterVar& iv : {r.outer, r.inner, r.fused}) {
      if (iv.defined() && b->count(iv.get())) ana->bind(iv->var, b->at(iv.get()));
    }
  }
}

/// Every read of a schedule tensor by a stage: (stage read, reading stage, indices).
struct Access {
  const TensorNode* tensor;
  Stage reader;
  std::vector<Expr> indices;  ///< empty: the whole tensor (extern ops)
};

std::vector<Access> collect_accesses(const ScheduleNode* s) {
  std::vector<Access> out;
  Inliner inl(s);
  for (const Stage& d : s->stages) {
    if (d->attach_type == AttachType::kInline) continue;
    if (d->op->kind == OpKind::kCompute) {
      const auto* c = static_cast<const ComputeOpNode*>(d->op.get());
      for (const Expr& b : c->body) {
        post_order_visit(inl.mutate(b), [&](const IRNode* n) {
          if (n->kind != NodeKind::ProducerLoad) return;
          const auto* pl = static_cast<const ProducerLoad*>(n);
          out.push_back({as_tensor(pl->producer), d, pl->indices});
        });
      }
    } else if (d->op->kind == OpKind::kExtern) {
      for (const Tensor& t : d->op->input_tensors()) out.push_back({t.get(), d, {}});
    }
  }
  return out;
}

bool uses_any(const Expr& e, const VarMap<arith::IntSet>& relax) {
  return uses_var(e, [&](const Variable* v) { return relax.count(Var(v)) > 0; });
}

/// Interval of e with the vars in `relax` relaxed, iterated until no relaxed var remains.
arith::IntSet relaxed_set(const Expr& e, const VarMap<arith::IntSet>& relax) {
  arith::IntSet s = arith::eval_set(e, relax);
  for (int round = 0; round < 16; ++round) {
    bool again = false;
    Expr mn = s.min(), mx = s.max();
    if (mn.defined() && uses_any(mn, relax)) {
      mn = arith::eval_set(mn, relax).min();
      again = true;
    }
    if (mx.defined() && uses_any(mx, relax)) {
      mx = arith::eval_set(mx, relax).max();
      again = true;
    }
    if (!again) break;
    s = arith::IntSet::interval(mn, mx);
  }
  return s;
}

}  // namespace

BoundMap infer_bound(const Schedule& sch) {
  const ScheduleNode* s = sch.operator->();
  BoundMap b;
  arith::Analyzer ana;
  std::vector<Access> accesses = collect_accesses(s);
  // Loops bound to a GPU thread index or a virtual thread: a stage in shared memory is filled
  // by all the threads of a block together, so its region is relaxed over them even where they
  // enclose its attachment point (each thread then copies its part of it: cooperative
  // fetching).
  std::unordered_set<const IterVarNode*> thread_loops;
  for (const Stage& st : s->stages) {
    for (const auto& [iv, attr] : st->iter_var_attrs) {
      if (!attr.bind_thread.defined()) continue;
      const std::string& tag = attr.bind_thread->thread_tag;
      if (tag.rfind("threadIdx.", 0) == 0 || tag.rfind("vthread", 0) == 0) thread_loops.insert(iv);
    }
  }
  for (auto it = s->stages.rbegin(); it != s->stages.rend(); ++it) {
    const Stage& st = *it;
    const OperationNode* op = st->op.get();
    if (op->kind == OpKind::kPlaceholder || st->attach_type == AttachType::kInline) continue;
    if (op->kind == OpKind::kCompute) {
      const auto* c = static_cast<const ComputeOpNode*>(op);
      for (const IterVar& iv : c->reduce_axis) b[iv.get()] = iv->dom;
      // Region of each output dimension needed by consumers.
      std::vector<std::vector<arith::IntSet>> region(c->axis.size());
      bool full = st->is_output;
      LoopSet encl = enclosing_loops(st);
      for (const Access& a : accesses) {
        if (full) break;
        if (stage_of(s, a.tensor).get() != st.get()) continue;
        if (a.indices.empty()) {
          full = true;
          break;
        }
        // Relax the reader's loops that do not enclose this stage's attachment point.
        VarMap<arith::IntSet> relax;
        LoopSet reader_loops = enclosing_loops(a.reader);
        for (const IterVar& lv : a.reader->leaf_iter_vars) reader_loops.insert(lv.get());
        for (const IterVarNode* lv : reader_loops) {
          if (encl.count(lv) && !(st->scope == "shared" && thread_loops.count(lv))) continue;
          auto bit = b.find(lv);
          KILN_ICHECK(bit != b.end()) << "no bound for loop " << lv->var.name();
          relax[lv->var] = arith::IntSet::from_range(bit->second);
        }
        // In shared memory, a kept loop whose range moves with a relaxed thread loop (a stage
        // computed per thread, e.g. an accumulator at the thread loop) is relaxed too, over the
        // values its range takes for all the threads.
        for (bool changed = st->scope == "shared"; changed;) {
          changed = false;
          for (const IterVarNode* lv : reader_loops) {
            if (relax.count(lv->var)) continue;
            auto bit = b.find(lv);
            if (bit == b.end()) continue;
            const Range& r = bit->second;
            if (!uses_any(r->min, relax) && !uses_any(r->extent, relax)) continue;
            arith::IntSet lo = relaxed_set(r->min, relax);
            arith::IntSet hi = relaxed_set(r->min + r->extent - 1, relax);
            relax[lv->var] = arith::IntSet::interval(lo.min(), hi.max());
            changed = true;
          }
        }
        auto values = pass_up_index(a.reader.get(), b);
        VarMap<Expr> root_values;
        for (const IterVar& iv : a.reader->op->root_iter_vars())
          root_values[iv->var] = values.at(iv.get());
        for (size_t d = 0; d < a.indices.size(); ++d) {
          Expr idx = substitute(a.indices[d], root_values);
          region[d].push_back(relaxed_set(idx, relax));
        }
      }
      for (size_t d = 0; d < c->axis.size(); ++d) {
        const IterVar& iv = c->axis[d];
        if (full || region[d].empty()) {
          b[iv.get()] = iv->dom;
          continue;
        }
        arith::IntSet u = arith::union_sets(region[d]);
        // Never compute outside the tensor: clamp to its domain.
        Expr lo = u.has_lower_bound() ? ana.simplify(u.min()) : iv->dom->min;
        Expr dom_max = iv->dom->min + iv->dom->extent - 1;
        Expr hi = u.has_upper_bound() ? ana.simplify(u.max()) : dom_max;
        if (!ana.can_prove(lo >= iv->dom->min)) lo = ana.simplify(max(lo, iv->dom->min));
        if (!ana.can_prove(hi <= dom_max)) hi = ana.simplify(min(hi, dom_max));
        // A consumer iteration may read nothing of the tensor (e.g. a trailing iteration of
        // split_nparts past the end): the extent is then 0, never negative.
        Expr ext = ana.simplify(hi - lo + 1);
        if (!ana.can_prove(ext >= 0)) ext = ana.simplify(max(ext, make_zero(ext.dtype())));
        b[iv.get()] = Range(lo, ext);
      }
      for (const IterVar& iv : c->root_iter_vars()) ana.bind(iv->var, b.at(iv.get()));
    }
    pass_down_domain(st.get(), &b, &ana);
  }
  return b;
}

namespace {

class NestBuilder {
 public:
  NestBuilder(const ScheduleNode* s, const BoundMap& b) : s_(s), b_(b), inl_(s) {
    for (const auto& [iv, r] : b_) ana_.bind(Var(iv->var), r);
  }

  /// The loop nest computing stage `st`.
  Stmt build(const Stage& st) {
    if (st->op->kind == OpKind::kExtern) return build_extern(st);
    const auto* c = static_cast<const ComputeOpNode*>(st->op.get());
    auto values = pass_up_index(st.get(), b_);
    std::vector<Expr> idx;
    VarMap<Expr> root_map;
    for (const IterVar& iv : c->root_iter_vars()) root_map[iv->var] = values.at(iv.get());
    for (const IterVar& iv : c->axis) idx.push_back(values.at(iv.get()));
    std::vector<Tensor> outs;
    for (int i = 0; i < c->num_outputs(); ++i) outs.push_back(st->origin_op.output(i));

    if (int t = detail::tensorized_leaf(st); t >= 0)
      return build_tensorized(st, static_cast<size_t>(t), values);
    if (c->axis.empty()) {
      // A 0-d result: one sequential program, which a GPU build runs on one thread (like an
      // extern stage, tir::bind_extern_stages).
      return AttrStmt::make(Ref<Object>(), attr::kExternScope, StringImm::make(st->name()),
                            build_nest(st, c, values, root_map, idx, outs));
    }
    return build_nest(st, c, values, root_map, idx, outs);
  }

  Stmt build_nest(const Stage& st, const ComputeOpNode* c,
                  const std::unordered_map<const IterVarNode*, Expr>& values,
                  const VarMap<Expr>& root_map, const std::vector<Expr>& idx,
                  const std::vector<Tensor>& outs) {
    const std::vector<IterVar>& leaves = st->leaf_iter_vars;
    if (c->reduce_axis.empty()) {
      std::vector<Stmt> stores;
      for (size_t i = 0; i < outs.size(); ++i) {
        Expr v = substitute(inl_.mutate(c->body[i]), root_map);
        stores.push_back(ProducerStore::make(Producer(outs[i].get()), v, idx));
      }
      Stmt body = guard(st, c->axis, values, SeqStmt::make(stores));
      return wrap_loops(st, 0, leaves.size(), body);
    }
    // Reduction: init at the first reduction loop, update inside all loops.
    size_t p = 0;
    while (p < leaves.size() && leaves[p]->iter_type != IterVarType::kCommReduce) ++p;
    check_shifted_tiles_outside(st, p);
    const auto* r0 = c->body[0].as<Reduce>();
    std::vector<Expr> sources;
    for (const Expr& src : r0->source) sources.push_back(substitute(inl_.mutate(src), root_map));
    std::vector<Expr> olds;
    for (const Tensor& t : outs) olds.push_back(ProducerLoad::make(Producer(t.get()), idx));
    std::vector<Expr> upd = r0->combiner(olds, sources);
    std::vector<Stmt> stores;
    if (outs.size() == 1 && vectorizes_reduction(st, p)) {
      // The lanes of the vectorized reduction loop are combined in a tree (tir::vectorize).
      Var r(outs[0].name() + ".v", sources[0].dtype());
      Stmt store = ProducerStore::make(Producer(outs[0].get()), r0->combiner(olds, {r})[0], idx);
      stores.push_back(AttrStmt::make(Ref<Object>(), attr::kReduceLanes, r0->combiner->identity[0],
                                      LetStmt::make(r, sources[0], store)));
    } else if (outs.size() == 1) {
      stores.push_back(ProducerStore::make(Producer(outs[0].get()), upd[0], idx));
    } else {
      std::vector<Var> tmp;
      for (size_t i = 0; i < outs.size(); ++i) {
        tmp.emplace_back(outs[i].name() + ".new", upd[i].dtype());
        stores.push_back(ProducerStore::make(Producer(outs[i].get()), tmp[i], idx));
      }
      Stmt body = SeqStmt::make(stores);
      for (size_t i = outs.size(); i-- > 0;) body = LetStmt::make(tmp[i], upd[i], body);
      stores = {body};
    }
    Stmt update = SeqStmt::make(stores);
    Expr cond = substitute(inl_.mutate(r0->condition), root_map);
    if (!is_one(cond)) update = IfThenElse::make(cond, update);
    update = guard(st, c->root_iter_vars(), values, update);
    update = wrap_loops(st, p, leaves.size(), update);
    // Init nest: the data-parallel loops after p, with fresh variables.
    Stmt init = init_nest(st, p, leaves.size(), values, [&](const VarMap<Expr>& fresh) {
      std::vector<Stmt> inits;
      std::vector<Expr> init_idx;
      for (const Expr& e : idx) init_idx.push_back(substitute(e, fresh));
      for (size_t i = 0; i < outs.size(); ++i)
        inits.push_back(
            ProducerStore::make(Producer(outs[i].get()), r0->combiner->identity[i], init_idx));
      return SeqStmt::make(inits);
    });
    return wrap_loops(st, 0, p, SeqStmt::make({init, update}));
  }

  /// True when a reduction loop among the leaves from `p` on is vectorized.
  static bool vectorizes_reduction(const Stage& st, size_t p) {
    for (size_t i = p; i < st->leaf_iter_vars.size(); ++i) {
      const IterVar& iv = st->leaf_iter_vars[i];
      auto it = st->iter_var_attrs.find(iv.get());
      if (iv->iter_type == IterVarType::kCommReduce && it != st->iter_var_attrs.end() &&
          it->second.for_kind == ForKind::kVectorized)
        return true;
    }
    return false;
  }

  /// A shifted tile recomputes points of the tile before it: each must be a whole reduction,
  /// so the loops deriving from a shifted split's outer axis lie outside leaf `p` (the first
  /// reduction loop, where the accumulator is initialized).
  void check_shifted_tiles_outside(const Stage& st, size_t p) {
    for (const IterVarRelation& r : st->relations) {
      if (!shifts_tail(r, b_)) continue;
      std::unordered_set<const IterVarNode*> derived = {r.outer.get()};
      for (const IterVarRelation& q : st->relations) {
        if (q.kind == IterVarRelation::kSplit && derived.count(q.parent.get())) {
          derived.insert(q.outer.get());
          derived.insert(q.inner.get());
        } else if (q.kind == IterVarRelation::kFuse &&
                   (derived.count(q.outer.get()) || derived.count(q.inner.get()))) {
          derived.insert(q.fused.get());
        }
      }
      for (size_t i = p; i < st->leaf_iter_vars.size(); ++i)
        KILN_USER_CHECK(!derived.count(st->leaf_iter_vars[i].get()))
            << "split: stage '" << st->name() << "': the tile of axis '" << r.parent->var.name()
            << "' is shifted inwards, but its loop '" << st->leaf_iter_vars[i]->var.name()
            << "' lies inside the reduction loop '" << st->leaf_iter_vars[p]->var.name()
            << "', so the points two tiles share would be accumulated twice";
    }
  }

  /// A reduction's init nest: `make_init(fresh)`, a statement over fresh copies (".init") of
  /// the data-parallel loop variables among leaves [begin, end), guarded and wrapped in loops
  /// over those copies.
  Stmt init_nest(const Stage& st, size_t begin, size_t end,
                 const std::unordered_map<const IterVarNode*, Expr>& values,
                 const std::function<Stmt(const VarMap<Expr>&)>& make_init) {
    const auto* c = static_cast<const ComputeOpNode*>(st->op.get());
    const std::vector<IterVar>& leaves = st->leaf_iter_vars;
    VarMap<Expr> fresh;
    std::vector<std::pair<size_t, Var>> init_loops;
    for (size_t i = begin; i < end; ++i) {
      if (leaves[i]->iter_type == IterVarType::kCommReduce) continue;
      Var nv = leaves[i]->var.copy_with_suffix(".init");
      fresh[leaves[i]->var] = nv;
      ana_.bind(nv, b_.at(leaves[i].get()));
      init_loops.emplace_back(i, nv);
    }
    Stmt init = make_init(fresh);
    auto init_values = values;
    for (auto& [k, v] : init_values) v = substitute(v, fresh);
    init = guard(st, c->axis, init_values, init);
    for (auto it = init_loops.rbegin(); it != init_loops.rend(); ++it)
      init = make_loop(st, leaves[it->first], it->second, init, /*marker=*/false);
    return init;
  }

  /// The loop nest of a stage tensorized at leaf `t` (te/tensor_intrin.h): the loops outside
  /// `t` around the intrinsic's body; when reduction loops lie outside `t`, its reset at the
  /// reduction's init point and its update inside them (or, without a reset, the body on the
  /// first outer reduction iteration and the update on the others).
  Stmt build_tensorized(const Stage& st, size_t t,
                        const std::unordered_map<const IterVarNode*, Expr>& values) {
    const auto* c = static_cast<const ComputeOpNode*>(st->op.get());
    std::vector<Expr> bodies;
    for (const Expr& e : c->body) bodies.push_back(inl_.mutate(e));
    detail::TensorizedNest tn = detail::make_tensorize(st, t, values, b_, bodies, &ana_);
    const std::vector<IterVar>& leaves = st->leaf_iter_vars;
    const std::vector<IterVar> roots = c->root_iter_vars();
    size_t p = 0;
    while (p < leaves.size() && leaves[p]->iter_type != IterVarType::kCommReduce) ++p;
    if (c->reduce_axis.empty() || p >= t)
      return wrap_loops(st, 0, t, guard(st, roots, values, tn.body));
    KILN_USER_CHECK(tn.update.defined())
        << "tensorize: stage '" << st->name() << "': reduction loop '" << leaves[p]->var.name()
        << "' lies outside the tensorized axis '" << leaves[t]->var.name()
        << "', so the intrinsic needs an update form, and '"
        << st->iter_var_attrs.at(leaves[t].get()).tensor_intrin->name << "' declares none";
    if (!tn.reset.defined()) {
      Expr first;
      for (size_t i = p; i < t; ++i) {
        if (leaves[i]->iter_type != IterVarType::kCommReduce) continue;
        Expr c0 = leaves[i]->var == b_.at(leaves[i].get())->min;
        first = first.defined() ? (first && c0) : c0;
      }
      Stmt s = IfThenElse::make(first, tn.body, tn.update);
      return wrap_loops(st, 0, t, guard(st, roots, values, s));
    }
    Stmt update = wrap_loops(st, p, t, guard(st, roots, values, tn.update));
    Stmt init = init_nest(st, p, t, values,
                          [&](const VarMap<Expr>& fresh) { return substitute(tn.reset, fresh); });
    return wrap_loops(st, 0, p, SeqStmt::make({init, update}));
  }

  /// Injects `pipeline` (a function of the loop body) at the marker of loop `iv`.
  Stmt inject(const Stmt& root, const IterVar& iv, const std::function<Stmt(Stmt)>& pipeline,
              const Stage& st);

 private:
  Stmt make_loop(const Stage& st, const IterVar& iv, const Var& var, Stmt body, bool marker) {
    const Range& r = b_.at(iv.get());
    ForKind kind = ForKind::kSerial;
    std::string tag;
    auto it = st->iter_var_attrs.find(iv.get());
    if (marker) body = AttrStmt::make(iv, kLoopScope, var, body);
    if (it != st->iter_var_attrs.end()) {
      kind = it->second.for_kind;
      if (it->second.bind_thread.defined()) tag = it->second.bind_thread->thread_tag;
      if (!it->second.prefetches.empty()) {
        std::vector<Stmt> seq = it->second.prefetches;
        seq.push_back(body);
        body = SeqStmt::make(seq);
      }
      for (auto p = it->second.pragmas.rbegin(); p != it->second.pragmas.rend(); ++p)
        body = AttrStmt::make(iv, attr::kPragmaPrefix + p->first, p->second, body);
    }
    Expr mn = ana_.simplify(r->min), ext = ana_.simplify(r->extent);
    Stmt loop = For::make(var, cast(var.dtype(), mn), cast(var.dtype(), ext), kind, body, tag);
    if (it != st->iter_var_attrs.end() && it->second.bind_thread.defined()) {
      loop = AttrStmt::make(it->second.bind_thread, attr::kThreadExtent, ext, loop);
    }
    return loop;
  }

  /// Wraps `body` in the stage's leaf loops [begin, end), each with its attach marker.
  Stmt wrap_loops(const Stage& st, size_t begin, size_t end, Stmt body) {
    for (size_t i = end; i-- > begin;)
      body = make_loop(st, st->leaf_iter_vars[i], st->leaf_iter_vars[i]->var, body, true);
    return body;
  }

  /// Wraps `body` in `if (likely(v < min + extent))` for each root var that may overflow.
  Stmt guard(const Stage& st, const std::vector<IterVar>& roots,
             const std::unordered_map<const IterVarNode*, Expr>& values, Stmt body) {
    Expr cond;
    // Split parents that are neither roots nor leaves (a split of a split's inner or outer
    // axis) can overflow too: their loops cover ceil(extent / factor) * factor values.
    std::vector<IterVar> checked = roots;
    for (const IterVarRelation& rel : st->relations) {
      if (rel.kind != IterVarRelation::kSplit) continue;
      bool have = false, same_type = false;
      for (const IterVar& iv : checked) have |= iv.same_as(rel.parent);
      for (const IterVar& iv : roots) same_type |= iv->iter_type == rel.parent->iter_type;
      if (!have && same_type && values.count(rel.parent.get())) checked.push_back(rel.parent);
    }
    for (const IterVarRelation& rel : st->relations)
      if (shifts_tail(rel, b_))
        checked.erase(std::remove_if(checked.begin(), checked.end(),
                                     [&](const IterVar& iv) { return iv.same_as(rel.parent); }),
                      checked.end());
    for (const IterVar& iv : checked) {
      bool is_leaf = st->leaf_index(iv) >= 0;
      if (is_leaf) continue;
      const Range& r = b_.at(iv.get());
      Expr v = values.at(iv.get());
      Expr c = v < r->min + r->extent;
      if (ana_.can_prove(c)) continue;
      c = likely(ana_.simplify(c));
      cond = cond.defined() ? (cond && c) : c;
    }
    return cond.defined() ? IfThenElse::make(cond, body) : body;
  }

  Stmt build_extern(const Stage& st) {
    const auto* e = static_cast<const ExternOpNode*>(st->op.get());
    Stmt body = e->body;
    auto bind = [&](const Buffer& buf, const Tensor& t) {
      std::vector<Expr> zeros(t->shape.size(), Expr(0));
      Expr addr =
          Call::make(DataType::Handle(), builtin::kAddressOf,
                     {ProducerLoad::make(Producer(t.get()), zeros)}, CallKind::kPureIntrinsic);
      body = LetStmt::make(buf->data, addr, body);
    };
    for (size_t i = 0; i < e->output_buffers.size(); ++i)
      bind(e->output_buffers[i], st->origin_op.output(static_cast<int>(i)));
    for (size_t i = 0; i < e->inputs.size(); ++i) bind(e->input_buffers[i], e->inputs[i]);
    return AttrStmt::make(Ref<Object>(), attr::kExternScope, StringImm::make(st->name()), body);
  }

  const ScheduleNode* s_;
  const BoundMap& b_;
  Inliner inl_;
  arith::Analyzer ana_;
};

class AttachInjector : public IRMutator {
 public:
  AttachInjector(const IterVarNode* iv, const std::function<Stmt(Stmt)>& pipeline)
      : iv_(iv), pipeline_(pipeline) {}
  bool found = false;

 protected:
  using IRMutator::visit;
  Stmt visit(const AttrStmt* op) override {
    if (op->key == kLoopScope && op->node.get() == iv_ && !found) {
      found = true;
      return AttrStmt::make(op->node, op->key, op->value, pipeline_(op->body));
    }
    return IRMutator::visit(op);
  }

 private:
  const IterVarNode* iv_;
  const std::function<Stmt(Stmt)>& pipeline_;
};

class RemoveMarkers : public IRMutator {
 protected:
  using IRMutator::visit;
  Stmt visit(const AttrStmt* op) override {
    if (op->key == kLoopScope) return mutate(op->body);
    return IRMutator::visit(op);
  }
};

Stmt NestBuilder::inject(const Stmt& root, const IterVar& iv,
                         const std::function<Stmt(Stmt)>& pipeline, const Stage& st) {
  AttachInjector inj(iv.get(), pipeline);
  Stmt out = inj.mutate(root);
  KILN_USER_CHECK(inj.found) << "stage '" << st->name() << "' is computed at axis '"
                             << iv->var.name() << "' of stage '" << st->attach_stage->name()
                             << "', but that loop was not generated (is the stage inlined?)";
  return out;
}

}  // namespace

Stmt schedule_ops(const Schedule& sch, const BoundMap& bounds, const std::vector<Tensor>& args) {
  const ScheduleNode* s = sch.operator->();
  std::unordered_set<const Object*> arg_set;
  for (const Tensor& t : args) arg_set.insert(t.get());
  NestBuilder nb(s, bounds);
  Stmt body;
  for (auto it = s->stages.rbegin(); it != s->stages.rend(); ++it) {
    const Stage& st = *it;
    if (st->op->kind == OpKind::kPlaceholder || st->attach_type == AttachType::kInline) continue;
    Stmt produce = nb.build(st);
    auto pipeline = [&](Stmt consumer) {
      Stmt inner = SeqStmt::make({produce, consumer});
      for (int i = st->origin_op->num_outputs(); i-- > 0;) {
        Tensor t = st->origin_op.output(i);
        if (arg_set.count(t.get())) continue;
        std::vector<Range> region;
        if (st->op->kind == OpKind::kCompute) {
          for (const IterVar& iv : static_cast<const ComputeOpNode*>(st->op.get())->axis)
            region.push_back(bounds.at(iv.get()));
        } else {
          for (const Expr& d : t->shape) region.emplace_back(make_zero(d.dtype()), d);
        }
        inner = ProducerRealize::make(Producer(t.get()), region, const_true(), inner, st->scope);
        for (const StorageAlignInfo& a : st->storage_aligns) {
          inner = AttrStmt::make(t, attr::kStorageAlign,
                                 Call::make(DataType::Int(32), builtin::kTuple,
                                            {a.dim, a.factor, a.offset}, CallKind::kPureIntrinsic),
                                 inner);
        }
      }
      return inner;
    };
    if (st->attach_type == AttachType::kScope) {
      KILN_ICHECK(body.defined()) << "attached stage " << st->name() << " before its consumer";
      body = nb.inject(body, st->attach_ivar, pipeline, st);
    } else {
      body = pipeline(body);
    }
  }
  KILN_USER_CHECK(body.defined()) << "the schedule computes nothing (only placeholders)";
  return RemoveMarkers().mutate(body);
}

}  // namespace kiln::te
