// Two-stage reductions along a tensor's innermost (contiguous) axis, so that CPU schedules can
// vectorize them without reassociating floating-point sums in the code generator: for a
// reduction R over k in [0, L), a partial stage P[..., v] = R over ko of f(..., ko·V + v) (v in
// [0, V); a last block that L does not fill is shifted inwards to end at L, the lanes the block
// before read giving the identity) whose lane axis v is spatial and contiguous in the input,
// then the result R over v of P[..., v]. Used by the reductions (sum, mean, max, min, prod over the
// last axis), softmax and layer norm; schedule_injective.cc vectorizes P's lane axis where the
// final stage is computed (`attach_lane_partial`), and the final stage's lane loop, whose lanes
// tir::vectorize combines in a tree of log2(V) steps (attr::kReduceLanes). Rows shorter than a
// vector keep one stage; rows of 32 vectors or more keep four vectors of partials (V = 64), four
// independent accumulator chains.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "topi_util.h"

namespace kiln::topi::detail {

/// The lanes V of a partial stage (16 floats: one AVX-512 vector, two AVX2 ones).
constexpr int64_t kReduceLanes = 16;
/// The tag of a partial stage.
constexpr const char* kLanePartialTag = "comm_reduce,lane_partial";

/// A reduction over `axis` where `where` holds (te::sum, a comm_reducer, ...).
using ReduceWhere = std::function<ir::Expr(ir::Expr, std::vector<te::IterVar>, ir::Expr)>;

/// True when a row of L elements is reduced in two stages: rows of a vector or more, and
/// rows of whole vectors reduced with further (outer) dimensions (a blocked tensor's lanes).
inline bool two_stage(int64_t L, const std::vector<int64_t>& outer = {}) {
  int64_t rows = 1;
  for (int64_t o : outer) rows *= o;
  return L >= kReduceLanes || (rows > 1 && L % kReduceLanes == 0);
}

/// The identity of the reduction `r` (0 for a sum, -inf for a max) in type `t`.
inline ir::Expr identity_of(const ReduceWhere& r, DataType t) {
  ir::Expr e = r(ir::make_const(t, 0), {te::reduce_axis(ir::Range(ci(0), ci(1)), "i")}, ir::Expr());
  const auto* red = e.as<ir::Reduce>();
  KILN_ICHECK(red && red->combiner->identity.size() == 1) << "identity_of: not a reduction";
  return red->combiner->identity[0];
}

/// out[i] = R over (o, k) of f(i, o, k): o over `outer` (further reduced dimensions, outside
/// the row; empty for a plain row reduction), k in [0, L) the row, i over `out_shape`; in two
/// stages when two_stage(L), the partial stage reducing o and the row's vector blocks. The
/// result has name `name` and tag `tag`; the partial stage is `name`.partial.
inline te::Tensor innermost_reduce(
    const std::vector<int64_t>& out_shape, const std::vector<int64_t>& outer, int64_t L,
    const std::function<ir::Expr(const std::vector<ir::Var>&, const std::vector<ir::Var>&,
                                 ir::Expr)>& f,
    const ReduceWhere& r, const std::string& name, const std::string& tag) {
  auto outer_axes = [&] {
    std::vector<te::IterVar> ks;
    for (size_t j = 0; j < outer.size(); ++j)
      ks.push_back(te::reduce_axis(ir::Range(ci(0), ci(outer[j])), "o" + std::to_string(j)));
    return ks;
  };
  auto vars = [](const std::vector<te::IterVar>& ks) {
    std::vector<ir::Var> v;
    for (const te::IterVar& k : ks) v.push_back(k->var);
    return v;
  };
  if (!two_stage(L, outer)) {
    std::vector<te::IterVar> ks = outer_axes();
    auto k = te::reduce_axis(ir::Range(ci(0), ci(L)), "k");
    std::vector<ir::Var> o = vars(ks);
    ks.push_back(k);
    return te::compute(
        to_exprs(out_shape),
        [&](const std::vector<ir::Var>& i) { return r(f(i, o, k->var), ks, ir::Expr()); }, name,
        tag);
  }
  // Long rows keep four vectors of partials, four independent accumulator chains (a max's
  // compare-and-select or a sum's add has several cycles of latency per vector).
  const int64_t V = L >= 32 * kReduceLanes ? 4 * kReduceLanes : kReduceLanes;
  const int64_t n_blocks = (L + V - 1) / V;
  std::vector<int64_t> pshape = out_shape;
  pshape.push_back(V);
  std::vector<te::IterVar> ks = outer_axes();
  std::vector<ir::Var> o = vars(ks);
  auto ko = te::reduce_axis(ir::Range(ci(0), ci(n_blocks)), "ko");
  ks.push_back(ko);
  te::Tensor partial = te::compute(
      to_exprs(pshape),
      [&](const std::vector<ir::Var>& iv) {
        std::vector<ir::Var> i(iv.begin(), iv.end() - 1);
        ir::Expr k = ko->var * ci(V) + iv.back();
        if (L % V == 0) return r(f(i, o, k), ks, ir::Expr());
        // The last block is shifted inwards to end at L, its lanes that the block before
        // already read giving the identity: whole vector loads and an unmasked update, which
        // loop_partition leaves to the last block alone.
        ir::Expr shifted = ir::min(ko->var * ci(V), ci(L - V)) + iv.back();
        ir::Expr x = f(i, o, shifted);
        // Every lane of the blocks before the last is new, and the lanes v >= n_blocks·V - L
        // of the last: both are ko·V - v <= L - V (affine, which loop_partition proves true on
        // the blocks before the last).
        ir::Expr fresh = likely(ko->var * ci(V) - iv.back() <= ci(L - V));
        return r(select(fresh, x, identity_of(r, x.dtype())), ks, ir::Expr());
      },
      name + ".partial", kLanePartialTag);
  auto v = te::reduce_axis(ir::Range(ci(0), ci(V)), "v");
  return te::compute(
      to_exprs(out_shape),
      [&](const std::vector<ir::Var>& i) {
        std::vector<ir::Expr> idx(i.begin(), i.end());
        idx.push_back(v->var);
        return r(partial(idx), {v}, ir::Expr());
      },
      name, tag);
}

/// out[i] = R over k in [0, L) of f(i, k): a row reduction (above, with no outer dimensions).
inline te::Tensor innermost_reduce(
    const std::vector<int64_t>& out_shape, int64_t L,
    const std::function<ir::Expr(const std::vector<ir::Var>&, ir::Expr)>& f, const ReduceWhere& r,
    const std::string& name, const std::string& tag) {
  return innermost_reduce(
      out_shape, {}, L,
      [&](const std::vector<ir::Var>& i, const std::vector<ir::Var>&, ir::Expr k) {
        return f(i, k);
      },
      r, name, tag);
}

}  // namespace kiln::topi::detail
