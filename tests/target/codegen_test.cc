// The LLVM code generator end to end: hand-written PrimFuncs built with the IR API, wrapped by
// make_packed_api, JIT-compiled, and called with NDArrays of seeded random data; outputs are
// poisoned first and compared with naive C++ references. Covers scalar and 16-lane vector
// code, floor division and modulo on negative numbers, parallel loops through
// kiln_parallel_for, stack and heap scratch allocations, math intrinsics, select and
// if_then_else, extern C calls, scalar arguments, and the exact messages of argument checks.
#include "kiln/target/codegen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "kiln/target/build.h"
#include "kiln/tir/packed_api.h"
#include "target/codegen_test_util.h"

extern "C" {
/// Called from generated code by name (the test binary exports its symbols).
__attribute__((visibility("default"))) float kiln_test_square_plus(float x, float y) {
  return x * x + y;
}
__attribute__((visibility("default"))) void kiln_test_fill_index(float* p, int32_t n) {
  for (int32_t i = 0; i < n; ++i) p[i] = static_cast<float>(i) * 0.5f;
}
}

namespace kiln::testing {
namespace {

const Target& host() {
  static Target t = Target::host();
  return t;
}

runtime::PackedFunc build_one(const tir::PrimFunc& f, const Target& t = host()) {
  runtime::Module m = build({f}, t);
  return m.get_function(f->name);
}

/// C[i, j] = A[i, j] + B[i, j] over [rows, cols] float32 buffers.
tir::PrimFunc make_add(const std::string& name, int64_t rows, int64_t cols) {
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {rows, cols});
  Buffer b = fb.buffer("B", DataType::Float(32), {rows, cols});
  Buffer c = fb.buffer("C", DataType::Float(32), {rows, cols});
  Var i("i"), j("j");
  Stmt body = loop(i, rows, loop(j, cols, c.store({i, j}, a.load({i, j}) + b.load({i, j}))));
  return fb.make(name, body);
}

TEST(CodegenLLVM, ElementwiseAdd) {
  auto f = build_one(make_add("add", 37, 29));
  NDArray a = random_f32({37, 29}, 1), b = random_f32({37, 29}, 2);
  NDArray c = poisoned({37, 29}, DataType::Float(32));
  f(a, b, c);
  for (int64_t k = 0; k < a.numel(); ++k) {
    ASSERT_EQ(c.data_as<float>()[k], a.data_as<float>()[k] + b.data_as<float>()[k]) << k;
  }
}

TEST(CodegenLLVM, GenericTargetAndAsm) {
  runtime::Module m = build({make_add("add_generic", 8, 8)}, Target("llvm"));
  NDArray a = random_f32({8, 8}, 3), b = random_f32({8, 8}, 4);
  NDArray c = poisoned({8, 8}, DataType::Float(32));
  m.get_function("add_generic")(a, b, c);
  for (int64_t k = 0; k < 64; ++k) {
    ASSERT_EQ(c.data_as<float>()[k], a.data_as<float>()[k] + b.data_as<float>()[k]);
  }
  std::string ll = codegen::get_source(m, "ll");
  EXPECT_NE(ll.find("define i32 @add_generic(ptr"), std::string::npos) << ll;
  EXPECT_NE(ll.find("__kiln_func_names"), std::string::npos);
  std::string s = codegen::get_source(m, "asm");
  EXPECT_NE(s.find("add_generic:"), std::string::npos);
  EXPECT_EQ(m.function_names(), std::vector<std::string>{"add_generic"});
}

TEST(CodegenLLVM, VectorizedAdd16Lanes) {
  const int n = 256;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {n});
  Buffer b = fb.buffer("B", DataType::Float(32), {n});
  Buffer c = fb.buffer("C", DataType::Float(32), {n});
  Var i("i");
  Expr idx = Ramp::make(i * 16, Expr(1), 16);
  DataType v16 = DataType::Float(32, 16);
  // C[i*16 : +16] = A[...] + B[...] * broadcast(2)
  Stmt body = loop(i, n / 16,
                   Store::make(c->data,
                               Load::make(v16, a->data, idx) +
                                   Load::make(v16, b->data, idx) * Broadcast::make(Expr(2.0f), 16),
                               idx));
  runtime::Module m = build({fb.make("vadd", body)}, host());
  std::string ll = codegen::get_source(m, "ll");
  EXPECT_NE(ll.find("<16 x float>"), std::string::npos) << ll;
  NDArray av = random_f32({n}, 5), bv = random_f32({n}, 6);
  NDArray cv = poisoned({n}, DataType::Float(32));
  m.get_function("vadd")(av, bv, cv);
  for (int k = 0; k < n; ++k) {
    ASSERT_EQ(cv.data_as<float>()[k], av.data_as<float>()[k] + bv.data_as<float>()[k] * 2.0f);
  }
}

