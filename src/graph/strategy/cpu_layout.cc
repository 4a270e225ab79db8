// The CPU strategies' layout hooks (TVM's conv2d_alter_layout for x86), run by alter_op_layout
// for the choice it takes:
//   conv2d (groups 1)                       → conv2d_nchwc on NCHW<ic>c data, weights packed
//                                              into OIHW<ic>i<oc>o (at run time by a
//                                              pack_conv2d_weight node when they are computed
//                                              there), output NCHW<oc>c (blocks
//                                              of 8 channels or more, 4 with the arm key
//                                              (arm.h), or one output pixel)
//   conv2d (3x3 stride 1, Winograd)         → conv2d_winograd_nchwc, the kernel transformed once
//   conv2d (depthwise, multiplier 1)        → depthwise_conv2d_nchwc, NCHW<b>c in and out
//   conv2d (depthwise, multiplier M > 1)    → M of them, concat, channel_shuffle
//   conv2d_transpose                        → cpu_layout_transpose.cc
//   dense / matmul (constant weights)       → dense_packed over weights packed in panels
//   lstm_cell (constant recurrent weight)   → lstm_cell_packed, the weight packed in panels
// with the block sizes of each template's config (tuned, or the fallback). Each hook records
// the implementation and its tuning task on the node it emits, so the build schedules it with
// the same config. Weights are packed here, in C++, so the pass compiles nothing.
#include <algorithm>
#include <cstring>
#include <functional>

#include "../layout_util.h"
#include "../op_attrs.h"
#include "arm.h"
#include "builtin.h"
#include "kiln/graph/tuning.h"
#include "kiln/support/error.h"
#include "kiln/topi/conv2d_winograd.h"
#include "kiln/topi/dense.h"
#include "kiln/topi/depthwise_conv2d.h"
#include "kiln/topi/lstm.h"
#include "kiln/topi/nn_util.h"

namespace kiln::graph {

namespace {

using detail::blocked_layout;
using detail::blocked_type;
using runtime::NDArray;
using Ints = std::vector<int64_t>;

/// A channel block whose vectors LLVM splits when it is no power of two (10 = 8 + 2 lanes).
bool splits_vectors(int64_t block) { return (block & (block - 1)) != 0; }

}  // namespace

NDArray pack_conv_weight(const NDArray& w, int64_t ic, int64_t oc) {
  const Ints s = w.shape();
  const int64_t O = s[0], C = s[1], KH = s[2], KW = s[3];
  NDArray r = NDArray::empty(topi::packed_conv2d_weight_shape(s, ic, oc), w.dtype());
  const float* src = w.data_as<float>();
  float* dst = r.data_as<float>();
  // Destination order, output channels innermost: each (o / oc, c / ic) block of
  // KH * KW * ic * oc floats is written while it is in the L1 cache (in source order, every
  // store went to another line).
  const int64_t K = KH * KW;
  for (int64_t ob = 0; ob < O / oc; ++ob)
    for (int64_t c = 0; c < C; ++c) {
      float* block = dst + (ob * (C / ic) + c / ic) * K * ic * oc + (c % ic) * oc;
      for (int64_t oi = 0; oi < oc; ++oi) {
        const float* row = src + ((ob * oc + oi) * C + c) * K;
        for (int64_t k = 0; k < K; ++k) block[k * ic * oc + oi] = row[k];
      }
    }
  return r;
}

NDArray pack_depthwise_weight(const NDArray& w, int64_t bn) {
  const Ints s = w.shape();
  const int64_t C = s[0], KH = s[2], KW = s[3];
  NDArray r = NDArray::empty(topi::packed_depthwise_weight_shape(s, bn), w.dtype());
  const float* src = w.data_as<float>();
  float* dst = r.data_as<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k = 0; k < KH * KW; ++k)
      dst[((c / bn) * KH * KW + k) * bn + c % bn] = src[c * KH * KW + k];
  return r;
}

ImplChoice conv2d_nchwc_choice(const topi::Conv2DWorkload& wl, const Target& target) {
  return ImplChoice{"conv2d_nchwc.cpu", [wl, target] { return conv2d_task(wl, target); }};
}

