// tir::kernel_cost (the roofline of `kiln bench --profile`): a matrix product counts 2·M·N·K
// floating-point operations and the bytes of its three arguments, whether the schedule is the
// default loop nest or tiled, vectorized and unrolled; a guarded tail counts its full tile.
#include <gtest/gtest.h>

#include "kiln/te/schedule.h"
#include "kiln/tir/cost.h"
#include "kiln/tir/lower.h"

namespace kiln::te {
namespace {

struct Product {
  Tensor A, B, C;
};

Product matmul(int64_t M, int64_t N, int64_t K) {
  Tensor A = placeholder({M, K}, DataType::Float(32), "A");
  Tensor B = placeholder({K, N}, DataType::Float(32), "B");
  IterVar k = reduce_axis({0, static_cast<int32_t>(K)}, "k");
  Tensor C = compute(
      {M, N}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); }, "C");
  return {A, B, C};
}

TEST(KernelCost, MatmulCountsTwoMNKWhateverTheSchedule) {
  const int64_t M = 48, N = 64, K = 32;
  Product p = matmul(M, N, K);
  const double bytes = 4.0 * (M * K + K * N + M * N);
  Schedule plain = create_schedule({p.C});
  tir::KernelCost c = tir::kernel_cost(tir::lower(plain, {p.A, p.B, p.C}, "plain"));
  EXPECT_EQ(c.flops, 2.0 * M * N * K);
  EXPECT_EQ(c.bytes, bytes);

  Schedule s = create_schedule({p.C});
  auto ax = s[p.C].op_axis();
  auto [io, jo, ii, ji] = s[p.C].tile(ax[0], ax[1], Expr(8), Expr(16));
  s[p.C].vectorize(ji);
  s[p.C].unroll(ii);
  tir::KernelCost t = tir::kernel_cost(tir::lower(s, {p.A, p.B, p.C}, "tiled"));
  EXPECT_EQ(t.flops, 2.0 * M * N * K);
  EXPECT_EQ(t.bytes, bytes);
}

TEST(KernelCost, GuardedTailCountsItsWholeTile) {
  // N = 40 split by 16: the last tile of j is guarded (8 of its 16 columns run); the count is
  // an upper bound, 48 columns' worth.
  const int64_t M = 4, N = 40, K = 8;
  Product p = matmul(M, N, K);
  Schedule s = create_schedule({p.C});
  auto ax = s[p.C].op_axis();
  s[p.C].split(ax[1], Expr(16));
  tir::KernelCost c = tir::kernel_cost(tir::lower(s, {p.A, p.B, p.C}, "tail"));
  EXPECT_GE(c.flops, 2.0 * M * N * K);
  EXPECT_LE(c.flops, 2.0 * M * 48 * K);
}

}  // namespace
}  // namespace kiln::te
