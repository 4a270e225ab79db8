// Integer operators of quantized models (qnn.h): quantize / dequantize as broadcast float
// computes; the requantisation epilogue (int32 + bias → float32 · scale → round half to even in
// the float domain, clamped to the output range minus the zero point, then the zero point added,
// as ONNX Runtime's MLAS requantizes); plain int32 convolution / dense products on
// zero-point-centred operands; and the VNNI forms, which call quantized.h's u8 × s8 kernels on
// data shifted to uint8 and padded with its zero point, and requantize each register tile where
// it is computed (schedule_qnn_conv2d_nchwc). Host helpers pack int8 weights in the kernels'
// layouts and fold the zero-point compensation x_zp · Σw into the bias.
#include "kiln/topi/qnn.h"

#include <algorithm>

#include "kiln/topi/broadcast.h"
#include "kiln/topi/conv2d.h"
#include "kiln/topi/dense.h"
#include "kiln/topi/elemwise.h"
#include "kiln/topi/quantized.h"
#include "kiln/topi/x86_intrin.h"
#include "qnn_util.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using detail::check_channel_vectors;
using detail::check_requant;
using detail::ci;
using detail::is_q8;

namespace {

const DataType kF32 = DataType::Float(32), kI32 = DataType::Int(32), kU8 = DataType::UInt(8);

/// x's value as uint8 for VNNI: itself, or x + 128 for int8.
Expr as_u8(Expr v) {
  if (v.dtype() == kU8) return v;
  return cast(kU8, cast(kI32, v) + ci(128));
}

}  // namespace

Expr requantize_value(Expr acc, Expr scale, const RequantParams& p) {
  Expr f = cast(kF32, std::move(acc)) * std::move(scale);
  Expr r = Call::make(kF32, "nearbyint", {f}, CallKind::kPureIntrinsic);
  r = min(max(r, make_const(kF32, static_cast<double>(p.out_min - p.y_zero_point))),
          make_const(kF32, static_cast<double>(p.out_max - p.y_zero_point)));
  return cast(p.out_dtype, cast(kI32, r) + ci(p.y_zero_point));
}

te::Tensor qnn_quantize(const te::Tensor& x, const te::Tensor& scale, const te::Tensor& zero_point,
                        const std::string& name) {
  KILN_USER_CHECK(x->dtype == kF32 && scale->dtype == kF32)
      << "qnn_quantize: data and scale must be float32, got " << x->dtype << " and "
      << scale->dtype;
  const DataType qt = zero_point->dtype;
  KILN_USER_CHECK(is_q8(qt)) << "qnn_quantize: zero point must be uint8 or int8, got " << qt;
  te::Tensor y = round_even(divide(x, scale, name + "_div"), name + "_round");
  y = add(y, cast(zero_point, kF32, name + "_zp"), name + "_add");
  const double lo = qt == kU8 ? 0 : -128, hi = qt == kU8 ? 255 : 127;
  return cast(clip(y, lo, hi, name + "_clip"), qt, name);
}

te::Tensor qnn_dequantize(const te::Tensor& q, const te::Tensor& scale,
                          const te::Tensor& zero_point, const std::string& name) {
  KILN_USER_CHECK(is_q8(q->dtype) || q->dtype == kI32)
      << "qnn_dequantize: data must be uint8, int8 or int32, got " << q->dtype;
  KILN_USER_CHECK(scale->dtype == kF32)
      << "qnn_dequantize: scale must be float32, got " << scale->dtype;
  te::Tensor x =
      subtract(cast(q, kF32, name + "_cast"), cast(zero_point, kF32, name + "_zp"), name + "_sub");
  return multiply(x, scale, name);
}

te::Tensor qnn_requantize(const te::Tensor& acc, const te::Tensor& bias, const te::Tensor& scale,
                          int64_t axis, const RequantParams& p, const std::string& name) {
  check_requant(p, "qnn_requantize");
  auto as = detail::const_shape(acc, "qnn_requantize");
  KILN_USER_CHECK(acc->dtype == kI32)
      << "qnn_requantize: accumulator must be int32, got " << acc->dtype;
  KILN_USER_CHECK(axis >= 0 && axis < static_cast<int64_t>(as.size()))
      << "qnn_requantize: axis " << axis << " out of range for " << detail::shape_text(as);
  check_channel_vectors(bias, scale, as[static_cast<size_t>(axis)], "qnn_requantize");
  return te::compute(
      acc->shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> idx(v.begin(), v.end());
        Expr c = v[static_cast<size_t>(axis)];
        return requantize_value(acc(idx) + bias(c), scale(c), p);
      },
      name, tag::kQnnRequantize);
}

