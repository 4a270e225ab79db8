// End-to-end numerical tests: tensor expressions scheduled with every primitive, lowered,
// compiled by the LLVM code generator and run on seeded random inputs (never zeros) against
// naive C++ loops, with outputs poisoned before every call.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "e2e/e2e_util.h"
#include "kiln/target/codegen.h"

namespace kiln::e2e {
namespace {

using namespace kiln::te;  // NOLINT
using ir::Expr;
using ir::Var;

const DataType f32 = DataType::Float(32);

/// Builds, runs and compares one output against `want`; prints the lowered IR on mismatch.
void expect_output(const Schedule& s, const std::vector<Tensor>& args,
                   const std::vector<NDArray>& inputs, const NDArray& want, Tolerance tol = {}) {
  std::vector<NDArray> out = build_and_run(s, args, inputs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(all_close(out[0], want, tol)) << "lowered IR:\n" << lowered_text(s, args);
}

// ---------------------------------------------------------------------------------------------
// Elementwise and broadcast

TEST(E2EElementwise, AddMulExpSelect) {
  const int n = 7, m = 33;
  auto A = placeholder({n, m}, f32, "A");
  auto B = placeholder({n, m}, f32, "B");
  NDArray a = random_array({n, m}, f32, 1), b = random_array({n, m}, f32, 2);
  struct Case {
    std::string name;
    std::function<Expr(Var, Var)> body;
    std::function<double(double, double)> ref;
  };
  std::vector<Case> cases = {
      {"add", [&](Var i, Var j) { return A(i, j) + B(i, j); },
       [](double x, double y) { return x + y; }},
      {"mul", [&](Var i, Var j) { return A(i, j) * B(i, j); },
       [](double x, double y) { return x * y; }},
      {"exp", [&](Var i, Var j) { return ir::exp(A(i, j)) - B(i, j); },
       [](double x, double y) { return std::exp(x) - y; }},
      {"select",
       [&](Var i, Var j) { return ir::select(A(i, j) > B(i, j), A(i, j), B(i, j) * 2.0f); },
       [](double x, double y) { return x > y ? x : y * 2; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto C = compute({n, m}, c.body, c.name);
    auto s = create_schedule({C});
    NDArray want = reference(
        {n, m}, f32, [&](const std::vector<int64_t>& ix) { return c.ref(at(a, ix), at(b, ix)); });
    expect_output(s, {A, B, C}, {a, b}, want);
  }
}

TEST(E2EElementwise, BroadcastRowAndColumn) {
  const int n = 9, m = 21;
  auto A = placeholder({n, m}, f32, "A");
  auto row = placeholder({m}, f32, "row");
  auto col = placeholder({n, 1}, f32, "col");
  auto C = compute(
      {n, m}, [&](Var i, Var j) { return A(i, j) + row(j) * col(i, 0); }, "C");
  NDArray a = random_array({n, m}, f32, 3), r = random_array({m}, f32, 4),
          c = random_array({n, 1}, f32, 5);
  NDArray want = reference({n, m}, f32, [&](const std::vector<int64_t>& ix) {
    return at(a, ix) + at(r, {ix[1]}) * at(c, {ix[0], 0});
  });
  auto s = create_schedule({C});
  expect_output(s, {A, row, col, C}, {a, r, c}, want);
}

// ---------------------------------------------------------------------------------------------
// Reductions along each axis of a 3-D tensor

TEST(E2EReduce, EachAxisEachReducer) {
  const std::vector<int64_t> shp = {5, 6, 7};
  auto A = placeholder({5, 6, 7}, f32, "A");
  // Values near 1 keep products of 7 terms well scaled.
  NDArray a = random_array(shp, f32, 6, 0.6, 1.4);
  using RFn = std::function<Expr(Expr, std::vector<IterVar>)>;
  struct R {
    std::string name;
    RFn fn;
    double init;
    std::function<double(double, double)> comb;
  };
  std::vector<R> reducers = {
      {"sum", [](Expr e, std::vector<IterVar> k) { return te::sum(e, k); }, 0.0,
       [](double x, double y) { return x + y; }},
      {"max", [](Expr e, std::vector<IterVar> k) { return te::max(e, k); }, -1e30,
       [](double x, double y) { return std::max(x, y); }},
      {"min", [](Expr e, std::vector<IterVar> k) { return te::min(e, k); }, 1e30,
       [](double x, double y) { return std::min(x, y); }},
      {"prod", [](Expr e, std::vector<IterVar> k) { return te::prod(e, k); }, 1.0,
       [](double x, double y) { return x * y; }},
  };
  for (const R& r : reducers) {
    for (int axis = 0; axis < 3; ++axis) {
      for (bool keepdims : {false, true}) {
        SCOPED_TRACE(r.name + " axis " + std::to_string(axis) + (keepdims ? " keepdims" : ""));
        auto k = reduce_axis({0, static_cast<int>(shp[axis])}, "k");
        std::vector<Expr> oshape;
        std::vector<int64_t> oshp;
        for (int d = 0; d < 3; ++d) {
          if (d != axis) {
            oshape.push_back(static_cast<int>(shp[d]));
            oshp.push_back(shp[d]);
          } else if (keepdims) {
            oshape.push_back(1);
            oshp.push_back(1);
          }
        }
        auto C = compute(oshape, FCompute([&](const std::vector<Var>& v) {
                           std::vector<Expr> idx;
                           size_t p = 0;
                           for (int d = 0; d < 3; ++d) {
                             if (d == axis) {
                               idx.push_back(k);
                               if (keepdims) ++p;
                             } else {
                               idx.push_back(v[p++]);
                             }
                           }
                           return r.fn(A(idx), {k});
                         }),
                         "C");
        auto s = create_schedule({C});
        NDArray want = reference(oshp, f32, [&](const std::vector<int64_t>& o) {
          std::vector<int64_t> ix(3);
          size_t p = 0;
          for (int d = 0; d < 3; ++d) {
            if (d == axis) {
              if (keepdims) ++p;
            } else {
              ix[d] = o[p++];
            }
          }
          double acc = r.init;
          for (int64_t q = 0; q < shp[axis]; ++q) {
            ix[axis] = q;
            acc = r.comb(acc, at(a, ix));
          }
          return acc;
        });
        expect_output(s, {A, C}, {a}, want, {1e-5, 1e-5});
      }
    }
  }
}

TEST(E2EReduce, TwoAxesAtOnce) {
  auto A = placeholder({4, 11, 13}, f32, "A");
  auto k1 = reduce_axis({0, 11}, "k1");
  auto k2 = reduce_axis({0, 13}, "k2");
  auto C = compute(
      {4},
      [&](Var i) {
        return te::sum(A(i, k1, k2), {k1, k2});
      },
      "C");
  NDArray a = random_array({4, 11, 13}, f32, 7);
  NDArray want = reference({4}, f32, [&](const std::vector<int64_t>& o) {
    double acc = 0;
    for (int64_t p = 0; p < 11; ++p)
      for (int64_t q = 0; q < 13; ++q) acc += at(a, {o[0], p, q});
    return acc;
  });
  auto s = create_schedule({C});
  auto [ko, ki] = s[C].split(k2, 4);
  s[C].reorder({ko, k1, ki});
  expect_output(s, {A, C}, {a}, want, {1e-5, 1e-4});
}

// ---------------------------------------------------------------------------------------------
// Matmul with each primitive

/// C[y, x] = sum_k Ap(., .) * B[k, x] with Ap = A * 0.5 (an intermediate stage for
/// compute_at / compute_inline / set_scope / storage_align to act on). With `trans_a`, A is
/// stored K x N and read as A[k, y] (the paper's A^T B).
struct Matmul {
  int n, m, kk;
  bool trans_a;
  Tensor A, B, Ap, C;
  IterVar k;

  Matmul(int n_, int m_, int k_, bool t) : n(n_), m(m_), kk(k_), trans_a(t) {
    A = t ? placeholder({kk, n}, f32, "A") : placeholder({n, kk}, f32, "A");
    B = placeholder({kk, m}, f32, "B");
    std::vector<Expr> ashape = A->shape;
    Ap = compute(
        ashape, [&](Var i, Var j) { return A(i, j) * 0.5f; }, "Ap");
    k = reduce_axis({0, kk}, "k");
    C = compute(
        {n, m},
        [&](Var y, Var x) { return te::sum((trans_a ? Ap(k, y) : Ap(y, k)) * B(k, x), {k}); }, "C");
  }

  void check(const Schedule& s, uint32_t seed) const {
    std::vector<int64_t> as = trans_a ? std::vector<int64_t>{kk, n} : std::vector<int64_t>{n, kk};
    NDArray a = random_array(as, f32, seed), b = random_array({kk, m}, f32, seed + 1);
    NDArray want = reference({n, m}, f32, [&](const std::vector<int64_t>& o) {
      double acc = 0;
      for (int64_t q = 0; q < kk; ++q) {
        double av = trans_a ? at(a, {q, o[0]}) : at(a, {o[0], q});
        acc += av * 0.5 * at(b, {q, o[1]});
      }
      return acc;
    });
    expect_output(s, {A, B, C}, {a, b}, want, {1e-4, 1e-4});
  }
};

struct PrimitiveCase {
  const char* name;
  std::function<void(Schedule&, Matmul&)> apply;
};

const std::vector<PrimitiveCase>& primitive_cases() {
  static const std::vector<PrimitiveCase> cases = {
      {"none", [](Schedule&, Matmul&) {}},
      {"split", [](Schedule& s, Matmul& mm) { s[mm.C].split(mm.C->axis[1], 8); }},
      {"split_reduce", [](Schedule& s, Matmul& mm) { s[mm.C].split(mm.C->reduce_axis[0], 5); }},
      {"split_nparts", [](Schedule& s, Matmul& mm) { s[mm.C].split_nparts(mm.C->axis[0], 3); }},
      {"tile", [](Schedule& s, Matmul& mm) { s[mm.C].tile(mm.C->axis[0], mm.C->axis[1], 8, 8); }},
      {"fuse", [](Schedule& s, Matmul& mm) { s[mm.C].fuse(mm.C->axis[0], mm.C->axis[1]); }},
      {"reorder",
       [](Schedule& s, Matmul& mm) {
         s[mm.C].reorder({mm.C->reduce_axis[0], mm.C->axis[1], mm.C->axis[0]});
       }},
      {"compute_at",
       [](Schedule& s, Matmul& mm) {
         auto [yo, xo, yi, xi] = s[mm.C].tile(mm.C->axis[0], mm.C->axis[1], 4, 8);
         s[mm.Ap].compute_at(s[mm.C], xo);
       }},
      {"compute_at_reduce_axis",
       [](Schedule& s, Matmul& mm) {
         auto [ko, ki] = s[mm.C].split(mm.C->reduce_axis[0], 4);
         s[mm.Ap].compute_at(s[mm.C], ko);
       }},
      {"compute_inline", [](Schedule& s, Matmul& mm) { s[mm.Ap].compute_inline(); }},
      {"compute_root",
       [](Schedule& s, Matmul& mm) {
         s[mm.Ap].compute_at(s[mm.C], mm.C->axis[0]);
         s[mm.Ap].compute_root();
       }},
      {"cache_read",
       [](Schedule& s, Matmul& mm) {
         Tensor BL = s.cache_read(mm.B, "local", {mm.C});
         auto [ko, ki] = s[mm.C].split(mm.C->reduce_axis[0], 4);
         s[BL].compute_at(s[mm.C], ko);
       }},
      {"cache_read_root", [](Schedule& s, Matmul& mm) { s.cache_read(mm.Ap, "global", {mm.C}); }},
      {"cache_write",
       [](Schedule& s, Matmul& mm) {
         Tensor CC = s.cache_write(mm.C, "local");
         auto ax = s[mm.C].op_axis();
         auto [yo, xo, yi, xi] = s[mm.C].tile(ax[0], ax[1], 8, 8);
         s[CC].compute_at(s[mm.C], xo);
         auto [ko, ki] = s[CC].split(s[CC].op_reduce_axis()[0], 4);
         s[CC].reorder({ko, ki, s[CC].op_axis()[0], s[CC].op_axis()[1]});
       }},
      {"set_scope", [](Schedule& s, Matmul& mm) { s[mm.Ap].set_scope("local"); }},
      {"set_scope_at",
       [](Schedule& s, Matmul& mm) {
         s[mm.Ap].set_scope("local");
         s[mm.Ap].compute_at(s[mm.C], mm.C->axis[0]);
       }},
      {"parallel",
       [](Schedule& s, Matmul& mm) {
         auto [yo, yi] = s[mm.C].split(mm.C->axis[0], 4);
         s[mm.C].parallel(yo);
         s[mm.Ap].parallel(mm.Ap->axis[0]);
       }},
      {"vectorize",
       [](Schedule& s, Matmul& mm) {
         auto [xo, xi] = s[mm.C].split(mm.C->axis[1], 16);
         s[mm.C].reorder({mm.C->axis[0], xo, mm.C->reduce_axis[0], xi});
         s[mm.C].vectorize(xi);
       }},
      {"unroll",
       [](Schedule& s, Matmul& mm) {
         auto [ko, ki] = s[mm.C].split(mm.C->reduce_axis[0], 4);
         s[mm.C].unroll(ki);
       }},
      {"pragma",
       [](Schedule& s, Matmul& mm) {
         s[mm.C].pragma(mm.C->axis[0], "auto_unroll_max_step", Expr(16));
         s[mm.C].pragma(mm.C->axis[1], "my_key");
       }},
      {"storage_align",
       [](Schedule& s, Matmul& mm) { s[mm.Ap].storage_align(mm.Ap->axis[0], 16, 3); }},
      {"storage_align_at",
       [](Schedule& s, Matmul& mm) {
         auto [yo, yi] = s[mm.C].split(mm.C->axis[0], 4);
         s[mm.Ap].compute_at(s[mm.C], yo);
         s[mm.Ap].storage_align(mm.Ap->axis[0], 8, 1);
       }},
      {"everything",
       [](Schedule& s, Matmul& mm) {
         Tensor CC = s.cache_write(mm.C, "local");
         auto ax = s[mm.C].op_axis();
         auto [yo, xo, yi, xi] = s[mm.C].tile(ax[0], ax[1], 8, 16);
         s[mm.C].parallel(yo);
         s[mm.C].vectorize(xi);
         s[CC].compute_at(s[mm.C], xo);
         auto cax = s[CC].op_axis();
         auto [ko, ki] = s[CC].split(s[CC].op_reduce_axis()[0], 4);
         s[CC].reorder({ko, ki, cax[0], cax[1]});
         s[CC].unroll(ki);
         s[CC].vectorize(cax[1]);
         s[mm.Ap].compute_inline();
       }},
  };
  return cases;
}

struct MatmulParam {
  int n, m, k;
  bool trans_a;
  size_t prim;
};

class E2EMatmul : public ::testing::TestWithParam<MatmulParam> {};

TEST_P(E2EMatmul, MatchesNaive) {
  MatmulParam p = GetParam();
  Matmul mm(p.n, p.m, p.k, p.trans_a);
  Schedule s = create_schedule({mm.C});
  primitive_cases()[p.prim].apply(s, mm);
  mm.check(s, 100 + static_cast<uint32_t>(p.prim));
}

std::vector<MatmulParam> matmul_params() {
  std::vector<MatmulParam> out;
  for (size_t i = 0; i < primitive_cases().size(); ++i) {
    out.push_back({37, 29, 53, false, i});
    out.push_back({32, 48, 64, true, i});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Primitives, E2EMatmul, ::testing::ValuesIn(matmul_params()),
                         [](const ::testing::TestParamInfo<MatmulParam>& info) {
                           const MatmulParam& p = info.param;
                           return std::string(primitive_cases()[p.prim].name) +
                                  (p.trans_a ? "_AtB_" : "_AB_") + std::to_string(p.n) + "x" +
                                  std::to_string(p.m) + "x" + std::to_string(p.k);
                         });

// ---------------------------------------------------------------------------------------------
// conv2d NCHW with a padding stage

struct Conv {
  int stride;
  static constexpr int N = 1, CI = 3, CO = 8, H = 13, W = 13, KH = 3, KW = 3, P = 1;
  int OH, OW;
  Tensor A, Wt, Apad, Out;

  explicit Conv(int s) : stride(s) {
    OH = (H + 2 * P - KH) / stride + 1;
    OW = (W + 2 * P - KW) / stride + 1;
    A = placeholder({N, CI, H, W}, f32, "A");
    Wt = placeholder({CO, CI, KH, KW}, f32, "W");
    Apad = compute(
        {N, CI, H + 2 * P, W + 2 * P},
        [&](Var n, Var c, Var h, Var w) {
          Expr inb = h >= P && h < H + P && w >= P && w < W + P;
          return ir::if_then_else(inb, A(n, c, h - P, w - P), Expr(0.0f));
        },
        "Apad");
    auto rc = reduce_axis({0, CI}, "rc");
    auto ry = reduce_axis({0, KH}, "ry");
    auto rx = reduce_axis({0, KW}, "rx");
    int st = stride;
    Out = compute(
        {N, CO, OH, OW},
        [&](Var n, Var f, Var y, Var x) {
          return te::sum(Apad(n, rc, y * st + ry, x * st + rx) * Wt(f, rc, ry, rx), {rc, ry, rx});
        },
        "conv");
  }

  void check(const Schedule& s) const {
    NDArray a = random_array({N, CI, H, W}, f32, 11), w = random_array({CO, CI, KH, KW}, f32, 12);
    NDArray want = reference({N, CO, OH, OW}, f32, [&](const std::vector<int64_t>& o) {
      double acc = 0;
      for (int c = 0; c < CI; ++c)
        for (int ky = 0; ky < KH; ++ky)
          for (int kx = 0; kx < KW; ++kx) {
            int64_t h = o[2] * stride + ky - P, x = o[3] * stride + kx - P;
            if (h < 0 || h >= H || x < 0 || x >= W) continue;
            acc += at(a, {o[0], c, h, x}) * at(w, {o[1], c, ky, kx});
          }
      return acc;
    });
    expect_output(s, {A, Wt, Out}, {a, w}, want, {1e-5, 1e-5});
  }
};

class E2EConv : public ::testing::TestWithParam<int> {};

TEST_P(E2EConv, Plain) {
  Conv c(GetParam());
  c.check(create_schedule({c.Out}));
}

TEST_P(E2EConv, InlinePad) {
  Conv c(GetParam());
  auto s = create_schedule({c.Out});
  s[c.Apad].compute_inline();
  c.check(s);
}

TEST_P(E2EConv, PadComputedAtRow) {
  Conv c(GetParam());
  auto s = create_schedule({c.Out});
  s[c.Apad].compute_at(s[c.Out], c.Out->axis[2]);
  c.check(s);
}

TEST_P(E2EConv, PadComputedAtTiledOutput) {
  Conv c(GetParam());
  auto s = create_schedule({c.Out});
  auto ax = c.Out->axis;
  auto [yo, xo, yi, xi] = s[c.Out].tile(ax[2], ax[3], 4, 4);
  s[c.Apad].compute_at(s[c.Out], xo);
  s[c.Out].vectorize(xi);
  s[c.Out].parallel(ax[1]);
  c.check(s);
}

INSTANTIATE_TEST_SUITE_P(Stride, E2EConv, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "stride" + std::to_string(i.param);
                         });

// ---------------------------------------------------------------------------------------------
// Pipelines and non-divisible splits

struct Pipeline {
  static constexpr int n = 23, m = 37;
  Tensor A, B, C;
  Pipeline() {
    A = placeholder({n, m}, f32, "A");
    B = compute(
        {n, m}, [&](Var i, Var j) { return A(i, j) * 2.0f + 1.0f; }, "B");
    // Reads B at a neighbour (clamped) so that compute_at must widen B's region.
    C = compute(
        {n, m}, [&](Var i, Var j) { return B(i, j) * B(i, ir::min(j + 1, Expr(m - 1))) + A(i, j); },
        "C");
  }
  void check(const Schedule& s) const {
    NDArray a = random_array({n, m}, f32, 21);
    NDArray want = reference({n, m}, f32, [&](const std::vector<int64_t>& o) {
      auto b = [&](int64_t i, int64_t j) { return at(a, {i, j}) * 2 + 1; };
      return b(o[0], o[1]) * b(o[0], std::min<int64_t>(o[1] + 1, m - 1)) + at(a, o);
    });
    expect_output(s, {A, C}, {a}, want);
  }
};

TEST(E2EPipeline, Root) {
  Pipeline p;
  p.check(create_schedule({p.C}));
}

TEST(E2EPipeline, ComputeAtInnerLoop) {
  Pipeline p;
  auto s = create_schedule({p.C});
  auto [jo, ji] = s[p.C].split(p.C->axis[1], 8);
  s[p.B].compute_at(s[p.C], jo);
  p.check(s);
}

TEST(E2EPipeline, ComputeAtOuterLoop) {
  Pipeline p;
  auto s = create_schedule({p.C});
  s[p.B].compute_at(s[p.C], p.C->axis[0]);
  p.check(s);
}

TEST(E2EPipeline, ComputeAtInnermostLoop) {
  Pipeline p;
  auto s = create_schedule({p.C});
  s[p.B].compute_at(s[p.C], p.C->axis[1]);
  p.check(s);
}

TEST(E2EPipeline, ComputeInline) {
  Pipeline p;
  auto s = create_schedule({p.C});
  s[p.B].compute_inline();
  p.check(s);
}

TEST(E2ESplit, NonDivisible) {
  const int n = 37;
  auto A = placeholder({n}, f32, "A");
  NDArray a = random_array({n}, f32, 31);
  NDArray want =
      reference({n}, f32, [&](const std::vector<int64_t>& o) { return std::exp(at(a, o)) * 3; });
  struct Case {
    const char* name;
    std::function<void(Schedule&, const Tensor&)> apply;
  };
  std::vector<Case> cases = {
      {"by8", [](Schedule& s, const Tensor& C) { s[C].split(C->axis[0], 8); }},
      {"by5_fuse",
       [](Schedule& s, const Tensor& C) {
         auto [o, i] = s[C].split(C->axis[0], 5);
         s[C].fuse(o, i);
       }},
      {"by8_then_inner_by3",
       [](Schedule& s, const Tensor& C) {
         auto [o, i] = s[C].split(C->axis[0], 8);
         s[C].split(i, 3);
       }},
      {"by8_then_outer_by3",
       [](Schedule& s, const Tensor& C) {
         auto [o, i] = s[C].split(C->axis[0], 8);
         s[C].split(o, 3);
       }},
      {"nparts6", [](Schedule& s, const Tensor& C) { s[C].split_nparts(C->axis[0], 6); }},
      {"by64_larger_than_extent", [](Schedule& s, const Tensor& C) { s[C].split(C->axis[0], 64); }},
      {"by5_reorder",
       [](Schedule& s, const Tensor& C) {
         auto [o, i] = s[C].split(C->axis[0], 5);
         s[C].reorder({i, o});
       }},
      {"by8_vectorize",
       [](Schedule& s, const Tensor& C) {
         auto [o, i] = s[C].split(C->axis[0], 8);
         s[C].vectorize(i);
       }},
      {"by7_unroll",
       [](Schedule& s, const Tensor& C) {
         auto [o, i] = s[C].split(C->axis[0], 7);
         s[C].unroll(i);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto C = compute(
        {n}, [&](Var i) { return ir::exp(A(i)) * 3.0f; }, "C");
    auto s = create_schedule({C});
    c.apply(s, C);
    expect_output(s, {A, C}, {a}, want);
  }
}

TEST(E2ESplit, NonDivisible2DFuseThenSplit) {
  const int n = 37, m = 29;
  auto A = placeholder({n, m}, f32, "A");
  auto C = compute(
      {n, m}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "C");
  auto s = create_schedule({C});
  auto f = s[C].fuse(C->axis[0], C->axis[1]);
  auto [o, i] = s[C].split(f, 6);
  auto [oo, oi] = s[C].split(o, 7);
  s[C].parallel(oo);
  s[C].vectorize(i);
  NDArray a = random_array({n, m}, f32, 32);
  expect_output(s, {A, C}, {a}, reference({n, m}, f32, [&](const std::vector<int64_t>& ix) {
                  return at(a, ix) + 1;
                }));
}

TEST(E2EAnnotate, VectorizeInnerParallelOuter) {
  const int n = 64, m = 67;
  auto A = placeholder({n, m}, f32, "A");
  auto B = placeholder({m}, f32, "B");
  auto C = compute(
      {n, m}, [&](Var i, Var j) { return A(i, j) * B(j) + 0.5f; }, "C");
  auto s = create_schedule({C});
  auto [jo, ji] = s[C].split(C->axis[1], 16);
  auto f = s[C].fuse(C->axis[0], jo);
  s[C].parallel(f);
  s[C].vectorize(ji);
  NDArray a = random_array({n, m}, f32, 33), b = random_array({m}, f32, 34);
  expect_output(s, {A, B, C}, {a, b}, reference({n, m}, f32, [&](const std::vector<int64_t>& ix) {
                  return at(a, ix) * at(b, {ix[1]}) + 0.5;
                }));
}

TEST(E2EAnnotate, PrefetchAheadAndPastTheEnd) {
  // A row sum whose row loop prefetches the row 3 ahead (past A's end on the last rows, where
  // it must do nothing) at each locality; the result is the plain sum, and the assembly has
  // the x86 prefetch the locality names.
  const int n = 37, m = 45;
  auto A = placeholder({n, m}, f32, "A");
  auto k = reduce_axis({0, m}, "k");
  auto C = compute(
      {n}, [&](Var i) { return sum(A(i, k) * 2.0f, {k}); }, "C");
  NDArray a = random_array({n, m}, f32, 35);
  NDArray want = reference({n}, f32, [&](const std::vector<int64_t>& ix) {
    double acc = 0;
    for (int64_t j = 0; j < m; ++j) acc += at(a, {ix[0], j}) * 2.0;
    return acc;
  });
  const char* insn[] = {"prefetchnta", "prefetcht2", "prefetcht1", "prefetcht0"};
  for (int locality = 0; locality <= 3; ++locality) {
    SCOPED_TRACE(locality);
    auto s = create_schedule({C});
    s[C].prefetch(A, C->axis[0], {C->axis[0]->var + 3, 0}, locality);
    expect_output(s, {A, C}, {a}, want);
    std::string text = lowered_text(s, {A, C});
    EXPECT_NE(text.find("prefetch(address_of(A[i*45 + 135]), " + std::to_string(locality) + ")"),
              std::string::npos)
        << text;
    std::string asm_text = codegen::get_source(build_host(s, {A, C}), "asm");
    EXPECT_NE(asm_text.find(insn[locality]), std::string::npos) << asm_text;
  }
}

// ---------------------------------------------------------------------------------------------
// Reducers: tuple argmax, user-defined

TEST(E2EReduce, ArgmaxTuple) {
  const int n = 13, m = 41;
  auto A = placeholder({n, m}, f32, "A");
  Reducer argmax(
      [](const std::vector<Expr>& a, const std::vector<Expr>& b) {
        // (index, value): keep the larger value; on ties the smaller index.
        Expr take_b = b[1] > a[1] || (b[1] == a[1] && b[0] < a[0]);
        return std::vector<Expr>{ir::select(take_b, b[0], a[0]), ir::select(take_b, b[1], a[1])};
      },
      [](const std::vector<DataType>& t) {
        return std::vector<Expr>{make_const(t[0], -1), min_value(t[1])};
      },
      "argmax");
  auto k = reduce_axis({0, m}, "k");
  auto outs = compute_multi(
      {n},
      [&](const std::vector<Var>& v) {
        return argmax({Expr(k.var()), A(v[0], k)}, {k});
      },
      "argmax");
  ASSERT_EQ(outs.size(), 2u);
  NDArray a = random_array({n, m}, f32, 41);
  std::vector<double> want_i(n), want_v(n);
  for (int i = 0; i < n; ++i) {
    int best = 0;
    for (int j = 1; j < m; ++j)
      if (at(a, {i, j}) > at(a, {i, best})) best = j;
    want_i[i] = best;
    want_v[i] = at(a, {i, best});
  }
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "plain" : "split_k");
    auto s = create_schedule({outs[0]});
    if (variant == 1) {
      auto [ko, ki] = s[outs[0]].split(s[outs[0]].op_reduce_axis()[0], 4);
      s[outs[0]].reorder({ko, s[outs[0]].op_axis()[0], ki});
    }
    std::vector<NDArray> got = build_and_run(s, {A, outs[0], outs[1]}, {a});
    EXPECT_TRUE(all_close(
        got[0], reference({n}, DataType::Int(32), [&](const auto& o) { return want_i[o[0]]; })));
    EXPECT_TRUE(
        all_close(got[1], reference({n}, f32, [&](const auto& o) { return want_v[o[0]]; })));
  }
}

TEST(E2EReduce, UserDefinedAbsMax) {
  const int n = 6, m = 45;
  auto A = placeholder({n, m}, f32, "A");
  Reducer absmax = comm_reducer([](Expr a, Expr b) { return ir::max(ir::abs(a), ir::abs(b)); },
                                [](DataType t) { return make_zero(t); }, "absmax");
  auto k = reduce_axis({0, m}, "k");
  auto C = compute(
      {n}, [&](Var i) { return absmax(A(i, k) * 3.0f, {k}); }, "C");
  NDArray a = random_array({n, m}, f32, 42);
  NDArray want = reference({n}, f32, [&](const std::vector<int64_t>& o) {
    double acc = 0;
    for (int j = 0; j < m; ++j) acc = std::max(acc, std::abs(3 * at(a, {o[0], j})));
    return acc;
  });
  auto s = create_schedule({C});
  auto [ko, ki] = s[C].split(k, 8);
  s[C].unroll(ki);
  expect_output(s, {A, C}, {a}, want);
}

// ---------------------------------------------------------------------------------------------
// Extern op calling a C function defined here

}  // namespace
}  // namespace kiln::e2e

/// out[i] = in[i] * in[i] + 1 for i < n; called by generated code (the test binary exports it).
extern "C" int32_t kiln_e2e_square_plus_one(const float* in, float* out, int32_t n) {
  for (int32_t i = 0; i < n; ++i) out[i] = in[i] * in[i] + 1.0f;
  return 0;
}

namespace kiln::e2e {
namespace {

TEST(E2EExtern, CallsCFunctionThenCompute) {
  const int n = 5, m = 19;
  auto A = placeholder({n, m}, f32, "A");
  auto pre = compute(
      {n, m}, [&](Var i, Var j) { return A(i, j) - 0.25f; }, "pre");
  auto E = extern_op(
      {{n, m}}, {f32}, {pre},
      [&](const std::vector<Buffer>& ins, const std::vector<Buffer>& outs) {
        return call_extern("kiln_e2e_square_plus_one", {ins[0]->data, outs[0]->data, Expr(n * m)});
      },
      "square")[0];
  auto C = compute(
      {n, m}, [&](Var i, Var j) { return E(i, j) * 2.0f; }, "C");
  NDArray a = random_array({n, m}, f32, 51);
  NDArray want = reference({n, m}, f32, [&](const std::vector<int64_t>& o) {
    double p = static_cast<float>(at(a, o) - 0.25);
    return (p * p + 1) * 2;
  });
  auto s = create_schedule({C});
  expect_output(s, {A, C}, {a}, want);
  auto s2 = create_schedule({C});
  s2[pre].parallel(pre->axis[0]);
  auto [jo, ji] = s2[C].split(C->axis[1], 4);
  s2[C].vectorize(ji);
  expect_output(s2, {A, C}, {a}, want);
}

// ---------------------------------------------------------------------------------------------
// Integer and float64 arithmetic

TEST(E2EDtype, Int32FloorDivModMulAdd) {
  const int n = 9, m = 31;
  const DataType i32 = DataType::Int(32);
  auto A = placeholder({n, m}, i32, "A");
  auto B = placeholder({n, m}, i32, "B");
  auto C = compute(
      {n, m},
      [&](Var i, Var j) {
        return A(i, j) * B(i, j) + A(i, j) / B(i, j) - A(i, j) % B(i, j) +
               ir::max(A(i, j), B(i, j)) * 3;
      },
      "C");
  NDArray a = random_array({n, m}, i32, 61, -1000, 1000), b = random_array({n, m}, i32, 62, -9, 9);
  auto fdiv = [](int64_t x, int64_t y) {
    int64_t q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return q;
  };
  NDArray want = reference({n, m}, i32, [&](const std::vector<int64_t>& o) {
    int64_t x = static_cast<int64_t>(at(a, o)), y = static_cast<int64_t>(at(b, o));
    int64_t q = fdiv(x, y), r = x - q * y;
    return static_cast<double>(x * y + q - r + std::max(x, y) * 3);
  });
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant);
    auto s = create_schedule({C});
    if (variant == 1) {
      auto [jo, ji] = s[C].split(C->axis[1], 8);
      s[C].vectorize(ji);
      s[C].parallel(C->axis[0]);
    }
    expect_output(s, {A, B, C}, {a, b}, want);
  }
}

TEST(E2EDtype, Int8DotInt32Accumulate) {
  const int n = 11, m = 17, kk = 70;
  const DataType i8 = DataType::Int(8), i32 = DataType::Int(32);
  auto A = placeholder({n, kk}, i8, "A");
  auto B = placeholder({kk, m}, i8, "B");
  auto k = reduce_axis({0, kk}, "k");
  auto C = compute(
      {n, m}, [&](Var i, Var j) { return te::sum(cast(i32, A(i, k)) * cast(i32, B(k, j)), {k}); },
      "C");
  NDArray a = random_array({n, kk}, i8, 63, -128, 127),
          b = random_array({kk, m}, i8, 64, -128, 127);
  NDArray want = reference({n, m}, i32, [&](const std::vector<int64_t>& o) {
    int64_t acc = 0;
    for (int q = 0; q < kk; ++q)
      acc += static_cast<int64_t>(at(a, {o[0], q})) * static_cast<int64_t>(at(b, {q, o[1]}));
    return static_cast<double>(acc);
  });
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant);
    auto s = create_schedule({C});
    if (variant == 1) {
      auto [jo, ji] = s[C].split(C->axis[1], 16);
      auto [ko, ki] = s[C].split(k, 4);
      s[C].reorder({C->axis[0], jo, ko, ki, ji});
      s[C].unroll(ki);
      s[C].vectorize(ji);
    }
    expect_output(s, {A, B, C}, {a, b}, want);
  }
}

TEST(E2EDtype, Float64MatmulExp) {
  const int n = 13, m = 10, kk = 27;
  const DataType f64 = DataType::Float(64);
  auto A = placeholder({n, kk}, f64, "A");
  auto B = placeholder({kk, m}, f64, "B");
  auto k = reduce_axis({0, kk}, "k");
  auto C = compute(
      {n, m}, [&](Var i, Var j) { return te::sum(A(i, k) * ir::exp(B(k, j)), {k}); }, "C");
  NDArray a = random_array({n, kk}, f64, 65), b = random_array({kk, m}, f64, 66);
  NDArray want = reference({n, m}, f64, [&](const std::vector<int64_t>& o) {
    double acc = 0;
    for (int q = 0; q < kk; ++q) acc += at(a, {o[0], q}) * std::exp(at(b, {q, o[1]}));
    return acc;
  });
  auto s = create_schedule({C});
  auto [jo, ji] = s[C].split(C->axis[1], 4);
  s[C].vectorize(ji);
  expect_output(s, {A, B, C}, {a, b}, want, {1e-12, 1e-12});
}

// ---------------------------------------------------------------------------------------------
// Regressions for compiler bugs the schedule fuzzer found

// split_nparts(15, 9) has a trailing outer iteration that covers nothing; a stage computed at
// it must get extent 0, not -1 (was: kiln_workspace_alloc "requested size is too large").
TEST(E2ERegression, SplitNpartsEmptyTailWithComputeAt) {
  const int n = 15;
  auto A = placeholder({n}, f32, "A");
  auto B = compute(
      {n}, [&](Var i) { return A(i) + 1.0f; }, "B");
  auto C = compute(
      {n}, [&](Var i) { return B(i) * 2.0f; }, "C");
  auto s = create_schedule({C});
  auto [o, i] = s[C].split_nparts(C->axis[0], 9);
  s[B].compute_at(s[C], o);
  NDArray a = random_array({n}, f32, 71);
  expect_output(s, {A, C}, {a}, reference({n}, f32, [&](const std::vector<int64_t>& ix) {
                  return (at(a, ix) + 1) * 2;
                }));
}

// A split of a split's inner axis that does not divide it needs its own guard (was: only the
// root axis was guarded, so r.inner ran past 7 and elements were summed twice).
TEST(E2ERegression, NestedNonDivisibleSplitsGuardEachParent) {
  const int n = 4, m = 23;
  auto A = placeholder({n, m}, f32, "A");
  auto r = reduce_axis({0, m}, "r");
  auto C = compute(
      {n}, [&](Var i) { return te::sum(A(i, r), {r}); }, "C");
  auto D = compute(
      {n, m}, [&](Var i, Var j) { return A(i, j) * 3.0f; }, "D");
  NDArray a = random_array({n, m}, f32, 72);
  {
    auto s = create_schedule({C});
    auto [o1, i1] = s[C].split(r, 7);
    auto [o2, i2] = s[C].split(i1, 5);
    s[C].split_nparts(i2, 6);
    expect_output(s, {A, C}, {a}, reference({n}, f32, [&](const std::vector<int64_t>& ix) {
                    double acc = 0;
                    for (int q = 0; q < m; ++q) acc += at(a, {ix[0], q});
                    return acc;
                  }));
  }
  {
    auto s = create_schedule({D});
    auto [o1, i1] = s[D].split(D->axis[1], 7);
    s[D].split(i1, 5);
    expect_output(s, {A, D}, {a}, reference({n, m}, f32, [&](const std::vector<int64_t>& ix) {
                    return at(a, ix) * 3;
                  }));
  }
}

// loop_partition copied a loop body that allocates a buffer without renaming it; the two
// copies then confused storage_rewrite ("variable 'T1.local' is bound again inside its own
// scope") and the statement simplifier (a guard of a later nest was dropped).
TEST(E2ERegression, PartitionedBodyWithAllocation) {
  auto A = placeholder({3, 17, 5}, f32, "A");
  auto T1 = compute(
      {3, 17, 5}, [&](Var i, Var j, Var k) { return A(i, j, k) * 2.0f; }, "T1");
  auto s = create_schedule({T1});
  Tensor T1L = s.cache_write(T1, "local");
  auto ax = s[T1].op_axis();
  auto [jo, ji] = s[T1].split(ax[1], 7);
  s[T1L].compute_at(s[T1], ji);
  s[T1].unroll(ji);
  NDArray a = random_array({3, 17, 5}, f32, 73);
  expect_output(s, {A, T1}, {a}, reference({3, 17, 5}, f32, [&](const std::vector<int64_t>& ix) {
                  return at(a, ix) * 2;
                }));
}

TEST(E2ERegression, PartitionedComputeAtThenNestedSplitReduction) {
  auto A = placeholder({21, 23, 23}, f32, "A");
  auto T0 = compute(
      {21, 23, 23}, [&](Var i, Var j, Var k) { return ir::max(A(i, j, k), Expr(-0.3f)) * 1.5f; },
      "T0");
  auto r1 = reduce_axis({0, 21}, "r1");
  auto T1 = compute(
      {23, 23}, [&](Var i, Var j) { return te::max(T0(r1, i, j), {r1}); }, "T1");
  auto r2 = reduce_axis({0, 23}, "r2");
  auto T2 = compute(
      {23}, [&](Var i) { return te::sum(T1(i, r2), {r2}); }, "T2");
  auto s = create_schedule({T2});
  s.cache_write(T0, "local");
  Tensor T1L = s.cache_write(T1, "local");
  auto ax = s[T1].op_axis();
  auto [jo, ji] = s[T1].split(ax[1], 8);
  s[T1].reorder({jo, ji, ax[0]});
  auto [joo, joi] = s[T1].split(jo, 4);
  auto fused = s[T1].fuse(joo, joi);
  auto [o1, i1] = s[T2].split(r2, 7);
  auto [o2, i2] = s[T2].split(i1, 5);
  s[T2].split_nparts(i2, 6);
  s[T1L].compute_at(s[T1], fused);
  NDArray a = random_array({21, 23, 23}, f32, 74);
  expect_output(s, {A, T2}, {a},
                reference({23}, f32,
                          [&](const std::vector<int64_t>& ix) {
                            double acc = 0;
                            for (int q = 0; q < 23; ++q) {
                              double mx = -1e30;
                              for (int p = 0; p < 21; ++p)
                                mx = std::max(mx, std::max(at(a, {p, ix[0], q}), -0.3) * 1.5);
                              acc += mx;
                            }
                            return acc;
                          }),
                {1e-4, 1e-4});
}

}  // namespace
}  // namespace kiln::e2e
