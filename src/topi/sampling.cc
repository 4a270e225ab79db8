// Sampling: GridSample and RoiAlign as te computes that gather at clamped indices.
//
// GridSample, per output point: unnormalize the grid coordinate (float64, stored in the data
// type as the reference does), round it for nearest, move a point outside the borders back
// (border: clamp to the pixel centres; reflection: reflect about the borders, repeatedly),
// then combine 1 (nearest), 2×2 (bilinear) or 4×4 (bicubic, Keys' kernel with a = −0.75) taps.
// Each tap applies the padding rule to its own index again (zeros: masked to 0; border:
// clamped; reflection: reflected), as in the ONNX reference and ONNX Runtime.
//
// RoiAlign, per output bin: a reduction over the bin's sampling_ratio² sample points; each
// sample is the bilinear interpolation of its four neighbours (a sample more than one pixel
// outside the image counts as 0); avg divides the sum by the count, max takes the largest
// weighted neighbour of each sample (ONNX's definition).
#include "kiln/topi/sampling.h"

#include <optional>

#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using detail::ci;
using detail::const_shape;
using detail::shape_text;

namespace {

const DataType f64 = DataType::Float(64);
const DataType i32 = DataType::Int(32);

Expr fconst(DataType t, double v) { return make_const(t, v); }

Expr clampi(Expr v, int64_t hi) { return ir::min(ir::max(std::move(v), ci(0)), ci(hi)); }

/// int32 of a float coordinate kept within [-8, size + 8] first, so that far-away (or
/// non-finite) points give an index that is still outside, never an undefined conversion.
Expr to_index(Expr v, int64_t size) {
  DataType t = v.dtype();
  Expr c = ir::min(ir::max(std::move(v), make_const(t, -8.0)),
                   make_const(t, static_cast<double>(size + 8)));
  return cast(DataType::Int(32), c);
}

/// Reflects v (float64) about [lo, hi] until it lies inside (the reference's _gs_reflect).
Expr reflect(Expr v, double lo, double hi) {
  double rng = hi - lo;
  if (rng <= 0) return fconst(f64, lo);
  auto fold = [&](Expr dx, double near, double far) {
    Expr n = floor(dx / fconst(f64, rng));
    Expr r = dx - n * fconst(f64, rng);
    Expr even = floormod(cast(DataType::Int(64), n), make_const(DataType::Int(64), int64_t{2})) ==
                make_const(DataType::Int(64), int64_t{0});
    Expr towards = near < far ? fconst(f64, near) + r : fconst(f64, near) - r;
    Expr back = near < far ? fconst(f64, far) - r : fconst(f64, far) + r;
    return select(even, towards, back);
  };
  Expr below = fold(fconst(f64, lo) - v, lo, hi);
  Expr above = fold(v - fconst(f64, hi), hi, lo);
  return select(v < fconst(f64, lo), below, select(v > fconst(f64, hi), above, v));
}

Expr math(const char* fn, Expr v) {
  DataType t = v.dtype();
  return Call::make(t, fn, {std::move(v)}, CallKind::kPureIntrinsic);
}

/// One spatial axis of GridSample: its size and the borders of the padding rules.
struct Axis {
  int64_t size;
  double lo, hi;  ///< the reference's borders: [-0.5, size - 0.5] or [0, size - 1]
};

}  // namespace