TEST(CodegenLLVM, VectorBoolStoreAndLoadUseOneBytePerElement) {
  // M[i*16 : +16] = A[...] > 0 (bool vector stored as bytes); C = select(M, A, -1) reads it
  // back as a vector. LLVM's <16 x i1> in memory would be bit-packed; Kiln stores bytes.
  const int n = 64;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {n});
  Buffer m = fb.buffer("M", DataType::Bool(), {n});
  Buffer c = fb.buffer("C", DataType::Float(32), {n});
  Var i("i"), j("j");
  DataType v16 = DataType::Float(32, 16);
  Expr ii = Ramp::make(i * 16, Expr(1), 16), jj = Ramp::make(j * 16, Expr(1), 16);
  Stmt body = SeqStmt::make(
      {loop(i, n / 16,
            Store::make(m->data, Load::make(v16, a->data, ii) > Broadcast::make(Expr(0.0f), 16),
                        ii)),
       loop(
           j, n / 16,
           Store::make(c->data,
                       Select::make(Load::make(DataType::Bool(16), m->data, jj),
                                    Load::make(v16, a->data, jj), Broadcast::make(Expr(-1.0f), 16)),
                       jj))});
  runtime::Module mod = build({fb.make("vbool", body)}, host());
  NDArray av = random_f32({n}, 11);
  NDArray mv = poisoned({n}, DataType::Bool());
  NDArray cv = poisoned({n}, DataType::Float(32));
  mod.get_function("vbool")(av, mv, cv);
  for (int k = 0; k < n; ++k) {
    float x = av.data_as<float>()[k];
    ASSERT_EQ(mv.data_as<uint8_t>()[k], x > 0 ? 1 : 0) << "element " << k;
    ASSERT_EQ(cv.data_as<float>()[k], x > 0 ? x : -1.0f) << "element " << k;
  }
}

TEST(CodegenLLVM, StridedGatherAndPredicatedStore) {
  // B[i*8 + l] = A[l*4 + i] for l < 8 (a gather); only lanes with l < 5 are stored.
  const int rows = 4, lanes = 8;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {lanes * rows});
  Buffer b = fb.buffer("B", DataType::Float(32), {rows * lanes});
  Var i("i");
  Expr src = Ramp::make(Expr(i), Expr(rows), lanes);
  Expr dst = Ramp::make(i * lanes, Expr(1), lanes);
  Expr pred = Ramp::make(Expr(0), Expr(1), lanes) < Broadcast::make(Expr(5), lanes);
  Stmt body =
      loop(i, rows,
           Store::make(b->data, Load::make(DataType::Float(32, lanes), a->data, src), dst, pred));
  auto f = build_one(fb.make("gather", body));
  NDArray av = random_f32({lanes * rows}, 7);
  NDArray bv = poisoned({rows * lanes}, DataType::Float(32));
  f(av, bv);
  for (int r = 0; r < rows; ++r) {
    for (int l = 0; l < lanes; ++l) {
      float got = bv.data_as<float>()[r * lanes + l];
      if (l < 5) {
        EXPECT_EQ(got, av.data_as<float>()[l * rows + r]);
      } else {
        EXPECT_TRUE(std::isnan(got)) << "masked lane written";
      }
    }
  }
}

TEST(CodegenLLVM, LanePatternLoadsAreAWindowAndAShuffle) {
  // Vector loads whose lanes read constant offsets from one scalar base become one load of
  // the window they span and a shuffle (no gather), when the window is at most 4x the lanes:
  // a broadcast within groups of 4 lanes (a grouped convolution's input channels) and a
  // stride-2 read. A stride of 9 spans 136 elements for 16 lanes: still a gather (runs of one
  // lane). Lanes in two to four runs of consecutive elements far apart: a load per run.
  const int lanes = 16, rows = 4, n = 9 * lanes * rows;
  struct Case {
    const char* name;
    std::function<Expr(const Var&)> index;
    std::function<int(int, int)> ref;  // (row, lane) -> element of A
    bool gather;
  };
  const std::vector<Case> cases = {
      {"group_broadcast",
       [&](const Var& i) {
         Expr r = Ramp::make(i * lanes, Expr(1), lanes);
         return floordiv(r, Broadcast::make(Expr(4), lanes)) * Broadcast::make(Expr(4), lanes) +
                Broadcast::make(Expr(3), lanes);
       },
       [&](int i, int l) { return i * lanes + (l / 4) * 4 + 3; }, false},
      {"stride2", [&](const Var& i) { return Ramp::make(i * (2 * lanes) + 1, Expr(2), lanes); },
       [&](int i, int l) { return i * 2 * lanes + 1 + 2 * l; }, false},
      {"stride9", [&](const Var& i) { return Ramp::make(Expr(i), Expr(9), lanes); },
       [&](int i, int l) { return i + 9 * l; }, true},
      // Two runs of 8, and runs of 4 and 12, far apart (16 lanes over two 8-channel blocks, a
      // 12-channel block read into vectors): one load per run and shuffles, no gather.
      {"two_blocks",
       [&](const Var& i) {
         Expr r = Ramp::make(Expr(0), Expr(1), lanes);
         return floordiv(r, Broadcast::make(Expr(8), lanes)) * Broadcast::make(Expr(256), lanes) +
                Broadcast::make(i * 8, lanes) + floormod(r, Broadcast::make(Expr(8), lanes));
       },
       [&](int i, int l) { return (l / 8) * 256 + i * 8 + l % 8; }, false},
      {"block_of_12",
       [&](const Var& i) {
         Expr r = Ramp::make(Expr(8), Expr(1), lanes);
         return floordiv(r, Broadcast::make(Expr(12), lanes)) * Broadcast::make(Expr(200), lanes) +
                Broadcast::make(i * 12, lanes) + floormod(r, Broadcast::make(Expr(12), lanes));
       },
       [&](int i, int l) { return ((8 + l) / 12) * 200 + i * 12 + (8 + l) % 12; }, false},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    FuncBuilder fb;
    Buffer a = fb.buffer("A", DataType::Float(32), {n});
    Buffer b = fb.buffer("B", DataType::Float(32), {rows * lanes});
    Var i("i");
    Stmt body =
        loop(i, rows,
             Store::make(b->data, Load::make(DataType::Float(32, lanes), a->data, k.index(i)),
                         Ramp::make(i * lanes, Expr(1), lanes)));
    runtime::Module m = build({fb.make(k.name, body)}, host());
    std::string ll = codegen::get_source(m, "ll");
    EXPECT_EQ(ll.find("masked.gather") != std::string::npos, k.gather) << ll;
    NDArray av = random_f32({n}, 11);
    NDArray bv = poisoned({rows * lanes}, DataType::Float(32));
    m.get_function(k.name)(av, bv);
    for (int r = 0; r < rows; ++r)
      for (int l = 0; l < lanes; ++l)
        ASSERT_EQ(bv.data_as<float>()[r * lanes + l], av.data_as<float>()[k.ref(r, l)])
            << "row " << r << " lane " << l;
  }
}

