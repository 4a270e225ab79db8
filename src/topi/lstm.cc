// The LSTM cell: gates = [x, h]·Wᵀ + b, then c' = σ(f)c + σ(i)tanh(g), h' = σ(o)tanh(c').
// The packed form concatenates x and h (one small root stage) so that the two products are one
// reduction over I + H, reads weights packed with the four gates of each block of hb hidden
// units side by side in one panel of 4·hb columns, and computes h' and c' with one two-output
// compute. The schedule tiles the outputs (rows × hb hidden units), computes the matching
// rows × 4hb gate tile in a local accumulator at that tile (dense.cc's register micro-kernel:
// k outermost, rows and 16-lane vectors unrolled), and applies the gate math on the tile
// vectorized over 16 hidden units, so the gates stay in registers / L1.
// The ONNX form (lstm_cell_onnx*) is the recurrence of an ONNX LSTM layer whose input projection
// is precomputed for all steps: gates = xg + h·Rᵀ, a reduction over H only, with xg and R in
// ONNX's gate order (i, o, f, c). The reorder to topi's (i, f, g, o) is done where the data is
// read: in the packing of R (panel column q·hb + u holds ONNX row kOnnxGate[q]·H + n) and in
// the index of xg; both forms share gate_math, the packed gate product and the schedule.
#include "kiln/topi/lstm.h"

#include <algorithm>

#include "kiln/topi/dense.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;
using detail::ci;

