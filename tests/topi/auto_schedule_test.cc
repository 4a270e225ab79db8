// The rule-based scheduler (auto_schedule.h) on computes that have no template: each is built
// twice, under the unscheduled te loop nest (create_schedule with no primitive: the independent
// reference) and under auto_schedule, on seeded random inputs with poisoned outputs, and the
// outputs must agree. Computes: matmul (square, odd, a single row), its transposed-B form, conv1d
// with stride and dilation, conv2d NCHW with stride / dilation / groups and a fused epilogue,
// conv3d, 2-D and 3-D pooling, sums over a middle axis, over several axes and over the innermost
// axis, argmax (a two-output tuple reduction), int32 and bool computes, odd extents (7, 13, 1)
// and an empty extent. Structural checks: a matmul's lowered loops have a parallel loop, a vector
// (ramp) store and the accumulator in local scope, also when no vector width divides the columns
// (the partial tile peeled); the tile knobs are declared with fallbacks
// sized from the target (24 accumulators of 16 lanes on AVX-512, fewer on AVX2), and a tuned
// config changes the tile.
#include "kiln/topi/auto_schedule.h"

#include <gtest/gtest.h>

#include "kiln/topi/conv2d.h"
#include "kiln/topi/conv_nd.h"
#include "kiln/topi/elemwise.h"
#include "kiln/topi/pooling.h"
#include "kiln/topi/reduction.h"
#include "kiln/topi/transform.h"
#include "topi_test_util.h"

