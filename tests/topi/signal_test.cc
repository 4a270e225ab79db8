// Signal and sampling operators against naive C++ references on seeded random inputs, outputs
// poisoned first: dft (forward, inverse, one-sided, irfft, zero-padded and truncated lengths;
// reference: a std::complex sum), stft (with a window), det (reference: cofactor expansion;
// matrices needing pivoting, a singular one), grid_sample (every mode × padding × align_corners,
// grid points outside the image; reference: a scalar port of the ONNX reference), roi_align
// (avg / max, both coordinate modes, regions partly outside the image), and the errors.
#include "kiln/topi/signal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>

#include "kiln/topi/sampling.h"
#include "topi_test_util.h"

namespace kiln::topi {
namespace {

using namespace testing;  // NOLINT
using cd = std::complex<double>;
const DataType f64 = DataType::Float(64);

ScheduleFn default_schedule() {
  return
      [](const std::vector<te::Tensor>& outs, const Target&) { return te::create_schedule(outs); };
}

// ---------------------------------------------------------------------------------------------
// DFT

struct DftCase {
  Shape x;  // [..., L, ..., P]
  int axis;
  int64_t n;
  bool inverse, onesided;
};

void check_dft(const DftCase& c, uint32_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "x " << runtime::shape_str(c.x) << " axis " << c.axis << " n " << c.n
               << " inverse " << c.inverse << " onesided " << c.onesided);
  const int r = static_cast<int>(c.x.size());
  const int64_t L = c.x[c.axis], P = c.x[r - 1];
  NDArray xa = random_array(c.x, f32, seed);
  NDArray wa = dft_weights(L, P, c.n, c.inverse, c.onesided);
  te::Tensor X = input(c.x, f32, "x"), W = input(wa.shape(), f64, "w");
  te::Tensor Y = dft(X, W, c.axis);
  Shape ys = shape_of(Y);
  const bool irfft = c.inverse && c.onesided;
  const int64_t K = irfft ? c.n : (c.onesided ? c.n / 2 + 1 : c.n);
  ASSERT_EQ(ys[c.axis], K);
  ASSERT_EQ(ys[r - 1], irfft ? 1 : 2);
  NDArray want = reference(ys, f32, [&](const Shape& o) {
    auto sample = [&](int64_t j) {
      Shape i = o;
      i[c.axis] = j;
      i[r - 1] = 0;
      double re = at(xa, i), im = 0;
      if (P == 2) {
        i[r - 1] = 1;
        im = at(xa, i);
      }
      return cd(re, im);
    };
    // The (zero-padded / truncated) input sequence of length n.
    std::vector<cd> s(c.n, 0.0);
    for (int64_t j = 0; j < std::min(L, c.n); ++j) s[j] = sample(j);
    if (irfft) {
      // Hermitian extension of bins 0 … n/2 (imaginary parts of 0 and n/2 dropped).
      std::vector<cd> full(c.n, 0.0);
      for (int64_t j = 0; j <= c.n / 2 && j < L; ++j) full[j] = sample(j);
      full[0] = full[0].real();
      if (c.n % 2 == 0) full[c.n / 2] = full[c.n / 2].real();
      for (int64_t j = 1; j < (c.n + 1) / 2; ++j) full[c.n - j] = std::conj(full[j]);
      s = full;
    }
    const double sign = c.inverse ? 1.0 : -1.0;
    cd acc = 0;
    for (int64_t j = 0; j < c.n; ++j)
      acc += s[j] * std::polar(1.0, sign * 2 * M_PI * double(j) * double(o[c.axis]) / double(c.n));
    if (c.inverse) acc /= double(c.n);
    return o[r - 1] == 0 ? acc.real() : acc.imag();
  });
  check({X, W}, {Y}, {xa, wa}, {want}, default_schedule(), {1e-5, 1e-5});
}

TEST(TopiDft, ForwardRealAndComplexAlongEachAxis) {
  check_dft({{2, 7, 3, 1}, 1, 7, false, false}, 1);
  check_dft({{2, 7, 3, 2}, 2, 3, false, false}, 2);
  check_dft({{5, 2}, 0, 5, false, false}, 3);
}

TEST(TopiDft, OneSidedPaddedAndTruncatedLengths) {
  check_dft({{2, 8, 1}, 1, 8, false, true}, 4);
  check_dft({{2, 7, 2}, 1, 9, false, true}, 5);    // zero-padded to 9
  check_dft({{3, 10, 1}, 1, 6, false, false}, 6);  // truncated to 6
}

TEST(TopiDft, InverseAndInverseOfOneSided) {
  check_dft({{2, 6, 2}, 1, 6, true, false}, 7);
  check_dft({{2, 5, 2}, 1, 8, true, true}, 8);  // irfft, even n
  check_dft({{1, 4, 2}, 1, 7, true, true}, 9);  // irfft, odd n
}

TEST(TopiDft, RefusesTheComplexAxisAndAMismatchedTable) {
  te::Tensor X = input({2, 6, 1}, f32, "x");
  te::Tensor W = input({1, 2, 6, 6}, f64, "w");
  EXPECT_NE(error_of([&] { dft(X, W, 2); }).find("not the last, parts, dimension"),
            std::string::npos);
  te::Tensor W2 = input({2, 2, 6, 6}, f64, "w2");
  EXPECT_NE(error_of([&] { dft(X, W2, 1); }).find("does not fit an input of 6 samples"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// STFT

TEST(TopiStft, WindowedFramesMatchANaiveTransform) {
  for (int64_t parts : {1, 2}) {
    for (bool onesided : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "parts " << parts << " onesided " << onesided);
      const int64_t B = 2, L = 37, J = 8, step = 3;
      NDArray xa = random_array({B, L, parts}, f32, 20 + parts);
      NDArray win = random_array({J}, f32, 30);
      NDArray wa = dft_weights(J, parts, J, false, onesided);
      te::Tensor X = input({B, L, parts}, f32, "x"), Wn = input({J}, f32, "win"),
                 W = input(wa.shape(), f64, "w");
      te::Tensor Y = stft(X, Wn, W, step);
      const int64_t F = (L - J) / step + 1, K = onesided ? J / 2 + 1 : J;
      ASSERT_EQ(shape_of(Y), (Shape{B, F, K, 2}));
      NDArray want = reference({B, F, K, 2}, f32, [&](const Shape& o) {
        cd acc = 0;
        for (int64_t j = 0; j < J; ++j) {
          int64_t t = o[1] * step + j;
          cd v(at(xa, {o[0], t, 0}), parts == 2 ? at(xa, {o[0], t, 1}) : 0.0);
          acc += v * at(win, {j}) * std::polar(1.0, -2 * M_PI * double(j * o[2]) / double(J));
        }
        return o[3] == 0 ? acc.real() : acc.imag();
      });
      check({X, Wn, W}, {Y}, {xa, win, wa}, {want}, default_schedule(), {1e-5, 1e-5});
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Det

double cofactor_det(const std::vector<double>& a, int64_t m) {
  if (m == 1) return a[0];
  double acc = 0;
  for (int64_t c = 0; c < m; ++c) {
    std::vector<double> minor;
    for (int64_t i = 1; i < m; ++i)
      for (int64_t j = 0; j < m; ++j)
        if (j != c) minor.push_back(a[i * m + j]);
    acc += (c % 2 ? -1.0 : 1.0) * a[c] * cofactor_det(minor, m - 1);
  }
  return acc;
}

void check_det(const NDArray& xa) {
  Shape xs = xa.shape();
  const int64_t M = xs.back();
  te::Tensor X = input(xs, f32, "x");
  te::Tensor D = det(X);
  Shape ds(xs.begin(), xs.end() - 2);
  ASSERT_EQ(shape_of(D), ds);
  NDArray want = reference(ds, f32, [&](const Shape& o) {
    std::vector<double> a;
    Shape i = o;
    i.push_back(0);
    i.push_back(0);
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < M; ++c) {
        i[i.size() - 2] = r;
        i[i.size() - 1] = c;
        a.push_back(at(xa, i));
      }
    return cofactor_det(a, M);
  });
  check({X}, {D}, {xa}, {want}, default_schedule(), {1e-5, 1e-5});
}

TEST(TopiDet, BatchesOfRandomMatrices) {
  check_det(random_array({3, 4, 4}, f32, 41));
  check_det(random_array({2, 3, 5, 5}, f32, 42));
  check_det(random_array({1, 1}, f32, 43));
}

TEST(TopiDet, MatricesNeedingPivotingAndASingularOne) {
  // 2-D (scalar result), zero leading element: elimination without a row swap would divide by 0.
  NDArray a = random_array({3, 3}, f32, 44);
  set_element(a, 0, 0.0);
  check_det(a);
  // Batch: [0 1 2; 3 0 5; 7 8 0]-like with zero pivots, and a singular matrix (two equal rows).
  NDArray b = random_array({2, 4, 4}, f32, 45);
  for (int64_t d = 0; d < 4; ++d) set_element(b, d * 4 + d, 0.0);
  for (int64_t j = 0; j < 4; ++j) set_element(b, 16 + 3 * 4 + j, element(b, 16 + 1 * 4 + j));
  check_det(b);
}

TEST(TopiDet, RefusesNonSquareMatrices) {
  te::Tensor X = input({2, 3, 4}, f32, "x");
  EXPECT_NE(error_of([&] { det(X); })
                .find("det: input must be [..., M, M] square matrices, got "
                      "[2, 3, 4]"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// GridSample: a scalar port of the ONNX reference (onnx/reference/ops/op_grid_sample.py).

struct GsRef {
  GridSampleMode mode;
  GridSamplePadding pad;
  bool align;

  double reflect(double x, double lo, double hi) const {
    double rng = hi - lo;
    if (rng <= 0) return lo;
    if (x < lo) {
      double dx = lo - x;
      int64_t n = static_cast<int64_t>(dx / rng);
      double r = dx - static_cast<double>(n) * rng;
      return n % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
      double dx = x - hi;
      int64_t n = static_cast<int64_t>(dx / rng);
      double r = dx - static_cast<double>(n) * rng;
      return n % 2 == 0 ? hi - r : lo + r;
    }
    return x;
  }
  double lo(int64_t d) const { return align ? 0.0 : -0.5; }
  double hi(int64_t d) const { return align ? double(d - 1) : double(d) - 0.5; }
  /// Padding applied to an integer tap; nullopt: a zero.
  std::optional<int64_t> tap(int64_t i, int64_t d) const {
    if (pad == GridSamplePadding::kZeros) {
      if (i < 0 || i >= d) return std::nullopt;
      return i;
    }
    if (pad == GridSamplePadding::kBorder) return std::clamp<int64_t>(i, 0, d - 1);
    return static_cast<int64_t>(reflect(double(i), lo(d), hi(d)));
  }
  static void cubic(double x, double c[4]) {
    const double a = -0.75;
    x = std::abs(x);
    c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
    c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
    c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
    c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
  }
  double operator()(const NDArray& x, int64_t n, int64_t c, double gx, double gy) const {
    const int64_t H = x.shape()[2], W = x.shape()[3];
    auto denorm = [&](double v, int64_t d) {
      return static_cast<float>(align ? (v + 1) / 2.0 * double(d - 1) : ((v + 1) * d - 1) / 2.0);
    };
    double sx = denorm(gx, W), sy = denorm(gy, H);
    if (mode == GridSampleMode::kNearest) {
      sx = std::nearbyint(sx);
      sy = std::nearbyint(sy);
    }
    auto adjust = [&](double v, int64_t d) -> double {
      if (v >= lo(d) && v <= hi(d)) return v;
      if (pad == GridSamplePadding::kBorder) return std::clamp(v, 0.0, double(d - 1));
      if (pad == GridSamplePadding::kReflection)
        return static_cast<float>(reflect(v, lo(d), hi(d)));
      return v;
    };
    sx = adjust(sx, W);
    sy = adjust(sy, H);
    auto pixel = [&](int64_t iy, int64_t ix) {
      auto ty = tap(iy, H), tx = tap(ix, W);
      if (!ty || !tx) return 0.0;
      return at(x, {n, c, *ty, *tx});
    };
    if (mode == GridSampleMode::kNearest)
      return pixel(static_cast<int64_t>(sy), static_cast<int64_t>(sx));
    int64_t x0 = static_cast<int64_t>(std::floor(sx)), y0 = static_cast<int64_t>(std::floor(sy));
    double dx = sx - double(x0), dy = sy - double(y0);
    if (mode == GridSampleMode::kBilinear) {
      double acc = 0;
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
          acc += (i ? dy : 1 - dy) * (j ? dx : 1 - dx) * pixel(y0 + i, x0 + j);
      return acc;
    }
    double cx[4], cy[4];
    cubic(dx, cx);
    cubic(dy, cy);
    double acc = 0;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc += cy[i] * cx[j] * pixel(y0 - 1 + i, x0 - 1 + j);
    return acc;
  }
};

TEST(TopiGridSample, EveryModePaddingAndAlignment) {
  const Shape xs{2, 3, 5, 4}, gs{2, 6, 7, 2};
  NDArray xa = random_array(xs, f32, 51);
  NDArray ga = random_array(gs, f32, 52, -1.6, 1.6);  // some points outside [-1, 1]
  // Far-away points: still zeros / the border / reflected, never an out-of-bounds read.
  set_element(ga, 0, 37.0);
  set_element(ga, 3, -1e9);
  for (GridSampleMode mode :
       {GridSampleMode::kBilinear, GridSampleMode::kNearest, GridSampleMode::kBicubic}) {
    for (GridSamplePadding pad :
         {GridSamplePadding::kZeros, GridSamplePadding::kBorder, GridSamplePadding::kReflection}) {
      for (bool align : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "mode " << int(mode) << " padding " << int(pad)
                                          << " align_corners " << align);
        te::Tensor X = input(xs, f32, "x"), G = input(gs, f32, "grid");
        te::Tensor Y = grid_sample(X, G, mode, pad, align);
        GsRef ref{mode, pad, align};
        NDArray want = reference({2, 3, 6, 7}, f32, [&](const Shape& o) {
          return ref(xa, o[0], o[1], at(ga, {o[0], o[2], o[3], 0}), at(ga, {o[0], o[2], o[3], 1}));
        });
        check({X, G}, {Y}, {xa, ga}, {want}, default_schedule(), {1e-4, 1e-5});
      }
    }
  }
}

TEST(TopiGridSample, RefusesAGridOfTheWrongShape) {
  te::Tensor X = input({1, 2, 4, 4}, f32, "x"), G = input({1, 3, 3, 3}, f32, "grid");
  EXPECT_NE(error_of([&] {
              grid_sample(X, G, GridSampleMode::kBilinear, GridSamplePadding::kZeros, false);
            }).find("grid must be [N, H_out, W_out, 2] with N = 1, got [1, 3, 3, 3]"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// RoiAlign: after the ONNX reference (onnx/reference/ops/op_roi_align.py).

double roi_ref(const NDArray& x, const NDArray& rois, const NDArray& bi, const RoiAlignParams& p,
               const Shape& o) {
  const int64_t H = x.shape()[2], W = x.shape()[3];
  const int64_t r = o[0], c = o[1], ph = o[2], pw = o[3];
  const double off = p.half_pixel ? 0.5 : 0.0;
  double x1 = at(rois, {r, 0}) * p.spatial_scale - off,
         y1 = at(rois, {r, 1}) * p.spatial_scale - off;
  double x2 = at(rois, {r, 2}) * p.spatial_scale - off,
         y2 = at(rois, {r, 3}) * p.spatial_scale - off;
  double rw = x2 - x1, rh = y2 - y1;
  if (!p.half_pixel) {
    rw = std::max(rw, 1.0);
    rh = std::max(rh, 1.0);
  }
  double bh = rh / double(p.output_height), bw = rw / double(p.output_width);
  const int64_t g = p.sampling_ratio, b = static_cast<int64_t>(at(bi, {r}));
  double acc = 0;
  bool first = true;
  for (int64_t iy = 0; iy < g; ++iy) {
    for (int64_t ix = 0; ix < g; ++ix) {
      double y = y1 + double(ph) * bh + (double(iy) + 0.5) * bh / double(g);
      double xx = x1 + double(pw) * bw + (double(ix) + 0.5) * bw / double(g);
      double v = 0;
      if (!(y < -1.0 || y > double(H) || xx < -1.0 || xx > double(W))) {
        y = std::max(y, 0.0);
        xx = std::max(xx, 0.0);
        int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(xx), yh, xh;
        if (yl >= H - 1) {
          yh = yl = H - 1;
          y = double(yl);
        } else {
          yh = yl + 1;
        }
        if (xl >= W - 1) {
          xh = xl = W - 1;
          xx = double(xl);
        } else {
          xh = xl + 1;
        }
        double ly = y - double(yl), lx = xx - double(xl), hy = 1 - ly, hx = 1 - lx;
        double v1 = hy * hx * at(x, {b, c, yl, xl}), v2 = hy * lx * at(x, {b, c, yl, xh});
        double v3 = ly * hx * at(x, {b, c, yh, xl}), v4 = ly * lx * at(x, {b, c, yh, xh});
        v = p.max_mode ? std::max({v1, v2, v3, v4}) : v1 + v2 + v3 + v4;
      }
      acc = p.max_mode ? (first ? v : std::max(acc, v)) : acc + v;
      first = false;
    }
  }
  return p.max_mode ? acc : acc / double(g * g);
}

TEST(TopiRoiAlign, AvgAndMaxInBothCoordinateModes) {
  const Shape xs{2, 3, 10, 12};
  const int64_t R = 5;
  NDArray xa = random_array(xs, f32, 61);
  NDArray rois = NDArray::empty({R, 4}, f32);
  std::mt19937 rng(62);
  std::uniform_real_distribution<double> d(-3.0, 14.0);
  for (int64_t r = 0; r < R; ++r) {
    double a = d(rng), b = d(rng), c = d(rng), e = d(rng);
    set_element(rois, r * 4 + 0, std::min(a, c));
    set_element(rois, r * 4 + 1, std::min(b, e));
    set_element(rois, r * 4 + 2, std::max(a, c));
    set_element(rois, r * 4 + 3, std::max(b, e));
  }
  set_element(rois, 4 * 4 + 2, element(rois, 4 * 4 + 0) + 0.3);  // a thin region
  NDArray bi = NDArray::empty({R}, i64);
  for (int64_t r = 0; r < R; ++r) set_element(bi, r, double(r % 2));
  for (bool max_mode : {false, true}) {
    for (bool half : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "max " << max_mode << " half_pixel " << half);
      RoiAlignParams p;
      p.output_height = 3;
      p.output_width = 4;
      p.sampling_ratio = 2;
      p.spatial_scale = 0.75;
      p.half_pixel = half;
      p.max_mode = max_mode;
      te::Tensor X = input(xs, f32, "x"), Rt = input({R, 4}, f32, "rois"),
                 B = input({R}, i64, "batch");
      te::Tensor Y = roi_align(X, Rt, B, p);
      NDArray want =
          reference({R, 3, 3, 4}, f32, [&](const Shape& o) { return roi_ref(xa, rois, bi, p, o); });
      check({X, Rt, B}, {Y}, {xa, rois, bi}, {want}, default_schedule(), {1e-4, 1e-5});
    }
  }
}

TEST(TopiRoiAlign, BlockedMapGivesBlockedBins) {
  // A map in NCHW4c ([N, C/4, H, W, 4], as a blocked convolution writes it): the bins come out
  // [R, C/4, oh, ow, 4], channel co * 4 + ci of the NCHW reference, in both modes.
  const Shape xs{2, 8, 9, 11};
  const int64_t R = 4, bn = 4;
  NDArray xa = random_array(xs, f32, 71);
  NDArray xb = NDArray::empty({2, 2, 9, 11, bn}, f32);
  for (int64_t i = 0; i < xa.numel(); ++i) {
    const int64_t w = i % 11, h = i / 11 % 9, c = i / 99 % 8, n = i / 792;
    set_element(xb, (((n * 2 + c / bn) * 9 + h) * 11 + w) * bn + c % bn, element(xa, i));
  }
  NDArray rois = NDArray::empty({R, 4}, f32);
  const double box[R][4] = {{0, 0, 10, 8}, {2.5, 1.2, 7.7, 6.1}, {-2, -1, 4, 3}, {6, 5, 13, 11}};
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < 4; ++k) set_element(rois, r * 4 + k, box[r][k]);
  NDArray bi = NDArray::empty({R}, i64);
  for (int64_t r = 0; r < R; ++r) set_element(bi, r, double(r % 2));
  for (bool max_mode : {false, true}) {
    SCOPED_TRACE(max_mode);
    RoiAlignParams p;
    p.output_height = 2;
    p.output_width = 3;
    p.sampling_ratio = 2;
    p.spatial_scale = 0.8;
    p.max_mode = max_mode;
    te::Tensor X = input({2, 2, 9, 11, bn}, f32, "x"), Rt = input({R, 4}, f32, "rois"),
               B = input({R}, i64, "batch");
    te::Tensor Y = roi_align(X, Rt, B, p);
    NDArray want = reference({R, 2, 2, 3, bn}, f32, [&](const Shape& o) {
      return roi_ref(xa, rois, bi, p, {o[0], o[1] * bn + o[4], o[2], o[3]});
    });
    check({X, Rt, B}, {Y}, {xb, rois, bi}, {want}, default_schedule(), {1e-4, 1e-5});
  }
}

TEST(TopiRoiAlign, RefusesAdaptiveSampling) {
  te::Tensor X = input({1, 1, 4, 4}, f32, "x"), Rt = input({2, 4}, f32, "rois"),
             B = input({2}, i64, "batch");
  RoiAlignParams p;
  p.sampling_ratio = 0;
  EXPECT_NE(error_of([&] { roi_align(X, Rt, B, p); }).find("sampling_ratio 0 is not supported"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::topi
