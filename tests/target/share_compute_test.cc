// Compute bodies shared between kernels that differ only in integer constants
// (tir::share_compute_bodies, used by build() for CPU targets): which constants become
// parameters (golden text), which never do (divisors, allocation sizes, unrolled loops), one
// body in the generated LLVM module, and every member computing its own result on seeded
// random inputs with poisoned outputs. Also the code generator's per-block reuse of index
// expressions when a variable is bound twice in one block.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/golden.h"
#include "kiln/target/build.h"
#include "kiln/target/codegen.h"
#include "kiln/tir/packed_api.h"
#include "target/codegen_test_util.h"

namespace kiln::testing {
namespace {

/// C[i, j] = A[i, j] * 2 + B[rows - 1 - i, j] over [rows, 16] float32 buffers, rows parallel:
/// the row count appears as a loop extent, in a subtraction and (times 16) in no divisor.
tir::PrimFunc make_flip(const std::string& name, int64_t rows) {
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {rows, 16});
  Buffer b = fb.buffer("B", DataType::Float(32), {rows, 16});
  Buffer c = fb.buffer("C", DataType::Float(32), {rows, 16});
  Var i("i"), j("j");
  Expr flipped = Expr(static_cast<int32_t>(rows - 1)) - i;
  Stmt body = loop(i, rows,
                   loop(j, 16, c.store({i, j}, a.load({i, j}) * Expr(2.0f) + b.load({flipped, j}))),
                   ForKind::kParallel);
  return fb.make(name, body);
}

std::vector<tir::PrimFunc> packed(const std::vector<tir::PrimFunc>& funcs) {
  std::vector<tir::PrimFunc> r;
  for (const tir::PrimFunc& f : funcs) r.push_back(tir::make_packed_api(f));
  return r;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

/// The lines of LLVM IR text that define a function and contain `what`.
size_t definitions(const std::string& ll, const std::string& what) {
  size_t n = 0;
  for (const std::string& line : split_lines(ll)) {
    n += line.rfind("define ", 0) == 0 && line.find(what) != std::string::npos;
  }
  return n;
}

TEST(ShareCompute, ConstantsThatDifferBecomeParameters) {
  std::vector<tir::PrimFunc> out =
      tir::share_compute_bodies(packed({make_flip("flip_3", 3), make_flip("flip_5", 5)}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].attr("shared_compute"), "flip_3_compute_");
  EXPECT_EQ(out[1].attr("shared_compute"), "flip_3_compute_");
  KILN_EXPECT_GOLDEN("share_compute_flip_5", to_string(out[1]));
}

TEST(ShareCompute, OneBodyServesEveryMember) {
  const std::vector<int64_t> rows{3, 5, 9, 5};
  std::vector<tir::PrimFunc> funcs;
  for (size_t k = 0; k < rows.size(); ++k) {
    funcs.push_back(make_flip("flip" + std::to_string(k) + "_" + std::to_string(rows[k]), rows[k]));
  }
  runtime::Module m = build(funcs, Target::host());
  std::string ll = codegen::get_source(m, "ll");
  EXPECT_EQ(definitions(ll, "_compute_("), 1u) << ll;
  EXPECT_EQ(definitions(ll, "@flip0_3_compute_("), 1u) << ll;
  EXPECT_EQ(count(ll, "_compute_("), count(ll, "@flip0_3_compute_(")) << ll;
  for (size_t k = 0; k < rows.size(); ++k) {
    NDArray a = random_f32({rows[k], 16}, 10 + k), b = random_f32({rows[k], 16}, 20 + k);
    NDArray c = poisoned({rows[k], 16}, DataType::Float(32));
    m.get_function(funcs[k]->name)(a, b, c);
    for (int64_t i = 0; i < rows[k]; ++i) {
      for (int64_t j = 0; j < 16; ++j) {
        float want =
            a.data_as<float>()[i * 16 + j] * 2.0f + b.data_as<float>()[(rows[k] - 1 - i) * 16 + j];
        ASSERT_FLOAT_EQ(c.data_as<float>()[i * 16 + j], want) << funcs[k]->name << " " << i;
      }
    }
  }
  // Each member still checks its own arguments.
  NDArray a = random_f32({9, 16}, 1), b = random_f32({9, 16}, 2);
  NDArray c = poisoned({9, 16}, DataType::Float(32));
  EXPECT_NE(error_of([&] {
              m.get_function("flip0_3")(a, b, c);
            }).find("flip0_3: argument 0 (A): shape[0] expected 3, got 9"),
            std::string::npos);
}

/// A[i] (one of the variants below) over a [n] float32 output.
tir::PrimFunc make_variant(const std::string& name, const std::string& kind, int64_t v) {
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {64});
  Buffer c = fb.buffer("C", DataType::Float(32), {64});
  Var i("i");
  Expr iv = static_cast<Expr>(i);
  Expr c32 = Expr(static_cast<int32_t>(v));
  if (kind == "divisor")
    return fb.make(name, loop(i, 64, c.store({i}, a.load({floordiv(iv, c32)}))));
  if (kind == "modulus")
    return fb.make(name, loop(i, 64, c.store({i}, a.load({floormod(iv, c32)}))));
  if (kind == "unrolled") {
    return fb.make(name, loop(i, v, c.store({i}, a.load({i})), ForKind::kUnrolled));
  }
  // "allocation": a scratch buffer of v elements.
  Var t("t", DataType::Handle());
  Stmt body = Allocate::make(
      t, DataType::Float(32), {c32}, const_true(),
      SeqStmt::make(
          {Store::make(t, a.load({Expr(0)}), Expr(0), const_true()),
           loop(i, 64, c.store({i}, Load::make(DataType::Float(32), t, Expr(0), const_true())))}),
      "global");
  return fb.make(name, body);
}

TEST(ShareCompute, ConstantsThatMustStayImmediatesAreNeverLifted) {
  for (const char* kind : {"divisor", "modulus", "unrolled", "allocation"}) {
    std::vector<tir::PrimFunc> in =
        packed({make_variant("v2", kind, 2), make_variant("v4", kind, 4)});
    std::vector<tir::PrimFunc> out = tir::share_compute_bodies(in);
    for (size_t k = 0; k < in.size(); ++k) {
      EXPECT_TRUE(out[k].same_as(in[k])) << kind;
      EXPECT_EQ(out[k].attr("shared_compute"), "") << kind;
    }
  }
  // The same variant twice with one constant is one family with nothing lifted.
  std::vector<tir::PrimFunc> same = tir::share_compute_bodies(
      packed({make_variant("d1", "divisor", 4), make_variant("d2", "divisor", 4)}));
  EXPECT_EQ(same[1].attr("shared_compute"), "d1_compute_");
}

TEST(ShareCompute, IndexReuseStopsAtARebinding) {
  // Both stores are in one basic block; x*4 + 1 must be emitted again after x is rebound.
  FuncBuilder fb;
  Buffer c = fb.buffer("C", DataType::Float(32), {12});
  Var x("x");
  Expr idx = static_cast<Expr>(x) * Expr(4) + Expr(1);
  Stmt body = SeqStmt::make({LetStmt::make(x, Expr(0), c.store({idx}, Expr(1.5f))),
                             LetStmt::make(x, Expr(2), c.store({idx}, Expr(2.5f)))});
  runtime::Module m = build({fb.make("rebind", body)}, Target::host());
  NDArray cv = poisoned({12}, DataType::Float(32));
  m.get_function("rebind")(cv);
  EXPECT_EQ(cv.data_as<float>()[1], 1.5f);
  EXPECT_EQ(cv.data_as<float>()[9], 2.5f);
}

}  // namespace
}  // namespace kiln::testing
