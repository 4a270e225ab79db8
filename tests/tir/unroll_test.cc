// unroll: unrolled loops become copies of their body.
#include <gtest/gtest.h>

#include "common/golden.h"
#include "kiln/tir/transform.h"
#include "kiln/tir/verify.h"
#include "tir_interp.h"
#include "tir_test_util.h"

namespace kiln::tir {
namespace {

using namespace kiln::tir::testing;  // NOLINT

const DataType f32 = DataType::Float(32);

TEST(Unroll, ConstantLoopBecomesCopies) {
  Buffer A = Buffer::make("A", f32, {4}), C = Buffer::make("C", f32, {4});
  Var i("i");
  PrimFunc f = make_func("u", {A, C},
                         loop(i, 0, 3, C.store({i + 1}, A.load({i}) * 2.0f), ForKind::kUnrolled));
  PrimFunc g = unroll(f);
  Stmt expected = SeqStmt::make({C.store({Expr(1)}, A.load({Expr(0)}) * 2.0f),
                                 C.store({Expr(2)}, A.load({Expr(1)}) * 2.0f),
                                 C.store({Expr(3)}, A.load({Expr(2)}) * 2.0f)});
  EXPECT_TRUE(structural_equal(g->body, expected)) << to_string(g);
  KILN_EXPECT_GOLDEN("unroll_basic", to_string(g));
}

TEST(Unroll, InnerLoopVarsAreRenamedPerCopy) {
  Buffer C = Buffer::make("C", f32, {2, 4});
  Var i("i"), j("j");
  PrimFunc f = make_func(
      "u", {C}, loop(i, 0, 2, loop(j, 0, 4, C.store({i, j}, Expr(1.0f))), ForKind::kUnrolled));
  PrimFunc g = unroll(f);
  verify(g, "unroll");  // no variable bound twice
  const SeqStmt* s = g->body.as<SeqStmt>();
  ASSERT_TRUE(s && s->seq.size() == 2) << to_string(g);
  EXPECT_FALSE(s->seq[0].as<For>()->loop_var.same_as(s->seq[1].as<For>()->loop_var));
  std::vector<double> c(8, 0);
  EXPECT_EQ(run_func(g, {c})[0], std::vector<double>(8, 1.0));
}

TEST(Unroll, TooLongOrSymbolicBecomesSerialAndAutoUnrollIsOptIn) {
  Buffer C = Buffer::make("C", f32, {100});
  Var i("i");
  PrimFunc f = make_func("u", {C}, loop(i, 0, 100, C.store({i}, Expr(1.0f)), ForKind::kUnrolled));
  EXPECT_EQ(unroll(f)->body.as<For>()->for_kind, ForKind::kSerial);
  PrimFunc s = make_func("s", {C}, loop(i, 0, 4, C.store({i}, Expr(1.0f))));
  EXPECT_TRUE(unroll(s).same_as(s));
  UnrollOptions opt;
  opt.auto_max_step = 4;
  EXPECT_TRUE(unroll(s, opt)->body.as<SeqStmt>()) << to_string(unroll(s, opt));
}

}  // namespace
}  // namespace kiln::tir
