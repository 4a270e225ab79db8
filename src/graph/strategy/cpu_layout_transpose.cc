// The CPU layout hooks of conv2d_transpose (strategy.h; run by alter_op_layout), by the
// sub-pixel decomposition of topi/subpixel.h where the stride is > 1 and the dilation 1:
//   groups 1   → the stride² phases as the channels of ONE conv2d_nchwc, or one conv2d_nchwc
//                per phase (no zero taps, no extra row), then subpixel_interleave
//   depthwise  → one depthwise_conv2d_nchwc per phase, then subpixel_interleave
// else (groups 1) dilate2d, then conv2d_nchwc with the kernel flipped and its channels swapped.
// Weights are packed here, in C++, so the pass compiles nothing.
#include <algorithm>

#include "../layout_util.h"
#include "../op_attrs.h"
#include "arm.h"
#include "builtin.h"
#include "kiln/graph/tuning.h"
#include "kiln/support/error.h"
#include "kiln/topi/depthwise_conv2d.h"
#include "kiln/topi/subpixel.h"

namespace kiln::graph {

namespace {

using detail::blocked_layout;
using detail::blocked_type;
using runtime::NDArray;
using Ints = std::vector<int64_t>;

/// The convolution over x [N, C, H, W] that computes phases planned as `ay`, `ax` of a
/// transposed convolution: `out_channels` outputs, `groups` C when depthwise.
topi::Conv2DWorkload phase_workload(const TensorType& xt, int64_t out_channels, int64_t groups,
                                    const topi::SubpixelAxis& ay, const topi::SubpixelAxis& ax) {
  topi::Conv2DWorkload wl;
  wl.batch = xt.shape[0];
  wl.in_channel = xt.shape[1];
  wl.height = xt.shape[2];
  wl.width = xt.shape[3];
  wl.out_channel = out_channels;
  wl.kernel_h = ay.taps;
  wl.kernel_w = ax.taps;
  wl.params.padding = {ay.pad_lo, ax.pad_lo, ay.pad_hi, ax.pad_hi};
  wl.params.groups = groups;
  return wl;
}

/// The stacked kernel of a sub-pixel transposed convolution (topi/subpixel.h):
/// W'[(ry·sw + rx)·O + o, c, ty, tx] = w[c, o, ry + sh·(Th−1−ty), rx + sw·(Tw−1−tx)] (zero
/// past the kernel), with `rows` >= sh·sw·O output channels (zero past sh·sw·O).
NDArray stack_subpixel_weight(const NDArray& w, int64_t sh, int64_t sw, int64_t th, int64_t tw,
                              int64_t rows) {
  const int64_t C = w.shape()[0], O = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  NDArray r = NDArray::empty({rows, C, th, tw}, w.dtype());
  const float* src = w.data_as<float>();
  float* dst = r.data_as<float>();
  std::fill(dst, dst + r.numel(), 0.0f);
  for (int64_t ry = 0; ry < sh; ++ry)
    for (int64_t rx = 0; rx < sw; ++rx)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t ty = 0; ty < th; ++ty)
            for (int64_t tx = 0; tx < tw; ++tx) {
              const int64_t ky = ry + sh * (th - 1 - ty), kx = rx + sw * (tw - 1 - tx);
              if (ky >= KH || kx >= KW) continue;
              dst[((((ry * sw + rx) * O + o) * C + c) * th + ty) * tw + tx] =
                  src[((c * O + o) * KH + ky) * KW + kx];
            }
  return r;
}

/// Sub-pixel decomposition with one conv2d_nchwc per phase (topi::plan_subpixel_phase): no
/// extra row and column (the stacked convolution's (H+1)·(W+1) positions against H·W: 56%
/// more work on DCGAN's 4x4 layer) and no zero taps, then a subpixel_interleave of the
/// sh·sw phases into NCHW<oc_bn>c. `depthwise` (groups = C, weight [C, 1, KH, KW]): one
/// depthwise_conv2d_nchwc per phase (ic_bn = oc_bn). Every phase must have taps and outputs,
/// and the same blocks `ic_bn`, `oc_bn` (a divisor of the output channels); else false, and
/// nothing is added.
bool subpixel_phases(LayoutRewriter& rw, int64_t sh, int64_t sw, int64_t ic_bn, int64_t oc_bn,
                     bool depthwise = false) {
  const OpCall& call = rw.call();
  const Node& n = call.node();
  const TensorType& xt = call.input_type(0);
  const TensorType& ot = n.outputs[0];
  const NDArray& w = *call.constant(1);
  const int64_t C = w.shape()[0], O = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  const int64_t out_channels = depthwise ? C : O;
  topi::Conv2DParams t = detail::conv_params(n.attrs, "conv2d_transpose");
  std::vector<topi::SubpixelAxis> py, px;
  try {
    for (int64_t r = 0; r < sh; ++r)
      py.push_back(topi::plan_subpixel_phase(xt.shape[2], KH, sh, t.padding.top, ot.shape[2], r));
    for (int64_t r = 0; r < sw; ++r)
      px.push_back(topi::plan_subpixel_phase(xt.shape[3], KW, sw, t.padding.left, ot.shape[3], r));
  } catch (const Error&) {
    return false;
  }
  for (const std::vector<topi::SubpixelAxis>* axis : {&py, &px})
    for (const topi::SubpixelAxis& a : *axis)
      if (a.taps == 0 || a.conv_extent == 0) return false;
  auto workload = [&](const topi::SubpixelAxis& ay, const topi::SubpixelAxis& ax) {
    return phase_workload(xt, out_channels, depthwise ? C : 1, ay, ax);
  };
  for (const topi::SubpixelAxis& ay : py)
    for (const topi::SubpixelAxis& ax : px) {
      try {
        topi::Conv2DWorkload wl = workload(ay, ax);
        if (depthwise) {
          autotune::Config cfg = rw.config([&] { return depthwise_conv2d_task(wl, call.target); });
          const int64_t bn = topi::define_depthwise_nchwc_knobs(cfg, wl, call.target,
                                                                topi::ChannelBlocks::kDefault);
          if (bn != ic_bn || bn != oc_bn) return false;
          continue;
        }
        autotune::Config cfg = rw.config([&] { return conv2d_task(wl, call.target); });
        topi::Conv2DNCHWcLayout l =
            topi::define_conv2d_nchwc_knobs(cfg, wl, call.target, topi::ChannelBlocks::kDefault);
        if (l.ic_bn != ic_bn || l.oc_bn != oc_bn) return false;
      } catch (const Error&) {
        return false;
      }
    }
  const std::string wname = call.graph.node(n.inputs[1].node).name;
  Entry data = rw.input(0, blocked_layout(ic_bn));
  Node r;
  for (int64_t ry = 0; ry < sh; ++ry)
    for (int64_t rx = 0; rx < sw; ++rx) {
      const topi::SubpixelAxis &ay = py[ry], &ax = px[rx];
      // Wp[o, c, ty, tx] = w[c, o, ry + sh·(Ty−1−ty), rx + sw·(Tx−1−tx)]; a depthwise
      // kernel's [1, C, Ty, Tx] is its [C, 1, Ty, Tx].
      NDArray wp = NDArray::empty(depthwise ? std::vector<int64_t>{C, 1, ay.taps, ax.taps}
                                            : std::vector<int64_t>{O, C, ay.taps, ax.taps},
                                  w.dtype());
      const float* src = w.data_as<float>();
      float* dst = wp.data_as<float>();
      for (int64_t o = 0; o < O; ++o)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t ty = 0; ty < ay.taps; ++ty)
            for (int64_t tx = 0; tx < ax.taps; ++tx)
              dst[((o * C + c) * ay.taps + ty) * ax.taps + tx] =
                  src[((c * O + o) * KH + ry + sh * (ay.taps - 1 - ty)) * KW + rx +
                      sw * (ax.taps - 1 - tx)];
      const std::string phase = "_phase" + std::to_string(ry) + "_" + std::to_string(rx);
      Node conv;
      conv.op = depthwise ? "depthwise_conv2d_nchwc" : "conv2d_nchwc";
      conv.name = n.name + phase;
      conv.attrs.set("strides", Ints{1, 1});
      conv.attrs.set("padding", Ints{ay.pad_lo, ax.pad_lo, ay.pad_hi, ax.pad_hi});
      conv.attrs.set("dilation", Ints{1, 1});
      conv.inputs = {data, rw.add_constant(wname + phase + "_packed",
                                           depthwise ? pack_depthwise_weight(wp, oc_bn)
                                                     : pack_conv_weight(wp, ic_bn, oc_bn))};
      conv.outputs = {blocked_type(
          {{xt.shape[0], out_channels, ay.conv_extent, ax.conv_extent}, xt.dtype}, oc_bn)};
      const topi::Conv2DWorkload wl = workload(ay, ax);
      const Target target = call.target;
      conv.impl = depthwise ? ImplChoice{"depthwise_conv2d_nchwc.cpu",
                                         [wl, target] { return depthwise_conv2d_task(wl, target); }}
                            : conv2d_nchwc_choice(wl, target);
      r.inputs.push_back(rw.add(std::move(conv), blocked_layout(oc_bn)));
    }
  Ints offsets;
  for (const topi::SubpixelAxis& a : py) offsets.push_back(a.offset);
  for (const topi::SubpixelAxis& a : px) offsets.push_back(a.offset);
  r.op = "subpixel_interleave";
  r.name = n.name;
  r.attrs.set("strides", Ints{sh, sw});
  r.attrs.set("shift", Ints{t.padding.top, t.padding.left});
  r.attrs.set("offset", Ints{0, 0});
  r.attrs.set("phase_offsets", offsets);
  r.attrs.set("out_size", Ints{ot.shape[2], ot.shape[3]});
  r.attrs.set("channels", out_channels);
  r.attrs.set("out_block", oc_bn);
  r.outputs = {blocked_type(ot, oc_bn)};
  rw.emit(std::move(r), blocked_layout(oc_bn));
  return true;
}

