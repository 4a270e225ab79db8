// Pooling: max / avg (both count_include_pad modes), padding, stride, dilation, ceil_mode,
// global and adaptive pooling in NCHW and NCHW16c, each against a naive C++ reference written
// after PyTorch's CPU kernels (avg: hend = min(hstart + k, H + pad), divisor from the clipped or
// unclipped window), with the fallback schedule and every knob of the template; padded NCHW
// windows read a padded copy of their rows, unguarded.
#include "kiln/topi/pooling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "e2e/e2e_util.h"

namespace kiln::topi {
namespace {

using e2e::all_close;
using e2e::NDArray;

/// One axis of the reference: [start, end) taps of output o and the avg divisor contribution.
struct RefWindow {
  int64_t start, end, step, pool_size;
};

RefWindow ref_window(const PoolWorkload& w, int axis, int64_t o, int64_t in) {
  if (w.kind == PoolWorkload::kGlobal) return {0, in, 1, in};
  if (w.kind == PoolWorkload::kAdaptive) {
    int64_t out = w.output_size[axis];
    int64_t s = o * in / out, e = ((o + 1) * in + out - 1) / out;
    return {s, e, 1, e - s};
  }
  const Pool2DAttrs& a = w.attrs;
  int64_t k = a.kernel[axis], st = a.stride[axis], pb = a.padding[axis], pe = a.padding[axis + 2],
          d = a.dilation[axis];
  int64_t s = o * st - pb;
  if (w.type == PoolType::kMax) return {s, s + (k - 1) * d + 1, d, 0};
  // PyTorch avg_pool2d (dilation 1).
  int64_t e = std::min(s + k, in + pe);
  int64_t size = e - s;
  s = std::max<int64_t>(s, 0);
  e = std::min(e, in);
  return {s, e, 1, a.count_include_pad ? size : e - s};
}

NDArray pool_ref(const NDArray& x, const PoolWorkload& w, const std::vector<int64_t>& oshape) {
  const bool blocked = w.shape.size() == 5;
  const int64_t H = w.shape[2], W = w.shape[3];
  return e2e::reference(oshape, DataType::Float(32), [&](const std::vector<int64_t>& i) {
    RefWindow wh = ref_window(w, 0, i[2], H), ww = ref_window(w, 1, i[3], W);
    double acc = w.type == PoolType::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    int64_t n = 0;
    for (int64_t h = wh.start; h < wh.end; h += wh.step) {
      for (int64_t c = ww.start; c < ww.end; c += ww.step) {
        if (h < 0 || h >= H || c < 0 || c >= W) continue;
        std::vector<int64_t> idx{i[0], i[1], h, c};
        if (blocked) idx.push_back(i[4]);
        double v = e2e::at(x, idx);
        acc = w.type == PoolType::kMax ? std::max(acc, v) : acc + v;
        ++n;
      }
    }
    if (w.type == PoolType::kMax) return acc;
    if (w.kind == PoolWorkload::kWindow) return acc / double(wh.pool_size * ww.pool_size);
    return acc / double(n);
  });
}

void check_pool(const PoolWorkload& w, const autotune::Config& cfg, uint32_t seed) {
  autotune::Instance inst = autotune::instantiate(pool_template(w, e2e::host_target()), cfg);
  NDArray x = e2e::random_array(w.shape, DataType::Float(32), seed);
  auto out = e2e::build_and_run(inst.sch, inst.args, {x});
  EXPECT_TRUE(all_close(out[0], pool_ref(x, w, out[0].shape())))
      << pool_type_name(w.type) << " kind " << int(w.kind) << " input "
      << runtime::shape_str(w.shape) << " " << w.layout << " config " << inst.config.str() << "\n"
      << e2e::lowered_text(inst.sch, inst.args);
}

PoolWorkload window(PoolType t, std::vector<int64_t> shape, Pool2DAttrs a,
                    std::string layout = "NCHW") {
  PoolWorkload w;
  w.kind = PoolWorkload::kWindow;
  w.type = t;
  w.shape = std::move(shape);
  w.attrs = std::move(a);
  w.layout = std::move(layout);
  return w;
}

TEST(Pool, OutputSizeFollowsPyTorch) {
  EXPECT_EQ(pool_output_size(7, 3, 2, 0, 0, 1, false), 3);
  EXPECT_EQ(pool_output_size(8, 3, 2, 0, 0, 1, false), 3);
  EXPECT_EQ(pool_output_size(8, 3, 2, 0, 0, 1, true), 4);
  // ceil_mode drops a window that would start in the right padding.
  EXPECT_EQ(pool_output_size(5, 2, 2, 1, 1, 1, true), 3);
  EXPECT_EQ(pool_output_size(13, 3, 1, 0, 0, 2, false), 9);
}

TEST(Pool, WindowedMaxAndAvgNCHW) {
  uint32_t seed = 1;
  for (PoolType t : {PoolType::kMax, PoolType::kAvg}) {
    for (bool include : {true, false}) {
      if (t == PoolType::kMax && !include) continue;
      Pool2DAttrs a3{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, include};
      check_pool(window(t, {1, 3, 13, 13}, a3), autotune::Config::fallback(), seed++);
      Pool2DAttrs a2{{2, 3}, {1, 2}, {1, 0, 1, 1}, {1, 1}, false, include};
      check_pool(window(t, {2, 2, 7, 20}, a2), autotune::Config::fallback(), seed++);
      Pool2DAttrs a1{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, include};
      check_pool(window(t, {1, 1, 1, 7}, a1), autotune::Config::fallback(), seed++);
    }
  }
  // Dilation (max only, as in PyTorch).
  Pool2DAttrs ad{{3, 2}, {1, 2}, {2, 1, 2, 1}, {2, 3}, true, true};
  check_pool(window(PoolType::kMax, {1, 2, 13, 17}, ad), autotune::Config::fallback(), seed++);
}

TEST(Pool, PaddedNCHWRowsAreCopiedSoNoTapIsGuardedPerLane) {
  // PoolFormer's token mixer: 3x3, stride 1, padding 1, the divisor without the padding; rows
  // of 37 (two whole vectors and a shifted one) and of 9 (shorter than a vector).
  uint32_t seed = 21;
  for (PoolType t : {PoolType::kAvg, PoolType::kMax}) {
    for (int64_t w : {37, 9}) {
      Pool2DAttrs a{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, false};
      PoolWorkload wl = window(t, {1, 3, 6, w}, a);
      check_pool(wl, autotune::Config::fallback(), seed++);
      autotune::Instance inst = autotune::instantiate(pool_template(wl, e2e::host_target()),
                                                      autotune::Config::fallback());
      std::string text = e2e::lowered_text(inst.sch, inst.args);
      EXPECT_NE(text.find("_pad["), std::string::npos) << text;
      // The reduction's updates read the padded rows without a condition.
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);)
        if (line.find("_pad[ramp") != std::string::npos && line.find(" = ") != std::string::npos &&
            line.find("_pad[ramp") > line.find(" = ")) {
          EXPECT_EQ(line.find(" if "), std::string::npos) << line;
        }
    }
  }
}

