// int8 operators: quantized dense (plain, packed template: fallback and every knob candidate)
// and the direct NCHWc quantized conv2d against exact int32 naive references; the generated
// assembly uses vpdpbusd on AVX512-VNNI targets (the kernels tensorize with x86_intrin.h's
// dot_u8s8), and the same loops without VNNI (no tensorize) give the same results.
#include "kiln/topi/quantized.h"

#include <gtest/gtest.h>

#include "common/covering_configs.h"
#include "e2e/e2e_util.h"
#include "kiln/target/codegen.h"

namespace kiln::topi {
namespace {

using e2e::all_close;
using e2e::NDArray;
using e2e::random_array;

const DataType kU8 = DataType::UInt(8), kS8 = DataType::Int(8), kI32 = DataType::Int(32);

NDArray u8_array(std::vector<int64_t> s, uint32_t seed) {
  return random_array(s, kU8, seed, 0, 255);
}
NDArray s8_array(std::vector<int64_t> s, uint32_t seed) {
  return random_array(s, kS8, seed, -128, 127);
}

int32_t bytes4(int64_t b0, int64_t b1, int64_t b2, int64_t b3) {
  uint32_t v = uint32_t(uint8_t(b0)) | uint32_t(uint8_t(b1)) << 8 | uint32_t(uint8_t(b2)) << 16 |
               uint32_t(uint8_t(b3)) << 24;
  return static_cast<int32_t>(v);
}

NDArray qdense_ref(const NDArray& x, const NDArray& W) {
  int64_t M = x.shape()[0], K = x.shape()[1], N = W.shape()[0];
  return e2e::reference({M, N}, kI32, [&](const std::vector<int64_t>& i) {
    int64_t acc = 0;
    for (int64_t k = 0; k < K; ++k)
      acc += int64_t(x.data_as<uint8_t>()[i[0] * K + k]) * W.data_as<int8_t>()[i[1] * K + k];
    return double(acc);
  });
}

NDArray pack_dense_ref(const NDArray& W, int64_t nb) {
  int64_t N = W.shape()[0], K = W.shape()[1];
  auto b = [&](int64_t n, int64_t k) -> int64_t {
    return n < N && k < K ? W.data_as<int8_t>()[n * K + k] : 0;
  };
  return e2e::reference({(N + nb - 1) / nb, (K + 3) / 4, nb}, kI32,
                        [&](const std::vector<int64_t>& i) {
                          int64_t n = i[0] * nb + i[2], k = 4 * i[1];
                          return double(bytes4(b(n, k), b(n, k + 1), b(n, k + 2), b(n, k + 3)));
                        });
}

using kiln::testing::covering_configs;

bool host_has_vnni() { return e2e::host_target().has_feature("avx512vnni"); }

/// Builds `inst` for `target`, runs it on inputs, returns the output and the assembly.
std::pair<NDArray, std::string> run(const autotune::Instance& inst, const Target& target,
                                    const std::vector<NDArray>& in) {
  runtime::Module m = build(inst.sch, inst.args, target, "f");
  NDArray out = e2e::poisoned(e2e::shape_of(inst.args.back()), inst.args.back()->dtype);
  std::vector<NDArray> all = in;
  all.push_back(out);
  e2e::call(m.get_function("f"), all);
  return {out, codegen::get_source(m, "asm")};
}

void check_qdense(const QuantizedDenseWorkload& w, const autotune::Config& cfg, uint32_t seed,
                  const Target& target = e2e::host_target()) {
  auto inst = autotune::instantiate(quantized_dense_template(w, target), cfg);
  NDArray x = u8_array({w.M, w.K}, seed), W = s8_array({w.N, w.K}, seed + 1);
  auto [y, asm_text] = run(inst, target, {x, pack_dense_ref(W, inst.config.knob("tile_x"))});
  EXPECT_TRUE(all_close(y, qdense_ref(x, W)))
      << "M=" << w.M << " N=" << w.N << " K=" << w.K << " config " << inst.config.str() << " "
      << target.str() << "\n"
      << e2e::lowered_text(inst.sch, inst.args);
}

TEST(QuantizedDense, PlainComputeIsExact) {
  auto x = te::placeholder({5, 13}, kU8, "x");
  auto W = te::placeholder({7, 13}, kS8, "W");
  auto y = quantized_dense(x, W);
  NDArray xa = u8_array({5, 13}, 1), wa = s8_array({7, 13}, 2);
  auto out = e2e::build_and_run(te::create_schedule({y}), {x, W, y}, {xa, wa});
  EXPECT_TRUE(all_close(out[0], qdense_ref(xa, wa)));
}

TEST(QuantizedDense, PackWeightMatchesHostPacking) {
  for (auto [N, K, nb] : {std::tuple{20, 7, 16}, {32, 8, 32}}) {
    auto W = te::placeholder({N, K}, kS8, "W");
    auto Wp = pack_quantized_dense_weight(W, nb);
    NDArray wa = s8_array({N, K}, 3);
    auto out = e2e::build_and_run(te::create_schedule({Wp}), {W, Wp}, {wa});
    EXPECT_TRUE(all_close(out[0], pack_dense_ref(wa, nb)));
  }
}

TEST(QuantizedDense, FallbackOnSeveralShapesIsExact) {
  uint32_t seed = 10;
  for (QuantizedDenseWorkload w :
       {QuantizedDenseWorkload{1, 64, 32}, {7, 13, 5}, {13, 50, 36}, {1, 1, 1}, {64, 128, 256}}) {
    check_qdense(w, autotune::Config::fallback(), seed);
    seed += 2;
  }
}

TEST(QuantizedDense, EveryKnobCandidate) {
  QuantizedDenseWorkload w{13, 50, 44};
  auto space = autotune::define_space(quantized_dense_template(w, e2e::host_target()));
  EXPECT_EQ(space.knob_names(), (std::vector<std::string>{"tile_x", "tile_y", "tile_k", "unroll"}));
  for (const auto& c : covering_configs(space)) check_qdense(w, c, 40);
}

TEST(QuantizedDense, UsesVpdpbusdWithVnniAndIsExactWithout) {
  if (!host_has_vnni()) GTEST_SKIP() << "host has no avx512vnni";
  QuantizedDenseWorkload w{4, 64, 64};
  auto inst = autotune::instantiate(quantized_dense_template(w, e2e::host_target()),
                                    autotune::Config::fallback());
  NDArray x = u8_array({4, 64}, 5), W = s8_array({64, 64}, 6);
  auto [y, text] = run(inst, e2e::host_target(), {x, pack_dense_ref(W, 64)});
  EXPECT_TRUE(all_close(y, qdense_ref(x, W)));
  EXPECT_NE(text.find("vpdpbusd"), std::string::npos);
  // Generic path (VNNI disabled): the same numbers, no vpdpbusd.
  Target plain("llvm -mcpu=native -mattr=-avx512vnni");
  auto inst2 =
      autotune::instantiate(quantized_dense_template(w, plain), autotune::Config::fallback());
  auto [y2, text2] = run(inst2, plain, {x, pack_dense_ref(W, 64)});
  EXPECT_TRUE(all_close(y2, qdense_ref(x, W)));
  EXPECT_EQ(text2.find("vpdpbusd"), std::string::npos);
  check_qdense({3, 20, 9}, autotune::Config::fallback(), 7, plain);
}

// --- conv2d

NDArray qconv_ref(const NDArray& x, const NDArray& W, const QConv2DAttrs& a) {
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], Wd = x.shape()[3];
  int64_t O = W.shape()[0], KH = W.shape()[2], KW = W.shape()[3];
  int64_t OH = (H + 2 * a.padding - KH) / a.stride + 1,
          OW = (Wd + 2 * a.padding - KW) / a.stride + 1;
  return e2e::reference({N, (O + 15) / 16, OH, OW, 16}, kI32, [&](const std::vector<int64_t>& i) {
    int64_t o = i[1] * 16 + i[4], acc = 0;
    if (o >= O) return 0.0;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          int64_t h = i[2] * a.stride - a.padding + kh, w = i[3] * a.stride - a.padding + kw;
          if (h < 0 || h >= H || w < 0 || w >= Wd) continue;
          acc += int64_t(x.data_as<uint8_t>()[((i[0] * C + c) * H + h) * Wd + w]) *
                 W.data_as<int8_t>()[((o * C + c) * KH + kh) * KW + kw];
        }
    return double(acc);
  });
}