/// The preconditions both conv2d_transpose hooks share: x is a 4-D float32 tensor and the weight
/// a constant 4-D float32 [C, O, KH, KW] with x's C channels. The weight, or null (the hook then
/// leaves the node to the next implementation).
const NDArray* transpose_weight(const OpCall& call) {
  const TensorType& xt = call.input_type(0);
  if (xt.dtype != DataType::Float(32) || xt.shape.size() != 4 || !call.is_f32_constant(1))
    return nullptr;
  const NDArray* w = call.constant(1);
  if (w->ndim() != 4 || w->shape()[0] != xt.shape[1]) return nullptr;
  return w;
}

}  // namespace

/// conv2d_transpose (groups 1, dilation 1, a stride > 1) by sub-pixel decomposition
/// (topi/subpixel.h): ONE conv2d_nchwc over x computing the s² phases as s²·O output channels
/// (T = ceil(K/s) taps each, so only the useful multiply-adds), then a subpixel_interleave
/// that scatters them into the output, NCHW<b>c when a block b >= 8 divides O (the epilogue
/// and the next layer stay blocked), else NCHW. When no block of the phases divides O (a few
/// output channels, e.g. an image's 3), the phases are padded with zero channels to a whole
/// vector block.
bool alter_conv2d_transpose_subpixel(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  const Node& n = call.node();
  const TensorType& xt = call.input_type(0);
  const NDArray* wp = transpose_weight(call);
  if (!wp) return false;
  const NDArray& w = *wp;
  const TensorType& ot = n.outputs[0];
  if (ot.shape.size() != 4 || ot.shape[1] != w.shape()[1]) return false;
  const int64_t O = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  topi::Conv2DParams t = detail::conv_params(n.attrs, "conv2d_transpose");
  if (t.groups != 1 || t.dilation_h != 1 || t.dilation_w != 1) return false;
  // Along an axis of one input pixel, output y reads tap y + pad_begin whatever the stride:
  // stride K there gives phases of one tap each (DCGAN's first layer, 1x1 → 4x4, becomes a
  // 1x1 convolution to 16·O channels instead of 16 taps of which one is not zero).
  const int64_t sh = xt.shape[2] == 1 ? std::max(t.stride_h, KH) : t.stride_h;
  const int64_t sw = xt.shape[3] == 1 ? std::max(t.stride_w, KW) : t.stride_w;
  if (sh == 1 && sw == 1) return false;  // already a plain convolution
  topi::SubpixelAxis ay, ax;
  try {
    ay = topi::plan_subpixel_axis(xt.shape[2], KH, sh, t.padding.top, ot.shape[2]);
    ax = topi::plan_subpixel_axis(xt.shape[3], KW, sw, t.padding.left, ot.shape[3]);
  } catch (const Error&) {
    return false;
  }
  const int64_t lanes = std::max(1, call.target.vector_bits() / 32);
  topi::Conv2DWorkload wl = phase_workload(xt, 0, 1, ay, ax);
  auto blocks = [&](int64_t rows) -> std::optional<topi::Conv2DNCHWcLayout> {
    wl.out_channel = rows;
    try {
      autotune::Config cfg = rw.config([&] { return conv2d_task(wl, call.target); });
      return topi::define_conv2d_nchwc_knobs(cfg, wl, call.target, topi::ChannelBlocks::kDefault);
    } catch (const Error&) {
      return std::nullopt;
    }
  };
  int64_t rows = sh * sw * O;
  std::optional<topi::Conv2DNCHWcLayout> l = blocks(rows);
  if (!l) return false;
  int64_t out_block = 0;
  if (l->oc_bn >= 8 && O % l->oc_bn == 0) {
    out_block = l->oc_bn;
  } else {
    // The phases in whole vector blocks (zero channels past sh·sw·O); the output in the
    // channel blocks of the other operators when they are wide enough.
    rows = (rows + lanes - 1) / lanes * lanes;
    if (rows != wl.out_channel) l = blocks(rows);
    if (!l) return false;
    if (const int64_t b = topi::channel_block(O, lanes); b >= 8) out_block = b;
  }
  if (l->oc_bn < 8) return false;
  if (out_block == l->oc_bn && subpixel_phases(rw, sh, sw, l->ic_bn, l->oc_bn)) return true;
  const std::string wname = call.graph.node(n.inputs[1].node).name;
  Node conv;
  conv.op = "conv2d_nchwc";
  conv.name = n.name + "_phases";
  conv.attrs.set("strides", Ints{1, 1});
  conv.attrs.set("padding", Ints{ay.pad_lo, ax.pad_lo, ay.pad_hi, ax.pad_hi});
  conv.attrs.set("dilation", Ints{1, 1});
  conv.inputs = {
      rw.input(0, blocked_layout(l->ic_bn)),
      rw.add_constant(wname + "_subpixel_packed",
                      pack_conv_weight(stack_subpixel_weight(w, sh, sw, ay.taps, ax.taps, rows),
                                       l->ic_bn, l->oc_bn))};
  conv.outputs = {
      blocked_type({{xt.shape[0], rows, ay.conv_extent, ax.conv_extent}, xt.dtype}, l->oc_bn)};
  conv.impl = conv2d_nchwc_choice(wl, call.target);
  Node r;
  r.op = "subpixel_interleave";
  r.name = n.name;
  r.attrs.set("strides", Ints{sh, sw});
  r.attrs.set("shift", Ints{ay.shift, ax.shift});
  r.attrs.set("offset", Ints{ay.offset, ax.offset});
  r.attrs.set("out_size", Ints{ot.shape[2], ot.shape[3]});
  r.attrs.set("channels", O);
  r.attrs.set("out_block", out_block);
  r.inputs = {rw.add(std::move(conv), blocked_layout(l->oc_bn))};
  r.outputs = {out_block > 0 ? blocked_type(ot, out_block) : ot};
  rw.emit(std::move(r), out_block > 0 ? blocked_layout(out_block) : "");
  return true;
}

