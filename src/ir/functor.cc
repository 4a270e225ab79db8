// Default bodies of IRVisitor (walk every child) and IRMutator (rebuild only what changed,
// returning the same handle otherwise), plus post-order traversal and substitution.
#include "kiln/ir/functor.h"

#include "kiln/ir/op.h"

namespace kiln::ir {

// ---------------------------------------------------------------------------------------------
// IRVisitor

void IRVisitor::visit(const IntImm*) {}
void IRVisitor::visit(const FloatImm*) {}
void IRVisitor::visit(const StringImm*) {}
void IRVisitor::visit(const Variable*) {}
void IRVisitor::visit(const Cast* op) { visit_expr(op->value); }
#define KILN_BINARY_NODE(T)            \
  void IRVisitor::visit(const T* op) { \
    visit_expr(op->a);                 \
    visit_expr(op->b);                 \
  }
#include "kiln/ir/node_kinds.def"
void IRVisitor::visit(const Not* op) { visit_expr(op->a); }
void IRVisitor::visit(const Select* op) {
  visit_expr(op->condition);
  visit_expr(op->true_value);
  visit_expr(op->false_value);
}
void IRVisitor::visit(const Load* op) {
  visit_expr(op->buffer_var);
  visit_expr(op->index);
  visit_opt(op->predicate);
}
void IRVisitor::visit(const Ramp* op) {
  visit_expr(op->base);
  visit_expr(op->stride);
}
void IRVisitor::visit(const Broadcast* op) { visit_expr(op->value); }
void IRVisitor::visit(const Let* op) {
  visit_expr(op->value);
  visit_expr(op->body);
}
void IRVisitor::visit(const Call* op) {
  for (const Expr& a : op->args) visit_expr(a);
}
void IRVisitor::visit(const Reduce* op) {
  for (const IterVar& iv : op->axis) {
    visit_expr(iv->dom->min);
    visit_expr(iv->dom->extent);
  }
  for (const Expr& s : op->source) visit_expr(s);
  visit_opt(op->condition);
}
void IRVisitor::visit(const ProducerLoad* op) {
  for (const Expr& i : op->indices) visit_expr(i);
}
void IRVisitor::visit(const LetStmt* op) {
  visit_expr(op->value);
  visit_stmt(op->body);
}
void IRVisitor::visit(const AttrStmt* op) {
  visit_opt(op->value);
  visit_stmt(op->body);
}
void IRVisitor::visit(const AssertStmt* op) {
  visit_expr(op->condition);
  visit_expr(op->message);
  visit_stmt(op->body);
}
void IRVisitor::visit(const Store* op) {
  visit_expr(op->buffer_var);
  visit_expr(op->value);
  visit_expr(op->index);
  visit_opt(op->predicate);
}
void IRVisitor::visit(const ProducerStore* op) {
  visit_expr(op->value);
  for (const Expr& i : op->indices) visit_expr(i);
}
void IRVisitor::visit(const ProducerRealize* op) {
  for (const Range& r : op->bounds) {
    visit_expr(r->min);
    visit_expr(r->extent);
  }
  visit_opt(op->condition);
  visit_stmt(op->body);
}
void IRVisitor::visit(const Allocate* op) {
  for (const Expr& e : op->extents) visit_expr(e);
  visit_opt(op->condition);
  visit_stmt(op->body);
}
void IRVisitor::visit(const For* op) {
  visit_expr(op->min);
  visit_expr(op->extent);
  visit_stmt(op->body);
}
void IRVisitor::visit(const IfThenElse* op) {
  visit_expr(op->condition);
  visit_stmt(op->then_case);
  visit_opt(op->else_case);
}
void IRVisitor::visit(const SeqStmt* op) {
  for (const Stmt& s : op->seq) visit_stmt(s);
}
void IRVisitor::visit(const Evaluate* op) { visit_expr(op->value); }

// ---------------------------------------------------------------------------------------------
// IRMutator

bool IRMutator::mutate_all(const std::vector<Expr>& in, std::vector<Expr>* out) {
  bool changed = false;
  out->clear();
  out->reserve(in.size());
  for (const Expr& e : in) {
    out->push_back(mutate(e));
    changed |= !out->back().same_as(e);
  }
  return changed;
}

Expr IRMutator::visit(const IntImm* op) { return Expr(op); }
Expr IRMutator::visit(const FloatImm* op) { return Expr(op); }
Expr IRMutator::visit(const StringImm* op) { return Expr(op); }
Expr IRMutator::visit(const Variable* op) { return Expr(op); }
Expr IRMutator::visit(const Cast* op) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? Expr(op) : Cast::make(op->dtype.with_lanes(v.dtype().lanes()), v);
}
#define KILN_BINARY_NODE(T)                                    \
  Expr IRMutator::visit(const T* op) {                         \
    Expr a = mutate(op->a), b = mutate(op->b);                 \
    if (a.same_as(op->a) && b.same_as(op->b)) return Expr(op); \
    return T::make(a, b);                                      \
  }