te::Tensor grid_sample(const te::Tensor& x, const te::Tensor& grid, GridSampleMode mode,
                       GridSamplePadding padding, bool align_corners, const std::string& name) {
  std::vector<int64_t> xs = const_shape(x, "grid_sample"), gs = const_shape(grid, "grid_sample");
  KILN_USER_CHECK(xs.size() == 4) << "grid_sample: input must be [N, C, H, W], got "
                                  << shape_text(xs);
  KILN_USER_CHECK(gs.size() == 4 && gs[0] == xs[0] && gs[3] == 2)
      << "grid_sample: grid must be [N, H_out, W_out, 2] with N = " << xs[0] << ", got "
      << shape_text(gs);
  KILN_USER_CHECK(x->dtype.is_float() && grid->dtype.is_float())
      << "grid_sample: input and grid must be float, got " << x->dtype << " and " << grid->dtype;
  const DataType t = x->dtype;
  auto axis_of = [&](int64_t size) {
    return align_corners ? Axis{size, 0.0, static_cast<double>(size - 1)}
                         : Axis{size, -0.5, static_cast<double>(size) - 0.5};
  };
  const Axis ay = axis_of(xs[2]), ax = axis_of(xs[3]);

  // The source coordinate (in t) of a normalized grid value along one axis.
  auto source = [=](Expr g, const Axis& a) {
    Expr n = cast(f64, g);
    double L = static_cast<double>(a.size);
    Expr v = align_corners
                 ? (n + fconst(f64, 1.0)) / fconst(f64, 2.0) * fconst(f64, L - 1)
                 : ((n + fconst(f64, 1.0)) * fconst(f64, L) - fconst(f64, 1.0)) / fconst(f64, 2.0);
    Expr c = cast(t, v);
    if (mode == GridSampleMode::kNearest) c = math("nearbyint", c);
    if (padding == GridSamplePadding::kZeros) return c;
    Expr d = cast(f64, c);
    Expr out = d < fconst(f64, a.lo) || d > fconst(f64, a.hi);
    Expr moved = padding == GridSamplePadding::kBorder
                     ? ir::min(ir::max(d, fconst(f64, 0.0)), fconst(f64, L - 1))
                     : reflect(d, a.lo, a.hi);
    return select(out, cast(t, moved), c);
  };
  // A tap's index along one axis under the padding rule, and whether it is inside.
  auto tap = [=](Expr i, const Axis& a) -> std::pair<Expr, Expr> {
    Expr inside = i >= ci(0) && i < ci(a.size);
    if (padding == GridSamplePadding::kReflection) i = cast(i32, reflect(cast(f64, i), a.lo, a.hi));
    return {clampi(i, a.size - 1), inside};
  };

  return te::compute(
      {ci(xs[0]), ci(xs[1]), ci(gs[1]), ci(gs[2])},
      [=](Var n, Var c, Var h, Var w) {
        Expr sx = source(grid(n, h, w, 0), ax);
        Expr sy = source(grid(n, h, w, 1), ay);
        auto pixel = [&](Expr iy, Expr ix) {
          auto [yi, yin] = tap(std::move(iy), ay);
          auto [xi, xin] = tap(std::move(ix), ax);
          Expr v = x(n, c, yi, xi);
          if (padding == GridSamplePadding::kZeros) v = select(yin && xin, v, make_zero(t));
          return v;
        };
        if (mode == GridSampleMode::kNearest)
          return pixel(to_index(sy, ay.size), to_index(sx, ax.size));
        Expr fy = floor(sy), fx = floor(sx);
        Expr iy = to_index(fy, ay.size), ix = to_index(fx, ax.size);
        Expr dy = sy - fy, dx = sx - fx;
        if (mode == GridSampleMode::kBilinear) {
          Expr one = make_one(t);
          auto row = [&](Expr yy) {
            return (one - dx) * pixel(yy, ix) + dx * pixel(yy, ix + ci(1));
          };
          return (one - dy) * row(iy) + dy * row(iy + ci(1));
        }
        // Bicubic: Keys' convolution kernel, a = -0.75.
        auto coeffs = [&](Expr s) {
          Expr a = fconst(t, -0.75), one = make_one(t), two = fconst(t, 2.0);
          Expr s1 = s + one, r1 = one - s, r2 = two - s;
          return std::vector<Expr>{
              ((a * s1 - fconst(t, 5.0) * a) * s1 + fconst(t, 8.0) * a) * s1 - fconst(t, 4.0) * a,
              ((a + two) * s - (a + fconst(t, 3.0))) * s * s + one,
              ((a + two) * r1 - (a + fconst(t, 3.0))) * r1 * r1 + one,
              ((a * r2 - fconst(t, 5.0) * a) * r2 + fconst(t, 8.0) * a) * r2 - fconst(t, 4.0) * a};
        };
        std::vector<Expr> cy = coeffs(dy), cx = coeffs(dx);
        Expr acc;
        for (int i = 0; i < 4; ++i) {
          Expr r;
          for (int j = 0; j < 4; ++j) {
            Expr term = cx[j] * pixel(iy + ci(i - 1), ix + ci(j - 1));
            r = r.defined() ? r + term : term;
          }
          Expr term = cy[i] * r;
          acc = acc.defined() ? acc + term : term;
        }
        return acc;
      },
      name, "grid_sample");
}

