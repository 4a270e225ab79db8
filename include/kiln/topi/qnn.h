/// \file qnn.h
/// \brief Integer-arithmetic operators of quantized models: quantize / dequantize, the
/// requantisation epilogue, and int8 convolution and dense products that end in it.
///
/// Quantized values follow ONNX: real = (q - zero_point) · scale, q of uint8 or int8. A quantized
/// product accumulates acc = Σ (x - x_zero_point) · w + bias in int32 (weights symmetric: their
/// zero point is 0) and requantizes it as ONNX Runtime's CPU kernels (MLAS) do:
///
///   y = clamp(round_half_even(float32(acc) · scale[o]), out_min - y_zp, out_max - y_zp) + y_zp
///
/// with scale[o] = x_scale · w_scale[o] / y_scale computed in float32 (in that order). The
/// saturation bounds [out_min, out_max] are the output type's, narrowed by a fused Relu or Clip.
///
/// Two implementations of each product: a plain int32 compute (any target; the rule-based
/// scheduler schedules it) and, on CPUs with AVX-512 VNNI, the u8 × s8 kernels of quantized.h.
/// VNNI multiplies unsigned data by signed weights, so int8 data is shifted by +128 to uint8,
/// and the zero point with it; the term x_zero_point · Σ w (per output channel, a compile-time
/// constant) is folded into the bias (`compensate_bias`). The NCHWc convolution pads its data
/// with the (shifted) zero point, so padded taps cancel against that term exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/autotune/space.h"
#include "kiln/autotune/template.h"
#include "kiln/ir/expr.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/conv2d.h"
#include "kiln/topi/nn_util.h"

