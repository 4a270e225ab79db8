// Unit tests of the analyses behind the Analyzer: constant bounds, modular sets, symbolic
// interval sets (eval_set, union/intersect, cover_range) on split/fuse index patterns.
#include "test_util.h"

namespace kiln::arith::testing {
namespace {

using namespace kiln::ir;  // NOLINT

void expect_bound(const ConstIntBound& b, int64_t lo, int64_t hi) {
  EXPECT_EQ(b.min_value, lo);
  EXPECT_EQ(b.max_value, hi);
}

TEST(ConstIntBoundTest, Arithmetic) {
  Analyzer ana;
  Var x("x"), y("y");
  ana.bind(x, Range(0, 8));
  ana.bind(y, Range(-4, 8));  // [-4, 3]
  expect_bound(ana.const_int_bound(x + y), -4, 10);
  expect_bound(ana.const_int_bound(x - y), -3, 11);
  expect_bound(ana.const_int_bound(x * y), -28, 21);
  expect_bound(ana.const_int_bound(floordiv(y, 2)), -2, 1);
  expect_bound(ana.const_int_bound(truncdiv(y, 2)), -2, 1);
  expect_bound(ana.const_int_bound(floormod(y, 3)), 0, 2);
  expect_bound(ana.const_int_bound(truncmod(y, 3)), -2, 2);
  expect_bound(ana.const_int_bound(min(x, y)), -4, 3);
  expect_bound(ana.const_int_bound(max(x, y)), 0, 7);
  expect_bound(ana.const_int_bound(select(x < y, x, y * 10)), -40, 30);
  expect_bound(ana.const_int_bound(cast(DataType::Int(64), x)), 0, 7);
  expect_bound(ana.const_int_bound(floormod(x, 16)), 0, 7);
  expect_bound(ana.const_int_bound(x < y), 0, 1);
}

TEST(ConstIntBoundTest, Saturates) {
  Analyzer ana;
  Var a("a", DataType::Int(64)), b("b");
  ConstIntBound r = ana.const_int_bound(a + 1);
  EXPECT_EQ(r.min_value, ConstIntBound::kNegInf);
  EXPECT_EQ(r.max_value, ConstIntBound::kPosInf);
  expect_bound(ana.const_int_bound(b), INT32_MIN, INT32_MAX);
  expect_bound(ana.const_int_bound(floormod(a, 5)), 0, 4);
  r = ana.const_int_bound(a * 2);
  EXPECT_EQ(r.max_value, ConstIntBound::kPosInf);
}

TEST(ConstIntBoundTest, WrappingTypesWiden) {
  Analyzer ana;
  Var u("u", DataType::UInt(32)), v("v", DataType::UInt(32));
  ana.bind(u, Range(cast(DataType::UInt(32), Expr(0)), cast(DataType::UInt(32), Expr(10))));
  ana.bind(v, Range(cast(DataType::UInt(32), Expr(0)), cast(DataType::UInt(32), Expr(10))));
  expect_bound(ana.const_int_bound(u + v), 0, 18);
  expect_bound(ana.const_int_bound(u - v), 0, 4294967295LL);  // may wrap
}

TEST(ModularSetTest, Patterns) {
  Analyzer ana;
  Var x("x"), y("y");
  auto expect = [&](const Expr& e, int64_t coeff, int64_t base) {
    ModularSet m = ana.modular_set(e);
    EXPECT_EQ(m.coeff, coeff) << to_string(e);
    EXPECT_EQ(m.base, base) << to_string(e);
  };
  expect(Expr(7), 0, 7);
  expect(x, 1, 0);
  expect(x * 16, 16, 0);
  expect(x * 16 + 4, 16, 4);
  expect(x * 16 + y * 8 + 4, 8, 4);
  expect(x * 16 - 4, 16, 12);
  expect((x * 4 + 1) * 2, 8, 2);
  expect(floordiv(x * 32 + 16, 8), 4, 2);
  expect(floormod(x * 6 + 3, 4), 2, 1);
  expect(select(x < y, x * 8, x * 4 + 4), 4, 0);
  ana.bind(y, x * 8);
  expect(y + 2, 8, 2);
}

TEST(IntSetTest, SplitAndFusePatterns) {
  Analyzer ana;
  Var i("i"), j("j"), fused("fused");
  VarMap<IntSet> dom;
  dom[j] = IntSet::from_range(Range(0, 8));
  // i stays a point: [i*8, i*8 + 7]
  IntSet s = ana.int_set(i * 8 + j, dom);
  EXPECT_TRUE(same_ir(s.min(), i * 8));
  EXPECT_TRUE(same_ir(s.max(), i * 8 + 7));
  Range r = s.cover_range(Range());
  EXPECT_TRUE(same_ir(r->min, i * 8));
  EXPECT_TRUE(same_ir(r->extent, Expr(8)));
  IntSet d = ana.int_set(floordiv(i * 8 + j, 8), dom);
  EXPECT_TRUE(d.is_single_point());
  EXPECT_TRUE(same_ir(d.min(), i));
  IntSet m = ana.int_set(floormod(i * 8 + j, 8), dom);
  EXPECT_TRUE(same_ir(m.min(), Expr(0)));
  EXPECT_TRUE(same_ir(m.max(), Expr(7)));

  VarMap<IntSet> fdom;
  fdom[fused] = IntSet::from_range(Range(0, 256));
  IntSet fm = ana.int_set(floormod(fused, 64), fdom);
  EXPECT_TRUE(same_ir(fm.min(), Expr(0)));
  EXPECT_TRUE(same_ir(fm.max(), Expr(63)));
  IntSet fd = ana.int_set(floordiv(fused, 64), fdom);
  EXPECT_TRUE(same_ir(fd.min(), Expr(0)));
  EXPECT_TRUE(same_ir(fd.max(), Expr(3)));
}

TEST(IntSetTest, Arithmetic) {
  Var x("x"), y("y"), n("n");
  VarMap<IntSet> dom;
  dom[x] = IntSet::interval(Expr(0), Expr(9));
  dom[y] = IntSet::interval(Expr(-2), Expr(3));
  auto check = [&](const Expr& e, const Expr& lo, const Expr& hi) {
    IntSet s = eval_set(e, dom);
    EXPECT_TRUE(same_ir(s.min(), lo)) << to_string(e);
    EXPECT_TRUE(same_ir(s.max(), hi)) << to_string(e);
  };
  check(x - y, Expr(-3), Expr(11));
  check(x * -2, Expr(-18), Expr(0));
  check(x * n, Expr(), Expr());  // n of unknown sign
  check(x * (x + 1), Expr(0), Expr(90));
  check(min(x, y), Expr(-2), Expr(3));
  check(max(x, n), max(n, 0), max(n, 9));
  check(select(x < y, x, y), Expr(-2), Expr(9));
  check(floordiv(y, 2), Expr(-1), Expr(1));
  check(floormod(x + 20, 32), Expr(20), Expr(29));
  check(floormod(x, 4), Expr(0), Expr(3));
  check(x + n, n, n + 9);
  IntSet ev = eval_set(x * y, dom);
  EXPECT_TRUE(ev.is_everything());
}

TEST(IntSetTest, UnionIntersectCover) {
  Var n("n");
  IntSet a = IntSet::interval(Expr(0), n);
  IntSet b = IntSet::interval(Expr(4), n + 4);
  IntSet u = union_sets({a, b});
  EXPECT_TRUE(same_ir(u.min(), Expr(0)));
  EXPECT_TRUE(same_ir(u.max(), n + 4));
  IntSet in = intersect_sets({a, b});
  EXPECT_TRUE(same_ir(in.min(), Expr(4)));
  EXPECT_TRUE(same_ir(in.max(), n));
  Range r = u.cover_range(Range());
  EXPECT_TRUE(same_ir(r->min, Expr(0)));
  EXPECT_TRUE(same_ir(r->extent, n + 5));
  Range full = IntSet::everything().cover_range(Range(0, 10));
  EXPECT_TRUE(same_ir(full->extent, Expr(10)));
  Range half = IntSet::interval(Expr(3), Expr()).cover_range(Range(0, 10));
  EXPECT_TRUE(same_ir(half->min, Expr(3)));
  EXPECT_TRUE(same_ir(half->extent, Expr(7)));
  EXPECT_TRUE(IntSet::single_point(n).is_single_point());
}

}  // namespace
}  // namespace kiln::arith::testing