NDArray pack_conv_ref(const NDArray& W) {
  int64_t O = W.shape()[0], C = W.shape()[1], KH = W.shape()[2], KW = W.shape()[3];
  auto b = [&](int64_t o, int64_t c, int64_t kh, int64_t kw) -> int64_t {
    return o < O && c < C ? W.data_as<int8_t>()[((o * C + c) * KH + kh) * KW + kw] : 0;
  };
  return e2e::reference({(O + 15) / 16, (C + 3) / 4, KH, KW, 16}, kI32,
                        [&](const std::vector<int64_t>& i) {
                          int64_t o = i[0] * 16 + i[4], c = 4 * i[1];
                          return double(bytes4(b(o, c, i[2], i[3]), b(o, c + 1, i[2], i[3]),
                                               b(o, c + 2, i[2], i[3]), b(o, c + 3, i[2], i[3])));
                        });
}

void check_qconv(const QuantizedConv2DWorkload& w, const autotune::Config& cfg, uint32_t seed,
                 std::string* asm_out = nullptr) {
  auto inst = autotune::instantiate(quantized_conv2d_template(w, e2e::host_target()), cfg);
  NDArray x = u8_array({w.N, w.C, w.H, w.W}, seed), W = s8_array({w.O, w.C, w.KH, w.KW}, seed + 1);
  auto [y, text] = run(inst, e2e::host_target(), {x, pack_conv_ref(W)});
  EXPECT_TRUE(all_close(y, qconv_ref(x, W, w.attrs)))
      << "conv N=" << w.N << " C=" << w.C << " H=" << w.H << " W=" << w.W << " O=" << w.O
      << " k=" << w.KH << "x" << w.KW << " config " << inst.config.str() << "\n"
      << e2e::lowered_text(inst.sch, inst.args);
  if (asm_out) *asm_out = text;
}

