// Integer operators of quantized models (topi/qnn.h) against scalar references: the
// requantisation's rounding edge cases (ties to even on both signs, saturation at both ends of
// uint8 and int8, narrowed bounds, zero points), the VNNI convolution and dense with their
// requantisation epilogue (uint8 and int8 data with non-zero zero points, padding, strides,
// channels that are not a multiple of 4) and the plain integer forms, on random inputs with
// poisoned outputs; and the host weight packing and bias compensation.
#include "kiln/topi/qnn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "e2e/e2e_util.h"
#include "kiln/topi/auto_schedule.h"
#include "kiln/topi/dense.h"

namespace kiln::topi {
namespace {

using e2e::NDArray;
using e2e::random_array;
const DataType kU8 = DataType::UInt(8), kS8 = DataType::Int(8), kI32 = DataType::Int(32),
               kF32 = DataType::Float(32);

/// The scalar requantisation (the ONNX Runtime / MLAS recipe, written out independently).
int64_t requant_ref(int64_t acc, float scale, const RequantParams& p) {
  const float f = static_cast<float>(static_cast<int32_t>(acc)) * scale;
  double r = std::nearbyint(static_cast<double>(f));  // the default mode: half to even
  r = std::max<double>(r, double(p.out_min - p.y_zero_point));
  r = std::min<double>(r, double(p.out_max - p.y_zero_point));
  return static_cast<int64_t>(r) + p.y_zero_point;
}

int64_t element(const NDArray& a, int64_t k) {
  if (a.dtype() == kU8) return a.data_as<uint8_t>()[k];
  if (a.dtype() == kS8) return a.data_as<int8_t>()[k];
  return a.data_as<int32_t>()[k];
}

NDArray i32(const std::vector<int32_t>& v) {
  NDArray a = NDArray::empty({int64_t(v.size())}, kI32);
  std::copy(v.begin(), v.end(), a.data_as<int32_t>());
  return a;
}

/// qnn_requantize of `acc` (one channel per element) with `bias` and `scale`.
NDArray run_requant(const std::vector<int32_t>& acc, const std::vector<int32_t>& bias,
                    const std::vector<float>& scale, const RequantParams& p) {
  const int64_t C = int64_t(acc.size());
  te::Tensor a = te::placeholder({int32_t(C)}, kI32, "acc");
  te::Tensor b = te::placeholder({int32_t(C)}, kI32, "bias");
  te::Tensor s = te::placeholder({int32_t(C)}, kF32, "scale");
  te::Tensor y = qnn_requantize(a, b, s, 0, p);
  NDArray sa = NDArray::empty({C}, kF32);
  std::copy(scale.begin(), scale.end(), sa.data_as<float>());
  return e2e::build_and_run(te::create_schedule({y}), {a, b, s, y}, {i32(acc), i32(bias), sa})[0];
}

TEST(QnnRequantize, TiesRoundToEvenOnBothSides) {
  RequantParams p;
  p.out_dtype = kS8;
  p.out_min = -128;
  p.out_max = 127;
  // acc · 0.5: ±0.5, ±1.5, ±2.5, ±3.5 and 5.5 → 0, 2, 2, 4 (and negated), 6.
  std::vector<int32_t> acc{1, 3, 5, 7, -1, -3, -5, -7, 11};
  std::vector<int64_t> want{0, 2, 2, 4, 0, -2, -2, -4, 6};
  NDArray y = run_requant(acc, std::vector<int32_t>(acc.size(), 0),
                          std::vector<float>(acc.size(), 0.5f), p);
  for (size_t k = 0; k < acc.size(); ++k) EXPECT_EQ(element(y, int64_t(k)), want[k]) << acc[k];
  // The zero point is added after rounding: the ties stay at even values before it.
  p.y_zero_point = 3;
  y = run_requant(acc, std::vector<int32_t>(acc.size(), 0), std::vector<float>(acc.size(), 0.5f),
                  p);
  for (size_t k = 0; k < acc.size(); ++k) EXPECT_EQ(element(y, int64_t(k)), want[k] + 3) << acc[k];
}

TEST(QnnRequantize, SaturatesAtBothEndsOfUint8AndInt8) {
  std::vector<int32_t> acc{INT32_MAX, INT32_MIN, 1000000, -1000000, 254, 256, -1, 0, 127, -129};
  std::vector<int32_t> bias(acc.size(), 0);
  bias[4] = 1;  // 255 exactly
  for (DataType t : {kU8, kS8}) {
    for (int64_t zp : {int64_t(0), int64_t(t == kU8 ? 128 : -100)}) {
      RequantParams p;
      p.out_dtype = t;
      p.out_min = t == kU8 ? 0 : -128;
      p.out_max = t == kU8 ? 255 : 127;
      p.y_zero_point = zp;
      NDArray y = run_requant(acc, bias, std::vector<float>(acc.size(), 1.0f), p);
      for (size_t k = 0; k < acc.size(); ++k) {
        // Independent of the reference: clamp in 64-bit integers.
        int64_t v = std::min<int64_t>(p.out_max,
                                      std::max<int64_t>(p.out_min, int64_t(acc[k]) + bias[k] + zp));
        if (k < 2) v = k == 0 ? p.out_max : p.out_min;  // int32 extremes (float rounding)
        EXPECT_EQ(element(y, int64_t(k)), v) << t << " zp " << zp << " acc " << acc[k];
      }
    }
  }
}

TEST(QnnRequantize, NarrowedBoundsAndRandomValuesMatchTheScalarReference) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> ai(-200000, 200000), bi(-5000, 5000);
  std::uniform_real_distribution<float> si(1e-4f, 3e-3f);
  std::vector<int32_t> acc(257), bias(257);
  std::vector<float> scale(257);
  for (size_t k = 0; k < acc.size(); ++k) {
    acc[k] = ai(rng);
    bias[k] = bi(rng);
    scale[k] = si(rng);
  }
  RequantParams p;
  p.out_dtype = kS8;
  p.y_zero_point = -128;  // a folded Relu: the lower bound is the zero point
  p.out_min = -128;
  p.out_max = 100;  // a folded Clip
  NDArray y = run_requant(acc, bias, scale, p);
  int clamped = 0;
  for (size_t k = 0; k < acc.size(); ++k) {
    const int64_t want = requant_ref(int64_t(acc[k]) + bias[k], scale[k], p);
    clamped += want == p.out_min || want == p.out_max;
    EXPECT_EQ(element(y, int64_t(k)), want) << "acc " << acc[k] << " bias " << bias[k];
  }
  EXPECT_GT(clamped, 10);  // both bounds are exercised
  EXPECT_LT(clamped, 240);
}

// --- products

struct ConvCase {
  int64_t N, C, H, W, O, K, stride;
  std::vector<int64_t> pad;  // top, left, bottom, right
  DataType xt;
  int64_t x_zp;
  int64_t in_block = 0;  // the data in NCHW<in_block>c (0: NCHW)
};

/// `x` NCHW → [N, C/b, H, W, b].
NDArray to_blocked(const NDArray& x, int64_t b) {
  const int64_t N = x.shape()[0], C = x.shape()[1], HW = x.shape()[2] * x.shape()[3];
  NDArray r = NDArray::empty({N, C / b, x.shape()[2], x.shape()[3], b}, x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.data());
  auto* dst = static_cast<uint8_t*>(r.data());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i)
        dst[((n * (C / b) + c / b) * HW + i) * b + c % b] = src[(n * C + c) * HW + i];
  return r;
}