TEST(Pool, WindowedNCHW16c) {
  Pool2DAttrs a{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false};
  check_pool(window(PoolType::kMax, {1, 2, 9, 7, 16}, a, "NCHW16c"), autotune::Config::fallback(),
             11);
  check_pool(window(PoolType::kAvg, {2, 1, 7, 7, 16}, a, "NCHW16c"), autotune::Config::fallback(),
             12);
  a.count_include_pad = true;
  a.ceil_mode = true;
  check_pool(window(PoolType::kAvg, {1, 1, 8, 8, 16}, a, "NCHW16c"), autotune::Config::fallback(),
             13);
}

TEST(Pool, GlobalAndAdaptive) {
  uint32_t seed = 20;
  for (PoolType t : {PoolType::kMax, PoolType::kAvg}) {
    for (std::string layout : {"NCHW", "NCHW16c"}) {
      std::vector<int64_t> shape = layout == "NCHW" ? std::vector<int64_t>{2, 3, 7, 13}
                                                    : std::vector<int64_t>{1, 2, 7, 5, 16};
      PoolWorkload g{PoolWorkload::kGlobal, t, shape, layout};
      check_pool(g, autotune::Config::fallback(), seed++);
      PoolWorkload ad{PoolWorkload::kAdaptive, t, shape, layout};
      ad.output_size = {3, 4};  // non-uniform windows (7 -> 3, 13/5 -> 4)
      check_pool(ad, autotune::Config::fallback(), seed++);
      ad.output_size = {7, 1};
      check_pool(ad, autotune::Config::fallback(), seed++);
    }
  }
}

TEST(Pool, EveryKnobOfTheTemplate) {
  Pool2DAttrs a{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false};
  for (PoolWorkload w : {window(PoolType::kAvg, {1, 2, 13, 19}, a),
                         window(PoolType::kMax, {1, 1, 7, 7, 16}, a, "NCHW16c")}) {
    auto space = autotune::define_space(pool_template(w, e2e::host_target()));
    EXPECT_EQ(space.knob_names(), (std::vector<std::string>{"vec", "unroll_window"}));
    EXPECT_EQ(space.size(), 4u);
    for (uint64_t i = 0; i < space.size(); ++i) check_pool(w, space.get(i), 30 + i);
  }
  auto fb = autotune::instantiate(
      pool_template(window(PoolType::kMax, {1, 1, 8, 8}, a), e2e::host_target()),
      autotune::Config::fallback());
  EXPECT_EQ(fb.config.str(), "vec=1 unroll_window=1");
}

TEST(Pool, ErrorsNameOpAndShapes) {
  auto x = te::placeholder({1, 3, 8, 8}, DataType::Float(32), "x");
  EXPECT_EQ(e2e::error_of([&] { pool2d(x, PoolType::kMax, {}, "NCHW16c"); }),
            "max_pool2d: input shape [1, 3, 8, 8] does not match layout NCHW16c");
  EXPECT_EQ(e2e::error_of([&] { pool2d(x, PoolType::kAvg, {}, "NHWC"); }),
            "avg_pool2d: unsupported layout 'NHWC' (expected NCHW or NCHW<x>c, e.g. NCHW16c)");
  Pool2DAttrs a{{2, 2}, {1, 1}, {2, 0, 0, 0}};
  EXPECT_EQ(e2e::error_of([&] { pool2d(x, PoolType::kMax, a); }),
            "max_pool2d: padding [2, 0, 0, 0] must be non-negative and at most half the "
            "(dilated) kernel [2, 2]");
  EXPECT_EQ(e2e::error_of([&] {
              adaptive_pool2d(x, PoolType::kAvg, {0, 2});
            }),
            "adaptive_avg_pool2d: output size must be 2 positive values, got [0, 2]");
  auto small = te::placeholder({1, 1, 2, 2}, DataType::Float(32), "s");
  EXPECT_EQ(e2e::error_of([&] {
              pool2d(small, PoolType::kMax, Pool2DAttrs{{3, 3}});
            }),
            "max_pool2d: empty output for input [1, 1, 2, 2] (output 0 x 0)");
}

}  // namespace
}  // namespace kiln::topi
