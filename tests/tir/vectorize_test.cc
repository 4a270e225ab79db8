// vectorize: vector loads/stores with ramps, reductions, guards, and serial fallbacks.
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
constexpr ForKind kVec = ForKind::kVectorized;

std::vector<double> random_data(size_t n, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-2, 2);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(d(rng));
  return v;
}

/// Runs f and vectorize(f) on the same random buffers and expects identical results.
void expect_same_results(const PrimFunc& f, const PrimFunc& g, const std::vector<size_t>& sizes) {
  std::vector<std::vector<double>> in;
  for (size_t k = 0; k < sizes.size(); ++k) in.push_back(random_data(sizes[k], 7 + k));
  auto a = run_func(f, in);
  auto b = run_func(g, in);
  EXPECT_EQ(a, b);
}

bool has_vector_loop(const Stmt& s) {
  bool found = false;
  post_order_visit(s, [&](const IRNode* n) {
    if (n->kind == NodeKind::For)
      found |= static_cast<const For*>(n)->for_kind == ForKind::kVectorized;
  });
  return found;
}

TEST(Vectorize, ElementwiseAddBecomesRampLoadsAndStore) {
  Buffer A = Buffer::make("A", f32, {4, 8}), B = Buffer::make("B", f32, {8}),
         C = Buffer::make("C", f32, {4, 8});
  Var i("i"), j("j");
  Stmt body = loop(i, 0, 4, loop(j, 0, 8, C.store({i, j}, A.load({i, j}) + B.load({j})), kVec));
  PrimFunc f = make_func("add", {A, B, C}, body);
  PrimFunc g = vectorize(f);
  verify(g, "vectorize", {.vectorized = true});
  Expr r = Ramp::make(i * 8, 1, 8);
  Stmt expected = loop(i, 0, 4,
                       Store::make(C->data,
                                   Load::make(f32.with_lanes(8), A->data, r) +
                                       Load::make(f32.with_lanes(8), B->data, Ramp::make(0, 1, 8)),
                                   r));
  EXPECT_TRUE(structural_equal(g->body, expected)) << to_string(g);
  KILN_EXPECT_GOLDEN("vectorize_add", to_string(g));
  expect_same_results(f, g, {32, 8, 32});
}

TEST(Vectorize, ReductionUpdateIsVectorLoadMulAddStore) {
  Buffer A = Buffer::make("A", f32, {16}), B = Buffer::make("B", f32, {16, 8}),
         C = Buffer::make("C", f32, {8});
  Var k("k"), j("j");
  Stmt body =
      loop(k, 0, 16, loop(j, 0, 8, C.store({j}, C.load({j}) + A.load({k}) * B.load({k, j})), kVec));
  PrimFunc f = make_func("gemv", {A, B, C}, body);
  PrimFunc g = vectorize(f);
  verify(g, "vectorize", {.vectorized = true});
  DataType v8 = f32.with_lanes(8);
  Expr rj = Ramp::make(0, 1, 8);
  Stmt expected = loop(k, 0, 16,
                       Store::make(C->data,
                                   Load::make(v8, C->data, rj) +
                                       Broadcast::make(Load::make(f32, A->data, k), 8) *
                                           Load::make(v8, B->data, Ramp::make(k * 8, 1, 8)),
                                   rj));
  EXPECT_TRUE(structural_equal(g->body, expected)) << to_string(g);
  expect_same_results(f, g, {16, 128, 8});
}

TEST(Vectorize, GuardBecomesPredicatedStoreAndLoads) {
  // A non-divisible split: 13 elements, vector width 8.
  Buffer A = Buffer::make("A", f32, {13}), C = Buffer::make("C", f32, {13});
  Var o("o"), j("j");
  Expr idx = o * 8 + j;
  Stmt body =
      loop(o, 0, 2,
           loop(j, 0, 8, IfThenElse::make(idx < 13, C.store({idx}, A.load({idx}) * 3.0f)), kVec));
  PrimFunc f = make_func("guard", {A, C}, body);
  PrimFunc g = vectorize(f);
  verify(g, "vectorize", {.vectorized = true});
  EXPECT_FALSE(has_vector_loop(g->body));
  KILN_EXPECT_GOLDEN("vectorize_guard", to_string(g));
  expect_same_results(f, g, {13, 13});  // the interpreter throws on unmasked out-of-bounds lanes
}