/// The naive int32 convolution of (x - zp) with W (padding is the zero point), requantized.
std::vector<int64_t> conv_ref(const ConvCase& c, const NDArray& x, const NDArray& w,
                              const NDArray& bias, const NDArray& scale, const RequantParams& p,
                              int64_t OH, int64_t OW) {
  std::vector<int64_t> out;
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t acc = element(bias, o);
          for (int64_t ci = 0; ci < c.C; ++ci)
            for (int64_t kh = 0; kh < c.K; ++kh)
              for (int64_t kw = 0; kw < c.K; ++kw) {
                const int64_t h = oh * c.stride + kh - c.pad[0], ww = ow * c.stride + kw - c.pad[1];
                if (h < 0 || h >= c.H || ww < 0 || ww >= c.W) continue;
                const int64_t xv = element(x, ((n * c.C + ci) * c.H + h) * c.W + ww) - c.x_zp;
                acc += xv * element(w, ((o * c.C + ci) * c.K + kh) * c.K + kw);
              }
          out.push_back(requant_ref(acc, scale.data_as<float>()[o], p));
        }
  return out;
}

class QnnConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(QnnConv, VnniAndPlainFormsMatchTheNaiveReference) {
  const ConvCase c = GetParam();
  RequantParams p;
  p.x_zero_point = c.x_zp;
  p.out_dtype = kU8;
  p.y_zero_point = 7;
  p.out_min = 7;  // folded Relu
  p.out_max = 255;
  const int64_t OH = (c.H + c.pad[0] + c.pad[2] - c.K) / c.stride + 1;
  const int64_t OW = (c.W + c.pad[1] + c.pad[3] - c.K) / c.stride + 1;
  NDArray x =
      random_array({c.N, c.C, c.H, c.W}, c.xt, 1, c.xt == kU8 ? 0 : -128, c.xt == kU8 ? 255 : 127);
  NDArray w = random_array({c.O, c.C, c.K, c.K}, kS8, 2, -128, 127);
  NDArray bias = random_array({c.O}, kI32, 3, -20000, 20000);
  NDArray scale = random_array({c.O}, kF32, 4, 2e-4, 2e-3);
  const std::vector<int64_t> want = conv_ref(c, x, w, bias, scale, p, OH, OW);

