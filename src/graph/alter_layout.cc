// Layout alteration for x86 (TVM's AlterOpLayout for conv2d_NCHWc): one forward walk that
// rewrites
//   conv2d (groups 1, constant weights)     → conv2d_nchwc on NCHW<ic>c data, weights packed
//                                              into OIHW<ic>i<oc>o, output NCHW<oc>c
//   conv2d (depthwise, multiplier 1)        → depthwise_conv2d_nchwc, NCHW<b>c in and out
//   conv2d_transpose (groups 1)             → conv2d_nchwc computing the stride² phases as
//                                              channels, then subpixel_interleave (dilation
//                                              1, a stride > 1); else dilate2d, then
//                                              conv2d_nchwc with the kernel flipped and its
//                                              channels swapped
//   dense / matmul (constant weights)       → dense_packed over weights packed in panels
//   lstm_cell (constant recurrent weight)    → lstm_cell_packed, the weight packed in panels
// with the block sizes of each template's default (fallback) configuration, and keeps
// tensors blocked between layers: element-wise / broadcast ops and pooling whose input is
// blocked compute in the blocked layout (per-channel constants such as biases are re-laid
// out at compile time; same-shaped operands in another layout are transformed); every other
// op, and the graph's results, get their operands back in NCHW. A layout_transform is added
// only where a producer's layout differs from what its consumer needs, and once per
// (tensor, layout). Weights and constants are packed here, in C++, so the pass compiles
// nothing. Node names are kept (kiln compare matches nodes by name).

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "kiln/autotune/space.h"
#include "kiln/graph/op_registry.h"
#include "kiln/graph/transform.h"
#include "kiln/graph/tuning.h"
#include "kiln/support/error.h"
#include "kiln/topi/conv2d.h"
#include "kiln/topi/conv2d_winograd.h"
#include "kiln/topi/dense.h"
#include "kiln/topi/depthwise_conv2d.h"
#include "kiln/topi/lstm.h"
#include "kiln/topi/subpixel.h"
#include "op_attrs.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {

using runtime::NDArray;
using Ints = std::vector<int64_t>;

/// The block size of "NCHW<b>c"; 0 for "" (plain NCHW).
int64_t block_of(const std::string& layout) {
  if (layout.empty() || layout == "NCHW") return 0;
  return std::stoll(layout.substr(4, layout.size() - 5));
}

std::string blocked_layout(int64_t bn) { return "NCHW" + std::to_string(bn) + "c"; }

/// [N, C/bn, H, W, bn] for a 4-D NCHW type.
TensorType blocked_type(const TensorType& t, int64_t bn) {
  return {{t.shape[0], t.shape[1] / bn, t.shape[2], t.shape[3], bn}, t.dtype};
}

bool is_f32(const TensorType& t) { return t.dtype == DataType::Float(32); }

bool is_f32_constant(const Graph& g, Entry e) {
  const Node& n = g.node(e.node);
  return n.is_constant() && n.value.dtype() == DataType::Float(32);
}

// ---- compile-time packing of constants --------------------------------------------------------

/// OIHW → [O/oc, C/ic, KH, KW, ic, oc] (topi::pack_conv2d_weight).
NDArray pack_conv_weight(const NDArray& w, int64_t ic, int64_t oc) {
  const Ints s = w.shape();
  const int64_t O = s[0], C = s[1], KH = s[2], KW = s[3];
  NDArray r = NDArray::empty(topi::packed_conv2d_weight_shape(s, ic, oc), w.dtype());
  const float* src = w.data_as<float>();
  float* dst = r.data_as<float>();
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          int64_t d = ((((o / oc) * (C / ic) + c / ic) * KH + kh) * KW + kw) * ic * oc +
                      (c % ic) * oc + o % oc;
          dst[d] = src[((o * C + c) * KH + kh) * KW + kw];
        }
  return r;
}

/// [C, 1, KH, KW] → [C/bn, 1, KH, KW, 1, bn] (topi::pack_depthwise_weight).
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

