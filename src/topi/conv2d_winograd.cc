// Winograd F(m x m, 3 x 3) convolution in NCHW[x]c (conv2d_winograd.h). The transforms are
// written out as sums and differences of the tile's elements, in two passes per tile: the input
// transform computes T[e][s] = sum_r BT[e][r] d[r][s], then V[e][u] = sum_s BT[u][s] T[e][s],
// each entry one expression chosen by a select on the transform point that folds away once the
// point loops are unrolled (a single pass, sum_{r,s} BT[e][r] BT[u][s] d[r][s] per entry, took
// 1.8x the adds); the output transform likewise, columns then rows of each tile. The product stage
// is scheduled like a 1x1 conv2d_nchwc: for each transform point, a register tile of oc_reg kernel
// vectors by tile_p tiles, with V broadcast from memory.
#include "kiln/topi/conv2d_winograd.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "conv2d_common.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;
using detail::ci;
using detail::vectorize_block;

namespace {

constexpr const char* kOp = "conv2d_winograd_nchwc";

/// The transform matrices of F(m x m, 3 x 3).
struct Matrices {
  int64_t m, alpha;
  std::vector<std::vector<double>> BT;  // alpha x alpha: V = BT d BT^T
  std::vector<std::vector<double>> G;   // alpha x 3:     U = G g G^T
  std::vector<std::vector<double>> AT;  // m x alpha:     Y = AT M AT^T
};

const Matrices& matrices(int64_t m) {
  static const Matrices f2{2,
                           4,
                           {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                           {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
                           {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  // F(4x4, 3x3) on the points 0, 1, -1, 1/2, -2, ∞ (Alam et al. 2022, points of the form c,
  // -1/c: cancellations in the transforms): its float32 error is about half that of Lavin's
  // 0, ±1, ±2 (max relative error 2.2e-6 against 5.1e-6 for a 64-channel layer, 4.8e-6
  // against 1.1e-5 for 256 channels, simulated in float32 against float64), close to F(3x3)'s.
  // BT solves AT·diag(G g)·BT = the correlation for these AT and G (exact rationals).
  static const Matrices f4{4,
                           6,
                           {{1, -1.5, -2, 1.5, 1, 0},
                            {0, -1, 0.5, 2.5, 1, 0},
                            {0, 1, -2.5, 0.5, 1, 0},
                            {0, -2, -1, 2, 1, 0},
                            {0, 0.5, -1, -0.5, 1, 0},
                            {0, 1, -1.5, -2, 1.5, 1}},
                           {{1, 0, 0},
                            {1.0 / 3, 1.0 / 3, 1.0 / 3},
                            {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                            {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                            {1.0 / 15, -2.0 / 15, 4.0 / 15},
                            {0, 0, 1}},
                           {{1, 1, 1, 1, 1, 0},
                            {0, 1, -1, 0.5, -2, 0},
                            {0, 1, 1, 0.25, 4, 0},
                            {0, 1, -1, 0.125, -8, 1}}};
  KILN_USER_CHECK(m == 2 || m == 4) << kOp << ": tile size " << m << " is not supported (2 or 4)";
  return m == 2 ? f2 : f4;
}

/// sum_k c_k x_k over the nonzero coefficients, adding or subtracting the ±1 ones.
Expr combine(const std::vector<std::pair<double, Expr>>& terms, DataType t) {
  Expr acc;
  for (const auto& [c, x] : terms) {
    if (c == 0) continue;
    if (!acc.defined()) {
      acc = c == 1 ? x : c == -1 ? -x : x * make_const(t, c);
    } else if (c == 1) {
      acc = acc + x;
    } else if (c == -1) {
      acc = acc - x;
    } else {
      acc = acc + x * make_const(t, c);
    }
  }
  return acc.defined() ? acc : make_zero(t);
}

/// table[i][j] chosen by the (loop) variables i and j: a select chain that folds to one entry
/// when both are constants.
Expr select_2d(const Expr& i, const Expr& j, const std::vector<std::vector<Expr>>& table) {
  auto row = [&](size_t a) {
    Expr r = table[a].back();
    for (size_t b = table[a].size() - 1; b-- > 0;) r = select(j == ci(b), table[a][b], r);
    return r;
  };
  Expr r = row(table.size() - 1);
  for (size_t a = table.size() - 1; a-- > 0;) r = select(i == ci(a), row(a), r);
  return r;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Knobs of the product stage for the tiles of an N x OH x OW output in m x m tiles and O output
/// channels in blocks of oc_bn. The fallback is conv2d_nchwc's register model
/// (docs/conv2d-schedule.md): V vectors x n tiles with V * n + V + 1 <= the target's vector
/// registers (32 with AVX-512, 16 with AVX2), maximizing the FMA share of a step (V * n / 2 FMA
/// cycles against V + n loads at 1.5 per cycle), ties to more accumulators.
void define_product_knobs(Config& cfg, int64_t N, int64_t OH, int64_t OW, int64_t O, int64_t m,
                          int64_t lanes, int64_t oc_bn, int64_t registers) {
  // The tiles of a register tile (p_reg): divisors up to 32 of either tile size's tile count,
  // so that the space is the same whichever tile size a config takes; a count that does not
  // divide this config's tiles leaves a guarded tail.
  auto tiles = [&](int64_t t) { return N * ceil_div(OH, t) * ceil_div(OW, t); };
  const int64_t P = tiles(m);
  std::vector<int64_t> p_regs;
  for (int64_t n = 1; n <= 32; ++n)
    if (tiles(2) % n == 0 || tiles(4) % n == 0) p_regs.push_back(n);
  cfg.define_knob("oc_reg", {1, 2, 4});
  cfg.define_knob("p_reg", p_regs);
  cfg.define_bool("unroll_ic");
  if (!cfg.is_fallback()) return;
  const int64_t vecs = std::max<int64_t>(1, oc_bn / lanes);
  std::tuple<double, int64_t> best{-1, 0};
  int64_t best_reg = 1, best_n = 1;
  for (int64_t reg : {1, 2, 4}) {
    if (detail::oc_chunks_per_tile(reg, O / oc_bn) != reg) continue;
    const int64_t v = vecs * reg;
    for (int64_t n = 1; n <= std::min<int64_t>(32, P); ++n) {
      if (P % n != 0 || v * n + v + 1 > registers) continue;
      const double fma = v * n / 2.0, load = (v + n) / 1.5;
      const double eff = std::round(1000 * fma / std::max(fma, load)) / 1000;
      std::tuple<double, int64_t> key{eff, v * n};
      if (key > best) {
        best = key;
        best_reg = reg;
        best_n = n;
      }
    }
  }
  cfg.fallback_knob("oc_reg", best_reg);
  cfg.fallback_knob("p_reg", best_n);
  cfg.fallback_knob("unroll_ic", 0);
}

struct Geometry {
  int64_t N, CC, H, W, cb, m, alpha, OB, ob, OH, OW, TH, TW, P;
};

Geometry geometry(const std::vector<int64_t>& d, const std::vector<int64_t>& k,
                  const Conv2DParams& p) {
  check_conv_params(p, kOp);
  KILN_USER_CHECK(d.size() == 5 && k.size() == 6)
      << kOp << ": expected data [N, C/x, H, W, x] and a transformed kernel "
      << "[alpha, alpha, O/y, C/x, x, y], got data " << shape_str(d) << " and kernel "
      << shape_str(k);
  KILN_USER_CHECK(p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 &&
                  p.groups == 1)
      << kOp << ": needs strides and dilation 1 and groups 1, got " << p.str();
  KILN_USER_CHECK(k[0] == k[1] && (k[0] == 4 || k[0] == 6))
      << kOp << ": kernel " << shape_str(k) << " is not transformed for F(2x2, 3x3) or "
      << "F(4x4, 3x3) (its first two dimensions must be 4 or 6)";
  KILN_USER_CHECK(d[1] == k[3] && d[4] == k[4])
      << kOp << ": data " << shape_str(d) << " (" << d[1] * d[4] << " channels in blocks of "
      << d[4] << ") does not match the transformed kernel " << shape_str(k) << " (" << k[3] * k[4]
      << " input channels in blocks of " << k[4] << ")";
  Geometry g;
  g.N = d[0];
  g.CC = d[1];
  g.H = d[2];
  g.W = d[3];
  g.cb = d[4];
  g.alpha = k[0];
  g.m = g.alpha - 2;
  g.OB = k[2];
  g.ob = k[5];
  g.OH = conv_out_extent(g.H, 3, 1, 1, p.padding.top, p.padding.bottom);
  g.OW = conv_out_extent(g.W, 3, 1, 1, p.padding.left, p.padding.right);
  KILN_USER_CHECK(g.OH > 0 && g.OW > 0)
      << kOp << ": the 3x3 kernel does not fit the padded input: data " << shape_str(d)
      << ", padding " << p.padding.str();
  g.TH = ceil_div(g.OH, g.m);
  g.TW = ceil_div(g.OW, g.m);
  g.P = g.N * g.TH * g.TW;
  return g;
}

}  // namespace

bool winograd_applicable(const Conv2DWorkload& wl) {
  const Conv2DParams& p = wl.params;
  return wl.kernel_h == 3 && wl.kernel_w == 3 && p.stride_h == 1 && p.stride_w == 1 &&
         p.dilation_h == 1 && p.dilation_w == 1 && p.groups == 1 && wl.out_height() > 0 &&
         wl.out_width() > 0;
}

namespace {

/// A map under 14x14 whose F(4x4) transformed kernel (36 floats per channel pair, 4x the
/// kernel) exceeds 16 MB: the kernel streams from memory on every call and, stored transformed,
/// quadruples the layer's share of the model (ResNet-18's 7x7x512 layers: 38 MB each, the
/// process 199 -> 361 MB). Such layers take F(2x2) (16 floats per pair).
bool large_kernel_small_map(const Conv2DWorkload& wl) {
  constexpr int64_t kMaxTransformedBytes = 16 << 20;
  return (wl.out_height() < 14 || wl.out_width() < 14) &&
         wl.in_channel * wl.out_channel * 36 * 4 > kMaxTransformedBytes;
}

}  // namespace

bool prefer_winograd(const Conv2DWorkload& wl, const Target& target) {
  if (target.vector_bits() < 512) return winograd_candidate(wl);
  // A large kernel on a small map takes F(2x2) (define_conv2d_winograd_knobs), 16/9 of the
  // kernel: ResNet's 7x7x512 layers (C12) 2.03 -> 1.34 ms with the weights cached, 2.10 -> 1.48
  // ms with the caches evicted before every call (kiln-bench-ops, Zen 4, 1 thread), for 7.4 MB
  // more weights each.
  return winograd_applicable(wl) && wl.in_channel >= 32 && wl.out_channel >= 32 &&
         wl.out_height() >= 7 && wl.out_width() >= 7;
}

bool winograd_candidate(const Conv2DWorkload& wl) {
  return winograd_applicable(wl) && wl.in_channel >= 16 && wl.out_channel >= 16 &&
         wl.out_height() >= 7 && wl.out_width() >= 7;
}

std::vector<int64_t> winograd_weight_shape(const std::vector<int64_t>& k, int64_t m, int64_t ic_bn,
                                           int64_t oc_bn) {
  const char* op = "transform_winograd_weight";
  KILN_USER_CHECK(k.size() == 4 && k[2] == 3 && k[3] == 3)
      << op << ": expected a 3x3 OIHW kernel, got " << shape_str(k);
  const int64_t alpha = matrices(m).alpha;
  KILN_USER_CHECK(ic_bn > 0 && oc_bn > 0 && k[1] % ic_bn == 0 && k[0] % oc_bn == 0)
      << op << ": blocks (ic " << ic_bn << ", oc " << oc_bn << ") must divide the kernel's " << k[1]
      << " input and " << k[0] << " output channels (kernel " << shape_str(k) << ")";
  return {alpha, alpha, k[0] / oc_bn, k[1] / ic_bn, ic_bn, oc_bn};
}

runtime::NDArray transform_winograd_weight(const runtime::NDArray& w, int64_t m, int64_t ic_bn,
                                           int64_t oc_bn) {
  KILN_USER_CHECK(w.dtype() == DataType::Float(32))
      << "transform_winograd_weight: expected a float32 kernel, got " << w.dtype().str();
  std::vector<int64_t> us = winograd_weight_shape(w.shape(), m, ic_bn, oc_bn);
  const Matrices& mt = matrices(m);
  const int64_t C = w.shape()[1], A = mt.alpha;
  runtime::NDArray u = runtime::NDArray::empty(us, w.dtype());
  const float* g = w.data_as<float>();
  float* dst = u.data_as<float>();
  const int64_t OB = us[2];
  // Output channels innermost, kL at a time: the kernels of kL output channels at one input
  // channel are transformed side by side (the loops over l vectorize) and each of the
  // alpha^2 planes is written in runs of kL floats (in kernel order, one float per cache line).
  constexpr int64_t kL = 16;
  for (int64_t ob = 0; ob < OB; ++ob)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t o0 = 0; o0 < oc_bn; o0 += kL) {
        const int64_t n = std::min(kL, oc_bn - o0);
        double k[9][kL] = {}, t[6][3][kL];
        for (int64_t l = 0; l < n; ++l)
          for (int64_t j = 0; j < 9; ++j) k[j][l] = g[((ob * oc_bn + o0 + l) * C + c) * 9 + j];
        for (int64_t e = 0; e < A; ++e)  // G g
          for (int64_t s = 0; s < 3; ++s)
            for (int64_t l = 0; l < kL; ++l)
              t[e][s][l] =
                  mt.G[e][0] * k[s][l] + mt.G[e][1] * k[3 + s][l] + mt.G[e][2] * k[6 + s][l];
        // Element (e, v, ob, c / ic_bn, c % ic_bn, o0 + l) is at plane offset
        // (ob * C + c) * oc_bn + o0 + l, since CB * ic_bn = C.
        for (int64_t e = 0; e < A; ++e)
          for (int64_t v = 0; v < A; ++v) {
            float* d = dst + ((e * A + v) * OB * C + ob * C + c) * oc_bn + o0;
            for (int64_t l = 0; l < n; ++l) {
              d[l] = static_cast<float>(t[e][0][l] * mt.G[v][0] + t[e][1][l] * mt.G[v][1] +
                                        t[e][2][l] * mt.G[v][2]);
            }
          }
      }
  return u;
}

std::vector<int64_t> conv2d_winograd_nchwc_shape(const std::vector<int64_t>& d,
                                                 const std::vector<int64_t>& k,
                                                 const Conv2DParams& p) {
  Geometry g = geometry(d, k, p);
  return {g.N, g.OB, g.OH, g.OW, g.ob};
}

te::Tensor conv2d_winograd_nchwc(const te::Tensor& data, const te::Tensor& kernel,
                                 const Conv2DParams& p, const EpilogueSpec& ep,
                                 const std::string& name) {
  const Geometry g = geometry(static_shape(data, kOp), static_shape(kernel, kOp), p);
  const Matrices& mt = matrices(g.m);
  const DataType t = data->dtype;
  // Padding to whole tiles: rows TH * m + 2 and columns TW * m + 2 of the padded input.
  Padding2D pp = p.padding;
  pp.bottom = g.TH * g.m + 2 - g.H - pp.top;
  pp.right = g.TW * g.m + 2 - g.W - pp.left;
  te::Tensor pad = pad_spatial(data, 2, pp, name + "_pad");

  const int64_t A = g.alpha, tiles = g.TH * g.TW;
  // The input transform V = BT d B in two passes over each tile: its rows (T = BT d), then its
  // columns (V = T B); each entry one sum over the nonzero coefficients of a row of BT.
  te::Tensor T = te::compute(
      {ci(A), ci(A), ci(g.CC), ci(g.P), ci(g.cb)},
      [&](Var e, Var col, Var cc, Var tp, Var c) {
        Expr n = tp / ci(tiles), th = (tp / ci(g.TW)) % ci(g.TH), tw = tp % ci(g.TW);
        std::vector<std::vector<Expr>> table(A, std::vector<Expr>(A));
        for (int64_t a = 0; a < A; ++a)
          for (int64_t b = 0; b < A; ++b) {
            std::vector<std::pair<double, Expr>> terms;
            for (int64_t r = 0; r < A; ++r)
              if (mt.BT[a][r] != 0)
                terms.emplace_back(mt.BT[a][r],
                                   pad(n, cc, th * ci(g.m) + ci(r), tw * ci(g.m) + ci(b), c));
            table[a][b] = combine(terms, t);
          }
        return select_2d(e, col, table);
      },
      name + "_input_rows", detail::tag_of(tag::kInjective, "winograd_input_rows"));
  te::Tensor V = te::compute(
      {ci(A), ci(A), ci(g.CC), ci(g.P), ci(g.cb)},
      [&](Var e, Var u, Var cc, Var tp, Var c) {
        std::vector<std::vector<Expr>> table(A, std::vector<Expr>(A));
        for (int64_t a = 0; a < A; ++a)
          for (int64_t b = 0; b < A; ++b) {
            std::vector<std::pair<double, Expr>> terms;
            for (int64_t col = 0; col < A; ++col)
              if (mt.BT[b][col] != 0)
                terms.emplace_back(mt.BT[b][col], T(ci(a), ci(col), cc, tp, c));
            table[a][b] = combine(terms, t);
          }
        return select_2d(e, u, table);
      },
      name + "_input_transform", detail::tag_of(tag::kInjective, "winograd_input_transform"));

  te::IterVar rco = te::reduce_axis({0, static_cast<int32_t>(g.CC)}, "ic_outer");
  te::IterVar rci = te::reduce_axis({0, static_cast<int32_t>(g.cb)}, "ic_inner");
  te::Tensor M = te::compute(
      {ci(A), ci(A), ci(g.OB), ci(g.P), ci(g.ob)},
      [&](Var e, Var u, Var ob, Var tp, Var oi) {
        return te::sum(V(e, u, rco, tp, rci) * kernel(e, u, ob, rco, rci, oi), {rco, rci});
      },
      name + "_product", "winograd_product");

  // The output transform AT M A likewise: the columns of each tile (W = M A), then its rows.
  te::Tensor W = te::compute(
      {ci(A), ci(g.m), ci(g.OB), ci(g.P), ci(g.ob)},
      [&](Var a, Var j, Var ob, Var tp, Var oi) {
        std::vector<std::vector<Expr>> table(A, std::vector<Expr>(g.m));
        for (int64_t r = 0; r < A; ++r)
          for (int64_t c = 0; c < g.m; ++c) {
            std::vector<std::pair<double, Expr>> terms;
            for (int64_t b = 0; b < A; ++b)
              if (mt.AT[c][b] != 0) terms.emplace_back(mt.AT[c][b], M(ci(r), ci(b), ob, tp, oi));
            table[r][c] = combine(terms, t);
          }
        return select_2d(a, j, table);
      },
      name + "_output_cols", detail::tag_of(tag::kInjective, "winograd_output_cols"));
  te::Tensor Y = te::compute(
      {ci(g.N), ci(g.OB), ci(g.OH), ci(g.OW), ci(g.ob)},
      [&](Var n, Var ob, Var y, Var x, Var oi) {
        Expr tp = (n * ci(g.TH) + y / ci(g.m)) * ci(g.TW) + x / ci(g.m);
        std::vector<std::vector<Expr>> table(g.m, std::vector<Expr>(g.m));
        for (int64_t i = 0; i < g.m; ++i)
          for (int64_t j = 0; j < g.m; ++j) {
            std::vector<std::pair<double, Expr>> terms;
            for (int64_t a = 0; a < A; ++a)
              if (mt.AT[i][a] != 0) terms.emplace_back(mt.AT[i][a], W(ci(a), ci(j), ob, tp, oi));
            table[i][j] = combine(terms, t);
          }
        return select_2d(y % ci(g.m), x % ci(g.m), table);
      },
      name, kOp);
  return detail::conv_epilogue(Y, ep, name, kOp);
}

WinogradLayout define_conv2d_winograd_knobs(Config& cfg, const Conv2DWorkload& wl,
                                            const Target& target) {
  KILN_USER_CHECK(winograd_applicable(wl))
      << kOp << ": " << wl.str() << " is not a 3x3 convolution with strides and dilation 1";
  const int64_t lanes = std::max(1, target.vector_bits() / 32);
  const int64_t ic_bn = channel_block(wl.in_channel, lanes),
                oc_bn = channel_block(wl.out_channel, lanes);
  // F(4x4, 3x3) by default: 4x fewer multiply-adds than direct convolution (F(2x2): 2.25x),
  // and its transformed tiles 2.25x the input (F(2x2): 4x). Measured on Zen 4 (1 thread,
  // kiln-bench-ops --algo winograd): ResNet's 3x3 layers C2/C6/C9/C12 1198/1043/970/1567 us
  // with F(2x2), 737/628/845/1332 us with F(4x4). Errors against PyTorch grow (the small
  // wide_resnet50_2 test: 4.3e-5 -> 7.4e-5, the bar 1e-4): tuning may choose 2. F(2x2) where
  // F(4x4)'s kernel would be large for its map (large_kernel_small_map).
  cfg.define_knob("tile_m", {4, 2});
  if (cfg.is_fallback() && large_kernel_small_map(wl)) cfg.fallback_knob("tile_m", 2);
  WinogradLayout l;
  l.m = cfg.knob("tile_m");
  l.ic_bn = ic_bn;
  l.oc_bn = oc_bn;
  l.data_shape = nchwc_shape(wl.data_shape(), ic_bn, kOp);
  l.kernel_shape = winograd_weight_shape(wl.kernel_shape(), l.m, ic_bn, oc_bn);
  l.out_shape = nchwc_shape(wl.out_shape(), oc_bn, kOp);
  define_product_knobs(cfg, wl.batch, wl.out_height(), wl.out_width(), wl.out_channel, l.m, lanes,
                       oc_bn, target.vector_registers());
  return l;
}

void schedule_conv2d_winograd_nchwc(Config& cfg, te::Schedule& s, const te::Tensor& out,
                                    const Target& target) {
  te::Tensor Y = find_tagged({out}, kOp);
  KILN_USER_CHECK(Y.defined()) << "schedule_conv2d_winograd_nchwc: no " << kOp
                               << " stage feeds output '" << out.name() << "'";
  te::Tensor W = detail::inputs_of(Y)[0];
  te::Tensor M = detail::inputs_of(W)[0];
  std::vector<te::Tensor> mins = detail::inputs_of(M);
  te::Tensor V = mins[0];
  te::Tensor T = detail::inputs_of(V)[0];
  te::Tensor pad = detail::inputs_of(T)[0];
  std::vector<int64_t> ms = static_shape(M, kOp), ys = static_shape(Y, kOp);
  const int64_t lanes = std::max(1, target.vector_bits() / 32);
  const int64_t A = ms[0], OB = ms[2], ob = ms[4], m = A - 2;
  if (cfg.space().find("tile_m") >= 0) {
    KILN_USER_CHECK(cfg.knob("tile_m") == m)
        << "schedule_conv2d_winograd_nchwc: the config's tile size " << cfg.knob("tile_m")
        << " differs from the kernel's (" << m << ")";
  }
  define_product_knobs(cfg, ys[0], ys[2], ys[3], OB * ob, m, lanes, ob, target.vector_registers());

  inline_injective_consumers(s, {out}, {Y});
  if (!Y.op().same_as(out.op())) s[Y].compute_inline();

  // Padding: rows in parallel. Input transform: tiles in parallel, the transform points
  // unrolled so that each V element is one sum of tile elements.
  if (detail::is_pad(pad)) detail::schedule_pad_root(s, pad, true);
  {
    te::Stage sv = s[V];
    auto ax = sv.op_axis();  // e, u, cc, p, c
    sv.reorder({ax[2], ax[3], ax[0], ax[1], ax[4]});
    te::IterVar f = sv.fuse({ax[2], ax[3]});
    sv.parallel(f);
    sv.unroll(ax[0]);
    sv.unroll(ax[1]);
    vectorize_block(sv, ax[4], static_cast<int64_t>(static_shape(V, kOp)[4]), lanes);
    // The rows pass of each tile, computed for it.
    te::Stage st = s[T];
    st.compute_at(sv, f);
    auto tax = st.op_axis();
    st.unroll(tax[0]);
    st.unroll(tax[1]);
    vectorize_block(st, tax[4], static_cast<int64_t>(static_shape(T, kOp)[4]), lanes);
  }
  // Product: for each transform point, register tiles of oc_reg chunks x tile_p tiles.
  {
    te::Tensor acc = s.cache_write(M, "local");
    te::Stage sm = s[M];
    auto ax = sm.op_axis();  // e, u, ob, p, oi
    const int64_t reg = detail::oc_chunks_per_tile(cfg.knob("oc_reg"), OB);
    auto obs = sm.split(ax[2], ci(reg));
    auto [po, pi] = sm.split(ax[3], ci(cfg.knob("p_reg")));
    sm.reorder({ax[0], ax[1], obs.first, po, obs.second, pi, ax[4]});
    te::IterVar f = sm.fuse({ax[0], ax[1], obs.first});
    sm.parallel(f);
    sm.unroll(obs.second);
    sm.unroll(pi);
    vectorize_block(sm, ax[4], ob, lanes);

    te::Stage sa = s[acc];
    sa.compute_at(sm, po);
    auto aax = sa.op_axis();
    auto rax = sa.op_reduce_axis();  // ic_outer, ic_inner
    sa.reorder({aax[0], aax[1], rax[0], rax[1], aax[3], aax[2], aax[4]});
    sa.unroll(aax[2]);
    sa.unroll(aax[3]);
    vectorize_block(sa, aax[4], ob, lanes);
    if (cfg.knob("unroll_ic")) sa.unroll(rax[1]);
  }
  // Output transform (+ epilogue): rows of tiles in parallel, each m x m tile unrolled.
  {
    te::Stage so = s[out];
    auto ax = so.op_axis();  // n, ob, y, x, oi
    auto ys2 = so.split(ax[2], ci(m));
    auto xs2 = so.split(ax[3], ci(m));
    so.reorder({ax[0], ax[1], ys2.first, xs2.first, ys2.second, xs2.second, ax[4]});
    te::IterVar f = so.fuse({ax[0], ax[1], ys2.first});
    so.parallel(f);
    so.unroll(ys2.second);
    so.unroll(xs2.second);
    vectorize_block(so, ax[4], ys[4], lanes);
    // The columns pass of each tile, computed for it.
    te::Stage sw = s[W];
    sw.compute_at(so, xs2.first);
    auto wax = sw.op_axis();
    sw.unroll(wax[0]);
    sw.unroll(wax[1]);
    vectorize_block(sw, wax[4], ob, lanes);
  }
}

autotune::Template conv2d_winograd_nchwc_template(const Conv2DWorkload& wl, const EpilogueFlags& ep,
                                                  const Target& target) {
  return {kOp, "2", [wl, ep, target](Config& cfg) {
            WinogradLayout l = define_conv2d_winograd_knobs(cfg, wl, target);
            return detail::conv_template_instance(
                cfg, l.data_shape, l.kernel_shape, "winograd_kernel", wl.out_channel, l.out_shape,
                ep,
                [&](const te::Tensor& d, const te::Tensor& k, const EpilogueSpec& spec) {
                  return conv2d_winograd_nchwc(d, k, wl.params, spec);
                },
                [&](Config& c, te::Schedule& s, const te::Tensor& out) {
                  schedule_conv2d_winograd_nchwc(c, s, out, target);
                });
          }};
}

}  // namespace kiln::topi