  auto ph = [](const NDArray& a, const char* name) {
    std::vector<ir::Expr> s;
    for (int64_t d : a.shape()) s.push_back(ir::Expr(int32_t(d)));
    return te::placeholder(s, a.dtype(), name);
  };
  // VNNI form: output NCHW16c, or NCHW8c for 8k (not 16k) outputs.
  {
    const int64_t ob = c.O % 16 == 0 ? 16 : 8;
    NDArray wp = pack_qnn_conv2d_weight(w, ob);
    NDArray bc = compensate_bias(bias, w, c.x_zp, c.xt == kS8 ? 128 : 0);
    NDArray xb = c.in_block ? to_blocked(x, c.in_block) : x;
    te::Tensor tx = ph(xb, "x"), tw = ph(wp, "wp"), tb = ph(bc, "bias"), ts = ph(scale, "scale");
    QnnConvNCHWcAttrs a{c.O, c.K, c.K, c.stride, c.pad};
    te::Tensor y = qnn_conv2d_nchwc(tx, tw, tb, ts, a, p);
    ASSERT_EQ(y->shape.size(), 5u);
    EXPECT_EQ(*ir::as_const_int(y->shape[4]), ob);
    te::Schedule s = te::create_schedule({y});
    autotune::Config cfg = autotune::Config::fallback();
    schedule_qnn_conv2d_nchwc(cfg, s, y, y, e2e::host_target());
    NDArray got = e2e::build_and_run(s, {tx, tw, tb, ts, y}, {xb, wp, bc, scale})[0];
    int bad = 0;
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t o = 0; o < c.O; ++o)
        for (int64_t i = 0; i < OH * OW; ++i) {
          const int64_t g = element(got, (((n * (c.O / ob) + o / ob) * OH * OW + i) * ob) + o % ob);
          const int64_t r = want[size_t((n * c.O + o) * OH * OW + i)];
          if (g != r && bad++ < 5)
            ADD_FAILURE() << "vnni n" << n << " o" << o << " pixel " << i << ": got " << g
                          << ", expected " << r;
        }
  }
  // Plain form (NCHW), under the rule-based scheduler.
  {
    te::Tensor tx = ph(x, "x"), tw = ph(w, "w"), tb = ph(bias, "bias"), ts = ph(scale, "scale");
    Conv2DParams cp;
    cp.stride_h = cp.stride_w = c.stride;
    cp.padding = Padding2D::from(c.pad, "test");
    te::Tensor y = qnn_conv2d(tx, tw, tb, ts, cp, p);
    autotune::Config cfg = autotune::Config::fallback();
    te::Schedule s = auto_schedule({y}, e2e::host_target(), cfg);
    NDArray got = e2e::build_and_run(s, {tx, tw, tb, ts, y}, {x, w, bias, scale})[0];
    int bad = 0;
    for (int64_t k = 0; k < got.numel(); ++k)
      if (element(got, k) != want[size_t(k)] && bad++ < 5)
        ADD_FAILURE() << "plain element " << k << ": got " << element(got, k) << ", expected "
                      << want[size_t(k)];
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QnnConv,
    ::testing::Values(ConvCase{1, 16, 9, 9, 32, 3, 1, {1, 1, 1, 1}, kS8, -5},
                      ConvCase{1, 16, 9, 9, 16, 3, 1, {1, 1, 1, 1}, kU8, 131},
                      ConvCase{2, 3, 15, 15, 16, 7, 2, {3, 3, 3, 3}, kS8, 11},
                      ConvCase{1, 6, 8, 8, 16, 3, 2, {0, 0, 1, 1}, kS8, -128},
                      ConvCase{1, 32, 7, 7, 48, 1, 1, {0, 0, 0, 0}, kU8, 0},
                      // 8-channel blocks: 24 / 40 outputs, blocked inputs
                      ConvCase{1, 16, 9, 11, 24, 3, 1, {1, 1, 1, 1}, kS8, 9, 16},
                      ConvCase{1, 24, 8, 8, 40, 1, 1, {0, 0, 0, 0}, kU8, 77, 8},
                      ConvCase{1, 40, 9, 9, 24, 3, 2, {1, 1, 1, 1}, kS8, -20, 8},
                      ConvCase{2, 24, 6, 6, 96, 1, 1, {0, 0, 0, 0}, kS8, 3, 8}));