namespace {

struct LstmShapes {
  int64_t B, I, H;
};

LstmShapes check_state(const te::Tensor& x, const te::Tensor& h, const te::Tensor& c,
                       const std::string& op) {
  auto xs = detail::const_shape(x, op), hs = detail::const_shape(h, op),
       cs = detail::const_shape(c, op);
  KILN_USER_CHECK(xs.size() == 2 && hs.size() == 2 && hs == cs && xs[0] == hs[0])
      << op << ": x must be [B, I] and h, c [B, H], got x " << detail::shape_text(xs) << ", h "
      << detail::shape_text(hs) << ", c " << detail::shape_text(cs);
  for (const te::Tensor* t : {&h, &c})
    KILN_USER_CHECK((*t)->dtype == x->dtype && x->dtype.is_float())
        << op << ": all inputs must share one float dtype, got " << x->dtype << " and "
        << (*t)->dtype << " (" << t->name() << ")";
  return {xs[0], xs[1], hs[1]};
}

LstmShapes check_state(const te::Tensor& x, const te::Tensor& h, const te::Tensor& c,
                       const te::Tensor& b, const std::string& op) {
  LstmShapes sh = check_state(x, h, c, op);
  auto bs = detail::const_shape(b, op);
  KILN_USER_CHECK(bs.size() == 1 && bs[0] == 4 * sh.H)
      << op << ": bias must be [4H] = [" << 4 * sh.H << "], got " << detail::shape_text(bs);
  KILN_USER_CHECK(b->dtype == x->dtype)
      << op << ": all inputs must share one float dtype, got " << x->dtype << " and " << b->dtype
      << " (" << b.name() << ")";
  return sh;
}

/// The ONNX form's checks: xg [B, 4H], h and c [B, H], one float dtype.
LstmShapes check_onnx_state(const te::Tensor& xg, const te::Tensor& h, const te::Tensor& c,
                            const std::string& op) {
  auto xs = detail::const_shape(xg, op), hs = detail::const_shape(h, op),
       cs = detail::const_shape(c, op);
  KILN_USER_CHECK(xs.size() == 2 && hs.size() == 2 && hs == cs && xs[0] == hs[0] &&
                  xs[1] == 4 * hs[1])
      << op << ": xg must be [B, 4H] and h, c [B, H], got xg " << detail::shape_text(xs) << ", h "
      << detail::shape_text(hs) << ", c " << detail::shape_text(cs);
  return check_state(xg, h, c, op);
}

/// ONNX's row block of topi's gate q (i, f, g, o): ONNX orders the gates i, o, f, c.
constexpr int kOnnxGate[4] = {0, 2, 3, 1};

Expr gate_tanh_poly(const Expr& x);

/// tanh in float32 as a rational function (Eigen's generic_fast_tanh_float: x clamped to
/// ±7.9053 where tanh rounds to ±1, then an odd degree-13 over an even degree-6 polynomial;
/// |error| < 4e-7). Plain arithmetic, so it vectorizes: libm's tanhf (and expf, for a sigmoid)
/// is one call per vector lane, which would dominate the cell. Other dtypes use ir::tanh.
Expr gate_tanh(Expr x) {
  if (x.dtype() != DataType::Float(32)) return ir::tanh(x);
  auto f = [](double v) { return make_const(DataType::Float(32), v); };
  // NaN-keeping clamp (a NaN input gives a NaN gate, as libm's tanhf does). The clamp's
  // selects read their operand twice and the polynomial reads x three times, so both are
  // bound by Let: without them the cell's nested gates (tanh of a sum of sigmoids times tanhs)
  // grow the expression tree ~50x and lowering took seconds.
  Var in("tanh_in", DataType::Float(32)), clamped("tanh_x", DataType::Float(32));
  Expr bounded =
      detail::max_bound(detail::min_bound(in, f(7.90531110763549805)), f(-7.90531110763549805));
  Expr body = gate_tanh_poly(clamped);
  return Let::make(in, x, Let::make(clamped, bounded, body));
}

/// The rational polynomial of gate_tanh at an already clamped `x` (a variable: read 3 times).
Expr gate_tanh_poly(const Expr& x) {
  auto f = [](double v) { return make_const(DataType::Float(32), v); };
  Expr x2 = x * x;
  Expr p = x2 * f(-2.76076847742355e-16) + f(2.00018790482477e-13);
  for (double a : {-8.60467152213735e-11, 5.12229709037114e-08, 1.48572235717979e-05,
                   6.37261928875436e-04, 4.89352455891786e-03})
    p = x2 * p + f(a);
  Expr q = x2 * f(1.19825839466702e-06) + f(1.18534705686654e-04);
  q = x2 * q + f(2.26843463243900e-03);
  q = x2 * q + f(4.89352518554385e-03);
  return x * p / q;
}

/// σ(x) = (1 + tanh(x/2)) / 2 with gate_tanh in float32 (|error| < 3e-7), else ir::sigmoid.
Expr gate_sigmoid(Expr x) {
  if (x.dtype() != DataType::Float(32)) return ir::sigmoid(x);
  Expr half = make_const(DataType::Float(32), 0.5);
  return half + half * gate_tanh(half * x);
}

/// h' and c' from a gate accessor pre(g, b, n): the pre-activation of gate g (topi's order i, f,
/// g, o) of hidden unit n of row b, bias included.
std::vector<te::Tensor> gate_math(const te::Tensor& c, const LstmShapes& sh,
                                  const std::function<Expr(int, Expr, Expr)>& pre,
                                  const std::string& name) {
  return te::compute_multi(
      {ci(sh.B), ci(sh.H)},
      [&](const std::vector<Var>& i) -> std::vector<Expr> {
        auto g = [&](int q) { return pre(q, i[0], i[1]); };
        Expr c_new = gate_sigmoid(g(1)) * c(i[0], i[1]) + gate_sigmoid(g(0)) * gate_tanh(g(2));
        Expr h_new = gate_sigmoid(g(3)) * gate_tanh(c_new);
        return {h_new, c_new};
      },
      name, tag::kLstmCell);
}

/// The packed gate product G[b, p·4hb + j] = Σ_k a[b, k] · Wp[p, k, j] over k < K.
te::Tensor packed_gates(const te::Tensor& a, const te::Tensor& Wp, int64_t B, int64_t K,
                        int64_t panels, int64_t nb, const std::string& name) {
  auto k = te::reduce_axis({0, ci(K)}, "k");
  return te::compute(
      {ci(B), ci(panels * nb)},
      [&](Var bi, Var j) {
        return te::sum(a(bi, k) * Wp(floordiv(j, ci(nb)), k, floormod(j, ci(nb))), {k});
      },
      name + "_gates", tag::kLstmGates);
}

/// Column of gate g, hidden unit n in a packed gate product of block width hb.
Expr packed_column(int g, Expr n, int64_t hb) {
  return floordiv(n, ci(hb)) * ci(4 * hb) + ci(g * hb) + floormod(n, ci(hb));
}

}  // namespace

