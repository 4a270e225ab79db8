// Tests of topi::subpixel_interleave (subpixel.h) alone: every combination of NCHW / NCHW<b>c
// phases and NCHW / NCHW<b>c output (equal blocks, different blocks, padded phase channels),
// with negative and positive shifts and offsets and strides 2 and 3, built under the default
// and the injective schedule against the index rule computed here on the logical NCHW
// tensors; poisoned outputs. And the per-axis plan against a brute-force search of the taps.

#include "kiln/topi/subpixel.h"

#include <gtest/gtest.h>

#include "topi/topi_test_util.h"

namespace kiln::topi {
namespace {

using namespace testing;  // NOLINT

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

struct Layouts {
  int64_t in_block;  // 0: NCHW phases
  int64_t in_channels, rows, cols;
  SubpixelParams p;
};

void check_interleave(const Layouts& l, uint32_t seed) {
  const SubpixelParams& p = l.p;
  const int64_t N = 2, bi = l.in_block;
  Shape in_shape = bi ? Shape{N, l.in_channels / bi, l.rows, l.cols, bi}
                      : Shape{N, l.in_channels, l.rows, l.cols};
  te::Tensor X = input(in_shape, f32, "phases");
  te::Tensor Y = subpixel_interleave(X, p);
  NDArray x = random_array(in_shape, f32, seed);
  // The phases' logical NCHW element.
  auto phase_at = [&](int64_t n, int64_t c, int64_t r, int64_t q) {
    return bi ? at(x, {n, c / bi, r, q, c % bi}) : at(x, {n, c, r, q});
  };
  NDArray want = reference(shape_of(Y), f32, [&](const Shape& i) {
    const int64_t o = p.out_block ? i[1] * p.out_block + i[4] : i[1];
    const int64_t qy = i[2] + p.shift_h, qx = i[3] + p.shift_w;
    const int64_t c =
        (floor_mod(qy, p.stride_h) * p.stride_w + floor_mod(qx, p.stride_w)) * p.channels + o;
    return phase_at(i[0], c, floor_div(qy, p.stride_h) + p.offset_h,
                    floor_div(qx, p.stride_w) + p.offset_w);
  });
  check({X}, {Y}, {x}, {want});
}

TEST(SubpixelInterleave, AllLayoutCombinations) {
  // stride 2, shift 1, offset 0 (DCGAN): O = 16 from 16-blocks to 16-blocks (whole blocks).
  SubpixelParams d{2, 2, 1, 1, 0, 0, 8, 8, 16, 16};
  check_interleave({16, 64, 5, 5, d}, 1);
  // ... to NCHW, and from NCHW phases to NCHW and to 8-blocks.
  d.out_block = 0;
  check_interleave({16, 64, 5, 5, d}, 2);
  check_interleave({0, 64, 5, 5, d}, 3);
  d.out_block = 8;
  check_interleave({0, 64, 5, 5, d}, 4);
  // O = 3 from phases padded to 16 channels (12 used).
  SubpixelParams rgb{2, 2, 1, 1, 0, 0, 7, 6, 3, 0};
  check_interleave({16, 16, 5, 4, rgb}, 5);
  // stride (3, 2), negative shift, positive offset; O = 12 from 16-blocks to 12-blocks.
  SubpixelParams odd{3, 2, -2, 3, 1, -1, 10, 9, 12, 12};
  check_interleave({16, 80, 6, 7, odd}, 6);
  check_interleave({0, 72, 6, 7, odd}, 7);
}

/// One tensor per phase (`bi`: their block, 0 for NCHW), each of O channels and one more row
/// and column than its outputs read.
void check_per_phase(int64_t bi, const SubpixelParams& p, uint32_t seed) {
  const int64_t N = 1, O = p.channels;
  std::vector<te::Tensor> X;
  std::vector<NDArray> x;
  for (int64_t j = 0; j < p.stride_h * p.stride_w; ++j) {
    const int64_t ry = j / p.stride_w, rx = j % p.stride_w;
    auto extent = [](int64_t out, int64_t s, int64_t shift, int64_t off, int64_t r) {
      int64_t hi = 0;
      for (int64_t y = 0; y < out; ++y)
        if (floor_mod(y + shift, s) == r) hi = std::max(hi, floor_div(y + shift, s) + off + 1);
      return hi + 1;
    };
    const int64_t rows =
        extent(p.out_h, p.stride_h, p.shift_h, p.offset_h + p.phase_offsets_h[ry], ry);
    const int64_t cols =
        extent(p.out_w, p.stride_w, p.shift_w, p.offset_w + p.phase_offsets_w[rx], rx);
    Shape sh = bi ? Shape{N, O / bi, rows, cols, bi} : Shape{N, O, rows, cols};
    X.push_back(input(sh, f32, "phase" + std::to_string(j)));
    x.push_back(random_array(sh, f32, seed + static_cast<uint32_t>(j)));
  }
  te::Tensor Y = subpixel_interleave(X, p);
  NDArray want = reference(shape_of(Y), f32, [&](const Shape& i) {
    const int64_t o = p.out_block ? i[1] * p.out_block + i[4] : i[1];
    const int64_t qy = i[2] + p.shift_h, qx = i[3] + p.shift_w;
    const int64_t ry = floor_mod(qy, p.stride_h), rx = floor_mod(qx, p.stride_w);
    const NDArray& a = x[static_cast<size_t>(ry * p.stride_w + rx)];
    const int64_t r = floor_div(qy, p.stride_h) + p.offset_h + p.phase_offsets_h[ry];
    const int64_t c = floor_div(qx, p.stride_w) + p.offset_w + p.phase_offsets_w[rx];
    return bi ? at(a, {0, o / bi, r, c, o % bi}) : at(a, {0, o, r, c});
  });
  std::vector<te::Tensor> ins = X;
  check(ins, {Y}, x, {want});
}

TEST(SubpixelInterleave, OneTensorPerPhase) {
  // DCGAN: phases (-1, 0) per axis; 16-blocks in and out (whole blocks).
  SubpixelParams d{2, 2, 1, 1, 0, 0, 8, 8, 16, 16};
  d.phase_offsets_h = d.phase_offsets_w = {-1, 0};
  check_per_phase(16, d, 10);
  // 16-blocks in, NCHW out; NCHW in, 8-blocks out.
  d.out_block = 0;
  check_per_phase(16, d, 20);
  d.out_block = 8;
  check_per_phase(0, d, 30);
  // stride (3, 2), odd output sizes, per-phase offsets of both signs, 8-blocks in, 16 out.
  SubpixelParams odd{3, 2, 2, -1, 1, 0, 11, 7, 32, 16};
  odd.phase_offsets_h = {0, -1, 2};
  odd.phase_offsets_w = {1, 1};
  check_per_phase(8, odd, 40);
}

TEST(SubpixelInterleave, PlanCoversEveryTap) {
  // For every output y, the taps k = (q mod s) + s·t (t < taps) at input floor(q/s) − t are
  // exactly the (i, k) with y = s·i − pad + k, and the plan's positions are in range.
  for (int64_t s = 1; s <= 3; ++s)
    for (int64_t k = 1; k <= 6; ++k)
      for (int64_t pad = -1; pad <= k + 1; ++pad)
        for (int64_t in : {1, 3, 4}) {
          const int64_t out = s * (in - 1) + k - pad + (s > 1 ? 1 : 0);
          if (out <= 0) continue;
          SubpixelAxis a = plan_subpixel_axis(in, k, s, pad, out);
          SCOPED_TRACE("s " + std::to_string(s) + " k " + std::to_string(k) + " pad " +
                       std::to_string(pad) + " in " + std::to_string(in));
          EXPECT_EQ(a.conv_extent, in + a.pad_lo + a.pad_hi - a.taps + 1);
          for (int64_t y = 0; y < out; ++y) {
            const int64_t q = y + pad, pos = floor_div(q, s) + a.offset;
            ASSERT_GE(pos, 0);
            ASSERT_LT(pos, a.conv_extent);
            int64_t found = 0, expected = 0;
            for (int64_t i = 0; i < in; ++i)
              for (int64_t kk = 0; kk < k; ++kk) expected += s * i - pad + kk == y;
            for (int64_t t = 0; t < a.taps; ++t) {
              const int64_t kk = floor_mod(q, s) + s * t, i = floor_div(q, s) - t;
              // position pos, tap slot taps−1−t reads padded input pos + taps−1−t.
              EXPECT_EQ(pos + a.taps - 1 - t - a.pad_lo, i);
              found += kk < k && i >= 0 && i < in;
            }
            EXPECT_EQ(found, expected) << "y " << y;
            // The phase's own convolution: its taps are exactly the non-zero ones.
            const int64_t r = floor_mod(q, s);
            SubpixelAxis b = plan_subpixel_phase(in, k, s, pad, out, r);
            ASSERT_EQ(b.taps, r < k ? (k - r + s - 1) / s : 0);
            if (b.taps == 0) continue;
            const int64_t bpos = floor_div(q, s) + b.offset;
            ASSERT_GE(bpos, 0);
            ASSERT_LT(bpos, b.conv_extent);
            EXPECT_EQ(b.conv_extent, in + b.pad_lo + b.pad_hi - b.taps + 1);
            int64_t bfound = 0;
            for (int64_t t = 0; t < b.taps; ++t) {
              const int64_t i = bpos + b.taps - 1 - t - b.pad_lo;
              EXPECT_EQ(i, floor_div(q, s) - t);
              EXPECT_LT(r + s * t, k);
              bfound += i >= 0 && i < in;
            }
            EXPECT_EQ(bfound, expected) << "y " << y << " alone";
          }
          // Each phase's extent is its number of outputs when its first output is at
          // position 0 (no crop before it).
          for (int64_t r = 0; r < s; ++r) {
            SubpixelAxis b = plan_subpixel_phase(in, k, s, pad, out, r);
            int64_t count = 0, first = -1;
            for (int64_t y = 0; y < out; ++y)
              if (floor_mod(y + pad, s) == r) {
                if (count++ == 0) first = floor_div(y + pad, s) + b.offset;
              }
            if (b.taps > 0 && count > 0 && first == 0)
              EXPECT_EQ(b.conv_extent, count) << "phase " << r;
          }
        }
}

}  // namespace
}  // namespace kiln::topi
