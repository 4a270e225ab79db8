/// \file analyzer_impl.h
/// \brief Internal state of the arithmetic analyzer shared by its parts: variable knowledge,
/// linear forms, expression comparison, and the rewrite simplifier (whose rules live in one
/// file per node family: rewrite_add.cc, rewrite_div.cc, rewrite_minmax.cc, rewrite_cmp.cc,
/// rewrite_misc.cc).
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"

namespace kiln::arith {

using namespace kiln::ir;  // NOLINT: internal header of the arith layer

// ---------------------------------------------------------------------------------------------
// Expression utilities (expr_util.cc)

/// ir::structural_equal with free variables compared by identity (expr_util.cc says what that
/// means for bound variables and float constants).
bool deep_equal(const Expr& a, const Expr& b);

/// Integer helpers with floor semantics.
int64_t floordiv_int(int64_t a, int64_t b);
int64_t floormod_int(int64_t a, int64_t b);
int64_t gcd_int(int64_t a, int64_t b);

/// True for scalar signed integers, the type the linear rules reason about.
inline bool is_index_type(DataType t) { return t.is_int() && t.is_scalar(); }

/// A sum of atoms times coefficients plus a constant. Atoms keep their first-appearance order.
struct LinearForm {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;
  bool ok = true;  ///< false when a coefficient overflowed; the form must not be used

  void add_term(const Expr& atom, int64_t coeff);
  void add(const LinearForm& o, int64_t scale);
  bool is_const() const { return terms.empty(); }
};
/// Parses Add/Sub/Mul-by-constant trees of a scalar signed integer expression.
LinearForm to_linear(const Expr& e);
/// Rebuilds a canonical tree: positive terms, then subtracted ones, then the constant.
Expr from_linear(const LinearForm& f, DataType t);

// ---------------------------------------------------------------------------------------------
// Analyzer state

struct Analyzer::Impl {
  VarMap<ConstIntBound> var_bounds;
  VarMap<Expr> var_values;
  /// Conditions known to hold (simplified), from constraints and symbolic ranges.
  std::vector<Expr> facts;

  ConstIntBound bound(const Expr& e);                         // const_int_bound.cc
  ModularSet modular(const Expr& e);                          // modular_set.cc
  Expr simplify(const Expr& e);                               // simplify.cc
  bool can_prove(const Expr& cond);                           // simplify.cc
  IntSet eval_set(const Expr& e, const VarMap<IntSet>& dom);  // int_set.cc
  /// Tightens variable bounds and records facts from `cond` (a conjunction of comparisons).
  void add_constraint(const Expr& cond);  // analyzer.cc
  /// Intersects the known bound of v with b.
  void tighten(const Var& v, ConstIntBound b);
  /// True when a known fact equals `cond` (1), or its negation (0).
  std::optional<bool> lookup_fact(const Expr& cond);
};

/// Bounds of a type's values.
ConstIntBound type_bound(DataType t);
/// Saturating helpers on bound endpoints (kPosInf / kNegInf are infinities).
int64_t bound_add(int64_t a, int64_t b);
int64_t bound_neg(int64_t a);
int64_t bound_mul(int64_t a, int64_t b);

// ---------------------------------------------------------------------------------------------
// The rewrite simplifier: one bottom-up pass; Analyzer::Impl::simplify iterates it.

class Rewriter : public IRMutator {
 public:
  explicit Rewriter(Analyzer::Impl* ana) : ana_(ana) {}
  using IRMutator::mutate;

  // Rules on already simplified operands (each in its family's file).
  Expr rw_add(const Expr& a, const Expr& b);
  Expr rw_sub(const Expr& a, const Expr& b);
  Expr rw_mul(const Expr& a, const Expr& b);
  Expr rw_linear(const Expr& e);  ///< canonical linear form of an Add/Sub/Mul tree
  Expr rw_floordiv(const Expr& a, const Expr& b);
  Expr rw_floormod(const Expr& a, const Expr& b);
  Expr rw_truncdiv(const Expr& a, const Expr& b);
  Expr rw_truncmod(const Expr& a, const Expr& b);
  Expr rw_min(const Expr& a, const Expr& b);
  Expr rw_max(const Expr& a, const Expr& b);
  Expr rw_cmp(NodeKind k, const Expr& a, const Expr& b);
  Expr rw_and(const Expr& a, const Expr& b);
  Expr rw_or(const Expr& a, const Expr& b);
  Expr rw_not(const Expr& a);
  Expr rw_select(const Expr& c, const Expr& t, const Expr& f);

 protected:
  using IRMutator::visit;
  Expr visit(const Variable* op) override;
  Expr visit(const Cast* op) override;
  Expr visit(const Add* op) override;
  Expr visit(const Sub* op) override;
  Expr visit(const Mul* op) override;
  Expr visit(const Div* op) override;
  Expr visit(const Mod* op) override;
  Expr visit(const FloorDiv* op) override;
  Expr visit(const FloorMod* op) override;
  Expr visit(const Min* op) override;
  Expr visit(const Max* op) override;
  Expr visit(const EQ* op) override;
  Expr visit(const NE* op) override;
  Expr visit(const LT* op) override;
  Expr visit(const LE* op) override;
  Expr visit(const GT* op) override;
  Expr visit(const GE* op) override;
  Expr visit(const And* op) override;
  Expr visit(const Or* op) override;
  Expr visit(const Not* op) override;
  Expr visit(const Select* op) override;
  Expr visit(const Ramp* op) override;
  Expr visit(const Broadcast* op) override;
  Expr visit(const Let* op) override;
  Expr visit(const Call* op) override;

  /// Vector rules shared by the families: Broadcast/Ramp lifting. Undefined when none applies.
  Expr rw_vector_binary(NodeKind k, const Expr& a, const Expr& b);
  /// Rebuilds a binary node of kind k from simplified operands (any family).
  Expr rebuild(NodeKind k, const Expr& a, const Expr& b);

  Analyzer::Impl* ana_;
};

}  // namespace kiln::arith
