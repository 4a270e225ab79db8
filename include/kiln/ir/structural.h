/// \file structural.h
/// \brief Structural equality and hashing of IR, by the node field walkers.
///
/// Two trees are equal when they have the same node kinds, types and field values. Variables
/// bound inside the tree (Let, LetStmt, For, Allocate, Reduce axes) are compared up to
/// renaming; free variables must be the same object unless `map_free_vars` is set, in which
/// case they are matched up consistently (a bijection) on first use.
#pragma once

#include <cstddef>

#include "kiln/ir/expr.h"
#include "kiln/ir/stmt.h"

namespace kiln::ir {

bool structural_equal(const Expr& a, const Expr& b, bool map_free_vars = false);
bool structural_equal(const Stmt& a, const Stmt& b, bool map_free_vars = false);
/// Consistent with structural_equal(…, map_free_vars = true): equal trees hash equal.
size_t structural_hash(const Expr& e);
size_t structural_hash(const Stmt& s);

}  // namespace kiln::ir
