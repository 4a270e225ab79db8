// Tensorize (te/tensor_intrin.h): a 4 × 4 float gemv intrinsic lowered to calls of extern
// micro-kernels, matched against gemm schedules. The positive case's loops are golden text
// (reset where the reduction's init goes, update inside the outer reduction loop; the body
// when the whole reduction is inside; body-or-update without a reset); every kind of mismatch
// (operation, type, extent, index pattern, reduction vs none, combiner, strides, a split that
// does not divide, a fused inner loop, a missing update) is matched against its message; a
// strided read binds a view whose stride is the step times the tensor's.
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/golden.h"
#include "kiln/ir/printer.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor_intrin.h"
#include "kiln/tir/lower.h"

namespace kiln::te {
namespace {

using ::kiln::testing::error_of;

#define EXPECT_GOLDEN(name, text) EXPECT_TRUE(::kiln::testing::check_golden(__FILE__, name, text))

const DataType kF32 = DataType::Float(32);

struct IntrinOptions {
  bool reset = true;
  bool update = true;
  std::map<std::string, std::vector<Expr>> strides;  ///< by placeholder name
};

/// C[i] = Σ_k A[k] · B[i, k] over 4 × 4, lowered to gemv4_{body,reset,update}(c, a, b,
/// b_row_stride) calls.
TensorIntrin gemv4(const IntrinOptions& o = {}) {
  Tensor A = placeholder({4}, kF32, "a");
  Tensor B = placeholder({4, 4}, kF32, "b");
  IterVar k = reduce_axis({0, 4}, "k");
  Tensor C = compute(
      {4}, [&](Var i) { return sum(A(k) * B(i, k), {k}); }, "c");
  std::map<const TensorNode*, std::vector<Expr>> strides;
  for (const auto& [name, s] : o.strides) strides[name == "a" ? A.get() : B.get()] = s;
  return decl_tensor_intrin(
      "gemv4", C,
      [&](const std::vector<IntrinBuffer>& in, const std::vector<IntrinBuffer>& out) {
        auto call = [&](const std::string& f) {
          return call_extern(
              f, {out[0].access_ptr(), in[0].access_ptr(), in[1].access_ptr(), in[1].strides[0]});
        };
        IntrinLowering l;
        l.body = call("gemv4_body");
        if (o.reset) l.reset = call_extern("gemv4_reset", {out[0].access_ptr()});
        if (o.update) l.update = call("gemv4_update");
        return l;
      },
      strides);
}

/// C[m, n] = Σ_k A[m, k] · B[n, k], 8 × 8 × 16.
struct Gemm {
  Tensor A = placeholder({8, 16}, kF32, "A");
  Tensor B = placeholder({8, 16}, kF32, "B");
  IterVar k = reduce_axis({0, 16}, "k");
  Tensor C = compute(
      {8, 8}, [&](Var m, Var n) { return sum(A(m, k) * B(n, k), {k}); }, "C");
  Schedule s = create_schedule({C});
  std::vector<Tensor> args() const { return {A, B, C}; }
};

/// Splits n and k by 4 and orders (m, no, ko, ni, ki); returns ni.
IterVar tile_gemm(Gemm& g, int64_t n_factor = 4) {
  Stage st = g.s[g.C];
  auto [no, ni] = st.split(g.C->axis[1], n_factor);
  auto [ko, ki] = st.split(g.k, 4);
  st.reorder({g.C->axis[0], no, ko, ni, ki});
  return ni;
}

std::string lowered(const Gemm& g) { return tir::to_string(tir::lower(g.s, g.args(), "f")); }

std::string nests(const Gemm& g) {
  tir::LowerOptions opt;
  opt.nests_only = true;
  return tir::to_string(tir::lower(g.s, g.args(), "f", opt));
}

TEST(Tensorize, ResetAndUpdateAroundTheOuterReduction) {
  Gemm g;
  IterVar ni = tile_gemm(g);
  g.s[g.C].tensorize(ni, gemv4());
  EXPECT_GOLDEN("tensorize_reset_update_nests", nests(g));
  EXPECT_GOLDEN("tensorize_reset_update", lowered(g));
}

TEST(Tensorize, WholeReductionInsideUsesTheBody) {
  Gemm g;
  Stage st = g.s[g.C];
  auto [no, ni] = st.split(g.C->axis[1], 4);
  // The intrinsic's reduction covers 4; the stage's reduction 16 lies wholly inside: a
  // mismatch. With k of extent 4 it matches and the body alone runs, without an init.
  Gemm g4;
  g4.A = placeholder({8, 4}, kF32, "A");
  g4.B = placeholder({8, 4}, kF32, "B");
  g4.k = reduce_axis({0, 4}, "k");
  g4.C = compute(
      {8, 8}, [&](Var m, Var n) { return sum(g4.A(m, g4.k) * g4.B(n, g4.k), {g4.k}); }, "C");
  g4.s = create_schedule({g4.C});
  auto [no4, ni4] = g4.s[g4.C].split(g4.C->axis[1], 4);
  g4.s[g4.C].tensorize(ni4, gemv4());
  EXPECT_GOLDEN("tensorize_body", lowered(g4));
  st.tensorize(ni, gemv4());
  EXPECT_EQ(error_of([&] { lowered(g); }),
            "tensorize: stage 'C' at axis 'j.inner' with intrinsic 'gemv4': extent mismatch: "
            "reduction axis 'k' has extent 16 inside the tensorized loops, the intrinsic's axis "
            "'k' has extent 4");
}

TEST(Tensorize, WithoutResetTheBodyRunsOnTheFirstIteration) {
  Gemm g;
  IterVar ni = tile_gemm(g);
  IntrinOptions o;
  o.reset = false;
  g.s[g.C].tensorize(ni, gemv4(o));
  EXPECT_GOLDEN("tensorize_no_reset_nests", nests(g));
}

TEST(Tensorize, SplitReductionNeedsAnUpdate) {
  Gemm g;
  IterVar ni = tile_gemm(g);
  IntrinOptions o;
  o.update = false;
  g.s[g.C].tensorize(ni, gemv4(o));
  EXPECT_EQ(error_of([&] { lowered(g); }),
            "tensorize: stage 'C': reduction loop 'k.outer' lies outside the tensorized axis "
            "'j.inner', so the intrinsic needs an update form, and 'gemv4' declares none");
}

TEST(Tensorize, WrongOperation) {
  Gemm g;
  g.C = compute(
      {8, 8}, [&](Var m, Var n) { return sum(g.A(m, g.k) + g.B(n, g.k), {g.k}); }, "C");
  g.s = create_schedule({g.C});
  g.s[g.C].tensorize(tile_gemm(g), gemv4());
  EXPECT_EQ(error_of([&] { lowered(g); }),
            "tensorize: stage 'C' at axis 'j.inner' with intrinsic 'gemv4': the loop nest does "
            "not compute what the intrinsic declares: operation Add where the intrinsic has Mul\n"
            "  stage:     A[i, k.outer*4 + k] + B[j.outer*4 + i_1, k.outer*4 + k]\n"
            "  intrinsic: a[k]*b[i, k]");
}

TEST(Tensorize, WrongType) {
  Gemm g;
  g.A = placeholder({8, 16}, DataType::Float(64), "A");
  g.B = placeholder({8, 16}, DataType::Float(64), "B");
  g.C = compute(
      {8, 8}, [&](Var m, Var n) { return sum(g.A(m, g.k) * g.B(n, g.k), {g.k}); }, "C");
  g.s = create_schedule({g.C});
  g.s[g.C].tensorize(tile_gemm(g), gemv4());
  const std::string msg = error_of([&] { lowered(g); });
  EXPECT_NE(msg.find("type float64 where the intrinsic has float32"), std::string::npos) << msg;
}

TEST(Tensorize, WrongExtent) {
  Gemm g;
  g.s[g.C].tensorize(tile_gemm(g, 2), gemv4());
  EXPECT_EQ(error_of([&] { lowered(g); }),
            "tensorize: stage 'C' at axis 'j.inner' with intrinsic 'gemv4': extent mismatch: "
            "data-parallel axis 'j' has extent 2 inside the tensorized loops, the intrinsic's "
            "axis 'i' has extent 4");
}

TEST(Tensorize, WrongIndexPattern) {
  // B read transposed: B[k, n] where the intrinsic reads b[i, k].
  Gemm g;
  g.B = placeholder({16, 8}, kF32, "B");
  g.C = compute(
      {8, 8}, [&](Var m, Var n) { return sum(g.A(m, g.k) * g.B(g.k, n), {g.k}); }, "C");
  g.s = create_schedule({g.C});
  g.s[g.C].tensorize(tile_gemm(g), gemv4());
  EXPECT_EQ(error_of([&] { lowered(g); }),
            "tensorize: stage 'C' at axis 'j.inner' with intrinsic 'gemv4': the loop nest does "
            "not compute what the intrinsic declares: index pattern: dimension 0 of 'B' is not "
            "the intrinsic's index (times a constant) plus an offset\n"
            "  stage:     B[k.outer*4 + k, j.outer*4 + i]\n"
            "  intrinsic: b[i, k]");
}

TEST(Tensorize, StridedReadScalesTheViewStride) {
  // B read at every other row (B[2n, k], as a convolution with stride 2 reads its input): the
  // view b's row stride is twice B's (2 · 16), and a required stride is checked against that.
  Gemm g;
  g.B = placeholder({16, 16}, kF32, "B");
  g.C = compute(
      {8, 8}, [&](Var m, Var n) { return sum(g.A(m, g.k) * g.B(n * 2, g.k), {g.k}); }, "C");
  g.s = create_schedule({g.C});
  g.s[g.C].tensorize(tile_gemm(g), gemv4());
  const std::string text = lowered(g);
  EXPECT_NE(text.find("gemv4_update(address_of(C[i*8 + j.outer*4]), address_of(A[i*16 + "
                      "k.outer*4]), address_of(B[j.outer*128 + k.outer*4]), 32)"),
            std::string::npos)
      << text;
  IntrinOptions o;
  o.strides["b"] = {Expr(16), Expr(1)};
  g.s = create_schedule({g.C});
  g.s[g.C].tensorize(tile_gemm(g), gemv4(o));
  EXPECT_EQ(error_of([&] { lowered(g); }),
            "tensorize: stage 'C' at axis 'j.inner' with intrinsic 'gemv4', operand 'b': "
            "dimension 0 needs stride 16, but tensor 'B' has stride 32 there (dimension 0)");
}

TEST(Tensorize, ReductionVersusNoReduction) {
  Gemm g;
  g.C = compute(
      {8, 8}, [&](Var m, Var n) { return g.A(m, n) * g.B(n, m); }, "C");
  g.s = create_schedule({g.C});
  auto [no, ni] = g.s[g.C].split(g.C->axis[1], 4);
  g.s[g.C].tensorize(ni, gemv4());
  EXPECT_EQ(error_of([&] { lowered(g); }),
            "tensorize: stage 'C' at axis 'j.inner' with intrinsic 'gemv4': the stage is not a "
            "reduction but the intrinsic is");
}

TEST(Tensorize, DifferentCombiner) {
  Gemm g;
  g.C = compute(
      {8, 8},
      [&](Var m, Var n) { return te::max(g.A(m, g.k) * g.B(n, g.k), std::vector<IterVar>{g.k}); },
      "C");
  g.s = create_schedule({g.C});
  g.s[g.C].tensorize(tile_gemm(g), gemv4());
  const std::string msg = error_of([&] { lowered(g); });
  EXPECT_NE(msg.find("with intrinsic 'gemv4': the stage reduces with max("), std::string::npos)
      << msg;
}

TEST(Tensorize, DifferentStrides) {
  // The intrinsic requires b to be a compact 4 × 4 block (row stride 4); B's rows are 16 apart.
  Gemm g;
  IntrinOptions o;
  o.strides["b"] = {Expr(4), Expr(1)};
  g.s[g.C].tensorize(tile_gemm(g), gemv4(o));
  EXPECT_EQ(error_of([&] { lowered(g); }),
            "tensorize: stage 'C' at axis 'j.inner' with intrinsic 'gemv4', operand 'b': "
            "dimension 0 needs stride 4, but tensor 'B' has stride 16 there (dimension 0)");
  // A compact B ([8, 4], rows 4 apart) satisfies it.
  Gemm h;
  h.A = placeholder({8, 4}, kF32, "A");
  h.B = placeholder({8, 4}, kF32, "B");
  h.k = reduce_axis({0, 4}, "k");
  h.C = compute(
      {8, 8}, [&](Var m, Var n) { return sum(h.A(m, h.k) * h.B(n, h.k), {h.k}); }, "C");
  h.s = create_schedule({h.C});
  auto [no, ni] = h.s[h.C].split(h.C->axis[1], 4);
  h.s[h.C].tensorize(ni, gemv4(o));
  EXPECT_NE(lowered(h).find("gemv4_body("), std::string::npos);
}

TEST(Tensorize, SplitThatDoesNotDivide) {
  Gemm g;
  g.C = compute(
      {8, 6}, [&](Var m, Var n) { return sum(g.A(m, g.k) * g.B(n, g.k), {g.k}); }, "C");
  g.s = create_schedule({g.C});
  g.s[g.C].tensorize(tile_gemm(g), gemv4());
  const std::string msg = error_of([&] { lowered(g); });
  EXPECT_NE(msg.find("which can run past its extent 6 (a split that does not divide the axis); "
                     "tensorize needs whole tiles"),
            std::string::npos)
      << msg;
}

TEST(Tensorize, FusedInnerLoop) {
  Gemm g;
  Stage st = g.s[g.C];
  auto [ko, ki] = st.split(g.k, 4);
  IterVar f = st.fuse(g.C->axis[0], g.C->axis[1]);
  st.reorder({ko, f, ki});
  st.tensorize(f, gemv4());
  const std::string msg = error_of([&] { lowered(g); });
  EXPECT_NE(msg.find("each loop inside must be one whole axis (or one part of a split), not fused"),
            std::string::npos)
      << msg;
}

TEST(Tensorize, PrimitiveErrors) {
  Gemm g;
  EXPECT_EQ(error_of([&] { g.s[g.C].tensorize(g.k, nullptr); }),
            "tensorize: no intrinsic given for stage 'C'");
  auto [ko, ki] = g.s[g.C].split(g.k, 4);
  EXPECT_EQ(error_of([&] { g.s[g.C].tensorize(g.k, gemv4()); }),
            "tensorize: axis 'k' is not a loop of stage 'C' (it was split or fused already, or "
            "belongs to another stage)");
  Tensor X = placeholder({4}, kF32, "x");
  Tensor Y = compute(
      {4}, [&](Var i) { return X(i) + 1.0f; }, "y");
  Tensor Z = compute(
      {4}, [&](Var i) { return Y(i) * 2.0f; }, "z");
  EXPECT_EQ(error_of([&] {
              decl_tensor_intrin("bad", Z,
                                 [](const auto&, const auto&) { return IntrinLowering{}; });
            }),
            "decl_tensor_intrin 'bad': the compute reads 'y', which is not a placeholder (declare "
            "the intrinsic over its inputs directly)");
  EXPECT_EQ(error_of([&] {
              decl_tensor_intrin("empty", Y,
                                 [](const auto&, const auto&) { return IntrinLowering{}; });
            }),
            "decl_tensor_intrin 'empty': the lowering gives no body");
}

}  // namespace
}  // namespace kiln::te