#include "kiln/ir/node_kinds.def"
Expr IRMutator::visit(const Not* op) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? Expr(op) : Not::make(a);
}
Expr IRMutator::visit(const Select* op) {
  Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
  if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value))
    return Expr(op);
  return Select::make(c, t, f);
}
Expr IRMutator::visit(const Load* op) {
  Expr i = mutate(op->index), p = mutate(op->predicate);
  if (i.same_as(op->index) && p.same_as(op->predicate)) return Expr(op);
  return Load::make(op->dtype, op->buffer_var, i, p);
}
Expr IRMutator::visit(const Ramp* op) {
  Expr b = mutate(op->base), s = mutate(op->stride);
  if (b.same_as(op->base) && s.same_as(op->stride)) return Expr(op);
  return Ramp::make(b, s, op->lanes);
}
Expr IRMutator::visit(const Broadcast* op) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? Expr(op) : Broadcast::make(v, op->lanes);
}
Expr IRMutator::visit(const Let* op) {
  Expr v = mutate(op->value), b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return Expr(op);
  return Let::make(op->var, v, b);
}
Expr IRMutator::visit(const Call* op) {
  std::vector<Expr> args;
  if (!mutate_all(op->args, &args)) return Expr(op);
  return Call::make(op->dtype, op->name, std::move(args), op->call_kind);
}
Expr IRMutator::visit(const Reduce* op) {
  std::vector<Expr> src;
  bool changed = mutate_all(op->source, &src);
  Expr c = mutate(op->condition);
  if (!changed && c.same_as(op->condition)) return Expr(op);
  return Reduce::make(op->combiner, std::move(src), op->axis, c, op->value_index);
}
Expr IRMutator::visit(const ProducerLoad* op) {
  std::vector<Expr> idx;
  if (!mutate_all(op->indices, &idx)) return Expr(op);
  return ProducerLoad::make(op->producer, std::move(idx));
}

Stmt IRMutator::visit(const LetStmt* op) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return Stmt(op);
  return LetStmt::make(op->var, v, b);
}
Stmt IRMutator::visit(const AttrStmt* op) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return Stmt(op);
  return AttrStmt::make(op->node, op->key, v, b);
}
Stmt IRMutator::visit(const AssertStmt* op) {
  Expr c = mutate(op->condition), m = mutate(op->message);
  Stmt b = mutate(op->body);
  if (c.same_as(op->condition) && m.same_as(op->message) && b.same_as(op->body)) return Stmt(op);
  return AssertStmt::make(c, m, b);
}
Stmt IRMutator::visit(const Store* op) {
  Expr v = mutate(op->value), i = mutate(op->index), p = mutate(op->predicate);
  if (v.same_as(op->value) && i.same_as(op->index) && p.same_as(op->predicate)) return Stmt(op);
  return Store::make(op->buffer_var, v, i, p);
}
Stmt IRMutator::visit(const ProducerStore* op) {
  Expr v = mutate(op->value);
  std::vector<Expr> idx;
  bool changed = mutate_all(op->indices, &idx);
  if (!changed && v.same_as(op->value)) return Stmt(op);
  return ProducerStore::make(op->producer, v, std::move(idx));
}
Stmt IRMutator::visit(const ProducerRealize* op) {
  bool changed = false;
  std::vector<Range> bounds;
  for (const Range& r : op->bounds) {
    Expr mn = mutate(r->min), ex = mutate(r->extent);
    if (mn.same_as(r->min) && ex.same_as(r->extent)) {
      bounds.push_back(r);
    } else {
      bounds.emplace_back(mn, ex);
      changed = true;
    }
  }
  Expr c = mutate(op->condition);
  Stmt b = mutate(op->body);
  if (!changed && c.same_as(op->condition) && b.same_as(op->body)) return Stmt(op);
  return ProducerRealize::make(op->producer, std::move(bounds), c, b, op->storage_scope);
}
Stmt IRMutator::visit(const Allocate* op) {
  std::vector<Expr> ext;
  bool changed = mutate_all(op->extents, &ext);
  Expr c = mutate(op->condition);
  Stmt b = mutate(op->body);
  if (!changed && c.same_as(op->condition) && b.same_as(op->body)) return Stmt(op);
  return Allocate::make(op->buffer_var, op->dtype, std::move(ext), c, b, op->scope);
}
Stmt IRMutator::visit(const For* op) {
  Expr mn = mutate(op->min), ex = mutate(op->extent);
  Stmt b = mutate(op->body);
  if (mn.same_as(op->min) && ex.same_as(op->extent) && b.same_as(op->body)) return Stmt(op);
  return For::make(op->loop_var, mn, ex, op->for_kind, b, op->thread_tag);
}
Stmt IRMutator::visit(const IfThenElse* op) {
  Expr c = mutate(op->condition);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.same_as(op->condition) && t.same_as(op->then_case) && e.same_as(op->else_case))
    return Stmt(op);
  return IfThenElse::make(c, t, e);
}
Stmt IRMutator::visit(const SeqStmt* op) {
  bool changed = false;
  std::vector<Stmt> seq;
  for (const Stmt& s : op->seq) {
    seq.push_back(mutate(s));
    changed |= !seq.back().same_as(s);
  }
  return changed ? SeqStmt::make(std::move(seq)) : Stmt(op);
}
Stmt IRMutator::visit(const Evaluate* op) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? Stmt(op) : Evaluate::make(v);
}

