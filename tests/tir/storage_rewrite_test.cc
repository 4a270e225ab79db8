// storage_rewrite: non-overlapping allocations share storage; unused ones go away.
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

int count_allocs(const Stmt& s) {
  int n = 0;
  post_order_visit(s, [&](const IRNode* x) { n += x->kind == NodeKind::Allocate; });
  return n;
}

/// A -> T1 -> T2 -> T3 -> C chain, each temp allocated nested as te lowering does.
PrimFunc chain() {
  Buffer A = Buffer::make("A", f32, {16}), C = Buffer::make("C", f32, {16});
  Var t1("T1", DataType::Handle()), t2("T2", DataType::Handle()), t3("T3", DataType::Handle());
  auto stage = [&](const Var& dst, const Var& src, float k) {
    Var i("i");
    return loop(i, 0, 16, Store::make(dst, Load::make(f32, src, i) * k + 1.0f, i));
  };
  Stmt s3 = Allocate::make(t3, f32, {Expr(16)}, const_true(),
                           SeqStmt::make({stage(t3, t2, 3.0f), stage(C->data, t3, 4.0f)}));
  Stmt s2 =
      Allocate::make(t2, f32, {Expr(16)}, const_true(), SeqStmt::make({stage(t2, t1, 2.0f), s3}));
  Stmt s1 = Allocate::make(t1, f32, {Expr(16)}, const_true(),
                           SeqStmt::make({stage(t1, A->data, 1.0f), s2}));
  return make_func("chain", {A, C}, s1);
}

TEST(StorageRewrite, ChainReusesDeadBuffers) {
  PrimFunc f = chain();
  PrimFunc g = storage_rewrite(f);
  verify(g, "storage_rewrite");
  // T1 dies after T2 is produced, so T3 takes T1's storage: two allocations remain.
  EXPECT_EQ(count_allocs(g->body), 2) << to_string(g);
  KILN_EXPECT_GOLDEN("storage_rewrite_chain", to_string(g));
  std::vector<double> a(16), c(16, 0);
  for (int k = 0; k < 16; ++k) a[k] = k - 5;
  EXPECT_EQ(run_func(f, {a, c}), run_func(g, {a, c}));
}

TEST(StorageRewrite, UnusedAllocationIsRemovedAndOverlapKept) {
  Buffer C = Buffer::make("C", f32, {4});
  Var t("T", DataType::Handle()), u("U", DataType::Handle()), w("W", DataType::Handle());
  Var i("i");
  // U and W live in the same statement: they must stay apart. T is never used.
  Stmt use =
      loop(i, 0, 4,
           SeqStmt::make({Store::make(u, Expr(1.0f), i), Store::make(w, Load::make(f32, u, i), i),
                          C.store({i}, Load::make(f32, w, i))}));
  Stmt body = Allocate::make(t, f32, {Expr(8)}, const_true(),
                             Allocate::make(u, f32, {Expr(4)}, const_true(),
                                            Allocate::make(w, f32, {Expr(4)}, const_true(), use)));
  PrimFunc g = storage_rewrite(make_func("f", {C}, body));
  verify(g, "storage_rewrite");
  EXPECT_EQ(count_allocs(g->body), 2) << to_string(g);
  std::vector<double> c(4, 0);
  EXPECT_EQ(run_func(g, {c})[0], std::vector<double>(4, 1.0));
}

}  // namespace
}  // namespace kiln::tir
