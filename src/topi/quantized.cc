// int8 operators (u8 data, s8 weights, int32 accumulation) tensorized with the x86 VNNI
// intrinsic (topi/x86_intrin.h). Weights are packed once at compile time, 4 reduction elements
// to an int32; the compute rules read each weight byte as int32(int8(w >> 8·kk)) and the data
// bytes directly (reduction axes k4 and kk, k = 4·k4 + kk), which is exactly the intrinsic's
// declared compute, so the schedules tensorize the 16 (or 8) output lanes × 4 bytes of each
// k4 step into one vpdpbusd. A target without VNNI keeps the same loops, kk unrolled and the
// lanes vectorized. quantized_dense reuses dense.cc's register-blocked schedule template; the
// direct NCHWc convolution keeps tile_ow output pixels × 16 output channels in registers.
#include "kiln/topi/quantized.h"

#include <algorithm>

#include "kiln/topi/dense.h"
#include "kiln/topi/x86_intrin.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;
using detail::ci;

namespace {

/// int32 whose byte i (little-endian) is byte(i) (an int8 or uint8 value).
Expr pack4(const std::function<Expr(int)>& byte) {
  const DataType u32 = DataType::UInt(32);
  Expr v;
  for (int i = 0; i < 4; ++i) {
    Expr b = cast(u32, cast(DataType::UInt(8), byte(i)));
    if (i) b = b * make_const(u32, int64_t{1} << (8 * i));
    v = v.defined() ? v + b : b;
  }
  return cast(DataType::Int(32), v);
}

void check_types(const te::Tensor& x, const te::Tensor& W, const std::string& op) {
  KILN_USER_CHECK(x->dtype == DataType::UInt(8))
      << op << ": data must be uint8, got " << x->dtype << " (" << x.name() << ")";
  KILN_USER_CHECK(W->dtype == DataType::Int(8))
      << op << ": weight must be int8, got " << W->dtype << " (" << W.name() << ")";
}

/// The data rows padded with zeros to a multiple of 4 bytes (x itself when K % 4 == 0).
te::Tensor pad_data_rows(const te::Tensor& x, int64_t M, int64_t K, const std::string& name) {
  if (K % 4 == 0) return x;
  return te::compute(
      {ci(M), ci((K + 3) / 4 * 4)},
      [&](Var m, Var k) {
        return if_then_else(k < ci(K), x(m, min(k, ci(K - 1))), make_zero(x->dtype));
      },
      name + "_xp", tag::kQuantizedPack);
}

}  // namespace

te::Tensor quantized_dense(const te::Tensor& x, const te::Tensor& W, const std::string& name) {
  auto xs = detail::const_shape(x, "quantized_dense"),
       ws = detail::const_shape(W, "quantized_dense");
  check_types(x, W, "quantized_dense");
  KILN_USER_CHECK(xs.size() == 2 && ws.size() == 2 && xs[1] == ws[1])
      << "quantized_dense: needs data [M, K] and weight [N, K], got " << detail::shape_text(xs)
      << " and " << detail::shape_text(ws);
  auto k = te::reduce_axis({0, ci(xs[1])}, "k");
  const DataType i32 = DataType::Int(32);
  return te::compute(
      {ci(xs[0]), ci(ws[0])},
      [&](Var m, Var n) { return te::sum(cast(i32, x(m, k)) * cast(i32, W(n, k)), {k}); }, name,
      tag::kQuantizedDense);
}

te::Tensor pack_quantized_dense_weight(const te::Tensor& W, int64_t nb, const std::string& name) {
  auto ws = detail::const_shape(W, "pack_quantized_dense_weight");
  KILN_USER_CHECK(ws.size() == 2 && W->dtype == DataType::Int(8))
      << "pack_quantized_dense_weight: weight must be int8 [N, K], got " << W->dtype << " "
      << detail::shape_text(ws);
  KILN_USER_CHECK(nb > 0) << "pack_quantized_dense_weight: panel width must be positive";
  const int64_t N = ws[0], K = ws[1];
  return te::compute(
      {ci((N + nb - 1) / nb), ci((K + 3) / 4), ci(nb)},
      [&](Var no, Var k4, Var ni) {
        return pack4([&](int i) -> Expr {
          Expr n = no * ci(nb) + ni, k = k4 * ci(4) + ci(i);
          return if_then_else(n < ci(N) && k < ci(K), W(min(n, ci(N - 1)), min(k, ci(K - 1))),
                              make_zero(W->dtype));
        });
      },
      name, tag::kDensePack);
}

