// Registration of the blocked-layout ops that layout alteration (alter_layout.cc) introduces (with
// layout_transform, registered in ops_transform.cc):
//   conv2d_nchwc(data, packed_kernel, …)           topi's x86 fast convolution (groups 1)
//   depthwise_conv2d_nchwc(data, packed_kernel, …) the blocked depthwise convolution
//   conv2d_grouped_nchwc(data, packed_kernel, …)   a blocked grouped convolution (groups > 1)
//   dense_packed(x, Wp, units)                      dense over weights packed in panels
//   dilate2d(x, strides)                            zeros between pixels (transposed convs)
//   subpixel_interleave(phases…, …)                 the phases of a transposed conv (one stacked
//                                                   conv, or one conv per phase) interleaved
//   channel_shuffle(x, groups, layout)              ShuffleNet's channel shuffle (reshape to
//                                                   groups, transpose, reshape) on NCHW<b>c data
//   pack_conv2d_weight(w, ic_bn, oc_bn)             conv2d_nchwc's weight layout, for weights
//                                                   computed at run time
// Constant weights are packed by the pass, so they are not packed at run time.

#include "../op_attrs.h"
#include "kiln/graph/op_registry.h"
#include "kiln/ir/op.h"
#include "kiln/topi/conv2d.h"
#include "kiln/topi/conv2d_grouped.h"
#include "kiln/topi/conv2d_winograd.h"
#include "kiln/topi/dense.h"
#include "kiln/topi/depthwise_conv2d.h"
#include "kiln/topi/subpixel.h"