namespace {

/// W [N, K] → Wp [ceil(N/nb), K, nb], zero past row N (topi::pack_dense_weight).
NDArray pack_dense_weight(const NDArray& w, int64_t nb) {
  const int64_t N = w.shape()[0], K = w.shape()[1], P = (N + nb - 1) / nb;
  NDArray r = NDArray::empty({P, K, nb}, w.dtype());
  const float* src = w.data_as<float>();
  float* dst = r.data_as<float>();
  // In blocks of kb columns: each of the panel's nb rows is read in a contiguous run and the
  // block's destination (kb * nb floats) stays in the L1 cache (element by element, the nb
  // row streams made packing VGG-16's 400 MB classifier take half a second).
  constexpr int64_t kb = 64;
  for (int64_t p = 0; p < P; ++p)
    for (int64_t k0 = 0; k0 < K; k0 += kb) {
      const int64_t k1 = std::min(K, k0 + kb);
      for (int64_t i = 0; i < nb; ++i) {
        const int64_t n = p * nb + i;
        float* d = dst + p * K * nb + i;
        for (int64_t k = k0; k < k1; ++k) d[k * nb] = n < N ? src[n * K + k] : 0.0f;
      }
    }
  return r;
}

/// The transpose of a 2-D float32 array.
NDArray transposed(const NDArray& a) {
  const int64_t R = a.shape()[0], C = a.shape()[1];
  NDArray r = NDArray::empty({C, R}, a.dtype());
  const float* src = a.data_as<float>();
  float* dst = r.data_as<float>();
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) dst[j * R + i] = src[i * C + j];
  return r;
}

/// The node's weight packed at compile time: a constant.
std::function<Entry()> packed_constant(LayoutRewriter& rw, NDArray packed) {
  return [&rw, packed = std::move(packed)]() mutable {
    const Node& n = rw.call().node();
    return rw.add_constant(rw.call().graph.node(n.inputs[1].node).name + "_packed",
                           std::move(packed));
  };
}

/// A blocked convolution node `op` replacing the node: data in NCHW<ic_bn>c, the packed
/// weight (added by `packed` after the data's conversion), output NCHW<oc_bn>c.
void emit_blocked_conv(LayoutRewriter& rw, const std::string& op, int64_t ic_bn, int64_t oc_bn,
                       const std::function<Entry()>& packed, ImplChoice impl) {
  const Node& n = rw.call().node();
  Node r;
  r.op = op;
  r.name = n.name;
  r.attrs.set("strides", n.attrs.get_ints("strides"));
  r.attrs.set("padding", n.attrs.get_ints("padding"));
  r.attrs.set("dilation", n.attrs.get_ints("dilation"));
  Entry data = rw.input(0, blocked_layout(ic_bn));
  r.inputs = {data, packed()};
  r.outputs = {blocked_type(n.outputs[0], oc_bn)};
  r.impl = std::move(impl);
  rw.emit(std::move(r), blocked_layout(oc_bn));
}

}  // namespace

std::optional<topi::Conv2DWorkload> padded_output_workload(const topi::Conv2DWorkload& wl,
                                                           const Target& target) {
  const int64_t lanes = target.vector_bits() / 32, O = wl.out_channel;
  if (lanes < 2 || wl.params.groups != 1 || wl.out_height() * wl.out_width() <= 1) return {};
  autotune::Config fallback = autotune::Config::fallback();
  const int64_t block =
      topi::define_conv2d_nchwc_knobs(fallback, wl, target, topi::ChannelBlocks::kDefault).oc_bn;
  const bool narrow = block < min_channel_block(target);
  const bool half = !narrow && !splits_vectors(block) && block < lanes;
  if (!narrow && !splits_vectors(block) && !half) return {};
  topi::Conv2DWorkload padded = wl;
  padded.out_channel = (O + lanes - 1) / lanes * lanes;
  // Blocks narrower than the vector (728 = 91 x 8 channels with 16 lanes) run half-width
  // vectors: padded when that adds at most an eighth and each output sums enough products to
  // outweigh the cut back to NCHW and the next layer's conversion (Xception's 728 -> 728 1x1
  // convolutions -7% per model, where MobileNet-v3's 40 -> 120 and 80 -> 184 expansions, 40 and
  // 80 products, ran 13-22% slower).
  if (half && (8 * padded.out_channel > 9 * O ||
               wl.in_channel / wl.params.groups * wl.kernel_h * wl.kernel_w < 256))
    return {};
  // A block narrower than 8: up to three quarters more work. The NCHW convolution it replaces
  // ran at 35-45% of the FMA peak and needed its input converted from blocks (SegFormer's head,
  // 256 -> 19 classes on 64x80: 1.34 ms plus 1.26 ms of conversion, against 2.08 ms over 32
  // channels; FCN's 21 classes on 28x28: 0.76 -> 0.51 ms). Blocks of 8 (24 channels) ran at
  // 20% with AVX-512. A block of 8 or more that is no power of two (R(2+1)D's 230 = 23 x 10,
  // whose 10-lane vectors LLVM splits into 8 + 2): up to a quarter more. R(2+1)D's 230-channel
  // convolutions ran 24.9 -> 16.6 ms and 12.7 -> 7.9 ms over 240 channels (58% -> 92% of the
  // peak), the model 3% faster after the cut and the next layer's conversion.
  if (4 * padded.out_channel > (narrow ? 7 : 5) * O) return {};
  return padded;
}