std::vector<te::Tensor> lstm_cell(const te::Tensor& x, const te::Tensor& h, const te::Tensor& c,
                                  const te::Tensor& Wi, const te::Tensor& Wh, const te::Tensor& b,
                                  const std::string& name) {
  LstmShapes sh = check_state(x, h, c, b, "lstm_cell");
  auto wi = detail::const_shape(Wi, "lstm_cell"), wh = detail::const_shape(Wh, "lstm_cell");
  KILN_USER_CHECK(wi == std::vector<int64_t>({4 * sh.H, sh.I}) &&
                  wh == std::vector<int64_t>({4 * sh.H, sh.H}))
      << "lstm_cell: weights must be Wi [4H, I] = [" << 4 * sh.H << ", " << sh.I
      << "] and Wh [4H, H] = [" << 4 * sh.H << ", " << sh.H << "], got " << detail::shape_text(wi)
      << " and " << detail::shape_text(wh);
  te::Tensor gx = dense(x, Wi, {}, name + "_gx");
  te::Tensor gh = dense(h, Wh, {}, name + "_gh");
  return gate_math(
      c, sh,
      [&](int g, Expr bi, Expr n) {
        Expr col = n + ci(g * sh.H);
        return gx(bi, col) + gh(bi, col) + b(col);
      },
      name);
}

te::Tensor pack_lstm_weight(const te::Tensor& Wi, const te::Tensor& Wh, int64_t hb,
                            const std::string& name) {
  auto wi = detail::const_shape(Wi, "pack_lstm_weight"),
       wh = detail::const_shape(Wh, "pack_lstm_weight");
  KILN_USER_CHECK(wi.size() == 2 && wh.size() == 2 && wi[0] == wh[0] && wi[0] % 4 == 0 &&
                  wh[1] * 4 == wh[0])
      << "pack_lstm_weight: weights must be Wi [4H, I] and Wh [4H, H], got "
      << detail::shape_text(wi) << " and " << detail::shape_text(wh);
  KILN_USER_CHECK(hb > 0) << "pack_lstm_weight: block width must be positive, got " << hb;
  const int64_t H = wh[1], I = wi[1], P = (H + hb - 1) / hb;
  return te::compute(
      {ci(P), ci(I + H), ci(4 * hb)},
      [&](Var p, Var k, Var j) {
        Expr g = floordiv(j, ci(hb)), u = floormod(j, ci(hb));
        Expr n = p * ci(hb) + u;
        Expr row = g * ci(H) + min(n, ci(H - 1));
        Expr v = if_then_else(k < ci(I), Wi(row, min(k, ci(I - 1))), Wh(row, max(k - ci(I), 0)));
        if (H % hb == 0) return v;
        return if_then_else(n < ci(H), v, make_zero(Wi->dtype));
      },
      name, tag::kLstmPack);
}