te::Tensor qnn_add(const te::Tensor& a, const te::Tensor& b, const QnnAddParams& p,
                   const std::string& name) {
  auto as = detail::const_shape(a, "qnn_add"), bs = detail::const_shape(b, "qnn_add");
  KILN_USER_CHECK(is_q8(a->dtype) && is_q8(b->dtype) && as == bs)
      << "qnn_add: needs two uint8/int8 tensors of one shape, got " << a->dtype << " "
      << detail::shape_text(as) << " and " << b->dtype << " " << detail::shape_text(bs);
  RequantParams r;
  r.out_min = p.out_min;
  r.out_max = p.out_max;
  r.out_dtype = p.out_dtype;
  check_requant(r, "qnn_add");
  auto fma = [](Expr x, Expr y, Expr z) {
    return Call::make(kF32, "fma", {std::move(x), std::move(y), std::move(z)},
                      CallKind::kPureIntrinsic);
  };
  return te::compute(
      a->shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> i(v.begin(), v.end());
        auto operand = [&](const te::Tensor& t, int64_t offset) {
          Expr x = cast(kI32, t(i));
          return cast(kF32, offset ? x - ci(offset) : x);
        };
        Expr c =
            fma(operand(b, p.b_offset), make_const(kF32, p.ratio_b), make_const(kF32, p.fixed));
        c = fma(operand(a, p.a_offset), make_const(kF32, p.ratio_a), c);
        Expr q = Call::make(kF32, "nearbyint", {c}, CallKind::kPureIntrinsic);
        if (p.y_offset) q = q + make_const(kF32, double(p.y_offset));  // exact: integers
        q = min(max(q, make_const(kF32, double(p.out_min))), make_const(kF32, double(p.out_max)));
        return cast(p.out_dtype, cast(kI32, q));
      },
      name, tag::kQnnRequantize);
}

te::Tensor qnn_global_avg_pool2d(const te::Tensor& x, float scale, const RequantParams& p,
                                 const std::string& name) {
  check_requant(p, "qnn_global_avg_pool2d");
  auto xs = detail::const_shape(x, "qnn_global_avg_pool2d");
  KILN_USER_CHECK(is_q8(x->dtype) && (xs.size() == 4 || xs.size() == 5))
      << "qnn_global_avg_pool2d: data must be uint8/int8 NCHW or NCHW<b>c, got " << x->dtype << " "
      << detail::shape_text(xs);
  auto rh = te::reduce_axis({0, ci(xs[2])}, "rh");
  auto rw = te::reduce_axis({0, ci(xs[3])}, "rw");
  std::vector<Expr> shape = x->shape;
  shape[2] = shape[3] = ci(1);
  // The channel axes (c, or cb and the lane c of a block) are kept; h and w reduced.
  te::Tensor sum = te::compute(
      shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> i(v.begin(), v.end());
        i[2] = rh->var;
        i[3] = rw->var;
        return te::sum(cast(kI32, x(i)), {rh, rw});
      },
      name + "_sum", tag::kCommReduce);
  const int64_t bias = -p.x_zero_point * xs[2] * xs[3];
  return te::compute(
      sum->shape,
      [&](const std::vector<Var>& v) {
        return requantize_value(sum(std::vector<Expr>(v.begin(), v.end())) + ci(bias),
                                make_const(kF32, scale), p);
      },
      name, tag::kQnnRequantize);
}

te::Tensor qnn_conv2d(const te::Tensor& x, const te::Tensor& W, const te::Tensor& bias,
                      const te::Tensor& scale, const Conv2DParams& conv, const RequantParams& p,
                      const std::string& name) {
  KILN_USER_CHECK(is_q8(x->dtype) && W->dtype == DataType::Int(8))
      << "qnn_conv2d: needs uint8/int8 data and int8 weights, got " << x->dtype << " and "
      << W->dtype;
  // Centred data: padding (zero in conv2d_nchw) then stands for the zero point.
  te::Tensor xc = te::compute(
      x->shape,
      [&](const std::vector<Var>& v) {
        return cast(kI32, x(std::vector<Expr>(v.begin(), v.end()))) - ci(p.x_zero_point);
      },
      name + "_xc", tag::kElemWise);
  te::Tensor wc = cast(W, kI32, name + "_w");
  te::Tensor acc = conv2d_nchw(xc, wc, conv, name + "_acc");
  return qnn_requantize(acc, bias, scale, 1, p, name);
}

