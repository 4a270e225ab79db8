// Bit-serial dense and conv2d (topi/bitserial.h) against the unpacked product / convolution on
// random 1- and 2-bit activations and 0/1 weights, poisoned outputs: tensorized with
// popcount_and where the host has VPOPCNTDQ (and the activations packed with bitpack32 where
// the channels fill whole words), the non-tensorized baseline schedule, and a target without
// the feature.
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
      if (used) {
        EXPECT_NE(codegen::get_source(m, "asm").find("vpopcntd"), std::string::npos);
      }
    }
  }
}

/// Σ data · W over each window of the zero-padded NHWC input (HWIO weights).
NDArray conv_ref(const NDArray& d, const NDArray& W, int64_t stride, int64_t pad) {
  const int64_t N = d.shape()[0], H = d.shape()[1], Wd = d.shape()[2], C = d.shape()[3];
  const int64_t KH = W.shape()[0], KW = W.shape()[1], O = W.shape()[3];
  const int64_t OH = (H + 2 * pad - KH) / stride + 1, OW = (Wd + 2 * pad - KW) / stride + 1;
  return e2e::reference({N, OH, OW, O}, DataType::Int(32), [&](const std::vector<int64_t>& i) {
    int64_t acc = 0;
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw) {
        const int64_t h = i[1] * stride + kh - pad, w = i[2] * stride + kw - pad;
        if (h < 0 || h >= H || w < 0 || w >= Wd) continue;
        for (int64_t c = 0; c < C; ++c)
          acc += int64_t(d.data_as<uint8_t>()[((i[0] * H + h) * Wd + w) * C + c]) *
                 W.data_as<uint8_t>()[((kh * KW + kw) * C + c) * O + i[3]];
      }
    return double(acc);
  });
}

TEST(Bitserial, Conv2DMatchesTheUnpackedConvolution) {
  const Target no_popcnt("llvm -mcpu=native -mattr=-avx512vpopcntdq");
  uint32_t seed = 11;
  struct Case {
    int64_t N, H, W, C, O, K, stride, pad;
    int bits;
  };
  // A channel tail (40 = 32 + 8), a stride-2 tile of 4 pixels, 1x1 over 13 columns (no divisor
  // <= 6: the one-pixel micro-kernel), a batch of 2, 256 channels (8-word steps).
  for (const Case& c : {Case{1, 9, 9, 40, 32, 3, 1, 1, 2}, Case{1, 8, 7, 64, 16, 3, 2, 1, 1},
                        Case{2, 5, 13, 32, 16, 1, 1, 0, 2}, Case{1, 4, 4, 256, 48, 3, 1, 1, 2}}) {
    auto d = te::placeholder({c.N, c.H, c.W, c.C}, DataType::UInt(8), "d");
    auto W = te::placeholder({c.K, c.K, c.C, c.O}, DataType::UInt(8), "W");
    auto y = bitserial_conv2d_nhwc(bitpack_nhwc(d, c.bits, c.pad, c.pad), bitpack_hwio(W), c.stride,
                                   c.stride);
    NDArray da =
        e2e::random_array({c.N, c.H, c.W, c.C}, DataType::UInt(8), seed++, 0, (1 << c.bits) - 1);
    NDArray wa = e2e::random_array({c.K, c.K, c.C, c.O}, DataType::UInt(8), seed++, 0, 1);
    NDArray ref = conv_ref(da, wa, c.stride, c.pad);
    std::vector<int64_t> oshape;
    for (const auto& e : y->shape) oshape.push_back(*ir::as_const_int(e));
    ASSERT_EQ(oshape, ref.shape());
    for (auto [target, tensorize] :
         {std::pair{e2e::host_target(), true}, std::pair{e2e::host_target(), false},
          std::pair{no_popcnt, true}}) {
      te::Schedule s = schedule_bitserial_conv2d_nhwc(y, target, tensorize);
      runtime::Module m = build(s, {d, W, y}, target, "f");
      NDArray out = e2e::poisoned(oshape, DataType::Int(32));
      e2e::call(m.get_function("f"), {da, wa, out});
      const std::string text = e2e::lowered_text(s, {d, W, y});
      EXPECT_TRUE(e2e::all_close(out, ref))
          << "case C=" << c.C << " O=" << c.O << " K=" << c.K << " stride=" << c.stride << " "
          << target.str() << (tensorize ? " tensorized" : " plain") << "\n"
          << text;
      const bool used = tensorize && target.has_feature("avx512vpopcntdq");
      EXPECT_EQ(text.find("popcount(bitwise_and(broadcast(") != std::string::npos, used);
      if (used) {
        EXPECT_NE(codegen::get_source(m, "asm").find("vpopcntd"), std::string::npos);
      }
      // bitpack32 (any target) packs whole 32-channel words: the lane mask as the word.
      EXPECT_EQ(text.find("reinterpret(") != std::string::npos, tensorize && c.C % 32 == 0) << text;
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
  auto d = te::placeholder({1, 4, 4, 8}, DataType::UInt(8), "d");
  EXPECT_EQ(e2e::error_of([&] { bitpack_nhwc(d, 2, -1, 0); }),
            "bitpack_nhwc: padding must be >= 0, got -1, 0");
  auto Wc = te::placeholder({5, 5, 8, 16}, DataType::UInt(8), "Wc");
  EXPECT_EQ(e2e::error_of(
                [&] { bitserial_conv2d_nhwc(bitpack_nhwc(d, 1, 0, 0), bitpack_hwio(Wc), 1, 1); }),
            "bitserial_conv2d_nhwc: the 5x5 window is larger than the padded 4x4 input");
  auto W8 = te::placeholder({3, 3, 8, 8}, DataType::UInt(8), "W8");
  auto y8 = bitserial_conv2d_nhwc(bitpack_nhwc(d, 1, 1, 1), bitpack_hwio(W8), 1, 1);
  EXPECT_EQ(e2e::error_of([&] { schedule_bitserial_conv2d_nhwc(y8, e2e::host_target(), true); }),
            "schedule_bitserial_conv2d_nhwc: O must be a multiple of 16, got 8");
}

}  // namespace
}  // namespace kiln::topi