std::vector<te::Tensor> lstm_cell_packed(const te::Tensor& x, const te::Tensor& h,
                                         const te::Tensor& c, const te::Tensor& Wp,
                                         const te::Tensor& b, const std::string& name) {
  LstmShapes sh = check_state(x, h, c, b, "lstm_cell_packed");
  auto ps = detail::const_shape(Wp, "lstm_cell_packed");
  const int64_t hb = ps.size() == 3 ? ps[2] / 4 : 0;
  KILN_USER_CHECK(ps.size() == 3 && ps[2] % 4 == 0 && ps[1] == sh.I + sh.H &&
                  ps[0] == (sh.H + hb - 1) / hb && Wp->dtype == x->dtype)
      << "lstm_cell_packed: packed weight " << detail::shape_text(ps) << " (" << Wp->dtype
      << ") does not match I = " << sh.I << ", H = " << sh.H
      << " (expected [ceil(H/hb), I + H, 4hb])";
  te::Tensor xh = te::compute(
      {ci(sh.B), ci(sh.I + sh.H)},
      [&](Var bi, Var k) {
        return if_then_else(k < ci(sh.I), x(bi, min(k, ci(sh.I - 1))), h(bi, max(k - ci(sh.I), 0)));
      },
      name + "_xh", detail::tag_of(tag::kInjective, "concat"));
  te::Tensor G = packed_gates(xh, Wp, sh.B, sh.I + sh.H, ps[0], 4 * hb, name);
  return gate_math(
      c, sh,
      [&](int g, Expr bi, Expr n) { return G(bi, packed_column(g, n, hb)) + b(n + ci(g * sh.H)); },
      name);
}

std::vector<te::Tensor> lstm_cell_onnx(const te::Tensor& xg, const te::Tensor& h,
                                       const te::Tensor& c, const te::Tensor& R,
                                       const std::string& name) {
  LstmShapes sh = check_onnx_state(xg, h, c, "lstm_cell_onnx");
  auto rs = detail::const_shape(R, "lstm_cell_onnx");
  KILN_USER_CHECK(rs == std::vector<int64_t>({4 * sh.H, sh.H}) && R->dtype == xg->dtype)
      << "lstm_cell_onnx: R must be [4H, H] = [" << 4 * sh.H << ", " << sh.H << "] of " << xg->dtype
      << ", got " << detail::shape_text(rs) << " of " << R->dtype;
  te::Tensor gh = dense(h, R, {}, name + "_gh");
  return gate_math(
      c, sh,
      [&](int g, Expr bi, Expr n) {
        Expr col = n + ci(kOnnxGate[g] * sh.H);
        return xg(bi, col) + gh(bi, col);
      },
      name);
}

std::vector<int64_t> packed_lstm_onnx_weight_shape(int64_t hidden, int64_t hb) {
  KILN_USER_CHECK(hidden > 0 && hb > 0) << "packed_lstm_onnx_weight_shape: hidden (" << hidden
                                        << ") and block width (" << hb << ") must be positive";
  return {(hidden + hb - 1) / hb, hidden, 4 * hb};
}

int64_t packed_lstm_onnx_index(int64_t row, int64_t k, int64_t hidden, int64_t hb) {
  const int64_t gate = row / hidden, n = row % hidden;
  const int64_t q = std::find(kOnnxGate, kOnnxGate + 4, gate) - kOnnxGate;
  return ((n / hb) * hidden + k) * 4 * hb + q * hb + n % hb;
}

te::Tensor pack_lstm_onnx_weight(const te::Tensor& R, int64_t hb, const std::string& name) {
  auto rs = detail::const_shape(R, "pack_lstm_onnx_weight");
  KILN_USER_CHECK(rs.size() == 2 && rs[0] == 4 * rs[1])
      << "pack_lstm_onnx_weight: R must be [4H, H], got " << detail::shape_text(rs);
  const int64_t H = rs[1];
  auto ps = packed_lstm_onnx_weight_shape(H, hb);
  return te::compute(
      {ci(ps[0]), ci(ps[1]), ci(ps[2])},
      [&](Var p, Var k, Var j) {
        Expr q = floordiv(j, ci(hb)), n = p * ci(hb) + floormod(j, ci(hb));
        // ONNX's row block of topi gate q: 0, 2, 3, 1 (see kOnnxGate).
        Expr og = if_then_else(q == 0, ci(0), if_then_else(q == 3, ci(1), q + ci(1)));
        Expr v = R(og * ci(H) + min(n, ci(H - 1)), k);
        if (H % hb == 0) return v;
        return if_then_else(n < ci(H), v, make_zero(R->dtype));
      },
      name, tag::kLstmPack);
}

