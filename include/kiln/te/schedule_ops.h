/// \file schedule_ops.h
/// \brief From a schedule to a loop program: bound inference and loop-nest generation.
#pragma once

#include <unordered_map>
#include <vector>

#include "kiln/te/schedule.h"

namespace kiln::te {

/// The range of every iteration variable (root and derived) of every stage.
using BoundMap = std::unordered_map<const IterVarNode*, Range>;

/// Bound inference (TVM's InferBound): from the outputs back to the inputs, the region of
/// each stage that its consumers read — relaxed over the consumer loops that lie inside the
/// stage's attachment point, fixed (symbolic) for the loops that enclose it — becomes the
/// ranges of its root axes; ranges then pass down split and fuse relations to the leaf axes.
BoundMap infer_bound(const Schedule& sch);

/// Generates the loop program of a schedule (TVM's ScheduleOps): one loop nest per stage with
/// its leaf loops in order and annotations as loop kinds, reductions as init + update nests,
/// `if (likely(...))` guards where a split does not divide its axis, compute_at stages placed
/// inside their attachment loop, ProducerRealize for every stage whose tensors are not in
/// `args`, inlined stages substituted into their consumers.
Stmt schedule_ops(const Schedule& sch, const BoundMap& bounds, const std::vector<Tensor>& args);

}  // namespace kiln::te