namespace {
/// A convolution whose output channels have no power-of-two block of 8 or more (921 = 3 · 307
/// and 230 = 23 · 10 in R(2+1)D, a pruned model's odd widths) as a blocked convolution over
/// padded_output_workload's channels (zero weights: the extra channels are 0), then its NCHW copy
/// cut back to the node's channels. False, adding nothing, when there is no padded workload or the
/// blocked template does not cover it.
bool emit_padded_output_conv(LayoutRewriter& rw, const topi::Conv2DWorkload& wl) {
  const OpCall& call = rw.call();
  std::optional<topi::Conv2DWorkload> pw = padded_output_workload(wl, call.target);
  if (!pw) return false;
  const topi::Conv2DWorkload& padded = *pw;
  const int64_t O = wl.out_channel;
  autotune::Config cfg = rw.config([&] { return conv2d_task(padded, call.target); });
  topi::Conv2DNCHWcLayout l =
      topi::define_conv2d_nchwc_knobs(cfg, padded, call.target, topi::ChannelBlocks::kDefault);
  if (l.oc_bn < min_channel_block(call.target)) return false;
  const NDArray& w = *call.constant(1);
  Ints ws = w.shape();
  const int64_t per_o = ws[1] * ws[2] * ws[3];
  ws[0] = padded.out_channel;
  NDArray wp = NDArray::empty(ws, w.dtype());
  std::memcpy(wp.data(), w.data(), static_cast<size_t>(O * per_o) * sizeof(float));
  std::fill(wp.data_as<float>() + O * per_o, wp.data_as<float>() + ws[0] * per_o, 0.0f);
  const Node& n = call.node();
  const std::string wname = call.graph.node(n.inputs[1].node).name;
  TensorType pt = n.outputs[0];
  pt.shape[1] = padded.out_channel;
  Node conv;
  conv.op = "conv2d_nchwc";
  conv.name = n.name + "_padded";
  conv.attrs.set("strides", n.attrs.get_ints("strides"));
  conv.attrs.set("padding", n.attrs.get_ints("padding"));
  conv.attrs.set("dilation", n.attrs.get_ints("dilation"));
  conv.inputs = {rw.input(0, blocked_layout(l.ic_bn)),
                 rw.add_constant(wname + "_padded_packed", pack_conv_weight(wp, l.ic_bn, l.oc_bn))};
  conv.outputs = {blocked_type(pt, l.oc_bn)};
  conv.impl = conv2d_nchwc_choice(padded, call.target);
  Entry y = rw.as_layout(rw.add(std::move(conv), blocked_layout(l.oc_bn)), pt, "");
  Node cut;
  cut.op = "strided_slice";
  cut.name = n.name;
  cut.attrs.set("begin", Ints{0});
  cut.attrs.set("end", Ints{O});
  cut.attrs.set("strides", Ints{1});
  cut.attrs.set("axes", Ints{1});
  cut.inputs = {y};
  cut.outputs = {n.outputs[0]};
  rw.emit(std::move(cut), "");
  return true;
}
/// A 1x1 convolution (stride 1, no padding, batch 1) whose input channels have no block of
/// 8 or more (ShuffleNet-v2 x1.0's 58 and 116, a pruned model's odd widths) as the product
/// W [O, C] · x [C, H·W] on the NCHW tensor, reshaped back to [1, O, H, W]: the matrix product
/// runs near the FMA peak with the generated schedule, vectorized along the pixels, where the
/// blocked convolution needed the input converted to padded blocks and its output cut back and
/// converted again around every such layer. False, adding nothing, when the convolution is
/// not of that form.
bool emit_matmul_conv(LayoutRewriter& rw, const topi::Conv2DWorkload& wl) {
  const OpCall& call = rw.call();
  const topi::Conv2DParams& p = wl.params;
  if (wl.batch != 1 || wl.kernel_h != 1 || wl.kernel_w != 1 || p.stride_h != 1 || p.stride_w != 1 ||
      !p.padding.is_zero() || p.groups != 1 || wl.out_height() * wl.out_width() <= 1 ||
      !call.constant(1) || call.constant(1)->dtype() != DataType::Float(32)) {
    return false;
  }
  const Node& n = call.node();
  const int64_t C = wl.in_channel, O = wl.out_channel, HW = wl.out_height() * wl.out_width();
  const NDArray& w = *call.constant(1);
  NDArray w2 = NDArray::empty({O, C}, w.dtype());
  std::memcpy(w2.data(), w.data(), static_cast<size_t>(O * C) * sizeof(float));
  const DataType t = n.outputs[0].dtype;
  Node flat;
  flat.op = "reshape";
  flat.name = n.name + "_pixels";
  flat.attrs.set("newshape", Ints{C, HW});
  flat.inputs = {rw.input(0, "")};
  flat.outputs = {TensorType{{C, HW}, t}};
  Node mm;
  mm.op = "matmul";
  mm.name = n.name + "_matmul";
  mm.inputs = {rw.add_constant(call.graph.node(n.inputs[1].node).name + "_matrix", w2),
               rw.add(std::move(flat), "")};
  mm.outputs = {TensorType{{O, HW}, t}};
  Node back;
  back.op = "reshape";
  back.name = n.name;
  back.attrs.set("newshape", n.outputs[0].shape);
  back.inputs = {rw.add(std::move(mm), "")};
  back.outputs = {n.outputs[0]};
  rw.emit(std::move(back), "");
  return true;
}
}  // namespace

