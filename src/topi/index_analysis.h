// Index analysis shared by the CPU schedules and the reduction computes: how a load's indices
// move with a loop variable, seen through the injective producers a kernel inlines.
#pragma once

#include <optional>

#include "kiln/ir/expr.h"

namespace kiln::topi::detail {

/// Whether `e` reads the variable `v`.
bool uses(const ir::Expr& e, const ir::Var& v);

/// The coefficient of `v` in `e` when `e` is affine in it (sums, differences, products with a
/// constant, casts), else nullopt (floordiv, a product of two variables, ...).
std::optional<int64_t> coefficient(const ir::Expr& e, const ir::Var& v);

/// `e` with every load of an injective compute (one output, no reduction) replaced by that
/// compute's body at the load's indices, recursively: the loads of the tensors a kernel that
/// inlines those producers reads.
ir::Expr inline_injective_loads(const ir::Expr& e);

/// Whether consecutive values of `v` read consecutive elements in `e` with its injective
/// producers inlined: every load that uses `v` uses it in its innermost index only, with
/// coefficient 1. A layout transform from NCHW16c inlined before a reduction over W reads W
/// with a stride of 16: not contiguous.
bool contiguous_in(const ir::Expr& e, const ir::Var& v);

}  // namespace kiln::topi::detail
