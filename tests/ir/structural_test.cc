// Structural equality (alpha-equivalence of bound variables, identity of free ones) and the
// consistency of structural_hash with it.
#include "kiln/ir/structural.h"

#include <gtest/gtest.h>

#include <limits>

#include "ir/ir_test_util.h"
#include "kiln/ir/op.h"

namespace kiln::ir {
namespace {

using testing::make_producer;

Stmt copy_loop(const Var& a, const Var& i, int64_t extent, float value) {
  return For::make(i, 0, static_cast<int32_t>(extent), ForKind::kSerial,
                   Store::make(a, Load::make(DataType::Float(32), a, i) + value, i));
}

TEST(Structural, LoopsEqualUpToLoopVariable) {
  Var a("A", DataType::Handle());
  Var i("i"), k("k");
  Stmt s1 = copy_loop(a, i, 16, 1.0f);
  Stmt s2 = copy_loop(a, k, 16, 1.0f);
  EXPECT_TRUE(structural_equal(s1, s2));
  EXPECT_EQ(structural_hash(s1), structural_hash(s2));
  EXPECT_FALSE(structural_equal(s1, copy_loop(a, k, 17, 1.0f)));
  EXPECT_FALSE(structural_equal(s1, copy_loop(a, k, 16, 2.0f)));
  EXPECT_NE(structural_hash(s1), structural_hash(copy_loop(a, k, 17, 1.0f)));
  EXPECT_NE(structural_hash(s1), structural_hash(copy_loop(a, k, 16, 2.0f)));
  // Loop kind and types matter.
  const For* f = s1.as<For>();
  Stmt par = For::make(f->loop_var, f->min, f->extent, ForKind::kParallel, f->body);
  EXPECT_FALSE(structural_equal(s1, par));
  EXPECT_NE(structural_hash(s1), structural_hash(par));
}

TEST(Structural, FreeVariablesMustBeIdenticalUnlessMapped) {
  Var x("x"), y("y"), x2("x");
  EXPECT_TRUE(structural_equal(x + 1, x + 1));
  EXPECT_FALSE(structural_equal(x + 1, x2 + 1));  // same name, different variable
  EXPECT_TRUE(structural_equal(x + 1, x2 + 1, /*map_free_vars=*/true));
  EXPECT_EQ(structural_hash(x + 1), structural_hash(x2 + 1));
  // The mapping must be a bijection.
  EXPECT_TRUE(structural_equal(x * y, y * x, true));
  EXPECT_FALSE(structural_equal(x * x, x * y, true));
  EXPECT_FALSE(structural_equal(x * y, x * x, true));
  EXPECT_NE(structural_hash(x * x), structural_hash(x * y));
  // Buffer variables of free buffers count too.
  Var a("A", DataType::Handle()), b("B", DataType::Handle()), i("i");
  EXPECT_FALSE(structural_equal(copy_loop(a, i, 4, 1.0f), copy_loop(b, i, 4, 1.0f)));
  EXPECT_TRUE(structural_equal(copy_loop(a, i, 4, 1.0f), copy_loop(b, i, 4, 1.0f), true));
}

TEST(Structural, ConstantsAndTypes) {
  EXPECT_TRUE(structural_equal(Expr(3), Expr(3)));
  EXPECT_FALSE(structural_equal(Expr(3), Expr(4)));
  EXPECT_FALSE(structural_equal(Expr(3), Expr(int64_t{3})));
  EXPECT_NE(structural_hash(Expr(3)), structural_hash(Expr(int64_t{3})));
  EXPECT_FALSE(structural_equal(Expr(1.0f), Expr(1.0)));
  Var x("x"), xl("x", DataType::Int(64));
  EXPECT_FALSE(structural_equal(x, xl, true));
  EXPECT_FALSE(structural_equal(Add::make(x, x), Sub::make(x, x)));
  Expr nan = Expr(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(structural_equal(nan, nan));
  EXPECT_TRUE(structural_equal(Expr(), Expr()));
  EXPECT_FALSE(structural_equal(Expr(), Expr(1)));
  EXPECT_FALSE(structural_equal(Call::make(DataType::Int(32), "f", {1}, CallKind::kExtern),
                                Call::make(DataType::Int(32), "g", {1}, CallKind::kExtern)));
  EXPECT_FALSE(structural_equal(Call::make(DataType::Int(32), "f", {1}, CallKind::kExtern),
                                Call::make(DataType::Int(32), "f", {1, 2}, CallKind::kExtern)));
  EXPECT_FALSE(structural_equal(Call::make(DataType::Int(32), "f", {1}, CallKind::kExtern),
                                Call::make(DataType::Int(32), "f", {1}, CallKind::kPureExtern)));
}

TEST(Structural, LetAndAllocateBindVariables) {
  Var x("x"), y("y"), n("n");
  Expr l1 = Let::make(x, n + 1, x * x);
  Expr l2 = Let::make(y, n + 1, y * y);
  EXPECT_TRUE(structural_equal(l1, l2));
  EXPECT_EQ(structural_hash(l1), structural_hash(l2));
  EXPECT_FALSE(structural_equal(l1, Let::make(y, n + 1, y * n)));
  Var a("A", DataType::Handle()), b("B", DataType::Handle()), i("i"), j("j");
  Stmt s1 = Allocate::make(a, DataType::Float(32), {16}, Expr(), copy_loop(a, i, 16, 1.0f));
  Stmt s2 = Allocate::make(b, DataType::Float(32), {16}, Expr(), copy_loop(b, j, 16, 1.0f));
  EXPECT_TRUE(structural_equal(s1, s2));
  EXPECT_EQ(structural_hash(s1), structural_hash(s2));
  Stmt s3 =
      Allocate::make(b, DataType::Float(32), {16}, Expr(), copy_loop(b, j, 16, 1.0f), "local");
  EXPECT_FALSE(structural_equal(s1, s3));
  Stmt ls1 = LetStmt::make(x, n, Evaluate::make(x + 1));
  Stmt ls2 = LetStmt::make(y, n, Evaluate::make(y + 1));
  EXPECT_TRUE(structural_equal(ls1, ls2));
  // A bound variable never matches a free one.
  EXPECT_FALSE(structural_equal(ls1, LetStmt::make(y, n, Evaluate::make(x + 1)), true));
}

TEST(Structural, FreeAndBoundUsesOfOneVariableStayABijection) {
  // Free variables are not remembered when they must be identical (map_free_vars off); a
  // variable free on one side and bound on the other still never matches.
  Var x("x"), y("y"), n("n");
  // x free, then a Let binding y (left) to x (right): the body's x on the right is the bound one.
  EXPECT_TRUE(structural_equal(x + Let::make(y, n, y + 1), x + Let::make(x, n, x + 1)));
  EXPECT_FALSE(structural_equal(x + Let::make(y, n, y + x), x + Let::make(x, n, x + x)));
  // After the binding x (left) <-> y (right), a use pairing x with itself is refused.
  EXPECT_FALSE(structural_equal(Let::make(x, n, x) + x, Let::make(y, n, y) + x));
  EXPECT_FALSE(structural_equal(Let::make(x, n, x) + y, Let::make(y, n, y) + y));
}

TEST(Structural, ReusedLoopVariableMatchesFreshOnes) {
  // Two sequential loops sharing one Var object equal two loops with distinct vars.
  Var a("A", DataType::Handle()), i("i"), j("j"), k("k");
  Stmt s1 = SeqStmt::make({copy_loop(a, i, 4, 1.0f), copy_loop(a, i, 4, 1.0f)});
  Stmt s2 = SeqStmt::make({copy_loop(a, j, 4, 1.0f), copy_loop(a, k, 4, 1.0f)});
  EXPECT_TRUE(structural_equal(s1, s2));
  EXPECT_TRUE(structural_equal(s2, s1));
  EXPECT_EQ(structural_hash(s1), structural_hash(s2));
}

TEST(Structural, ReduceAxesAndCombinerAreBound) {
  auto make = [](const Producer& p, const char* xn, const char* kn, int64_t extent) {
    Var x(xn, DataType::Float(32)), y("y", DataType::Float(32));
    CommReducer sum({x}, {y}, {x + y}, {Expr(0.0f)});
    IterVar k(Range(0, static_cast<int32_t>(extent)), Var(kn), IterVarType::kCommReduce);
    return Reduce::make(sum, {ProducerLoad::make(p, {k.var()})}, {k}, Expr(), 0);
  };
  Producer p = make_producer("A", {64});
  Producer p2 = make_producer("A", {64});
  EXPECT_TRUE(structural_equal(make(p, "x", "k", 64), make(p, "u", "r", 64)));
  EXPECT_EQ(structural_hash(make(p, "x", "k", 64)), structural_hash(make(p, "u", "r", 64)));
  EXPECT_FALSE(structural_equal(make(p, "x", "k", 64), make(p, "x", "k", 32)));
  // Producers compare by identity.
  EXPECT_FALSE(structural_equal(make(p, "x", "k", 64), make(p2, "x", "k", 64), true));
}

TEST(Structural, AttrStmtNodes) {
  auto make = [](const char* name) {
    IterVar tx(Range(0, 32), Var(name), IterVarType::kThreadIndex, "threadIdx.x");
    return AttrStmt::make(tx, attr::kThreadExtent, 32, Evaluate::make(tx.var() + 1));
  };
  EXPECT_FALSE(structural_equal(make("tx"), make("tx")));
  EXPECT_TRUE(structural_equal(make("tx"), make("t"), true));
  EXPECT_EQ(structural_hash(make("tx")), structural_hash(make("t")));
  Producer p = make_producer("C", {4});
  Stmt a1 = AttrStmt::make(p, attr::kRealizeScope, StringImm::make("global"), Evaluate::make(0));
  Stmt a2 = AttrStmt::make(p, attr::kRealizeScope, StringImm::make("local"), Evaluate::make(0));
  EXPECT_TRUE(structural_equal(a1, a1));
  EXPECT_FALSE(structural_equal(a1, a2));
}

TEST(Structural, HashIsDeterministicAndDiscriminates) {
  Var i("i"), j("j");
  EXPECT_EQ(structural_hash(i * 4 + j), structural_hash(i * 4 + j));
  EXPECT_NE(structural_hash(i * 4 + j), structural_hash(i * 5 + j));
  EXPECT_NE(structural_hash(i + j), structural_hash(i - j));
  EXPECT_NE(structural_hash(Expr(1) + i), structural_hash(i + Expr(1)));
  Stmt e = Evaluate::make(0);
  EXPECT_NE(structural_hash(IfThenElse::make(i < 1, e)),
            structural_hash(IfThenElse::make(i < 1, e, e)));
}

TEST(Structural, DeepChain) {
  Var x("x"), y("y");
  Expr a = x, b = y;
  for (int k = 0; k < 10000; ++k) {
    a = Add::make(a, Expr(k));
    b = Add::make(b, Expr(k));
  }
  EXPECT_FALSE(structural_equal(a, b));
  EXPECT_TRUE(structural_equal(a, b, true));
  EXPECT_EQ(structural_hash(a), structural_hash(b));
}

}  // namespace
}  // namespace kiln::ir
