/// \file quantized.h
/// \brief int8 operators: u8 data × s8 weights accumulated in int32, with an AVX512-VNNI path.
///
/// Pattern kind: `kOutEWiseFusable` (requantize / bias / relu fuse after the int32 output).
///
/// The 4-element u8 × s8 dot product is AVX512-VNNI's vpdpbusd, reached by tensorize with the
/// declared intrinsic topi::dot_u8s8 (x86_intrin.h, te/tensor_intrin.h): the compute rules
/// read each weight byte as int32(int8(w >> 8·kk)) from int32 words packing 4 reduction
/// elements, and the data bytes directly (reduction axes k4 and kk), which is the intrinsic's
/// declared compute; a target without VNNI runs the same loops vectorized (no tensorize).
/// * data is read as is, or padded with zeros to a multiple of 4 bytes along K by a small
///   run-time stage (tag "quantized_pack") when K % 4 != 0;
/// * weights are packed once at compile time: Wp[no, k4, ni] = bytes W[no·nb + ni, 4k4 ..]
///   (pack_quantized_dense_weight), so one k4 step of the micro-kernel loads nb int32 = the
///   4 × nb weights it needs, contiguous.
///
/// quantized_dense's CPU template is dense.h's register-blocked kernel (knobs tile_x = nb,
/// tile_y, tile_k over K/4, unroll) with one vpdpbusd per 16 lanes in place of the FMA.
///
/// quantized_conv2d_nchwc is a direct convolution: data u8 NCHW, weights s8 OIHW, output int32
/// in NCHW16c ([N, O/16, OH, OW, 16]); the data is padded and blocked 4 channels innermost at
/// run time (uint8 [N, C/4, H + 2p, W + 2p, 4]), the weights at compile time into
/// [O/16, C/4, KH, KW, 16] int32. Its schedule keeps a row of tile_ow output pixels × 16
/// output channels in registers (one vpdpbusd per pixel per (c4, kh, kw)), the fused
/// (n, O/16, oh) loop parallel. Knobs: tile_ow (1, 2, 4, 8; default 8 or the largest
/// <= OW), unroll_kw.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/autotune/template.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

namespace tag {
constexpr const char* kQuantizedPack = "quantized_pack";
constexpr const char* kQuantizedDense = "quantized_dense";
constexpr const char* kQuantizedDensePacked = "quantized_dense_packed";
constexpr const char* kQuantizedConv2d = "quantized_conv2d_nchwc";
}  // namespace tag

/// y[m, n] = Σ_k int32(x[m, k]) · int32(W[n, k]): x uint8 [M, K], W int8 [N, K], y int32
/// [M, N] (the plain rule, no VNNI). pattern: out_ewise_fusable
te::Tensor quantized_dense(const te::Tensor& x, const te::Tensor& W,
                           const std::string& name = "quantized_dense");

/// Wp[no, k4, ni] (int32) = the 4 bytes W[no·nb + ni, 4k4 + i], i = 0..3 (little-endian, zero
/// past N or K): W int8 [N, K] -> Wp [ceil(N/nb), ceil(K/4), nb]. pattern: injective
te::Tensor pack_quantized_dense_weight(const te::Tensor& W, int64_t nb,
                                       const std::string& name = "quantized_dense_pack");

/// y = x·Wᵀ in int32 over packed weights; N outputs (N <= panels · nb). pattern:
/// out_ewise_fusable
te::Tensor quantized_dense_packed(const te::Tensor& x, const te::Tensor& Wp, int64_t N,
                                  const std::string& name = "quantized_dense");

struct QuantizedDenseWorkload {
  int64_t M = 1, N = 1, K = 1;
};

/// The template "quantized_dense_cpu": arguments x (uint8 [M, K]), Wp (int32), y (int32).
autotune::Template quantized_dense_template(const QuantizedDenseWorkload& w, const Target& target);

/// Attributes of quantized_conv2d_nchwc (square stride and symmetric padding).
struct QConv2DAttrs {
  int64_t stride = 1;
  int64_t padding = 0;
};

/// Wp[ob, c4, kh, kw, oi] (int32) = the 4 bytes W[ob·16 + oi, 4c4 + i, kh, kw] (zero past O or
/// C): W int8 OIHW -> [ceil(O/16), ceil(C/4), KH, KW, 16]. pattern: injective
te::Tensor pack_quantized_conv2d_weight(const te::Tensor& W,
                                        const std::string& name = "quantized_conv2d_pack");

/// out[n, ob, oh, ow, oi] = Σ_{c, kh, kw} int32(x[n, c, oh·s - p + kh, ow·s - p + kw]) ·
/// int32(W[ob·16 + oi, c, kh, kw]) (zero outside x): x uint8 NCHW, Wp from
/// pack_quantized_conv2d_weight, O output channels; out int32 [N, ceil(O/16), OH, OW, 16]
/// (NCHW16c; channels past O are 0). pattern: out_ewise_fusable
te::Tensor quantized_conv2d_nchwc(const te::Tensor& x, const te::Tensor& Wp, int64_t O, int64_t KH,
                                  int64_t KW, const QConv2DAttrs& attrs,
                                  const std::string& name = "quantized_conv2d");

struct QuantizedConv2DWorkload {
  int64_t N = 1, C = 4, H = 1, W = 1, O = 16, KH = 1, KW = 1;
  QConv2DAttrs attrs;
};

/// Maps the vector loop of a quantized_dense_packed or quantized_conv2d_nchwc stage onto VNNI:
/// call once its loops are ordered and its 16 (or 8) output lanes vectorized. With
/// x86_intrin.h's dot_u8s8 on the target and whole vectors, the lanes and the 4-byte reduction
/// loop kk become one tensorized vpdpbusd; otherwise kk is moved outside the lanes and
/// unrolled. `acc` is the tensor whose stage holds the reduction (or the cache_write copy of
/// it). schedule_dense_packed calls it for quantized_dense_packed; a convolution schedule calls
/// it itself.
void schedule_quantized_lanes(te::Schedule& s, const te::Tensor& acc, const Target& target);

/// The template "quantized_conv2d_nchwc_cpu": arguments x (uint8 NCHW), Wp (int32), out.
autotune::Template quantized_conv2d_template(const QuantizedConv2DWorkload& w,
                                             const Target& target);

}  // namespace kiln::topi
