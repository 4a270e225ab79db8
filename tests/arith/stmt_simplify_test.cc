// Unit tests of the statement simplifier: loop-variable ranges reach the expressions, trivial
// loops and decided branches disappear, If conditions hold inside their branches.
#include "test_util.h"

namespace kiln::arith::testing {
namespace {

using namespace kiln::ir;  // NOLINT

class StmtSimplify : public ::testing::Test {
 protected:
  Var buf{"A", DataType::Handle()};
  Var i{"i"}, j{"j"}, n{"n"};
  Stmt store(const Expr& index, const Expr& value) { return Store::make(buf, value, index); }
  Stmt no_op() { return Evaluate::make(Expr(0)); }
};

TEST_F(StmtSimplify, LoopRangeSimplifiesBody) {
  Stmt body = store(floordiv(i * 8 + j, 8), floormod(j, 8));
  Stmt s = For::make(i, 0, 4, ForKind::kSerial, For::make(j, 0, 8, ForKind::kSerial, body));
  Stmt want =
      For::make(i, 0, 4, ForKind::kSerial, For::make(j, 0, 8, ForKind::kSerial, store(i, j)));
  EXPECT_TRUE(same_ir(simplify(s), want));
}

TEST_F(StmtSimplify, DropsTrivialLoops) {
  EXPECT_TRUE(same_ir(simplify(For::make(i, 0, 0, ForKind::kSerial, store(i, 1))), no_op()));
  EXPECT_TRUE(
      same_ir(simplify(For::make(i, 3, 1, ForKind::kSerial, store(i + 1, i))), store(4, 3)));
  // A thread-bound loop of extent 1 stays.
  Stmt t = For::make(i, 0, 1, ForKind::kThreadBinding, store(i, 1), "threadIdx.x");
  EXPECT_TRUE(same_ir(simplify(t), t));
}

TEST_F(StmtSimplify, FoldsDecidedIfs) {
  Stmt s =
      For::make(i, 0, 16, ForKind::kSerial, IfThenElse::make(i < 16, store(i, 1), store(i, 2)));
  EXPECT_TRUE(same_ir(simplify(s), For::make(i, 0, 16, ForKind::kSerial, store(i, 1))));
  Stmt e = For::make(i, 0, 16, ForKind::kSerial, IfThenElse::make(i >= 16, store(i, 1)));
  EXPECT_TRUE(same_ir(simplify(e), no_op()));
}

TEST_F(StmtSimplify, AssumesConditionInBranches) {
  Stmt s = For::make(
      i, 0, 100, ForKind::kSerial,
      IfThenElse::make(i < 10, store(i, floordiv(i, 16)), store(i, select(i >= 10, 1, 2))));
  Stmt want =
      For::make(i, 0, 100, ForKind::kSerial, IfThenElse::make(i < 10, store(i, 0), store(i, 1)));
  EXPECT_TRUE(same_ir(simplify(s), want));
  // Symbolic guard.
  Stmt g = For::make(i, 0, 64, ForKind::kSerial,
                     IfThenElse::make(i < n, IfThenElse::make(i < n, store(i, 1))));
  Stmt gwant = For::make(i, 0, 64, ForKind::kSerial, IfThenElse::make(i < n, store(i, 1)));
  EXPECT_TRUE(same_ir(simplify(g), gwant));
}

TEST_F(StmtSimplify, RemovesNoOps) {
  Stmt s = SeqStmt::make({Evaluate::make(Expr(1)), store(0, 1), Evaluate::make(i - i)});
  EXPECT_TRUE(same_ir(simplify(s), store(0, 1)));
  EXPECT_TRUE(same_ir(simplify(SeqStmt::make({Evaluate::make(Expr(1)), Evaluate::make(Expr(2))})),
                      no_op()));
}

TEST_F(StmtSimplify, LetStmt) {
  Var t("t");
  Stmt s = LetStmt::make(t, Expr(5), store(t + 1, t));
  EXPECT_TRUE(same_ir(simplify(s), store(6, 5)));
  Stmt k = For::make(i, 0, 4, ForKind::kSerial, LetStmt::make(t, i * 2, store(t, floordiv(t, 8))));
  Stmt kwant = For::make(i, 0, 4, ForKind::kSerial, LetStmt::make(t, i * 2, store(t, 0)));
  EXPECT_TRUE(same_ir(simplify(k), kwant));
}

}  // namespace
}  // namespace kiln::arith::testing