bool alter_conv2d_nchwc(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  std::optional<topi::Conv2DWorkload> wl = conv2d_workload(call, false);
  if (!wl || wl->params.groups != 1) return false;
  const bool computed_weight = !call.is_f32_constant(1);
  try {
    autotune::Config cfg = rw.config([&] { return conv2d_task(*wl, call.target); });
    topi::Conv2DNCHWcLayout l =
        topi::define_conv2d_nchwc_knobs(cfg, *wl, call.target, topi::ChannelBlocks::kDefault);
    // Blocks narrower than 8 channels (4 on NEON, arm.h) are too narrow for the vector
    // micro-kernel: the channels are padded (emit_padded_output_conv) or, failing that, the
    // convolution stays NCHW; except for a one-pixel output (a squeeze-and-excitation block's
    // convolutions of a pooled [N, C, 1, 1] tensor, e.g. 144 → 6 channels), whose work is
    // negligible and whose blocked output spares converting its input and output.
    if (l.ic_bn < min_channel_block(call.target) && !computed_weight && emit_matmul_conv(rw, *wl))
      return true;
    // Blocks that are no power of two (230 = 23 x 10 channels) run split vectors: padded
    // where that adds at most a quarter, else as they are.
    const bool narrow = l.oc_bn < min_channel_block(call.target);
    const bool half = l.oc_bn * 32 < call.target.vector_bits();
    if ((narrow || half || splits_vectors(l.oc_bn)) && wl->out_height() * wl->out_width() > 1) {
      if (!computed_weight && emit_padded_output_conv(rw, *wl)) return true;
      if (narrow) return false;
    }
    // Weights computed at run time (CondConv) are packed by a node of their own.
    auto pack_node = [&] {
      Node pack;
      pack.op = "pack_conv2d_weight";
      pack.name = call.node().name + "_weight_packed";
      pack.attrs.set("ic_bn", l.ic_bn);
      pack.attrs.set("oc_bn", l.oc_bn);
      pack.inputs = {rw.input(1, "")};
      pack.outputs = {
          TensorType{topi::packed_conv2d_weight_shape(call.input_type(1).shape, l.ic_bn, l.oc_bn),
                     DataType::Float(32)}};
      return rw.add(std::move(pack), "");
    };
    emit_blocked_conv(rw, "conv2d_nchwc", l.ic_bn, l.oc_bn,
                      computed_weight ? std::function<Entry()>(pack_node)
                                      : packed_constant(rw, pack_conv_weight(*call.constant(1),
                                                                             l.ic_bn, l.oc_bn)),
                      conv2d_nchwc_choice(*wl, call.target));
  } catch (const Error&) {
    return false;  // a workload the blocked template does not cover
  }
  return true;
}

