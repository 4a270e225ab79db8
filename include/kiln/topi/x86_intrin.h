/// \file x86_intrin.h
/// \brief x86 tensor intrinsics (te/tensor_intrin.h) and their choice by target features.
///
/// Every intrinsic is declared by the computation it performs, over small operand views:
/// * dot_u8s8(lanes) — AVX-512 VNNI `vpdpbusd zmm` (lanes 16; needs avx512vnni) or its 256-bit
///   form (lanes 8; AVX-VNNI `{vex} vpdpbusd ymm`, or avx512vnni + avx512vl):
///   C[i] (int32, lanes) = Σ_{k<4} int32(A[k]) · int32(int8(B[i] >> 8k)), A uint8 [4] (4
///   consecutive bytes), B int32 [lanes] (each the 4 bytes of one output's weights, packed
///   little-endian), both innermost-contiguous. This is the form topi/quantized.h's kernels
///   compute (weights packed 4 to an int32).
/// * dot_bf16() — AVX-512 BF16 `vdpbf16ps zmm` (needs avx512bf16): C[i] (float32, 16) =
///   Σ_{k<2} float32(A[k]) · float32(B[i, k]), A bfloat16 [2], B bfloat16 [16, 2] contiguous.
/// * popcount_and(words) — AVX-512 VPOPCNTDQ `vpopcntd zmm` (needs avx512vpopcntdq): C[i]
///   (int32, 16) = Σ_{k<words} int32(popcount(A[k] & B[k, i])), A uint32 [words], B uint32
///   [words, 16] (rows contiguous) — the bit-serial micro-kernel of the paper's section 6.2.
///   popcount_and(words, rows > 1) is its register block: C[r, i] (int32, [rows, 16]) =
///   Σ_k popcount(A[r, k] & B[k, i]), A uint32 [rows, words] (rows at any stride), each row of
///   B loaded once for all rows.
/// * amx_dot_u8s8() — AMX `tdpbusd` on one 16 × 16 int32 tile (needs amx-int8; compile-tested
///   only where the CPU has no AMX): C[i, j] = Σ_{k4<16, kk<4} int32(A[i, 4k4 + kk]) ·
///   int32(int8(B[k4, j] >> 8kk)), A uint8 [16, 64], B int32 [16, 16] (the VNNI-packed tile),
///   rows at any stride.
/// Each has a reset (C = 0) and an update (C += …) form for reductions split around the
/// tensorized loops. A target without the feature gets no intrinsic (the `has_*` checks): the
/// schedule then keeps the plain loops, which compute the same values.
#pragma once

#include "kiln/target/target.h"
#include "kiln/te/tensor_intrin.h"

namespace kiln::topi {

/// The u8 × s8 dot product of 4 into `lanes` int32 (16 or 8).
te::TensorIntrin dot_u8s8(int lanes);
/// True when `target` can run dot_u8s8(lanes).
bool has_dot_u8s8(const Target& target, int lanes);

/// The bf16 pair dot product into 16 float32.
te::TensorIntrin dot_bf16();
bool has_dot_bf16(const Target& target);

/// The AND-popcount of `words` uint32 into 16 int32 lanes, for one row of A (rows = 1) or a
/// register block of `rows` rows sharing each loaded row of B.
te::TensorIntrin popcount_and(int words, int rows = 1);
bool has_popcount(const Target& target);

/// One AMX int8 tile product, 16 × 16 int32 += [16, 64] u8 · [64, 16] s8.
te::TensorIntrin amx_dot_u8s8();
bool has_amx_int8(const Target& target);

/// The byte-of-int32 form both sides of dot_u8s8 use: int32(int8(w >> 8·k)).
ir::Expr packed_s8(const ir::Expr& w, const ir::Expr& k);

}  // namespace kiln::topi
