// Sub-pixel (phase) decomposition of transposed convolutions (subpixel.h): the per-axis plan of
// the stacked stride-1 convolution (taps, paddings, where each output lands), and the injective
// interleave that reads the stacked phases (NCHW or NCHW<b>c) and writes the transposed
// convolution's output (NCHW or NCHW<b>c). When input and output share the block and the block
// divides the channels of one phase, the interleave reads whole channel blocks (the innermost,
// vectorized axis is contiguous); otherwise the channel is split with div/mod.

#include "kiln/topi/subpixel.h"

#include <algorithm>

#include "kiln/support/error.h"
#include "kiln/topi/op_pattern.h"
#include "topi_util.h"

namespace kiln::topi {

namespace {

constexpr const char* kOp = "subpixel_interleave";

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

/// The highest stacked-convolution position an axis reads, plus one.
int64_t positions_needed(int64_t out, int64_t s, int64_t shift, int64_t offset) {
  return floor_div(out - 1 + shift, s) + offset + 1;
}

}  // namespace

SubpixelAxis plan_subpixel_axis(int64_t in, int64_t k, int64_t s, int64_t pad_begin, int64_t out) {
  KILN_USER_CHECK(in > 0 && k > 0 && s > 0 && out > 0)
      << "subpixel plan: input " << in << ", kernel " << k << ", stride " << s << ", output " << out
      << " must be positive";
  SubpixelAxis a;
  a.taps = (k + s - 1) / s;
  a.shift = pad_begin;
  const int64_t c0 = floor_div(pad_begin, s);  // floor(q / s) at y = 0
  a.pad_lo = std::max<int64_t>(0, a.taps - 1 - c0);
  a.offset = a.pad_lo - (a.taps - 1);
  const int64_t need = positions_needed(out, s, a.shift, a.offset);
  a.pad_hi = std::max<int64_t>(0, need - in - a.pad_lo + a.taps - 1);
  a.conv_extent = in + a.pad_lo + a.pad_hi - a.taps + 1;
  KILN_ICHECK(c0 + a.offset >= 0 && need <= a.conv_extent)
      << "subpixel plan: positions [" << c0 + a.offset << ", " << need << ") outside [0, "
      << a.conv_extent << ")";
  return a;
}

SubpixelAxis plan_subpixel_phase(int64_t in, int64_t k, int64_t s, int64_t pad_begin, int64_t out,
                                 int64_t r) {
  KILN_USER_CHECK(in > 0 && k > 0 && s > 0 && out > 0 && r >= 0 && r < s)
      << "subpixel plan: input " << in << ", kernel " << k << ", stride " << s << ", output " << out
      << ", phase " << r << " out of range";
  SubpixelAxis a;
  a.shift = pad_begin;
  const int64_t q0 = pad_begin + (((r - pad_begin) % s) + s) % s;  // first q of the phase
  const int64_t q1 = pad_begin + out - 1;                          // last q of all
  if (r >= k || q0 > q1) return a;                                 // no tap / no output
  a.taps = (k - r + s - 1) / s;
  const int64_t first = floor_div(q0, s), last = floor_div(q1 - floor_mod(q1 - r, s), s);
  a.pad_lo = std::max<int64_t>(0, a.taps - 1 - first);
  a.offset = a.pad_lo - (a.taps - 1);
  const int64_t need = last + a.offset + 1;
  a.pad_hi = std::max<int64_t>(0, need - in - a.pad_lo + a.taps - 1);
  a.conv_extent = in + a.pad_lo + a.pad_hi - a.taps + 1;
  KILN_ICHECK(first + a.offset >= 0 && need <= a.conv_extent)
      << "subpixel plan: phase " << r << " positions outside the convolution";
  return a;
}

std::vector<int64_t> subpixel_interleave_shape(const std::vector<std::vector<int64_t>>& in,
                                               const SubpixelParams& p) {
  const size_t phases = static_cast<size_t>(p.stride_h * p.stride_w);
  KILN_USER_CHECK(p.stride_h > 0 && p.stride_w > 0 && (in.size() == 1 || in.size() == phases))
      << kOp << ": strides (" << p.stride_h << ", " << p.stride_w << ") need " << phases
      << " phase inputs, got " << in.size();
  if (phases == 1 || in.size() == 1) return subpixel_interleave_shape(in[0], p);
  KILN_USER_CHECK(p.phase_offsets_h.size() == static_cast<size_t>(p.stride_h) &&
                  p.phase_offsets_w.size() == static_cast<size_t>(p.stride_w))
      << kOp << ": one input per phase needs " << p.stride_h << " + " << p.stride_w
      << " phase offsets, got " << p.phase_offsets_h.size() << " + " << p.phase_offsets_w.size();
  std::vector<int64_t> out;
  for (size_t j = 0; j < phases; ++j) {
    KILN_USER_CHECK(in[j].size() == in[0].size() && (in[j].size() == 4 || in[j][4] == in[0][4]))
        << kOp << ": phase " << j << " has shape " << detail::shape_text(in[j]) << ", phase 0 has "
        << detail::shape_text(in[0]) << " (all phases share one layout)";
    // Phase j alone: the single-input rule with its own stride-1 view of the axis.
    const int64_t ry = static_cast<int64_t>(j) / p.stride_w,
                  rx = static_cast<int64_t>(j) % p.stride_w;
    auto check_axis = [&](int64_t extent, int64_t n, int64_t s, int64_t shift, int64_t offset,
                          int64_t r, const char* axis) {
      bool any = false;
      int64_t lo = 0, hi = 0;
      for (int64_t y = 0; y < n; ++y) {
        if (floor_mod(y + shift, s) != r) continue;
        const int64_t pos = floor_div(y + shift, s) + offset;
        lo = any ? std::min(lo, pos) : pos;
        hi = any ? std::max(hi, pos + 1) : pos + 1;
        any = true;
      }
      KILN_USER_CHECK(!any || (lo >= 0 && hi <= extent))
          << kOp << ": phase " << j << ": output " << axis << " " << n << " reads positions [" << lo
          << ", " << hi << ") of " << extent << " (shape " << detail::shape_text(in[j]) << ")";
    };
    check_axis(in[j][2], p.out_h, p.stride_h, p.shift_h, p.offset_h + p.phase_offsets_h[ry], ry,
               "height");
    check_axis(in[j][3], p.out_w, p.stride_w, p.shift_w, p.offset_w + p.phase_offsets_w[rx], rx,
               "width");
    const int64_t channels = in[j].size() == 5 ? in[j][1] * in[j][4] : in[j][1];
    KILN_USER_CHECK(channels >= p.channels)
        << kOp << ": phase " << j << " has " << channels << " channels, need " << p.channels;
  }
  KILN_USER_CHECK(p.out_block == 0 || p.channels % p.out_block == 0)
      << kOp << ": output block " << p.out_block << " does not divide " << p.channels
      << " channels";
  const std::vector<int64_t>& s0 = in[0];
  if (p.out_block > 0) return {s0[0], p.channels / p.out_block, p.out_h, p.out_w, p.out_block};
  return {s0[0], p.channels, p.out_h, p.out_w};
}

std::vector<int64_t> subpixel_interleave_shape(const std::vector<int64_t>& in,
                                               const SubpixelParams& p) {
  KILN_USER_CHECK(in.size() == 4 || in.size() == 5)
      << kOp << ": expected NCHW or NCHW<b>c phases, got shape " << detail::shape_text(in);
  KILN_USER_CHECK(p.stride_h > 0 && p.stride_w > 0 && p.out_h > 0 && p.out_w > 0 &&
                  p.channels > 0 && p.out_block >= 0)
      << kOp << ": strides (" << p.stride_h << ", " << p.stride_w << "), output size (" << p.out_h
      << ", " << p.out_w << "), channels " << p.channels << " and block " << p.out_block
      << " must be positive";
  KILN_USER_CHECK(p.out_block == 0 || p.channels % p.out_block == 0)
      << kOp << ": output block " << p.out_block << " does not divide " << p.channels
      << " channels";
  const int64_t in_channels = in.size() == 5 ? in[1] * in[4] : in[1];
  const int64_t phases = p.stride_h * p.stride_w;
  KILN_USER_CHECK(in_channels >= phases * p.channels)
      << kOp << ": " << phases << " phases of " << p.channels << " channels need "
      << phases * p.channels << " input channels, got shape " << detail::shape_text(in);
  auto check_axis = [&](int64_t extent, int64_t out, int64_t s, int64_t shift, int64_t offset,
                        const char* axis) {
    const int64_t lo = floor_div(shift, s) + offset, hi = positions_needed(out, s, shift, offset);
    KILN_USER_CHECK(lo >= 0 && hi <= extent)
        << kOp << ": output " << axis << " " << out << " reads phase positions [" << lo << ", "
        << hi << ") of " << extent << " (shape " << detail::shape_text(in) << ")";
  };
  check_axis(in[2], p.out_h, p.stride_h, p.shift_h, p.offset_h, "height");
  check_axis(in[3], p.out_w, p.stride_w, p.shift_w, p.offset_w, "width");
  if (p.out_block > 0) return {in[0], p.channels / p.out_block, p.out_h, p.out_w, p.out_block};
  return {in[0], p.channels, p.out_h, p.out_w};
}

te::Tensor subpixel_interleave(const te::Tensor& phases, const SubpixelParams& p,
                               const std::string& name) {
  using namespace kiln::ir;  // NOLINT
  using detail::ci;
  const std::vector<int64_t> in = detail::const_shape(phases, kOp);
  const std::vector<int64_t> out = subpixel_interleave_shape(in, p);
  const int64_t bi = in.size() == 5 ? in[4] : 0, bo = p.out_block, O = p.channels;
  const bool whole_blocks = bi > 0 && bi == bo && O % bi == 0;
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        Expr qy = i[2] + ci(p.shift_h), qx = i[3] + ci(p.shift_w);
        Expr phase = floormod(qy, ci(p.stride_h)) * ci(p.stride_w) + floormod(qx, ci(p.stride_w));
        Expr row = floordiv(qy, ci(p.stride_h)) + ci(p.offset_h);
        Expr col = floordiv(qx, ci(p.stride_w)) + ci(p.offset_w);
        if (whole_blocks) return phases(i[0], phase * ci(O / bi) + i[1], row, col, i[4]);
        Expr o = bo > 0 ? i[1] * ci(bo) + i[4] : Expr(i[1]);
        Expr c = phase * ci(O) + o;
        if (bi == 0) return phases(i[0], c, row, col);
        return phases(i[0], floordiv(c, ci(bi)), row, col, floormod(c, ci(bi)));
      },
      name, std::string(tag::kInjective) + "," + kOp);
}

