// Bit-serial dense (topi/bitserial.h) against the unpacked product Σ_k a · W on random 1- and
// 2-bit activations and 0/1 weights, poisoned outputs: tensorized with popcount_and where the
// host has VPOPCNTDQ, the non-tensorized baseline schedule, and a target without the feature.
#include "kiln/topi/bitserial.h"

#include <gtest/gtest.h>

#include "e2e/e2e_util.h"
#include "kiln/target/codegen.h"

namespace kiln::topi {
namespace {

using e2e::NDArray;

NDArray unpacked_ref(const NDArray& a, const NDArray& W) {
  const int64_t M = a.shape()[0], K = a.shape()[1], N = W.shape()[0];
  return e2e::reference({M, N}, DataType::Int(32), [&](const std::vector<int64_t>& i) {
    int64_t acc = 0;
    for (int64_t k = 0; k < K; ++k)
      acc += int64_t(a.data_as<uint8_t>()[i[0] * K + k]) * W.data_as<uint8_t>()[i[1] * K + k];
    return double(acc);
  });
}

TEST(Bitserial, DenseMatchesTheUnpackedProduct) {
  const Target no_popcnt("llvm -mcpu=native -mattr=-avx512vpopcntdq");
  uint32_t seed = 1;
  for (auto [M, N, K, bits] : {std::tuple{5, 32, 100, 2}, {3, 16, 256, 1}, {7, 48, 300, 2}}) {
    auto a = te::placeholder({M, K}, DataType::UInt(8), "a");
    auto W = te::placeholder({N, K}, DataType::UInt(8), "W");
    auto y = bitserial_dense(bitpack_activations(a, bits), bitpack_weights(W));
    NDArray aa = e2e::random_array({M, K}, DataType::UInt(8), seed++, 0, (1 << bits) - 1);
    NDArray wa = e2e::random_array({N, K}, DataType::UInt(8), seed++, 0, 1);
    NDArray ref = unpacked_ref(aa, wa);
    for (auto [target, tensorize] :
         {std::pair{e2e::host_target(), true}, std::pair{e2e::host_target(), false},
          std::pair{no_popcnt, true}}) {
      te::Schedule s = schedule_bitserial_dense(y, target, tensorize);
      runtime::Module m = build(s, {a, W, y}, target, "f");
      NDArray out = e2e::poisoned({M, N}, DataType::Int(32));
      e2e::call(m.get_function("f"), {aa, wa, out});
      EXPECT_TRUE(e2e::all_close(out, ref))
          << "M=" << M << " N=" << N << " K=" << K << " bits=" << bits << " " << target.str()
          << (tensorize ? " tensorized" : " plain") << "\n"
          << e2e::lowered_text(s, {a, W, y});
      const bool used = tensorize && target.has_feature("avx512vpopcntdq");
      EXPECT_EQ(e2e::lowered_text(s, {a, W, y}).find("popcount(bitwise_and(broadcast(") !=
                    std::string::npos,
                used);
      if (used) EXPECT_NE(codegen::get_source(m, "asm").find("vpopcntd"), std::string::npos);
    }
  }
}

TEST(Bitserial, ErrorsNameTheProblem) {
  auto a = te::placeholder({2, 8}, DataType::UInt(8), "a");
  EXPECT_EQ(e2e::error_of([&] { bitpack_activations(a, 3); }),
            "bitpack_activations: bits must be 1 or 2, got 3");
  auto W = te::placeholder({20, 8}, DataType::UInt(8), "W");
  auto y = bitserial_dense(bitpack_activations(a, 1), bitpack_weights(W));
  EXPECT_EQ(e2e::error_of([&] { schedule_bitserial_dense(y, e2e::host_target(), true); }),
            "schedule_bitserial_dense: N must be a multiple of 16, got 20");
  auto Ap = te::placeholder({1, 2, 3}, DataType::UInt(32), "Ap");
  auto Wp = te::placeholder({4, 16}, DataType::UInt(32), "Wp");
  EXPECT_EQ(e2e::error_of([&] { bitserial_dense(Ap, Wp); }),
            "bitserial_dense: needs packed activations uint32 [bits, M, W] and weights uint32 [W, "
            "N], got uint32 [1, 2, 3] and uint32 [4, 16]");
}

}  // namespace
}  // namespace kiln::topi