bool alter_conv2d_winograd(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  std::optional<topi::Conv2DWorkload> wl = conv2d_workload(call);
  if (!wl || wl->params.groups != 1 || !topi::winograd_candidate(*wl)) return false;
  try {
    // 3x3 stride-1 layers with enough channels and pixels: Winograd F(4x4, 3x3), the kernel
    // transformed here once (topi/conv2d_winograd.h).
    autotune::Config cfg = rw.config([&] { return conv2d_winograd_task(*wl, call.target); });
    topi::WinogradLayout l = topi::define_conv2d_winograd_knobs(cfg, *wl, call.target);
    if (l.oc_bn < 8 || l.ic_bn < 8) return false;
    const topi::Conv2DWorkload w = *wl;
    const Target target = call.target;
    emit_blocked_conv(rw, "conv2d_winograd_nchwc", l.ic_bn, l.oc_bn,
                      packed_constant(rw, topi::transform_winograd_weight(*call.constant(1), l.m,
                                                                          l.ic_bn, l.oc_bn)),
                      ImplChoice{"conv2d_winograd_nchwc.cpu",
                                 [w, target] { return conv2d_winograd_task(w, target); }});
  } catch (const Error&) {
    return false;
  }
  return true;
}

namespace {

/// A depthwise convolution with channel multiplier M > 1 (TensorFlow's depth_multiplier: output
/// channel c·M + m reads input channel c) as M depthwise_conv2d_nchwc of multiplier 1 over the
/// same blocked input (the m-th taking the kernels of channels c·M + m), their outputs
/// concatenated on whole blocks ([t_0, …, t_{M-1}]: channel m·C + c) and shuffled back by one
/// channel_shuffle (groups M: channel c·M + m reads m·C + c).
bool emit_depthwise_multiples(LayoutRewriter& rw, const topi::Conv2DWorkload& wl) {
  const OpCall& call = rw.call();
  const Node& n = call.node();
  const int64_t C = wl.in_channel, M = depthwise_multiplier(wl);
  topi::Conv2DWorkload one = wl;
  one.out_channel = C;
  autotune::Config cfg = rw.config([&] { return depthwise_conv2d_task(one, call.target); });
  const int64_t bn =
      topi::define_depthwise_nchwc_knobs(cfg, one, call.target, topi::ChannelBlocks::kDefault);
  if (bn < min_channel_block(call.target)) return false;
  const NDArray& w = *call.constant(1);
  const int64_t K = w.shape()[2] * w.shape()[3];
  const TensorType& ot = n.outputs[0];
  const TensorType part{{ot.shape[0], C, ot.shape[2], ot.shape[3]}, ot.dtype};
  const std::string wname = call.graph.node(n.inputs[1].node).name;
  const Target target = call.target;
  Entry data = rw.input(0, blocked_layout(bn));
  Node cat;
  cat.op = "concat";
  cat.name = n.name + "_multiples";
  cat.attrs.set("axis", int64_t{1});
  for (int64_t m = 0; m < M; ++m) {
    NDArray wm = NDArray::empty({C, 1, w.shape()[2], w.shape()[3]}, w.dtype());
    for (int64_t c = 0; c < C; ++c)
      std::memcpy(wm.data_as<float>() + c * K, w.data_as<float>() + (c * M + m) * K,
                  static_cast<size_t>(K) * sizeof(float));
    Node conv;
    conv.op = "depthwise_conv2d_nchwc";
    conv.name = n.name + "_multiple" + std::to_string(m);
    conv.attrs.set("strides", n.attrs.get_ints("strides"));
    conv.attrs.set("padding", n.attrs.get_ints("padding"));
    conv.attrs.set("dilation", n.attrs.get_ints("dilation"));
    conv.inputs = {data, rw.add_constant(wname + "_multiple" + std::to_string(m) + "_packed",
                                         pack_depthwise_weight(wm, bn))};
    conv.outputs = {blocked_type(part, bn)};
    conv.impl = ImplChoice{"depthwise_conv2d_nchwc.cpu",
                           [one, target] { return depthwise_conv2d_task(one, target); }};
    cat.inputs.push_back(rw.add(std::move(conv), blocked_layout(bn)));
  }
  cat.outputs = {blocked_type(ot, bn)};
  Node shuffle;
  shuffle.op = "channel_shuffle";
  shuffle.name = n.name;
  shuffle.attrs.set("groups", M).set("layout", blocked_layout(bn));
  shuffle.inputs = {rw.add(std::move(cat), blocked_layout(bn))};
  shuffle.outputs = {blocked_type(ot, bn)};
  rw.emit(std::move(shuffle), blocked_layout(bn));
  return true;
}

}  // namespace