TEST(QnnConvTemplate, EveryConfigOfTheSpaceMatchesTheNaiveReference) {
  // 16 → 24 channels (three 8-lane blocks: tile_ob 1 or 3), 3x3, padded, int8 in NCHW16c.
  const ConvCase c{1, 16, 9, 9, 24, 3, 1, {1, 1, 1, 1}, kS8, -3, 16};
  QnnConv2DWorkload wl;
  wl.C = c.C;
  wl.H = c.H;
  wl.W = c.W;
  wl.O = c.O;
  wl.KH = wl.KW = c.K;
  wl.padding = c.pad;
  wl.x_dtype = c.xt;
  wl.in_block = c.in_block;
  EXPECT_EQ(wl.str(), "N1 C16 H9 W9 in16 int8 O24 K3x3 s1 p1,1,1,1");
  autotune::Template t = qnn_conv2d_nchwc_template(wl, e2e::host_target());
  autotune::ConfigSpace space = autotune::define_space(t);
  EXPECT_EQ(space.knob_names(), (std::vector<std::string>{"tile_ow", "unroll_kw", "tile_ob"}));
  EXPECT_EQ(space.knob("tile_ob").candidates.size(), 2u);
  ASSERT_GE(space.size(), 16u);

  RequantParams p;  // the template's: full int8 range, zero points 0
  p.out_dtype = kS8;
  p.out_min = -128;
  p.out_max = 127;
  NDArray x = random_array({1, c.C, c.H, c.W}, kS8, 41, -128, 127);
  NDArray w = random_array({c.O, c.C, c.K, c.K}, kS8, 42, -128, 127);
  NDArray bias = random_array({c.O}, kI32, 43, -20000, 20000);
  NDArray scale = random_array({c.O}, kF32, 44, 2e-4, 2e-3);
  ConvCase zero = c;
  zero.x_zp = 0;
  const std::vector<int64_t> want = conv_ref(zero, x, w, bias, scale, p, 9, 9);
  NDArray xb = to_blocked(x, 16), wp = pack_qnn_conv2d_weight(w, 8);
  NDArray bc = compensate_bias(bias, w, 0, 128);
  for (uint64_t i = 0; i < space.size(); i += 3) {  // every third point: each knob value
    autotune::Instance inst = autotune::instantiate(t, space.get(i));
    NDArray got = e2e::build_and_run(inst.sch, inst.args, {xb, wp, bc, scale})[0];
    int bad = 0;
    for (int64_t o = 0; o < c.O; ++o)
      for (int64_t k = 0; k < 81; ++k) {
        const int64_t g = element(got, ((o / 8) * 81 + k) * 8 + o % 8);
        if (g != want[size_t(o * 81 + k)] && bad++ < 3)
          ADD_FAILURE() << inst.config.str() << " o" << o << " pixel " << k << ": got " << g
                        << ", expected " << want[size_t(o * 81 + k)];
      }
  }
}

struct DepthwiseCase {
  int64_t C, H, W, K, stride;
  std::vector<int64_t> pad;  // top, left, bottom, right
  DataType xt;
  int64_t x_zp;
  int64_t block;
};

class QnnDepthwise : public ::testing::TestWithParam<DepthwiseCase> {};