te::Tensor quantized_dense_packed(const te::Tensor& x, const te::Tensor& Wp, int64_t N,
                                  const std::string& name) {
  const char* op = "quantized_dense_packed";
  auto xs = detail::const_shape(x, op), ps = detail::const_shape(Wp, op);
  KILN_USER_CHECK(x->dtype == DataType::UInt(8)) << op << ": data must be uint8, got " << x->dtype;
  KILN_USER_CHECK(xs.size() == 2 && ps.size() == 3 && Wp->dtype == DataType::Int(32) &&
                  ps[1] == (xs[1] + 3) / 4 && N > (ps[0] - 1) * ps[2] && N <= ps[0] * ps[2])
      << op << ": data " << detail::shape_text(xs) << " and packed weight "
      << detail::shape_text(ps) << " (" << Wp->dtype << ") do not match " << N
      << " outputs (expected int32 [ceil(N/nb), ceil(K/4), nb])";
  const int64_t M = xs[0], K = xs[1], nb = ps[2];
  te::Tensor X = pad_data_rows(x, M, K, name);
  auto k4 = te::reduce_axis({0, ci((K + 3) / 4)}, "k4");
  auto kk = te::reduce_axis({0, ci(4)}, "kk");
  return te::compute(
      {ci(M), ci(N)},
      [&](Var m, Var n) {
        Expr w = Wp(floordiv(n, ci(nb)), k4, floormod(n, ci(nb)));
        return te::sum(cast(DataType::Int(32), X(m, k4 * ci(4) + kk)) * packed_s8(w, kk), {k4, kk});
      },
      name, tag::kQuantizedDensePacked);
}

namespace {
/// The constant extent of leaf `iv` of `st` (its domain, or the factor of the split that made
/// it), or 0.
int64_t leaf_extent(const te::Stage& st, const te::IterVar& iv) {
  if (iv->dom.defined()) return as_const_int(iv->dom->extent).value_or(0);
  for (const te::IterVarRelation& r : st->relations)
    if (r.kind == te::IterVarRelation::kSplit && r.inner.same_as(iv) && r.factor.defined())
      return as_const_int(r.factor).value_or(0);
  return 0;
}
/// The root axis of `st` that leaf `iv` comes from by splits (iv itself for a root axis).
te::IterVar root_of(const te::Stage& st, te::IterVar iv) {
  for (bool found = true; found;) {
    found = false;
    for (const te::IterVarRelation& r : st->relations) {
      if (r.kind == te::IterVarRelation::kSplit && (r.inner.same_as(iv) || r.outer.same_as(iv))) {
        iv = r.parent;
        found = true;
      }
    }
  }
  return iv;
}
}  // namespace

void schedule_quantized_lanes(te::Schedule& s, const te::Tensor& acc, const Target& target) {
  te::Stage st = s[acc];
  if (st->op->kind == te::OpKind::kCompute &&
      static_cast<const te::ComputeOpNode*>(st->op.get())->reduce_axis.empty()) {
    // The copy out of a cache_write stage: the reduction is its input's stage.
    st = s[st->op->input_tensors().at(0)];
  }
  const std::string& tg = st->origin_op->tag;
  KILN_USER_CHECK((tg == tag::kQuantizedDensePacked || tg == tag::kQuantizedConv2d) &&
                  st->op->kind == te::OpKind::kCompute)
      << "schedule_quantized_lanes: stage '" << st->name()
      << "' is not a quantized_dense_packed or quantized_conv2d_nchwc";
  const auto* c = static_cast<const te::ComputeOpNode*>(st->op.get());
  const te::IterVar kk = c->reduce_axis.back();
  te::IterVar vec;
  for (const te::IterVar& iv : st->leaf_iter_vars) {
    auto it = st->iter_var_attrs.find(iv.get());
    if (it == st->iter_var_attrs.end()) continue;
    if (it->second.tensor_intrin) return;  // done already
    if (it->second.for_kind == ForKind::kVectorized) vec = iv;
  }
  KILN_USER_CHECK(vec.defined()) << "schedule_quantized_lanes: stage '" << st->name()
                                 << "' has no vectorized loop";
  KILN_USER_CHECK(st->leaf_index(kk) >= 0)
      << "schedule_quantized_lanes: the byte axis '" << kk->var.name() << "' of stage '"
      << st->name() << "' must stay one loop (not split or fused)";
  const int64_t lanes = leaf_extent(st, vec);
  // Whole vectors: the lane loop's axis divides into them, and a dense's panels cover N.
  te::IterVar root = root_of(st, vec);
  bool whole = (lanes == 16 || lanes == 8) && root.same_as(c->axis.back()) &&
               as_const_int(root->dom->extent).value_or(1) % lanes == 0;
  if (tg == tag::kQuantizedDensePacked) {
    const te::Tensor Wp = c->input_tensors().back();
    const int64_t nb = *as_const_int(Wp->shape[2]), N = *as_const_int(root->dom->extent);
    whole = whole && nb % lanes == 0 && N % nb == 0;
  }
  if (whole && has_dot_u8s8(target, static_cast<int>(lanes))) {
    st.reorder({vec, kk});
    st.tensorize(vec, dot_u8s8(static_cast<int>(lanes)));
    return;
  }
  st.reorder({kk, vec});
  st.unroll(kk);
}

