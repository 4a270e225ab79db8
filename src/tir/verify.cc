// verify: one walk over a PrimFunc's body with the set of variables in scope (pushed by their
// binders, popped after their bodies), the element type of every buffer var that may be
// accessed (allocations and parameter buffers), and per-node type rules. The first violation
// throws an internal kiln::Error naming the pass that ran last, the function and the rule.
#include "kiln/tir/verify.h"

#include <sstream>
#include <unordered_map>

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/te/tensor_intrin.h"

namespace kiln::tir {
namespace {

class Verifier : public IRVisitor {
 public:
  Verifier(const PrimFunc& f, const std::string& pass, const VerifyOptions& opt)
      : f_(f), pass_(pass), opt_(opt) {}

  void run() {
    bool packed = f_.attr("packed_api") == "1";
    for (const Var& p : f_->params) bind(p);
    for (const auto& [param, buf] : f_->buffer_map) {
      buffer_dtype_[buf->data.get()] = buf->dtype;
      if (packed) continue;  // data and shape vars are let-bound in the body
      if (!in_scope(buf->data)) bind(buf->data);
      for (const std::vector<Expr>* v : {&buf->shape, &buf->strides})
        for (const Expr& e : *v)
          post_order_visit(e, [&](const IRNode* n) {
            if (n->kind == NodeKind::Variable) {
              Var var(static_cast<const Variable*>(n));
              if (!in_scope(var)) bind(var);
            }
          });
    }
    if (f_->body.defined()) visit_stmt(f_->body);
  }

 protected:
  using IRVisitor::visit;

  [[noreturn]] void fail(const std::string& msg) {
    throw Error("internal error: IR verification failed after pass '" + pass_ + "' in function '" +
                f_->name + "': " + msg + " [this is a Kiln bug]");
  }
  bool in_scope(const Var& v) const { return scope_.count(v.get()) != 0; }
  void bind(const Var& v) {
    if (in_scope(v)) fail("variable '" + v.name() + "' is bound again inside its own scope");
    scope_.insert(v.get());
  }
  void unbind(const Var& v) { scope_.erase(v.get()); }
  static std::string str(DataType t) { return t.str(); }

  void check_bool(const Expr& c, const char* what, int lanes = 1) {
    if (!c.defined()) return;
    if (c.dtype() != DataType::Bool(lanes))
      fail(std::string(what) + " has type " + str(c.dtype()) + ", expected " +
           str(DataType::Bool(lanes)));
  }

  /// Buffer var of a Load/Store: returns its element dtype when known.
  DataType check_buffer(const Var& v, const char* access) {
    if (!in_scope(v) || !v.dtype().is_handle()) {
      fail(std::string(access) + " buffer '" + v.name() +
           "' which is neither allocated nor a parameter buffer");
    }
    auto it = buffer_dtype_.find(v.get());
    return it == buffer_dtype_.end() ? DataType::Void() : it->second;
  }

