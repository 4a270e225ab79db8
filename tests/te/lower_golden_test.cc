// Golden lowered IR for the paper's Figure 5 matrix product and other schedules: the loop nests
// that te produces (before tir passes) and the final loop program (after the pipeline).
#include <gtest/gtest.h>

#include "common/golden.h"
#include "kiln/ir/printer.h"
#include "kiln/tir/lower.h"

namespace kiln::te {
namespace {

#define EXPECT_GOLDEN(name, text) EXPECT_TRUE(::kiln::testing::check_golden(__FILE__, name, text))

struct MatMul {
  Tensor A = placeholder({1024, 1024}, DataType::Float(32), "A");
  Tensor B = placeholder({1024, 1024}, DataType::Float(32), "B");
  IterVar k = reduce_axis({0, 1024}, "k");
  // The paper's C[y][x] = sum_k A[k][y] * B[k][x].
  Tensor C = compute(
      {1024, 1024}, [&](Var y, Var x) { return sum(A(k, y) * B(k, x), {k}); }, "C");
};

std::string nests(const Schedule& s, const std::vector<Tensor>& args) {
  tir::LowerOptions opt;
  opt.nests_only = true;
  return tir::to_string(tir::lower(s, args, "f", opt));
}

TEST(LowerGolden, Figure5Plain) {
  MatMul mm;
  auto s = create_schedule({mm.C});
  EXPECT_GOLDEN("figure5_plain_nests", nests(s, {mm.A, mm.B, mm.C}));
  EXPECT_GOLDEN("figure5_plain", tir::to_string(lower(s, {mm.A, mm.B, mm.C}, "matmul")));
}

/// The paper's tiling: yo, xo, ko, yi, xi, ki = s[C].tile(y, x, k, 8, 8, 8); returns (yo, ko).
std::pair<IterVar, IterVar> tile_figure5(Schedule& s, const MatMul& mm) {
  auto [yo, xo, yi, xi] = s[mm.C].tile(mm.C->axis[0], mm.C->axis[1], 8, 8);
  auto [ko, ki] = s[mm.C].split(mm.k, 8);
  s[mm.C].reorder({yo, xo, ko, yi, xi, ki});
  return {yo, ko};
}

TEST(LowerGolden, Figure5Tiled) {
  MatMul mm;
  auto s = create_schedule({mm.C});
  tile_figure5(s, mm);
  EXPECT_GOLDEN("figure5_tiled_nests", nests(s, {mm.A, mm.B, mm.C}));
  EXPECT_GOLDEN("figure5_tiled", tir::to_string(lower(s, {mm.A, mm.B, mm.C}, "matmul")));
}

TEST(LowerGolden, CacheReadWriteComputeAt) {
  MatMul mm;
  auto s = create_schedule({mm.C});
  auto AL = s.cache_read(mm.A, "local", {mm.C});
  auto CL = s.cache_write(mm.C, "local");
  auto [yo, xo, yi, xi] = s[mm.C].tile(s[mm.C].op_axis()[0], s[mm.C].op_axis()[1], 8, 16);
  s[CL].compute_at(s[mm.C], xo);
  auto [ko, ki] = s[CL].split(mm.k, 8);
  s[AL].compute_at(s[CL], ko);
  s[mm.C].vectorize(xi);
  s[mm.C].parallel(yo);
  EXPECT_GOLDEN("cache_compute_at_nests", nests(s, {mm.A, mm.B, mm.C}));
  EXPECT_GOLDEN("cache_compute_at", tir::to_string(lower(s, {mm.A, mm.B, mm.C}, "matmul")));
}

TEST(LowerGolden, NonDivisibleSplitInlineUnroll) {
  auto A = placeholder({10}, DataType::Float(32), "A");
  auto D = compute(
      {10}, [&](Var i) { return A(i) + 1.0f; }, "D");
  auto E = compute(
      {10}, [&](Var i) { return D(i) * 2.0f; }, "E");
  auto s = create_schedule({E});
  s[D].compute_inline();
  auto [o, in] = s[E].split(E->axis[0], 4);
  EXPECT_GOLDEN("nondivisible_nests", nests(s, {A, E}));
  s[E].unroll(in);
  EXPECT_GOLDEN("nondivisible_unrolled", tir::to_string(lower(s, {A, E}, "f")));
}

TEST(LowerGolden, ShiftedTailTile) {
  // Halide's ShiftInwards tail: 10 columns in tiles of 4 start at 0, 4 and min(8, 6) = 6, so
  // the last tile recomputes columns 6 and 7 instead of being guarded; the accumulator at the
  // tile keeps its constant extent and no statement carries a condition.
  auto A = placeholder({3, 5}, DataType::Float(32), "A");
  auto B = placeholder({5, 10}, DataType::Float(32), "B");
  auto k = reduce_axis({0, 5}, "k");
  auto C = compute(
      {3, 10}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); }, "C");
  auto s = create_schedule({C});
  auto CL = s.cache_write(C, "local");
  auto [jo, ji] = s[C].split(s[C].op_axis()[1], 4, /*shift_tail=*/true);
  s[CL].compute_at(s[C], jo);
  EXPECT_GOLDEN("shifted_tail_nests", nests(s, {A, B, C}));
}

