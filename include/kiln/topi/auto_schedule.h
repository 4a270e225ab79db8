/// \file auto_schedule.h
/// \brief The rule-based default CPU schedule for any te compute that has no template (the
/// "sketch" rules of Ansor / MetaSchedule, applied without search).
///
/// Given the output tensors of one fused group, the rules are:
/// * injective producers that are not outputs are inlined, except a conditional one (a padding
///   stage: its body selects) read by a reduction, which is computed once at the root (flat,
///   vectorized, parallel) so that the reduction's inner loops carry no condition;
/// * every reduction stage (a compute with reduce axes, the "anchor") with data reuse (some
///   load independent of some spatial axis: matmul, convolution) gets a multi-level tile: its
///   spatial loops split into outer tiles and a register tile of `tile_y` rows by `tile_x`
///   columns (vectors of `tile_lanes` when the innermost spatial axis is vectorizable); the
///   reduction loops run inside the outer tile, outside the register tile (S-R-S), the
///   innermost split by `tile_k` (inner part unrolled with `unroll_k`); the register tile's
///   loops are unrolled and its lanes vectorized. The outermost loops are fused until there are
///   enough iterations for the threads (kParallelChunks) and made parallel when the work
///   exceeds kParallelThreshold;
/// * the accumulator: a single-output reduction that is a group output is cache_write'n into a
///   local buffer computed at the innermost outer tile loop; one whose only reader is a
///   same-shaped output (the element-wise epilogue of a conv / matmul) is made local and
///   computed at that output's tile, so the epilogue runs on the tile; any other reduction is
///   tiled in place;
/// * the row axis is the innermost spatial axis (other than the columns) that the loads along
///   the columns do not depend on (matmul: the rows of A; NCHW conv: the output channels), so
///   each vector load serves every row; else the next-innermost;
/// * the columns are vectorized only when no tensor of the group is bool, every load along them
///   is contiguous (unit stride in its innermost index; strided or divided indices gather), no
///   condition depends on them (a pooling window's `where` masks every tap), they hold a vector
///   of 4 lanes or more, and a load is contiguous or the reduction does not read its inputs'
///   innermost axis; row and column tiles that do not divide their extents are shifted inwards
///   (te::Stage::split with shift_tail: the last tile overlaps the one before it), so no vector
///   is masked and every accumulator tile is whole;
/// * a reduction without reuse gets one vector (or element) per accumulator; when it cannot
///   vectorize either, only its two outer loops are fused and made parallel (a tile measured
///   no faster); a tuple reduction (argmax) is fused and parallel, not split;
/// * other outputs get the injective schedule (schedule_injective_stage).
/// Empty tensors (a zero extent) and reductions to a scalar keep their plain loop nests.
///
/// Knobs (per anchor; the second anchor's names start with "r1_", …): tile_x (columns of the
/// register tile, in vectors or in elements), tile_y (rows), tile_lanes (vector width),
/// tile_k (split of the innermost reduction axis), unroll_k. Their fallbacks are sized from the
/// target's vector registers and lanes: the most multiply-adds per step whose accumulators
/// leave room for a row of operands and a broadcast (24 of AVX-512's 32 registers: 6 rows of 4
/// vectors), weighted by how well the tile covers the extents.
#pragma once

#include <vector>

#include "kiln/autotune/space.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"

namespace kiln::topi {

/// Applies the rules to the outputs `outs` of schedule `s` (created for them, no primitives
/// applied yet), declaring and reading the knobs on `cfg`.
void auto_schedule(autotune::Config& cfg, te::Schedule& s, const std::vector<te::Tensor>& outs,
                   const Target& target);

/// A new schedule of `outs` by the rules with the knobs of `cfg` (tuned, or the fallback).
te::Schedule auto_schedule(const std::vector<te::Tensor>& outs, const Target& target,
                           autotune::Config& cfg);

/// A new schedule of `outs` by the rules with the fallback knobs.
te::Schedule auto_schedule(const std::vector<te::Tensor>& outs, const Target& target);

}  // namespace kiln::topi
