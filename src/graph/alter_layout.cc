// Layout alteration for x86 (TVM's AlterOpLayout for conv2d_NCHWc): one forward walk that
// rewrites
//   conv2d (groups 1, constant weights)     → conv2d_nchwc on NCHW<ic>c data, weights packed
//                                              into OIHW<ic>i<oc>o, output NCHW<oc>c
//   conv2d (depthwise, multiplier 1)        → depthwise_conv2d_nchwc, NCHW<b>c in and out
//   conv2d_transpose (groups 1)             → dilate2d, then conv2d_nchwc with the kernel
//                                              flipped and its channels swapped
//   dense / matmul (constant weights)       → dense_packed over weights packed in panels
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
#include "kiln/topi/dense.h"
#include "kiln/topi/depthwise_conv2d.h"
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
      autotune::Config cfg = config_for([&] {
        return depthwise ? depthwise_conv2d_task(wl, target_) : conv2d_task(wl, target_);
      });
      if (depthwise) {
        ic_bn = oc_bn =
            topi::define_depthwise_nchwc_knobs(cfg, wl, target_, topi::ChannelBlocks::kDefault);
        if (oc_bn < 8) return false;
        packed = pack_depthwise_weight(w, oc_bn);
        r.op = "depthwise_conv2d_nchwc";
      } else {
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

  /// conv2d_transpose(x, w [C, O, KH, KW]) as conv2d_nchwc over x dilated by the strides, padded
  /// by dilation·(K − 1) − padding (+ output_padding after), with the kernel flipped and its
  /// channels swapped — when no padding is negative (a crop) and the blocks are wide enough.
  bool try_conv2d_transpose(int i) {
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
    const int64_t nb = topi::dense_pack_width(cfg, xt.shape[0], N);
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