namespace kiln::topi {
namespace {

using namespace testing;  // NOLINT
using ir::Expr;
using ir::Var;

/// Runs `outs` unscheduled and auto-scheduled on random inputs and compares every output.
void check_auto(const std::vector<te::Tensor>& inputs, const std::vector<te::Tensor>& outs,
                const Target& target = host_target(), Tolerance tol = {1e-4, 1e-4}) {
  std::vector<NDArray> data;
  uint32_t seed = 7;
  for (const te::Tensor& t : inputs) {
    DataType dt = t->dtype;
    data.push_back(dt.is_float() ? random_array(shape_of(t), dt, seed++)
                                 : random_array(shape_of(t), dt, seed++, -9, 9));
  }
  std::vector<NDArray> want = run(te::create_schedule(outs), inputs, outs, data);
  te::Schedule s = auto_schedule(outs, target);
  std::vector<te::Tensor> args = inputs;
  args.insert(args.end(), outs.begin(), outs.end());
  std::vector<NDArray> got;
  try {
    got = run(s, inputs, outs, data);
  } catch (const Error& e) {
    FAIL() << "auto_schedule's kernel failed: " << e.what() << "\n" << s.to_string();
  }
  for (size_t k = 0; k < outs.size(); ++k)
    EXPECT_TRUE(all_close(got[k], want[k], tol))
        << "output " << outs[k].name() << "\n"
        << s.to_string() << tir::to_string(lower(s, args, "f"));
}

te::Tensor matmul(const te::Tensor& A, const te::Tensor& B, bool transpose_b = false) {
  const int64_t M = shape_of(A)[0], K = shape_of(A)[1];
  const int64_t N = transpose_b ? shape_of(B)[0] : shape_of(B)[1];
  te::IterVar k = te::reduce_axis({0, static_cast<int32_t>(K)}, "k");
  return te::compute(
      {Expr(static_cast<int32_t>(M)), Expr(static_cast<int32_t>(N))},
      [&](Var i, Var j) {
        return te::sum(A(i, k) * (transpose_b ? B(j, k->var) : B(k->var, j)), {k});
      },
      "matmul", "matmul");
}

TEST(AutoSchedule, MatmulOfManySizesMatchesTheUnscheduledLoops) {
  for (auto [M, K, N] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {64, 48, 96}, {13, 7, 29}, {1, 33, 70}, {7, 1, 13}, {100, 13, 1}, {5, 300, 17}}) {
    SCOPED_TRACE(::testing::Message() << "M " << M << " K " << K << " N " << N);
    te::Tensor A = input({M, K}, f32, "A"), B = input({K, N}, f32, "B");
    check_auto({A, B}, {matmul(A, B)});
    te::Tensor Bt = input({N, K}, f32, "Bt");
    check_auto({A, Bt}, {matmul(A, Bt, true)});
  }
}

TEST(AutoSchedule, MatmulWithAnEpilogueAndTwoOutputs) {
  te::Tensor A = input({24, 40}, f32, "A"), B = input({40, 50}, f32, "B");
  te::Tensor bias = input({50}, f32, "bias");
  te::Tensor mm = matmul(A, B);
  te::Tensor biased = te::compute(
      {Expr(24), Expr(50)}, [&](Var i, Var j) { return mm(i, j) + bias(j); }, "biased",
      "elemwise,add");
  te::Tensor out = relu(biased);
  check_auto({A, B, bias}, {out});      // epilogue: the matmul accumulates at out's tile
  check_auto({A, B, bias}, {mm, out});  // both exposed: cache_write, the epilogue injective
}

te::Tensor conv1d(const te::Tensor& x, const te::Tensor& w, int64_t stride, int64_t dilation,
                  int64_t pad) {
  const Shape xs = shape_of(x), ws = shape_of(w);
  const int64_t L = (xs[2] + 2 * pad - dilation * (ws[2] - 1) - 1) / stride + 1;
  te::Tensor p = topi::pad(x, {0, 0, pad}, {0, 0, pad}, 0.0, "pad");
  te::IterVar rc = te::reduce_axis({0, static_cast<int32_t>(ws[1])}, "rc");
  te::IterVar rk = te::reduce_axis({0, static_cast<int32_t>(ws[2])}, "rk");
  return te::compute(
      {Expr(static_cast<int32_t>(xs[0])), Expr(static_cast<int32_t>(ws[0])),
       Expr(static_cast<int32_t>(L))},
      [&](Var n, Var o, Var l) {
        return te::sum(
            p(n, rc->var,
              l * static_cast<int32_t>(stride) + rk->var * static_cast<int32_t>(dilation)) *
                w(o, rc, rk),
            {rc, rk});
      },
      "conv1d", "conv1d");
}

TEST(AutoSchedule, Conv1dMatchesTheUnscheduledLoops) {
  for (auto [C, O, L, K, s, d, p] : std::vector<std::array<int64_t, 7>>{
           {8, 16, 50, 3, 1, 1, 1}, {3, 5, 13, 5, 2, 2, 2}, {1, 1, 7, 7, 1, 1, 0}}) {
    SCOPED_TRACE(::testing::Message() << "C " << C << " O " << O << " L " << L);
    te::Tensor x = input({2, C, L}, f32, "x"), w = input({O, C, K}, f32, "w");
    check_auto({x, w}, {conv1d(x, w, s, d, p)});
  }
}

TEST(AutoSchedule, Conv2dNchwWithStrideDilationGroupsAndEpilogue) {
  struct Case {
    Shape data, kernel;
    Conv2DParams p;
  };
  std::vector<Case> cases = {
      {{1, 16, 14, 14}, {32, 16, 3, 3}, {1, 1, Padding2D::all(1), 1, 1, 1}},
      {{2, 6, 13, 11}, {9, 2, 3, 2}, {2, 1, Padding2D{1, 0, 2, 1}, 1, 2, 3}},
      {{1, 12, 9, 9}, {12, 1, 3, 3}, {1, 2, Padding2D::all(2), 2, 1, 12}},
      {{1, 3, 7, 7}, {1, 3, 1, 1}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "data " << runtime::shape_str(c.data) << " " << c.p.str());
    te::Tensor x = input(c.data, f32, "x"), w = input(c.kernel, f32, "w");
    te::Tensor conv = conv2d_nchw(x, w, c.p);
    check_auto({x, w}, {conv});
    check_auto({x, w}, {relu(conv)});
  }
}

TEST(AutoSchedule, Conv3dAndPooling) {
  te::Tensor x = input({1, 4, 5, 6, 7}, f32, "x"), w = input({6, 2, 3, 3, 3}, f32, "w");
  ConvNdParams p{{1, 2, 1}, {1, 1, 2}, {1, 0, 2, 0, 1, 1}, {}, 2};
  check_auto({x, w}, {conv3d_ncdhw(x, w, p)});

  te::Tensor img = input({2, 5, 13, 17}, f32, "img");
  Pool2DAttrs pa;
  pa.kernel = {3, 3};
  pa.stride = {2, 1};
  pa.padding = {1, 1, 1, 1};
  check_auto({img}, {pool2d(img, PoolType::kMax, pa)});
  check_auto({img}, {pool2d(img, PoolType::kAvg, pa)});
  PoolNdAttrs p3;
  p3.kernel = {2, 3, 2};
  p3.stride = {1, 2, 2};
  p3.padding = {0, 1, 0, 0, 1, 1};
  p3.dilation = {1, 1, 1};
  check_auto({x}, {pool_nd(x, PoolType::kMax, p3)});
}

TEST(AutoSchedule, ReductionsOverMiddleSeveralAndInnermostAxes) {
  te::Tensor x = input({6, 13, 40}, f32, "x");
  check_auto({x}, {sum(x, {1})});
  check_auto({x}, {sum(x, {0, 2})});
  check_auto({x}, {max(x, {2}, true)});
  check_auto({x}, {sum(x, {})});  // to a scalar: the plain loop nest
  te::Tensor y = input({3, 7, 5, 33}, f32, "y");
  check_auto({y}, {mean(y, {1, 2})});
}

TEST(AutoSchedule, ArgmaxTupleReductionAndIntegerAndBoolComputes) {
  te::Tensor x = input({5, 9, 37}, f32, "x");
  check_auto({x}, {argmax(x, {1})});
  check_auto({x}, {argmin(x, {2}, true)});
  te::Tensor xi = input({7, 13, 20}, i32, "xi");
  check_auto({xi}, {sum(xi, {1})});
  te::Tensor A = input({9, 20}, i32, "A"), B = input({20, 35}, i32, "B");
  check_auto({A, B}, {matmul(A, B)});
  // A bool output computed from a reduction (no bool vectors).
  te::Tensor s = sum(x, {1});
  te::Tensor positive = te::compute(
      {Expr(5), Expr(37)}, [&](Var i, Var j) { return s(i, j) > ir::make_const(f32, 0.0); },
      "positive", "elemwise,greater");
  check_auto({x}, {positive});
}

TEST(AutoSchedule, EmptyExtentsRunNothing) {
  te::Tensor A = input({0, 8}, f32, "A"), B = input({8, 16}, f32, "B");
  check_auto({A, B}, {matmul(A, B)});
  te::Tensor A2 = input({4, 0}, f32, "A2"), B2 = input({0, 16}, f32, "B2");
  check_auto({A2, B2}, {matmul(A2, B2)});  // an empty reduction: every output is 0
  te::Tensor x = input({3, 0, 5}, f32, "x");
  check_auto({x}, {sum(x, {1})});
}

TEST(AutoSchedule, MatmulGetsParallelVectorizedTiledLoops) {
  te::Tensor A = input({128, 64}, f32, "A"), B = input({64, 256}, f32, "B");
  te::Tensor C = matmul(A, B);
  te::Schedule s = auto_schedule({C}, host_target());
  const std::string tir = tir::to_string(lower(s, {A, B, C}, "f"));
  EXPECT_NE(tir.find("parallel"), std::string::npos) << tir;
  EXPECT_NE(tir.find("ramp"), std::string::npos) << tir;
  EXPECT_NE(tir.find("local"), std::string::npos) << tir;
  EXPECT_NE(s.to_string().find("matmul.local @matmul"), std::string::npos) << s.to_string();
}

TEST(AutoSchedule, ColumnsNoVectorWidthDividesAreVectorizedWithAShiftedTail) {
  // 49 columns (a 7x7 map), 197 (ViT's tokens), 125 with 172 rows (both tails partial): no
  // width of 4 or more divides the columns. They are still vectorized, and no vector is masked:
  // the last tile of columns (and of rows) is shifted inwards to end at the edge, recomputing
  // a few outputs of the tile before it. Outputs against the unscheduled loops; 16-lane
  // vectors on an AVX-512 target.
  for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{{64, 49}, {64, 197}, {172, 125}}) {
    SCOPED_TRACE(N);
    te::Tensor A = input({M, 40}, f32, "A"), B = input({40, N}, f32, "B");
    te::Tensor C = matmul(A, B);
    check_auto({A, B}, {C});
    te::Schedule s = auto_schedule({C}, Target("llvm -mcpu=skylake-avx512"));
    const std::string tir = tir::to_string(lower(s, {A, B, C}, "f"));
    EXPECT_NE(tir.find("ramp(0, 1, 16)"), std::string::npos) << tir;
    EXPECT_NE(tir.find("min("), std::string::npos) << tir;  // the shifted tile's start
    EXPECT_EQ(tir.find(" if "), std::string::npos) << tir;  // no masked load or store
    EXPECT_EQ(tir.find("if ("), std::string::npos) << tir;  // no guard
  }
}

