// The LSTM cell: gates = [x, h]·Wᵀ + b, then c' = σ(f)c + σ(i)tanh(g), h' = σ(o)tanh(c').
// The packed form concatenates x and h (one small root stage) so that the two products are one
// reduction over I + H, reads weights packed with the four gates of each block of hb hidden
// units side by side in one panel of 4·hb columns, and computes h' and c' with one two-output
// compute. The schedule tiles the outputs (rows × hb hidden units), computes the matching
// rows × 4hb gate tile in a local accumulator at that tile (dense.cc's register micro-kernel:
// k outermost, rows and 16-lane vectors unrolled), and applies the gate math on the tile
// vectorized over 16 hidden units, so the gates stay in registers / L1.
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
                       const te::Tensor& b, const std::string& op) {
  auto xs = detail::const_shape(x, op), hs = detail::const_shape(h, op),
       cs = detail::const_shape(c, op), bs = detail::const_shape(b, op);
  KILN_USER_CHECK(xs.size() == 2 && hs.size() == 2 && hs == cs && xs[0] == hs[0])
      << op << ": x must be [B, I] and h, c [B, H], got x " << detail::shape_text(xs) << ", h "
      << detail::shape_text(hs) << ", c " << detail::shape_text(cs);
  KILN_USER_CHECK(bs.size() == 1 && bs[0] == 4 * hs[1])
      << op << ": bias must be [4H] = [" << 4 * hs[1] << "], got " << detail::shape_text(bs);
  for (const te::Tensor* t : {&h, &c, &b})
    KILN_USER_CHECK((*t)->dtype == x->dtype && x->dtype.is_float())
        << op << ": all inputs must share one float dtype, got " << x->dtype << " and "
        << (*t)->dtype << " (" << t->name() << ")";
  return {xs[0], xs[1], hs[1]};
}

/// h' and c' from a gate accessor gate(g, b, n) (pre-activation, bias excluded).
std::vector<te::Tensor> gate_math(const te::Tensor& c, const te::Tensor& b, const LstmShapes& sh,
                                  const std::function<Expr(int, Expr, Expr)>& gate,
                                  const std::string& name) {
  return te::compute_multi(
      {ci(sh.B), ci(sh.H)},
      [&](const std::vector<Var>& i) -> std::vector<Expr> {
        auto pre = [&](int g) { return gate(g, i[0], i[1]) + b(i[1] + ci(g * sh.H)); };
        Expr c_new = ir::sigmoid(pre(1)) * c(i[0], i[1]) + ir::sigmoid(pre(0)) * ir::tanh(pre(2));
        Expr h_new = ir::sigmoid(pre(3)) * ir::tanh(c_new);
        return {h_new, c_new};
      },
      name, tag::kLstmCell);
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
      << "] and Wh [4H, H] = [" << 4 * sh.H << ", " << sh.H << "], got "
      << detail::shape_text(wi) << " and " << detail::shape_text(wh);
  te::Tensor gx = dense(x, Wi, {}, name + "_gx");
  te::Tensor gh = dense(h, Wh, {}, name + "_gh");
  return gate_math(c, b, sh,
                   [&](int g, Expr bi, Expr n) {
                     return gx(bi, n + ci(g * sh.H)) + gh(bi, n + ci(g * sh.H));
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
  const int64_t nb = 4 * hb;
  te::Tensor xh = te::compute(
      {ci(sh.B), ci(sh.I + sh.H)},
      [&](Var bi, Var k) {
        return if_then_else(k < ci(sh.I), x(bi, min(k, ci(sh.I - 1))), h(bi, max(k - ci(sh.I), 0)));
      },
      name + "_xh", detail::tag_of(tag::kInjective, "concat"));
  auto k = te::reduce_axis({0, ci(sh.I + sh.H)}, "k");
  te::Tensor G = te::compute(
      {ci(sh.B), ci(ps[0] * nb)},
      [&](Var bi, Var j) {
        return te::sum(xh(bi, k) * Wp(floordiv(j, ci(nb)), k, floormod(j, ci(nb))), {k});
      },
      name + "_gates", tag::kLstmGates);
  return gate_math(c, b, sh,
                   [&](int g, Expr bi, Expr n) {
                     return G(bi, floordiv(n, ci(hb)) * ci(nb) + ci(g * hb) + floormod(n, ci(hb)));
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
  const int64_t nb = *as_const_int(gop->input_tensors()[1]->shape[2]);

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
        return autotune::Instance{s, {x, h, c, Wp, b, outs[0], outs[1]}, cfg};
      }};
}

}  // namespace kiln::topi