TEST_P(QnnDepthwise, MatchesTheNaiveReference) {
  const DepthwiseCase c = GetParam();
  const int64_t N = 1, C = c.C, K = c.K;
  RequantParams p;
  p.x_zero_point = c.x_zp;
  p.out_dtype = c.xt;
  p.y_zero_point = c.xt == kU8 ? 3 : -128;
  p.out_min = p.y_zero_point;           // folded Relu
  p.out_max = c.xt == kU8 ? 200 : 127;  // and a Clip on uint8
  const int64_t OH = (c.H + c.pad[0] + c.pad[2] - K) / c.stride + 1;
  const int64_t OW = (c.W + c.pad[1] + c.pad[3] - K) / c.stride + 1;
  NDArray x =
      random_array({N, C, c.H, c.W}, c.xt, 21, c.xt == kU8 ? 0 : -128, c.xt == kU8 ? 255 : 127);
  NDArray w = random_array({C, 1, K, K}, kS8, 22, -128, 127);
  NDArray bias = random_array({C}, kI32, 23, -3000, 3000);
  NDArray scale = random_array({C}, kF32, 24, 3e-4, 2e-3);
  // The naive int32 loops: Σ (x - zp) · w over the taps inside the image, requantized.
  std::vector<int64_t> want;
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t acc = element(bias, ch);
        for (int64_t kh = 0; kh < K; ++kh)
          for (int64_t kw = 0; kw < K; ++kw) {
            const int64_t h = oh * c.stride + kh - c.pad[0], ww = ow * c.stride + kw - c.pad[1];
            if (h < 0 || h >= c.H || ww < 0 || ww >= c.W) continue;
            acc += (element(x, (ch * c.H + h) * c.W + ww) - c.x_zp) *
                   element(w, (ch * K + kh) * K + kw);
          }
        want.push_back(requant_ref(acc, scale.data_as<float>()[ch], p));
      }
  // Not all saturated: the folded Relu clamps about half, the rest spreads over the range.
  int clamped = 0;
  for (int64_t v : want) clamped += v == p.out_min || v == p.out_max;
  EXPECT_LT(clamped, int(want.size()) * 3 / 4);
  EXPECT_GT(std::set<int64_t>(want.begin(), want.end()).size(), 30u);

  const int64_t b = c.block;
  NDArray xb = to_blocked(x, b), wd = pack_qnn_depthwise_weight(w, b);
  // float32 taps (FMAs, exact) up to 514 taps, int32 beyond.
  EXPECT_EQ(wd.dtype(), K * K <= 514 ? kF32 : kI32);
  NDArray bc = compensate_bias(bias, w, c.x_zp, 0);
  auto ph = [](const NDArray& a, const char* name) {
    std::vector<ir::Expr> s;
    for (int64_t d : a.shape()) s.push_back(ir::Expr(int32_t(d)));
    return te::placeholder(s, a.dtype(), name);
  };
  te::Tensor tx = ph(xb, "x"), tw = ph(wd, "wd"), tb = ph(bc, "bias"), ts = ph(scale, "scale");
  Conv2DParams cp;
  cp.stride_h = cp.stride_w = c.stride;
  cp.padding = Padding2D::from(c.pad, "test");
  cp.groups = C;
  te::Tensor y = qnn_depthwise_conv2d_nchwc(tx, tw, tb, ts, cp, p);
  te::Schedule s = te::create_schedule({y});
  autotune::Config cfg = autotune::Config::fallback();
  schedule_qnn_depthwise_conv2d_nchwc(cfg, s, y, y, e2e::host_target());
  NDArray got = e2e::build_and_run(s, {tx, tw, tb, ts, y}, {xb, wd, bc, scale})[0];
  ASSERT_EQ(got.shape(), (std::vector<int64_t>{N, C / b, OH, OW, b}));
  int bad = 0;
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t i = 0; i < OH * OW; ++i) {
      const int64_t g = element(got, ((ch / b) * OH * OW + i) * b + ch % b);
      const int64_t r = want[size_t(ch * OH * OW + i)];
      if (g != r && bad++ < 5)
        ADD_FAILURE() << "channel " << ch << " pixel " << i << ": got " << g << ", expected " << r;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QnnDepthwise,
    ::testing::Values(DepthwiseCase{16, 9, 10, 3, 1, {1, 1, 1, 1}, kU8, 131, 16},
                      DepthwiseCase{32, 12, 12, 3, 2, {0, 0, 1, 1}, kS8, -7, 16},
                      DepthwiseCase{24, 7, 9, 3, 1, {1, 1, 1, 1}, kS8, 100, 8},
                      DepthwiseCase{40, 11, 11, 5, 2, {2, 2, 2, 2}, kU8, 0, 8},
                      DepthwiseCase{48, 14, 14, 3, 2, {1, 1, 1, 1}, kU8, 255, 16},
                      // 23 x 23 taps: too many for exact float32 sums, int32 multiply-adds
                      DepthwiseCase{16, 12, 12, 23, 1, {11, 11, 11, 11}, kS8, 5, 16}));

