// The statement simplifier: a mutator that simplifies every expression with one Analyzer that
// knows the enclosing context. A For binds its variable to [min, min + extent) for its body; a
// loop of extent 0 disappears and one of extent 1 (not thread-bound) becomes its body with the
// variable replaced by min. A LetStmt with a constant or variable value is substituted, others
// give their variable the value's constant bound. IfThenElse branches are simplified under the
// condition (then) or its negation (else), and an If whose condition simplifies to a constant
// keeps only the taken branch. thread_extent attributes bind their thread variable. Statements
// that do nothing (Evaluate of a constant, empty loops and branches) are dropped; an empty
// result is `Evaluate(0)`.
#include "analyzer_impl.h"

namespace kiln::arith {

namespace {

bool is_no_op(const Stmt& s) {
  if (!s.defined()) return true;
  if (const Evaluate* e = s.as<Evaluate>()) return is_const(e->value);
  if (const SeqStmt* q = s.as<SeqStmt>()) return q->seq.empty();
  return false;
}

Stmt no_op() { return Evaluate::make(make_zero(DataType::Int(32))); }

class StmtSimplifier : public IRMutator {
 public:
  Stmt run(const Stmt& s) {
    Stmt r = mutate(s);
    return is_no_op(r) ? no_op() : r;
  }

  Expr visit_expr(const Expr& e) override { return ana_.simplify(e); }

 protected:
  using IRMutator::visit;

  Stmt visit(const For* op) override {
    Expr mn = ana_.simplify(op->min);
    Expr ext = ana_.simplify(op->extent);
    auto e = as_const_int(ext);
    if (e && *e <= 0) return no_op();
    if (e && *e == 1 && op->for_kind != ForKind::kThreadBinding) {
      ana_.bind(op->loop_var, mn);
      return mutate(op->body);
    }
    ana_.bind(op->loop_var, Range(mn, ext));
    Stmt body = mutate(op->body);
    if (is_no_op(body)) return no_op();
    if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return Stmt(op);
    return For::make(op->loop_var, mn, ext, op->for_kind, body, op->thread_tag);
  }

  Stmt visit(const LetStmt* op) override {
    Expr value = ana_.simplify(op->value);
    if (value.as<IntImm>() || value.as<Variable>()) {
      ana_.bind(op->var, value);
      return mutate(op->body);
    }
    if (is_index_type(value.dtype())) {
      ConstIntBound b = ana_.const_int_bound(value);
      if (b.min_value != ConstIntBound::kNegInf && b.max_value != ConstIntBound::kPosInf &&
          b.max_value - b.min_value < INT64_MAX)
        ana_.bind(op->var, Range(make_const(value.dtype(), b.min_value),
                                 make_const(value.dtype(), b.max_value - b.min_value + 1)));
    }
    Stmt body = mutate(op->body);
    if (is_no_op(body)) return no_op();
    if (value.same_as(op->value) && body.same_as(op->body)) return Stmt(op);
    return LetStmt::make(op->var, value, body);
  }

  Stmt visit(const IfThenElse* op) override {
    Expr cond = ana_.simplify(op->condition);
    if (auto c = as_const_int(cond)) {
      Stmt taken = *c ? op->then_case : op->else_case;
      return taken.defined() ? mutate(taken) : no_op();
    }
    Stmt then_case, else_case;
    ana_.with_constraint(cond, [&] { then_case = mutate(op->then_case); });
    if (op->else_case.defined()) {
      Expr neg = ana_.simplify(Not::make(cond));
      ana_.with_constraint(neg, [&] { else_case = mutate(op->else_case); });
    }
    bool then_empty = is_no_op(then_case), else_empty = is_no_op(else_case);
    if (then_empty && else_empty) return no_op();
    if (then_empty) return IfThenElse::make(ana_.simplify(Not::make(cond)), else_case);
    if (else_empty) else_case = Stmt();
    return IfThenElse::make(cond, then_case, else_case);
  }

  Stmt visit(const AssertStmt* op) override {
    Expr cond = ana_.simplify(op->condition);
    if (auto c = as_const_int(cond); c && *c) return mutate(op->body);
    Stmt body = mutate(op->body);
    return AssertStmt::make(cond, op->message, is_no_op(body) ? no_op() : body);
  }

  Stmt visit(const AttrStmt* op) override {
    if (op->key == attr::kThreadExtent || op->key == attr::kVirtualThread) {
      if (const IterVarNode* iv = op->node.as<IterVarNode>()) {
        Expr ext = ana_.simplify(op->value);
        if (ext.dtype() == iv->var.dtype()) ana_.bind(iv->var, Range(make_zero(ext.dtype()), ext));
      }
    }
    Expr value = op->value.defined() ? ana_.simplify(op->value) : op->value;
    Stmt body = mutate(op->body);
    if (is_no_op(body)) return no_op();
    if (value.same_as(op->value) && body.same_as(op->body)) return Stmt(op);
    return AttrStmt::make(op->node, op->key, value, body);
  }

  Stmt visit(const SeqStmt* op) override {
    std::vector<Stmt> seq;
    bool changed = false;
    for (const Stmt& s : op->seq) {
      Stmt r = mutate(s);
      changed |= !r.same_as(s);
      if (!is_no_op(r))
        seq.push_back(r);
      else
        changed = true;
    }
    if (!changed) return Stmt(op);
    if (seq.empty()) return no_op();
    return SeqStmt::make(std::move(seq));
  }

  Stmt visit(const Evaluate* op) override {
    Expr v = ana_.simplify(op->value);
    if (is_const(v)) return no_op();
    return v.same_as(op->value) ? Stmt(op) : Evaluate::make(v);
  }

  Stmt visit(const Allocate* op) override {
    Stmt r = IRMutator::visit(op);
    const Allocate* a = r.as<Allocate>();
    if (a && is_no_op(a->body)) return no_op();
    return r;
  }

 private:
  Analyzer ana_;
};

}  // namespace

Stmt simplify(const Stmt& s) {
  if (!s.defined()) return s;
  return StmtSimplifier().run(s);
}

}  // namespace kiln::arith