/// A depthwise conv2d_transpose (groups = C, weight [C, 1, KH, KW], dilation 1, a stride > 1;
/// FCN-style learnable up-sampling) as one depthwise_conv2d_nchwc per phase (ceil(K/s) taps
/// each) and the interleave of the phases, NCHW<b>c in and out (subpixel_phases).
bool alter_conv2d_transpose_depthwise(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  const Node& n = call.node();
  const TensorType& xt = call.input_type(0);
  const NDArray* w = transpose_weight(call);
  if (!w || w->shape()[1] != 1) return false;
  const topi::Conv2DParams t = detail::conv_params(n.attrs, "conv2d_transpose");
  const int64_t C = xt.shape[1];
  if (C == 1 || t.groups != C || t.dilation_h != 1 || t.dilation_w != 1 ||
      (t.stride_h == 1 && t.stride_w == 1))
    return false;
  // The block: the depthwise template's for the first phase (subpixel_phases checks that
  // every phase agrees).
  try {
    const TensorType& ot = n.outputs[0];
    const topi::Conv2DWorkload wl =
        phase_workload(xt, C, C,
                       topi::plan_subpixel_phase(xt.shape[2], w->shape()[2], t.stride_h,
                                                 t.padding.top, ot.shape[2], 0),
                       topi::plan_subpixel_phase(xt.shape[3], w->shape()[3], t.stride_w,
                                                 t.padding.left, ot.shape[3], 0));
    autotune::Config cfg = rw.config([&] { return depthwise_conv2d_task(wl, call.target); });
    const int64_t bn =
        topi::define_depthwise_nchwc_knobs(cfg, wl, call.target, topi::ChannelBlocks::kDefault);
    if (bn < min_channel_block(call.target)) return false;
    return subpixel_phases(rw, t.stride_h, t.stride_w, bn, bn, true);
  } catch (const Error&) {
    return false;
  }
}

