// Batched matrix products and their CPU schedule template. The compute is one reduction over k
// with the batch index broadcast when one side has batch 1. The schedule is dense.cc's
// register-blocked micro-kernel per batch: the output is tiled mr × nb, a local accumulator
// tile (k outermost, rows unrolled, nb/16 vectors unrolled, 16 lanes vectorized) is computed at
// the row-tile loop, and the fused batch × column-panel loop is parallel. With B [batch, K, N]
// the kernel's vector loads read B's rows directly; with the transposed B [batch, N, K] the
// template reads B through a packing stage Bp[batch, N/nb, K, nb] computed at the parallel
// batch × panel loop, so each panel is transposed once into a contiguous, L2-resident block.
#include "kiln/topi/batch_matmul.h"

#include <algorithm>

#include "gemm_knobs.h"
#include "kiln/topi/schedule_injective.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;
using detail::ci;

namespace {

struct BmmShapes {
  int64_t BA, BB, batch, M, N, K;
};

BmmShapes check_bmm(const te::Tensor& A, const te::Tensor& B, bool transpose_b) {
  const char* op = "batch_matmul";
  auto as = detail::const_shape(A, op), bs = detail::const_shape(B, op);
  KILN_USER_CHECK(as.size() == 3 && bs.size() == 3)
      << op << ": inputs must be 3-D, got A " << detail::shape_text(as) << " and B "
      << detail::shape_text(bs);
  KILN_USER_CHECK(A->dtype == B->dtype && A->dtype.is_float())
      << op << ": inputs must share one float dtype, got " << A->dtype << " and " << B->dtype;
  const int64_t kb = transpose_b ? bs[2] : bs[1];
  const int64_t N = transpose_b ? bs[1] : bs[2];
  KILN_USER_CHECK(as[2] == kb) << op << ": reduction extents differ: A " << detail::shape_text(as)
                               << ", B " << detail::shape_text(bs)
                               << (transpose_b ? " (transposed)" : "");
  KILN_USER_CHECK(as[0] == bs[0] || as[0] == 1 || bs[0] == 1)
      << op << ": batch extents differ: A " << detail::shape_text(as) << ", B "
      << detail::shape_text(bs);
  return {as[0], bs[0], std::max(as[0], bs[0]), as[1], N, as[2]};
}

Expr batch_index(const Var& b, int64_t extent) { return extent == 1 ? Expr(0) : Expr(b); }

/// Bp[b, no, k, ni] = B[b, no*nb + ni, k] (0 past N): B [BB, N, K] transposed into panels.
te::Tensor pack_bt(const te::Tensor& B, int64_t N, int64_t K, int64_t nb) {
  const int64_t BB = *as_const_int(B->shape[0]), panels = (N + nb - 1) / nb;
  return te::compute(
      {ci(BB), ci(panels), ci(K), ci(nb)},
      [&](Var b, Var no, Var k, Var ni) {
        Expr n = no * ci(nb) + ni;
        if (N % nb == 0) return B(b, n, k);
        return if_then_else(n < ci(N), B(b, min(n, ci(N - 1)), k), make_zero(B->dtype));
      },
      "Bp", tag::kBatchMatmulPack);
}

/// The transposed product read through packed panels (the template's compute).
te::Tensor batch_matmul_nt_packed(const te::Tensor& A, const te::Tensor& B, int64_t nb,
                                  const std::string& name) {
  BmmShapes sh = check_bmm(A, B, true);
  te::Tensor Bp = pack_bt(B, sh.N, sh.K, nb);
  auto k = te::reduce_axis({0, ci(sh.K)}, "k");
  return te::compute(
      {ci(sh.batch), ci(sh.M), ci(sh.N)},
      [&](Var b, Var m, Var n) {
        return te::sum(A(batch_index(b, sh.BA), m, k) *
                           Bp(batch_index(b, sh.BB), floordiv(n, ci(nb)), k, floormod(n, ci(nb))),
                       {k});
      },
      name, tag::kBatchMatmul);
}

}  // namespace