TEST(AutoSchedule, FallbackTileIsSizedFromTheTarget) {
  te::Tensor A = input({128, 64}, f32, "A"), B = input({64, 256}, f32, "B");
  te::Tensor C = matmul(A, B);
  autotune::Config avx512 = autotune::Config::fallback();
  auto_schedule({C}, Target("llvm -mcpu=skylake-avx512"), avx512);
  // 6 rows of 4 vectors of 16 floats: 24 accumulators of AVX-512's 32 registers.
  EXPECT_EQ(avx512.knob("tile_y"), 6);
  EXPECT_EQ(avx512.knob("tile_x"), 4);
  autotune::Config avx2 = autotune::Config::fallback();
  auto_schedule({C}, Target("llvm -mcpu=haswell"), avx2);
  // AVX2's 16 registers: rows x vectors + one row of operands + a broadcast within 16.
  const int64_t acc = avx2.knob("tile_y") * avx2.knob("tile_x");
  EXPECT_LE(acc + avx2.knob("tile_x") + 1, 16) << avx2.str();
  EXPECT_GE(acc, 8) << avx2.str();
  for (const char* knob : {"tile_x", "tile_y", "tile_k", "unroll_k"})
    EXPECT_GE(avx2.space().find(knob), 0) << knob;
}

TEST(AutoSchedule, EveryPointOfASmallSpaceIsCorrect) {
  te::Tensor A = input({13, 9}, f32, "A"), B = input({9, 37}, f32, "B");
  te::Tensor C = matmul(A, B);
  autotune::Config def = autotune::Config::define();
  auto_schedule({C}, host_target(), def);
  const autotune::ConfigSpace space = def.space();
  ASSERT_GT(space.size(), 10u);
  std::vector<NDArray> data = {random_array({13, 9}, f32, 1), random_array({9, 37}, f32, 2)};
  std::vector<NDArray> want = run(te::create_schedule({C}), {A, B}, {C}, data);
  for (uint64_t i = 0; i < space.size(); i += std::max<uint64_t>(1, space.size() / 12)) {
    autotune::Config cfg = space.get(i);
    SCOPED_TRACE(cfg.str());
    te::Schedule s = auto_schedule({C}, host_target(), cfg);
    EXPECT_TRUE(all_close(run(s, {A, B}, {C}, data)[0], want[0], {1e-4, 1e-4}));
  }
}

TEST(AutoSchedule, NoOutputsIsAUserError) {
  EXPECT_NE(error_of([] { auto_schedule({}, host_target()); }).find("auto_schedule: no output"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::topi