/// conv2d_transpose(x, w [C, O, KH, KW]) as conv2d_nchwc over x dilated by the strides, padded
/// by dilation·(K − 1) − padding (+ output_padding after), with the kernel flipped and its
/// channels swapped — when no padding is negative (a crop) and the blocks are wide enough.
bool alter_conv2d_transpose_dilated(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  const Node& n = call.node();
  const TensorType& xt = call.input_type(0);
  const NDArray* wp = transpose_weight(call);
  if (!wp) return false;
  const NDArray& w = *wp;
  const int64_t C = w.shape()[0], O = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  topi::Conv2DParams t = detail::conv_params(n.attrs, "conv2d_transpose");
  if (t.groups != 1) return false;
  auto [oph, opw] = detail::pair_attr(n.attrs, "output_padding", "conv2d_transpose");
  const int64_t eh = t.dilation_h * (KH - 1), ew = t.dilation_w * (KW - 1);
  topi::Padding2D pad{eh - t.padding.top, ew - t.padding.left, eh - t.padding.bottom + oph,
                      ew - t.padding.right + opw};
  if (pad.top < 0 || pad.left < 0 || pad.bottom < 0 || pad.right < 0) return false;
  topi::Conv2DWorkload wl;
  wl.batch = xt.shape[0];
  wl.in_channel = C;
  wl.height = (xt.shape[2] - 1) * t.stride_h + 1;
  wl.width = (xt.shape[3] - 1) * t.stride_w + 1;
  wl.out_channel = O;
  wl.kernel_h = KH;
  wl.kernel_w = KW;
  wl.params.padding = pad;
  wl.params.dilation_h = t.dilation_h;
  wl.params.dilation_w = t.dilation_w;
  int64_t ic_bn = 0, oc_bn = 0;
  try {
    autotune::Config cfg = rw.config([&] { return conv2d_task(wl, call.target); });
    topi::Conv2DNCHWcLayout l =
        topi::define_conv2d_nchwc_knobs(cfg, wl, call.target, topi::ChannelBlocks::kDefault);
    ic_bn = l.ic_bn;
    oc_bn = l.oc_bn;
  } catch (const Error&) {
    return false;
  }
  if (oc_bn < 8) return false;
  // W'[o, c, kh, kw] = w[c, o, KH-1-kh, KW-1-kw]
  NDArray flipped = NDArray::empty({O, C, KH, KW}, w.dtype());
  const float* src = w.data_as<float>();
  float* dst = flipped.data_as<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw)
          dst[((o * C + c) * KH + kh) * KW + kw] =
              src[((c * O + o) * KH + (KH - 1 - kh)) * KW + (KW - 1 - kw)];
  Entry data = rw.input(0, "");
  TensorType dt{{xt.shape[0], C, wl.height, wl.width}, xt.dtype};
  if (t.stride_h > 1 || t.stride_w > 1) {
    Node d;
    d.op = "dilate2d";
    d.attrs.set("strides", Ints{t.stride_h, t.stride_w});
    d.inputs = {data};
    d.outputs = {dt};
    data = rw.add(std::move(d), "");
  }
  Node r;
  r.op = "conv2d_nchwc";
  r.name = n.name;
  r.attrs.set("strides", Ints{1, 1});
  r.attrs.set("padding", Ints{pad.top, pad.left, pad.bottom, pad.right});
  r.attrs.set("dilation", Ints{t.dilation_h, t.dilation_w});
  r.inputs = {rw.as_layout(data, dt, blocked_layout(ic_bn)),
              rw.add_constant(call.graph.node(n.inputs[1].node).name + "_flipped_packed",
                              pack_conv_weight(flipped, ic_bn, oc_bn))};
  r.outputs = {blocked_type(n.outputs[0], oc_bn)};
  r.impl = conv2d_nchwc_choice(wl, call.target);
  rw.emit(std::move(r), blocked_layout(oc_bn));
  return true;
}

}  // namespace kiln::graph