te::Tensor subpixel_interleave(const std::vector<te::Tensor>& phases, const SubpixelParams& p,
                               const std::string& name) {
  using namespace kiln::ir;  // NOLINT
  using detail::ci;
  KILN_USER_CHECK(!phases.empty()) << kOp << ": no phase tensors";
  if (phases.size() == 1) return subpixel_interleave(phases[0], p, name);
  std::vector<std::vector<int64_t>> in;
  for (const te::Tensor& t : phases) in.push_back(detail::const_shape(t, kOp));
  const std::vector<int64_t> out = subpixel_interleave_shape(in, p);
  const int64_t bi = in[0].size() == 5 ? in[0][4] : 0, bo = p.out_block;
  const bool whole_blocks = bi > 0 && bi == bo;
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        Expr qy = i[2] + ci(p.shift_h), qx = i[3] + ci(p.shift_w);
        Expr ry = floormod(qy, ci(p.stride_h)), rx = floormod(qx, ci(p.stride_w));
        Expr o = bo > 0 ? i[1] * ci(bo) + i[4] : Expr(i[1]);
        auto read = [&](int64_t j) {
          const int64_t jy = j / p.stride_w, jx = j % p.stride_w;
          Expr row = floordiv(qy, ci(p.stride_h)) + ci(p.offset_h + p.phase_offsets_h[jy]);
          Expr col = floordiv(qx, ci(p.stride_w)) + ci(p.offset_w + p.phase_offsets_w[jx]);
          const te::Tensor& t = phases[static_cast<size_t>(j)];
          if (whole_blocks) return t(i[0], i[1], row, col, i[4]);
          if (bi == 0) return t(i[0], o, row, col);
          return t(i[0], floordiv(o, ci(bi)), row, col, floormod(o, ci(bi)));
        };
        // Only the phase's own load runs (an other phase's position may be out of its range).
        const int64_t n = static_cast<int64_t>(phases.size());
        Expr v = read(n - 1);
        for (int64_t j = n - 1; j-- > 0;)
          v = if_then_else(ry == ci(j / p.stride_w) && rx == ci(j % p.stride_w), read(j), v);
        return v;
      },
      name, std::string(tag::kInjective) + "," + kOp);
}

}  // namespace kiln::topi