autotune::Template quantized_dense_template(const QuantizedDenseWorkload& w, const Target& target) {
  KILN_USER_CHECK(w.M > 0 && w.N > 0 && w.K > 0)
      << "quantized_dense_template: extents must be positive, got M=" << w.M << " N=" << w.N
      << " K=" << w.K;
  return autotune::Template{
      "quantized_dense_cpu", "1", [w, target](Config& cfg) {
        const int64_t nb = dense_pack_width(cfg, w.M, w.N, target);
        te::Tensor x = te::placeholder({ci(w.M), ci(w.K)}, DataType::UInt(8), "x");
        te::Tensor Wp = te::placeholder({ci((w.N + nb - 1) / nb), ci((w.K + 3) / 4), ci(nb)},
                                        DataType::Int(32), "Wp");
        te::Tensor y = quantized_dense_packed(x, Wp, w.N);
        te::Schedule s = te::create_schedule({y});
        schedule_dense_packed(cfg, s, y, y, target);
        return autotune::Instance{s, {x, Wp, y}, cfg};
      }};
}

// ---------------------------------------------------------------------------------------------
// Direct NCHWc convolution

te::Tensor pack_quantized_conv2d_weight(const te::Tensor& W, const std::string& name) {
  auto ws = detail::const_shape(W, "pack_quantized_conv2d_weight");
  KILN_USER_CHECK(ws.size() == 4 && W->dtype == DataType::Int(8))
      << "pack_quantized_conv2d_weight: weight must be int8 OIHW, got " << W->dtype << " "
      << detail::shape_text(ws);
  const int64_t O = ws[0], C = ws[1];
  return te::compute(
      {ci((O + 15) / 16), ci((C + 3) / 4), ci(ws[2]), ci(ws[3]), ci(16)},
      [&](const std::vector<Var>& v) {
        return pack4([&](int i) -> Expr {
          Expr o = v[0] * ci(16) + v[4], c = v[1] * ci(4) + ci(i);
          return if_then_else(o < ci(O) && c < ci(C),
                              W(min(o, ci(O - 1)), min(c, ci(C - 1)), v[2], v[3]),
                              make_zero(W->dtype));
        });
      },
      name, tag::kDensePack);
}

