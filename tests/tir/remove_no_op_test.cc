// remove_no_op: statements without effect disappear.
#include <gtest/gtest.h>

#include "kiln/tir/transform.h"
#include "tir_test_util.h"

namespace kiln::tir {
namespace {

using namespace kiln::tir::testing;  // NOLINT

const DataType f32 = DataType::Float(32);

TEST(RemoveNoOp, DropsEmptyLoopsIfsSelfStoresAndConstants) {
  Buffer A = Buffer::make("A", f32, {8});
  Var i("i"), j("j"), k("k");
  Stmt keep = A.store({i}, Expr(1.0f));
  Stmt body = SeqStmt::make({
      Evaluate::make(0),
      loop(j, 0, 4, Evaluate::make(0)),
      IfThenElse::make(i < 3, Evaluate::make(0), Evaluate::make(1)),
      A.store({i}, A.load({i})),
      loop(k, 0, 0, A.store({k}, Expr(2.0f))),
      keep,
  });
  PrimFunc f = make_func("f", {A}, loop(i, 0, 8, body));
  PrimFunc g = remove_no_op(f);
  EXPECT_TRUE(structural_equal(g->body, loop(i, 0, 8, keep))) << to_string(g);
  // Nothing to do: the same function comes back.
  EXPECT_TRUE(remove_no_op(g).same_as(g));
}

TEST(RemoveNoOp, IfWithEmptyThenKeepsNegatedElse) {
  Buffer A = Buffer::make("A", f32, {8});
  Var i("i");
  Stmt s = IfThenElse::make(i < 3, Evaluate::make(0), A.store({i}, Expr(1.0f)));
  PrimFunc g = remove_no_op(make_func("f", {A}, loop(i, 0, 8, s)));
  Stmt expected = loop(i, 0, 8, IfThenElse::make(!(i < 3), A.store({i}, Expr(1.0f))));
  EXPECT_TRUE(structural_equal(g->body, expected)) << to_string(g);
}

TEST(RemoveNoOp, WholeBodyCanVanish) {
  Buffer A = Buffer::make("A", f32, {8});
  Var i("i");
  PrimFunc g = remove_no_op(make_func("f", {A}, loop(i, 0, 8, A.store({i}, A.load({i})))));
  EXPECT_TRUE(structural_equal(g->body, Evaluate::make(0))) << to_string(g);
}

}  // namespace
}  // namespace kiln::tir