int32_t floordiv_ref(int32_t a, int32_t b) {
  int32_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int32_t floormod_ref(int32_t a, int32_t b) { return a - floordiv_ref(a, b) * b; }

TEST(CodegenLLVM, FloorDivModNegative) {
  const int n = 512;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Int(32), {n});
  Buffer d = fb.buffer("D", DataType::Int(32), {n});
  Buffer out = fb.buffer("Out", DataType::Int(32), {8, n});
  Var i("i");
  Expr x = a.load({i}), y = d.load({i});
  Stmt body = loop(i, n,
                   SeqStmt::make({
                       out.store({0, i}, floordiv(x, y)),
                       out.store({1, i}, floormod(x, y)),
                       out.store({2, i}, floordiv(x, 8)),
                       out.store({3, i}, floormod(x, 8)),
                       out.store({4, i}, floordiv(x, 3)),
                       out.store({5, i}, floormod(x, 3)),
                       out.store({6, i}, truncdiv(x, y)),
                       out.store({7, i}, truncmod(x, y)),
                   }));
  auto f = build_one(fb.make("floor_ops", body));
  NDArray av = random_i32({n}, 8, -1000, 1000);
  NDArray dv = random_i32({n}, 9, -9, 9);
  for (int k = 0; k < n; ++k) {
    if (dv.data_as<int32_t>()[k] == 0) dv.data_as<int32_t>()[k] = -3;
  }
  NDArray ov = poisoned({8, n}, DataType::Int(32));
  f(av, dv, ov);
  const int32_t* o = ov.data_as<int32_t>();
  for (int k = 0; k < n; ++k) {
    int32_t x = av.data_as<int32_t>()[k], y = dv.data_as<int32_t>()[k];
    ASSERT_EQ(o[0 * n + k], floordiv_ref(x, y)) << x << " // " << y;
    ASSERT_EQ(o[1 * n + k], floormod_ref(x, y)) << x << " % " << y;
    ASSERT_EQ(o[2 * n + k], floordiv_ref(x, 8)) << x;
    ASSERT_EQ(o[3 * n + k], floormod_ref(x, 8)) << x;
    ASSERT_EQ(o[4 * n + k], floordiv_ref(x, 3)) << x;
    ASSERT_EQ(o[5 * n + k], floormod_ref(x, 3)) << x;
    ASSERT_EQ(o[6 * n + k], x / y);
    ASSERT_EQ(o[7 * n + k], x % y);
  }
}

TEST(CodegenLLVM, ParallelLoopWritesEveryElement) {
  const int rows = 97, cols = 33;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {rows, cols});
  Buffer b = fb.buffer("B", DataType::Float(32), {rows, cols});
  Var alpha = fb.scalar("alpha", DataType::Float(32));
  Var i("i"), j("j");
  Stmt body =
      loop(i, rows,
           loop(j, cols, b.store({i, j}, a.load({i, j}) * alpha + cast(DataType::Float(32), i))),
           ForKind::kParallel);
  runtime::Module m = build({fb.make("par", body)}, host());
  EXPECT_NE(codegen::get_source(m, "ll").find("kiln_parallel_for"), std::string::npos);
  NDArray av = random_f32({rows, cols}, 10);
  NDArray bv = poisoned({rows, cols}, DataType::Float(32));
  m.get_function("par")(av, bv, 1.5);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      // FLOAT_EQ (4 ulps): a * alpha + i may be contracted into one FMA (FPOpFusion::Fast).
      ASSERT_FLOAT_EQ(bv.data_as<float>()[r * cols + c],
                      av.data_as<float>()[r * cols + c] * 1.5f + static_cast<float>(r));
    }
  }
}

TEST(CodegenLLVM, ErrorInsideParallelLoopPropagates) {
  const int n = 64;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {n});
  Var i("i");
  Stmt body = loop(i, n,
                   AssertStmt::make(a.load({i}) >= 0.0f, StringImm::make("A must be non-negative"),
                                    a.store({i}, sqrt(a.load({i})))),
                   ForKind::kParallel);
  auto f = build_one(fb.make("par_assert", body));
  NDArray av = random_f32({n}, 11, 0.f, 4.f);
  f(av);
  av.data_as<float>()[40] = -1.f;
  EXPECT_EQ(error_of([&] { f(av); }), "A must be non-negative");
}

