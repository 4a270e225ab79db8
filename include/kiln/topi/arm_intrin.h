/// \file arm_intrin.h
/// \brief AArch64 tensor intrinsics (te/tensor_intrin.h): the NEON int8 dot products.
///
/// * dot_s8s8_arm() — `sdot v.4s, v.16b, v.16b` (needs dotprod, Armv8.2-A's optional and
///   Armv8.4-A's mandatory feature): C[i] (int32, 4 lanes) = Σ_{k<4} int32(A[k]) · int32(B[i, k]),
///   A int8 [4] (4 consecutive bytes of one input row, broadcast to every lane), B int8 [4, 4]
///   (row i: the 4 weight bytes of output lane i), both contiguous.
/// * dot_u8u8_arm() — `udot`, the same for uint8 × uint8 (into uint32 accumulators, read as
///   int32 like the products of TVM's arm schedules).
/// Each has a reset (C = 0) and an update (C += …) form. A target without dotprod (or not the
/// arm key) gets no intrinsic (has_dot_arm): the schedule keeps its plain loops, which compute the
/// same values. The module records `dotprod` (runtime/library_target.h), so a CPU without it
/// refuses the module instead of dying of SIGILL.
#pragma once

#include "kiln/target/target.h"
#include "kiln/te/tensor_intrin.h"

namespace kiln::topi {

/// The s8 × s8 dot product of 4 into 4 int32 lanes (sdot).
te::TensorIntrin dot_s8s8_arm();
/// The u8 × u8 dot product of 4 into 4 int32 lanes (udot).
te::TensorIntrin dot_u8u8_arm();
/// True when `target` (the arm key) has the dot-product instructions (+dotprod).
bool has_dot_arm(const Target& target);

}  // namespace kiln::topi