TEST(Vectorize, FusedIndexStaysContiguous) {
  // idx = o*4 + j split back into (idx / 16, idx % 16): lanes never cross a row.
  Buffer A = Buffer::make("A", f32, {4, 16}), C = Buffer::make("C", f32, {64});
  Var o("o"), j("j");
  Expr idx = o * 4 + j;
  Stmt body =
      loop(o, 0, 16,
           loop(j, 0, 4, C.store({idx}, A.load({floordiv(idx, 16), floormod(idx, 16)})), kVec));
  PrimFunc f = make_func("fused", {A, C}, body);
  PrimFunc g = vectorize(f);
  // Both accesses are contiguous ramps, not gathers (the exact base depends on the simplifier).
  const Store* st = g->body.as<For>()->body.as<Store>();
  ASSERT_TRUE(st) << to_string(g);
  const Load* ld = st->value.as<Load>();
  ASSERT_TRUE(ld && ld->index.as<Ramp>()) << to_string(g);
  EXPECT_TRUE(is_one(ld->index.as<Ramp>()->stride)) << to_string(g);
  expect_same_results(f, g, {64, 64});
}

TEST(Vectorize, IfThenElseCallBecomesSelect) {
  Buffer A = Buffer::make("A", f32, {10}), C = Buffer::make("C", f32, {16});
  Var j("j");
  Stmt body = loop(j, 0, 16, C.store({j}, if_then_else(j < 10, A.load({j}), Expr(0.0f))), kVec);
  PrimFunc f = make_func("pad", {A, C}, body);
  PrimFunc g = vectorize(f);
  verify(g, "vectorize", {.vectorized = true});
  EXPECT_FALSE(has_vector_loop(g->body));
  expect_same_results(f, g, {10, 16});
}

TEST(Vectorize, ExtentOneSubstitutesTheVar) {
  Buffer C = Buffer::make("C", f32, {4});
  Var j("j");
  PrimFunc f = make_func("one", {C}, loop(j, 2, 1, C.store({j}, Expr(1.0f)), kVec));
  PrimFunc g = vectorize(f);
  EXPECT_TRUE(structural_equal(g->body, C.store({Expr(2)}, Expr(1.0f)))) << to_string(g);
}

/// Each body must fall back to a serial loop, with the same results.
void expect_fallback(const PrimFunc& f, const std::vector<size_t>& sizes) {
  PrimFunc g = vectorize(f);
  verify(g, "vectorize", {.vectorized = true});
  const For* l = nullptr;
  post_order_visit(g->body, [&](const IRNode* n) {
    if (n->kind == NodeKind::For && static_cast<const For*>(n)->loop_var.name() == "j")
      l = static_cast<const For*>(n);
  });
  ASSERT_TRUE(l) << to_string(g);
  EXPECT_EQ(l->for_kind, ForKind::kSerial) << to_string(g);
  if (!sizes.empty()) expect_same_results(f, g, sizes);
}

/// C[i] = R(C[i], A[i, j]) over j < `valid` of 16 vectorized lanes, marked as a commutative
/// reduction (attr::kReduceLanes) with identity `identity`.
PrimFunc lanes_reduction(const std::string& name, const std::function<Expr(Expr, Expr)>& comb,
                         Expr identity, int valid) {
  Buffer A = Buffer::make("A", f32, {4, 16}), C = Buffer::make("C", f32, {4});
  Var i("i"), j("j"), r("r", f32);
  Stmt update =
      AttrStmt::make(Ref<Object>(), attr::kReduceLanes, identity,
                     LetStmt::make(r, A.load({i, j}), C.store({i}, comb(C.load({i}), r))));
  if (valid < 16) update = IfThenElse::make(likely(j < valid), update);
  return make_func(name, {A, C}, loop(i, 0, 4, loop(j, 0, 16, update, kVec)));
}

int count_calls(const Stmt& s, const std::string& name) {
  int n = 0;
  post_order_visit(s, [&](const IRNode* x) {
    n += x->kind == NodeKind::Call && static_cast<const Call*>(x)->name == name;
  });
  return n;
}

TEST(Vectorize, ReductionAcrossLanesCombinesInATree) {
  // NaN-propagating max, as the operator library writes it: 16 lanes -> 8 -> 4 -> 2 -> 1.
  auto nan_max = [](Expr a, Expr b) { return select(b != b, b, select(b > a, b, a)); };
  PrimFunc f = lanes_reduction("max16", nan_max, make_const(f32, -1e30), 16);
  PrimFunc g = vectorize(f);
  verify(g, "vectorize", {.vectorized = true});
  EXPECT_FALSE(has_vector_loop(g->body)) << to_string(g);
  EXPECT_EQ(count_calls(g->body, builtin::kVectorSlice), 8) << to_string(g);
  KILN_EXPECT_GOLDEN("vectorize_lanes_max", to_string(g));
  expect_same_results(f, g, {64, 4});
}

