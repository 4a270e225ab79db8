/// \file schedule_injective.h
/// \brief Default CPU schedules for the operators of elemwise.h, broadcast.h, transform.h,
/// reduction.h and nn_norm.h.
///
/// All take the outputs of one fused group and return a new schedule:
/// * injective intermediate stages (tag elemwise/broadcast/injective, no reduction) are
///   inlined into their consumers;
/// * an injective output is vectorized by the lanes (target.vector_bits() / element bits):
///   when its innermost axis has at least that many elements, that axis is split by the
///   lanes and the other axes are fused into one loop; otherwise all axes are fused and split.
///   A last vector that does not divide is shifted inwards (it overlaps the one before it; no
///   mask), and a row of at most four vectors is unrolled. A concat's rows shorter than the
///   lanes use a half or a quarter vector. The outer loop is parallel when the output has more
///   than kParallelThreshold elements;
/// * a reduction stage has its spatial axes fused and made parallel; when the innermost input
///   axis (seen through the inlined producers) is not reduced, the fused spatial axis is split
///   by the lanes and its inner part
///   moved inside the reduction loops and vectorized; when it is reduced, the reduction stays
///   a serial inner loop;
/// * softmax and layer norm (one output row per leading index) compute their reductions at
///   the output's fused, parallel row loop and vectorize the row.
/// Tensors of bool dtype are never vectorized (the code generator stores bool vectors as bit
/// masks); tuple reductions (argmax) are not vectorized.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/target/target.h"
#include "kiln/te/schedule.h"

namespace kiln::topi {

/// Outputs with more elements than this get a parallel outer loop.
constexpr int64_t kParallelThreshold = 4096;

/// Schedule for a group of injective operators.
te::Schedule schedule_injective(const std::vector<te::Tensor>& outs, const Target& target);
/// Applies the injective output schedule (fuse, split by lanes, vectorize, parallel) to the
/// stage of `out` in an existing schedule.
void schedule_injective_stage(te::Schedule& s, const te::Tensor& out, const Target& target);
/// Schedule for reductions (sum, mean, max, min, prod, argmax, argmin) with their injective
/// inputs and outputs.
te::Schedule schedule_reduce(const std::vector<te::Tensor>& outs, const Target& target);
/// Schedule for softmax / log_softmax outputs (falls back to schedule_reduce's treatment when
/// the axis is not the innermost one).
te::Schedule schedule_softmax(const std::vector<te::Tensor>& outs, const Target& target);
/// Schedule for layer_norm (row-wise) and batch_norm (injective) outputs.
te::Schedule schedule_norm(const std::vector<te::Tensor>& outs, const Target& target);

}  // namespace kiln::topi
