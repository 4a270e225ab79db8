// Internal to src/te: the matching and binding step of Stage::tensorize, called by loop
// generation (schedule_ops.cc) for a stage with a tensorized leaf loop.
#pragma once

#include <unordered_map>
#include <vector>

#include "kiln/arith/analyzer.h"
#include "kiln/te/schedule_ops.h"

namespace kiln::te::detail {

/// The intrinsic's statements bound to the regions the tensorized loops touch; expressed in
/// the stage's leaf variables outside the tensorized axis.
struct TensorizedNest {
  Stmt body;    ///< the whole computation of the region
  Stmt reset;   ///< outputs set to the identity (undefined when the intrinsic has none)
  Stmt update;  ///< one more slice of the reduction (undefined when the intrinsic has none)
};

/// Leaf index of the tensorized loop of `st`, or -1.
int tensorized_leaf(const Stage& st);

/// Checks that the loops of `st` from leaf `loc` inward compute what the intrinsic declares
/// (throws a user error naming the stage, the intrinsic and the first mismatch) and binds its
/// buffers. `values` gives every iter var of the stage in leaf variables; `bodies` are the
/// compute's bodies with inlined stages substituted; `ana` knows the leaf ranges.
TensorizedNest make_tensorize(const Stage& st, size_t loc,
                              const std::unordered_map<const IterVarNode*, Expr>& values,
                              const BoundMap& bounds, const std::vector<Expr>& bodies,
                              arith::Analyzer* ana);

}  // namespace kiln::te::detail