te::Tensor qnn_dense(const te::Tensor& x, const te::Tensor& W, const te::Tensor& bias,
                     const te::Tensor& scale, const RequantParams& p, const std::string& name) {
  auto xs = detail::const_shape(x, "qnn_dense"), ws = detail::const_shape(W, "qnn_dense");
  KILN_USER_CHECK(is_q8(x->dtype) && W->dtype == DataType::Int(8))
      << "qnn_dense: needs uint8/int8 data and int8 weights, got " << x->dtype << " and "
      << W->dtype;
  KILN_USER_CHECK(xs.size() == 2 && ws.size() == 2 && xs[1] == ws[1])
      << "qnn_dense: needs data [M, K] and weight [N, K], got " << detail::shape_text(xs) << " and "
      << detail::shape_text(ws);
  auto k = te::reduce_axis({0, ci(xs[1])}, "k");
  te::Tensor acc = te::compute(
      {ci(xs[0]), ci(ws[0])},
      [&](Var m, Var n) {
        return te::sum((cast(kI32, x(m, k)) - ci(p.x_zero_point)) * cast(kI32, W(n, k)), {k});
      },
      name + "_acc", tag::kQnnDense);
  return qnn_requantize(acc, bias, scale, 1, p, name);
}

// ---------------------------------------------------------------------------------------------
// VNNI forms