  void visit(const Variable* op) override {
    if (!scope_.count(op))
      fail("variable '" + op->name + "' is used outside the scope of its definition");
  }

#define KILN_BINARY_NODE(T)                                                         \
  void visit(const T* op) override {                                                \
    if (op->a.dtype() != op->b.dtype())                                             \
      fail(std::string(#T) + " operands of types " + str(op->a.dtype()) + " and " + \
           str(op->b.dtype()));                                                     \
    IRVisitor::visit(op);                                                           \
  }
#include "kiln/ir/node_kinds.def"

  void visit(const Select* op) override {
    if (op->condition.dtype().lanes() != 1)
      check_bool(op->condition, "Select condition", op->dtype.lanes());
    else
      check_bool(op->condition, "Select condition");
    IRVisitor::visit(op);
  }
  void visit(const Load* op) override {
    DataType elem = check_buffer(op->buffer_var, "load from");
    int lanes = op->dtype.lanes();
    if (!elem.is_void() && elem.element_of() != op->dtype.element_of())
      fail("load of " + str(op->dtype) + " from buffer '" + op->buffer_var.name() + "' of " +
           str(elem));
    if (op->index.dtype().lanes() != lanes && op->index.dtype().lanes() != 1)
      fail("load of " + str(op->dtype) + " from '" + op->buffer_var.name() +
           "' with index of type " + str(op->index.dtype()));
    if (!op->index.dtype().is_int() && !op->index.dtype().is_uint())
      fail("load index of type " + str(op->index.dtype()));
    check_bool(op->predicate, "load predicate", lanes);
    IRVisitor::visit(op);
  }
  void visit(const Let* op) override {
    visit_expr(op->value);
    bind(op->var);
    visit_expr(op->body);
    unbind(op->var);
  }
  void visit(const Reduce* op) override {
    for (const IterVar& iv : op->axis) {
      visit_expr(iv->dom->min);
      visit_expr(iv->dom->extent);
    }
    for (const IterVar& iv : op->axis) bind(iv->var);
    for (const Expr& s : op->source) visit_expr(s);
    visit_opt(op->condition);
    for (const IterVar& iv : op->axis) unbind(iv->var);
  }
  void visit(const ProducerLoad* op) override {
    if (opt_.flattened)
      fail("ProducerLoad of '" + op->producer->producer_name() + "' remains after flattening");
    IRVisitor::visit(op);
  }

  void visit(const LetStmt* op) override {
    visit_expr(op->value);
    bind(op->var);
    visit_stmt(op->body);
    unbind(op->var);
  }
  void visit(const AttrStmt* op) override {
    if (op->key == te::kBufferBindScope) {
      // tuple(what, data, elem_offset, rank, strides..., steps..., mins...): binds the view's
      // variables.
      const Call* c = op->value.as<Call>();
      if (opt_.flattened) fail("buffer_bind_scope remains after flattening");
      if (!c || c->args.size() < 4) fail("malformed buffer_bind_scope");
      std::vector<Var> vars;
      for (size_t i = 1; i < c->args.size(); ++i) {
        if (const Variable* v = c->args[i].as<Variable>(); v && i < 4 + rank_of(c)) {
          vars.emplace_back(v);
          bind(vars.back());
        } else {
          visit_expr(c->args[i]);
        }
      }
      visit_stmt(op->body);
      for (const Var& v : vars) unbind(v);
      return;
    }
    visit_opt(op->value);
    Var bound;
    if (op->key == attr::kThreadExtent || op->key == attr::kVirtualThread) {
      if (const auto* iv = dynamic_cast<const IterVarNode*>(op->node.get())) {
        if (!in_scope(iv->var)) {
          bound = iv->var;
          bind(bound);
        }
      }
    }
    visit_stmt(op->body);
    if (bound.defined()) unbind(bound);
  }
  static size_t rank_of(const Call* c) {
    auto r = as_const_int(c->args[3]);
    return r ? static_cast<size_t>(*r) : 0;
  }
  void visit(const AssertStmt* op) override {
    check_bool(op->condition, "assert condition");
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    DataType elem = check_buffer(op->buffer_var, "store to");
    int lanes = op->value.dtype().lanes();
    if (!elem.is_void() && elem.element_of() != op->value.dtype().element_of())
      fail("store of " + str(op->value.dtype()) + " into buffer '" + op->buffer_var.name() +
           "' of " + str(elem));
    if (op->index.dtype().lanes() != lanes && op->index.dtype().lanes() != 1)
      fail("store of " + str(op->value.dtype()) + " into '" + op->buffer_var.name() +
           "' with index of type " + str(op->index.dtype()));
    if (!op->index.dtype().is_int() && !op->index.dtype().is_uint())
      fail("store index of type " + str(op->index.dtype()));
    check_bool(op->predicate, "store predicate", lanes);
    IRVisitor::visit(op);
  }
  void visit(const ProducerStore* op) override {
    if (opt_.flattened)
      fail("ProducerStore to '" + op->producer->producer_name() + "' remains after flattening");
    IRVisitor::visit(op);
  }
  void visit(const ProducerRealize* op) override {
    if (opt_.flattened)
      fail("ProducerRealize of '" + op->producer->producer_name() + "' remains after flattening");
    IRVisitor::visit(op);
  }
  void visit(const Allocate* op) override {
    for (const Expr& e : op->extents) visit_expr(e);
    visit_opt(op->condition);
    check_bool(op->condition, "allocate condition");
    bind(op->buffer_var);
    buffer_dtype_[op->buffer_var.get()] = op->dtype;
    visit_stmt(op->body);
    unbind(op->buffer_var);
  }
  void visit(const For* op) override {
    if (op->for_kind == ForKind::kVectorized && opt_.vectorized)
      fail("vectorized loop over '" + op->loop_var.name() + "' remains after vectorize");
    if (op->min.dtype() != op->loop_var.dtype() || op->extent.dtype() != op->loop_var.dtype())
      fail("loop '" + op->loop_var.name() + "' of type " + str(op->loop_var.dtype()) + " has min " +
           str(op->min.dtype()) + " and extent " + str(op->extent.dtype()));
    visit_expr(op->min);
    visit_expr(op->extent);
    bind(op->loop_var);
    visit_stmt(op->body);
    unbind(op->loop_var);
  }
  void visit(const IfThenElse* op) override {
    check_bool(op->condition, "if condition");
    IRVisitor::visit(op);
  }

 private:
  const PrimFunc& f_;
  const std::string& pass_;
  VerifyOptions opt_;
  std::unordered_set<const Variable*> scope_;
  std::unordered_map<const Variable*, DataType> buffer_dtype_;
};

}  // namespace

void verify(const PrimFunc& f, const std::string& after_pass, const VerifyOptions& opt) {
  Verifier(f, after_pass, opt).run();
}

}  // namespace kiln::tir