TEST(QuantizedConv2d, FallbackOnSeveralShapesIsExact) {
  uint32_t seed = 70;
  for (QuantizedConv2DWorkload w : {QuantizedConv2DWorkload{1, 5, 7, 9, 20, 3, 3, {1, 1}},
                                    QuantizedConv2DWorkload{2, 8, 13, 13, 16, 3, 3, {2, 0}},
                                    QuantizedConv2DWorkload{1, 4, 1, 7, 16, 1, 1, {1, 0}},
                                    QuantizedConv2DWorkload{1, 16, 8, 8, 32, 3, 3, {1, 1}}}) {
    check_qconv(w, autotune::Config::fallback(), seed);
    seed += 2;
  }
}

TEST(QuantizedConv2d, EveryKnobCandidateAndVpdpbusd) {
  QuantizedConv2DWorkload w{1, 7, 6, 11, 17, 3, 2, {1, 1}};
  auto space = autotune::define_space(quantized_conv2d_template(w, e2e::host_target()));
  EXPECT_EQ(space.knob_names(), (std::vector<std::string>{"tile_ow", "unroll_kw"}));
  std::string text;
  for (const auto& c : covering_configs(space)) check_qconv(w, c, 90, &text);
  if (host_has_vnni()) {
    EXPECT_NE(text.find("vpdpbusd"), std::string::npos);
  }
}

