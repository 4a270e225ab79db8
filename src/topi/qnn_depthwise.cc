// The int8 depthwise convolution of quantized models (qnn.h) in the blocked layout NCHW[b]c
// that the VNNI convolutions around it read and write (b = 16, or 8 for 8k channels), so a
// MobileNet block runs expand → depthwise → project without a layout transform. VNNI does not
// help here (one tap per channel), so the product is a plain multiply-add vectorized over the b
// channels of a block: acc = Σ x · w, the data read as it is (uint8 or int8, no shift) and
// padded with its own zero point, so the compensation x_zp · Σ w is a compile-time constant in
// the bias (compensate_bias with shift 0) and padded taps cancel exactly. The taps are float32
// FMAs where that is exact (|x · w| <= 255 · 128, so up to 514 taps every partial sum is an
// integer below 2^24: one FMA per tap instead of an int32 multiply and add, ~10% faster on
// MobileNet-v2's layers), int32 multiply-adds beyond; the sum is converted back to int32
// (exactly) before the bias and the requantisation. The int32 stage is tagged as
// depthwise_conv2d.h's blocked convolution and has its shape (pad stage, kh / kw reduction, channel
// block innermost), so that template's schedule (register tiles of tile_ow output vectors, kw
// unrolled, the padding inlined and partitioned away from the interior tiles) schedules it
// unchanged; the requantisation (requantize_value, bit-exact with ONNX Runtime) is an element-wise
// stage after it that the schedule computes on each register tile, with any fused epilogue.
#include <algorithm>

#include "conv2d_common.h"
#include "kiln/topi/depthwise_conv2d.h"
#include "kiln/topi/qnn.h"
#include "qnn_util.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using detail::ci;

namespace {

/// The tag of depthwise_conv2d_nchwc's int32 stage (depthwise_conv2d.cc's main stage).
constexpr const char* kDepthwiseNCHWc = "depthwise_conv2d_nchwc";

}  // namespace

bool depthwise_float_exact(int64_t KH, int64_t KW) {
  // |x · w| <= 255 · 128 per tap; every partial sum of KH · KW taps is an integer below 2^24.
  return KH * KW * 255 * 128 < (int64_t{1} << 24);
}

te::Tensor qnn_depthwise_conv2d_nchwc(const te::Tensor& x, const te::Tensor& Wd,
                                      const te::Tensor& bias, const te::Tensor& scale,
                                      const Conv2DParams& conv, const RequantParams& p,
                                      const std::string& name) {
  const char* op = "qnn_depthwise_conv2d_nchwc";
  const DataType xt = x->dtype;
  KILN_USER_CHECK(xt == DataType::UInt(8) || xt == DataType::Int(8))
      << op << ": data must be uint8 or int8, got " << xt;
  KILN_USER_CHECK(Wd->dtype == DataType::Int(32) || Wd->dtype == DataType::Float(32))
      << op << ": the packed weight must be int32 or float32 (pack_qnn_depthwise_weight), got "
      << Wd->dtype;
  const int64_t lo = xt == DataType::UInt(8) ? 0 : -128, hi = lo + 255;
  KILN_USER_CHECK(p.x_zero_point >= lo && p.x_zero_point <= hi)
      << op << ": data zero point " << p.x_zero_point << " is outside " << xt << "'s range";
  KILN_USER_CHECK(conv.dilation_h == 1 && conv.dilation_w == 1)
      << op << ": dilation must be 1, got (" << conv.dilation_h << ", " << conv.dilation_w << ")";
  const std::vector<int64_t> xs = detail::const_shape(x, op), ws = detail::const_shape(Wd, op);
  // Shapes as the float blocked depthwise convolution checks them (multiplier 1).
  const std::vector<int64_t> os = depthwise_conv2d_nchwc_shape(xs, ws, conv);
  const int64_t bn = xs[4], C = xs[1] * bn;
  detail::check_requant(p, op);
  detail::check_channel_vectors(bias, scale, C, op);
  // Padded with the zero point (pad_spatial's tag: the schedule inlines it and partitions the
  // bounds checks to the border tiles).
  const Padding2D& pd = conv.padding;
  const int64_t H = xs[2], W = xs[3];
  te::Tensor pad = x;
  if (!pd.is_zero()) {
    pad = te::compute(
        {ci(xs[0]), ci(xs[1]), ci(H + pd.top + pd.bottom), ci(W + pd.left + pd.right), ci(bn)},
        [&](Var n, Var cb, Var h, Var w, Var c) {
          Expr hh = h - ci(pd.top), ww = w - ci(pd.left);
          Expr in = hh >= ci(0) && hh < ci(H) && ww >= ci(0) && ww < ci(W);
          return if_then_else(likely(in), x(n, cb, hh, ww, c), make_const(xt, p.x_zero_point));
        },
        name + "_pad", detail::pad_tag());
  }
  te::IterVar kh = te::reduce_axis({0, ci(ws[2])}, "kh");
  te::IterVar kw = te::reduce_axis({0, ci(ws[3])}, "kw");
  const int64_t sh = conv.stride_h, sw = conv.stride_w;
  te::Tensor acc = te::compute(
      detail::to_exprs(os),
      [&](Var n, Var cb, Var y, Var xx, Var c) {
        Expr d = pad(n, cb, y * ci(sh) + kh->var, xx * ci(sw) + kw->var, c);
        return te::sum(cast(Wd->dtype, d) * Wd(cb, ci(0), kh, kw, ci(0), c), {kh, kw});
      },
      name + "_acc", kDepthwiseNCHWc);
  return te::compute(
      acc->shape,
      [&](Var n, Var cb, Var y, Var xx, Var c) {
        Expr ch = cb * ci(bn) + c;
        Expr a = acc(n, cb, y, xx, c);
        if (a.dtype() != DataType::Int(32)) a = cast(DataType::Int(32), a);  // exact: an integer
        return requantize_value(a + bias(ch), scale(ch), p);
      },
      name, tag::kQnnRequantize);
}

