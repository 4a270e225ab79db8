/// \file dense.h
/// \brief Dense (fully connected) layers: y = x·Wᵀ + b, with x [M, K], W [N, K], b [N].
///
/// Pattern kind: `kOutEWiseFusable` (the graph compiler fuses element-wise ops on y — bias,
/// relu, … — into the dense kernel; the schedule computes the dense at the output's tile).
///
/// Two compute rules:
/// * `dense(x, W, b)`: the plain rule, tag "dense". Any float dtype.
/// * `dense_packed(x, Wp, N, b)`: the same product over weights packed by
///   `pack_dense_weight(W, nb)` into panels Wp [ceil(N/nb), K, nb] (Wp[no, k, ni] =
///   W[no·nb + ni, k], zero past row N), tag "dense_packed". The packing is a compute of its
///   own (tag "dense_pack"); the graph compiler constant-folds it, so at run time the
///   micro-kernel reads nb contiguous weights per k step.
///
/// The CPU schedule is a template (autotune/template.h) over the packed form, the register-
/// blocked micro-kernel of docs/gemm-schedule.md: the output is tiled mr × nb (knobs tile_y
/// and tile_x), the product is accumulated in a local tile computed at the output tile (rows
/// unrolled, nb / 16 vectors of 16 lanes), k is split by tile_k with the inner part unrolled
/// when `unroll` is set, and the fused panel × row-tile loop is parallel. Batch 1 (M = 1) is a
/// GEMV bound by the bandwidth of reading W; its fallback uses one row and 64-wide panels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/autotune/template.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

/// Pattern kind of dense, dense_packed and batch_matmul.
constexpr OpPattern kDensePattern = OpPattern::kOutEWiseFusable;

/// Tags of the compute stages.
namespace tag {
constexpr const char* kDense = "dense";
constexpr const char* kDensePacked = "dense_packed";
constexpr const char* kDensePack = "dense_pack";
}  // namespace tag

/// y[m, n] = sum_k x[m, k] · W[n, k] (+ bias[n]). x [M, K], W [N, K], bias [N] or undefined;
/// all of one float dtype. Errors name the op and the shapes. pattern: out_ewise_fusable
te::Tensor dense(const te::Tensor& x, const te::Tensor& W, const te::Tensor& bias = {},
                 const std::string& name = "dense");

/// Wp[no, k, ni] = W[no·nb + ni, k] (0 past row N): W [N, K] in panels of nb rows,
/// Wp [ceil(N / nb), K, nb]. nb must be positive. pattern: injective
te::Tensor pack_dense_weight(const te::Tensor& W, int64_t nb,
                             const std::string& name = "dense_pack");

/// y[m, n] = sum_k x[m, k] · Wp[n / nb, k, n % nb] (+ bias[n]) for n < N, with Wp from
/// pack_dense_weight (nb = Wp's last extent, N <= panels · nb). pattern: out_ewise_fusable
te::Tensor dense_packed(const te::Tensor& x, const te::Tensor& Wp, int64_t N,
                        const te::Tensor& bias = {}, const std::string& name = "dense_packed");

/// A dense workload: the static description a template is made for.
struct DenseWorkload {
  int64_t M = 1, N = 1, K = 1;
  bool bias = false;  ///< add bias[n] (argument after Wp)
  bool relu = false;  ///< apply max(·, 0) to the result (after the bias)
};

/// Schedules a dense_packed stage `D` whose group output is `out` (D itself or an injective
/// epilogue on D, e.g. bias + relu; injective stages between are inlined) with the knobs of
/// `cfg`: tile_y (rows, choice), tile_x (panel width nb, choice of multiples of 16; must equal
/// Wp's nb: read it with dense_pack_width), tile_k (split of K), unroll (bool). `units`: the N
/// the knobs are defined for, the dense layer's own N when D computes it padded to whole panels
/// (the graph's dense_packed `orig_units`), so that a config tuned for the layer applies; 0: D's.
void schedule_dense_packed(autotune::Config& cfg, te::Schedule& s, const te::Tensor& D,
                           const te::Tensor& out, const Target& target, int64_t units = 0);

/// Declares (all modes) the panel width knob tile_x for a dense with N outputs on rows M and
/// returns its current value: call before building Wp's placeholder. The fallback depends on
/// the target's vector registers (64 with AVX-512, 16 with AVX2 for M > 1).
int64_t dense_pack_width(autotune::Config& cfg, int64_t M, int64_t N, const Target& target);

/// The template "dense_packed_cpu": arguments x [M, K], Wp [ceil(N/nb), K, nb], (bias [N]),
/// y [M, N]; nb is the config's tile_x.
autotune::Template dense_template(const DenseWorkload& w, const Target& target);

}  // namespace kiln::topi