std::vector<te::Tensor> lstm_cell_onnx_packed(const te::Tensor& xg, const te::Tensor& h,
                                              const te::Tensor& c, const te::Tensor& Rp,
                                              const std::string& name) {
  LstmShapes sh = check_onnx_state(xg, h, c, "lstm_cell_onnx_packed");
  auto ps = detail::const_shape(Rp, "lstm_cell_onnx_packed");
  const int64_t hb = ps.size() == 3 ? ps[2] / 4 : 0;
  KILN_USER_CHECK(ps.size() == 3 && hb > 0 && ps[2] % 4 == 0 &&
                  ps == packed_lstm_onnx_weight_shape(sh.H, hb) && Rp->dtype == xg->dtype)
      << "lstm_cell_onnx_packed: packed weight " << detail::shape_text(ps) << " (" << Rp->dtype
      << ") does not match H = " << sh.H << " (expected [ceil(H/hb), H, 4hb])";
  te::Tensor G = packed_gates(h, Rp, sh.B, sh.H, ps[0], 4 * hb, name);
  return gate_math(
      c, sh,
      [&](int g, Expr bi, Expr n) {
        return xg(bi, n + ci(kOnnxGate[g] * sh.H)) + G(bi, packed_column(g, n, hb));
      },
      name);
}

// ---------------------------------------------------------------------------------------------
// Schedule

int64_t lstm_block_width(Config& cfg, int64_t hidden) {
  std::vector<int64_t> c{16};
  if (hidden > 16) c.push_back(32);
  cfg.define_knob("tile_x", c);
  if (cfg.is_fallback()) cfg.fallback_knob("tile_x", 16);
  return cfg.knob("tile_x");
}

void schedule_lstm_cell(Config& cfg, te::Schedule& s, const std::vector<te::Tensor>& outs,
                        const Target& target) {
  KILN_USER_CHECK(!outs.empty() && outs[0]->op->tag == tag::kLstmCell)
      << "schedule_lstm_cell: expects the outputs of lstm_cell_packed";
  const te::Tensor& out = outs[0];
  te::Tensor G, xh;
  for (const te::Operation& op : te::post_dfs_order({out.op()})) {
    if (op->tag == tag::kLstmGates) G = op.output(0);
    if (op->tag == detail::tag_of(tag::kInjective, "concat")) xh = op.output(0);
  }
  KILN_USER_CHECK(G.defined()) << "schedule_lstm_cell: no packed gate product under " << out.name();
  auto os = detail::const_shape(out, "schedule_lstm_cell");
  const int64_t B = os[0], H = os[1];
  const auto* gop = static_cast<const te::ComputeOpNode*>(G->op.get());
  const int64_t K = *as_const_int(gop->reduce_axis[0]->dom->extent);
  int64_t nb = 0;  // the packed weight's panel width (its only 3-D input)
  for (const te::Tensor& t : gop->input_tensors())
    if (t.ndim() == 3) nb = *as_const_int(t->shape[2]);

  const int64_t hb = lstm_block_width(cfg, H);
  KILN_USER_CHECK(4 * hb == nb) << "schedule_lstm_cell: config tile_x = " << hb
                                << " but the weight is packed in blocks of " << nb / 4;
  std::vector<int64_t> ys;
  for (int64_t v : {1, 2, 4})
    if (v <= B || v == 1) ys.push_back(v);
  cfg.define_knob("tile_y", ys);
  cfg.define_split("tile_k", K, 2, autotune::SplitPolicy::kFactors, 16);
  cfg.define_bool("unroll");
  if (cfg.is_fallback()) {
    cfg.fallback_knob("tile_y", ys.back());
    cfg.fallback_split("tile_k", {-1, 4});
    cfg.fallback_knob("unroll", 1);
  }
  const int64_t mr = cfg.knob("tile_y");
  const int lanes = std::max(1, std::min(16, target.vector_bits() / out->dtype.bits()));

  // Output tile: rows × hb hidden units; the gate math vectorized over the units.
  te::Stage so = s[out];
  auto oax = so.op_axis();
  auto [bo, po, bi, ui] = so.tile(oax[0], oax[1], ci(mr), ci(hb));
  so.reorder({po, bo, bi, ui});
  so.vectorize(so.split(ui, ci(lanes)).second);
  so.parallel(po);

  // Gate tile rows × 4hb in registers, computed at the output tile.
  te::Stage sg = s[G];
  sg.set_scope("local");
  sg.compute_at(so, bo);
  auto gax = sg.op_axis();
  auto [cjo, cji] = sg.split(gax[1], ci(lanes));
  auto ks = cfg.split("tile_k").apply(sg, sg.op_reduce_axis()[0]);
  sg.reorder({ks[0], ks[1], gax[0], cjo, cji});
  sg.unroll(gax[0]);
  sg.unroll(cjo);
  sg.vectorize(cji);
  if (cfg.knob("unroll") && cfg.split("tile_k").size[1] > 1) sg.unroll(ks[1]);

  // [x, h]: a small root stage, vectorized along k.
  if (xh.defined()) {
    te::Stage sx = s[xh];
    auto xax = sx.op_axis();
    sx.vectorize(sx.split(xax[1], ci(lanes)).second);
  }
}