te::Tensor batch_matmul(const te::Tensor& A, const te::Tensor& B, bool transpose_b,
                        const std::string& name) {
  BmmShapes sh = check_bmm(A, B, transpose_b);
  auto k = te::reduce_axis({0, ci(sh.K)}, "k");
  if (!transpose_b && batch_matmul_padded_width(sh.N) != sh.N) {
    // B zero-padded to Np columns, the product over [batch, M, Np], then the first N columns:
    // the schedule's column panels are then never wider than the product.
    const int64_t Np = batch_matmul_padded_width(sh.N);
    te::Tensor Bp = te::compute(
        {ci(sh.BB), ci(sh.K), ci(Np)},
        [&](Var b, Var kk, Var n) {
          return if_then_else(n < ci(sh.N), B(b, kk, min(n, ci(sh.N - 1))), make_zero(B->dtype));
        },
        name + "_padded_b", tag::kBatchMatmulPack);
    te::Tensor Cp = te::compute(
        {ci(sh.batch), ci(sh.M), ci(Np)},
        [&](Var b, Var m, Var n) {
          return te::sum(A(batch_index(b, sh.BA), m, k) * Bp(batch_index(b, sh.BB), k, n), {k});
        },
        name + "_padded", tag::kBatchMatmul);
    return te::compute(
        {ci(sh.batch), ci(sh.M), ci(sh.N)}, [&](Var b, Var m, Var n) { return Cp(b, m, n); }, name,
        tag::kBatchMatmulUnpad);
  }
  return te::compute(
      {ci(sh.batch), ci(sh.M), ci(sh.N)},
      [&](Var b, Var m, Var n) {
        Expr bb = batch_index(b, sh.BB);
        Expr rhs = transpose_b ? B(bb, n, k) : B(bb, k, n);
        return te::sum(A(batch_index(b, sh.BA), m, k) * rhs, {k});
      },
      name, tag::kBatchMatmul);
}

