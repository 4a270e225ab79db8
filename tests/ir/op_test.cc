// Expression builders (op.h): constant folding, identities, type matching and its errors, and
// the dtype checks of the nodes' make() functions.
#include "kiln/ir/op.h"

#include <gtest/gtest.h>

#include "ir/ir_test_util.h"
#include "kiln/ir/printer.h"

namespace kiln::ir {
namespace {

using testing::error_of;

TEST(Op, FoldsConstants) {
  Expr s = Expr(3) + Expr(4);
  ASSERT_TRUE(s.as<IntImm>());
  EXPECT_EQ(s.as<IntImm>()->value, 7);
  EXPECT_EQ(s.dtype(), DataType::Int(32));
  EXPECT_TRUE(is_const_int(Expr(7) - Expr(10), -3));
  EXPECT_TRUE(is_const_int(Expr(6) * Expr(7), 42));
  // Integer / and % are floor division and modulo; truncdiv/truncmod are C semantics.
  EXPECT_TRUE(is_const_int(Expr(-7) / Expr(2), -4));
  EXPECT_TRUE(is_const_int(Expr(-7) % Expr(2), 1));
  EXPECT_TRUE(is_const_int(truncdiv(-7, 2), -3));
  EXPECT_TRUE(is_const_int(truncmod(-7, 2), -1));
  EXPECT_TRUE(is_const_int(min(Expr(3), Expr(-2)), -2));
  EXPECT_TRUE(is_const_int(max(Expr(3), Expr(-2)), 3));
  EXPECT_TRUE(is_const_int(Expr(3) < Expr(4), 1));
  EXPECT_TRUE(is_const_int(Expr(3) == Expr(4), 0));
  Expr f = Expr(1.5f) * Expr(2.0f);
  ASSERT_TRUE(f.as<FloatImm>());
  EXPECT_EQ(f.as<FloatImm>()->value, 3.0);
  EXPECT_EQ(f.dtype(), DataType::Float(32));
  // Folding wraps to the type's width.
  Expr w = IntImm::make(DataType::Int(8), 127) + IntImm::make(DataType::Int(8), 1);
  EXPECT_TRUE(is_const_int(w, -128));
  EXPECT_EQ(w.dtype(), DataType::Int(8));
}

TEST(Op, Identities) {
  Var x("x");
  EXPECT_TRUE((x + 0).same_as(x));
  EXPECT_TRUE((0 + x).same_as(x));
  EXPECT_TRUE((x - 0).same_as(x));
  EXPECT_TRUE((x * 1).same_as(x));
  EXPECT_TRUE((1 * x).same_as(x));
  EXPECT_TRUE(is_zero(x * 0));
  EXPECT_TRUE((x / 1).same_as(x));
  EXPECT_TRUE(is_zero(x % 1));
  EXPECT_TRUE(min(x, x).same_as(x));
  // Float x + 0 is kept (x could be -0.0).
  Var f("f", DataType::Float(32));
  EXPECT_EQ(to_string(f + 0.0f), "f + 0f");
}

TEST(Op, ImmediatesAdoptTheOtherType) {
  Var x("x", DataType::Int(64));
  Expr e = x + 1;
  EXPECT_EQ(e.dtype(), DataType::Int(64));
  EXPECT_EQ(to_string(e), "x + 1i64");
  Var f("f", DataType::Float(32));
  EXPECT_EQ((f * 2).dtype(), DataType::Float(32));
  EXPECT_EQ(to_string(f * 2), "f*2f");
  EXPECT_EQ(to_string(2.5 * f), "2.5f*f");  // a double immediate becomes float32
  // A float immediate does not truncate to an int: the int side is promoted instead.
  Var i("i");
  EXPECT_EQ(to_string(i + 0.5f), "float32(i) + 0.5f");
  EXPECT_EQ(to_string(i * 0.5), "float64(i)*0.5");
}

TEST(Op, PromotesVariables) {
  Var a("a"), b("b", DataType::Int(64));
  Expr e = a + b;
  EXPECT_EQ(e.dtype(), DataType::Int(64));
  EXPECT_EQ(to_string(e), "int64(a) + b");
  Var f("f", DataType::Float(32));
  EXPECT_EQ((a * f).dtype(), DataType::Float(32));
  EXPECT_EQ(to_string(a * f), "float32(a)*f");
  Var d("d", DataType::Float(64));
  EXPECT_EQ(to_string(f + d), "float64(f) + d");
}

TEST(Op, BroadcastsScalars) {
  Var i("i");
  Expr r = Ramp::make(i, 1, 4);
  Expr e = r + 1;
  EXPECT_EQ(e.dtype(), DataType::Int(32, 4));
  EXPECT_EQ(to_string(e), "ramp(i, 1, 4) + broadcast(1, 4)");
  EXPECT_EQ(to_string(i * Ramp::make(Expr(0), Expr(1), 4)), "broadcast(i, 4)*ramp(0, 1, 4)");
}

TEST(Op, TypeMismatchErrorsNameBothTypes) {
  Var a("a", DataType::Int(8)), b("b", DataType::UInt(8));
  EXPECT_EQ(error_of([&] { a + b; }), "operator +: cannot mix int8 and uint8");
  Var p("p", DataType::Bool()), q("q");
  EXPECT_EQ(error_of([&] { p* q; }), "operator *: cannot match types bool and int32");
  Var h("h", DataType::Handle());
  EXPECT_EQ(error_of([&] { min(h, q); }), "operator min: cannot match types handle and int32");
  Var f("f", DataType::Float(32));
  EXPECT_EQ(error_of([&] { f % f; }), "operator % on floating-point float32");
  EXPECT_EQ(error_of([&] { floordiv(q, 0); }), "floordiv by constant zero");
  EXPECT_EQ(error_of([&] { exp(q); }), "exp needs a floating-point argument, got int32");
  EXPECT_EQ(error_of([&] { q&& q; }), "operator && on int32");
}

TEST(Op, MakeChecksTypes) {
  Var i("i"), f("f", DataType::Float(32));
  std::string msg = error_of([&] { Add::make(i, f); });
  EXPECT_NE(msg.find("internal error"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Add::make: operand types int32 and float32 differ"), std::string::npos)
      << msg;
  msg = error_of([&] { Add::make(i, Expr()); });
  EXPECT_NE(msg.find("Add::make: b is undefined"), std::string::npos) << msg;
  msg = error_of([&] { Select::make(i, f, f); });
  EXPECT_NE(msg.find("Select condition of type int32"), std::string::npos) << msg;
  msg = error_of([&] { Ramp::make(i, 1, 1); });
  EXPECT_NE(msg.find("Ramp with 1 lanes"), std::string::npos) << msg;
  msg = error_of([&] { Let::make(Var("x"), f, f); });
  EXPECT_NE(msg.find("Let x: var int32 value float32"), std::string::npos) << msg;
  msg = error_of([&] { For::make(i, 0, int64_t{4}, ForKind::kSerial, Evaluate::make(0)); });
  EXPECT_NE(msg.find("For i: var int32, min int32, extent int64"), std::string::npos) << msg;
  msg = error_of([&] { IfThenElse::make(i, Evaluate::make(0)); });
  EXPECT_NE(msg.find("IfThenElse condition of type int32"), std::string::npos) << msg;
  // Comparisons produce bool with the operands' lanes.
  Expr c = LT::make(Ramp::make(i, 1, 4), Broadcast::make(i, 4));
  EXPECT_EQ(c.dtype(), DataType::Bool(4));
}

TEST(Op, CastFolds) {
  EXPECT_EQ(to_string(cast(DataType::Float(32), Expr(3))), "3f");
  EXPECT_EQ(to_string(cast(DataType::Int(64), Expr(3))), "3i64");
  Var x("x");
  EXPECT_TRUE(cast(DataType::Int(32), x).same_as(x));
  EXPECT_EQ(to_string(cast(DataType::Float(32, 4), x)), "broadcast(float32(x), 4)");
}

TEST(Op, BufferFlatIndex) {
  Buffer b = Buffer::make("A", DataType::Float(32), {16, 32});
  Var i("i"), j("j");
  EXPECT_EQ(to_string(b.load({i, j})), "A[i*32 + j]");
  EXPECT_EQ(to_string(b.store({i, j}, Expr(1.0f))), "A[i*32 + j] = 1f\n");
  Buffer s = Buffer::make("S", DataType::Float(32), {16, 32}, {Expr(64), Expr(2)});
  EXPECT_EQ(to_string(s.load({i, j})), "S[i*64 + j*2]");
}

}  // namespace
}  // namespace kiln::ir