TEST(LowerGolden, ShiftedTailInsideAReductionIsRefused) {
  // The overlap of a shifted tile would be accumulated twice if the tile loop ran inside the
  // reduction (after the accumulator's init).
  auto A = placeholder({3, 10}, DataType::Float(32), "A");
  auto k = reduce_axis({0, 3}, "k");
  auto C = compute(
      {10}, [&](Var j) { return sum(A(k, j), {k}); }, "C");
  auto s = create_schedule({C});
  auto [jo, ji] = s[C].split(C->axis[0], 4, /*shift_tail=*/true);
  s[C].reorder({k, jo, ji});
  try {
    tir::lower(s, {A, C}, "f");
    ADD_FAILURE() << "lowered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "the tile of axis 'i' is shifted inwards, but its loop 'i.outer' lies inside "
                  "the reduction loop 'k'"),
              std::string::npos)
        << "got: " << e.what();
  }
  auto s2 = create_schedule({C});
  try {
    s2[C].split(k, 2, /*shift_tail=*/true);
    ADD_FAILURE() << "split";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a reduction axis; a shifted tail would accumulate"),
              std::string::npos)
        << e.what();
  }
}

TEST(LowerGolden, PrefetchTheNextBlockOfAStream) {
  // Latency hiding: each iteration of ko first hints the cache line of A's next 8-row block
  // (the index runs past A's last block on the last iteration: a prefetch never faults).
  MatMul mm;
  auto s = create_schedule({mm.C});
  auto [yo, ko] = tile_figure5(s, mm);
  s[mm.C].prefetch(mm.A, ko, {(ko->var + 1) * 8, yo->var * 8}, 2);
  EXPECT_GOLDEN("prefetch_nests", nests(s, {mm.A, mm.B, mm.C}));
  EXPECT_GOLDEN("prefetch", tir::to_string(lower(s, {mm.A, mm.B, mm.C}, "matmul")));
}

TEST(LowerGolden, FuseAndTupleReduction) {
  auto A = placeholder({4, 6}, DataType::Float(32), "A");
  auto k = reduce_axis({0, 6}, "k");
  Reducer argmax(
      [](const std::vector<Expr>& a, const std::vector<Expr>& b) {
        Expr take_b = b[1] > a[1];
        return std::vector<Expr>{select(take_b, b[0], a[0]), select(take_b, b[1], a[1])};
      },
      [](const std::vector<DataType>& t) {
        return std::vector<Expr>{make_const(t[0], -1), min_value(t[1])};
      },
      "argmax");
  auto outs = compute_multi(
      {4},
      [&](const std::vector<Var>& v) {
        return argmax({k->var, A(v[0], k)}, {k});
      },
      "argmax");
  auto s = create_schedule({outs[0]});
  EXPECT_GOLDEN("argmax_nests", nests(s, {A, outs[0], outs[1]}));
}

}  // namespace
}  // namespace kiln::te

namespace kiln::te {
namespace {

TEST(LowerRegression, NonDivisibleTileKeepsConstantLocalAccumulator) {
  // A 6-row register tile over 100 rows: the main tiles' accumulator must stay a constant
  // 6 x 16 buffer (LLVM keeps it in registers), and the tail tile's gets a constant bound.
  auto A = placeholder({100, 32}, DataType::Float(32), "A");
  auto B = placeholder({32, 16}, DataType::Float(32), "B");
  auto k = reduce_axis({0, 32}, "k");
  auto C = compute(
      {100, 16}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); }, "C");
  auto s = create_schedule({C});
  auto CL = s.cache_write(C, "local");
  auto [io, jo, ii, ji] = s[C].tile(s[C].op_axis()[0], s[C].op_axis()[1], 6, 16);
  s[CL].compute_at(s[C], jo);
  std::string text = tir::to_string(lower(s, {A, B, C}, "f"));
  EXPECT_NE(text.find("allocate C.local[float32 * 96] in local"), std::string::npos) << text;
  EXPECT_NE(text.find("allocate C.local_1[float32 * 64] in local"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln::te