te::Tensor qnn_conv2d_nchwc(const te::Tensor& x, const te::Tensor& Wp, const te::Tensor& bias,
                            const te::Tensor& scale, const QnnConvNCHWcAttrs& a,
                            const RequantParams& p, const std::string& name) {
  const char* op = "qnn_conv2d_nchwc";
  check_requant(p, op);
  auto xs = detail::const_shape(x, op), ps = detail::const_shape(Wp, op);
  const bool blocked = xs.size() == 5;
  KILN_USER_CHECK(is_q8(x->dtype) && (xs.size() == 4 || (blocked && xs[4] % 4 == 0)))
      << op << ": data must be uint8/int8 NCHW or NCHW[4k]c, got " << x->dtype << " "
      << detail::shape_text(xs);
  KILN_USER_CHECK(a.padding.size() == 4 &&
                  *std::min_element(a.padding.begin(), a.padding.end()) >= 0 && a.stride > 0)
      << op << ": padding must be 4 non-negative values and the stride positive";
  check_channel_vectors(bias, scale, a.O, op);
  // The input block: the data's own (4 channels of a block are one int32 word), or 4 for NCHW
  // data, which a packing stage blocks.
  const int64_t ib = blocked ? xs[4] : 4;
  const int64_t N = xs[0], C = blocked ? xs[1] * xs[4] : xs[1], H = xs[2], W = xs[3];
  const int64_t CB = (C + ib - 1) / ib, C4 = (C + 3) / 4;
  const int64_t ob = ps.size() == 5 && ps[4] == 8 ? 8 : 16, O = a.O;
  KILN_USER_CHECK(Wp->dtype == DataType::Int(32) &&
                  ps == std::vector<int64_t>({(O + ob - 1) / ob, C4, a.KH, a.KW, ob}))
      << op << ": packed weight " << detail::shape_text(ps) << " (" << Wp->dtype
      << ") does not match data " << detail::shape_text(xs) << ", " << O << " outputs and a "
      << a.KH << "x" << a.KW << " kernel (expected int32 [ceil(O/b), ceil(C/4), KH, KW, b], b = 16 "
      << "or 8: pack_qnn_conv2d_weight)";
  const int64_t pt = a.padding[0], pl = a.padding[1], pb = a.padding[2], pr = a.padding[3];
  const int64_t Hp = H + pt + pb, Wq = W + pl + pr;
  KILN_USER_CHECK(Hp >= a.KH && Wq >= a.KW)
      << op << ": kernel " << a.KH << "x" << a.KW << " is larger than the padded input "
      << detail::shape_text(xs);
  const int64_t OH = (Hp - a.KH) / a.stride + 1, OW = (Wq - a.KW) / a.stride + 1;
  const bool padded = pt || pl || pb || pr;
  const int64_t shift = x->dtype == kU8 ? 0 : 128;
  const Expr zu = make_const(kU8, p.x_zero_point + shift);
  // Dp [N, CB, Hp, Wq, ib] uint8: the data shifted to uint8 and padded with the (shifted) zero
  // point, in blocks of ib channels; blocked uint8 data without padding is read in place.
  te::Tensor Dp = x;
  if (!blocked) {
    // NCHW → NCHW4c (zero past C: the weights are zero there too).
    Dp = te::compute(
        {ci(N), ci(CB), ci(Hp), ci(Wq), ci(4)},
        [&](const std::vector<Var>& v) {
          Expr c = v[1] * ci(4) + v[4], hh = v[2] - ci(pt), ww = v[3] - ci(pl);
          Expr in = hh >= ci(0) && hh < ci(H) && ww >= ci(0) && ww < ci(W);
          Expr val = as_u8(x(v[0], min(c, ci(C - 1)), min(max(hh, ci(0)), ci(H - 1)),
                             min(max(ww, ci(0)), ci(W - 1))));
          if (padded) val = if_then_else(in, val, zu);
          if (C % 4 != 0) val = if_then_else(c < ci(C), val, make_zero(kU8));
          return val;
        },
        name + "_xp", tag::kQuantizedPack);
  } else if (shift || padded) {
    // The blocked layout kept: a vectorizable pass over the channel block.
    Dp = te::compute(
        {ci(N), ci(CB), ci(Hp), ci(Wq), ci(ib)},
        [&](const std::vector<Var>& v) {
          Expr hh = v[2] - ci(pt), ww = v[3] - ci(pl);
          if (!padded) return as_u8(x(v[0], v[1], hh, ww, v[4]));
          Expr in = hh >= ci(0) && hh < ci(H) && ww >= ci(0) && ww < ci(W);
          return if_then_else(in,
                              as_u8(x(v[0], v[1], min(max(hh, ci(0)), ci(H - 1)),
                                      min(max(ww, ci(0)), ci(W - 1)), v[4])),
                              zu);
        },
        name + "_xp", tag::kQuantizedPack);
  }
  // acc[n, o/b, oh, ow, o%b] = Σ Dp[.., 4q + kk] · W[o, 4(cb·ib/4 + q) + kk, kh, kw]: the
  // reduction over (cb, kh, kw, q, kk), the 4 bytes kk of one int32 word innermost (one
  // vpdpbusd per b lanes; quantized.h's compute in the data's own block).
  auto rc = te::reduce_axis({0, ci(CB)}, "cb");
  auto rh = te::reduce_axis({0, ci(a.KH)}, "kh");
  auto rw = te::reduce_axis({0, ci(a.KW)}, "kw");
  auto rq = te::reduce_axis({0, ci(ib / 4)}, "q");
  auto rk = te::reduce_axis({0, ci(4)}, "kk");
  const int64_t st = a.stride, q4 = ib / 4;
  te::Tensor acc = te::compute(
      {ci(N), ci((O + ob - 1) / ob), ci(OH), ci(OW), ci(ob)},
      [&](const std::vector<Var>& v) {
        Expr d = Dp(v[0], rc, v[2] * ci(st) + rh, v[3] * ci(st) + rw, rq * ci(4) + rk);
        Expr w = Wp(v[1], rc * ci(q4) + rq, rh, rw, v[4]);
        return te::sum(cast(kI32, d) * packed_s8(w, rk), {rc, rh, rw, rq, rk});
      },
      name + "_acc", tag::kQuantizedConv2d);
  return te::compute(
      acc->shape,
      [&](const std::vector<Var>& v) {
        Expr o = min(v[1] * ci(ob) + v[4], ci(O - 1));
        return requantize_value(acc(std::vector<Expr>(v.begin(), v.end())) + bias(o), scale(o), p);
      },
      name, tag::kQnnConv2d);
}