bool alter_depthwise_conv2d(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  std::optional<topi::Conv2DWorkload> wl = conv2d_workload(call);
  if (!wl || depthwise_multiplier(*wl) == 0) return false;
  try {
    if (depthwise_multiplier(*wl) > 1) return emit_depthwise_multiples(rw, *wl);
    autotune::Config cfg = rw.config([&] { return depthwise_conv2d_task(*wl, call.target); });
    int64_t bn =
        topi::define_depthwise_nchwc_knobs(cfg, *wl, call.target, topi::ChannelBlocks::kDefault);
    if (bn < min_channel_block(call.target)) return false;
    // Untuned, the convolution reads its input in the narrower block its producer wrote, when
    // that block divides the channels and converting the input would be a pass of its own
    // (GhostNet's two 8-channel-block halves concatenated in place into 48 channels): as much
    // memory traffic as the memory-bound convolution itself. A conversion that fuses into an
    // injective producer (ShuffleNet's channel shuffle) costs nothing: the default block stays.
    const int64_t from = detail::block_of(rw.input_layout(0));
    if (cfg.is_fallback() && from >= min_channel_block(call.target) && from < bn &&
        wl->in_channel % from == 0 && !rw.input_producer_fuses(0))
      bn = from;
    const topi::Conv2DWorkload w = *wl;
    const Target target = call.target;
    emit_blocked_conv(rw, "depthwise_conv2d_nchwc", bn, bn,
                      packed_constant(rw, pack_depthwise_weight(*call.constant(1), bn)),
                      ImplChoice{"depthwise_conv2d_nchwc.cpu",
                                 [w, target] { return depthwise_conv2d_task(w, target); }});
  } catch (const Error&) {
    return false;
  }
  return true;
}

