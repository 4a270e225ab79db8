// LSTM cell: the plain and packed compute rules, the weight packing and the template (fallback
// and every knob candidate) against a naive C++ LSTMCell (PyTorch's gate order i, f, g, o).
#include "kiln/topi/lstm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/covering_configs.h"
#include "e2e/e2e_util.h"

namespace kiln::topi {
namespace {

using e2e::all_close;
using e2e::NDArray;
using e2e::random_array;

struct LstmData {
  NDArray x, h, c, Wi, Wh, b;
};

LstmData make_data(int64_t B, int64_t I, int64_t H, uint32_t seed) {
  auto f = DataType::Float(32);
  return {random_array({B, I}, f, seed),
          random_array({B, H}, f, seed + 1),
          random_array({B, H}, f, seed + 2),
          random_array({4 * H, I}, f, seed + 3, -0.5, 0.5),
          random_array({4 * H, H}, f, seed + 4, -0.5, 0.5),
          random_array({4 * H}, f, seed + 5)};
}

/// {h', c'} of torch.nn.LSTMCell, in double.
std::pair<NDArray, NDArray> lstm_ref(const LstmData& d) {
  int64_t B = d.x.shape()[0], I = d.x.shape()[1], H = d.h.shape()[1];
  std::vector<double> hn(B * H), cn(B * H);
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t n = 0; n < H; ++n) {
      double g[4];
      for (int q = 0; q < 4; ++q) {
        int64_t row = q * H + n;
        double acc = e2e::element(d.b, row);
        for (int64_t k = 0; k < I; ++k) acc += e2e::at(d.x, {b, k}) * e2e::at(d.Wi, {row, k});
        for (int64_t k = 0; k < H; ++k) acc += e2e::at(d.h, {b, k}) * e2e::at(d.Wh, {row, k});
        g[q] = acc;
      }
      double c = sig(g[1]) * e2e::at(d.c, {b, n}) + sig(g[0]) * std::tanh(g[2]);
      cn[b * H + n] = c;
      hn[b * H + n] = sig(g[3]) * std::tanh(c);
    }
  }
  auto f = DataType::Float(32);
  NDArray h =
      e2e::reference({B, H}, f, [&](const std::vector<int64_t>& i) { return hn[i[0] * H + i[1]]; });
  NDArray c =
      e2e::reference({B, H}, f, [&](const std::vector<int64_t>& i) { return cn[i[0] * H + i[1]]; });
  return {h, c};
}

/// Host-side packing: Wp[p, k, g*hb + u] = [Wi | Wh][g*H + p*hb + u, k], 0 past H.
NDArray pack_ref(const LstmData& d, int64_t hb) {
  int64_t I = d.Wi.shape()[1], H = d.Wh.shape()[1];
  return e2e::reference(
      {(H + hb - 1) / hb, I + H, 4 * hb}, DataType::Float(32), [&](const std::vector<int64_t>& i) {
        int64_t g = i[2] / hb, n = i[0] * hb + i[2] % hb, k = i[1];
        if (n >= H) return 0.0;
        return k < I ? e2e::at(d.Wi, {g * H + n, k}) : e2e::at(d.Wh, {g * H + n, k - I});
      });
}

const e2e::Tolerance kTol{2e-5, 2e-5};

using kiln::testing::covering_configs;

void check(const LstmWorkload& w, const autotune::Config& cfg, uint32_t seed) {
  auto inst = autotune::instantiate(lstm_cell_template(w, e2e::host_target()), cfg);
  LstmData d = make_data(w.batch, w.input, w.hidden, seed);
  int64_t hb = inst.config.knob("tile_x");
  auto out = e2e::build_and_run(inst.sch, inst.args, {d.x, d.h, d.c, pack_ref(d, hb), d.b});
  auto [h, c] = lstm_ref(d);
  EXPECT_TRUE(all_close(out[0], h, kTol) && all_close(out[1], c, kTol))
      << "B=" << w.batch << " I=" << w.input << " H=" << w.hidden << " config " << inst.config.str()
      << "\n"
      << all_close(out[0], h, kTol) << all_close(out[1], c, kTol) << "\n"
      << e2e::lowered_text(inst.sch, inst.args);
}

