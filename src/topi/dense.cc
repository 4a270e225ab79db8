// Dense layers: the plain and the packed compute rules, the weight packing, and the CPU schedule
// template over packed weights. The schedule is the register-blocked GEMM micro-kernel of
// docs/gemm-schedule.md applied to y = x·Wᵀ: W is packed (once, at compile time) into panels
// Wp[N/nb, K, nb] so that one k step of the micro-kernel reads nb contiguous weights; the
// output is tiled mr × nb, and each tile is accumulated in a local buffer computed at the
// tile (k outermost, then rows unrolled, then nb/16 vectors of 16 lanes unrolled), which LLVM
// keeps in zmm registers: per k step mr broadcasts of x and mr·nb/16 FMAs. An injective
// epilogue (bias, relu, …) is the output stage, so the tile is written once, finished. The
// fused panel × row-tile loop is parallel. For M = 1 the same kernel is a GEMV that streams
// each weight once.
#include "kiln/topi/dense.h"

#include <algorithm>

#include "gemm_knobs.h"
#include "kiln/topi/elemwise.h"
#include "kiln/topi/quantized.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;

namespace {

void check_dense_inputs(const te::Tensor& x, const std::vector<int64_t>& xs, int64_t K, DataType wt,
                        const std::string& wshape, const std::string& op) {
  KILN_USER_CHECK(xs.size() == 2) << op << ": data must be 2-D [M, K], got shape "
                                  << detail::shape_text(xs);
  KILN_USER_CHECK(x->dtype.is_float())
      << op << ": needs floating-point data, got " << x->dtype << " (for int8 use quantized.h)";
  KILN_USER_CHECK(x->dtype == wt) << op << ": data is " << x->dtype << " but weight is " << wt;
  KILN_USER_CHECK(xs[1] == K) << op << ": reduction extents differ: data " << detail::shape_text(xs)
                              << ", weight " << wshape;
}

te::Tensor add_bias(const te::Tensor& y, const te::Tensor& bias, int64_t N, const std::string& op,
                    const std::string& name) {
  if (!bias.defined()) return y;
  auto bs = detail::const_shape(bias, op);
  KILN_USER_CHECK(bs.size() == 1 && bs[0] == N)
      << op << ": bias must be [" << N << "], got " << detail::shape_text(bs);
  KILN_USER_CHECK(bias->dtype == y->dtype)
      << op << ": bias is " << bias->dtype << " but the output is " << y->dtype;
  return te::compute(
      y->shape, [&](Var m, Var n) { return y(m, n) + bias(n); }, name + "_bias",
      detail::tag_of(tag::kBroadcast, "bias_add"));
}

}  // namespace

te::Tensor dense(const te::Tensor& x, const te::Tensor& W, const te::Tensor& bias,
                 const std::string& name) {
  auto xs = detail::const_shape(x, "dense");
  auto ws = detail::const_shape(W, "dense");
  KILN_USER_CHECK(ws.size() == 2) << "dense: weight must be 2-D [N, K], got shape "
                                  << detail::shape_text(ws);
  check_dense_inputs(x, xs, ws[1], W->dtype, detail::shape_text(ws), "dense");
  auto k = te::reduce_axis({0, detail::ci(xs[1])}, "k");
  te::Tensor y = te::compute(
      {detail::ci(xs[0]), detail::ci(ws[0])},
      [&](Var m, Var n) { return te::sum(x(m, k) * W(n, k), {k}); }, name, tag::kDense);
  return add_bias(y, bias, ws[0], "dense", name);
}

te::Tensor pack_dense_weight(const te::Tensor& W, int64_t nb, const std::string& name) {
  auto ws = detail::const_shape(W, "pack_dense_weight");
  KILN_USER_CHECK(ws.size() == 2) << "pack_dense_weight: weight must be 2-D [N, K], got shape "
                                  << detail::shape_text(ws);
  KILN_USER_CHECK(nb > 0) << "pack_dense_weight: panel width must be positive, got " << nb;
  const int64_t N = ws[0], K = ws[1], panels = (N + nb - 1) / nb;
  return te::compute(
      {detail::ci(panels), detail::ci(K), detail::ci(nb)},
      [&](Var no, Var k, Var ni) {
        Expr n = no * detail::ci(nb) + ni;
        if (N % nb == 0) return W(n, k);
        return if_then_else(n < detail::ci(N), W(min(n, detail::ci(N - 1)), k),
                            make_zero(W->dtype));
      },
      name, tag::kDensePack);
}

