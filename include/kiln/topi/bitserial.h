/// \file bitserial.h
/// \brief Bit-serial dense for ultra low precision (TVM paper section 6.2): 1-bit weights ×
/// 1- or 2-bit unsigned activations, with the AND-popcount micro-kernel of x86_intrin.h
/// (popcount_and, AVX-512 VPOPCNTDQ) as a declared tensor intrinsic.
///
/// Activations a (uint8 [M, K], values < 2^bits) are packed at run time into bit planes
/// Ap[b, m, w] (uint32: bit j of the word is bit b of a[m, 32w + j]); weights W (uint8 [N, K],
/// values 0 or 1) once into Wp[w, n] (uint32: bit j is W[n, 32w + j]). Then
///   P[b, m, n] = Σ_w popcount(Ap[b, m, w] & Wp[w, n]),   y[m, n] = Σ_b P[b, m, n] << b
/// equals Σ_k a[m, k] · W[n, k] (unipolar). Pattern: out_ewise_fusable.
///
/// Bit-serial conv2d is the same product without im2col: NHWC activations packed along the
/// channels (with the spatial padding, as zero words), HWIO weights packed along their input
/// channels, and the plane sums reduced over (kh, kw, channel words).
#pragma once

#include <string>

#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/te/tensor_intrin.h"

namespace kiln::topi {

namespace tag {
constexpr const char* kBitpack = "bitpack";
constexpr const char* kBitserialPlanes = "bitserial_planes";
constexpr const char* kBitserialDense = "bitserial_dense";
constexpr const char* kBitserialConv2D = "bitserial_conv2d_nhwc";
}  // namespace tag

/// Ap[b, m, w] (uint32) = Σ_j bit b of a[m, 32w + j] << j (0 past K): a uint8 [M, K] ->
/// [bits, M, ceil(K/32)]. bits is 1 or 2. pattern: injective
te::Tensor bitpack_activations(const te::Tensor& a, int bits,
                               const std::string& name = "bitpack_a");

/// Wp[w, n] (uint32) = Σ_j (W[n, 32w + j] & 1) << j (0 past K): W uint8 [N, K] ->
/// [ceil(K/32), N]. pattern: injective
te::Tensor bitpack_weights(const te::Tensor& W, const std::string& name = "bitpack_w");

/// y[m, n] (int32) = Σ_b (Σ_w popcount(Ap[b, m, w] & Wp[w, n])) << b. The bit-plane sums are
/// the stage y reads (tag bitserial_planes). pattern: out_ewise_fusable
te::Tensor bitserial_dense(const te::Tensor& Ap, const te::Tensor& Wp,
                           const std::string& name = "bitserial_dense");

/// A schedule for y = bitserial_dense(...) (and the activation packing stage when `y` reads
/// one): rows parallel, 16 output columns per register tile, the bit-plane sums of a tile
/// computed at it. With `tensorize` and a target with avx512vpopcntdq, the tile's 16 columns ×
/// a few words become popcount_and; otherwise (the baseline) the same loops stay plain, the
/// words innermost. N must be a multiple of 16.
te::Schedule schedule_bitserial_dense(const te::Tensor& y, const Target& target, bool tensorize);

/// Dp[b, n, h, w, cw] (uint32) = Σ_j bit b of data[n, h - pad_h, w - pad_w, 32cw + j] << j:
/// NHWC uint8 data (values < 2^bits) -> [bits, N, H + 2·pad_h, W + 2·pad_w, ceil(C/32)], 0 in
/// the padding and past C. bits is 1 or 2. Two stages: the words with the planes innermost
/// ([N, H, W, CW, bits], `name`_words, what bitpack32 computes per 32 channels), then their
/// padded copy with the planes outermost. pattern: injective
te::Tensor bitpack_nhwc(const te::Tensor& data, int bits, int64_t pad_h, int64_t pad_w,
                        const std::string& name = "bitpack_nhwc");

/// The packing of 32 uint8 values into one word per bit plane, as a tensor intrinsic:
/// C[p] (uint32, p < bits) = Σ_j ((A[j] >> p) & 1) << j, A uint8 [32] contiguous. Lowered to a
/// 32-lane test of bit p and the lane mask as the word (x86: vptestmb + kmovd with AVX-512BW);
/// plain LLVM IR, so any target can run it.
te::TensorIntrin bitpack32(int bits);

/// Schedules bitpack_nhwc's stages in `s` (a schedule that computes `packed`): the words of each
/// input row in parallel, tensorized with bitpack32 when `tensorize` and the channels fill whole
/// words (else the 32 positions unrolled), then the padded copy row by row.
void schedule_bitpack_nhwc(te::Schedule& s, const te::Tensor& packed, bool tensorize);

/// Wp[kh, kw, cw, o] (uint32) = Σ_j (W[kh, kw, 32cw + j, o] & 1) << j: HWIO uint8 weights of 0
/// and 1 -> [KH, KW, ceil(C/32), O]. pattern: injective
te::Tensor bitpack_hwio(const te::Tensor& W, const std::string& name = "bitpack_hwio");

/// y[n, oh, ow, o] (int32) = Σ_b (Σ_{kh, kw, cw} popcount(Dp[b, n, oh·sh + kh, ow·sw + kw, cw]
/// & Wp[kh, kw, cw, o])) << b, from bitpack_nhwc's padded planes and bitpack_hwio's words:
/// Σ data · W over the window (unipolar). The plane sums are the stage y reads (tag
/// bitserial_planes). pattern: out_ewise_fusable
te::Tensor bitserial_conv2d_nhwc(const te::Tensor& Dp, const te::Tensor& Wp, int64_t stride_h,
                                 int64_t stride_w,
                                 const std::string& name = "bitserial_conv2d_nhwc");

/// A schedule for y = bitserial_conv2d_nhwc(...) (and bitpack_nhwc's stages when `y` reads them;
/// with `tensorize` and channels a multiple of 32, the words are bitpack32):
/// output rows parallel; a register tile of up to 8 output pixels of a row × 16 output
/// channels whose plane sums are computed at it, reduced over (kh, kw, channel-word steps).
/// With `tensorize` and a target with avx512vpopcntdq, each step of the tile is
/// popcount_and(words, pixels) (each weight row loaded once for all pixels); otherwise (the
/// baseline) the same loops stay plain. O must be a multiple of 16.
te::Schedule schedule_bitserial_conv2d_nhwc(const te::Tensor& y, const Target& target,
                                            bool tensorize);

}  // namespace kiln::topi