/// tmp = 2 * A over `n` elements, then B[k] = tmp[k] + tmp[n-1-k]; tmp is `n` floats.
tir::PrimFunc make_scratch(const std::string& name, int n, ForKind outer) {
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {4, n});
  Buffer b = fb.buffer("B", DataType::Float(32), {4, n});
  Var r("r"), k("k"), k2("k2");
  Var tmp("tmp", DataType::Handle());
  auto tload = [&](Expr idx) { return Load::make(DataType::Float(32), tmp, idx); };
  Stmt fill = loop(k, n, Store::make(tmp, a.load({r, k}) * 2.0f, k));
  Stmt use = loop(k2, n, b.store({r, k2}, tload(k2) + tload(Expr(n - 1) - k2)));
  Stmt alloc =
      Allocate::make(tmp, DataType::Float(32), {Expr(n)}, const_true(), SeqStmt::make({fill, use}));
  return fb.make(name, loop(r, 4, alloc, outer));
}

void check_scratch(const runtime::PackedFunc& f, int n) {
  NDArray av = random_f32({4, n}, 12);
  NDArray bv = poisoned({4, n}, DataType::Float(32));
  f(av, bv);
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < n; ++k) {
      const float* a = av.data_as<float>() + r * n;
      ASSERT_EQ(bv.data_as<float>()[r * n + k], a[k] * 2.0f + a[n - 1 - k] * 2.0f);
    }
  }
}

TEST(CodegenLLVM, AllocateOnStack) {
  runtime::Module m = build({make_scratch("scratch_stack", 64, ForKind::kSerial)}, host());
  std::string ll = codegen::get_source(m, "ll");
  EXPECT_EQ(ll.find("kiln_workspace_alloc"), std::string::npos);
  check_scratch(m.get_function("scratch_stack"), 64);
}

TEST(CodegenLLVM, AllocateOnHeap) {
  const int n = 100000;  // 400 KB: above the stack limit
  runtime::Module m = build({make_scratch("scratch_heap", n, ForKind::kSerial)}, host());
  std::string ll = codegen::get_source(m, "ll");
  EXPECT_NE(ll.find("kiln_workspace_alloc"), std::string::npos);
  EXPECT_NE(ll.find("kiln_workspace_free"), std::string::npos);
  check_scratch(m.get_function("scratch_heap"), n);
  check_scratch(build_one(make_scratch("scratch_heap_par", n, ForKind::kParallel)), n);
  check_scratch(build_one(make_scratch("scratch_stack_par", 256, ForKind::kParallel)), 256);
}

TEST(CodegenLLVM, MathIntrinsics) {
  const int n = 160;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {n});
  Buffer out = fb.buffer("Out", DataType::Float(32), {6, n});
  Var i("i"), v("v");
  Expr x = a.load({i});
  Expr idx = Ramp::make(v * 16, Expr(1), 16);
  Expr xv = Load::make(DataType::Float(32, 16), a->data, idx);
  Stmt scalar = loop(i, n,
                     SeqStmt::make({out.store({0, i}, exp(x)), out.store({1, i}, tanh(x)),
                                    out.store({2, i}, sqrt(abs(x))), out.store({3, i}, erf(x)),
                                    out.store({4, i}, pow(abs(x), Expr(1.5f)))}));
  // Row 5: tanh on 16-lane vectors (scalarized libm calls).
  Stmt vec = loop(
      v, n / 16,
      Store::make(out->data, tanh(xv) + floor(xv * 4.0f), Ramp::make(v * 16 + 5 * n, Expr(1), 16)));
  auto f = build_one(fb.make("math", SeqStmt::make({scalar, vec})));
  NDArray av = random_f32({n}, 13, -3.f, 3.f);
  NDArray ov = poisoned({6, n}, DataType::Float(32));
  f(av, ov);
  const float* o = ov.data_as<float>();
  for (int k = 0; k < n; ++k) {
    float xk = av.data_as<float>()[k];
    EXPECT_NEAR(o[0 * n + k], std::exp(xk), 1e-5f * std::exp(xk));
    EXPECT_NEAR(o[1 * n + k], std::tanh(xk), 1e-6f);
    EXPECT_NEAR(o[2 * n + k], std::sqrt(std::fabs(xk)), 1e-6f);
    EXPECT_NEAR(o[3 * n + k], std::erf(xk), 1e-6f);
    EXPECT_NEAR(o[4 * n + k], std::pow(std::fabs(xk), 1.5f), 1e-5f);
    EXPECT_NEAR(o[5 * n + k], std::tanh(xk) + std::floor(xk * 4.0f), 1e-6f);
  }
}

