/// \file functor.h
/// \brief Functors over the IR, typed by signature, dispatched by a switch on the kind tag.
///
///   class CountLoads : public IRVisitor {
///     void visit(const Load* op) override { ++n; IRVisitor::visit(op); }
///   };
/// The default IRVisitor walks every child; the default IRMutator rebuilds a node only when a
/// child changed and otherwise returns the same handle.
#pragma once

#include <functional>
#include <utility>

#include "kiln/ir/expr.h"
#include "kiln/ir/stmt.h"

namespace kiln::ir {

[[noreturn]] void internal_error(const std::string& what);

template <typename FType>
class ExprFunctor;
template <typename FType>
class StmtFunctor;

template <typename R, typename... Args>
class ExprFunctor<R(const Expr&, Args...)> {
 public:
  virtual ~ExprFunctor() = default;
  virtual R visit_expr(const Expr& e, Args... args) {
    switch (e->kind) {
#define KILN_EXPR_NODE(T) \
  case NodeKind::T:       \
    return visit(static_cast<const T*>(e.get()), std::forward<Args>(args)...);
#include "kiln/ir/node_kinds.def"
      default:
        internal_error(std::string("visit_expr: not an expression: ") + node_kind_name(e->kind));
    }
  }

 protected:
#define KILN_EXPR_NODE(T)                                       \
  virtual R visit(const T* op, Args... args) {                  \
    return visit_expr_default(op, std::forward<Args>(args)...); \
  }
#include "kiln/ir/node_kinds.def"
  virtual R visit_expr_default(const BaseExprNode* op, Args...) {
    internal_error(std::string("functor does not handle ") + node_kind_name(op->kind));
  }
};

template <typename R, typename... Args>
class StmtFunctor<R(const Stmt&, Args...)> {
 public:
  virtual ~StmtFunctor() = default;
  virtual R visit_stmt(const Stmt& s, Args... args) {
    switch (s->kind) {
#define KILN_STMT_NODE(T) \
  case NodeKind::T:       \
    return visit(static_cast<const T*>(s.get()), std::forward<Args>(args)...);
#include "kiln/ir/node_kinds.def"
      default:
        internal_error(std::string("visit_stmt: not a statement: ") + node_kind_name(s->kind));
    }
  }

 protected:
#define KILN_STMT_NODE(T)                                       \
  virtual R visit(const T* op, Args... args) {                  \
    return visit_stmt_default(op, std::forward<Args>(args)...); \
  }
#include "kiln/ir/node_kinds.def"
  virtual R visit_stmt_default(const BaseStmtNode* op, Args...) {
    internal_error(std::string("functor does not handle ") + node_kind_name(op->kind));
  }
};

/// Walks every expression and statement; override `visit` for the nodes of interest and call
/// the base to keep walking.
class IRVisitor : public ExprFunctor<void(const Expr&)>, public StmtFunctor<void(const Stmt&)> {
 public:
  using ExprFunctor<void(const Expr&)>::visit_expr;
  using StmtFunctor<void(const Stmt&)>::visit_stmt;

 protected:
  using ExprFunctor<void(const Expr&)>::visit;
  using StmtFunctor<void(const Stmt&)>::visit;
#define KILN_EXPR_NODE(T) void visit(const T* op) override;
#define KILN_STMT_NODE(T) void visit(const T* op) override;
#include "kiln/ir/node_kinds.def"
  void visit_opt(const Expr& e) {
    if (e.defined()) visit_expr(e);
  }
  void visit_opt(const Stmt& s) {
    if (s.defined()) visit_stmt(s);
  }
};

/// Rebuilds the IR bottom-up; unchanged subtrees keep their handles.
class IRMutator : public ExprFunctor<Expr(const Expr&)>, public StmtFunctor<Stmt(const Stmt&)> {
 public:
  using ExprFunctor<Expr(const Expr&)>::visit_expr;
  using StmtFunctor<Stmt(const Stmt&)>::visit_stmt;
  Expr mutate(const Expr& e) { return e.defined() ? visit_expr(e) : e; }
  Stmt mutate(const Stmt& s) { return s.defined() ? visit_stmt(s) : s; }

 protected:
  using ExprFunctor<Expr(const Expr&)>::visit;
  using StmtFunctor<Stmt(const Stmt&)>::visit;
#define KILN_EXPR_NODE(T) Expr visit(const T* op) override;
#define KILN_STMT_NODE(T) Stmt visit(const T* op) override;
#include "kiln/ir/node_kinds.def"
  /// Mutates each element; returns true if any changed.
  bool mutate_all(const std::vector<Expr>& in, std::vector<Expr>* out);
};

/// Calls `f` on every expression and statement node, children before parents.
void post_order_visit(const Stmt& s, const std::function<void(const IRNode*)>& f);
void post_order_visit(const Expr& e, const std::function<void(const IRNode*)>& f);

}  // namespace kiln::ir