void schedule_batch_matmul(Config& cfg, te::Schedule& s, const te::Tensor& C_or_unpad,
                           const Target& target, const te::Tensor& out_or_c) {
  const te::Tensor out = out_or_c.defined() ? out_or_c : C_or_unpad;
  // The product itself: C_or_unpad, or the padded product under its column slice.
  te::Tensor C = C_or_unpad;
  if (C->op->tag == tag::kBatchMatmulUnpad)
    C = static_cast<const te::ComputeOpNode*>(C->op.get())->input_tensors()[0];
  const bool padded = !C.same_as(C_or_unpad);
  KILN_USER_CHECK(C->op->tag == tag::kBatchMatmul)
      << "schedule_batch_matmul: stage " << C.name() << " is not a batch_matmul (tag '"
      << C->op->tag << "')";
  auto cs = detail::const_shape(C, "schedule_batch_matmul");
  const int64_t M = cs[1], N = cs[2];
  const auto* cop = static_cast<const te::ComputeOpNode*>(C->op.get());
  const int64_t K = *as_const_int(cop->reduce_axis[0]->dom->extent);
  te::Tensor Bp;
  for (const te::Tensor& t : cop->input_tensors())
    if (t->op->tag == tag::kBatchMatmulPack) Bp = t;

  const int64_t nb = detail::define_panel_width(cfg, M, N, target);
  if (Bp.defined() && Bp->shape.size() == 4) {
    KILN_USER_CHECK(*as_const_int(Bp->shape[3]) == nb)
        << "schedule_batch_matmul: config tile_x = " << nb << " but B is packed in panels of "
        << *as_const_int(Bp->shape[3]);
  }
  const int64_t mr = detail::define_row_tile(cfg, M, K, nb, target);
  const int lanes = std::max(1, std::min(16, target.vector_bits() / C->dtype.bits()));

  // Inline the injective stages between C and out (the epilogue and the column slice of a
  // padded product; not C's own inputs).
  std::vector<te::Operation> under_c = te::post_dfs_order({C.op()});
  for (const te::Operation& op : te::post_dfs_order({out.op()})) {
    if (op.same_as(out.op()) || op->kind != te::OpKind::kCompute) continue;
    bool is_input = false;
    for (const te::Operation& u : under_c) is_input |= u.same_as(op);
    if (!is_input && (is_injective_tag(op->tag) || op->tag == tag::kBatchMatmulUnpad))
      s[op].compute_inline();
  }

  // A padded product is computed whole, tiled below; the slice and epilogue read it in one
  // vectorized, parallel loop nest of their own.
  if (padded) schedule_injective_stage(s, out, target);
  const te::Tensor top = padded ? C : out;
  te::Tensor acc = C;
  te::Stage so = s[top];
  if (top.same_as(C)) {
    acc = s.cache_write(C, "local");
  } else {
    s[C].set_scope("local");
  }
  auto oax = so.op_axis();
  // Row and column tiles that do not divide are shifted inwards (te::Stage::split): every
  // accumulator tile is whole, also where the epilogue reads only part of a padded product.
  auto [io, ii] = so.split(oax[1], ci(mr), /*shift_tail=*/true);
  auto [jo, ji] = so.split(oax[2], ci(nb), /*shift_tail=*/true);
  so.reorder({oax[0], jo, io, ii, ji});
  so.vectorize(so.split(ji, ci(lanes)).second);
  te::IterVar outer = so.fuse(oax[0], jo);
  so.parallel(outer);

  if (Bp.defined()) {
    te::Stage sp = s[Bp];
    sp.compute_at(so, outer);
    auto pax = sp.op_axis();
    sp.vectorize(sp.split(pax.back(), ci(lanes)).second);
  }

  te::Stage sa = s[acc];
  sa.compute_at(so, io);
  auto aax = sa.op_axis();
  auto [cjo, cji] = sa.split(aax[2], ci(lanes));
  auto ks = cfg.split("tile_k").apply(sa, sa.op_reduce_axis()[0]);
  sa.reorder({ks[0], ks[1], aax[1], cjo, cji});
  sa.unroll(aax[1]);
  sa.unroll(cjo);
  sa.vectorize(cji);
  if (cfg.knob("unroll") && cfg.split("tile_k").size[1] > 1) sa.unroll(ks[1]);
}

autotune::Template batch_matmul_template(const BatchMatmulWorkload& w, const Target& target) {
  KILN_USER_CHECK(w.batch > 0 && w.M > 0 && w.N > 0 && w.K > 0)
      << "batch_matmul_template: extents must be positive, got batch=" << w.batch << " M=" << w.M
      << " N=" << w.N << " K=" << w.K;
  return autotune::Template{
      // Version 2: wide products are the result (no padded copy; batch_matmul_padded_width).
      "batch_matmul_cpu", "2", [w, target](Config& cfg) {
        // The width the schedule sees: N, or N padded (batch_matmul_padded_width).
        const int64_t n_eff = w.transpose_b ? w.N : batch_matmul_padded_width(w.N);
        const int64_t nb = detail::define_panel_width(cfg, w.M, n_eff, target);
        te::Tensor A = te::placeholder({ci(w.batch), ci(w.M), ci(w.K)}, DataType::Float(32), "A");
        te::Tensor B =
            w.transpose_b
                ? te::placeholder({ci(w.batch), ci(w.N), ci(w.K)}, DataType::Float(32), "B")
                : te::placeholder({ci(w.batch), ci(w.K), ci(w.N)}, DataType::Float(32), "B");
        te::Tensor C = w.transpose_b ? batch_matmul_nt_packed(A, B, nb, "batch_matmul")
                                     : batch_matmul(A, B, false);
        te::Schedule s = te::create_schedule({C});
        schedule_batch_matmul(cfg, s, C, target);
        // Attention's products: both operands are activations, hot as their producers leave
        // them (a constant B is a dense layer's, not this template's).
        return autotune::Instance{s, {A, B, C}, cfg, {false, false, false}};
      }};
}

}  // namespace kiln::topi