TEST(CodegenLLVM, TanhF32IsInlineAndAccurate) {
  // float32 tanh is computed inline (no tanhf call, vectors stay vectors): within 4e-7 of
  // std::tanh absolutely and 2e-6 relatively near 0, saturating to +-1, NaN through.
  const int n = 256;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {n});
  Buffer out = fb.buffer("Out", DataType::Float(32), {n});
  Var v("v");
  Expr idx = Ramp::make(v * 16, Expr(1), 16);
  Expr xv = Load::make(DataType::Float(32, 16), a->data, idx);
  Stmt body = loop(v, n / 16, Store::make(out->data, tanh(xv), idx));
  runtime::Module m = build({fb.make("vtanh", body)}, host());
  EXPECT_EQ(codegen::get_source(m, "ll").find("tanhf"), std::string::npos);
  NDArray av = random_f32({n}, 21, -12.f, 12.f);
  float* x = av.data_as<float>();
  x[0] = 0.0f;
  x[1] = 1e-5f;
  x[2] = -3e-4f;
  x[3] = std::numeric_limits<float>::infinity();
  x[4] = -std::numeric_limits<float>::infinity();
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[6] = 7.9f;
  x[7] = -0.55f;
  NDArray ov = poisoned({n}, DataType::Float(32));
  m.get_function("vtanh")(av, ov);
  const float* o = ov.data_as<float>();
  EXPECT_TRUE(std::isnan(o[5]));
  EXPECT_EQ(o[3], 1.0f);
  EXPECT_EQ(o[4], -1.0f);
  for (int k = 0; k < n; ++k) {
    if (k == 5) continue;
    double want = std::tanh(static_cast<double>(x[k]));
    EXPECT_NEAR(o[k], want, 4e-7 + 2e-6 * std::fabs(want)) << "x = " << x[k];
  }
}

TEST(CodegenLLVM, ExpAndErfF32AreInlineAndAccurate) {
  // float32 exp and erf are computed inline (no expf / erff call per lane): exp within 2e-7
  // relatively of std::exp (0 below -104, +inf above ln(FLT_MAX), denormal results kept), erf
  // within 5e-7 absolutely of std::erf; NaN through, infinities to their limits.
  const int n = 512;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {n});
  Buffer out = fb.buffer("Out", DataType::Float(32), {2, n});
  Var v("v");
  Expr idx = Ramp::make(v * 16, Expr(1), 16);
  Expr xv = Load::make(DataType::Float(32, 16), a->data, idx);
  Stmt body = loop(v, n / 16,
                   SeqStmt::make({Store::make(out->data, exp(xv), idx),
                                  Store::make(out->data, erf(xv), idx + Expr(n))}));
  runtime::Module m = build({fb.make("vexp_erf", body)}, host());
  const std::string ll = codegen::get_source(m, "ll");
  EXPECT_EQ(ll.find("expf"), std::string::npos);
  EXPECT_EQ(ll.find("llvm.exp."), std::string::npos);
  EXPECT_EQ(ll.find("erff"), std::string::npos);
  NDArray av = random_f32({n}, 22, -30.f, 30.f);
  float* x = av.data_as<float>();
  const float special[] = {0.0f,
                           -0.0f,
                           1e-6f,
                           -1e-6f,
                           88.7f,
                           89.0f,
                           -87.5f,
                           -100.0f,
                           -104.5f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           3.99f,
                           -4.5f,
                           0.5f,
                           -2.0f};
  std::copy(std::begin(special), std::end(special), x);
  NDArray ov = poisoned({2, n}, DataType::Float(32));
  m.get_function("vexp_erf")(av, ov);
  const float* o = ov.data_as<float>();
  for (int k = 0; k < n; ++k) {
    if (std::isnan(x[k])) {
      EXPECT_TRUE(std::isnan(o[k]) && std::isnan(o[n + k]));
      continue;
    }
    const double e = std::exp(static_cast<double>(x[k]));
    if (e > std::numeric_limits<float>::max()) {
      EXPECT_EQ(o[k], std::numeric_limits<float>::infinity()) << "exp(" << x[k] << ")";
    } else {
      // Denormal results keep their absolute accuracy (a few units of the smallest denormal).
      EXPECT_NEAR(o[k], e, 2e-7 * e + 3e-45) << "exp(" << x[k] << ")";
    }
    EXPECT_NEAR(o[n + k], std::erf(static_cast<double>(x[k])), 5e-7) << "erf(" << x[k] << ")";
  }
}

TEST(CodegenLLVM, SigmoidF32IsInlineAndAccurate) {
  // float32 sigmoid is one intrinsic computed inline, in vectors and in scalars: within
  // 2e-7 relatively of 1 / (1 + exp(-x)) down to 1e-30, below that within 1e-38 absolutely
  // (0 below -88.4); 0 at -inf, 1 at +inf, NaN through.
  const int n = 512;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {n});
  Buffer out = fb.buffer("Out", DataType::Float(32), {2, n});
  Var v("v"), s("s");
  Expr idx = Ramp::make(v * 8, Expr(1), 8);
  Expr xv = Load::make(DataType::Float(32, 8), a->data, idx);
  Stmt body = SeqStmt::make({loop(v, n / 8, Store::make(out->data, sigmoid(xv), idx)),
                             loop(s, n, Store::make(out->data, sigmoid(a.load({s})), s + n))});
  runtime::Module m = build({fb.make("vsigmoid", body)}, host());
  const std::string ll = codegen::get_source(m, "ll");
  EXPECT_EQ(ll.find("expf"), std::string::npos);
  EXPECT_EQ(ll.find("llvm.exp."), std::string::npos);
  NDArray av = random_f32({n}, 23, -40.f, 40.f);
  float* x = av.data_as<float>();
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {
      0.0f,   -0.0f,  1e-6f, -1e-6f, 16.0f,  17.5f, 30.0f, -69.0f,
      -87.5f, -88.5f, 90.0f, -100.f, -200.f, inf,   -inf,  std::numeric_limits<float>::quiet_NaN(),
      0.5f,   -2.0f,  5.0f,  -5.0f};
  std::copy(std::begin(special), std::end(special), x);
  NDArray ov = poisoned({2, n}, DataType::Float(32));
  m.get_function("vsigmoid")(av, ov);
  const float* o = ov.data_as<float>();
  for (int k = 0; k < n; ++k) {
    for (int form = 0; form < 2; ++form) {
      const float got = o[form * n + k];
      SCOPED_TRACE(::testing::Message()
                   << (form ? "scalar" : "vector") << " sigmoid(" << x[k] << ")");
      if (std::isnan(x[k])) {
        EXPECT_TRUE(std::isnan(got));
        continue;
      }
      const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x[k])));
      EXPECT_NEAR(got, want, want > 1e-30 ? 2e-7 * want : 1e-38);
    }
  }
  EXPECT_EQ(o[13], 1.0f);  // +inf
  EXPECT_EQ(o[14], 0.0f);  // -inf
}