te::Tensor dense_packed(const te::Tensor& x, const te::Tensor& Wp, int64_t N,
                        const te::Tensor& bias, const std::string& name) {
  auto xs = detail::const_shape(x, "dense_packed");
  auto ps = detail::const_shape(Wp, "dense_packed");
  KILN_USER_CHECK(ps.size() == 3)
      << "dense_packed: packed weight must be 3-D [N/nb, K, nb], got shape "
      << detail::shape_text(ps);
  check_dense_inputs(x, xs, ps[1], Wp->dtype, detail::shape_text(ps), "dense_packed");
  const int64_t nb = ps[2];
  KILN_USER_CHECK(N > 0 && N <= ps[0] * nb && N > (ps[0] - 1) * nb)
      << "dense_packed: " << N << " outputs do not match packed weight " << detail::shape_text(ps)
      << " (needs " << (ps[0] - 1) * nb + 1 << " to " << ps[0] * nb << ")";
  auto k = te::reduce_axis({0, detail::ci(xs[1])}, "k");
  te::Tensor y = te::compute(
      {detail::ci(xs[0]), detail::ci(N)},
      [&](Var m, Var n) {
        return te::sum(x(m, k) * Wp(floordiv(n, detail::ci(nb)), k, floormod(n, detail::ci(nb))),
                       {k});
      },
      name, tag::kDensePacked);
  return add_bias(y, bias, N, "dense_packed", name);
}

// ---------------------------------------------------------------------------------------------
// Schedule

int64_t dense_pack_width(Config& cfg, int64_t M, int64_t N, const Target& target) {
  return detail::define_panel_width(cfg, M, N, target);
}

void schedule_dense_packed(Config& cfg, te::Schedule& s, const te::Tensor& D, const te::Tensor& out,
                           const Target& target, int64_t units) {
  KILN_USER_CHECK(D->op->tag == tag::kDensePacked || D->op->tag == tag::kQuantizedDensePacked)
      << "schedule_dense_packed: stage " << D.name() << " is not a dense_packed (tag '"
      << D->op->tag << "')";
  auto ds = detail::const_shape(D, "schedule_dense_packed");
  const int64_t M = ds[0], N = ds[1];
  const auto* cop = static_cast<const te::ComputeOpNode*>(D->op.get());
  const int64_t K = *as_const_int(cop->reduce_axis[0]->dom->extent);
  const te::Tensor Wp = cop->input_tensors()[1];
  const int64_t wp_nb = *as_const_int(Wp->shape[2]);

  // Knobs.
  const int64_t nb = dense_pack_width(cfg, M, units > 0 ? units : N, target);
  KILN_USER_CHECK(nb == wp_nb) << "schedule_dense_packed: config tile_x = " << nb
                               << " but the packed weight " << Wp.name() << " has panels of "
                               << wp_nb;
  const int64_t mr = detail::define_row_tile(cfg, M, K, nb, target);
  const int lanes = std::max(1, std::min(16, target.vector_bits() / D->dtype.bits()));

  // Inline the injective stages between D and out (not D's own inputs).
  std::vector<te::Operation> under_d = te::post_dfs_order({D.op()});
  for (const te::Operation& op : te::post_dfs_order({out.op()})) {
    if (op.same_as(out.op()) || op->kind != te::OpKind::kCompute) continue;
    bool is_input = false;
    for (const te::Operation& u : under_d) is_input |= u.same_as(op);
    if (!is_input && is_injective_tag(op->tag)) s[op].compute_inline();
  }

  // The output tile loops.
  te::Tensor acc = D;
  te::Stage so = s[out];
  if (out.same_as(D)) {
    acc = s.cache_write(D, "local");
  } else {
    s[D].set_scope("local");
  }
  // An epilogue through a reshape may give `out` unit axes ([1, M, N], [M, 1, N]): they go
  // outermost, and the M and N axes are tiled.
  auto oax = so.op_axis();
  const std::vector<int64_t> os = detail::const_shape(out, "schedule_dense_packed");
  KILN_USER_CHECK(os.size() >= 2 && os.back() == N)
      << "schedule_dense_packed: output '" << out.name() << "' must be [M, N] = [" << M << ", " << N
      << "] (unit axes may be added before N)";
  size_t m_axis = os.size() - 2;
  for (size_t d = 0; d + 1 < os.size(); ++d)
    if (os[d] != 1) m_axis = d;
  if (os.size() > 2) {
    std::vector<te::IterVar> order;
    for (size_t d = 0; d + 1 < os.size(); ++d)
      if (d != m_axis) order.push_back(oax[d]);
    order.push_back(oax[m_axis]);
    order.push_back(oax.back());
    so.reorder(order);
  }
  // Row tiles that divide M: panels and row tiles fuse into one parallel loop. Otherwise, with
  // at least 8 panels, the panel loop alone is parallel, so that loop_partition can split each
  // panel's last, partial row tile off and the full tiles keep constant bounds (a tail inside a
  // fused loop would leave every tile of the fused loop's remainder with dynamic bounds). With
  // fewer panels (a channels-last Linear with N <= the panel width: one) that would leave threads
  // idle: the last row tile is shifted inwards instead (it recomputes up to mr - 1 rows of the
  // tile before it, (mr - M % mr) / M of the work: 3% for BERT's 128 tokens, which keep the
  // partial tile) and panels and row tiles fuse.
  const int64_t panels = (N + nb - 1) / nb;
  const bool shift = M % mr != 0 && M >= mr && panels < 8;
  auto [io, ii] = so.split(oax[m_axis], detail::ci(mr), shift);
  auto [jo, ji] = so.split(oax.back(), detail::ci(nb));
  so.reorder({jo, io, ii, ji});
  auto [jio, jii] = so.split(ji, detail::ci(lanes));
  so.vectorize(jii);
  te::IterVar outer = io;
  if (M % mr == 0 || shift) {
    outer = so.fuse(jo, io);
    so.parallel(outer);
  } else {
    so.parallel(jo);
  }

  // The register tile.
  te::Stage sa = s[acc];
  sa.compute_at(so, outer);
  auto aax = sa.op_axis();
  auto [cjo, cji] = sa.split(aax[1], detail::ci(lanes));
  auto ks = cfg.split("tile_k").apply(sa, sa.op_reduce_axis()[0]);
  sa.reorder({ks[0], ks[1], aax[0], cjo, cji});
  sa.unroll(aax[0]);
  sa.unroll(cjo);
  sa.vectorize(cji);
  if (cfg.knob("unroll") && cfg.split("tile_k").size[1] > 1) sa.unroll(ks[1]);
  if (D->op->tag == tag::kQuantizedDensePacked) schedule_quantized_lanes(s, acc, target);
}

