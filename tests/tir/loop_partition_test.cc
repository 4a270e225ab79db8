// loop_partition: guards from non-divisible splits leave the main loop; likely conditions of
// if_then_else/select expressions (padding) leave the interior of the loop range. Every case
// runs through the tir interpreter before and after the pass (out-of-bounds reads throw, so a
// dropped check is caught).
#include <gtest/gtest.h>

#include <random>

#include "common/golden.h"
#include "kiln/tir/transform.h"
#include "kiln/tir/verify.h"
#include "tir_interp.h"
#include "tir_test_util.h"

namespace kiln::tir {
namespace {

using namespace kiln::tir::testing;  // NOLINT

const DataType f32 = DataType::Float(32);

bool has_call(const Stmt& s, const std::string& name) {
  bool found = false;
  post_order_visit(s, [&](const IRNode* n) {
    if (n->kind == NodeKind::Call) found |= static_cast<const Call*>(n)->name == name;
  });
  return found;
}
int count_ifs(const Stmt& s) {
  int n = 0;
  post_order_visit(s, [&](const IRNode* x) { n += x->kind == NodeKind::IfThenElse; });
  return n;
}

/// for i in 0..10: for j in 0..4: if likely(i*4 + j < n): C[i*4 + j] = A[i*4 + j] + 1
PrimFunc split_func(int n) {
  Buffer A = Buffer::make("A", f32, {n}), C = Buffer::make("C", f32, {n});
  Var i("i"), j("j");
  Expr idx = i * 4 + j;
  Stmt body =
      loop(i, 0, 10,
           loop(j, 0, 4, IfThenElse::make(likely(idx < n), C.store({idx}, A.load({idx}) + 1.0f))));
  return make_func("split", {A, C}, body);
}

void expect_same(const PrimFunc& f, const PrimFunc& g, int n) {
  std::vector<double> a(n), c(n, -7);
  for (int k = 0; k < n; ++k) a[k] = k * 0.5 - 3;
  EXPECT_EQ(run_func(f, {a, c}), run_func(g, {a, c}));
}

TEST(LoopPartition, NonDivisibleSplitGetsGuardFreeMainLoop) {
  PrimFunc f = split_func(37);
  PrimFunc g = loop_partition(f);
  verify(g, "loop_partition");
  EXPECT_FALSE(has_call(g->body, builtin::kLikely));
  // Main part i in [0, 9) has no guard; the tail i = 9 is split again on j, and j >= 1 is
  // provably false, so no guard remains at all.
  const SeqStmt* seq = g->body.as<SeqStmt>();
  ASSERT_TRUE(seq) << to_string(g);
  const For* main = seq->seq[0].as<For>();
  ASSERT_TRUE(main);
  EXPECT_TRUE(is_const_int(main->extent, 9));
  EXPECT_EQ(count_ifs(main->body), 0) << to_string(g);
  KILN_EXPECT_GOLDEN("loop_partition_split", to_string(g));
  expect_same(f, g, 37);
}

TEST(LoopPartition, DivisibleSplitDropsTheGuard) {
  PrimFunc f = split_func(40);
  PrimFunc g = loop_partition(f);
  EXPECT_EQ(count_ifs(g->body), 0) << to_string(g);
  const For* outer = g->body.as<For>();
  ASSERT_TRUE(outer) << to_string(g);
  EXPECT_TRUE(is_const_int(outer->extent, 10));
  expect_same(f, g, 40);
}

TEST(LoopPartition, GuardOnLowerBoundSplitsAtTheFront) {
  // if likely(i >= 3): C[i] = A[i] over i in [0, 10): the proven part is a suffix.
  Buffer A = Buffer::make("A", f32, {10}), C = Buffer::make("C", f32, {10});
  Var i("i");
  PrimFunc f =
      make_func("suffix", {A, C},
                loop(i, 0, 10, IfThenElse::make(likely(i >= 3), C.store({i}, A.load({i})))));
  PrimFunc g = loop_partition(f);
  verify(g, "loop_partition");
  KILN_EXPECT_GOLDEN("loop_partition_suffix", to_string(g));
  EXPECT_FALSE(has_call(g->body, builtin::kLikely));
  expect_same(f, g, 10);
}

TEST(LoopPartition, UnprovableGuardIsKeptWithoutLikely) {
  Buffer A = Buffer::make("A", f32, {10}), C = Buffer::make("C", f32, {10});
  Var i("i");
  Expr cond = A.load({i}) > 0.0f;  // data-dependent
  PrimFunc f = make_func("data", {A, C},
                         loop(i, 0, 10, IfThenElse::make(likely(cond), C.store({i}, A.load({i})))));
  PrimFunc g = loop_partition(f);
  Stmt expected = loop(i, 0, 10, IfThenElse::make(cond, C.store({i}, A.load({i}))));
  EXPECT_TRUE(structural_equal(g->body, expected)) << to_string(g);
}

int count_calls(const Stmt& s, const std::string& name) {
  int n = 0;
  post_order_visit(s, [&](const IRNode* x) {
    if (x->kind == NodeKind::Call) n += static_cast<const Call*>(x)->name == name;
  });
  return n;
}

/// Runs f and g on the same random buffers (sizes in param order) and expects equal results.
void expect_same_random(const PrimFunc& f, const PrimFunc& g, const std::vector<int>& sizes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<std::vector<double>> bufs;
  for (int n : sizes) {
    std::vector<double> b(n);
    for (double& x : b) x = d(rng) * 0.25;
    bufs.push_back(b);
  }
  auto want = run_func(f, bufs);
  auto got = run_func(g, bufs);
  EXPECT_EQ(want, got);
}

/// A 1-D padded stencil: for i in [0, n): for k in [0, 3) (kind kk):
///   C[i] = C[i] + if_then_else(likely(0 <= i + k - 1 && i + k - 1 < n), A[i + k - 1], 0) * W[k]
PrimFunc stencil_1d(int n, ForKind kk) {
  Buffer A = Buffer::make("A", f32, {n}), W = Buffer::make("W", f32, {3});
  Buffer C = Buffer::make("C", f32, {n});
  Var i("i"), k("k");
  Expr x = i + k - 1;
  Expr v = if_then_else(likely(x >= 0 && x < n), A.load({x}), make_zero(f32));
  Stmt body = loop(i, 0, n, loop(k, 0, 3, C.store({i}, C.load({i}) + v * W.load({k})), kk));
  return make_func("stencil", {A, W, C}, body);
}

TEST(LoopPartition, PaddedStencil1DHasCheckFreeInterior) {
  for (ForKind kk : {ForKind::kSerial, ForKind::kUnrolled}) {
    PrimFunc f = stencil_1d(10, kk);
    PrimFunc g = loop_partition(f);
    verify(g, "loop_partition");
    EXPECT_FALSE(has_call(g->body, builtin::kLikely));
    // i in [0, 1) (left border), [1, 9) (interior, no check), [9, 10) (right border).
    const SeqStmt* seq = g->body.as<SeqStmt>();
    ASSERT_TRUE(seq && seq->seq.size() == 3) << to_string(g);
    const For* mid = seq->seq[1].as<For>();
    ASSERT_TRUE(mid);
    EXPECT_TRUE(is_const_int(mid->min, 1) && is_const_int(mid->extent, 8)) << to_string(g);
    EXPECT_EQ(count_calls(mid->body, builtin::kIfThenElse), 0) << to_string(g);
    // The borders keep only the side of the check that can fail there.
    EXPECT_EQ(count_calls(seq->seq[0], builtin::kIfThenElse), 1);
    EXPECT_EQ(count_calls(seq->seq[2], builtin::kIfThenElse), 1);
    if (kk == ForKind::kSerial) {
      KILN_EXPECT_GOLDEN("loop_partition_stencil_1d", to_string(g));
    }
    expect_same_random(f, g, {10, 3, 10});
  }
}

/// A tiled 1-D padded stencil with an accumulator and an epilogue, like a depthwise
/// convolution's output tile: for t in [0, 4) (kind tk):
///   for j: Acc[j] = 0
///   for j, k: Acc[j] += if_then_else(likely(0 <= t*4 + j + k - 1 < 16), A[...], 0) * W[k]
///   for j: C[t*4 + j] = Acc[j] * Acc[j] + 1
PrimFunc tiled_stencil(ForKind tk) {
  Buffer A = Buffer::make("A", f32, {16}), W = Buffer::make("W", f32, {3});
  Buffer C = Buffer::make("C", f32, {16}), Acc = Buffer::make("Acc", f32, {4});
  Var t("t"), j("j"), j2("j2"), j3("j3"), k("k");
  Expr x = t * 4 + j2 + k - 1;
  Expr v = if_then_else(likely(x >= 0 && x < 16), A.load({x}), make_zero(f32));
  Stmt init = loop(j, 0, 4, Acc.store({j}, make_zero(f32)));
  Stmt acc = loop(j2, 0, 4, loop(k, 0, 3, Acc.store({j2}, Acc.load({j2}) + v * W.load({k}))));
  Stmt epilogue = loop(j3, 0, 4, C.store({t * 4 + j3}, Acc.load({j3}) * Acc.load({j3}) + 1.0f));
  return make_func("tiled", {A, W, C, Acc},
                   loop(t, 0, 4, SeqStmt::make({init, acc, epilogue}), tk));
}

TEST(LoopPartition, SharedStatementsAreNotCopiedIntoTheParts) {
  // The tile loop is unswitched, not split: the checked accumulation has two copies (interior
  // tiles 1 and 2 without checks, the border tiles with them), the init and the epilogue one.
  PrimFunc f = tiled_stencil(ForKind::kSerial);
  PrimFunc g = loop_partition(f);
  verify(g, "loop_partition");
  EXPECT_FALSE(has_call(g->body, builtin::kLikely));
  KILN_EXPECT_GOLDEN("loop_partition_unswitch", to_string(g));
  const For* t = g->body.as<For>();
  ASSERT_TRUE(t && is_const_int(t->extent, 4)) << to_string(g);
  const SeqStmt* seq = t->body.as<SeqStmt>();
  ASSERT_TRUE(seq && seq->seq.size() == 3) << to_string(g);
  const IfThenElse* u = seq->seq[1].as<IfThenElse>();
  ASSERT_TRUE(u && u->else_case.defined()) << to_string(g);
  EXPECT_EQ(count_calls(u->then_case, builtin::kIfThenElse), 0) << to_string(g);
  EXPECT_GT(count_calls(u->else_case, builtin::kIfThenElse), 0) << to_string(g);
  expect_same_random(f, g, {16, 3, 16, 4});
  // An unrolled tile loop is split as before (its copies are unrolled anyway).
  PrimFunc fu = tiled_stencil(ForKind::kUnrolled);
  PrimFunc gu = loop_partition(fu);
  verify(gu, "loop_partition");
  const SeqStmt* parts = gu->body.as<SeqStmt>();
  ASSERT_TRUE(parts && parts->seq.size() == 3) << to_string(gu);
  expect_same_random(fu, gu, {16, 3, 16, 4});
}

/// A 2-D padded 3x3 convolution of an H x W image (padding 1, stride s):
/// for y, x in the output: for kh, kw (kw unrolled):
///   C[y, x] += if_then_else(likely(in bounds(y*s + kh - 1, x*s + kw - 1)), A[...], 0) * K[kh, kw]
PrimFunc conv_2d(int H, int W, int s) {
  int OH = (H + 2 - 3) / s + 1, OW = (W + 2 - 3) / s + 1;
  Buffer A = Buffer::make("A", f32, {H, W}), K = Buffer::make("K", f32, {3, 3});
  Buffer C = Buffer::make("C", f32, {OH, OW});
  Var y("y"), x("x"), kh("kh"), kw("kw");
  Expr h = y * s + kh - 1, w = x * s + kw - 1;
  Expr in = h >= 0 && h < H && w >= 0 && w < W;
  Expr v = if_then_else(likely(in), A.load({h, w}), make_zero(f32)) * K.load({kh, kw});
  Stmt st = C.store({y, x}, C.load({y, x}) + v);
  Stmt body =
      loop(y, 0, OH, loop(x, 0, OW, loop(kh, 0, 3, loop(kw, 0, 3, st, ForKind::kUnrolled))));
  return make_func("conv", {A, K, C}, body);
}

/// The loop nest of the interior: the middle part of the middle part.
const For* interior(const PrimFunc& g) {
  const SeqStmt* rows = g->body.as<SeqStmt>();
  if (!rows || rows->seq.size() != 3) return nullptr;
  const For* y = rows->seq[1].as<For>();
  if (!y) return nullptr;
  const SeqStmt* cols = y->body.as<SeqStmt>();
  if (!cols || cols->seq.size() != 3) return nullptr;
  return cols->seq[1].as<For>();
}

TEST(LoopPartition, Padded3x3Stride1PartitionsRowsAndColumns) {
  PrimFunc f = conv_2d(9, 8, 1);
  PrimFunc g = loop_partition(f);
  verify(g, "loop_partition");
  const For* mid = interior(g);
  ASSERT_TRUE(mid) << to_string(g);
  EXPECT_TRUE(is_const_int(mid->min, 1) && is_const_int(mid->extent, 6)) << to_string(g);
  EXPECT_EQ(count_calls(mid->body, builtin::kIfThenElse), 0) << to_string(g);
  // Row y in [1, 8) and columns x in [1, 7): 3 x 3 parts, 8 of them with checks.
  EXPECT_EQ(count_calls(g->body, builtin::kIfThenElse), 8) << to_string(g);
  expect_same_random(f, g, {9 * 8, 9, 9 * 8});
}

TEST(LoopPartition, Padded3x3Stride2PartitionsRowsAndColumns) {
  // H = W = 8, stride 2: output 4 x 4; the bottom/right borders never read out of range, so
  // only the top/left border parts remain.
  PrimFunc f = conv_2d(8, 8, 2);
  PrimFunc g = loop_partition(f);
  verify(g, "loop_partition");
  KILN_EXPECT_GOLDEN("loop_partition_conv_s2", to_string(g));
  expect_same_random(f, g, {64, 9, 16});
  // Odd sizes: both borders.
  PrimFunc f2 = conv_2d(9, 11, 2);
  PrimFunc g2 = loop_partition(f2);
  verify(g2, "loop_partition");
  const For* mid = interior(g2);
  ASSERT_TRUE(mid) << to_string(g2);
  EXPECT_EQ(count_calls(mid->body, builtin::kIfThenElse), 0) << to_string(g2);
  expect_same_random(f2, g2, {99, 9, 5 * 6});
}

TEST(LoopPartition, LikelySelectIsPartitionedToo) {
  Buffer A = Buffer::make("A", f32, {12}), C = Buffer::make("C", f32, {12});
  Var i("i");
  Expr v = select(likely(i >= 2 && i < 10), A.load({i}), make_zero(f32));
  PrimFunc f = make_func("sel", {A, C}, loop(i, 0, 12, C.store({i}, v)));
  PrimFunc g = loop_partition(f);
  const SeqStmt* seq = g->body.as<SeqStmt>();
  ASSERT_TRUE(seq && seq->seq.size() == 3) << to_string(g);
  const For* mid = seq->seq[1].as<For>();
  ASSERT_TRUE(mid);
  EXPECT_TRUE(mid->body.as<Store>() && mid->body.as<Store>()->value.as<Load>()) << to_string(g);
  expect_same_random(f, g, {12, 12});
}

TEST(LoopPartition, ThresholdsOnTheLoopVarCutOneLoopPerInterval) {
  // A concat of six inputs along i: select(likely(i < o1), A, select(likely(i < o2), ...)).
  // More thresholds than kMaxConjuncts, yet every one cuts: six loops, each storing one branch.
  Buffer A = Buffer::make("A", f32, {20}), C = Buffer::make("C", f32, {20});
  Var i("i");
  const std::vector<int> offsets = {3, 4, 9, 11, 17};
  Expr v = A.load({i}) * 6.0f;
  for (size_t k = offsets.size(); k-- > 0;)
    v = select(likely(i < offsets[k]), A.load({i}) * static_cast<float>(k + 1), v);
  PrimFunc f = make_func("cat", {A, C}, loop(i, 0, 20, C.store({i}, v)));
  PrimFunc g = loop_partition(f);
  const AttrStmt* attr = g->body.as<AttrStmt>();
  ASSERT_TRUE(attr && attr->key == attr::kPragmaNoUnroll) << to_string(g);
  const SeqStmt* seq = attr->body.as<SeqStmt>();
  ASSERT_TRUE(seq && seq->seq.size() == 6) << to_string(g);
  for (const Stmt& part : seq->seq) {
    const For* loop_k = part.as<For>();
    ASSERT_TRUE(loop_k) << to_string(g);
    EXPECT_FALSE(has_call(loop_k->body, builtin::kLikely)) << to_string(g);
    EXPECT_EQ(to_string(g).find("select"), std::string::npos) << to_string(g);
  }
  expect_same_random(f, g, {20, 20});
}

TEST(LoopPartition, UnprovableExpressionConditionsAreLeftAlone) {
  Buffer A = Buffer::make("A", f32, {12}), C = Buffer::make("C", f32, {12});
  Var i("i");
  // Data-dependent, and not affine in i: no split, only the likely wrapper goes.
  for (Expr cond : {A.load({i}) > 0.0f, floormod(i, 3) >= 1}) {
    PrimFunc f = make_func(
        "keep", {A, C},
        loop(i, 0, 12, C.store({i}, if_then_else(likely(cond), A.load({i}), make_zero(f32)))));
    PrimFunc g = loop_partition(f);
    Stmt expected = loop(i, 0, 12, C.store({i}, if_then_else(cond, A.load({i}), make_zero(f32))));
    EXPECT_TRUE(structural_equal(g->body, expected)) << to_string(g);
  }
  // An affine check with no interior (the loop is too short): left alone.
  Var j("j");
  Expr x = j * 4 - 5;  // -5, -1, 3: x >= 0 holds from j = 2 on, x < 2 up to j = 1
  PrimFunc f = make_func(
      "short", {A, C},
      loop(j, 0, 3,
           C.store({j}, if_then_else(likely(x >= 0 && x < 2), A.load({x}), make_zero(f32)))));
  PrimFunc g = loop_partition(f);
  EXPECT_TRUE(g->body.as<For>()) << to_string(g);
  EXPECT_EQ(count_calls(g->body, builtin::kIfThenElse), 1);
  expect_same_random(f, g, {12, 12});
}

TEST(LoopPartition, ExpressionSplitsNestAtMostTwoDeep) {
  // Three padded dimensions: only the two outer loops are split; the innermost keeps checks.
  Buffer A = Buffer::make("A", f32, {6 * 6 * 6}), C = Buffer::make("C", f32, {6 * 6 * 6});
  Var a("a"), b("b"), c("c");
  Expr ia = a - 1, ib = b - 1, ic = c - 1;
  Expr in = ia >= 0 && ia < 4 && ib >= 0 && ib < 4 && ic >= 0 && ic < 4;
  Expr v = if_then_else(likely(in), A.load({(ia * 6 + ib) * 6 + ic}), make_zero(f32));
  PrimFunc f =
      make_func("cube", {A, C},
                loop(a, 0, 6, loop(b, 0, 6, loop(c, 0, 6, C.store({(a * 6 + b) * 6 + c}, v)))));
  PrimFunc g = loop_partition(f);
  verify(g, "loop_partition");
  const For* mid = interior(g);
  ASSERT_TRUE(mid) << to_string(g);
  EXPECT_TRUE(mid->body.as<For>()) << to_string(g);  // c is not split
  EXPECT_EQ(count_calls(mid->body, builtin::kIfThenElse), 1) << to_string(g);
  expect_same_random(f, g, {216, 216});
}

}  // namespace
}  // namespace kiln::tir