void schedule_qnn_depthwise_conv2d_nchwc(autotune::Config& cfg, te::Schedule& s,
                                         const te::Tensor& main, const te::Tensor& out,
                                         const Target& target) {
  KILN_USER_CHECK(main->op->tag == tag::kQnnRequantize &&
                  find_tagged({main}, kDepthwiseNCHWc).defined())
      << "schedule_qnn_depthwise_conv2d_nchwc: stage " << main.name()
      << " is not a qnn_depthwise_conv2d_nchwc";
  // The requantisation and the epilogue after it are injective: the template inlines them
  // into the output stage, computed on each register tile.
  schedule_depthwise_conv2d_nchwc(cfg, s, out, target);
}

autotune::Template qnn_depthwise_conv2d_nchwc_template(const Conv2DWorkload& wl, DataType x_dtype,
                                                       const Target& target) {
  const int64_t bn = qnn_channel_block(wl.in_channel);
  KILN_USER_CHECK(bn > 0 && wl.params.groups == wl.in_channel && wl.out_channel == wl.in_channel &&
                  detail::is_q8(x_dtype))
      << "qnn_depthwise_conv2d_nchwc_template: unsupported workload " << wl.str() << " (" << x_dtype
      << "; needs uint8/int8 data, multiplier 1 and 8k channels)";
  return autotune::Template{
      "qnn_depthwise_conv2d_nchwc_cpu", "1", [wl, x_dtype, target, bn](autotune::Config& cfg) {
        const int64_t C = wl.in_channel;
        te::Tensor x = te::placeholder(
            {ci(wl.batch), ci(C / bn), ci(wl.height), ci(wl.width), ci(bn)}, x_dtype, "x");
        te::Tensor Wd =
            te::placeholder({ci(C / bn), ci(1), ci(wl.kernel_h), ci(wl.kernel_w), ci(1), ci(bn)},
                            depthwise_float_exact(wl.kernel_h, wl.kernel_w) ? DataType::Float(32)
                                                                            : DataType::Int(32),
                            "Wd");
        te::Tensor bias = te::placeholder({ci(C)}, DataType::Int(32), "bias");
        te::Tensor scale = te::placeholder({ci(C)}, DataType::Float(32), "scale");
        RequantParams p;
        p.out_dtype = x_dtype;
        p.out_min = x_dtype == DataType::UInt(8) ? 0 : -128;
        p.out_max = p.out_min + 255;
        te::Tensor y = qnn_depthwise_conv2d_nchwc(x, Wd, bias, scale, wl.params, p);
        te::Schedule s = te::create_schedule({y});
        schedule_qnn_depthwise_conv2d_nchwc(cfg, s, y, y, target);
        return autotune::Instance{
            s, {x, Wd, bias, scale, y}, cfg, {false, true, true, true, false}};
      }};
}

runtime::NDArray pack_qnn_depthwise_weight(const runtime::NDArray& W, int64_t block) {
  KILN_USER_CHECK(W.dtype() == DataType::Int(8) && W.ndim() == 4 && W.shape()[1] == 1)
      << "pack_qnn_depthwise_weight: weight must be int8 [C, 1, KH, KW], got " << W.dtype() << " "
      << detail::shape_text(W.shape());
  const int64_t C = W.shape()[0], KH = W.shape()[2], KW = W.shape()[3];
  KILN_USER_CHECK(block > 0 && C % block == 0) << "pack_qnn_depthwise_weight: block " << block
                                               << " does not divide the " << C << " channels";
  const bool f32 = depthwise_float_exact(KH, KW);
  runtime::NDArray r = runtime::NDArray::empty({C / block, 1, KH, KW, 1, block},
                                               f32 ? DataType::Float(32) : DataType::Int(32));
  const int8_t* w = W.data_as<int8_t>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k = 0; k < KH * KW; ++k) {
      const int64_t at = ((c / block) * KH * KW + k) * block + c % block;
      if (f32) {
        r.data_as<float>()[at] = static_cast<float>(w[c * KH * KW + k]);
      } else {
        r.data_as<int32_t>()[at] = w[c * KH * KW + k];
      }
    }
  return r;
}

}  // namespace kiln::topi