void schedule_qnn_conv2d_nchwc(autotune::Config& cfg, te::Schedule& s, const te::Tensor& main,
                               const te::Tensor& out, const Target& target) {
  KILN_USER_CHECK(main->op->tag == tag::kQnnConv2d)
      << "schedule_qnn_conv2d_nchwc: stage " << main.name() << " is not a qnn_conv2d_nchwc";
  te::Tensor acc;
  for (const te::Tensor& t : main->op->input_tensors())
    if (t->op->tag == tag::kQuantizedConv2d) acc = t;
  KILN_ICHECK(acc.defined()) << "qnn_conv2d_nchwc: no quantized_conv2d_nchwc stage";
  te::Tensor Dp = acc->op->input_tensors()[0];
  // Inline the injective stages between the requantisation and `out`.
  for (const te::Operation& op : te::post_dfs_order({out.op()})) {
    if (op.same_as(out.op()) || op->kind != te::OpKind::kCompute) continue;
    if (op.same_as(main.op()) || (is_injective_tag(op->tag) && !op.same_as(Dp.op())))
      s[op].compute_inline();
  }
  const int64_t OW = *as_const_int(acc->shape[3]);
  std::vector<int64_t> tc = detail::filter_leq({1, 2, 3, 4, 5, 6, 7, 8}, OW);
  cfg.define_knob("tile_ow", tc);
  cfg.define_bool("unroll_kw");
  if (cfg.is_fallback()) {
    // The widest row tile that divides the row (no tail), unless that is narrower than 4.
    int64_t t = tc.back();
    for (int64_t c : tc)
      if (OW % c == 0 && c >= 4) t = OW % t == 0 ? std::max(t, c) : c;
    cfg.fallback_knob("tile_ow", t);
    cfg.fallback_knob("unroll_kw", 1);
  }
  const int64_t tow = cfg.knob("tile_ow");
  // Several blocks of output channels per register tile: each data broadcast feeds tile_ob
  // vpdpbusd (tile_ob x tile_ow accumulators). Blocks of 16 channels: up to 2; blocks of 8
  // (ymm, 24 / 40 / … channels): up to 4, the fallback the most that divides the blocks with
  // at most 24 accumulators.
  const int64_t OB = *as_const_int(acc->shape[1]), lanes = *as_const_int(acc->shape[4]);
  std::vector<int64_t> obs{1};
  for (int64_t t = 2; t <= (lanes == 8 ? 4 : 2); ++t)
    if (OB % t == 0) obs.push_back(t);
  cfg.define_knob("tile_ob", obs);
  if (cfg.is_fallback()) {
    int64_t t = 1;
    if (lanes == 16) {
      t = OB % 2 == 0 && tow <= 7 ? 2 : 1;
    } else {
      for (int64_t c : obs)
        if (c * tow <= 24) t = c;
    }
    cfg.fallback_knob("tile_ob", t);
  }
  const int64_t tob = cfg.knob("tile_ob");
  if (Dp->op->kind == te::OpKind::kCompute) {
    te::Stage sd = s[Dp];
    auto dax = sd.op_axis();
    const te::Tensor x = Dp->op->input_tensors()[0];
    if (x->shape.size() == 4) {
      // Packing NCHW: the channel-quad loop parallel and outermost, as a plain loop variable,
      // so that the byte addresses of a quad simplify to consecutive offsets.
      sd.reorder({dax[1], dax[0], dax[2], dax[3]});
      sd.parallel(dax[1]);
      sd.unroll(dax[4]);
    } else {
      // Shifting / padding blocked data: rows in parallel, the channel block vectorized.
      sd.parallel(sd.fuse({dax[0], dax[1], dax[2]}));
      sd.vectorize(dax[4]);
    }
  }
  te::Stage so = s[out];
  auto oax = so.op_axis();
  auto [obo, obi] = so.split(oax[1], ci(tob));
  auto [owo, owi] = so.split(oax[3], ci(tow));
  so.reorder({oax[0], obo, oax[2], owo, obi, owi, oax[4]});
  te::IterVar outer = so.fuse({oax[0], obo, oax[2]});
  so.parallel(outer);
  so.vectorize(oax[4]);
  te::Stage sa = s[acc];
  sa.set_scope("local");
  sa.compute_at(so, owo);
  auto aax = sa.op_axis();
  auto rax = sa.op_reduce_axis();
  // (cb, kh, kw, q) outside the register tile, q (the words of a channel block) unrolled; the
  // byte axis kk innermost (the lanes x bytes that one vpdpbusd computes).
  sa.reorder({rax[0], rax[1], rax[2], rax[3], aax[1], aax[3], aax[4], rax[4]});
  sa.unroll(rax[3]);
  sa.unroll(aax[1]);
  sa.unroll(aax[3]);
  sa.vectorize(aax[4]);
  if (cfg.knob("unroll_kw")) sa.unroll(rax[2]);
  // The lanes x bytes become one vpdpbusd (tensorize with dot_u8s8) where the target has VNNI.
  schedule_quantized_lanes(s, acc, target);
}