namespace kiln::topi {

namespace tag {
constexpr const char* kQnnRequantize = "elemwise,qnn_requantize";
constexpr const char* kQnnConv2d = "qnn_conv2d";
constexpr const char* kQnnDense = "qnn_dense";
constexpr const char* kQnnDensePacked = "qnn_dense_packed";
}  // namespace tag

/// How an int32 accumulator becomes a quantized output (see the file comment).
struct RequantParams {
  int64_t x_zero_point = 0;  ///< zero point of the data (int8 or uint8 value)
  int64_t y_zero_point = 0;  ///< zero point of the output
  int64_t out_min = 0;       ///< saturation bounds (within out_dtype's range)
  int64_t out_max = 255;
  DataType out_dtype = DataType::UInt(8);
};

/// The requantized value of int32 `acc` (bias already added) with float32 multiplier `scale`:
/// clamp(nearbyint(float32(acc) · scale), out_min - y_zp, out_max - y_zp) + y_zp, as
/// `p.out_dtype`.
ir::Expr requantize_value(ir::Expr acc, ir::Expr scale, const RequantParams& p);

/// q = saturate(round_half_even(x / scale) + zero_point): x float32, scale float32 and
/// zero_point uint8/int8, each broadcast against x (numpy rules); the result has zero_point's
/// type. pattern: broadcast
te::Tensor qnn_quantize(const te::Tensor& x, const te::Tensor& scale, const te::Tensor& zero_point,
                        const std::string& name = "qnn_quantize");
/// x = (float32(q) - float32(zero_point)) · scale, broadcast as for qnn_quantize. pattern:
/// broadcast
te::Tensor qnn_dequantize(const te::Tensor& q, const te::Tensor& scale,
                          const te::Tensor& zero_point, const std::string& name = "qnn_dequantize");

/// requantize_value(acc + bias[c], scale[c]) where c is the index along `axis` of acc (int32);
/// bias int32 [C], scale float32 [C]. pattern: elemwise
te::Tensor qnn_requantize(const te::Tensor& acc, const te::Tensor& bias, const te::Tensor& scale,
                          int64_t axis, const RequantParams& p,
                          const std::string& name = "qnn_requantize");

/// How qnn_add combines two quantized tensors (ONNX Runtime's QLinearAdd, MLAS's AVX2 kernel):
/// y = saturate(nearbyint(fma(a, ratio_a, fma(b, ratio_b, fixed)))) in float32, with ratio_a =
/// s_a / s_y, ratio_b = s_b / s_y and fixed = z_y - (ratio_a · z_a + ratio_b · z_b). Operands
/// and result may be carried shifted (an int8 tensor as uint8 + 128): a_offset / b_offset are
/// subtracted from the operands first, y_offset added to the rounded value (out_min / out_max
/// bound the shifted value), so the float arithmetic is the unshifted one, bit for bit.
struct QnnAddParams {
  float ratio_a = 1, ratio_b = 1, fixed = 0;
  int64_t out_min = 0, out_max = 255;
  DataType out_dtype = DataType::UInt(8);
  int64_t a_offset = 0, b_offset = 0, y_offset = 0;
};

/// The sum of two quantized tensors (uint8 / int8) of one shape, requantized (QnnAddParams).
/// pattern: elemwise
te::Tensor qnn_add(const te::Tensor& a, const te::Tensor& b, const QnnAddParams& p,
                   const std::string& name = "qnn_add");

/// Global average pooling of a quantized NCHW tensor, as ONNX Runtime's
/// QLinearGlobalAveragePool: acc = Σ_hw x - H·W·x_zero_point in int32, requantized with
/// `scale` = s_x / (s_y · H·W) (float32). Data NCHW (output [N, C, 1, 1]) or NCHW<b>c (output
/// [N, C/b, 1, 1, b]). pattern: out_ewise_fusable
te::Tensor qnn_global_avg_pool2d(const te::Tensor& x, float scale, const RequantParams& p,
                                 const std::string& name = "qnn_global_avg_pool2d");

/// Plain integer convolution with the requantisation epilogue: x uint8/int8 NCHW, W int8 OIHW
/// (groups allowed), bias int32 [O], scale float32 [O]; padding reads the data's zero point.
/// pattern: out_ewise_fusable
te::Tensor qnn_conv2d(const te::Tensor& x, const te::Tensor& W, const te::Tensor& bias,
                      const te::Tensor& scale, const Conv2DParams& conv, const RequantParams& p,
                      const std::string& name = "qnn_conv2d");

/// Plain integer dense y = requantize(Σ_k (x[m, k] - x_zp) · W[n, k] + bias[n]): x uint8/int8
/// [M, K], W int8 [N, K]. pattern: out_ewise_fusable
te::Tensor qnn_dense(const te::Tensor& x, const te::Tensor& W, const te::Tensor& bias,
                     const te::Tensor& scale, const RequantParams& p,
                     const std::string& name = "qnn_dense");

/// Geometry of the VNNI convolution: O outputs, a KH x KW kernel, a square stride and padding
/// (top, left, bottom, right).
struct QnnConvNCHWcAttrs {
  int64_t O = 16, KH = 1, KW = 1, stride = 1;
  std::vector<int64_t> padding{0, 0, 0, 0};
};

/// The VNNI convolution (quantized_conv2d_nchwc) with the requantisation epilogue: x uint8/int8
/// NCHW or NCHW[4k]c (int8 shifted to uint8; padded with the shifted zero point), Wp from
/// pack_qnn_conv2d_weight with block b = 16 or 8, bias the compensated bias (compensate_bias),
/// scale float32 [O]; the output [N, ceil(O/b), OH, OW, b] (NCHW16c or NCHW8c) of p.out_dtype.
/// pattern: out_ewise_fusable
te::Tensor qnn_conv2d_nchwc(const te::Tensor& x, const te::Tensor& Wp, const te::Tensor& bias,
                            const te::Tensor& scale, const QnnConvNCHWcAttrs& a,
                            const RequantParams& p, const std::string& name = "qnn_conv2d");

/// Schedules a group whose master stage `main` is a qnn_conv2d_nchwc output and whose output
/// `out` is `main` or an element-wise epilogue of the same shape: the direct convolution keeps
/// tile_ow pixels x tile_ob blocks of channels in registers at each output tile, requantizes
/// them there, and the fused (n, O/(b·tile_ob), oh) loop runs in parallel. Knobs: tile_ow,
/// tile_ob, unroll_kw.
void schedule_qnn_conv2d_nchwc(autotune::Config& cfg, te::Schedule& s, const te::Tensor& main,
                               const te::Tensor& out, const Target& target);

/// The channel block of an int8 tensor with C channels in the NCHWc kernels: 16 when 16
/// divides C, else 8 when 8 does, else 0 (plain NCHW).
int64_t qnn_channel_block(int64_t C);

/// The workload of a qnn_conv2d_nchwc: data [N, C, H, W] of `x_dtype` (uint8 / int8), read in
/// NCHW<in_block>c (0: NCHW), O outputs, a KH x KW kernel, a square stride, padding (top,
/// left, bottom, right).
struct QnnConv2DWorkload {
  int64_t N = 1, C = 16, H = 1, W = 1, O = 16, KH = 1, KW = 1, stride = 1, in_block = 0;
  std::vector<int64_t> padding{0, 0, 0, 0};
  DataType x_dtype = DataType::UInt(8);
  /// "N1 C16 H56 W56 in16 int8 O96 K1x1 s1 p0,0,0,0": the tuning task's workload key.
  std::string str() const;
};

/// The template "qnn_conv2d_nchwc_cpu" (knobs tile_ow, unroll_kw, tile_ob of
/// schedule_qnn_conv2d_nchwc): arguments x, Wp (block qnn_channel_block(O)), bias, scale, y.
autotune::Template qnn_conv2d_nchwc_template(const QnnConv2DWorkload& w, const Target& target);

/// The int8 depthwise convolution (multiplier 1, dilation 1) in NCHW[b]c, the layout of the
/// VNNI convolutions around it: x uint8/int8 [N, C/b, H, W, b] (padded with its zero point),
/// Wd int32 [C/b, 1, KH, KW, 1, b] from pack_qnn_depthwise_weight, bias the compensated bias
/// (compensate_bias with shift 0: the data is not shifted), scale float32 [C]. acc = Σ int32(x)
/// · w in int32, vectorized over the channel block (no VNNI: one tap per channel); output
/// [N, C/b, OH, OW, b] of p.out_dtype. Its int32 stage is a depthwise_conv2d_nchwc
/// (depthwise_conv2d.h) in all but type. pattern: out_ewise_fusable
te::Tensor qnn_depthwise_conv2d_nchwc(const te::Tensor& x, const te::Tensor& Wd,
                                      const te::Tensor& bias, const te::Tensor& scale,
                                      const Conv2DParams& conv, const RequantParams& p,
                                      const std::string& name = "qnn_depthwise_conv2d");

/// Schedules a group whose master `main` is a qnn_depthwise_conv2d_nchwc output and whose
/// output `out` is `main` or an element-wise epilogue of its shape, with depthwise_conv2d.h's
/// blocked template (knobs tile_ow, tile_oh, unroll_kw, pad_at): register tiles of tile_ow
/// output vectors, requantized where they are computed.
void schedule_qnn_depthwise_conv2d_nchwc(autotune::Config& cfg, te::Schedule& s,
                                         const te::Tensor& main, const te::Tensor& out,
                                         const Target& target);

/// The VNNI dense (quantized_dense_packed over weights packed with panel width nb) with the
/// requantisation epilogue: x uint8/int8 [M, K], Wp int32 [ceil(N/nb), ceil(K/4), nb], bias the
/// compensated bias, scale float32 [N]. pattern: out_ewise_fusable
te::Tensor qnn_dense_packed(const te::Tensor& x, const te::Tensor& Wp, const te::Tensor& bias,
                            const te::Tensor& scale, int64_t N, const RequantParams& p,
                            const std::string& name = "qnn_dense");

/// Schedules a group whose master `main` is a qnn_dense_packed output (dense.h's packed
/// template, tile_x must equal Wp's panel width).
void schedule_qnn_dense_packed(autotune::Config& cfg, te::Schedule& s, const te::Tensor& main,
                               const te::Tensor& out, const Target& target);

// --- compile-time weight preparation (host code)

/// W int8 OIHW → int32 [ceil(O/b), ceil(C/4), KH, KW, b] for the output block b = 16 or 8
/// (pack_quantized_conv2d_weight's layout: 4 input channels' bytes per int32, zero past O or C).
runtime::NDArray pack_qnn_conv2d_weight(const runtime::NDArray& W, int64_t block = 16);
/// The template "qnn_depthwise_conv2d_nchwc_cpu" (depthwise_conv2d.h's schedule knobs
/// tile_ow, tile_oh, unroll_kw, pad_at) for a depthwise workload (groups = C = O) of `x_dtype`
/// data in blocks of qnn_channel_block(C): arguments x, Wd, bias, scale, y.
autotune::Template qnn_depthwise_conv2d_nchwc_template(const Conv2DWorkload& wl, DataType x_dtype,
                                                       const Target& target);

/// True when a KH x KW depthwise convolution of 8-bit values accumulates exactly in float32
/// (every partial sum an integer below 2^24: KH · KW <= 514).
bool depthwise_float_exact(int64_t KH, int64_t KW);
/// W int8 [C, 1, KH, KW] → [C/b, 1, KH, KW, 1, b] (depthwise_conv2d.h's packed layout), as
/// float32 when depthwise_float_exact(KH, KW) (qnn_depthwise_conv2d_nchwc then multiplies and
/// accumulates with FMAs, exactly), else int32; a user error when b does not divide C.
runtime::NDArray pack_qnn_depthwise_weight(const runtime::NDArray& W, int64_t block);
/// W int8 [N, K] → int32 [ceil(N/nb), ceil(K/4), nb] (pack_quantized_dense_weight's layout).
runtime::NDArray pack_qnn_dense_weight(const runtime::NDArray& W, int64_t nb);
/// bias[o] - (x_zero_point + shift) · Σ_k W[o, k], in int32 (wrapping): the bias of a VNNI
/// product whose data is shifted by `shift` (128 for int8 data, else 0). W int8 with O rows
/// (any trailing shape), bias int32 [O].
runtime::NDArray compensate_bias(const runtime::NDArray& bias, const runtime::NDArray& W,
                                 int64_t x_zero_point, int64_t shift);

}  // namespace kiln::topi
