// Loop-program features on known loop nests, against values computed by hand: a naive 16^3
// matmul (loops i, j, k) and the same with j split by 4, the inner part innermost and vectorized.
#include "kiln/autotune/feature.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kiln/ir/op.h"
#include "kiln/te/tensor.h"

namespace kiln::autotune {
namespace {

constexpr int kN = 16;

struct Matmul {
  te::Tensor A, B, C;
  te::IterVar k;
  te::Schedule s;
};

Matmul matmul() {
  Matmul m;
  m.A = te::placeholder({kN, kN}, DataType::Float(32), "A");
  m.B = te::placeholder({kN, kN}, DataType::Float(32), "B");
  m.k = te::reduce_axis({0, kN}, "k");
  m.C = te::compute(
      {kN, kN}, [&](te::Var i, te::Var j) { return te::sum(m.A(i, m.k) * m.B(m.k, j), {m.k}); },
      "C");
  m.s = te::create_schedule({m.C});
  return m;
}

LoopProgramFeatures analyze(const Matmul& m) {
  return analyze_loop_program(lower_for_features(Instance{m.s, {m.A, m.B, m.C}}));
}

float lg(double x) { return static_cast<float>(std::log2(1 + x)); }

TEST(Features, NaiveMatmulByHand) {
  Matmul m = matmul();
  LoopProgramFeatures f = analyze(m);
  // Two stores: C = 0 (256 times) and C = C + A * B (4096 times, 2 operations each).
  EXPECT_EQ(f.num_stores, 2);
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * 4096);
  // Bytes: 256 init stores + 4096 * (store C, load C, A, B), 4 bytes each.
  EXPECT_DOUBLE_EQ(f.bytes_accessed, 4.0 * (256 + 4 * 4096));
  // Footprint: all of A, B and C.
  EXPECT_DOUBLE_EQ(f.footprint_bytes, 3 * 256 * 4.0);
  EXPECT_DOUBLE_EQ(f.arithmetic_intensity, 8192.0 / 3072.0);

  ASSERT_EQ(f.loops.size(), 3u);  // i, j, k around the update
  for (const LoopFeature& l : f.loops) {
    EXPECT_EQ(l.extent, kN);
    EXPECT_EQ(l.kind, ir::ForKind::kSerial);
  }
  EXPECT_DOUBLE_EQ(f.loops[0].bottom_up, 4096);
  EXPECT_DOUBLE_EQ(f.loops[1].bottom_up, 256);
  EXPECT_DOUBLE_EQ(f.loops[2].bottom_up, 16);
  EXPECT_DOUBLE_EQ(f.loops[0].top_down, 16);
  EXPECT_DOUBLE_EQ(f.loops[2].top_down, 4096);

  // Slots: C (stored; read and written), then A, B (one load each, in order of appearance).
  ASSERT_EQ(f.buffers.size(), 3u);
  const BufferFeature &C = f.buffers[0], &A = f.buffers[1], &B = f.buffers[2];
  EXPECT_EQ(C.name, "C");
  EXPECT_EQ(A.name, "A");
  EXPECT_EQ(B.name, "B");
  EXPECT_EQ(C.accesses, 2);
  EXPECT_EQ(A.accesses, 1);
  // Levels outermost first: i, j, k. C[i*16 + j], A[i*16 + k], B[k*16 + j].
  EXPECT_EQ(C.stride, (std::vector<int64_t>{16, 1, 0}));
  EXPECT_EQ(A.stride, (std::vector<int64_t>{16, 0, 1}));
  EXPECT_EQ(B.stride, (std::vector<int64_t>{0, 1, 16}));
  EXPECT_EQ(C.touch, (std::vector<double>{256, 16, 1}));
  EXPECT_EQ(A.touch, (std::vector<double>{256, 16, 16}));
  EXPECT_EQ(B.touch, (std::vector<double>{256, 256, 16}));
  // Reuse: accesses in one execution of the loop / touch.
  EXPECT_EQ(C.reuse, (std::vector<double>{2 * 4096 / 256., 2 * 256 / 16., 2 * 16 / 1.}));
  EXPECT_EQ(A.reuse, (std::vector<double>{4096 / 256., 256 / 16., 16 / 16.}));
  EXPECT_EQ(B.reuse, (std::vector<double>{4096 / 256., 256 / 256., 16 / 16.}));