/// W [N, K] → Wp [ceil(N/nb), K, nb], zero past row N (topi::pack_dense_weight).
NDArray pack_dense_weight(const NDArray& w, int64_t nb) {
  const int64_t N = w.shape()[0], K = w.shape()[1], P = (N + nb - 1) / nb;
  NDArray r = NDArray::empty({P, K, nb}, w.dtype());
  const float* src = w.data_as<float>();
  float* dst = r.data_as<float>();
  for (int64_t p = 0; p < P; ++p)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < nb; ++i) {
        int64_t n = p * nb + i;
        dst[(p * K + k) * nb + i] = n < N ? src[n * K + k] : 0.0f;
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

/// True when constant type `c` broadcasts as one value per channel (axis 1) of 4-D type `x`.
bool is_per_channel(const TensorType& c, const TensorType& x) {
  if (c.shape.size() > x.shape.size() || c.numel() != x.shape[1]) return false;
  const size_t off = x.shape.size() - c.shape.size();
  for (size_t d = 0; d < c.shape.size(); ++d)
    if (c.shape[d] != (d + off == 1 ? x.shape[1] : 1)) return false;
  return true;
}

/// A per-channel constant of C values as [1, C/bn, 1, 1, bn].
NDArray blocked_per_channel(const NDArray& c, int64_t bn) {
  const int64_t C = c.numel();
  NDArray r = NDArray::empty({1, C / bn, 1, 1, bn}, c.dtype());
  std::copy(c.data_as<float>(), c.data_as<float>() + C, r.data_as<float>());  // same order
  return r;
}

// ---- the pass ---------------------------------------------------------------------------------

class LayoutAlterer {
 public:
  LayoutAlterer(const Graph& g, const Target& target, TunedConfigs* tuned)
      : g_(g), target_(target), tuned_(tuned), map_(g), names_(g) {}

  Graph run() {
    for (int i = 0; i < g_.num_nodes(); ++i) {
      const Node& n = g_.node(i);
      if (!n.is_op()) {
        map_.set_node(i, out_.add_node(map_.remap(n)), n.num_outputs());
        continue;
      }
      if (n.op == "conv2d" && try_conv2d(i)) continue;
      if (n.op == "conv2d_transpose" && try_conv2d_transpose(i)) continue;
      if ((n.op == "dense" || n.op == "matmul") && try_dense(i)) continue;
      if (n.op == "lstm_cell" && try_lstm_cell(i)) continue;
      if (try_blocked_elemwise(i)) continue;
      emit_plain(i);
    }
    std::vector<Entry> outs;
    for (const Entry& e : g_.outputs()) outs.push_back(as_layout(map_[e], g_.type_of(e), ""));
    out_.set_outputs(outs);
    return out_;
  }

 private:
  const std::string& layout_of(Entry e) const {
    static const std::string plain;
    auto it = layout_.find(e);
    return it == layout_.end() ? plain : it->second;
  }

  /// `e` (a new-graph entry holding a tensor of logical NCHW type `t`) in layout `want`
  /// ("" for NCHW): itself, or a (memoized) layout_transform of it.
  Entry as_layout(Entry e, const TensorType& t, const std::string& want) {
    const std::string& cur = layout_of(e);
    if (cur == want) return e;
    auto key = std::make_pair(e, want);
    if (auto it = transforms_.find(key); it != transforms_.end()) return it->second;
    Node n;
    n.op = "layout_transform";
    n.attrs.set("src_layout", cur.empty() ? "NCHW" : cur);
    n.attrs.set("dst_layout", want.empty() ? "NCHW" : want);
    n.inputs = {e};
    n.outputs = {want.empty() ? t : blocked_type(t, block_of(want))};
    Entry r{out_.add_node(std::move(n)), 0};
    if (!want.empty()) layout_[r] = want;
    transforms_[key] = r;
    return r;
  }

  Entry constant(const std::string& base, NDArray v) {
    return out_.add_constant(names_(base), std::move(v));
  }

  /// Adds `n` (inputs already in the new graph) as old node `i`'s replacement, in `layout`.
  void emit(int i, Node n, const std::string& layout) {
    int outs = n.num_outputs();
    int m = out_.add_node(std::move(n));
    map_.set_node(i, m, outs);
    if (!layout.empty()) layout_[Entry{m, 0}] = layout;
  }

  /// Old node `i` unchanged, its operands in NCHW.
  void emit_plain(int i) {
    const Node& n = g_.node(i);
    Node r = map_.remap(n);
    for (size_t k = 0; k < r.inputs.size(); ++k)
      r.inputs[k] = as_layout(r.inputs[k], g_.type_of(n.inputs[k]), "");
    emit(i, std::move(r), "");
  }

  bool try_conv2d(int i) {
    const Node& n = g_.node(i);
    const TensorType &xt = g_.type_of(n.inputs[0]), &wt = g_.type_of(n.inputs[1]);
    if (!is_f32(xt) || xt.shape.size() != 4 || !is_f32_constant(g_, n.inputs[1])) return false;
    topi::Conv2DWorkload wl;
    wl.batch = xt.shape[0];
    wl.in_channel = xt.shape[1];
    wl.height = xt.shape[2];
    wl.width = xt.shape[3];
    wl.out_channel = wt.shape[0];
    wl.kernel_h = wt.shape[2];
    wl.kernel_w = wt.shape[3];
    wl.params = detail::conv_params(n.attrs);
    const bool depthwise = wl.params.groups > 1 && wl.params.groups == wl.in_channel &&
                           wl.out_channel == wl.in_channel;
    if (wl.params.groups != 1 && !depthwise) return false;
    const NDArray& w = g_.node(n.inputs[1].node).value;
    Node r;
    r.name = n.name;
    r.attrs.set("strides", n.attrs.get_ints("strides"));
    r.attrs.set("padding", n.attrs.get_ints("padding"));
    r.attrs.set("dilation", n.attrs.get_ints("dilation"));
    int64_t ic_bn = 0, oc_bn = 0;
    NDArray packed;
    try {
      if (depthwise) {
        autotune::Config cfg = config_for([&] { return depthwise_conv2d_task(wl, target_); });
        ic_bn = oc_bn =
            topi::define_depthwise_nchwc_knobs(cfg, wl, target_, topi::ChannelBlocks::kDefault);
        if (oc_bn < 8) return false;
        packed = pack_depthwise_weight(w, oc_bn);
        r.op = "depthwise_conv2d_nchwc";
      } else if (use_winograd(wl)) {
        // 3x3 stride-1 layers with enough channels and pixels: Winograd F(2x2, 3x3), the
        // kernel transformed here once (topi/conv2d_winograd.h).
        autotune::Config cfg = config_for([&] { return conv2d_winograd_task(wl, target_); });
        topi::WinogradLayout l = topi::define_conv2d_winograd_knobs(cfg, wl, target_);
        ic_bn = l.ic_bn;
        oc_bn = l.oc_bn;
        if (oc_bn < 8 || ic_bn < 8) return false;
        packed = topi::transform_winograd_weight(w, l.m, ic_bn, oc_bn);
        r.op = "conv2d_winograd_nchwc";
      } else {
        autotune::Config cfg = config_for([&] { return conv2d_task(wl, target_); });
        topi::Conv2DNCHWcLayout l =
            topi::define_conv2d_nchwc_knobs(cfg, wl, target_, topi::ChannelBlocks::kDefault);
        ic_bn = l.ic_bn;
        oc_bn = l.oc_bn;
        if (oc_bn < 8) return false;  // too narrow for the vector micro-kernel: keep NCHW
        packed = pack_conv_weight(w, ic_bn, oc_bn);
        r.op = "conv2d_nchwc";
      }
    } catch (const Error&) {
      return false;  // a workload the blocked templates do not cover stays an NCHW conv2d
    }
    std::string wname = g_.node(n.inputs[1].node).name;
    r.inputs = {as_layout(map_[n.inputs[0]], xt, blocked_layout(ic_bn)),
                constant(wname + "_packed", packed)};
    r.outputs = {blocked_type(n.outputs[0], oc_bn)};
    emit(i, std::move(r), blocked_layout(oc_bn));
    return true;
  }

  /// The stacked kernel of a sub-pixel transposed convolution (topi/subpixel.h):
  /// W'[(ry·sw + rx)·O + o, c, ty, tx] = w[c, o, ry + sh·(Th−1−ty), rx + sw·(Tw−1−tx)] (zero
  /// past the kernel), with `rows` >= sh·sw·O output channels (zero past sh·sw·O).
  static NDArray stack_subpixel_weight(const NDArray& w, int64_t sh, int64_t sw, int64_t th,
                                       int64_t tw, int64_t rows) {
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

  /// conv2d_transpose (groups 1, dilation 1, a stride > 1) by sub-pixel decomposition
  /// (topi/subpixel.h): ONE conv2d_nchwc over x computing the s² phases as s²·O output channels
  /// (T = ceil(K/s) taps each, so only the useful multiply-adds), then a subpixel_interleave
  /// that scatters them into the output, NCHW<b>c when a block b >= 8 divides O (the epilogue
  /// and the next layer stay blocked), else NCHW. When no block of the phases divides O (a few
  /// output channels, e.g. an image's 3), the phases are padded with zero channels to a whole
  /// vector block.
  bool try_conv2d_transpose_subpixel(int i) {
    const Node& n = g_.node(i);
    const TensorType& xt = g_.type_of(n.inputs[0]);
    if (!is_f32(xt) || xt.shape.size() != 4 || !is_f32_constant(g_, n.inputs[1])) return false;
    const NDArray& w = g_.node(n.inputs[1].node).value;
    const TensorType& ot = n.outputs[0];
    if (w.ndim() != 4 || w.shape()[0] != xt.shape[1] || ot.shape.size() != 4 ||
        ot.shape[1] != w.shape()[1])
      return false;
    const int64_t C = w.shape()[0], O = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
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
    const int64_t lanes = std::max(1, target_.vector_bits() / 32);
    topi::Conv2DWorkload wl;
    wl.batch = xt.shape[0];
    wl.in_channel = C;
    wl.height = xt.shape[2];
    wl.width = xt.shape[3];
    wl.kernel_h = ay.taps;
    wl.kernel_w = ax.taps;
    wl.params.padding = {ay.pad_lo, ax.pad_lo, ay.pad_hi, ax.pad_hi};
    auto blocks = [&](int64_t rows) -> std::optional<topi::Conv2DNCHWcLayout> {
      wl.out_channel = rows;
      try {
        autotune::Config cfg = config_for([&] { return conv2d_task(wl, target_); });
        return topi::define_conv2d_nchwc_knobs(cfg, wl, target_, topi::ChannelBlocks::kDefault);
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
      // The phases in whole vector blocks (zero channels past sh·sw·O); the output blocked by
      // a divisor of O when one is wide enough.
      rows = (rows + lanes - 1) / lanes * lanes;
      if (rows != wl.out_channel) l = blocks(rows);
      if (!l) return false;
      for (int64_t b = std::min<int64_t>(lanes, O); b >= 8 && out_block == 0; --b)
        if (O % b == 0) out_block = b;
    }
    if (l->oc_bn < 8) return false;
    if (out_block == l->oc_bn && try_subpixel_phases(i, sh, sw, l->ic_bn, l->oc_bn)) return true;
    const std::string wname = g_.node(n.inputs[1].node).name;
    Node conv;
    conv.op = "conv2d_nchwc";
    conv.name = n.name + "_phases";
    conv.attrs.set("strides", Ints{1, 1});
    conv.attrs.set("padding", Ints{ay.pad_lo, ax.pad_lo, ay.pad_hi, ax.pad_hi});
    conv.attrs.set("dilation", Ints{1, 1});
    conv.inputs = {
        as_layout(map_[n.inputs[0]], xt, blocked_layout(l->ic_bn)),
        constant(wname + "_subpixel_packed",
                 pack_conv_weight(stack_subpixel_weight(w, sh, sw, ay.taps, ax.taps, rows),
                                  l->ic_bn, l->oc_bn))};
    conv.outputs = {
        blocked_type({{xt.shape[0], rows, ay.conv_extent, ax.conv_extent}, xt.dtype}, l->oc_bn)};
    Node r;
    r.op = "subpixel_interleave";
    r.name = n.name;
    r.attrs.set("strides", Ints{sh, sw});
    r.attrs.set("shift", Ints{ay.shift, ax.shift});
    r.attrs.set("offset", Ints{ay.offset, ax.offset});
    r.attrs.set("out_size", Ints{ot.shape[2], ot.shape[3]});
    r.attrs.set("channels", O);
    r.attrs.set("out_block", out_block);
    r.inputs = {Entry{out_.add_node(std::move(conv)), 0}};
    r.outputs = {out_block > 0 ? blocked_type(ot, out_block) : ot};
    emit(i, std::move(r), out_block > 0 ? blocked_layout(out_block) : "");
    return true;
  }

  /// Sub-pixel decomposition with one conv2d_nchwc per phase (topi::plan_subpixel_phase): no
  /// extra row and column (the stacked convolution's (H+1)·(W+1) positions against H·W: 56%
  /// more work on DCGAN's 4x4 layer) and no zero taps, then a subpixel_interleave of the
  /// sh·sw phases into NCHW<oc_bn>c. Every phase must have taps and outputs, and the same
  /// blocks `ic_bn`, `oc_bn` (a divisor of O); else false, and nothing is added.
  bool try_subpixel_phases(int i, int64_t sh, int64_t sw, int64_t ic_bn, int64_t oc_bn) {
    const Node& n = g_.node(i);
    const TensorType& xt = g_.type_of(n.inputs[0]);
    const TensorType& ot = n.outputs[0];
    const NDArray& w = g_.node(n.inputs[1].node).value;
    const int64_t C = w.shape()[0], O = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
    topi::Conv2DParams t = detail::conv_params(n.attrs, "conv2d_transpose");
    std::vector<topi::SubpixelAxis> py, px;
    try {
      for (int64_t r = 0; r < sh; ++r)
        py.push_back(topi::plan_subpixel_phase(xt.shape[2], KH, sh, t.padding.top, ot.shape[2], r));
      for (int64_t r = 0; r < sw; ++r)
        px.push_back(
            topi::plan_subpixel_phase(xt.shape[3], KW, sw, t.padding.left, ot.shape[3], r));
    } catch (const Error&) {
      return false;
    }
    for (const std::vector<topi::SubpixelAxis>* axis : {&py, &px})
      for (const topi::SubpixelAxis& a : *axis)
        if (a.taps == 0 || a.conv_extent == 0) return false;
    auto workload = [&](const topi::SubpixelAxis& ay, const topi::SubpixelAxis& ax) {
      topi::Conv2DWorkload wl;
      wl.batch = xt.shape[0];
      wl.in_channel = C;
      wl.height = xt.shape[2];
      wl.width = xt.shape[3];
      wl.out_channel = O;
      wl.kernel_h = ay.taps;
      wl.kernel_w = ax.taps;
      wl.params.padding = {ay.pad_lo, ax.pad_lo, ay.pad_hi, ax.pad_hi};
      return wl;
    };
    for (const topi::SubpixelAxis& ay : py)
      for (const topi::SubpixelAxis& ax : px) {
        try {
          topi::Conv2DWorkload wl = workload(ay, ax);
          autotune::Config cfg = config_for([&] { return conv2d_task(wl, target_); });
          topi::Conv2DNCHWcLayout l =
              topi::define_conv2d_nchwc_knobs(cfg, wl, target_, topi::ChannelBlocks::kDefault);
          if (l.ic_bn != ic_bn || l.oc_bn != oc_bn) return false;
        } catch (const Error&) {
          return false;
        }
      }
    const std::string wname = g_.node(n.inputs[1].node).name;
    Entry data = as_layout(map_[n.inputs[0]], xt, blocked_layout(ic_bn));
    Node r;
    for (int64_t ry = 0; ry < sh; ++ry)
      for (int64_t rx = 0; rx < sw; ++rx) {
        const topi::SubpixelAxis &ay = py[ry], &ax = px[rx];
        // Wp[o, c, ty, tx] = w[c, o, ry + sh·(Ty−1−ty), rx + sw·(Tx−1−tx)]
        NDArray wp = NDArray::empty({O, C, ay.taps, ax.taps}, w.dtype());
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
        conv.op = "conv2d_nchwc";
        conv.name = n.name + phase;
        conv.attrs.set("strides", Ints{1, 1});
        conv.attrs.set("padding", Ints{ay.pad_lo, ax.pad_lo, ay.pad_hi, ax.pad_hi});
        conv.attrs.set("dilation", Ints{1, 1});
        conv.inputs = {data,
                       constant(wname + phase + "_packed", pack_conv_weight(wp, ic_bn, oc_bn))};
        conv.outputs = {
            blocked_type({{xt.shape[0], O, ay.conv_extent, ax.conv_extent}, xt.dtype}, oc_bn)};
        r.inputs.push_back(Entry{out_.add_node(std::move(conv)), 0});
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
    r.attrs.set("channels", O);
    r.attrs.set("out_block", oc_bn);
    r.outputs = {blocked_type(ot, oc_bn)};
    emit(i, std::move(r), blocked_layout(oc_bn));
    return true;
  }

  /// conv2d_transpose(x, w [C, O, KH, KW]) as conv2d_nchwc over x dilated by the strides, padded
  /// by dilation·(K − 1) − padding (+ output_padding after), with the kernel flipped and its
  /// channels swapped — when no padding is negative (a crop) and the blocks are wide enough.
  bool try_conv2d_transpose(int i) {
    if (try_conv2d_transpose_subpixel(i)) return true;
    const Node& n = g_.node(i);
    const TensorType& xt = g_.type_of(n.inputs[0]);
    if (!is_f32(xt) || xt.shape.size() != 4 || !is_f32_constant(g_, n.inputs[1])) return false;
    const NDArray& w = g_.node(n.inputs[1].node).value;
    if (w.ndim() != 4 || w.shape()[0] != xt.shape[1]) return false;
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
      autotune::Config cfg = config_for([&] { return conv2d_task(wl, target_); });
      topi::Conv2DNCHWcLayout l =
          topi::define_conv2d_nchwc_knobs(cfg, wl, target_, topi::ChannelBlocks::kDefault);
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
    Entry data = as_layout(map_[n.inputs[0]], xt, "");
    TensorType dt{{xt.shape[0], C, wl.height, wl.width}, xt.dtype};
    if (t.stride_h > 1 || t.stride_w > 1) {
      Node d;
      d.op = "dilate2d";
      d.attrs.set("strides", Ints{t.stride_h, t.stride_w});
      d.inputs = {data};
      d.outputs = {dt};
      data = Entry{out_.add_node(std::move(d)), 0};
    }
    Node r;
    r.op = "conv2d_nchwc";
    r.name = n.name;
    r.attrs.set("strides", Ints{1, 1});
    r.attrs.set("padding", Ints{pad.top, pad.left, pad.bottom, pad.right});
    r.attrs.set("dilation", Ints{t.dilation_h, t.dilation_w});
    r.inputs = {as_layout(data, dt, blocked_layout(ic_bn)),
                constant(g_.node(n.inputs[1].node).name + "_flipped_packed",
                         pack_conv_weight(flipped, ic_bn, oc_bn))};
    r.outputs = {blocked_type(n.outputs[0], oc_bn)};
    emit(i, std::move(r), blocked_layout(oc_bn));
    return true;
  }

  /// dense(x, W) with constant W [N, K], or matmul(x, B) with constant B [K, N] (W = Bᵀ).
  bool try_dense(int i) {
    const Node& n = g_.node(i);
    const TensorType& xt = g_.type_of(n.inputs[0]);
    if (!is_f32(xt) || xt.shape.size() != 2 || !is_f32_constant(g_, n.inputs[1])) return false;
    NDArray w = g_.node(n.inputs[1].node).value;
    if (w.ndim() != 2) return false;
    if (n.op == "matmul") w = transposed(w);
    const int64_t N = w.shape()[0];
    autotune::Config cfg = config_for([&] {
      return dense_task({xt.shape[0], N, xt.shape[1]}, target_);
    });
    const int64_t nb = topi::dense_pack_width(cfg, xt.shape[0], N, target_);
    Node r;
    r.op = "dense_packed";
    r.name = n.name;
    r.attrs.set("units", N);
    // One packed copy per (weight, transposition, panel width): a weight used at every step of
    // a recurrence is packed once.
    auto key = std::make_tuple(n.inputs[1].node, n.op == "matmul", nb);
    auto hit = packed_dense_.find(key);
    if (hit == packed_dense_.end())
      hit = packed_dense_
                .emplace(key, constant(g_.node(n.inputs[1].node).name + "_packed",
                                       pack_dense_weight(w, nb)))
                .first;
    r.inputs = {as_layout(map_[n.inputs[0]], xt, ""), hit->second};
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
      slice.inputs = {Entry{out_.add_node(std::move(r)), 0}};
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
      add.inputs = {Entry{out_.add_node(std::move(r)), 0},
                    as_layout(map_[n.inputs[2]], g_.type_of(n.inputs[2]), "")};
      add.outputs = n.outputs;
      emit(i, std::move(add), "");
      return true;
    }
    emit(i, std::move(r), "");
    return true;
  }

  /// lstm_cell(xg, h, c, R) with constant float32 R [4H, H] → lstm_cell_packed over R packed
  /// on the host in topi's layout (topi::packed_lstm_onnx_index: panels of hb hidden units, the
  /// gates reordered from ONNX's i, o, f, c to topi's i, f, g, o), once per (R, hb).
  bool try_lstm_cell(int i) {
    const Node& n = g_.node(i);
    const TensorType& ht = g_.type_of(n.inputs[1]);
    if (!is_f32(ht) || ht.shape.size() != 2 || !is_f32_constant(g_, n.inputs[3])) return false;
    const NDArray& R = g_.node(n.inputs[3].node).value;
    const int64_t H = ht.shape[1];
    if (R.ndim() != 2 || R.shape()[0] != 4 * H || R.shape()[1] != H) return false;
    autotune::Config cfg = config_for([&] { return lstm_cell_task(ht.shape[0], H, target_); });
    const int64_t hb = topi::lstm_block_width(cfg, H);  // build_module looks up the same config
    auto key = std::make_tuple(n.inputs[3].node, true, -hb);  // apart from dense's keys (nb > 0)
    auto hit = packed_dense_.find(key);
    if (hit == packed_dense_.end()) {
      NDArray rp = NDArray::empty(topi::packed_lstm_onnx_weight_shape(H, hb), R.dtype());
      float* dst = rp.data_as<float>();
      std::fill(dst, dst + rp.numel(), 0.0f);  // the units past H
      const float* src = R.data_as<float>();
      for (int64_t row = 0; row < 4 * H; ++row)
        for (int64_t k = 0; k < H; ++k)
          dst[topi::packed_lstm_onnx_index(row, k, H, hb)] = src[row * H + k];
      hit = packed_dense_
                .emplace(key, constant(g_.node(n.inputs[3].node).name + "_packed", std::move(rp)))
                .first;
    }
    Node r = map_.remap(n);
    r.op = "lstm_cell_packed";
    for (size_t k = 0; k < 3; ++k)
      r.inputs[k] = as_layout(r.inputs[k], g_.type_of(n.inputs[k]), "");
    r.inputs[3] = hit->second;
    emit(i, std::move(r), "");
    return true;
  }

  /// An element-wise / broadcast op or a pooling op with a blocked operand, computed blocked.
  bool try_blocked_elemwise(int i) {
    const Node& n = g_.node(i);
    const OpDef* def = OpRegistry::global().find(n.op);
    if (!def || n.num_outputs() != 1) return false;
    static const std::set<std::string> pools = {"max_pool2d", "avg_pool2d", "global_max_pool2d",
                                                "global_avg_pool2d"};
    const bool pool = pools.count(n.op) != 0;
    if (!pool && def->pattern != topi::OpPattern::kElemWise &&
        def->pattern != topi::OpPattern::kBroadcast)
      return false;
    const TensorType& ot = n.outputs[0];
    if (ot.shape.size() != 4) return false;
    std::string L;
    for (const Entry& e : n.inputs) {
      const std::string& l = layout_of(map_[e]);
      if (!l.empty()) {
        L = l;
        break;
      }
    }
    if (L.empty()) return false;
    const int64_t bn = block_of(L);
    if (ot.shape[1] % bn != 0) return false;
    Node r = map_.remap(n);
    if (pool) {
      if (n.inputs.size() != 1) return false;
      r.attrs.set("layout", L);
    } else {
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const TensorType& lt = g_.type_of(n.inputs[k]);
        Entry ne = r.inputs[k];
        if (layout_of(ne) == L) continue;
        if (lt.shape == ot.shape) {
          r.inputs[k] = as_layout(ne, lt, L);
        } else if (lt.numel() == 1 && lt.shape.size() <= 4) {
          // a scalar broadcasts in any layout
        } else if (is_f32_constant(g_, n.inputs[k]) && is_per_channel(lt, ot)) {
          const Node& c = g_.node(n.inputs[k].node);
          r.inputs[k] = constant(c.name + "_" + L, blocked_per_channel(c.value, bn));
        } else {
          return false;
        }
      }
      // A blocked operand of another block size, or one that broadcasts into the output,
      // is not handled: compute in NCHW.
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const std::string& l = layout_of(r.inputs[k]);
        if (!l.empty() && (l != L || g_.type_of(n.inputs[k]).shape != ot.shape)) return false;
      }
    }
    r.outputs = {blocked_type(ot, bn)};
    emit(i, std::move(r), L);
    return true;
  }

  /// Winograd or direct for a conv2d: the faster of the two when the tuning log has records of
  /// both (compared inside a model when both were timed there, else as the tuner measured
  /// them), else topi::prefer_winograd.
  bool use_winograd(const topi::Conv2DWorkload& wl) const {
    if (tuned_ && !tuned_->empty() && topi::winograd_candidate(wl)) {
      const autotune::Task wt = conv2d_winograd_task(wl, target_), dt = conv2d_task(wl, target_);
      autotune::BestRecord w = tuned_->best(wt), d = tuned_->best(dt);
      if (w.best && d.best && w.from_network != d.from_network) {
        w = tuned_->best(wt, autotune::Protocol::kIsolated);
        d = tuned_->best(dt, autotune::Protocol::kIsolated);
      }
      if (w.best && d.best) return w.best->result.mean_s < d.best->result.mean_s;
    }
    return topi::prefer_winograd(wl, target_);
  }

  /// The tuned config of `task` when a tuning log has one, else the fallback.
  autotune::Config config_for(const std::function<autotune::Task()>& task) {
    if (tuned_ && !tuned_->empty()) {
      if (std::optional<autotune::Config> c = tuned_->lookup(task())) return *c;
    }
    return autotune::Config::fallback();
  }

  const Graph& g_;
  Target target_;
  TunedConfigs* tuned_;
  std::map<std::tuple<int, bool, int64_t>, Entry> packed_dense_;
  Graph out_;
  detail::EntryMap map_;
  detail::NameGen names_;
  std::map<Entry, std::string> layout_;                        // new entry → "NCHW<b>c"
  std::map<std::pair<Entry, std::string>, Entry> transforms_;  // memoized layout_transforms
};

}  // namespace

Graph alter_op_layout(const Graph& g, const Target& target, TunedConfigs* tuned) {
  return LayoutAlterer(g, target, tuned).run();
}

}  // namespace kiln::graph