int64_t qnn_channel_block(int64_t C) { return C % 16 == 0 ? 16 : C % 8 == 0 ? 8 : 0; }

std::string QnnConv2DWorkload::str() const {
  std::string pad;
  for (int64_t v : padding) pad += (pad.empty() ? "" : ",") + std::to_string(v);
  return "N" + std::to_string(N) + " C" + std::to_string(C) + " H" + std::to_string(H) + " W" +
         std::to_string(W) + " in" + std::to_string(in_block) + " " + x_dtype.str() + " O" +
         std::to_string(O) + " K" + std::to_string(KH) + "x" + std::to_string(KW) + " s" +
         std::to_string(stride) + " p" + pad;
}

autotune::Template qnn_conv2d_nchwc_template(const QnnConv2DWorkload& w, const Target& target) {
  KILN_USER_CHECK(is_q8(w.x_dtype) && qnn_channel_block(w.O) > 0 &&
                  (w.in_block == 0 || w.C % w.in_block == 0))
      << "qnn_conv2d_nchwc_template: unsupported workload " << w.str()
      << " (uint8/int8 data, 8k outputs, an input block dividing C)";
  return autotune::Template{
      "qnn_conv2d_nchwc_cpu", "1", [w, target](autotune::Config& cfg) {
        const int64_t ib = w.in_block, ob = qnn_channel_block(w.O);
        std::vector<Expr> xs{ci(w.N), ci(w.C), ci(w.H), ci(w.W)};
        if (ib) xs = {ci(w.N), ci(w.C / ib), ci(w.H), ci(w.W), ci(ib)};
        te::Tensor x = te::placeholder(xs, w.x_dtype, "x");
        te::Tensor Wp = te::placeholder(
            {ci((w.O + ob - 1) / ob), ci((w.C + 3) / 4), ci(w.KH), ci(w.KW), ci(ob)}, kI32, "Wp");
        te::Tensor bias = te::placeholder({ci(w.O)}, kI32, "bias");
        te::Tensor scale = te::placeholder({ci(w.O)}, kF32, "scale");
        RequantParams p;
        p.out_dtype = w.x_dtype;
        p.out_min = w.x_dtype == kU8 ? 0 : -128;
        p.out_max = p.out_min + 255;
        te::Tensor y = qnn_conv2d_nchwc(x, Wp, bias, scale,
                                        QnnConvNCHWcAttrs{w.O, w.KH, w.KW, w.stride, w.padding}, p);
        te::Schedule s = te::create_schedule({y});
        schedule_qnn_conv2d_nchwc(cfg, s, y, y, target);
        return autotune::Instance{
            s, {x, Wp, bias, scale, y}, cfg, {false, true, true, true, false}};
      }};
}

te::Tensor qnn_dense_packed(const te::Tensor& x, const te::Tensor& Wp, const te::Tensor& bias,
                            const te::Tensor& scale, int64_t N, const RequantParams& p,
                            const std::string& name) {
  check_requant(p, "qnn_dense_packed");
  auto xs = detail::const_shape(x, "qnn_dense_packed");
  KILN_USER_CHECK(is_q8(x->dtype) && xs.size() == 2)
      << "qnn_dense_packed: data must be uint8/int8 [M, K], got " << x->dtype << " "
      << detail::shape_text(xs);
  check_channel_vectors(bias, scale, N, "qnn_dense_packed");
  te::Tensor xu = x;
  if (x->dtype != kU8)
    xu = te::compute(
        x->shape, [&](Var m, Var k) { return as_u8(x(m, k)); }, name + "_xu", tag::kElemWise);
  te::Tensor acc = quantized_dense_packed(xu, Wp, N, name + "_acc");
  return te::compute(
      acc->shape, [&](Var m, Var n) { return requantize_value(acc(m, n) + bias(n), scale(n), p); },
      name, tag::kQnnDensePacked);
}

void schedule_qnn_dense_packed(autotune::Config& cfg, te::Schedule& s, const te::Tensor& main,
                               const te::Tensor& out, const Target& target) {
  te::Tensor acc = main->op->input_tensors()[0];
  KILN_USER_CHECK(acc->op->tag == tag::kQuantizedDensePacked)
      << "schedule_qnn_dense_packed: stage " << main.name() << " is not a qnn_dense_packed";
  te::Tensor Xp = acc->op->input_tensors()[0];
  for (const te::Tensor& t : Xp->op->input_tensors())
    if (t->op->kind == te::OpKind::kCompute) s[t].compute_inline();
  if (!main.same_as(out)) s[main].compute_inline();
  schedule_dense_packed(cfg, s, acc, out, target);
}

