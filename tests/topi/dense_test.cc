// Dense: the plain and packed compute rules and the packed template (fallback and sampled
// configs, every knob) against a naive C++ reference on seeded random inputs; packing against
// a host-side packing; shape errors.
#include "kiln/topi/dense.h"

#include <gtest/gtest.h>

#include <random>

#include "common/covering_configs.h"
#include "e2e/e2e_util.h"

namespace kiln::topi {
namespace {

using e2e::all_close;
using e2e::NDArray;
using e2e::random_array;

/// y = x·Wᵀ (+ b) (relu), in double.
NDArray dense_ref(const NDArray& x, const NDArray& W, const NDArray* b, bool relu) {
  int64_t M = x.shape()[0], K = x.shape()[1], N = W.shape()[0];
  return e2e::reference({M, N}, DataType::Float(32), [&](const std::vector<int64_t>& i) {
    double acc = b ? e2e::element(*b, i[1]) : 0.0;
    for (int64_t k = 0; k < K; ++k) acc += e2e::at(x, {i[0], k}) * e2e::at(W, {i[1], k});
    return relu ? std::max(acc, 0.0) : acc;
  });
}

/// Wp[no, k, ni] = W[no*nb + ni, k], zero past N (host-side packing).
NDArray pack_ref(const NDArray& W, int64_t nb) {
  int64_t N = W.shape()[0], K = W.shape()[1];
  return e2e::reference({(N + nb - 1) / nb, K, nb}, DataType::Float(32),
                        [&](const std::vector<int64_t>& i) {
                          int64_t n = i[0] * nb + i[2];
                          return n < N ? e2e::at(W, {n, i[1]}) : 0.0;
                        });
}

using kiln::testing::covering_configs;

/// Runs the template at `cfg` and compares with the reference.
void check_template(const DenseWorkload& w, const autotune::Config& cfg, uint32_t seed) {
  autotune::Template t = dense_template(w, e2e::host_target());
  autotune::Instance inst = autotune::instantiate(t, cfg);
  int64_t nb = inst.config.knob("tile_x");
  NDArray x = random_array({w.M, w.K}, DataType::Float(32), seed);
  NDArray W = random_array({w.N, w.K}, DataType::Float(32), seed + 1);
  NDArray b = random_array({w.N}, DataType::Float(32), seed + 2);
  std::vector<NDArray> in{x, pack_ref(W, nb)};
  if (w.bias) in.push_back(b);
  auto out = e2e::build_and_run(inst.sch, inst.args, in);
  EXPECT_TRUE(all_close(out[0], dense_ref(x, W, w.bias ? &b : nullptr, w.relu), {1e-5, 1e-5}))
      << "M=" << w.M << " N=" << w.N << " K=" << w.K << " bias=" << w.bias << " relu=" << w.relu
      << " config " << inst.config.str() << "\n"
      << e2e::lowered_text(inst.sch, inst.args);
}

TEST(Dense, PlainComputeMatchesReference) {
  for (auto [M, N, K] : {std::tuple{1, 7, 13}, {13, 7, 1}, {5, 16, 33}}) {
    auto x = te::placeholder({M, K}, DataType::Float(32), "x");
    auto W = te::placeholder({N, K}, DataType::Float(32), "W");
    auto b = te::placeholder({N}, DataType::Float(32), "b");
    auto y = dense(x, W, b);
    NDArray xa = random_array({M, K}, DataType::Float(32), 1);
    NDArray wa = random_array({N, K}, DataType::Float(32), 2);
    NDArray ba = random_array({N}, DataType::Float(32), 3);
    auto out = e2e::build_and_run(te::create_schedule({y}), {x, W, b, y}, {xa, wa, ba});
    EXPECT_TRUE(all_close(out[0], dense_ref(xa, wa, &ba, false)));
  }
}

TEST(Dense, PackWeightMatchesHostPacking) {
  for (auto [N, K, nb] : {std::tuple{50, 7, 16}, {64, 3, 32}, {1, 1, 16}}) {
    auto W = te::placeholder({N, K}, DataType::Float(32), "W");
    auto Wp = pack_dense_weight(W, nb);
    NDArray wa = random_array({N, K}, DataType::Float(32), 4);
    auto out = e2e::build_and_run(te::create_schedule({Wp}), {W, Wp}, {wa});
    EXPECT_TRUE(all_close(out[0], pack_ref(wa, nb)));
  }
}

TEST(Dense, PackedComputeWithBiasUnscheduled) {
  auto x = te::placeholder({3, 9}, DataType::Float(32), "x");
  auto Wp = te::placeholder({2, 9, 16}, DataType::Float(32), "Wp");
  auto b = te::placeholder({20}, DataType::Float(32), "b");
  auto y = dense_packed(x, Wp, 20, b);
  NDArray xa = random_array({3, 9}, DataType::Float(32), 5);
  NDArray wa = random_array({20, 9}, DataType::Float(32), 6);
  NDArray ba = random_array({20}, DataType::Float(32), 7);
  auto out =
      e2e::build_and_run(te::create_schedule({y}), {x, Wp, b, y}, {xa, pack_ref(wa, 16), ba});
  EXPECT_TRUE(all_close(out[0], dense_ref(xa, wa, &ba, false)));
}

TEST(Dense, FallbackScheduleOnManyShapes) {
  uint32_t seed = 10;
  for (DenseWorkload w :
       {DenseWorkload{1, 64, 32}, DenseWorkload{1, 7, 13, true, false},
        DenseWorkload{7, 13, 5, true, true}, DenseWorkload{13, 50, 33}, DenseWorkload{1, 1, 1},
        DenseWorkload{64, 128, 64, false, true}, DenseWorkload{2, 100, 17, true, true}}) {
    check_template(w, autotune::Config::fallback(), seed);
    seed += 3;
  }
}

TEST(Dense, FewPanelsShiftTheLastRowTileAndStayParallel) {
  // ConvNeXt's channels-last Linear: 3136 pixels x 40 outputs, one panel; rows 6 per tile leave
  // 4. With fewer than 8 panels every tile is whole (the last one shifted inwards) and the row
  // tiles run in parallel with the panels.
  uint32_t seed = 40;
  for (DenseWorkload w : {DenseWorkload{3136, 40, 16}, DenseWorkload{13, 50, 33, true, true}}) {
    check_template(w, autotune::Config::fallback(), seed);
    seed += 3;
    autotune::Instance inst =
        autotune::instantiate(dense_template(w, e2e::host_target()), autotune::Config::fallback());
    ASSERT_NE(w.M % inst.config.knob("tile_y"), 0);
    std::string text = e2e::lowered_text(inst.sch, inst.args);
    EXPECT_NE(text.find("parallel for (j.outer.i.outer.fused"), std::string::npos) << text;
    // The last tile starts at M - tile_y.
    const std::string last = ", " + std::to_string(w.M - inst.config.knob("tile_y")) + ")";
    EXPECT_NE(text.find(last), std::string::npos) << text;
  }
  // Many panels (BERT's 128 tokens by 3072 outputs, 48 panels): the panels alone are parallel
  // and each one's partial row tile is split off, nothing recomputed.
  DenseWorkload many{128, 3072, 64};
  autotune::Instance inst =
      autotune::instantiate(dense_template(many, e2e::host_target()), autotune::Config::fallback());
  ASSERT_NE(many.M % inst.config.knob("tile_y"), 0);
  std::string text = e2e::lowered_text(inst.sch, inst.args);
  EXPECT_NE(text.find("parallel for (j.outer, 0, "), std::string::npos) << text;
  EXPECT_EQ(text.find("min("), std::string::npos) << text;
}

TEST(Dense, FallbackConfigIsTheDocumentedDefault) {
  // The register tile follows the target's vector registers: 6 x 64 (24 zmm accumulators of
  // 32) with AVX-512, 6 x 16 (12 ymm of 16) with AVX2; a GEMV takes the widest panel on both.
  // Only schedules are built here (no code), so any target will do.
  const Target avx512("llvm -mcpu=skylake-avx512"), avx2("llvm -mcpu=haswell");
  auto fallback = [](const DenseWorkload& w, const Target& t) {
    return autotune::instantiate(dense_template(w, t), autotune::Config::fallback()).config.str();
  };
  EXPECT_EQ(fallback({1, 1024, 1024}, avx512), "tile_x=64 tile_y=1 tile_k=[256,4] unroll=1");
  EXPECT_EQ(fallback({64, 1024, 1024}, avx512), "tile_x=64 tile_y=6 tile_k=[1024,1] unroll=0");
  EXPECT_EQ(fallback({1, 1024, 1024}, avx2), "tile_x=64 tile_y=1 tile_k=[256,4] unroll=1");
  EXPECT_EQ(fallback({64, 1024, 1024}, avx2), "tile_x=16 tile_y=6 tile_k=[1024,1] unroll=0");
  // Two rows: 2 x 32 (8 accumulators) with AVX2, where 2 x 64 would need 16 + 8 + 1.
  EXPECT_EQ(fallback({2, 1024, 1024}, avx2), "tile_x=32 tile_y=2 tile_k=[1024,1] unroll=0");
  EXPECT_EQ(fallback({2, 1024, 1024}, avx512), "tile_x=64 tile_y=2 tile_k=[1024,1] unroll=0");
}

TEST(Dense, SampledConfigsExerciseEveryKnob) {
  // Odd sizes: tails in rows (13), columns (50 = 3 * 16 + 2) and k (33).
  DenseWorkload w{13, 50, 33, true, true};
  autotune::ConfigSpace space = autotune::define_space(dense_template(w, e2e::host_target()));
  EXPECT_EQ(space.knob_names(), (std::vector<std::string>{"tile_x", "tile_y", "tile_k", "unroll"}));
  // Every candidate of every knob at least once (knob i takes candidate j % n_i in config j),
  // then a few random points.
  for (const autotune::Config& c : covering_configs(space, 2)) check_template(w, c, 100);
}

TEST(Dense, ShapeErrorsNameOpAndShapes) {
  auto x = te::placeholder({4, 8}, DataType::Float(32), "x");
  auto W = te::placeholder({5, 9}, DataType::Float(32), "W");
  EXPECT_EQ(e2e::error_of([&] { dense(x, W); }),
            "dense: reduction extents differ: data [4, 8], weight [5, 9]");
  auto W2 = te::placeholder({5, 8}, DataType::Float(32), "W2");
  auto b = te::placeholder({4}, DataType::Float(32), "b");
  EXPECT_EQ(e2e::error_of([&] { dense(x, W2, b); }), "dense: bias must be [5], got [4]");
  auto Wp = te::placeholder({2, 8, 16}, DataType::Float(32), "Wp");
  EXPECT_EQ(e2e::error_of([&] { dense_packed(x, Wp, 40); }),
            "dense_packed: 40 outputs do not match packed weight [2, 8, 16] (needs 17 to 32)");
  auto xi = te::placeholder({4, 8}, DataType::Int(8), "xi");
  EXPECT_NE(
      e2e::error_of([&] { dense(xi, W2); }).find("dense: needs floating-point data, got int8"),
      std::string::npos);
}

}  // namespace
}  // namespace kiln::topi
