// The ONNX form of the LSTM cell (gates = xg + h·Rᵀ, xg and R in ONNX's gate order i, o, f, c):
// the plain rule, the weight packing (te compute and the host index, which must agree) and the
// template (fallback and every knob candidate) against a naive C++ ONNX LSTM step.
#include <gtest/gtest.h>

#include <cmath>

#include "common/covering_configs.h"
#include "e2e/e2e_util.h"
#include "kiln/topi/lstm.h"

namespace kiln::topi {
namespace {

using e2e::all_close;
using e2e::NDArray;
using e2e::random_array;

struct OnnxCellData {
  NDArray xg, h, c, R;
};

OnnxCellData make_data(int64_t B, int64_t H, uint32_t seed) {
  auto f = DataType::Float(32);
  return {random_array({B, 4 * H}, f, seed), random_array({B, H}, f, seed + 1),
          random_array({B, H}, f, seed + 2), random_array({4 * H, H}, f, seed + 3, -0.5, 0.5)};
}

/// {h', c'} of one ONNX LSTM step (gates i, o, f, c), in double.
std::pair<NDArray, NDArray> onnx_ref(const OnnxCellData& d) {
  int64_t B = d.h.shape()[0], H = d.h.shape()[1];
  std::vector<double> hn(B * H), cn(B * H);
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t n = 0; n < H; ++n) {
      double g[4];  // i, o, f, c
      for (int q = 0; q < 4; ++q) {
        int64_t row = q * H + n;
        double acc = e2e::at(d.xg, {b, row});
        for (int64_t k = 0; k < H; ++k) acc += e2e::at(d.h, {b, k}) * e2e::at(d.R, {row, k});
        g[q] = acc;
      }
      double c = sig(g[2]) * e2e::at(d.c, {b, n}) + sig(g[0]) * std::tanh(g[3]);
      cn[b * H + n] = c;
      hn[b * H + n] = sig(g[1]) * std::tanh(c);
    }
  }
  auto f = DataType::Float(32);
  auto of = [&](const std::vector<double>& v) {
    return e2e::reference({B, H}, f,
                          [&](const std::vector<int64_t>& i) { return v[i[0] * H + i[1]]; });
  };
  return {of(hn), of(cn)};
}

/// Host packing through packed_lstm_onnx_index (what alter_op_layout does).
NDArray host_pack(const NDArray& R, int64_t hb) {
  const int64_t H = R.shape()[1];
  std::vector<int64_t> ps = packed_lstm_onnx_weight_shape(H, hb);
  std::vector<double> flat(static_cast<size_t>(ps[0] * ps[1] * ps[2]), 0.0);
  for (int64_t row = 0; row < 4 * H; ++row)
    for (int64_t k = 0; k < H; ++k)
      flat[packed_lstm_onnx_index(row, k, H, hb)] = e2e::at(R, {row, k});
  return e2e::reference(ps, DataType::Float(32), [&](const std::vector<int64_t>& i) {
    return flat[(i[0] * ps[1] + i[1]) * ps[2] + i[2]];
  });
}

const e2e::Tolerance kTol{2e-5, 2e-5};

void check(const LstmWorkload& w, const autotune::Config& cfg, uint32_t seed) {
  auto inst = autotune::instantiate(lstm_cell_onnx_template(w, e2e::host_target()), cfg);
  OnnxCellData d = make_data(w.batch, w.hidden, seed);
  int64_t hb = inst.config.knob("tile_x");
  auto out = e2e::build_and_run(inst.sch, inst.args, {d.xg, d.h, d.c, host_pack(d.R, hb)});
  auto [h, c] = onnx_ref(d);
  EXPECT_TRUE(all_close(out[0], h, kTol) && all_close(out[1], c, kTol))
      << "B=" << w.batch << " H=" << w.hidden << " config " << inst.config.str();
}

TEST(LstmOnnx, PlainCellMatchesReference) {
  auto f = DataType::Float(32);
  const int64_t B = 2, H = 7;
  auto xg = te::placeholder({B, 4 * H}, f, "xg"), h = te::placeholder({B, H}, f, "h"),
       c = te::placeholder({B, H}, f, "c"), R = te::placeholder({4 * H, H}, f, "R");
  auto outs = lstm_cell_onnx(xg, h, c, R);
  OnnxCellData d = make_data(B, H, 3);
  auto got = e2e::build_and_run(te::create_schedule(outs), {xg, h, c, R, outs[0], outs[1]},
                                {d.xg, d.h, d.c, d.R});
  auto [hr, cr] = onnx_ref(d);
  EXPECT_TRUE(all_close(got[0], hr, kTol));
  EXPECT_TRUE(all_close(got[1], cr, kTol));
}

TEST(LstmOnnx, PackComputeMatchesHostIndex) {
  auto f = DataType::Float(32);
  for (auto [H, hb] : {std::pair{13, 16}, {32, 16}, {40, 32}, {1, 16}}) {
    auto R = te::placeholder({4 * H, H}, f, "R");
    auto Rp = pack_lstm_onnx_weight(R, hb);
    OnnxCellData d = make_data(1, H, 9);
    auto got = e2e::build_and_run(te::create_schedule({Rp}), {R, Rp}, {d.R});
    EXPECT_TRUE(all_close(got[0], host_pack(d.R, hb))) << "H=" << H << " hb=" << hb;
  }
}

TEST(LstmOnnx, FallbackOnSeveralShapes) {
  uint32_t seed = 30;
  for (LstmWorkload w : {LstmWorkload{1, 1, 13}, LstmWorkload{1, 1, 200}, LstmWorkload{3, 1, 20},
                         LstmWorkload{1, 1, 1}, LstmWorkload{4, 1, 48}}) {
    check(w, autotune::Config::fallback(), seed);
    seed += 7;
  }
}

TEST(LstmOnnx, EveryKnobCandidate) {
  LstmWorkload w{3, 1, 40};
  auto space = autotune::define_space(lstm_cell_onnx_template(w, e2e::host_target()));
  EXPECT_EQ(space.knob_names(), (std::vector<std::string>{"tile_x", "tile_y", "tile_k", "unroll"}));
  for (const auto& c : kiln::testing::covering_configs(space)) check(w, c, 70);
}

TEST(LstmOnnx, ShapeErrors) {
  auto f = DataType::Float(32);
  auto xg = te::placeholder({1, 20}, f, "xg"), h = te::placeholder({1, 5}, f, "h"),
       c = te::placeholder({1, 5}, f, "c");
  auto Rbad = te::placeholder({20, 6}, f, "Rbad");
  EXPECT_EQ(e2e::error_of([&] { lstm_cell_onnx(xg, h, c, Rbad); }),
            "lstm_cell_onnx: R must be [4H, H] = [20, 5] of float32, got [20, 6] of float32");
  auto Rp = te::placeholder({2, 5, 64}, f, "Rp");
  EXPECT_EQ(e2e::error_of([&] { lstm_cell_onnx_packed(xg, h, c, Rp); }),
            "lstm_cell_onnx_packed: packed weight [2, 5, 64] (float32) does not match H = 5 "
            "(expected [ceil(H/hb), H, 4hb])");
}

}  // namespace
}  // namespace kiln::topi