TEST(QnnDepthwiseTemplate, EveryConfigOfTheSpaceMatchesTheNaiveReference) {
  // 24 channels (8-lane blocks), 3x3 stride 2, padded, uint8 with the template's zero point 0.
  Conv2DWorkload wl;
  wl.in_channel = wl.out_channel = 24;
  wl.height = wl.width = 10;
  wl.kernel_h = wl.kernel_w = 3;
  wl.params.stride_h = wl.params.stride_w = 2;
  wl.params.padding = Padding2D::all(1);
  wl.params.groups = 24;
  autotune::Template t = qnn_depthwise_conv2d_nchwc_template(wl, kU8, e2e::host_target());
  autotune::ConfigSpace space = autotune::define_space(t);
  ASSERT_GE(space.size(), 8u);
  RequantParams p;
  p.out_dtype = kU8;
  p.out_min = 0;
  p.out_max = 255;
  NDArray x = random_array({1, 24, 10, 10}, kU8, 51, 0, 255);
  NDArray w = random_array({24, 1, 3, 3}, kS8, 52, -128, 127);
  NDArray bias = random_array({24}, kI32, 53, -3000, 3000);
  NDArray scale = random_array({24}, kF32, 54, 3e-4, 2e-3);
  std::vector<int64_t> want;
  for (int64_t ch = 0; ch < 24; ++ch)
    for (int64_t oh = 0; oh < 5; ++oh)
      for (int64_t ow = 0; ow < 5; ++ow) {
        int64_t acc = element(bias, ch);
        for (int64_t kh = 0; kh < 3; ++kh)
          for (int64_t kw = 0; kw < 3; ++kw) {
            const int64_t h = oh * 2 + kh - 1, ww = ow * 2 + kw - 1;
            if (h >= 0 && h < 10 && ww >= 0 && ww < 10)
              acc += element(x, (ch * 10 + h) * 10 + ww) * element(w, (ch * 3 + kh) * 3 + kw);
          }
        want.push_back(requant_ref(acc, scale.data_as<float>()[ch], p));
      }
  NDArray xb = to_blocked(x, 8), wd = pack_qnn_depthwise_weight(w, 8);
  NDArray bc = compensate_bias(bias, w, 0, 0);
  const uint64_t step = std::max<uint64_t>(1, space.size() / 24);
  for (uint64_t i = 0; i < space.size(); i += step) {
    autotune::Instance inst = autotune::instantiate(t, space.get(i));
    NDArray got = e2e::build_and_run(inst.sch, inst.args, {xb, wd, bc, scale})[0];
    int bad = 0;
    for (int64_t ch = 0; ch < 24; ++ch)
      for (int64_t k = 0; k < 25; ++k) {
        const int64_t g = element(got, ((ch / 8) * 25 + k) * 8 + ch % 8);
        if (g != want[size_t(ch * 25 + k)] && bad++ < 3)
          ADD_FAILURE() << inst.config.str() << " channel " << ch << " pixel " << k << ": got " << g
                        << ", expected " << want[size_t(ch * 25 + k)];
      }
  }
}

TEST(QnnDepthwise, FloatTapsOnlyWhereEveryPartialSumIsExact) {
  // 255 · 128 per tap: 514 taps stay below 2^24, 515 do not.
  EXPECT_TRUE(depthwise_float_exact(3, 3));
  EXPECT_TRUE(depthwise_float_exact(2, 257));
  EXPECT_FALSE(depthwise_float_exact(5, 103));
  EXPECT_FALSE(depthwise_float_exact(23, 23));
}