te::Tensor roi_align(const te::Tensor& x, const te::Tensor& rois, const te::Tensor& batch_indices,
                     const RoiAlignParams& p, const std::string& name) {
  std::vector<int64_t> xs = const_shape(x, "roi_align"), rs = const_shape(rois, "roi_align"),
                       bs = const_shape(batch_indices, "roi_align");
  KILN_USER_CHECK(xs.size() == 4 || xs.size() == 5)
      << "roi_align: input must be [N, C, H, W] or [N, C/b, H, W, b], got " << shape_text(xs);
  KILN_USER_CHECK(rs.size() == 2 && rs[1] == 4)
      << "roi_align: rois must be [num_rois, 4], got " << shape_text(rs);
  KILN_USER_CHECK(bs.size() == 1 && bs[0] == rs[0])
      << "roi_align: batch_indices must be [" << rs[0] << "], got " << shape_text(bs);
  KILN_USER_CHECK(x->dtype.is_float() && rois->dtype == x->dtype)
      << "roi_align: input and rois must be float of one dtype, got " << x->dtype << " and "
      << rois->dtype;
  KILN_USER_CHECK(batch_indices->dtype.is_int())
      << "roi_align: batch_indices must be integer, got " << batch_indices->dtype;
  KILN_USER_CHECK(p.output_height >= 1 && p.output_width >= 1)
      << "roi_align: output size must be positive, got " << p.output_height << "x"
      << p.output_width;
  KILN_USER_CHECK(p.sampling_ratio >= 1) << "roi_align: sampling_ratio " << p.sampling_ratio
                                         << " is not supported (0, adaptive, depends on the data)";
  const DataType t = x->dtype;
  const int64_t N = xs[0], H = xs[2], W = xs[3], g = p.sampling_ratio;
  te::IterVar iy = te::reduce_axis({0, ci(g)}, "iy");
  te::IterVar ix = te::reduce_axis({0, ci(g)}, "ix");
  // Blocked [N, C/b, H, W, b] (the layout pass, when the map comes blocked from a convolution):
  // the output is [R, C/b, oh, ow, b] and each sample's taps load whole vectors of channels.
  const bool blocked = xs.size() == 5;
  std::vector<Expr> oshape{ci(rs[0]), ci(xs[1]), ci(p.output_height), ci(p.output_width)};
  if (blocked) oshape.push_back(ci(xs[4]));

  auto body = [=](Var r, Var c, Var ph, Var pw, std::optional<Var> lane) {
    auto at = [&](Expr b, Expr yy, Expr xq) {
      return lane ? x(b, c, yy, xq, *lane) : x(b, c, yy, xq);
    };
    Expr scale = fconst(t, p.spatial_scale), off = fconst(t, p.half_pixel ? 0.5 : 0.0);
    Expr x1 = rois(r, 0) * scale - off, y1 = rois(r, 1) * scale - off;
    Expr rw = rois(r, 2) * scale - off - x1, rh = rois(r, 3) * scale - off - y1;
    if (!p.half_pixel) {
      rw = ir::max(rw, make_one(t));
      rh = ir::max(rh, make_one(t));
    }
    Expr bh = rh / fconst(t, static_cast<double>(p.output_height));
    Expr bw = rw / fconst(t, static_cast<double>(p.output_width));
    Expr half = fconst(t, 0.5), gf = fconst(t, static_cast<double>(g));
    Expr y = y1 + cast(t, ph) * bh + (cast(t, iy->var) + half) * bh / gf;
    Expr xx = x1 + cast(t, pw) * bw + (cast(t, ix->var) + half) * bw / gf;
    Expr outside = y < fconst(t, -1.0) || y > fconst(t, static_cast<double>(H)) ||
                   xx < fconst(t, -1.0) || xx > fconst(t, static_cast<double>(W));
    Expr yc = ir::min(ir::max(y, make_zero(t)), fconst(t, static_cast<double>(H - 1)));
    Expr xc = ir::min(ir::max(xx, make_zero(t)), fconst(t, static_cast<double>(W - 1)));
    Expr ylo = cast(i32, yc), xlo = cast(i32, xc);
    Expr yhi = ir::min(ylo + ci(1), ci(H - 1)), xhi = ir::min(xlo + ci(1), ci(W - 1));
    Expr ly = yc - cast(t, ylo), lx = xc - cast(t, xlo);
    Expr hy = make_one(t) - ly, hx = make_one(t) - lx;
    Expr b = clampi(cast(i32, batch_indices(r)), N - 1);
    Expr v1 = hy * hx * at(b, ylo, xlo), v2 = hy * lx * at(b, ylo, xhi);
    Expr v3 = ly * hx * at(b, yhi, xlo), v4 = ly * lx * at(b, yhi, xhi);
    Expr v = p.max_mode ? detail::nan_max(detail::nan_max(detail::nan_max(v1, v2), v3), v4)
                        : v1 + v2 + v3 + v4;
    return select(outside, make_zero(t), v);
  };
  auto at_output = [=](const std::vector<Var>& i) {  // body at output index i
    std::optional<Var> lane;
    if (i.size() == 5) lane = i[4];
    return body(i[0], i[1], i[2], i[3], lane);
  };
  if (p.max_mode) {
    return te::compute(
        oshape,
        [=](const std::vector<Var>& i) {
          return detail::nan_max_reduce(at_output(i), {iy, ix});
        },
        name, "roi_align");
  }
  te::Tensor sum = te::compute(
      oshape,
      [=](const std::vector<Var>& i) {
        return te::sum(at_output(i), {iy, ix});
      },
      name + "_sum", "roi_align");
  Expr count = fconst(t, static_cast<double>(g * g));
  return te::compute(
      oshape,
      [=](const std::vector<Var>& i) { return sum(std::vector<Expr>(i.begin(), i.end())) / count; },
      name, "roi_align");
}

}  // namespace kiln::topi