TEST(CodegenLLVM, SigmoidF64IsOneOverOnePlusExp) {
  const int n = 64;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(64), {n});
  Buffer out = fb.buffer("Out", DataType::Float(64), {n});
  Var i("i");
  runtime::Module m = build(
      {fb.make("sigmoid64", loop(i, n, Store::make(out->data, sigmoid(a.load({i})), i)))}, host());
  NDArray av = NDArray::empty({n}, DataType::Float(64));
  double* x = av.data_as<double>();
  for (int k = 0; k < n; ++k) x[k] = (k - 32) * 1.37 + 0.01 * k * k;
  NDArray ov = poisoned({n}, DataType::Float(64));
  m.get_function("sigmoid64")(av, ov);
  for (int k = 0; k < n; ++k) {
    const double want = 1.0 / (1.0 + std::exp(-x[k]));
    EXPECT_NEAR(ov.data_as<double>()[k], want, 1e-15 * want) << "sigmoid(" << x[k] << ")";
  }
}

TEST(CodegenLLVM, SelectAndIfThenElse) {
  const int n = 100;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {n});
  Buffer b = fb.buffer("B", DataType::Float(32), {n});
  Buffer c = fb.buffer("C", DataType::Float(32), {n});
  Var i("i");
  Expr x = a.load({i});
  // B: leaky relu via select; C: A[i+1] guarded by if_then_else (never reads A[n]).
  Stmt body = loop(i, n,
                   SeqStmt::make({
                       b.store({i}, select(x > 0.0f, x, x * 0.1f)),
                       c.store({i}, if_then_else(likely(i < n - 1), a.load({i + 1}), Expr(-7.0f))),
                   }));
  auto f = build_one(fb.make("sel", body));
  NDArray av = random_f32({n}, 14), bv = poisoned({n}, DataType::Float(32));
  NDArray cv = poisoned({n}, DataType::Float(32));
  f(av, bv, cv);
  const float* ap = av.data_as<float>();
  for (int k = 0; k < n; ++k) {
    ASSERT_EQ(bv.data_as<float>()[k], ap[k] > 0 ? ap[k] : ap[k] * 0.1f);
    ASSERT_EQ(cv.data_as<float>()[k], k < n - 1 ? ap[k + 1] : -7.0f);
  }
}

TEST(CodegenLLVM, ExternCalls) {
  const int n = 50;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {n});
  Buffer b = fb.buffer("B", DataType::Float(32), {n});
  Buffer c = fb.buffer("C", DataType::Float(32), {n});
  Var i("i");
  Stmt fill = Evaluate::make(
      Call::make(DataType::Void(), "kiln_test_fill_index", {c->data, Expr(n)}, CallKind::kExtern));
  Stmt body = loop(i, n,
                   b.store({i}, Call::make(DataType::Float(32), "kiln_test_square_plus",
                                           {a.load({i}), c.load({i})}, CallKind::kPureExtern)));
  auto f = build_one(fb.make("ext", SeqStmt::make({fill, body})));
  NDArray av = random_f32({n}, 15), bv = poisoned({n}, DataType::Float(32));
  NDArray cv = poisoned({n}, DataType::Float(32));
  f(av, bv, cv);
  for (int k = 0; k < n; ++k) {
    float ak = av.data_as<float>()[k];
    ASSERT_EQ(cv.data_as<float>()[k], k * 0.5f);
    ASSERT_EQ(bv.data_as<float>()[k], ak * ak + k * 0.5f);
  }
}

TEST(CodegenLLVM, ScalarArgumentsAndLet) {
  const int n = 40;
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {n});
  Buffer b = fb.buffer("B", DataType::Int(64), {n});
  Var scale = fb.scalar("scale", DataType::Float(64));
  Var shift = fb.scalar("shift", DataType::Int(32));
  Var i("i"), t("t", DataType::Int(64));
  Expr v = cast(DataType::Int(64), cast(DataType::Float(64), a.load({i})) * scale);
  Stmt body = loop(i, n,
                   LetStmt::make(t, v,
                                 b.store({i}, Let::make(Var("u", DataType::Int(64)), t,
                                                        t + cast(DataType::Int(64), shift)))));
  auto f = build_one(fb.make("scal", body));
  NDArray av = random_f32({n}, 16, -100.f, 100.f);
  NDArray bv = poisoned({n}, DataType::Int(64));
  f(av, bv, 3.25, 7);
  for (int k = 0; k < n; ++k) {
    int64_t want = static_cast<int64_t>(static_cast<double>(av.data_as<float>()[k]) * 3.25) + 7;
    ASSERT_EQ(bv.data_as<int64_t>()[k], want);
  }
}