autotune::Template lstm_cell_template(const LstmWorkload& w, const Target& target) {
  KILN_USER_CHECK(w.batch > 0 && w.input > 0 && w.hidden > 0)
      << "lstm_cell_template: extents must be positive, got batch=" << w.batch
      << " input=" << w.input << " hidden=" << w.hidden;
  return autotune::Template{
      "lstm_cell_cpu", "1", [w, target](Config& cfg) {
        const int64_t hb = lstm_block_width(cfg, w.hidden);
        const DataType f32 = DataType::Float(32);
        te::Tensor x = te::placeholder({ci(w.batch), ci(w.input)}, f32, "x");
        te::Tensor h = te::placeholder({ci(w.batch), ci(w.hidden)}, f32, "h");
        te::Tensor c = te::placeholder({ci(w.batch), ci(w.hidden)}, f32, "c");
        te::Tensor Wp = te::placeholder(
            {ci((w.hidden + hb - 1) / hb), ci(w.input + w.hidden), ci(4 * hb)}, f32, "Wp");
        te::Tensor b = te::placeholder({ci(4 * w.hidden)}, f32, "b");
        auto outs = lstm_cell_packed(x, h, c, Wp, b);
        te::Schedule s = te::create_schedule(outs);
        schedule_lstm_cell(cfg, s, outs, target);
        return autotune::Instance{s,
                                  {x, h, c, Wp, b, outs[0], outs[1]},
                                  cfg,
                                  {false, false, false, true, true, false, false}};
      }};
}

autotune::Template lstm_cell_onnx_template(const LstmWorkload& w, const Target& target) {
  KILN_USER_CHECK(w.batch > 0 && w.hidden > 0)
      << "lstm_cell_onnx_template: extents must be positive, got batch=" << w.batch
      << " hidden=" << w.hidden;
  return autotune::Template{
      "lstm_cell_onnx_cpu", "1", [w, target](Config& cfg) {
        const int64_t hb = lstm_block_width(cfg, w.hidden);
        const DataType f32 = DataType::Float(32);
        te::Tensor xg = te::placeholder({ci(w.batch), ci(4 * w.hidden)}, f32, "xg");
        te::Tensor h = te::placeholder({ci(w.batch), ci(w.hidden)}, f32, "h");
        te::Tensor c = te::placeholder({ci(w.batch), ci(w.hidden)}, f32, "c");
        te::Tensor Rp = te::placeholder(
            detail::to_exprs(packed_lstm_onnx_weight_shape(w.hidden, hb)), f32, "Rp");
        auto outs = lstm_cell_onnx_packed(xg, h, c, Rp);
        te::Schedule s = te::create_schedule(outs);
        schedule_lstm_cell(cfg, s, outs, target);
        return autotune::Instance{
            s, {xg, h, c, Rp, outs[0], outs[1]}, cfg, {false, false, false, true, false, false}};
      }};
}

}  // namespace kiln::topi
