// verify: each rule's failure, with its message.
#include "kiln/tir/verify.h"

#include <gtest/gtest.h>

#include "tir_test_util.h"

namespace kiln::tir {
namespace {

using namespace kiln::tir::testing;  // NOLINT

const DataType f32 = DataType::Float(32);

std::string verify_error(const PrimFunc& f, const VerifyOptions& opt = {}) {
  try {
    verify(f, "my_pass", opt);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_VERIFY_FAILS(f, opt, text)                                  \
  do {                                                                     \
    std::string msg = verify_error(f, opt);                                \
    EXPECT_NE(msg.find(text), std::string::npos) << "message: " << msg;    \
    EXPECT_NE(msg.find("after pass 'my_pass'"), std::string::npos) << msg; \
    EXPECT_NE(msg.find("internal error"), std::string::npos) << msg;       \
  } while (0)

TEST(Verify, WellFormedFunctionPasses) {
  Buffer A = Buffer::make("A", f32, {8});
  Var i("i"), t("T", DataType::Handle());
  Stmt body = Allocate::make(
      t, f32, {Expr(8)}, const_true(),
      loop(i, 0, 8,
           SeqStmt::make({Store::make(t, A.load({i}), i), A.store({i}, Load::make(f32, t, i))})));
  EXPECT_EQ(verify_error(make_func("f", {A}, body)), "");
}

TEST(Verify, VariableOutsideItsScope) {
  Buffer A = Buffer::make("A", f32, {8});
  Var i("i"), j("j");
  PrimFunc f = make_func(
      "f", {A}, SeqStmt::make({loop(i, 0, 8, A.store({i}, Expr(1.0f))), A.store({i}, Expr(2.0f))}));
  EXPECT_VERIFY_FAILS(f, {}, "variable 'i' is used outside the scope of its definition");
  PrimFunc g = make_func("g", {A}, A.store({j}, Expr(2.0f)));
  EXPECT_VERIFY_FAILS(g, {}, "variable 'j' is used outside the scope of its definition");
}

TEST(Verify, VariableBoundTwiceInItsScope) {
  Buffer A = Buffer::make("A", f32, {8});
  Var i("i");
  PrimFunc f = make_func("f", {A}, loop(i, 0, 2, loop(i, 0, 4, A.store({i}, Expr(1.0f)))));
  EXPECT_VERIFY_FAILS(f, {}, "variable 'i' is bound again inside its own scope");
}

TEST(Verify, BufferWithoutAllocation) {
  Buffer A = Buffer::make("A", f32, {8});
  Var t("T", DataType::Handle());
  PrimFunc f = make_func("f", {A}, Store::make(t, Expr(1.0f), 0));
  EXPECT_VERIFY_FAILS(f, {},
                      "store to buffer 'T' which is neither allocated nor a parameter buffer");
  PrimFunc g = make_func("g", {A}, A.store({0}, Load::make(f32, t, 0)));
  EXPECT_VERIFY_FAILS(g, {},
                      "load from buffer 'T' which is neither allocated nor a parameter buffer");
}

TEST(Verify, TypeMismatches) {
  Buffer A = Buffer::make("A", f32, {8});
  Var i("i");
  // int32 value stored into a float32 buffer.
  EXPECT_VERIFY_FAILS(make_func("f", {A}, Store::make(A->data, Expr(1), 0)), {},
                      "store of int32 into buffer 'A' of float32");
  // float64 load from a float32 buffer.
  EXPECT_VERIFY_FAILS(
      make_func("f", {A}, A.store({0}, cast(f32, Load::make(DataType::Float(64), A->data, 0)))), {},
      "load of float64 from buffer 'A' of float32");
  // Vector load with a scalar-typed predicate of the wrong lanes.
  Expr bad = Load::make(f32.with_lanes(4), A->data, Ramp::make(0, 1, 4), const_true(1));
  EXPECT_VERIFY_FAILS(make_func("f", {A}, Store::make(A->data, bad, Ramp::make(4, 1, 4))), {},
                      "load predicate has type bool, expected boolx4");
}

TEST(Verify, ProducerNodesAfterFlatten) {
  Buffer A = Buffer::make("A", f32, {8});
  Producer P = make_producer("P", {8});
  PrimFunc f = make_func("f", {A}, ProducerStore::make(P, Expr(1.0f), {Expr(0)}));
  EXPECT_EQ(verify_error(f), "");
  EXPECT_VERIFY_FAILS(f, {.flattened = true}, "ProducerStore to 'P' remains after flattening");
}

TEST(Verify, VectorizedLoopAfterVectorize) {
  Buffer A = Buffer::make("A", f32, {8});
  Var i("i");
  PrimFunc f = make_func("f", {A}, loop(i, 0, 8, A.store({i}, Expr(1.0f)), ForKind::kVectorized));
  EXPECT_EQ(verify_error(f), "");
  EXPECT_VERIFY_FAILS(f, {.vectorized = true}, "vectorized loop over 'i' remains after vectorize");
}

}  // namespace
}  // namespace kiln::tir