TEST(CodegenLLVM, AssertMessage) {
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {4});
  Var n = fb.scalar("n", DataType::Int(32));
  Stmt body = AssertStmt::make(n > 0, StringImm::make("assert_fn: n must be positive"),
                               a.store({Expr(0)}, cast(DataType::Float(32), n)));
  auto f = build_one(fb.make("assert_fn", body));
  NDArray av = poisoned({4}, DataType::Float(32));
  f(av, 3);
  EXPECT_EQ(av.data_as<float>()[0], 3.0f);
  EXPECT_EQ(error_of([&] { f(av, -1); }), "assert_fn: n must be positive");
}

TEST(CodegenLLVM, FastMathOnlyWhenAsked) {
  tir::PrimFunc plain = make_add("fm_off", 4, 4);
  tir::PrimFunc fast = make_add("fm_on", 4, 4).with_attr("fast_math", "1");
  std::string off = codegen::get_source(build({plain}, host()), "ll");
  std::string on = codegen::get_source(build({fast}, host()), "ll");
  EXPECT_EQ(off.find("fadd fast"), std::string::npos);
  EXPECT_NE(on.find("fast"), std::string::npos) << on;
}

/// S[0] = the sum of A [4, 8] in row order (float additions in order: nothing to vectorize),
/// the loops i (4) and j (8); `pragma_i` puts pragma(i, "no_unroll") directly inside i's loop,
/// as te's Stage::pragma does.
tir::PrimFunc make_ordered_sum(const std::string& name, bool pragma_i) {
  FuncBuilder fb;
  Buffer a = fb.buffer("A", DataType::Float(32), {4, 8});
  Buffer s = fb.buffer("S", DataType::Float(32), {1});
  Var i("i"), j("j");
  Stmt row = loop(j, 8, s.store({0}, s.load({0}) + a.load({i, j})));
  if (pragma_i) {
    IterVar iv(Range(Expr(0), Expr(4)), i, IterVarType::kDataPar);
    row = AttrStmt::make(iv, attr::kPragmaNoUnroll, Expr(1), row);
  }
  return fb.make(name, SeqStmt::make({s.store({0}, Expr(0.0f)), loop(i, 4, row)}));
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CodegenLLVM, NoUnrollPragmaOnAnAxisKeepsThatLoopRolled) {
  // Without the pragma LLVM unrolls both short loops: 32 additions in a row. With it on i,
  // i stays a loop (unroll disabled) and j, inside, is unrolled as before: 8 additions.
  runtime::Module plain = build({make_ordered_sum("sum_plain", false)}, host());
  runtime::Module rolled = build({make_ordered_sum("sum_rolled", true)}, host());
  const std::string lp = codegen::get_source(plain, "ll"), lr = codegen::get_source(rolled, "ll");
  EXPECT_EQ(count(lp, "fadd float"), 32u) << lp;
  EXPECT_EQ(count(lr, "fadd float"), 8u) << lr;
  EXPECT_EQ(count(lp, "llvm.loop.unroll.disable"), 0u) << lp;
  EXPECT_NE(lr.find("llvm.loop.unroll.disable"), std::string::npos) << lr;
  NDArray a = random_f32({4, 8}, 23);
  float want = 0.0f;
  for (int64_t k = 0; k < 32; ++k) want += a.data_as<float>()[k];
  for (runtime::Module* m : {&plain, &rolled}) {
    NDArray s = poisoned({1}, DataType::Float(32));
    m->get_function(m == &plain ? "sum_plain" : "sum_rolled")(a, s);
    EXPECT_EQ(s.data_as<float>()[0], want);
  }
}

TEST(CodegenLLVM, SeveralFunctionsInOneModule) {
  runtime::Module m = build({make_add("f1", 2, 3), make_add("f2", 3, 2)}, host());
  EXPECT_EQ(m.function_names(), (std::vector<std::string>{"f1", "f2"}));
  NDArray a = random_f32({3, 2}, 17), b = random_f32({3, 2}, 18);
  NDArray c = poisoned({3, 2}, DataType::Float(32));
  m.get_function("f2")(a, b, c);
  EXPECT_EQ(c.data_as<float>()[5], a.data_as<float>()[5] + b.data_as<float>()[5]);
  EXPECT_NE(error_of([&] {
              build({make_add("dup", 1, 1), make_add("dup", 1, 1)}, host());
            }).find("two functions are named 'dup'"),
            std::string::npos);
}

// --- argument checks

class ArgChecks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    FuncBuilder fb;
    Buffer a = fb.buffer("A", DataType::Float(32), {4, 8});
    Buffer b = fb.buffer("B", DataType::Float(32), {8, 16});
    Buffer c = fb.buffer("C", DataType::Float(32), {4, 16});
    Var i("i"), j("j"), k("k");
    Stmt body =
        loop(i, 4,
             loop(j, 16,
                  SeqStmt::make({
                      c.store({i, j}, Expr(0.0f)),
                      loop(k, 8, c.store({i, j}, c.load({i, j}) + a.load({i, k}) * b.load({k, j}))),
                  })));
    fn_ = new runtime::PackedFunc(build_one(fb.make("matmul", body)));
  }
  static void TearDownTestSuite() {
    delete fn_;
    fn_ = nullptr;
  }
  static runtime::PackedFunc* fn_;
  NDArray a = random_f32({4, 8}, 20), b = random_f32({8, 16}, 21);
  NDArray c = poisoned({4, 16}, DataType::Float(32));
};
runtime::PackedFunc* ArgChecks::fn_ = nullptr;