TEST(Quantized, ErrorsNameOpAndShapes) {
  auto xf = te::placeholder({2, 8}, DataType::Float(32), "xf");
  auto W = te::placeholder({3, 8}, kS8, "W");
  EXPECT_EQ(e2e::error_of([&] { quantized_dense(xf, W); }),
            "quantized_dense: data must be uint8, got float32 (xf)");
  auto x = te::placeholder({2, 8}, kU8, "x");
  auto W2 = te::placeholder({3, 9}, kS8, "W2");
  EXPECT_EQ(e2e::error_of([&] { quantized_dense(x, W2); }),
            "quantized_dense: needs data [M, K] and weight [N, K], got [2, 8] and [3, 9]");
  auto Wp = te::placeholder({1, 3, 16}, kI32, "Wp");
  EXPECT_EQ(e2e::error_of([&] { quantized_dense_packed(x, Wp, 16); }),
            "quantized_dense_packed: data [2, 8] and packed weight [1, 3, 16] (int32) do not "
            "match 16 outputs (expected int32 [ceil(N/nb), ceil(K/4), nb])");
  auto xc = te::placeholder({1, 5, 4, 4}, kU8, "xc");
  auto Wc = te::placeholder({1, 1, 3, 3, 16}, kI32, "Wc");
  EXPECT_EQ(e2e::error_of([&] { quantized_conv2d_nchwc(xc, Wc, 16, 3, 3, {}); }),
            "quantized_conv2d_nchwc: packed weight [1, 1, 3, 3, 16] (int32) does not match data "
            "[1, 5, 4, 4], 16 outputs and a 3x3 kernel (expected int32 [ceil(O/16), ceil(C/4), "
            "KH, KW, 16])");
  auto y = quantized_dense(x, te::placeholder({3, 8}, kS8, "W3"));
  te::Schedule s = te::create_schedule({y});
  EXPECT_EQ(e2e::error_of([&] { schedule_quantized_lanes(s, y, e2e::host_target()); }),
            "schedule_quantized_lanes: stage 'quantized_dense' is not a quantized_dense_packed "
            "or quantized_conv2d_nchwc");
}

// A schedule written elsewhere (an epilogue stage around the accumulator, as the graph's int8
// convolutions do) gets VNNI from schedule_quantized_lanes, and stays exact without it.
TEST(QuantizedConv2d, ScheduleQuantizedLanesOnAnotherSchedule) {
  QuantizedConv2DWorkload w{1, 8, 6, 6, 32, 3, 3, {1, 1}};
  for (const Target& target :
       {e2e::host_target(), Target("llvm -mcpu=native -mattr=-avx512vnni,-avxvnni")}) {
    auto x = te::placeholder({w.N, w.C, w.H, w.W}, kU8, "x");
    auto Wp = te::placeholder({2, 2, 3, 3, 16}, kI32, "Wp");
    auto acc = quantized_conv2d_nchwc(x, Wp, w.O, w.KH, w.KW, w.attrs, "acc");
    auto out = te::compute(
        acc->shape,
        [&](const std::vector<ir::Var>& v) {
          return acc(std::vector<ir::Expr>(v.begin(), v.end())) * 2 + 1;
        },
        "out");
    te::Schedule s = te::create_schedule({out});
    te::Stage so = s[out];
    auto oax = so.op_axis();
    auto [owo, owi] = so.split(oax[3], 3);
    so.vectorize(oax[4]);
    te::Stage sa = s[acc];
    sa.set_scope("local");
    sa.compute_at(so, owo);
    auto aax = sa.op_axis();
    auto rax = sa.op_reduce_axis();
    sa.reorder({rax[0], rax[1], rax[2], aax[3], aax[4]});
    sa.unroll(aax[3]);
    sa.vectorize(aax[4]);
    schedule_quantized_lanes(s, acc, target);
    NDArray xa = u8_array({w.N, w.C, w.H, w.W}, 3), wa = s8_array({w.O, w.C, w.KH, w.KW}, 4);
    runtime::Module m = build(s, {x, Wp, out}, target, "f");
    NDArray y = e2e::poisoned(e2e::shape_of(out), kI32);
    e2e::call(m.get_function("f"), {xa, pack_conv_ref(wa), y});
    NDArray ref = qconv_ref(xa, wa, w.attrs);
    for (int64_t i = 0; i < ref.numel(); ++i)
      ref.data_as<int32_t>()[i] = ref.data_as<int32_t>()[i] * 2 + 1;
    EXPECT_TRUE(all_close(y, ref)) << target.str();
    const bool vnni = target.has_feature("avx512vnni");
    EXPECT_EQ(e2e::lowered_text(s, {x, Wp, out}).find("llvm.x86.avx512.vpdpbusd.512(") !=
                  std::string::npos,
              vnni)
        << target.str();
    EXPECT_EQ(codegen::get_source(m, "asm").find("vpdpbusd") != std::string::npos, vnni);
  }
}

}  // namespace
}  // namespace kiln::topi