autotune::Template dense_template(const DenseWorkload& w, const Target& target) {
  KILN_USER_CHECK(w.M > 0 && w.N > 0 && w.K > 0)
      << "dense_template: extents must be positive, got M=" << w.M << " N=" << w.N << " K=" << w.K;
  return autotune::Template{
      "dense_packed_cpu", "2", [w, target](Config& cfg) {
        const int64_t nb = dense_pack_width(cfg, w.M, w.N, target);
        te::Tensor x =
            te::placeholder({detail::ci(w.M), detail::ci(w.K)}, DataType::Float(32), "x");
        te::Tensor Wp =
            te::placeholder({detail::ci((w.N + nb - 1) / nb), detail::ci(w.K), detail::ci(nb)},
                            DataType::Float(32), "Wp");
        te::Tensor b;
        if (w.bias) b = te::placeholder({detail::ci(w.N)}, DataType::Float(32), "bias");
        // As the graph computes it (graph/strategy/cpu_layout.cc): N not a multiple of nb is
        // computed over whole panels, then the first N columns are taken by a separate stage
        // with the bias and relu (a kernel of its own there, default-scheduled here).
        const int64_t padded = (w.N + nb - 1) / nb * nb;
        te::Tensor D = dense_packed(x, Wp, padded, {}, "dense");
        te::Tensor out = D;
        if (w.bias || padded != w.N) {
          out = te::compute(
              {detail::ci(w.M), detail::ci(w.N)},
              [&](Var m, Var n) { return w.bias ? D(m, n) + b(n) : D(m, n); }, "dense_bias",
              detail::tag_of(tag::kBroadcast, "bias_add"));
        }
        if (w.relu) out = relu(out, "dense_relu");
        te::Schedule s = te::create_schedule({out});
        schedule_dense_packed(cfg, s, D, padded != w.N ? D : out, target, w.N);
        std::vector<te::Tensor> args{x, Wp};
        std::vector<bool> weights{false, true};
        if (w.bias) args.push_back(b), weights.push_back(true);
        args.push_back(out), weights.push_back(false);
        return autotune::Instance{s, args, cfg, weights};
      }};
}

}  // namespace kiln::topi