TEST(QnnDepthwise, ErrorsNameTheProblem) {
  te::Tensor x = te::placeholder({1, 2, 8, 8, 8}, kU8, "x");
  te::Tensor wd = te::placeholder({2, 1, 3, 3, 1, 8}, kI32, "wd");
  te::Tensor b = te::placeholder({16}, kI32, "b");
  te::Tensor s = te::placeholder({16}, kF32, "s");
  Conv2DParams cp;
  cp.dilation_h = 2;
  EXPECT_EQ(e2e::error_of([&] { qnn_depthwise_conv2d_nchwc(x, wd, b, s, cp, RequantParams{}); }),
            "qnn_depthwise_conv2d_nchwc: dilation must be 1, got (2, 1)");
  te::Tensor b8 = te::placeholder({8}, kI32, "b8");
  EXPECT_EQ(e2e::error_of([&] { qnn_depthwise_conv2d_nchwc(x, wd, b8, s, {}, RequantParams{}); }),
            "qnn_depthwise_conv2d_nchwc: bias must be int32 [16], got int32 [8]");
  NDArray w = NDArray::empty({24, 1, 3, 3}, kS8);
  EXPECT_EQ(e2e::error_of([&] { pack_qnn_depthwise_weight(w, 16); }),
            "pack_qnn_depthwise_weight: block 16 does not divide the 24 channels");
}

TEST(QnnAdd, ShiftedOperandsAndResultMatchTheUnshiftedArithmetic) {
  // a carried as uint8 (+128), b as int8, the result as uint8 (+128): the same float
  // arithmetic as on the int8 values (MLAS's QLinearAdd), the result shifted.
  const int64_t n = 257;
  NDArray a = random_array({n}, kS8, 61, -128, 127), b = random_array({n}, kS8, 62, -128, 127);
  NDArray au = NDArray::empty({n}, kU8);
  for (int64_t k = 0; k < n; ++k) au.data_as<uint8_t>()[k] = uint8_t(element(a, k) + 128);
  QnnAddParams p;
  p.ratio_a = 0.37f;
  p.ratio_b = 0.81f;
  p.fixed = -3.25f;
  p.out_dtype = kU8;
  p.out_min = -100 + 128;  // a Clip, shifted
  p.out_max = 127 + 128;
  p.a_offset = 128;
  p.y_offset = 128;
  te::Tensor ta = te::placeholder({int32_t(n)}, kU8, "a"),
             tb = te::placeholder({int32_t(n)}, kS8, "b");
  te::Tensor y = qnn_add(ta, tb, p);
  NDArray got = e2e::build_and_run(te::create_schedule({y}), {ta, tb, y}, {au, b})[0];
  for (int64_t k = 0; k < n; ++k) {
    const float v = std::fma(float(element(a, k)), p.ratio_a,
                             std::fma(float(element(b, k)), p.ratio_b, p.fixed));
    const double r = std::min(127.0, std::max(-100.0, std::nearbyint(double(v))));
    EXPECT_EQ(element(got, k), int64_t(r) + 128) << k;
  }
}

TEST(QnnGlobalAvgPool, NchwAndBlockedMatchTheNaiveReference) {
  const int64_t C = 32, H = 5, W = 7, b = 16;
  RequantParams p;
  p.x_zero_point = -9;
  p.out_dtype = kS8;
  p.y_zero_point = 4;
  p.out_min = -128;
  p.out_max = 127;
  const float scale = 0.9f / float(H * W);
  NDArray x = random_array({1, C, H, W}, kS8, 31, -128, 127);
  std::vector<int64_t> want;
  for (int64_t c = 0; c < C; ++c) {
    int64_t acc = 0;
    for (int64_t i = 0; i < H * W; ++i) acc += element(x, c * H * W + i) - p.x_zero_point;
    want.push_back(requant_ref(acc, scale, p));
  }
  for (bool blocked : {false, true}) {
    NDArray xin = blocked ? to_blocked(x, b) : x;
    std::vector<ir::Expr> shape;
    for (int64_t d : xin.shape()) shape.push_back(ir::Expr(int32_t(d)));
    te::Tensor tx = te::placeholder(shape, kS8, "x");
    te::Tensor y = qnn_global_avg_pool2d(tx, scale, p);
    autotune::Config cfg = autotune::Config::fallback();
    NDArray got =
        e2e::build_and_run(auto_schedule({y}, e2e::host_target(), cfg), {tx, y}, {xin})[0];
    ASSERT_EQ(got.numel(), C);
    for (int64_t c = 0; c < C; ++c) {
      // NCHW: [1, C, 1, 1]; NCHW16c: [1, C/16, 1, 1, 16], the same order.
      EXPECT_EQ(element(got, c), want[size_t(c)]) << (blocked ? "blocked" : "nchw") << " c" << c;
    }
  }
}