TEST(Vectorize, GuardedLanesOfAReductionGiveTheIdentity) {
  // Lanes 11..15 are masked off: they enter the tree as the identity, so the max of negative
  // data is not 0 (a masked load's value) and the sum does not count them.
  PrimFunc f = lanes_reduction(
      "max11", [](Expr a, Expr b) { return select(b > a, b, a); }, make_const(f32, -1e30), 11);
  PrimFunc g = vectorize(f);
  EXPECT_FALSE(has_vector_loop(g->body)) << to_string(g);
  std::vector<double> a(64), c(4, 5.0);
  for (size_t k = 0; k < a.size(); ++k) a[k] = -1.0 - static_cast<double>((k * 7) % 16);
  std::vector<std::vector<double>> want = run_func(f, {a, c}), got = run_func(g, {a, c});
  EXPECT_EQ(got, want);
  PrimFunc h = lanes_reduction(
      "sum11", [](Expr x, Expr y) { return x + y; }, make_const(f32, 0), 11);
  PrimFunc hv = vectorize(h);
  EXPECT_FALSE(has_vector_loop(hv->body)) << to_string(hv);
  want = run_func(h, {a, c});
  got = run_func(hv, {a, c});
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[1][i], want[1][i], 1e-4) << i;
}

TEST(Vectorize, AShortUnrolledLoopAroundAVectorIsUnrolledFirst) {
  // A row of 21 as vectors at 0 and 5 (the second shifted inwards) of a reshape that reads
  // rows of 126: with the unrolled loop's var substituted first, each start is a constant
  // offset of j*21, whose lanes stay inside one row of 126, so the load is a ramp (with a
  // symbolic start the vectorizer could not show it and built a gather).
  Buffer A = Buffer::make("A", f32, {126}), C = Buffer::make("C", f32, {6 * 21});
  Var j("j"), o("o"), i("i");
  Expr k = min(o * 16, 5) + i;
  Stmt row = loop(o, 0, 2,
                  loop(i, 0, 16, C.store({j * 21 + k}, A.load({floormod(j * 21 + k, 126)})), kVec),
                  ForKind::kUnrolled);
  PrimFunc f = make_func("rows", {A, C}, loop(j, 0, 6, row));
  PrimFunc g = vectorize(f);
  verify(g, "vectorize", {.vectorized = true});
  const std::string text = to_string(g);
  EXPECT_EQ(text.find("floormod(ramp"), std::string::npos) << text;
  EXPECT_NE(text.find("A[ramp(floormod(j*21, 126), 1, 16)]"), std::string::npos) << text;
  expect_same_results(f, g, {126, 126});
}

TEST(Vectorize, FallsBackToSerial) {
  Buffer A = Buffer::make("A", f32, {64}), C = Buffer::make("C", f32, {64});
  Var j("j"), k("k"), n("n");
  // Inner loop bounds depend on the vectorized var (triangular).
  expect_fallback(
      make_func("tri", {A, C},
                loop(j, 0, 8, loop(k, 0, j, C.store({j}, C.load({j}) + A.load({k}))), kVec)),
      {64, 64});
  // An extern call on the var.
  Expr ext = Call::make(f32, "my_extern", {A.load({j})}, CallKind::kExtern);
  expect_fallback(make_func("ext", {A, C}, loop(j, 0, 8, C.store({j}, ext), kVec)), {});
  // A reduction over the vectorized var into one address.
  expect_fallback(
      make_func("red", {A, C}, loop(j, 0, 8, C.store({0}, C.load({0}) + A.load({j})), kVec)),
      {64, 64});
  // A marked reduction whose update does not read its accumulator, or whose source does not
  // move with the var (16 lanes of one value are not one value).
  Var r("r", f32);
  expect_fallback(
      make_func("noacc", {A, C},
                loop(j, 0, 16,
                     AttrStmt::make(Ref<Object>(), attr::kReduceLanes, make_const(f32, 0.0),
                                    LetStmt::make(r, A.load({j}), C.store({0}, r))),
                     kVec)),
      {64, 64});
  expect_fallback(
      make_func("uniform", {A, C},
                loop(j, 0, 16,
                     AttrStmt::make(Ref<Object>(), attr::kReduceLanes, make_const(f32, 0.0),
                                    LetStmt::make(r, A.load({0}), C.store({0}, C.load({0}) + r))),
                     kVec)),
      {64, 64});
  // An allocation inside.
  Var t("t", DataType::Handle());
  Stmt alloc = Allocate::make(
      t, f32, {Expr(1)}, const_true(),
      SeqStmt::make({Store::make(t, A.load({j}), 0), C.store({j}, Load::make(f32, t, 0))}));
  expect_fallback(make_func("alloc", {A, C}, loop(j, 0, 8, alloc, kVec)), {64, 64});
  // A non-constant extent.
  PrimFunc sym = PrimFunc::make("sym", {n}, {}, loop(j, 0, n, Evaluate::make(0), kVec));
  EXPECT_EQ(vectorize(sym)->body.as<For>()->for_kind, ForKind::kSerial);
}

}  // namespace
}  // namespace kiln::tir