te::Tensor quantized_conv2d_nchwc(const te::Tensor& x, const te::Tensor& Wp, int64_t O, int64_t KH,
                                  int64_t KW, const QConv2DAttrs& a, const std::string& name) {
  const char* op = "quantized_conv2d_nchwc";
  auto xs = detail::const_shape(x, op), ps = detail::const_shape(Wp, op);
  KILN_USER_CHECK(x->dtype == DataType::UInt(8) && xs.size() == 4)
      << op << ": data must be uint8 NCHW, got " << x->dtype << " " << detail::shape_text(xs);
  KILN_USER_CHECK(a.stride > 0 && a.padding >= 0)
      << op << ": stride must be positive and padding non-negative, got stride " << a.stride
      << ", padding " << a.padding;
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], C4 = (C + 3) / 4, p = a.padding;
  KILN_USER_CHECK(Wp->dtype == DataType::Int(32) &&
                  ps == std::vector<int64_t>({(O + 15) / 16, C4, KH, KW, 16}))
      << op << ": packed weight " << detail::shape_text(ps) << " (" << Wp->dtype
      << ") does not match data " << detail::shape_text(xs) << ", " << O << " outputs and a " << KH
      << "x" << KW << " kernel (expected int32 [ceil(O/16), ceil(C/4), KH, KW, 16])";
  const int64_t OH = (H + 2 * p - KH) / a.stride + 1, OW = (W + 2 * p - KW) / a.stride + 1;
  KILN_USER_CHECK(H + 2 * p >= KH && W + 2 * p >= KW)
      << op << ": kernel " << KH << "x" << KW << " is larger than the padded input "
      << detail::shape_text(xs);
  const int64_t Hp = H + 2 * p, Wq = W + 2 * p;
  // Data padded and blocked 4 channels innermost (NCHW4c, zero past C): the 4 bytes of one k4
  // step are contiguous, as the VNNI intrinsic reads them.
  te::Tensor Dp = te::compute(
      {ci(N), ci(C4), ci(Hp), ci(Wq), ci(4)},
      [&](const std::vector<Var>& v) {
        Expr c = v[1] * ci(4) + v[4], hh = v[2] - ci(p), ww = v[3] - ci(p);
        Expr in = c < ci(C);
        if (p > 0) in = in && hh >= ci(0) && hh < ci(H) && ww >= ci(0) && ww < ci(W);
        if (C % 4 == 0 && p == 0) return x(v[0], c, hh, ww);
        return if_then_else(
            in, x(v[0], min(c, ci(C - 1)), min(max(hh, 0), ci(H - 1)), min(max(ww, 0), ci(W - 1))),
            make_zero(x->dtype));
      },
      name + "_xp", tag::kQuantizedPack);
  auto rc = te::reduce_axis({0, ci(C4)}, "c4");
  auto rh = te::reduce_axis({0, ci(KH)}, "kh");
  auto rw = te::reduce_axis({0, ci(KW)}, "kw");
  auto rk = te::reduce_axis({0, ci(4)}, "kk");
  const int64_t s = a.stride;
  return te::compute(
      {ci(N), ci((O + 15) / 16), ci(OH), ci(OW), ci(16)},
      [&](const std::vector<Var>& v) {
        Expr d = Dp(v[0], rc, v[2] * ci(s) + rh, v[3] * ci(s) + rw, rk);
        return te::sum(cast(DataType::Int(32), d) * packed_s8(Wp(v[1], rc, rh, rw, v[4]), rk),
                       {rc, rh, rw, rk});
      },
      name, tag::kQuantizedConv2d);
}

autotune::Template quantized_conv2d_template(const QuantizedConv2DWorkload& w,
                                             const Target& target) {
  return autotune::Template{
      "quantized_conv2d_nchwc_cpu", "1", [w, target](Config& cfg) {
        te::Tensor x =
            te::placeholder({ci(w.N), ci(w.C), ci(w.H), ci(w.W)}, DataType::UInt(8), "x");
        te::Tensor Wp =
            te::placeholder({ci((w.O + 15) / 16), ci((w.C + 3) / 4), ci(w.KH), ci(w.KW), ci(16)},
                            DataType::Int(32), "Wp");
        te::Tensor out = quantized_conv2d_nchwc(x, Wp, w.O, w.KH, w.KW, w.attrs);
        const int64_t OW = *as_const_int(out->shape[3]);
        std::vector<int64_t> tc = detail::filter_leq({1, 2, 4, 8}, OW);
        cfg.define_knob("tile_ow", tc);
        cfg.define_bool("unroll_kw");
        if (cfg.is_fallback()) {
          cfg.fallback_knob("tile_ow", tc.back());
          cfg.fallback_knob("unroll_kw", 1);
        }
        const int64_t tow = cfg.knob("tile_ow");
        te::Schedule s = te::create_schedule({out});
        // Run-time data packing: rows in parallel, each a serial sweep.
        te::Tensor Dp = out->op->input_tensors()[0];
        te::Stage sd = s[Dp];
        auto dax = sd.op_axis();
        sd.parallel(sd.fuse({dax[0], dax[1], dax[2]}));
        sd.unroll(dax[4]);
        // Output: (n, ob, oh) parallel, tile_ow pixels x 16 channels per register tile.
        te::Tensor acc = s.cache_write(out, "local");
        te::Stage so = s[out];
        auto oax = so.op_axis();
        auto [owo, owi] = so.split(oax[3], ci(tow));
        te::IterVar outer = so.fuse({oax[0], oax[1], oax[2]});
        so.parallel(outer);
        so.vectorize(oax[4]);
        te::Stage sa = s[acc];
        sa.compute_at(so, owo);
        auto aax = sa.op_axis();
        auto rax = sa.op_reduce_axis();
        sa.reorder({rax[0], rax[1], rax[2], aax[3], aax[4], rax[3]});
        sa.unroll(aax[3]);
        if (cfg.knob("unroll_kw")) sa.unroll(rax[2]);
        sa.vectorize(aax[4]);
        // 16 output channels × the 4 bytes of one c4 step: one vpdpbusd with VNNI.
        schedule_quantized_lanes(s, acc, target);
        return autotune::Instance{s, {x, Wp, out}, cfg};
      }};
}

}  // namespace kiln::topi