TEST(QnnDense, VnniAndPlainFormsMatchTheNaiveReference) {
  for (DataType xt : {kU8, kS8}) {
    const int64_t M = 3, K = 37, N = 70;
    RequantParams p;
    p.x_zero_point = xt == kU8 ? 120 : -9;
    p.out_dtype = kS8;
    p.y_zero_point = -3;
    p.out_min = -128;
    p.out_max = 127;
    NDArray x = random_array({M, K}, xt, 11, xt == kU8 ? 0 : -128, xt == kU8 ? 255 : 127);
    NDArray w = random_array({N, K}, kS8, 12, -128, 127);
    NDArray bias = random_array({N}, kI32, 13, -3000, 3000);
    NDArray scale = random_array({N}, kF32, 14, 1e-3, 5e-3);
    std::vector<int64_t> want;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int64_t acc = element(bias, n);
        for (int64_t k = 0; k < K; ++k)
          acc += (element(x, m * K + k) - p.x_zero_point) * element(w, n * K + k);
        want.push_back(requant_ref(acc, scale.data_as<float>()[n], p));
      }
    te::Tensor tx = te::placeholder({int32_t(M), int32_t(K)}, xt, "x");
    te::Tensor tb = te::placeholder({int32_t(N)}, kI32, "bias");
    te::Tensor ts = te::placeholder({int32_t(N)}, kF32, "scale");
    // VNNI form.
    autotune::Config cfg = autotune::Config::fallback();
    const int64_t nb = dense_pack_width(cfg, M, N, e2e::host_target());
    NDArray wp = pack_qnn_dense_weight(w, nb);
    NDArray bc = compensate_bias(bias, w, p.x_zero_point, xt == kS8 ? 128 : 0);
    te::Tensor tw = te::placeholder(
        {int32_t(wp.shape()[0]), int32_t(wp.shape()[1]), int32_t(wp.shape()[2])}, kI32, "wp");
    te::Tensor y = qnn_dense_packed(tx, tw, tb, ts, N, p);
    te::Schedule s = te::create_schedule({y});
    schedule_qnn_dense_packed(cfg, s, y, y, e2e::host_target());
    NDArray got = e2e::build_and_run(s, {tx, tw, tb, ts, y}, {x, wp, bc, scale})[0];
    for (int64_t k = 0; k < got.numel(); ++k)
      ASSERT_EQ(element(got, k), want[size_t(k)]) << xt << " vnni element " << k;
    // Plain form.
    te::Tensor tw2 = te::placeholder({int32_t(N), int32_t(K)}, kS8, "w");
    te::Tensor y2 = qnn_dense(tx, tw2, tb, ts, p);
    autotune::Config cfg2 = autotune::Config::fallback();
    te::Schedule s2 = auto_schedule({y2}, e2e::host_target(), cfg2);
    NDArray got2 = e2e::build_and_run(s2, {tx, tw2, tb, ts, y2}, {x, w, bias, scale})[0];
    for (int64_t k = 0; k < got2.numel(); ++k)
      ASSERT_EQ(element(got2, k), want[size_t(k)]) << xt << " plain element " << k;
  }
}

TEST(QnnHost, CompensatedBiasSubtractsTheShiftedZeroPointTimesTheWeightSum) {
  NDArray w = NDArray::empty({2, 3}, kS8);
  const int8_t v[] = {1, -2, 3, -128, 127, 5};
  std::copy(v, v + 6, w.data_as<int8_t>());
  NDArray b = i32({10, -10});
  NDArray r = compensate_bias(b, w, -3, 128);  // zero point -3 + 128 = 125
  EXPECT_EQ(r.data_as<int32_t>()[0], 10 - 125 * 2);
  EXPECT_EQ(r.data_as<int32_t>()[1], -10 - 125 * 4);
}

TEST(QnnErrors, NameTheProblem) {
  te::Tensor x = te::placeholder({2, 4}, kF32, "x");
  te::Tensor w = te::placeholder({3, 4}, kS8, "w");
  te::Tensor b = te::placeholder({3}, kI32, "b");
  te::Tensor s = te::placeholder({3}, kF32, "s");
  try {
    qnn_dense(x, w, b, s, RequantParams{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qnn_dense: needs uint8/int8 data"), std::string::npos)
        << e.what();
  }
  RequantParams bad;
  bad.out_dtype = kS8;
  bad.out_min = -128;
  bad.out_max = 200;
  te::Tensor acc = te::placeholder({3}, kI32, "acc");
  try {
    qnn_requantize(acc, b, s, 0, bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("saturation bounds [-128, 200] are not within int8"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::topi
