// Golden text of the IR printer: immediates, precedence, every expression and statement form,
// and the disambiguation of distinct variables that share a name.
#include "kiln/ir/printer.h"

#include <gtest/gtest.h>

#include <limits>
#include <sstream>

#include "ir/ir_test_util.h"
#include "kiln/ir/op.h"

namespace kiln::ir {
namespace {

using testing::make_producer;

TEST(Printer, Immediates) {
  EXPECT_EQ(to_string(Expr(3)), "3");
  EXPECT_EQ(to_string(Expr(-3)), "-3");
  EXPECT_EQ(to_string(Expr(int64_t{3})), "3i64");
  EXPECT_EQ(to_string(IntImm::make(DataType::UInt(8), 3)), "3u8");
  EXPECT_EQ(to_string(IntImm::make(DataType::Int(8), -5)), "-5i8");
  EXPECT_EQ(to_string(IntImm::make(DataType::UInt(64), -1)), "18446744073709551615u64");
  EXPECT_EQ(to_string(const_true()), "True");
  EXPECT_EQ(to_string(const_false()), "False");
  EXPECT_EQ(to_string(Expr(1.0f)), "1f");
  EXPECT_EQ(to_string(Expr(0.5f)), "0.5f");
  EXPECT_EQ(to_string(Expr(0.1f)), "0.1f");  // shortest round trip, not 0.100000001
  EXPECT_EQ(to_string(Expr(-2.5f)), "-2.5f");
  EXPECT_EQ(to_string(Expr(0.5)), "0.5");
  EXPECT_EQ(to_string(Expr(1.0)), "1.0");
  EXPECT_EQ(to_string(Expr(1e300)), "1e+300");
  EXPECT_EQ(to_string(FloatImm::make(DataType::Float(16), 0.5)), "0.5f16");
  EXPECT_EQ(to_string(Expr(std::numeric_limits<float>::infinity())), "inf(float32)");
  EXPECT_EQ(to_string(StringImm::make("say \"hi\"\n")), "\"say \\\"hi\\\"\\n\"");
}

TEST(Printer, PrecedenceUsesMinimalParentheses) {
  Var i("i"), j("j"), k("k");
  EXPECT_EQ(to_string(i * 1024 + j), "i*1024 + j");
  EXPECT_EQ(to_string((i + 1) * 2), "(i + 1)*2");
  EXPECT_EQ(to_string(i + j + k), "i + j + k");
  EXPECT_EQ(to_string(Add::make(i, Add::make(j, k))), "i + (j + k)");
  EXPECT_EQ(to_string(i - (j - k)), "i - (j - k)");
  EXPECT_EQ(to_string(i - j - k), "i - j - k");
  EXPECT_EQ(to_string(i - j * k), "i - j*k");
  EXPECT_EQ(to_string(Mul::make(i, Mul::make(j, k))), "i*(j*k)");
  EXPECT_EQ(to_string(i * -3), "i*-3");
  EXPECT_EQ(to_string(i < j && j < k), "i < j && j < k");
  EXPECT_EQ(to_string((i < j || j < k) && i == k), "(i < j || j < k) && i == k");
  EXPECT_EQ(to_string(i < j || (j < k && i == k)), "i < j || j < k && i == k");
  EXPECT_EQ(to_string(!(i < j)), "!(i < j)");
  EXPECT_EQ(to_string(EQ::make(i < j, j < k)), "(i < j) == (j < k)");
  EXPECT_EQ(to_string(i + 1 < j * 2), "i + 1 < j*2");
}

TEST(Printer, Operators) {
  Var i("i"), j("j");
  Var x("x", DataType::Float(32)), y("y", DataType::Float(32));
  EXPECT_EQ(to_string(i / 4), "floordiv(i, 4)");
  EXPECT_EQ(to_string(i % 4), "floormod(i, 4)");
  EXPECT_EQ(to_string(truncdiv(i, 4)), "truncdiv(i, 4)");
  EXPECT_EQ(to_string(truncmod(i, 4)), "truncmod(i, 4)");
  EXPECT_EQ(to_string(x / (y + 1.0f)), "x/(y + 1f)");
  EXPECT_EQ(to_string(x / y * 2.0f), "x/y*2f");
  EXPECT_EQ(to_string(x * (y / 2.0f)), "x*(y/2f)");
  EXPECT_EQ(to_string(min(i, j + 1)), "min(i, j + 1)");
  EXPECT_EQ(to_string(max(i, 0)), "max(i, 0)");
  EXPECT_EQ(to_string(select(i < j, x, y)), "select(i < j, x, y)");
  EXPECT_EQ(to_string(cast(DataType::Float(32), i) * x), "float32(i)*x");
  EXPECT_EQ(to_string(exp(x) + sqrt(y)), "exp(x) + sqrt(y)");
  EXPECT_EQ(to_string(Call::make(DataType::Int(32), "f", {}, CallKind::kExtern)), "f()");
  Var v("v", DataType::Int(64));
  EXPECT_EQ(to_string(v + 1), "v + 1i64");
}

TEST(Printer, LoadsRampsAndLet) {
  Var a("A", DataType::Handle()), i("i"), j("j");
  EXPECT_EQ(to_string(Load::make(DataType::Float(32), a, i * 16 + j)), "A[i*16 + j]");
  Expr idx = Ramp::make(i, 1, 16);
  Expr vec = Load::make(DataType::Float(32, 16), a, idx);
  EXPECT_EQ(to_string(vec), "A[ramp(i, 1, 16)]");
  Expr pred = Ramp::make(i, 1, 4) < Broadcast::make(j, 4);
  EXPECT_EQ(to_string(Load::make(DataType::Float(32, 4), a, Ramp::make(i, 1, 4), pred) +
                      Broadcast::make(Expr(1.0f), 4)),
            "(A[ramp(i, 1, 4)] if ramp(i, 1, 4) < broadcast(j, 4)) + broadcast(1f, 4)");
  Var x("x");
  EXPECT_EQ(to_string(Let::make(x, i + 1, x * x) * 2), "(let x = i + 1 in x*x)*2");
  Producer t = make_producer("T", {64, 64});
  EXPECT_EQ(to_string(ProducerLoad::make(t, {i, j + 1})), "T[i, j + 1]");
}

TEST(Printer, Reduce) {
  Var x("x", DataType::Float(32)), y("y", DataType::Float(32));
  CommReducer sum({x}, {y}, {x + y}, {Expr(0.0f)});
  IterVar k(Range(0, 1024), Var("k"), IterVarType::kCommReduce);
  Producer a = make_producer("A", {64, 1024});
  Var i("i");
  Expr r = Reduce::make(sum, {ProducerLoad::make(a, {i, k.var()})}, {k}, Expr(), 0);
  EXPECT_EQ(to_string(r),
            "reduce(lambda x, y: x + y, init=0f, source=A[i, k], axis=[(k, 0, 1024)])");
  Expr rc = Reduce::make(sum, {ProducerLoad::make(a, {i, k.var()})}, {k}, k.var() < i, 0);
  EXPECT_EQ(to_string(rc),
            "reduce(lambda x, y: x + y, init=0f, source=A[i, k], axis=[(k, 0, 1024)], "
            "where=k < i)");
}

TEST(Printer, NestedLoopsAndStores) {
  Var c("C", DataType::Handle()), a("A", DataType::Handle());
  Var i("i"), j("j");
  Stmt body = Store::make(c, Load::make(DataType::Float(32), a, i * 1024 + j) * 2.0f, i * 1024 + j);
  Stmt s = For::make(i, 0, 1024, ForKind::kParallel, For::make(j, 0, 1024, ForKind::kSerial, body));
  EXPECT_EQ(to_string(s),
            "parallel for (i, 0, 1024) {\n"
            "  for (j, 0, 1024) {\n"
            "    C[i*1024 + j] = A[i*1024 + j]*2f\n"
            "  }\n"
            "}\n");
  std::ostringstream os;
  os << s;
  EXPECT_EQ(os.str(), to_string(s));
}

TEST(Printer, LoopKinds) {
  Var i("i"), tx("tx");
  Stmt e = Evaluate::make(0);
  EXPECT_EQ(to_string(For::make(i, 0, 4, ForKind::kUnrolled, e)),
            "unrolled for (i, 0, 4) {\n  0\n}\n");
  EXPECT_EQ(to_string(For::make(i, 2, 4, ForKind::kVectorized, e)),
            "vectorized for (i, 2, 4) {\n  0\n}\n");
  EXPECT_EQ(to_string(For::make(tx, 0, 32, ForKind::kThreadBinding, e, "threadIdx.x")),
            "thread_binding(threadIdx.x) for (tx, 0, 32) {\n  0\n}\n");
}

TEST(Printer, VectorStoreAndPredicatedStore) {
  Var c("C", DataType::Handle()), a("A", DataType::Handle()), i("i");
  Expr idx = Ramp::make(i * 16, 1, 16);
  Stmt s = Store::make(c, Load::make(DataType::Float(32, 16), a, idx), idx);
  EXPECT_EQ(to_string(s), "C[ramp(i*16, 1, 16)] = A[ramp(i*16, 1, 16)]\n");
  Expr pred = Ramp::make(i, 1, 4) < Broadcast::make(Expr(10), 4);
  Stmt p = Store::make(c, Broadcast::make(Expr(0.0f), 4), Ramp::make(i, 1, 4), pred);
  EXPECT_EQ(to_string(p),
            "if ramp(i, 1, 4) < broadcast(10, 4): C[ramp(i, 1, 4)] = broadcast(0f, 4)\n");
}

TEST(Printer, AllocateLetAttrAssert) {
  Var buf("B", DataType::Handle()), i("i"), n("n"), x("x");
  Stmt store = Store::make(buf, Expr(1.0f), i);
  Stmt loop = For::make(i, 0, n, ForKind::kSerial, store);
  Stmt alloc = Allocate::make(buf, DataType::Float(32), {n + 1, 64}, Expr(), loop, "local");
  Stmt let = LetStmt::make(x, n * 2, alloc);
  Stmt attr = AttrStmt::make(buf, attr::kStorageScope, StringImm::make("local"), let);
  Stmt as = AssertStmt::make(n > 0, StringImm::make("n must be positive"), attr);
  EXPECT_EQ(to_string(as),
            "assert(n > 0, \"n must be positive\")\n"
            "// attr [B] storage_scope = \"local\"\n"
            "let x = n*2\n"
            "allocate B[float32 * (n + 1) * 64] in local\n"
            "for (i, 0, n) {\n"
            "  B[i] = 1f\n"
            "}\n");
  IterVar tx(Range(0, 32), Var("threadIdx.x"), IterVarType::kThreadIndex, "threadIdx.x");
  EXPECT_EQ(to_string(AttrStmt::make(tx, attr::kThreadExtent, 32, Evaluate::make(tx))),
            "// attr [threadIdx.x] thread_extent = 32\nthreadIdx.x\n");
  EXPECT_EQ(to_string(AttrStmt::make(Ref<Object>(), "pragma_x", 1, Evaluate::make(0))),
            "// attr pragma_x = 1\n0\n");
}

TEST(Printer, FlatScopeInsideSequenceIsBraced) {
  Var x("x"), a("A", DataType::Handle());
  Stmt let = LetStmt::make(x, 1, Store::make(a, x, 0));
  Stmt seq = SeqStmt::make({let, Store::make(a, 2, 1), let});
  EXPECT_EQ(to_string(seq),
            "{\n"
            "  let x = 1\n"
            "  A[0] = x\n"
            "}\n"
            "A[1] = 2\n"
            "let x = 1\n"
            "A[0] = x\n");
}

TEST(Printer, IfThenElse) {
  Var i("i"), a("A", DataType::Handle());
  Stmt s1 = Store::make(a, 1, i), s2 = Store::make(a, 2, i), s3 = Store::make(a, 3, i);
  EXPECT_EQ(to_string(IfThenElse::make(i < 10, s1)), "if (i < 10) {\n  A[i] = 1\n}\n");
  EXPECT_EQ(to_string(IfThenElse::make(i < 10, s1, s2)),
            "if (i < 10) {\n  A[i] = 1\n} else {\n  A[i] = 2\n}\n");
  EXPECT_EQ(to_string(IfThenElse::make(i < 10, s1, IfThenElse::make(i < 20, s2, s3))),
            "if (i < 10) {\n"
            "  A[i] = 1\n"
            "} else if (i < 20) {\n"
            "  A[i] = 2\n"
            "} else {\n"
            "  A[i] = 3\n"
            "}\n");
}

TEST(Printer, ProducerRealizeAndStore) {
  Producer c = make_producer("C", {1024, 1024});
  Var i("i"), j("j");
  Stmt st = ProducerStore::make(c, Expr(0.0f), {i, j});
  Stmt r = ProducerRealize::make(c, {Range(0, 1024), Range(0, 1024)}, Expr(), st, "global");
  EXPECT_EQ(to_string(r),
            "realize C([0, 1024], [0, 1024]) in global {\n"
            "  C[i, j] = 0f\n"
            "}\n");
  Stmt r2 = ProducerRealize::make(c, {Range(i, 4)}, Expr(), st);
  EXPECT_EQ(to_string(r2), "realize C([i, 4]) {\n  C[i, j] = 0f\n}\n");
}

TEST(Printer, DistinctVariablesWithOneNameAreSuffixed) {
  Var i1("i"), i2("i"), i3("i"), real("i_1");
  Expr e = i1 + i2 * i3 + real + i2;
  EXPECT_EQ(to_string(e), "i + i_1*i_2 + i_1_1 + i_1");
  Var a("A", DataType::Handle());
  Stmt l1 = For::make(i1, 0, 4, ForKind::kSerial, Store::make(a, i1, i1));
  Stmt l2 = For::make(i2, 0, 4, ForKind::kSerial, Store::make(a, i2, i2));
  EXPECT_EQ(to_string(SeqStmt::make({l1, l2, l1})),
            "for (i, 0, 4) {\n  A[i] = i\n}\n"
            "for (i_1, 0, 4) {\n  A[i_1] = i_1\n}\n"
            "for (i, 0, 4) {\n  A[i] = i\n}\n");
  // Naming is per printed unit: printing i2 alone shows its plain name.
  EXPECT_EQ(to_string(i2), "i");
  // Producers are disambiguated the same way, separately from variables.
  Producer t1 = make_producer("T", {4}), t2 = make_producer("T", {4});
  Var t("T");
  EXPECT_EQ(to_string(ProducerLoad::make(t1, {t}) + ProducerLoad::make(t2, {0})), "T[T] + T_1[0]");
}

TEST(Printer, DeepChainPrints) {
  // A 10,000-deep left-leaning chain (built iteratively) prints without overflowing the stack.
  Var x("x");
  Expr e = x;
  for (int k = 0; k < 10000; ++k) e = Add::make(e, Expr(1));
  std::string s = to_string(e);
  EXPECT_EQ(s.size(), 1 + 10000 * 4u);
  EXPECT_EQ(s.substr(0, 9), "x + 1 + 1");
}

}  // namespace
}  // namespace kiln::ir