// ---------------------------------------------------------------------------------------------

namespace {
class PostOrder : public IRVisitor {
 public:
  explicit PostOrder(const std::function<void(const IRNode*)>& f) : f_(f) {}
  void visit_expr(const Expr& e) override {
    IRVisitor::visit_expr(e);
    f_(e.get());
  }
  void visit_stmt(const Stmt& s) override {
    IRVisitor::visit_stmt(s);
    f_(s.get());
  }

 private:
  const std::function<void(const IRNode*)>& f_;
};

class Substituter : public IRMutator {
 public:
  explicit Substituter(const VarMap<Expr>& m) : m_(m) {}

 protected:
  using IRMutator::visit;
  Expr visit(const Variable* op) override {
    auto it = m_.find(Var(op));
    return it == m_.end() ? Expr(op) : it->second;
  }
  Expr visit(const Load* op) override {
    Expr r = IRMutator::visit(op);
    auto it = m_.find(op->buffer_var);
    if (it == m_.end()) return r;
    const Load* l = r.as<Load>();
    const Variable* nv = it->second.as<Variable>();
    KILN_ICHECK(nv) << "substitute: buffer variable replaced by a non-variable";
    return Load::make(l->dtype, Var(nv), l->index, l->predicate);
  }
  Stmt visit(const Store* op) override {
    Stmt r = IRMutator::visit(op);
    auto it = m_.find(op->buffer_var);
    if (it == m_.end()) return r;
    const Store* s = r.as<Store>();
    const Variable* nv = it->second.as<Variable>();
    KILN_ICHECK(nv) << "substitute: buffer variable replaced by a non-variable";
    return Store::make(Var(nv), s->value, s->index, s->predicate);
  }

 private:
  const VarMap<Expr>& m_;
};

class VarUse : public IRVisitor {
 public:
  explicit VarUse(const std::function<bool(const Variable*)>& p) : p_(p) {}
  bool found = false;

 protected:
  using IRVisitor::visit;
  void visit(const Variable* op) override {
    if (p_(op)) found = true;
  }
  void visit(const Load* op) override {
    if (p_(op->buffer_var.get())) found = true;
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    if (p_(op->buffer_var.get())) found = true;
    IRVisitor::visit(op);
  }

 private:
  const std::function<bool(const Variable*)>& p_;
};
}  // namespace

void post_order_visit(const Stmt& s, const std::function<void(const IRNode*)>& f) {
  PostOrder(f).visit_stmt(s);
}
void post_order_visit(const Expr& e, const std::function<void(const IRNode*)>& f) {
  PostOrder(f).visit_expr(e);
}

Expr substitute(const Expr& e, const VarMap<Expr>& map) {
  if (map.empty()) return e;
  return Substituter(map).mutate(e);
}
Stmt substitute(const Stmt& s, const VarMap<Expr>& map) {
  if (map.empty()) return s;
  return Substituter(map).mutate(s);
}

bool uses_var(const Expr& e, const std::function<bool(const Variable*)>& pred) {
  VarUse v(pred);
  v.visit_expr(e);
  return v.found;
}
bool uses_var(const Stmt& s, const std::function<bool(const Variable*)>& pred) {
  VarUse v(pred);
  v.visit_stmt(s);
  return v.found;
}

}  // namespace kiln::ir