// ---------------------------------------------------------------------------------------------
// Host helpers

runtime::NDArray pack_qnn_conv2d_weight(const runtime::NDArray& W, int64_t block) {
  KILN_USER_CHECK(W.dtype() == DataType::Int(8) && W.ndim() == 4)
      << "pack_qnn_conv2d_weight: weight must be int8 OIHW, got " << W.dtype();
  KILN_USER_CHECK(block == 16 || block == 8)
      << "pack_qnn_conv2d_weight: the output block must be 16 or 8, got " << block;
  const int64_t O = W.shape()[0], C = W.shape()[1], KH = W.shape()[2], KW = W.shape()[3];
  const int64_t OB = (O + block - 1) / block, C4 = (C + 3) / 4;
  runtime::NDArray r = runtime::NDArray::empty({OB, C4, KH, KW, block}, kI32);
  const int8_t* w = W.data_as<int8_t>();
  uint32_t* d = reinterpret_cast<uint32_t*>(r.data());
  for (int64_t ob = 0; ob < OB; ++ob)
    for (int64_t c4 = 0; c4 < C4; ++c4)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw)
          for (int64_t oi = 0; oi < block; ++oi) {
            uint32_t v = 0;
            const int64_t o = ob * block + oi;
            for (int64_t i = 0; i < 4; ++i) {
              const int64_t c = c4 * 4 + i;
              if (o < O && c < C)
                v |= uint32_t(uint8_t(w[((o * C + c) * KH + kh) * KW + kw])) << (8 * i);
            }
            d[(((ob * C4 + c4) * KH + kh) * KW + kw) * block + oi] = v;
          }
  return r;
}

runtime::NDArray pack_qnn_dense_weight(const runtime::NDArray& W, int64_t nb) {
  KILN_USER_CHECK(W.dtype() == DataType::Int(8) && W.ndim() == 2 && nb > 0)
      << "pack_qnn_dense_weight: weight must be int8 [N, K], got " << W.dtype();
  const int64_t N = W.shape()[0], K = W.shape()[1], NO = (N + nb - 1) / nb, K4 = (K + 3) / 4;
  runtime::NDArray r = runtime::NDArray::empty({NO, K4, nb}, kI32);
  const int8_t* w = W.data_as<int8_t>();
  uint32_t* d = reinterpret_cast<uint32_t*>(r.data());
  for (int64_t no = 0; no < NO; ++no)
    for (int64_t k4 = 0; k4 < K4; ++k4)
      for (int64_t ni = 0; ni < nb; ++ni) {
        uint32_t v = 0;
        const int64_t n = no * nb + ni;
        for (int64_t i = 0; i < 4; ++i) {
          const int64_t k = k4 * 4 + i;
          if (n < N && k < K) v |= uint32_t(uint8_t(w[n * K + k])) << (8 * i);
        }
        d[(no * K4 + k4) * nb + ni] = v;
      }
  return r;
}

runtime::NDArray compensate_bias(const runtime::NDArray& bias, const runtime::NDArray& W,
                                 int64_t x_zero_point, int64_t shift) {
  KILN_USER_CHECK(W.dtype() == DataType::Int(8) && W.ndim() >= 1 && bias.dtype() == kI32 &&
                  bias.numel() == W.shape()[0])
      << "compensate_bias: needs int8 weights with O rows and an int32 bias [O]";
  const int64_t O = W.shape()[0], per = W.numel() / std::max<int64_t>(O, 1);
  runtime::NDArray r = runtime::NDArray::empty({O}, kI32);
  const int8_t* w = W.data_as<int8_t>();
  const int64_t z = x_zero_point + shift;
  for (int64_t o = 0; o < O; ++o) {
    int64_t sum = 0;
    for (int64_t k = 0; k < per; ++k) sum += w[o * per + k];
    const int64_t b = int64_t(bias.data_as<int32_t>()[o]) - z * sum;
    r.data_as<int32_t>()[o] = static_cast<int32_t>(static_cast<uint32_t>(b));
  }
  return r;
}

}  // namespace kiln::topi