TEST(Lstm, PlainCellMatchesReference) {
  auto f = DataType::Float(32);
  const int64_t B = 2, I = 5, H = 7;
  auto x = te::placeholder({B, I}, f, "x"), h = te::placeholder({B, H}, f, "h"),
       c = te::placeholder({B, H}, f, "c"), Wi = te::placeholder({4 * H, I}, f, "Wi"),
       Wh = te::placeholder({4 * H, H}, f, "Wh"), b = te::placeholder({4 * H}, f, "b");
  auto outs = lstm_cell(x, h, c, Wi, Wh, b);
  LstmData d = make_data(B, I, H, 1);
  auto got = e2e::build_and_run(te::create_schedule(outs), {x, h, c, Wi, Wh, b, outs[0], outs[1]},
                                {d.x, d.h, d.c, d.Wi, d.Wh, d.b});
  auto [hr, cr] = lstm_ref(d);
  EXPECT_TRUE(all_close(got[0], hr, kTol));
  EXPECT_TRUE(all_close(got[1], cr, kTol));
}

TEST(Lstm, PackWeightMatchesHostPacking) {
  auto f = DataType::Float(32);
  for (auto [I, H, hb] : {std::tuple{5, 13, 16}, {3, 32, 16}, {1, 40, 32}}) {
    auto Wi = te::placeholder({4 * H, I}, f, "Wi"), Wh = te::placeholder({4 * H, H}, f, "Wh");
    auto Wp = pack_lstm_weight(Wi, Wh, hb);
    LstmData d = make_data(1, I, H, 7);
    auto got = e2e::build_and_run(te::create_schedule({Wp}), {Wi, Wh, Wp}, {d.Wi, d.Wh});
    EXPECT_TRUE(all_close(got[0], pack_ref(d, hb)));
  }
}

TEST(Lstm, FallbackOnSeveralShapes) {
  uint32_t seed = 20;
  for (LstmWorkload w : {LstmWorkload{1, 7, 13}, LstmWorkload{1, 16, 32}, LstmWorkload{3, 5, 20},
                         LstmWorkload{1, 1, 1}, LstmWorkload{4, 13, 48}}) {
    check(w, autotune::Config::fallback(), seed);
    seed += 7;
  }
  auto lm = autotune::instantiate(lstm_cell_template({1, 650, 650}, e2e::host_target()),
                                  autotune::Config::fallback());
  EXPECT_EQ(lm.config.str(), "tile_x=16 tile_y=1 tile_k=[325,4] unroll=1");
}

TEST(Lstm, EveryKnobCandidate) {
  LstmWorkload w{3, 6, 40};
  auto space = autotune::define_space(lstm_cell_template(w, e2e::host_target()));
  EXPECT_EQ(space.knob_names(), (std::vector<std::string>{"tile_x", "tile_y", "tile_k", "unroll"}));
  for (const auto& c : covering_configs(space)) check(w, c, 60);
}

TEST(Lstm, ShapeErrors) {
  auto f = DataType::Float(32);
  auto x = te::placeholder({1, 5}, f, "x"), h = te::placeholder({1, 7}, f, "h"),
       c = te::placeholder({2, 7}, f, "c"), b = te::placeholder({28}, f, "b");
  auto Wi = te::placeholder({28, 5}, f, "Wi"), Wh = te::placeholder({28, 7}, f, "Wh");
  EXPECT_EQ(e2e::error_of([&] { lstm_cell(x, h, c, Wi, Wh, b); }),
            "lstm_cell: x must be [B, I] and h, c [B, H], got x [1, 5], h [1, 7], c [2, 7]");
  auto c1 = te::placeholder({1, 7}, f, "c1"), b1 = te::placeholder({7}, f, "b1");
  EXPECT_EQ(e2e::error_of([&] { lstm_cell(x, h, c1, Wi, Wh, b1); }),
            "lstm_cell: bias must be [4H] = [28], got [7]");
  auto Wbad = te::placeholder({28, 6}, f, "Wbad");
  EXPECT_EQ(e2e::error_of([&] { lstm_cell(x, h, c1, Wbad, Wh, b); }),
            "lstm_cell: weights must be Wi [4H, I] = [28, 5] and Wh [4H, H] = [28, 7], got "
            "[28, 6] and [28, 7]");
  auto Wp = te::placeholder({2, 12, 64}, f, "Wp");
  EXPECT_EQ(e2e::error_of([&] { lstm_cell_packed(x, h, c1, Wp, b); }),
            "lstm_cell_packed: packed weight [2, 12, 64] (float32) does not match I = 5, H = 7 "
            "(expected [ceil(H/hb), I + H, 4hb])");
}

}  // namespace
}  // namespace kiln::topi
