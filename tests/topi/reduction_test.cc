// Reductions (sum, mean, max, min, prod, argmax, argmin) over single and multiple axes,
// negative axes and keepdims, against naive C++; argmax/argmin ties resolve to the first index.
// cumsum (a scan, and as sums) along each axis, exclusive and reversed.
#include "kiln/topi/reduction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/topi/auto_schedule.h"
#include "kiln/topi/schedule_injective.h"
#include "kiln/topi/transform.h"
#include "topi/topi_test_util.h"

namespace kiln::topi::testing {
namespace {

enum class Kind { kSum, kMean, kMax, kMin, kProd, kArgMax, kArgMin };

/// Naive reduction of `x` over `axes` (normalized, any order); returns the output array.
NDArray naive_reduce(const NDArray& x, std::vector<int> axes, bool keepdims, Kind k,
                     DataType out_t) {
  const Shape& in = x.shape();
  int r = static_cast<int>(in.size());
  std::vector<bool> red(r, axes.empty());
  for (int a : axes) red[a < 0 ? a + r : a] = true;
  Shape out;
  for (int d = 0; d < r; ++d)
    if (!red[d])
      out.push_back(in[d]);
    else if (keepdims)
      out.push_back(1);
  Shape out_full(r);  // output index with reduced dims at 0
  return reference(out, out_t, [&](const Shape& oi) {
    Shape base(r, 0);
    size_t o = 0;
    for (int d = 0; d < r; ++d) {
      if (!red[d])
        base[d] = oi[o++];
      else if (keepdims)
        ++o;
    }
    double acc = k == Kind::kProd ? 1 : 0, best = 0;
    int64_t best_i = -1, count = 0, pos = 0;
    // Iterate the reduced dims in row-major order.
    Shape cur = base;
    std::function<void(int)> rec = [&](int d) {
      if (d == r) {
        double v = at(x, cur);
        ++count;
        switch (k) {
          case Kind::kSum:
          case Kind::kMean:
            acc += v;
            break;
          case Kind::kProd:
            acc *= v;
            break;
          case Kind::kMax:
          case Kind::kArgMax:
            if (best_i < 0 || v > best) best = v, best_i = pos;
            break;
          case Kind::kMin:
          case Kind::kArgMin:
            if (best_i < 0 || v < best) best = v, best_i = pos;
            break;
        }
        ++pos;
        return;
      }
      if (!red[d]) return rec(d + 1);
      for (int64_t v = 0; v < in[d]; ++v) {
        cur[d] = v;
        rec(d + 1);
      }
    };
    rec(0);
    switch (k) {
      case Kind::kSum:
      case Kind::kProd:
        return acc;
      case Kind::kMean:
        return out_t.is_float() ? acc / count : std::floor(acc / count);
      case Kind::kMax:
      case Kind::kMin:
        return best;
      default:
        return static_cast<double>(best_i);
    }
  });
}

struct Spec {
  Shape shape;
  std::vector<int> axes;
  bool keepdims;
};

void check_all(const Spec& sp, DataType t, uint32_t seed, double lo, double hi) {
  SCOPED_TRACE(::testing::Message()
               << "shape " << runtime::shape_str(sp.shape) << " axes "
               << ::testing::PrintToString(sp.axes) << " keepdims " << sp.keepdims << " " << t);
  te::Tensor X = input(sp.shape, t, "X");
  NDArray x = random_array(sp.shape, t, seed, lo, hi);
  struct Op {
    Kind k;
    te::Tensor out;
  };
  std::vector<Op> ops = {{Kind::kSum, sum(X, sp.axes, sp.keepdims)},
                         {Kind::kMean, mean(X, sp.axes, sp.keepdims)},
                         {Kind::kMax, max(X, sp.axes, sp.keepdims)},
                         {Kind::kMin, min(X, sp.axes, sp.keepdims)},
                         {Kind::kProd, prod(X, sp.axes, sp.keepdims)}};
  // Each reduction is its own kernel under schedule_reduce, but one build holds them all.
  std::vector<te::Tensor> outs;
  std::vector<NDArray> want;
  for (const Op& op : ops) {
    outs.push_back(op.out);
    want.push_back(naive_reduce(x, sp.axes, sp.keepdims, op.k, t));
  }
  check({X}, outs, {x}, want, schedule_reduce, {1e-4, 1e-5});
  for (Kind k : {Kind::kArgMax, Kind::kArgMin}) {
    for (DataType it : {i32, i64}) {
      te::Tensor A = k == Kind::kArgMax ? argmax(X, sp.axes, sp.keepdims, it)
                                        : argmin(X, sp.axes, sp.keepdims, it);
      check({X}, {A}, {x}, {naive_reduce(x, sp.axes, sp.keepdims, k, it)}, schedule_reduce);
      if (it == i32) break;  // int64 once per spec below
    }
  }
}

TEST(TopiReduction, FloatAxesAndKeepdims) {
  uint32_t seed = 1;
  for (const Spec& sp : std::vector<Spec>{{{7, 13}, {1}, false},
                                          {{7, 13}, {0}, true},
                                          {{3, 5, 7}, {-1, 0}, false},
                                          {{3, 5, 7}, {1}, true},
                                          {{2, 3, 4}, {}, false},
                                          {{1, 13}, {-2}, false},
                                          {{70, 67}, {0}, false}}) {
    check_all(sp, f32, seed++, 0.5, 1.5);  // positive values keep prod well-conditioned
  }
}

TEST(TopiReduction, OverAnAxisItsProducerStrides) {
  // Max over the points of a Conv1d's output that a blocked convolution wrote in NCHW16c (a
  // PointNet's global feature): the inlined layout transform reads W with a stride of 16, so
  // the reduction is one stage vectorized along the channels, where the loads are contiguous,
  // not lane partials along W (which gathered: 2.6 ms against 0.13 ms).
  te::Tensor X = input({1, 4, 1, 40, 16}, f32, "X");
  NDArray x = random_array({1, 4, 1, 40, 16}, f32, 9);
  te::Tensor M = max(squeeze(layout_transform(X, "NCHW16c", "NCHW"), {2}), {-1}, false);
  NDArray want = reference({1, 64}, f32, [&](const Shape& i) {
    double m = -1e30;
    for (int64_t w = 0; w < 40; ++w) m = std::max(m, at(x, {0, i[1] / 16, 0, w, i[1] % 16}));
    return m;
  });
  check({X}, {M}, {x}, {want}, schedule_reduce);
  te::Schedule s = schedule_reduce({M}, Target("llvm -mcpu=skylake-avx512"));
  const std::string tir = tir::to_string(lower(s, {X, M}, "f"));
  EXPECT_EQ(tir.find(".partial"), std::string::npos) << tir;
  EXPECT_EQ(tir.find(", 16, 16)"), std::string::npos) << tir;  // no stride-16 gather
  EXPECT_NE(tir.find("X[ramp("), std::string::npos) << tir;
}

TEST(TopiReduction, LongRowsKeepFourVectorsOfPartials) {
  // A row of 600 (at least 32 vectors of 16): 64 lanes of partials, four independent
  // accumulator vectors with AVX-512 (Whisper's 1500-wide softmax rows: 15% faster than one);
  // a row of 200 keeps one vector of 16.
  for (int64_t L : {600, 200}) {
    SCOPED_TRACE(L);
    te::Tensor X = input({3, L}, f32, "X");
    NDArray x = random_array({3, L}, f32, 12);
    te::Tensor S = sum(X, {-1}, false);
    check({X}, {S}, {x}, {naive_reduce(x, {1}, false, Kind::kSum, f32)}, schedule_reduce,
          {1e-4, 1e-5});
    te::Schedule s = schedule_reduce({S}, Target("llvm -mcpu=skylake-avx512"));
    const std::string tir = tir::to_string(lower(s, {X, S}, "f"));
    EXPECT_NE(tir.find(L == 600 ? "ramp(0, 1, 64)" : "ramp(0, 1, 16)"), std::string::npos) << tir;
  }
}

TEST(TopiReduction, SeveralAxesWithTheLastReduceInLanes) {
  // Conv-TasNet's global layer norm (mean over channels and time of [1, 256, 1999]: 0.42 ms
  // as one scalar chain, 0.03 ms in lanes) and a blocked tensor reduced over its channels
  // ([N, C/16, H, W, 16] over axes 1-4: the rows of 16 lanes are whole vectors): the partial
  // stage reduces the other axes too, its lanes along the contiguous last one.
  for (const Spec& sp : std::vector<Spec>{{{2, 7, 101}, {1, 2}, true},
                                          {{3, 9, 40}, {0, 2}, false},
                                          {{1, 3, 5, 2, 16}, {1, 2, 3, 4}, true},
                                          {{2, 5, 6, 48}, {-1, 1}, false}}) {
    SCOPED_TRACE(::testing::PrintToString(sp.shape));
    te::Tensor X = input(sp.shape, f32, "X");
    NDArray x = random_array(sp.shape, f32, 21, 0.5, 1.5);
    te::Tensor S = sum(X, sp.axes, sp.keepdims);
    te::Tensor M = max(X, sp.axes, sp.keepdims);
    check({X}, {S, M}, {x},
          {naive_reduce(x, sp.axes, sp.keepdims, Kind::kSum, f32),
           naive_reduce(x, sp.axes, sp.keepdims, Kind::kMax, f32)},
          schedule_reduce, {1e-4, 1e-5});
    te::Schedule s = schedule_reduce({S}, Target("llvm -mcpu=skylake-avx512"));
    const std::string tir = tir::to_string(lower(s, {X, S}, "f"));
    EXPECT_NE(tir.find(".partial[ramp(0, 1, 16)]"), std::string::npos) << tir;
    EXPECT_NE(tir.find("X[ramp("), std::string::npos) << tir;
  }
}

TEST(TopiReduction, RowsOfAVectorOrMoreCombineTheirLanesInATree) {
  // Rows of 16 and more reduce in lane partials whose lanes the final stage combines in a tree
  // (no chain of 16 dependent steps per row); a last block that L does not fill is shifted
  // inwards to end at L, the lanes the block before read giving the identity (a max of
  // negative numbers would otherwise see a masked lane's 0; a sum would count them twice).
  for (int64_t L : {16, 21, 47, 515}) {
    SCOPED_TRACE(L);
    te::Tensor X = input({6, L}, f32, "X");
    NDArray x = random_array({6, L}, f32, 25, -3, -1);
    te::Tensor S = sum(X, {1}, false), M = max(X, {1}, true), N = min(X, {1}, false);
    check(
        {X}, {S, M, N}, {x},
        {naive_reduce(x, {1}, false, Kind::kSum, f32), naive_reduce(x, {1}, true, Kind::kMax, f32),
         naive_reduce(x, {1}, false, Kind::kMin, f32)},
        schedule_reduce, {1e-5, 1e-5});
    te::Schedule s = schedule_reduce({M}, Target("llvm -mcpu=skylake-avx512"));
    const std::string tir = tir::to_string(lower(s, {X, M}, "f"));
    EXPECT_NE(tir.find("kiln.vector_slice"), std::string::npos) << tir;
    EXPECT_EQ(tir.find(" if "), std::string::npos) << tir;  // whole vectors, none masked
  }
}

TEST(TopiReduction, IntegerRowsReduceInLanesToo) {
  // Integer sums, maxima and minima do not depend on the order, so they take the lane
  // partials as floats do (a sort's ranks: comparisons counted as int64 over rows of 256).
  for (DataType t : {i32, i64}) {
    SCOPED_TRACE(t);
    te::Tensor X = input({5, 100}, t, "X");
    NDArray x = random_array({5, 100}, t, 23, -50, 50);
    te::Tensor S = sum(X, {1}, false), M = max(X, {1}, true);
    check({X}, {S, M}, {x},
          {naive_reduce(x, {1}, false, Kind::kSum, t), naive_reduce(x, {1}, true, Kind::kMax, t)},
          schedule_reduce);
    te::Schedule s = schedule_reduce({S}, Target("llvm -mcpu=skylake-avx512"));
    const std::string tir = tir::to_string(lower(s, {X, S}, "f"));
    EXPECT_NE(tir.find(".partial[ramp(0, 1, 16)]"), std::string::npos) << tir;
  }
}

TEST(TopiReduction, IntegersWithTies) {
  // A small integer range makes ties frequent: argmax/argmin must return the first index.
  uint32_t seed = 50;
  for (const Spec& sp :
       std::vector<Spec>{{{5, 17}, {1}, false}, {{6, 4, 3}, {0, 2}, true}, {{9, 33}, {0}, false}})
    check_all(sp, i32, seed++, -2, 2);
}

TEST(TopiReduction, ArgmaxInt64AndOutputs) {
  te::Tensor X = input({4, 9}, f32, "X");
  NDArray x = random_array({4, 9}, f32, 77);
  te::Tensor A = argmax(X, {-1}, false, i64);
  EXPECT_EQ(A->dtype, i64);
  EXPECT_EQ(A.op()->tag, "comm_reduce_idx,argmax");
  check({X}, {A}, {x}, {naive_reduce(x, {1}, false, Kind::kArgMax, i64)}, schedule_reduce);
}

TEST(TopiReduction, ShapesAndErrors) {
  te::Tensor X = input({2, 3, 4}, f32, "X");
  EXPECT_EQ(shape_of(sum(X, {1}, true)), (Shape{2, 1, 4}));
  EXPECT_EQ(shape_of(sum(X, {-1, 0})), (Shape{3}));
  EXPECT_EQ(error_of([&] { sum(X, {3}); }),
            "sum: axis 3 is out of range for a tensor of rank 3 (shape [2, 3, 4])");
  EXPECT_EQ(error_of([&] { max(X, {1, -2}); }), "max: axis -2 is listed twice (shape [2, 3, 4])");
  EXPECT_EQ(error_of([&] { argmax(X, {0}, false, DataType::Float(32)); }),
            "argmax: index dtype must be int32 or int64, got float32");
}

TEST(TopiReduction, CumSumAlongEachAxisExclusiveAndReversed) {
  // The axis first (rows after it vectorized), in the middle and last (a scalar chain per row),
  // float and integer types; the 48 x 40 x 6 case runs its rows on the thread pool.
  struct Case {
    Shape shape;
    int axis;
    DataType t;
  };
  uint32_t seed = 90;
  for (const Case& c : std::vector<Case>{{{9, 70}, 0, f32},
                                         {{3, 11, 5}, 1, f32},
                                         {{4, 33}, -1, i64},
                                         {{48, 40, 6}, 1, DataType::Float(64)},
                                         {{17}, 0, i32}}) {
    const int r = static_cast<int>(c.shape.size());
    const int ax = c.axis < 0 ? c.axis + r : c.axis;
    te::Tensor X = input(c.shape, c.t, "X");
    NDArray x = random_array(c.shape, c.t, seed++, -4, 4);
    for (int mode = 0; mode < 4; ++mode) {
      const bool exclusive = (mode & 1) != 0, reverse = (mode & 2) != 0;
      SCOPED_TRACE(::testing::Message()
                   << runtime::shape_str(c.shape) << " axis " << c.axis << " " << c.t
                   << (exclusive ? " exclusive" : "") << (reverse ? " reverse" : ""));
      te::Tensor Y = cumsum(X, c.axis, exclusive, reverse);
      te::Tensor Z = cumsum_by_sum(X, c.axis, exclusive, reverse);  // what a GPU runs
      EXPECT_EQ(shape_of(Y), c.shape);
      EXPECT_EQ(shape_of(Z), c.shape);
      NDArray want = reference(c.shape, c.t, [&](const Shape& i) {
        double acc = 0;
        Shape j = i;
        for (int64_t k = 0; k < c.shape[ax]; ++k) {
          const bool in =
              reverse ? (exclusive ? k > i[ax] : k >= i[ax]) : (exclusive ? k < i[ax] : k <= i[ax]);
          j[ax] = k;
          if (in) acc += at(x, j);
        }
        return acc;
      });
      check({X}, {Y}, {x}, {want},
            [](const std::vector<te::Tensor>& o, const Target& t) { return auto_schedule(o, t); },
            {1e-5, 1e-5});
      check({X}, {Z}, {x}, {want}, schedule_reduce, {1e-5, 1e-5});
    }
  }
  te::Tensor S = input({}, f32, "S");
  EXPECT_EQ(error_of([&] { cumsum(S, 0); }), "cumsum: the input must have rank >= 1, got a scalar");
  te::Tensor B = input({3, 4}, DataType::Bool(), "B");
  EXPECT_EQ(error_of([&] { cumsum(B, 0); }), "cumsum: element type bool is not supported");
  te::Tensor X = input({3, 4}, f32, "X");
  EXPECT_EQ(error_of([&] { cumsum(X, 2); }),
            "cumsum: axis 2 is out of range for a tensor of rank 2 (shape [3, 4])");
}

}  // namespace
}  // namespace kiln::topi::testing
