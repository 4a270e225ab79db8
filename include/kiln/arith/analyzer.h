/// \file analyzer.h
/// \brief Integer analysis behind one facade (STYLE.md item 10): constant bounds, modular
/// (alignment) sets, symbolic interval sets, simplification and proving.
///
///   arith::Analyzer ana;
///   ana.bind(i, Range(0, 16));
///   ana.simplify(floordiv(i, 16));    // -> 0
///   ana.can_prove(i + 1 <= 16);        // -> true
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kiln/ir/expr.h"
#include "kiln/ir/stmt.h"

namespace kiln::arith {

using ir::Expr;
using ir::Range;
using ir::Stmt;
using ir::Var;

/// Constant bounds [min_value, max_value] of an integer expression (inclusive).
struct ConstIntBound {
  static constexpr int64_t kPosInf = INT64_MAX;
  static constexpr int64_t kNegInf = INT64_MIN;
  int64_t min_value = kNegInf;
  int64_t max_value = kPosInf;
};

/// The set {coeff * k + base | k integer}; coeff == 0 means the constant `base`.
/// Used for alignment: a Ramp base with coeff % 16 == 0 and base % 16 == 0 is 16-aligned.
struct ModularSet {
  int64_t coeff = 1;
  int64_t base = 0;
};

/// A symbolic closed interval [min, max] of integers. An unbounded side is undefined
/// (has_lower_bound()/has_upper_bound() false). Empty sets have min > max.
class IntSet {
 public:
  IntSet() = default;
  static IntSet interval(Expr min, Expr max);
  static IntSet single_point(Expr point);
  static IntSet from_range(const Range& r);
  static IntSet everything();

  const Expr& min() const { return min_; }
  const Expr& max() const { return max_; }
  bool has_lower_bound() const { return min_.defined(); }
  bool has_upper_bound() const { return max_.defined(); }
  bool is_everything() const { return !min_.defined() && !max_.defined(); }
  bool is_single_point() const;
  /// The interval as a Range [min, max - min + 1]; an unbounded side is taken from
  /// `max_range`.
  Range cover_range(const Range& max_range) const;

 private:
  Expr min_, max_;
};

/// The smallest interval containing all the sets (sets must be non-empty).
IntSet union_sets(const std::vector<IntSet>& sets);
IntSet intersect_sets(const std::vector<IntSet>& sets);

class Analyzer {
 public:
  Analyzer();
  ~Analyzer();
  Analyzer(const Analyzer&) = delete;
  Analyzer& operator=(const Analyzer&) = delete;

  /// Declares var in [r.min, r.min + r.extent). Rebinding a variable overrides.
  void bind(const Var& v, const Range& r);
  /// Declares var == value (substituted by simplify).
  void bind(const Var& v, const Expr& value);
  /// Runs `f` with `cond` assumed true (e.g. inside an `if`).
  void with_constraint(const Expr& cond, const std::function<void()>& f);

  /// Simplifies an expression (integer and boolean arithmetic, div/mod with known bounds,
  /// constant folding, min/max, comparisons it can decide). Result is equal in value.
  Expr simplify(const Expr& e);
  /// True only if `cond` holds for every value of the bound variables.
  bool can_prove(const Expr& cond);
  ConstIntBound const_int_bound(const Expr& e);
  ModularSet modular_set(const Expr& e);
  /// The range of `e` when each var in dom_map ranges over its set (other vars: their
  /// bindings, or themselves). A var bound to a value is substituted; a var bound only to a
  /// range stays a single point (itself), its range serving to simplify and prove the ends.
  IntSet int_set(const Expr& e, const ir::VarMap<IntSet>& dom_map);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// One-shot helpers.
Expr simplify(const Expr& e);
/// Simplifies every expression in a statement, binding For loop vars to their ranges, Let
/// vars to their values, and assuming If conditions in their branches; removes Fors with
/// extent 0, folds Ifs with a provable condition, drops no-op statements.
Stmt simplify(const Stmt& s);
/// The interval of `e` given intervals of its variables.
IntSet eval_set(const Expr& e, const ir::VarMap<IntSet>& dom_map);

}  // namespace kiln::arith
