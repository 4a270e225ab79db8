// storage_flatten: realizes become flat allocations, argument tensors use their buffers.
#include <gtest/gtest.h>

#include "common/golden.h"
#include "kiln/tir/transform.h"
#include "kiln/tir/verify.h"
#include "tir_test_util.h"

namespace kiln::tir {
namespace {

using namespace kiln::tir::testing;  // NOLINT

DataType f32 = DataType::Float(32);

struct Fixture {
  Producer A = make_producer("A", {16, 8});
  Producer B = make_producer("B", {16, 8});
  Producer C = make_producer("C", {16, 8});
  Buffer Ab = Buffer::make("A", f32, {16, 8});
  Buffer Cb = Buffer::make("C", f32, {16, 8});
  ExternBufferMap ext{{A.get(), Ab}, {C.get(), Cb}};
};

TEST(StorageFlatten, RealizeBecomesAllocateAndArgsUseBuffers) {
  Fixture x;
  Var i("i"), j("j");
  Stmt produce_b =
      loop(i, 0, 16,
           loop(j, 0, 8, ProducerStore::make(x.B, ProducerLoad::make(x.A, {i, j}) * 2.0f, {i, j})));
  Var i2("i"), j2("j");
  Stmt produce_c = loop(
      i2, 0, 16,
      loop(j2, 0, 8, ProducerStore::make(x.C, ProducerLoad::make(x.B, {i2, j2}) + 1.0f, {i2, j2})));
  Stmt body = ProducerRealize::make(x.B, {Range(0, 16), Range(0, 8)}, const_true(),
                                    SeqStmt::make({produce_b, produce_c}));
  PrimFunc f = make_func("f", {x.Ab, x.Cb}, body);
  PrimFunc g = storage_flatten(f, x.ext);
  verify(g, "storage_flatten", {.flattened = true});

  Var bv("B", DataType::Handle());
  Stmt e1 = loop(
      i, 0, 16,
      loop(j, 0, 8, Store::make(bv, Load::make(f32, x.Ab->data, i * 8 + j) * 2.0f, i * 8 + j)));
  Stmt e2 =
      loop(i2, 0, 16,
           loop(j2, 0, 8,
                Store::make(x.Cb->data, Load::make(f32, bv, i2 * 8 + j2) + 1.0f, i2 * 8 + j2)));
  Stmt expected =
      Allocate::make(bv, f32, {Expr(128)}, const_true(), SeqStmt::make({e1, e2}), "global");
  EXPECT_TRUE(structural_equal(g->body, expected)) << to_string(g);
  KILN_EXPECT_GOLDEN("storage_flatten_basic", to_string(g));
}

TEST(StorageFlatten, ShiftsByRealizeMinAndHonoursScopeAttr) {
  Fixture x;
  Var ko("ko"), j("j");
  // B realized over [ko*8, ko*8+8) only, in "local" scope via a realize_scope attribute.
  Var j2("j");
  Stmt store, use;
  Producer B1 = make_producer("B", {128});
  store = ProducerStore::make(B1, ProducerLoad::make(x.A, {ko, j}), {ko * 8 + j});
  store = loop(j, 0, 8, store);
  use = loop(j2, 0, 8, ProducerStore::make(x.C, ProducerLoad::make(B1, {ko * 8 + j2}), {ko, j2}));
  Stmt realize =
      ProducerRealize::make(B1, {Range(ko * 8, 8)}, const_true(), SeqStmt::make({store, use}));
  Stmt body =
      loop(ko, 0, 16, AttrStmt::make(B1, attr::kRealizeScope, StringImm::make("local"), realize));
  PrimFunc g = storage_flatten(make_func("f", {x.Ab, x.Cb}, body), x.ext);
  verify(g, "storage_flatten", {.flattened = true});
  KILN_EXPECT_GOLDEN("storage_flatten_shift_scope", to_string(g));
  const For* outer = g->body.as<For>();
  ASSERT_TRUE(outer);
  const Allocate* a = outer->body.as<Allocate>();
  ASSERT_TRUE(a) << to_string(g);
  EXPECT_EQ(a->scope, "local");
  EXPECT_EQ(a->constant_size(), 8);
}

TEST(StorageFlatten, StorageAlignPadsStride) {
  Fixture x;
  Var i("i"), j("j");
  Stmt produce = loop(
      i, 0, 16, loop(j, 0, 8, ProducerStore::make(x.B, ProducerLoad::make(x.A, {i, j}), {i, j})));
  Var i2("i"), j2("j");
  Stmt consume =
      loop(i2, 0, 16,
           loop(j2, 0, 8, ProducerStore::make(x.C, ProducerLoad::make(x.B, {i2, j2}), {i2, j2})));
  Stmt realize = ProducerRealize::make(x.B, {Range(0, 16), Range(0, 8)}, const_true(),
                                       SeqStmt::make({produce, consume}));
  Expr align = Call::make(DataType::Int(32), "kiln.tuple", {Expr(0), Expr(16), Expr(1)},
                          CallKind::kPureIntrinsic);
  Stmt body = AttrStmt::make(x.B, attr::kStorageAlign, align, realize);
  PrimFunc g = storage_flatten(make_func("f", {x.Ab, x.Cb}, body), x.ext);
  const Allocate* a = g->body.as<Allocate>();
  ASSERT_TRUE(a) << to_string(g);
  // Row stride 8 padded to 17 (17 % 16 == 1); 16 rows.
  EXPECT_EQ(a->constant_size(), 17 * 16);
  KILN_EXPECT_GOLDEN("storage_flatten_align", to_string(g));
}

TEST(StorageFlatten, AccessOutsideRealizeIsAnError) {
  Fixture x;
  Var i("i");
  Stmt body = loop(i, 0, 8, ProducerStore::make(x.C, ProducerLoad::make(x.B, {i, i}), {i, i}));
  try {
    storage_flatten(make_func("f", {x.Ab, x.Cb}, body), x.ext);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor B is accessed outside its realize"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::tir
