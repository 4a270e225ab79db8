// remove_no_op: a bottom-up mutator that deletes statements with no effect. A statement is a
// no-op when it is an Evaluate of a constant or an empty sequence; loops, lets, attributes and
// allocations around a no-op (or loops of extent 0) are no-ops, an if whose branches are no-ops
// is one (conditions are pure), and `A[i] = A[i]` (same buffer, structurally equal index and
// predicate) is one. Sequences drop their no-op members.
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/ir/structural.h"
#include "kiln/tir/transform.h"
#include "loop_utils.h"

namespace kiln::tir {
namespace {

class NoOpRemover : public IRMutator {
 protected:
  using IRMutator::visit;
  Stmt visit(const For* op) override {
    Stmt s = IRMutator::visit(op);
    op = s.as<For>();
    if (is_no_op(op->body) || is_zero(op->extent)) return make_no_op();
    return s;
  }
  Stmt visit(const LetStmt* op) override {
    Stmt s = IRMutator::visit(op);
    op = s.as<LetStmt>();
    return is_no_op(op->body) ? make_no_op() : s;
  }
  Stmt visit(const AttrStmt* op) override {
    Stmt s = IRMutator::visit(op);
    op = s.as<AttrStmt>();
    return is_no_op(op->body) ? make_no_op() : s;
  }
  Stmt visit(const Allocate* op) override {
    Stmt s = IRMutator::visit(op);
    op = s.as<Allocate>();
    return is_no_op(op->body) ? make_no_op() : s;
  }
  Stmt visit(const IfThenElse* op) override {
    Stmt s = IRMutator::visit(op);
    op = s.as<IfThenElse>();
    bool t = is_no_op(op->then_case), e = is_no_op(op->else_case);
    if (t && e) return make_no_op();
    if (t) return IfThenElse::make(!op->condition, op->else_case);
    if (e && op->else_case.defined()) return IfThenElse::make(op->condition, op->then_case);
    return s;
  }
  Stmt visit(const Store* op) override {
    if (const Load* l = op->value.as<Load>()) {
      if (l->buffer_var.same_as(op->buffer_var) && structural_equal(l->index, op->index) &&
          structural_equal(l->predicate, op->predicate))
        return make_no_op();
    }
    return IRMutator::visit(op);
  }
  Stmt visit(const SeqStmt* op) override {
    std::vector<Stmt> seq;
    bool changed = false;
    for (const Stmt& s : op->seq) {
      Stmt n = mutate(s);
      changed |= !n.same_as(s);
      if (is_no_op(n)) {
        changed = true;
        continue;
      }
      seq.push_back(n);
    }
    if (!changed) return Stmt(op);
    if (seq.empty()) return make_no_op();
    return SeqStmt::make(std::move(seq));
  }
};

}  // namespace

PrimFunc remove_no_op(PrimFunc f) {
  Stmt body = NoOpRemover().mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace kiln::tir
