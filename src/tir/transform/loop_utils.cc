// Shared helpers of the tir passes: renaming the variables a statement binds (used when a body
// is copied, e.g. by unroll) and the canonical no-op statement.
#include "loop_utils.h"

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"

namespace kiln::tir {
namespace {

class DefRenewer : public IRMutator {
 protected:
  using IRMutator::visit;
  Var renew(const Var& v) {
    Var nv(v.name(), v.dtype());
    map_[v] = nv;
    return nv;
  }
  Expr visit(const Variable* op) override {
    auto it = map_.find(Var(op));
    return it == map_.end() ? Expr(op) : it->second;
  }
  Expr visit(const Load* op) override {
    Expr r = IRMutator::visit(op);
    auto it = map_.find(op->buffer_var);
    if (it == map_.end()) return r;
    const Load* l = r.as<Load>();
    return Load::make(l->dtype, Var(it->second.as<Variable>()), l->index, l->predicate);
  }
  Stmt visit(const Store* op) override {
    Stmt r = IRMutator::visit(op);
    auto it = map_.find(op->buffer_var);
    if (it == map_.end()) return r;
    const Store* s = r.as<Store>();
    return Store::make(Var(it->second.as<Variable>()), s->value, s->index, s->predicate);
  }
  Expr visit(const Let* op) override {
    Expr v = mutate(op->value);
    Var nv = renew(op->var);
    return Let::make(nv, v, mutate(op->body));
  }
  Stmt visit(const LetStmt* op) override {
    Expr v = mutate(op->value);
    Var nv = renew(op->var);
    return LetStmt::make(nv, v, mutate(op->body));
  }
  Stmt visit(const For* op) override {
    Expr mn = mutate(op->min), ex = mutate(op->extent);
    Var nv = renew(op->loop_var);
    return For::make(nv, mn, ex, op->for_kind, mutate(op->body), op->thread_tag);
  }
  Stmt visit(const Allocate* op) override {
    std::vector<Expr> ext;
    mutate_all(op->extents, &ext);
    Expr c = mutate(op->condition);
    Var nv = renew(op->buffer_var);
    return Allocate::make(nv, op->dtype, ext, c, mutate(op->body), op->scope);
  }

 private:
  VarMap<Expr> map_;
};

}  // namespace

Stmt renew_defs(const Stmt& s) { return DefRenewer().mutate(s); }

bool is_no_op(const Stmt& s) {
  if (!s.defined()) return true;
  if (const Evaluate* e = s.as<Evaluate>()) return is_const(e->value);
  if (const SeqStmt* q = s.as<SeqStmt>()) return q->seq.empty();
  return false;
}

Stmt make_no_op() { return Evaluate::make(make_zero(DataType::Int(32))); }

}  // namespace kiln::tir