TEST_F(ArgChecks, CorrectCallComputesMatmul) {
  (*fn_)(a, b, c);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 16; ++j) {
      float s = 0;
      for (int k = 0; k < 8; ++k)
        s += a.data_as<float>()[i * 8 + k] * b.data_as<float>()[k * 16 + j];
      ASSERT_NEAR(c.data_as<float>()[i * 16 + j], s, 1e-5f);
    }
  }
}

TEST_F(ArgChecks, WrongArgumentCount) {
  EXPECT_EQ(error_of([&] { (*fn_)(a, b); }), "matmul: expected 3 arguments, got 2");
}

TEST_F(ArgChecks, WrongTypeCode) {
  EXPECT_EQ(error_of([&] { (*fn_)(a, 5, c); }),
            "matmul: argument 1 (B): type code expected array, got int");
}

TEST_F(ArgChecks, WrongNDim) {
  NDArray b1 = random_f32({128}, 22);
  EXPECT_EQ(error_of([&] { (*fn_)(a, b1, c); }), "matmul: argument 1 (B): ndim expected 2, got 1");
}

TEST_F(ArgChecks, WrongDType) {
  NDArray ai = random_i32({4, 8}, 23, 0, 5);
  EXPECT_EQ(error_of([&] { (*fn_)(ai, b, c); }),
            "matmul: argument 0 (A): dtype expected float32, got int32");
}

TEST_F(ArgChecks, WrongShape) {
  NDArray c2 = poisoned({4, 8}, DataType::Float(32));
  EXPECT_EQ(error_of([&] { (*fn_)(a, b, c2); }),
            "matmul: argument 2 (C): shape[1] expected 16, got 8");
}

TEST_F(ArgChecks, NonCompactStridesAndMisalignedData) {
  KilnArray view = *a.raw();
  int64_t strides[2] = {16, 1};
  view.strides = strides;
  EXPECT_EQ(error_of([&] { (*fn_)(&view, b, c); }),
            "matmul: argument 0 (A): strides[0] expected 8, got 16");
  int64_t compact[2] = {8, 1};
  view.strides = compact;
  (*fn_)(&view, b, c);  // explicit compact strides are fine
  view.strides = nullptr;
  view.byte_offset = 4;
  std::string msg = error_of([&] { (*fn_)(&view, b, c); });
  EXPECT_EQ(msg.rfind("matmul: argument 0 (A): data pointer expected 64-byte aligned, got 0x", 0),
            0u)
      << msg;
}

TEST_F(ArgChecks, WrongDevice) {
  KilnArray view = *c.raw();
  view.device.device_type = kKilnCUDA;
  EXPECT_EQ(error_of([&] { (*fn_)(a, b, &view); }),
            "matmul: argument 2 (C): device expected cpu, got cuda");
}

TEST(CodegenLLVM, CrossCompileToAArch64) {
  Target t("llvm -mtriple=aarch64-linux-gnu");
  runtime::Module m = build({make_add("add_arm", 4, 4)}, t);
  std::string s = codegen::get_source(m, "asm");
  EXPECT_NE(s.find("add_arm:"), std::string::npos);
  EXPECT_NE(s.find("ret"), std::string::npos);
  EXPECT_NE(error_of([&] { m.get_function("add_arm"); }).find("cannot run on this machine"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

TEST(CodegenLLVM, ExportLibraryRoundTrip) {
  runtime::Module m = build({make_add("add_export", 5, 7)}, host());
  std::string dir = ::testing::TempDir();
  std::string path = dir + "/kiln_codegen_export_test.so";
  m.export_library(path);
  runtime::Module loaded = runtime::Module::load(path);
  EXPECT_EQ(loaded.function_names(), std::vector<std::string>{"add_export"});
  NDArray a = random_f32({5, 7}, 30), b = random_f32({5, 7}, 31);
  NDArray c = poisoned({5, 7}, DataType::Float(32));
  loaded.get_function("add_export")(a, b, c);
  for (int k = 0; k < 35; ++k) {
    ASSERT_EQ(c.data_as<float>()[k], a.data_as<float>()[k] + b.data_as<float>()[k]);
  }
  std::remove(path.c_str());
  std::string msg = error_of([&] { m.export_library("/nonexistent-dir/x.so"); });
  EXPECT_EQ(msg.rfind("export_library: linking '/nonexistent-dir/x.so' failed (cc exited with "
                      "status 1): ",
                      0),
            0u)
      << msg;
}

TEST(MakePackedApi, SignatureAndIdempotence) {
  tir::PrimFunc f = tir::make_packed_api(make_add("pk", 2, 2));
  ASSERT_EQ(f->params.size(), 3u);
  EXPECT_EQ(f->params[0].name(), "args");
  EXPECT_EQ(f->params[1].name(), "type_codes");
  EXPECT_EQ(f->params[2].dtype(), DataType::Int(32));
  EXPECT_EQ(f.attr("packed_api"), "1");
  EXPECT_TRUE(tir::make_packed_api(f).same_as(f));
  FuncBuilder fb;
  fb.scalar("p", DataType::Handle());
  EXPECT_EQ(error_of([&] { tir::make_packed_api(fb.make("bad", Evaluate::make(Expr(0)))); }),
            "make_packed_api: bad: parameter 0 (p) is a handle without a buffer in buffer_map");
}

}  // namespace
}  // namespace kiln::testing
