// loop_partition: guards from non-divisible splits leave the main loop.
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

}  // namespace
}  // namespace kiln::tir
