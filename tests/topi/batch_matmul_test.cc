// batch_matmul: plain compute (both B layouts, broadcast batch) and the template (fallback on
// odd shapes, every knob candidate of both variants) against a naive C++ reference; errors.
#include "kiln/topi/batch_matmul.h"

#include <gtest/gtest.h>

#include <random>

#include "common/covering_configs.h"
#include "e2e/e2e_util.h"

namespace kiln::topi {
namespace {

using e2e::all_close;
using e2e::NDArray;
using e2e::random_array;

NDArray bmm_ref(const NDArray& A, const NDArray& B, bool tb) {
  int64_t BA = A.shape()[0], BB = B.shape()[0], M = A.shape()[1], K = A.shape()[2];
  int64_t N = tb ? B.shape()[1] : B.shape()[2];
  return e2e::reference({std::max(BA, BB), M, N}, DataType::Float(32),
                        [&](const std::vector<int64_t>& i) {
                          int64_t ba = BA == 1 ? 0 : i[0], bb = BB == 1 ? 0 : i[0];
                          double acc = 0;
                          for (int64_t k = 0; k < K; ++k)
                            acc += e2e::at(A, {ba, i[1], k}) *
                                   (tb ? e2e::at(B, {bb, i[2], k}) : e2e::at(B, {bb, k, i[2]}));
                          return acc;
                        });
}

using kiln::testing::covering_configs;

void check(const BatchMatmulWorkload& w, const autotune::Config& cfg, uint32_t seed) {
  auto inst = autotune::instantiate(batch_matmul_template(w, e2e::host_target()), cfg);
  NDArray A = random_array({w.batch, w.M, w.K}, DataType::Float(32), seed);
  NDArray B = w.transpose_b ? random_array({w.batch, w.N, w.K}, DataType::Float(32), seed + 1)
                            : random_array({w.batch, w.K, w.N}, DataType::Float(32), seed + 1);
  auto out = e2e::build_and_run(inst.sch, inst.args, {A, B});
  EXPECT_TRUE(all_close(out[0], bmm_ref(A, B, w.transpose_b)))
      << "batch=" << w.batch << " M=" << w.M << " N=" << w.N << " K=" << w.K
      << " transpose_b=" << w.transpose_b << " config " << inst.config.str() << "\n"
      << e2e::lowered_text(inst.sch, inst.args);
}

TEST(BatchMatmul, PlainComputeWithBroadcastBatch) {
  for (bool tb : {false, true}) {
    for (auto [ba, bb] : {std::pair{3, 3}, {1, 3}, {2, 1}}) {
      auto A = te::placeholder({ba, 5, 7}, DataType::Float(32), "A");
      auto B = tb ? te::placeholder({bb, 13, 7}, DataType::Float(32), "B")
                  : te::placeholder({bb, 7, 13}, DataType::Float(32), "B");
      auto C = batch_matmul(A, B, tb);
      NDArray a = random_array({ba, 5, 7}, DataType::Float(32), 1);
      NDArray b =
          random_array(tb ? std::vector<int64_t>{bb, 13, 7} : std::vector<int64_t>{bb, 7, 13},
                       DataType::Float(32), 2);
      auto out = e2e::build_and_run(te::create_schedule({C}), {A, B, C}, {a, b});
      EXPECT_TRUE(all_close(out[0], bmm_ref(a, b, tb))) << "tb=" << tb << " " << ba << "," << bb;
    }
  }
}

TEST(BatchMatmul, FallbackOnOddShapes) {
  uint32_t seed = 10;
  for (bool tb : {false, true}) {
    for (BatchMatmulWorkload w :
         {BatchMatmulWorkload{1, 1, 7, 13}, BatchMatmulWorkload{3, 13, 50, 9},
          BatchMatmulWorkload{2, 7, 64, 1}, BatchMatmulWorkload{4, 16, 32, 16}}) {
      w.transpose_b = tb;
      check(w, autotune::Config::fallback(), seed++);
    }
  }
  // Schedules only (no code): 6 x 64 with AVX-512's 32 registers, 6 x 16 with AVX2's 16.
  for (auto [target, want] :
       {std::pair<std::string, std::string>{"llvm -mcpu=skylake-avx512",
                                            "tile_x=64 tile_y=6 tile_k=[64,1] unroll=0"},
        {"llvm -mcpu=haswell", "tile_x=16 tile_y=6 tile_k=[64,1] unroll=0"}}) {
    auto fb = autotune::instantiate(batch_matmul_template({12, 64, 64, 64, true}, Target(target)),
                                    autotune::Config::fallback());
    EXPECT_EQ(fb.config.str(), want) << target;
  }
}

TEST(BatchMatmul, EveryKnobCandidate) {
  for (bool tb : {false, true}) {
    BatchMatmulWorkload w{2, 13, 50, 12, tb};
    auto space = autotune::define_space(batch_matmul_template(w, e2e::host_target()));
    EXPECT_EQ(space.knob_names(),
              (std::vector<std::string>{"tile_x", "tile_y", "tile_k", "unroll"}));
    for (const auto& c : covering_configs(space)) check(w, c, 50);
  }
}

TEST(BatchMatmul, EpilogueAndPaddedColumns) {
  // The graph's form: B [batch, K, N] with N = 37 (padded to 48 and sliced), M = 13 (a partial
  // row tile), and an element-wise epilogue scheduled with the product.
  const Target target = e2e::host_target();
  auto A = te::placeholder({2, 13, 20}, DataType::Float(32), "A");
  auto B = te::placeholder({2, 20, 37}, DataType::Float(32), "B");
  te::Tensor C = batch_matmul(A, B);
  EXPECT_EQ(C->op->tag, tag::kBatchMatmulUnpad);
  te::Tensor out = te::compute(
      C->shape,
      [&](ir::Var b, ir::Var m, ir::Var n) { return ir::max(C(b, m, n), ir::make_zero(C->dtype)); },
      "relu", "elemwise");
  te::Schedule s = te::create_schedule({out});
  autotune::Config cfg = autotune::Config::fallback();
  schedule_batch_matmul(cfg, s, C, target, out);
  NDArray a = random_array({2, 13, 20}, DataType::Float(32), 3);
  NDArray b = random_array({2, 20, 37}, DataType::Float(32), 4);
  auto got = e2e::build_and_run(s, {A, B, out}, {a, b});
  NDArray want = bmm_ref(a, b, false);
  for (int64_t i = 0; i < want.numel(); ++i)
    want.data_as<float>()[i] = std::max(want.data_as<float>()[i], 0.0f);
  EXPECT_TRUE(all_close(got[0], want));
  // Every local accumulator tile is a whole register tile (no partial panel): at most 8 rows
  // of 64 floats.
  std::string text = e2e::lowered_text(s, {A, B, out});
  size_t at = 0;
  int tiles = 0;
  while ((at = text.find(".local[float32 * ", at)) != std::string::npos) {
    at += 17;
    EXPECT_LE(std::stoll(text.substr(at)), 8 * 64) << text;
    ++tiles;
  }
  EXPECT_GE(tiles, 1) << text;
}

TEST(BatchMatmul, WideOddColumnsShiftTheLastPanelInsteadOfPadding) {
  // A wide product whose width is no multiple of 16 (Whisper's 1500 x 1500 attention scores)
  // is not padded: the product is the result, and a last panel that does not divide the
  // columns is shifted inwards, so no padded product is copied out. Every panel width. A
  // narrower one, where the shifted panel would recompute more than 1/16, is padded.
  auto A = te::placeholder({2, 13, 20}, DataType::Float(32), "A");
  auto B = te::placeholder({2, 20, 1000}, DataType::Float(32), "B");
  EXPECT_EQ(batch_matmul(A, B)->op->tag, tag::kBatchMatmul);
  EXPECT_EQ(batch_matmul_padded_width(1000), 1000);
  EXPECT_EQ(batch_matmul_padded_width(1500), 1500);
  EXPECT_EQ(batch_matmul_padded_width(196), 208);
  EXPECT_EQ(batch_matmul_padded_width(37), 48);
  BatchMatmulWorkload w{2, 13, 1000, 20, false};
  autotune::Template t = batch_matmul_template(w, e2e::host_target());
  for (const auto& c : covering_configs(autotune::define_space(t))) {
    check(w, c, 60);
    auto inst = autotune::instantiate(t, c);
    EXPECT_EQ(e2e::lowered_text(inst.sch, inst.args).find("_padded"), std::string::npos) << c.str();
  }
}

TEST(BatchMatmul, ShapeErrors) {
  auto A = te::placeholder({2, 4, 8}, DataType::Float(32), "A");
  auto B = te::placeholder({2, 9, 5}, DataType::Float(32), "B");
  EXPECT_EQ(e2e::error_of([&] { batch_matmul(A, B); }),
            "batch_matmul: reduction extents differ: A [2, 4, 8], B [2, 9, 5]");
  EXPECT_EQ(e2e::error_of([&] { batch_matmul(A, B, true); }),
            "batch_matmul: reduction extents differ: A [2, 4, 8], B [2, 9, 5] (transposed)");
  auto B3 = te::placeholder({3, 8, 5}, DataType::Float(32), "B3");
  EXPECT_EQ(e2e::error_of([&] { batch_matmul(A, B3); }),
            "batch_matmul: batch extents differ: A [2, 4, 8], B [3, 8, 5]");
  auto B2 = te::placeholder({8, 5}, DataType::Float(32), "B2");
  EXPECT_EQ(e2e::error_of([&] { batch_matmul(A, B2); }),
            "batch_matmul: inputs must be 3-D, got A [2, 4, 8] and B [8, 5]");
}

}  // namespace
}  // namespace kiln::topi
