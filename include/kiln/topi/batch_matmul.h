/// \file batch_matmul.h
/// \brief Batched matrix products: C[b] = A[b]·B[b] (B [batch, K, N]) or A[b]·B[b]ᵀ
/// (transpose_b: B [batch, N, K], the layout of attention's Q·Kᵀ and of TVM's batch_matmul).
///
/// Pattern kind: `kOutEWiseFusable` (kDensePattern in dense.h). A batch extent of 1 on one
/// side broadcasts against the other. Errors name the op and both shapes.
///
/// The CPU schedule template ("batch_matmul_cpu") uses dense.h's register-blocked
/// micro-kernel: the output [b, M, N] is tiled mr × nb (knobs tile_y, tile_x: multiples of
/// 16), each tile accumulated in a local tile computed at the row-tile loop (rows and nb/16
/// vectors unrolled, 16 lanes vectorized), k split by tile_k with its inner part unrolled when
/// `unroll` is set. With B [batch, K, N] the micro-kernel reads B's rows directly; with the
/// transposed B, B is packed per (batch, panel) into Bp[K, nb] inside the parallel
/// batch × panel loop, just before the row tiles that read it (so it stays in that core's L2).
#pragma once

#include <cstdint>
#include <string>

#include "kiln/autotune/template.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

namespace tag {
constexpr const char* kBatchMatmul = "batch_matmul";
constexpr const char* kBatchMatmulPack = "batch_matmul_pack";
constexpr const char* kBatchMatmulUnpad = "batch_matmul_unpad";
}  // namespace tag

/// batch_matmul without transpose_b pads N (B's columns) up to a multiple of this, computes the
/// padded product and returns its first N columns (tag batch_matmul_unpad): the schedule's
/// column panels (16..64 floats) are then never wider than the product and never overlap.
/// Except where N is wide enough that a last panel shifted inwards recomputes at most 1/16 of
/// the columns (N >= 64 and 64-column panels waste at most N / 16): the product is then the
/// result, and no padded product is copied out (Whisper's 1500 x 1500 attention scores: 54 MB
/// a layer copied, 26 -> 19 ms). Below that the copy costs less than the overlap (LeViT's
/// 196-column scores, 64-column panels recomputing 30%: 0.10 -> 0.17 ms unpadded).
constexpr int64_t kBatchMatmulPad = 16;

/// The columns batch_matmul without transpose_b computes for N columns (see kBatchMatmulPad).
inline int64_t batch_matmul_padded_width(int64_t N) {
  if (N % kBatchMatmulPad == 0) return N;
  if (N >= 64 && ((N + 63) / 64 * 64 - N) * 16 <= N) return N;
  return (N + kBatchMatmulPad - 1) / kBatchMatmulPad * kBatchMatmulPad;
}

/// C[b, m, n] = sum_k A[b, m, k] · (transpose_b ? B[b, n, k] : B[b, k, n]); A [BA, M, K],
/// B [BB, K, N] or [BB, N, K], BA == BB or one of them 1. pattern: out_ewise_fusable
te::Tensor batch_matmul(const te::Tensor& A, const te::Tensor& B, bool transpose_b = false,
                        const std::string& name = "batch_matmul");

/// A batch_matmul workload: A [batch, M, K], B [batch, K, N] (or [batch, N, K] transposed).
struct BatchMatmulWorkload {
  int64_t batch = 1, M = 1, N = 1, K = 1;
  bool transpose_b = false;
};

/// Schedules `C` (from batch_matmul) in `s` with knobs tile_x, tile_y, tile_k and unroll of
/// `cfg`. `out`, when given, is the group output of an element-wise epilogue of C's shape (C's
/// injective consumers up to it are inlined into the output tile loops); else C is the output.
void schedule_batch_matmul(autotune::Config& cfg, te::Schedule& s, const te::Tensor& C,
                           const Target& target, const te::Tensor& out = te::Tensor());

/// The template "batch_matmul_cpu": arguments A, B, C.
autotune::Template batch_matmul_template(const BatchMatmulWorkload& w, const Target& target);

}  // namespace kiln::topi