namespace kiln::graph {

namespace {

using Ints = std::vector<int64_t>;

std::vector<te::Tensor> one(te::Tensor t) { return {std::move(t)}; }

/// The attributes of a subpixel_interleave node.
topi::SubpixelParams subpixel_params(const Attrs& a) {
  topi::SubpixelParams p;
  std::tie(p.stride_h, p.stride_w) = detail::pair_attr(a, "strides", "subpixel_interleave");
  std::tie(p.shift_h, p.shift_w) = detail::pair_attr(a, "shift", "subpixel_interleave");
  std::tie(p.offset_h, p.offset_w) = detail::pair_attr(a, "offset", "subpixel_interleave");
  std::tie(p.out_h, p.out_w) = detail::pair_attr(a, "out_size", "subpixel_interleave");
  p.channels = a.get_int("channels");
  p.out_block = a.get_int("out_block");
  const Ints& po = a.get_ints("phase_offsets");
  if (!po.empty()) {
    KILN_USER_CHECK(static_cast<int64_t>(po.size()) == p.stride_h + p.stride_w)
        << "subpixel_interleave: phase_offsets needs " << p.stride_h + p.stride_w
        << " values (strides " << p.stride_h << " + " << p.stride_w << "), got "
        << attr_value_str(po);
    p.phase_offsets_h.assign(po.begin(), po.begin() + p.stride_h);
    p.phase_offsets_w.assign(po.begin() + p.stride_h, po.end());
  }
  return p;
}

/// The block b of layout "NCHW<b>c"; a user error naming `op` for any other text.
int64_t nchwc_block(const std::string& layout, const char* op) {
  const bool ok = layout.size() > 5 && layout.rfind("NCHW", 0) == 0 && layout.back() == 'c' &&
                  layout.find_first_not_of("0123456789", 4) == layout.size() - 1 &&
                  layout.size() - 5 <= 6;
  const int64_t b = ok ? std::stoll(layout.substr(4, layout.size() - 5)) : 0;
  KILN_USER_CHECK(b > 0) << op << ": layout '" << layout
                         << "' is neither NCHW nor NCHW<b>c with a positive block b";
  return b;
}

/// The attribute schema of a blocked convolution (groups are implied by the op).
std::vector<AttrSpec> conv_attrs() { return detail::conv2d_attr_specs(false); }

}  // namespace

void register_layout_ops(OpRegistry& r) {
  OpDef conv;
  conv.name = "conv2d_nchwc";
  conv.min_inputs = conv.max_inputs = 2;
  conv.pattern = topi::kConv2DPattern;
  conv.attrs = conv_attrs();
  conv.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::conv2d_nchwc(in[0], in[1], detail::conv_params(a, "conv2d_nchwc"), {}, n));
  };
  conv.infer_rule = [](const std::vector<TensorType>& in, const Attrs& a) {
    KILN_USER_CHECK(in[0].dtype == in[1].dtype)
        << "conv2d_nchwc: dtype mismatch: data " << in[0].str() << " and kernel " << in[1].str();
    return std::vector<TensorType>{
        {topi::conv2d_nchwc_shape(in[0].shape, in[1].shape, detail::conv_params(a, "conv2d_nchwc")),
         in[0].dtype}};
  };
  r.add(conv);

  // Winograd F(m x m, 3 x 3): data NCHW<x>c and a kernel transformed at compile time
  // (topi::transform_winograd_weight, [alpha, alpha, O/y, C/x, x, y]).
  OpDef wino = conv;
  wino.name = "conv2d_winograd_nchwc";
  wino.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::conv2d_winograd_nchwc(in[0], in[1],
                                           detail::conv_params(a, "conv2d_winograd_nchwc"), {}, n));
  };
  wino.infer_rule = [](const std::vector<TensorType>& in, const Attrs& a) {
    KILN_USER_CHECK(in[0].dtype == in[1].dtype) << "conv2d_winograd_nchwc: dtype mismatch: data "
                                                << in[0].str() << " and kernel " << in[1].str();
    return std::vector<TensorType>{
        {topi::conv2d_winograd_nchwc_shape(in[0].shape, in[1].shape,
                                           detail::conv_params(a, "conv2d_winograd_nchwc")),
         in[0].dtype}};
  };
  r.add(wino);

  OpDef dw = conv;
  dw.name = "depthwise_conv2d_nchwc";
  dw.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::depthwise_conv2d_nchwc(
        in[0], in[1], detail::conv_params(a, "depthwise_conv2d_nchwc"), {}, n));
  };
  dw.infer_rule = [](const std::vector<TensorType>& in, const Attrs& a) {
    KILN_USER_CHECK(in[0].dtype == in[1].dtype) << "depthwise_conv2d_nchwc: dtype mismatch: data "
                                                << in[0].str() << " and kernel " << in[1].str();
    return std::vector<TensorType>{
        {topi::depthwise_conv2d_nchwc_shape(in[0].shape, in[1].shape,
                                            detail::conv_params(a, "depthwise_conv2d_nchwc")),
         in[0].dtype}};
  };
  r.add(dw);

  // Grouped (1 < groups, not depthwise): the kernel packed by topi::pack_grouped_conv2d_weight
  // into [O/y, R, KH, KW, x, y]; the groups attribute says which input blocks each output block
  // reads.
  OpDef grouped = conv;
  grouped.name = "conv2d_grouped_nchwc";
  grouped.attrs.push_back({"groups", AttrKind::kInt, std::nullopt});
  grouped.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::conv2d_grouped_nchwc(in[0], in[1],
                                          detail::conv_params(a, "conv2d_grouped_nchwc"), {}, n));
  };
  grouped.infer_rule = [](const std::vector<TensorType>& in, const Attrs& a) {
    KILN_USER_CHECK(in[0].dtype == in[1].dtype) << "conv2d_grouped_nchwc: dtype mismatch: data "
                                                << in[0].str() << " and kernel " << in[1].str();
    return std::vector<TensorType>{
        {topi::conv2d_grouped_nchwc_shape(in[0].shape, in[1].shape,
                                          detail::conv_params(a, "conv2d_grouped_nchwc")),
         in[0].dtype}};
  };
  r.add(grouped);

  // dilate2d(x, strides): x [N, C, H, W] with strides - 1 zeros between neighbours along H and
  // W: out[n, c, y, x] = x[n, c, y / sh, x / sw] where both divide, else 0. The input of a
  // transposed convolution rewritten as a convolution (alter_layout.cc).
  OpDef dilate;
  dilate.name = "dilate2d";
  dilate.pattern = topi::OpPattern::kInjective;
  dilate.attrs = {{"strides", AttrKind::kInts, std::nullopt}};
  dilate.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    const te::Tensor& x = in[0];
    KILN_USER_CHECK(x.ndim() == 4)
        << "dilate2d: expected a 4-D NCHW tensor, got " << tensor_type(x).str();
    auto [sh, sw] = detail::pair_attr(a, "strides", "dilate2d");
    KILN_USER_CHECK(sh >= 1 && sw >= 1)
        << "dilate2d: strides must be positive, got (" << sh << ", " << sw << ")";
    TensorType t = tensor_type(x);
    std::vector<ir::Expr> shape = {x->shape[0], x->shape[1],
                                   ir::Expr(static_cast<int32_t>((t.shape[2] - 1) * sh + 1)),
                                   ir::Expr(static_cast<int32_t>((t.shape[3] - 1) * sw + 1))};
    ir::Expr esh(static_cast<int32_t>(sh)), esw(static_cast<int32_t>(sw));
    return one(te::compute(
        shape,
        [&](ir::Var b, ir::Var c, ir::Var y, ir::Var w) {
          ir::Expr on_grid = ir::floormod(y, esh) == 0 && ir::floormod(w, esw) == 0;
          return ir::if_then_else(on_grid, x(b, c, ir::floordiv(y, esh), ir::floordiv(w, esw)),
                                  ir::make_zero(x->dtype));
        },
        n, std::string(topi::tag::kInjective) + ",dilate"));
  };
  r.add(dilate);

  // subpixel_interleave(phases): a transposed convolution's s² phases, computed by one stacked
  // stride-1 conv2d / conv2d_nchwc (NCHW or NCHW<b>c), scattered to the output (NCHW, or
  // NCHW<out_block>c when out_block > 0): out[n, o, y, x] = phases[n, (ry·sw + rx)·channels + o,
  // floor(qy / sh) + offset_h, floor(qx / sw) + offset_w] with q = (y, x) + shift and
  // pack_conv2d_weight(w, ic_bn, oc_bn): OIHW → [O/oc, C/ic, KH, KW, ic, oc], for a convolution
  // whose weights are computed at run time (CondConv's mixture of expert kernels); constant
  // weights are packed by the layout pass.
  OpDef pack;
  pack.name = "pack_conv2d_weight";
  pack.pattern = topi::OpPattern::kInjective;
  pack.attrs = {{"ic_bn", AttrKind::kInt, std::nullopt}, {"oc_bn", AttrKind::kInt, std::nullopt}};
  pack.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::pack_conv2d_weight(in[0], a.get_int("ic_bn"), a.get_int("oc_bn"), n));
  };
  pack.infer_rule = [](const std::vector<TensorType>& in, const Attrs& a) {
    return std::vector<TensorType>{
        {topi::packed_conv2d_weight_shape(in[0].shape, a.get_int("ic_bn"), a.get_int("oc_bn")),
         in[0].dtype}};
  };
  r.add(pack);

  // r = q mod strides (topi/subpixel.h; alter_layout.cc emits it).
  OpDef sub;
  sub.name = "subpixel_interleave";
  sub.pattern = topi::OpPattern::kInjective;
  // With one input per phase (phase (ry, rx) the input ry·sw + rx, O channels each), phase
  // (ry, rx) reads its own input at offset + phase_offsets[ry] (rows), offset +
  // phase_offsets[sh + rx] (columns).
  sub.min_inputs = 1;
  sub.max_inputs = -1;
  sub.attrs = {
      {"strides", AttrKind::kInts, std::nullopt}, {"shift", AttrKind::kInts, Ints{0, 0}},
      {"offset", AttrKind::kInts, Ints{0, 0}},    {"out_size", AttrKind::kInts, std::nullopt},
      {"channels", AttrKind::kInt, std::nullopt}, {"out_block", AttrKind::kInt, int64_t{0}},
      {"phase_offsets", AttrKind::kInts, Ints{}}};
  sub.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::subpixel_interleave(in, subpixel_params(a), n));
  };
  sub.infer_rule = [](const std::vector<TensorType>& in, const Attrs& a) {
    std::vector<std::vector<int64_t>> shapes;
    for (const TensorType& t : in) {
      KILN_USER_CHECK(t.dtype == in[0].dtype)
          << "subpixel_interleave: dtype mismatch: " << in[0].str() << " and " << t.str();
      shapes.push_back(t.shape);
    }
    return std::vector<TensorType>{
        {topi::subpixel_interleave_shape(shapes, subpixel_params(a)), in[0].dtype}};
  };
  r.add(sub);

  // channel_shuffle(x, groups, layout): output channel j = i·groups + g reads input channel
  // g·(C/groups) + i — ShuffleNet's reshape [N, groups, C/groups, H, W], transpose (0, 2, 1, 3,
  // 4), reshape [N, C, H, W], which alter_layout.cc rewrites to this op when x is blocked: x and
  // the result in `layout` (NCHW or NCHW<b>c).
  OpDef shuffle;
  shuffle.name = "channel_shuffle";
  shuffle.pattern = topi::OpPattern::kInjective;
  shuffle.attrs = {{"groups", AttrKind::kInt, std::nullopt},
                   {"layout", AttrKind::kString, std::string("NCHW")}};
  shuffle.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    const te::Tensor& x = in[0];
    const TensorType t = tensor_type(x);
    const std::string& layout = a.get_string("layout");
    const int64_t b = layout == "NCHW" ? 0 : nchwc_block(layout, "channel_shuffle");
    KILN_USER_CHECK(t.shape.size() == (b ? 5u : 4u) && (!b || t.shape[4] == b))
        << "channel_shuffle: expected a " << (b ? "[N, C/b, H, W, b]" : "[N, C, H, W]")
        << " tensor for layout " << layout << ", got " << t.str();
    const int64_t C = b ? t.shape[1] * b : t.shape[1], g = a.get_int("groups");
    KILN_USER_CHECK(g >= 1 && C % g == 0)
        << "channel_shuffle: " << C << " channels are not divisible into " << g << " groups";
    auto ci = [](int64_t v) { return ir::Expr(static_cast<int32_t>(v)); };
    auto source = [&](ir::Expr j) {
      return ir::floormod(j, ci(g)) * ci(C / g) + ir::floordiv(j, ci(g));
    };
    std::vector<ir::Expr> shape;
    for (int64_t d : t.shape) shape.push_back(ci(d));
    return one(te::compute(
        shape,
        [&](const std::vector<ir::Var>& i) {
          if (!b) return x(i[0], source(i[1]), i[2], i[3]);
          ir::Expr c = source(i[1] * ci(b) + i[4]);
          return x(i[0], ir::floordiv(c, ci(b)), i[2], i[3], ir::floormod(c, ci(b)));
        },
        n, std::string(topi::tag::kInjective) + ",channel_shuffle"));
  };
  r.add(shuffle);

  OpDef dense;
  dense.name = "dense_packed";
  dense.min_inputs = dense.max_inputs = 2;  // x, Wp (a bias is an add fused after it)
  dense.pattern = topi::kDensePattern;
  // units: the columns computed (whole panels); orig_units: the dense layer's own N when the
  // product was padded to whole panels (0: the same as units) — the workload a tuned config is
  // looked up by.
  dense.attrs = {{"units", AttrKind::kInt, std::nullopt},
                 {"orig_units", AttrKind::kInt, int64_t{0}}};
  dense.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::dense_packed(in[0], in[1], a.get_int("units"), {}, n));
  };
  r.add(dense);
}

}  // namespace kiln::graph