bool alter_dense(LayoutRewriter& rw, bool transposed_weight) {
  const OpCall& call = rw.call();
  const Node& n = call.node();
  const TensorType& xt = call.input_type(0);
  if (xt.dtype != DataType::Float(32) || xt.shape.size() != 2 || !call.is_f32_constant(1))
    return false;
  NDArray w = *call.constant(1);
  if (w.ndim() != 2) return false;
  if (transposed_weight) w = transposed(w);
  const int64_t N = w.shape()[0];
  const topi::DenseWorkload wl{xt.shape[0], N, xt.shape[1]};
  const Target target = call.target;
  autotune::Config cfg = rw.config([&] { return dense_task(wl, target); });
  const int64_t nb = topi::dense_pack_width(cfg, xt.shape[0], N, target);
  Node r;
  r.op = "dense_packed";
  r.name = n.name;
  r.attrs.set("units", N);
  r.impl = ImplChoice{"dense_packed.cpu", [wl, target] { return dense_task(wl, target); }};
  // One packed copy per (weight, transposition, panel width): a weight used at every step of
  // a recurrence is packed once.
  const std::string key = "dense " + std::to_string(n.inputs[1].node) + " " +
                          std::to_string(transposed_weight) + " " + std::to_string(nb);
  std::optional<Entry> packed = rw.cached(key);
  if (!packed) {
    packed = rw.add_constant(call.graph.node(n.inputs[1].node).name + "_packed",
                             pack_dense_weight(w, nb));
    rw.cache(key, *packed);
  }
  r.inputs = {rw.input(0, ""), *packed};
  r.outputs = n.outputs;
  if (N % nb != 0) {
    // The product over whole panels (the packed weights are zero past row N), then the first
    // N columns: every output tile has constant bounds, which the register-blocked schedule
    // needs to stay vectorized and unrolled.
    const int64_t padded = (N + nb - 1) / nb * nb;
    r.attrs.set("units", padded);
    r.attrs.set("orig_units", N);
    r.outputs = {TensorType{{xt.shape[0], padded}, xt.dtype}};
    r.name += "_padded";
    Node slice;
    slice.op = "strided_slice";
    slice.name = n.name;
    slice.attrs.set("begin", Ints{0, 0});
    slice.attrs.set("end", Ints{xt.shape[0], N});
    slice.inputs = {rw.add(std::move(r), "")};
    slice.outputs = n.outputs;
    r = std::move(slice);
  }
  if (n.inputs.size() > 2) {
    // The bias becomes an add that fusion puts into the product's output loop; the add keeps
    // the node's name (it computes the node's value).
    Node add;
    add.op = "add";
    add.name = n.name;
    r.name += "_matmul";
    add.inputs = {rw.add(std::move(r), ""), rw.input(2, "")};
    add.outputs = n.outputs;
    rw.emit(std::move(add), "");
    return true;
  }
  rw.emit(std::move(r), "");
  return true;
}

/// lstm_cell(xg, h, c, R) with constant float32 R [4H, H] → lstm_cell_packed over R packed
/// on the host in topi's layout (topi::packed_lstm_onnx_index: panels of hb hidden units, the
/// gates reordered from ONNX's i, o, f, c to topi's i, f, g, o), once per (R, hb).
bool alter_lstm_cell(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  const Node& n = call.node();
  const TensorType& ht = call.input_type(1);
  if (ht.dtype != DataType::Float(32) || ht.shape.size() != 2 || !call.is_f32_constant(3))
    return false;
  const NDArray& R = *call.constant(3);
  const int64_t H = ht.shape[1], B = ht.shape[0];
  if (R.ndim() != 2 || R.shape()[0] != 4 * H || R.shape()[1] != H) return false;
  const Target target = call.target;
  autotune::Config cfg = rw.config([&] { return lstm_cell_task(B, H, target); });
  const int64_t hb = topi::lstm_block_width(cfg, H);  // the build looks up the same config
  const std::string key = "lstm " + std::to_string(n.inputs[3].node) + " " + std::to_string(hb);
  std::optional<Entry> packed = rw.cached(key);
  if (!packed) {
    NDArray rp = NDArray::empty(topi::packed_lstm_onnx_weight_shape(H, hb), R.dtype());
    float* dst = rp.data_as<float>();
    std::fill(dst, dst + rp.numel(), 0.0f);  // the units past H
    const float* src = R.data_as<float>();
    for (int64_t row = 0; row < 4 * H; ++row)
      for (int64_t k = 0; k < H; ++k)
        dst[topi::packed_lstm_onnx_index(row, k, H, hb)] = src[row * H + k];
    packed = rw.add_constant(call.graph.node(n.inputs[3].node).name + "_packed", std::move(rp));
    rw.cache(key, *packed);
  }
  Node r = n;
  r.op = "lstm_cell_packed";
  for (size_t k = 0; k < r.inputs.size(); ++k) r.inputs[k] = k == 3 ? *packed : rw.input(k, "");
  r.impl =
      ImplChoice{"lstm_cell_packed.cpu", [B, H, target] { return lstm_cell_task(B, H, target); }};
  rw.emit(std::move(r), "");
  return true;
}

}  // namespace kiln::graph