  // The vector: globals, then level 0 = the innermost loop (k).
  std::vector<float> v = f.to_vector();
  ASSERT_EQ(v.size(), static_cast<size_t>(kFeatureLength));
  ASSERT_EQ(feature_names().size(), static_cast<size_t>(kFeatureLength));
  EXPECT_FLOAT_EQ(v[0], lg(8192));
  EXPECT_FLOAT_EQ(v[4], 3);
  const float* l0 = v.data() + kFeatureGlobal;
  EXPECT_EQ(feature_names()[kFeatureGlobal], "l0.extent");
  EXPECT_FLOAT_EQ(l0[0], lg(16));
  EXPECT_FLOAT_EQ(l0[1], 1);                                   // serial
  EXPECT_FLOAT_EQ(l0[3], 0);                                   // not vectorized
  EXPECT_FLOAT_EQ(l0[7 + 2 * kFeaturePerBuffer + 0], lg(16));  // B's stride in k
  EXPECT_FLOAT_EQ(l0[7 + 0 * kFeaturePerBuffer + 2], lg(32));  // C's reuse in k
  // Levels past the third are zero padding.
  const float* l3 = v.data() + kFeatureGlobal + 3 * kFeaturePerLevel;
  for (int i = 0; i < kFeaturePerLevel; ++i) EXPECT_EQ(l3[i], 0.f) << feature_names()[i];
}

TEST(Features, SplitVectorizedMatmulByHand) {
  Matmul m = matmul();
  te::Stage st = m.s[m.C];
  auto [jo, ji] = st.split(m.C->axis[1], 4);
  st.reorder({m.C->axis[0], jo, m.k, ji});
  st.vectorize(ji);
  LoopProgramFeatures f = analyze(m);
  ASSERT_EQ(f.loops.size(), 4u);  // i, j.outer, k, j.inner
  EXPECT_EQ(f.loops[1].extent, 4);
  EXPECT_EQ(f.loops[3].extent, 4);
  EXPECT_EQ(f.loops[3].kind, ir::ForKind::kVectorized);
  EXPECT_EQ(f.loops[2].kind, ir::ForKind::kSerial);
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * 4096);
  ASSERT_EQ(f.buffers.size(), 3u);
  const BufferFeature& B = f.buffers[2];
  ASSERT_EQ(B.name, "B");
  // B[k*16 + jo*4 + ji]: strides (i, jo, k, ji) = (0, 4, 16, 1).
  EXPECT_EQ(B.stride, (std::vector<int64_t>{0, 4, 16, 1}));
  // ji: 4 elements; k: min(16*4, 1 + 15*16 + 3) = 64; jo: all 256; i: 256.
  EXPECT_EQ(B.touch, (std::vector<double>{256, 256, 64, 4}));
  const BufferFeature& C = f.buffers[0];
  EXPECT_EQ(C.touch, (std::vector<double>{256, 16, 4, 4}));
  EXPECT_DOUBLE_EQ(C.reuse[2], 2 * 64 / 4.);
  std::vector<float> v = f.to_vector();
  const float* l0 = v.data() + kFeatureGlobal;
  EXPECT_FLOAT_EQ(l0[1], 0);         // not serial
  EXPECT_FLOAT_EQ(l0[3], 1);         // vectorized
  EXPECT_FLOAT_EQ(l0[5], lg(4));     // bottom-up of j.inner
  EXPECT_FLOAT_EQ(l0[6], lg(4096));  // top-down of j.inner
}

TEST(Features, DifferentSchedulesGiveDifferentVectors) {
  Matmul a = matmul(), b = matmul();
  te::Stage st = b.s[b.C];
  st.reorder({b.C->axis[0], b.k, b.C->axis[1]});
  EXPECT_NE(analyze(a).to_vector(), analyze(b).to_vector());
}

TEST(Features, PaddingChecksAreNotFlops) {
  // B[i] = sum over k < 3 of (i + k - 1 in bounds ? A[i + k - 1] : 0) * W[k], the inline padding
  // of a convolution: 2 flops per multiply-add. The bounds check (comparisons and the index
  // arithmetic in them) and the if_then_else itself are not counted.
  const int n = 32;
  te::Tensor A = te::placeholder({n}, DataType::Float(32), "A");
  te::Tensor W = te::placeholder({3}, DataType::Float(32), "W");
  te::IterVar k = te::reduce_axis({0, 3}, "k");
  te::Tensor B = te::compute(
      {n},
      [&](te::Var i) {
        ir::Expr x = i + k->var - 1;
        ir::Expr in = ir::if_then_else(ir::likely(x >= 0 && x < n), A(x), ir::Expr(0.0f));
        return te::sum(in * W(k->var), {k});
      },
      "B");
  te::Schedule s = te::create_schedule({B});
  LoopProgramFeatures f = analyze_loop_program(lower_for_features(Instance{s, {A, W, B}}));
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * n * 3);
}

}  // namespace
}  // namespace kiln::autotune
