// ONNX LSTM / GRU import, end to end: a model built in memory (random weights and inputs,
// seeded) is imported, compiled and run, and Y, Y_h, Y_c are compared with a naive C++
// implementation of the ONNX equations (gate order i, o, f, c; GRU z, r, h). Covers forward and
// bidirectional LSTM with and without initial states and bias, short constant sequence lengths,
// GRU with linear_before_reset; and the refusals (unknown activation, short sequences in
// reverse), which must name the node.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/error.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"
#include "onnx_test_util.h"

namespace kiln::frontend {
namespace {

using ::kiln::testing::error_of;
using Ints = std::vector<int64_t>;
using Vec = std::vector<float>;

runtime::NDArray array(const Ints& shape, const Vec& v) {
  runtime::NDArray a = runtime::NDArray::empty(shape, DataType::Float(32));
  std::copy(v.begin(), v.end(), a.data_as<float>());
  return a;
}

Vec random_vec(size_t n, uint32_t seed, float scale = 0.6f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  Vec v(n);
  for (float& x : v) x = d(gen);
  return v;
}

OnnxValueInfo info(const std::string& name, const Ints& shape) {
  OnnxValueInfo v{name, DataType::Float(32), true, {}};
  for (int64_t d : shape) v.shape.push_back(OnnxDim{d, ""});
  return v;
}

using test_util::run;

void expect_close(const runtime::NDArray& got, const Vec& want, const Ints& shape,
                  const std::string& what) {
  test_util::expect_close_to(got, want, shape, 1e-5f, 1e-4f, what);
}

float sigm(float x) { return 1.0f / (1.0f + std::exp(-x)); }

struct LstmCase {
  int64_t S = 4, B = 2, I = 3, H = 5;
  int dirs = 1;
  bool bias = true, initial = true;
  Ints lens;  // empty: full
};

/// Naive ONNX LSTM: Y [S, dirs, B, H], Y_h / Y_c [dirs, B, H].
void lstm_reference(const LstmCase& c, const Vec& X, const Vec& W, const Vec& R, const Vec& Bv,
                    const Vec& h0, const Vec& c0, Vec& Y, Vec& Yh, Vec& Yc) {
  int64_t S = c.S, B = c.B, I = c.I, H = c.H;
  Y.assign(static_cast<size_t>(S * c.dirs * B * H), 0.0f);
  Yh.assign(static_cast<size_t>(c.dirs * B * H), 0.0f);
  Yc = Yh;
  for (int d = 0; d < c.dirs; ++d) {
    for (int64_t b = 0; b < B; ++b) {
      int64_t len = c.lens.empty() ? S : c.lens[b];
      Vec h(H), cell(H);
      for (int64_t j = 0; j < H; ++j) {
        h[j] = c.initial ? h0[(d * B + b) * H + j] : 0;
        cell[j] = c.initial ? c0[(d * B + b) * H + j] : 0;
      }
      for (int64_t step = 0; step < len; ++step) {
        int64_t t = d == 0 ? step : len - 1 - step;
        Vec g(4 * H);
        for (int64_t r = 0; r < 4 * H; ++r) {
          float acc = c.bias ? Bv[d * 8 * H + r] + Bv[d * 8 * H + 4 * H + r] : 0.0f;
          for (int64_t k = 0; k < I; ++k)
            acc += X[(t * B + b) * I + k] * W[(d * 4 * H + r) * I + k];
          for (int64_t k = 0; k < H; ++k) acc += h[k] * R[(d * 4 * H + r) * H + k];
          g[r] = acc;
        }
        for (int64_t j = 0; j < H; ++j) {
          float i = sigm(g[j]), o = sigm(g[H + j]), f = sigm(g[2 * H + j]),
                cc = std::tanh(g[3 * H + j]);
          cell[j] = f * cell[j] + i * cc;
          h[j] = o * std::tanh(cell[j]);
          Y[((t * c.dirs + d) * B + b) * H + j] = h[j];
        }
      }
      for (int64_t j = 0; j < H; ++j) {
        Yh[(d * B + b) * H + j] = h[j];
        Yc[(d * B + b) * H + j] = cell[j];
      }
    }
  }
}

void check_lstm(const LstmCase& c, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "dirs " << c.dirs << " bias " << c.bias << " initial "
                                    << c.initial << " lens " << c.lens.size());
  int64_t S = c.S, B = c.B, I = c.I, H = c.H, D = c.dirs;
  Vec X = random_vec(S * B * I, seed, 1.0f), W = random_vec(D * 4 * H * I, seed + 1),
      R = random_vec(D * 4 * H * H, seed + 2), Bv = random_vec(D * 8 * H, seed + 3),
      h0 = random_vec(D * B * H, seed + 4), c0 = random_vec(D * B * H, seed + 5);
  OnnxModel m;
  m.path = "lstm.onnx";
  m.opsets[""] = 14;
  m.inputs = {info("X", {S, B, I})};
  m.initializers["W"] = array({D, 4 * H, I}, W);
  m.initializers["R"] = array({D, 4 * H, H}, R);
  OnnxNode n{"LSTM", "", "lstm", {"X", "W", "R", "", "", "", ""}, {"Y", "Y_h", "Y_c"}, {}, false};
  if (c.bias) {
    m.initializers["B"] = array({D, 8 * H}, Bv);
    n.inputs[3] = "B";
  }
  if (!c.lens.empty()) {
    runtime::NDArray l = runtime::NDArray::empty({B}, DataType::Int(32));
    for (int64_t b = 0; b < B; ++b) l.data_as<int32_t>()[b] = static_cast<int32_t>(c.lens[b]);
    m.initializers["lens"] = l;
    n.inputs[4] = "lens";
  }
  if (c.initial) {
    m.inputs.push_back(info("h0", {D, B, H}));
    m.inputs.push_back(info("c0", {D, B, H}));
    n.inputs[5] = "h0";
    n.inputs[6] = "c0";
  }
  n.attrs["hidden_size"] = H;
  n.attrs["direction"] = std::string(D == 2 ? "bidirectional" : "forward");
  m.nodes = {n};
  m.outputs = {info("Y", {S, D, B, H}), info("Y_h", {D, B, H}), info("Y_c", {D, B, H})};
  std::map<std::string, runtime::NDArray> in{{"X", array({S, B, I}, X)}};
  if (c.initial) {
    in["h0"] = array({D, B, H}, h0);
    in["c0"] = array({D, B, H}, c0);
  }
  std::vector<runtime::NDArray> out = run(m, in);
  ASSERT_EQ(out.size(), 3u);
  Vec Y, Yh, Yc;
  lstm_reference(c, X, W, R, Bv, h0, c0, Y, Yh, Yc);
  expect_close(out[0], Y, {S, D, B, H}, "Y");
  expect_close(out[1], Yh, {D, B, H}, "Y_h");
  expect_close(out[2], Yc, {D, B, H}, "Y_c");
}

TEST(OnnxRnn, LstmForwardWithInitialStatesAndBias) { check_lstm(LstmCase{}, 11); }

TEST(OnnxRnn, LstmForwardWithoutInitialStatesOrBias) {
  LstmCase c;
  c.bias = false;
  c.initial = false;
  check_lstm(c, 21);
}

TEST(OnnxRnn, LstmBidirectional) {
  LstmCase c;
  c.dirs = 2;
  c.S = 5;
  c.B = 3;
  check_lstm(c, 31);
}

TEST(OnnxRnn, LstmShortSequencesKeepTheirStateAndEmitZeros) {
  LstmCase c;
  c.B = 3;
  c.lens = {4, 2, 0};
  check_lstm(c, 41);
}

/// A one-node GRU model (forward, bias, linear_before_reset) and its naive reference.
TEST(OnnxRnn, GruLinearBeforeReset) {
  int64_t S = 3, B = 2, I = 4, H = 3;
  Vec X = random_vec(S * B * I, 51, 1.0f), W = random_vec(3 * H * I, 52),
      R = random_vec(3 * H * H, 53), Bv = random_vec(6 * H, 54);
  OnnxModel m;
  m.path = "gru.onnx";
  m.opsets[""] = 14;
  m.inputs = {info("X", {S, B, I})};
  m.initializers["W"] = array({1, 3 * H, I}, W);
  m.initializers["R"] = array({1, 3 * H, H}, R);
  m.initializers["B"] = array({1, 6 * H}, Bv);
  OnnxNode n{"GRU", "", "gru", {"X", "W", "R", "B"}, {"Y", "Y_h"}, {}, false};
  n.attrs["hidden_size"] = H;
  n.attrs["linear_before_reset"] = int64_t{1};
  m.nodes = {n};
  m.outputs = {info("Y", {S, 1, B, H}), info("Y_h", {1, B, H})};
  std::vector<runtime::NDArray> out = run(m, {{"X", array({S, B, I}, X)}});
  Vec Y(S * B * H), h(B * H, 0.0f);
  for (int64_t t = 0; t < S; ++t) {
    Vec next(B * H);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        auto xw = [&](int64_t r) {
          float a = Bv[r];
          for (int64_t k = 0; k < I; ++k) a += X[(t * B + b) * I + k] * W[r * I + k];
          return a;
        };
        auto hr = [&](int64_t r) {
          float a = Bv[3 * H + r];
          for (int64_t k = 0; k < H; ++k) a += h[b * H + k] * R[r * H + k];
          return a;
        };
        float z = sigm(xw(j) + hr(j)), rg = sigm(xw(H + j) + hr(H + j));
        float cand = std::tanh(xw(2 * H + j) + rg * hr(2 * H + j));
        next[b * H + j] = (1 - z) * cand + z * h[b * H + j];
        Y[(t * B + b) * H + j] = next[b * H + j];
      }
    h = next;
  }
  expect_close(out[0], Y, {S, 1, B, H}, "Y");
  expect_close(out[1], h, {1, B, H}, "Y_h");
}

OnnxModel tiny_lstm(const std::string& direction) {
  OnnxModel m;
  m.path = "bad_lstm.onnx";
  m.opsets[""] = 14;
  m.inputs = {info("X", {2, 2, 1})};
  int64_t D = direction == "bidirectional" ? 2 : 1;
  m.initializers["W"] = array({D, 4, 1}, random_vec(4 * D, 1));
  m.initializers["R"] = array({D, 4, 1}, random_vec(4 * D, 2));
  OnnxNode n{"LSTM", "", "lstm7", {"X", "W", "R"}, {"Y"}, {}, false};
  n.attrs["hidden_size"] = int64_t{1};
  n.attrs["direction"] = direction;
  m.nodes = {n};
  m.outputs = {info("Y", {2, D, 2, 1})};
  return m;
}

TEST(OnnxRnn, UnknownActivationIsRefusedNamingTheNode) {
  OnnxModel m = tiny_lstm("forward");
  m.nodes[0].attrs["activations"] = std::vector<std::string>{"Sigmoid", "Gelu", "Tanh"};
  std::string msg = error_of([&] { import_onnx(m); });
  EXPECT_NE(msg.find("node 'lstm7' (LSTM): the LSTM activation 'Gelu' is not supported yet"),
            std::string::npos)
      << msg;
}

TEST(OnnxRnn, ShortSequencesInReverseAreRefused) {
  OnnxModel m = tiny_lstm("reverse");
  runtime::NDArray l = runtime::NDArray::empty({2}, DataType::Int(32));
  l.data_as<int32_t>()[0] = 2;
  l.data_as<int32_t>()[1] = 1;
  m.initializers["lens"] = l;
  m.nodes[0].inputs = {"X", "W", "R", "", "lens"};
  std::string msg = error_of([&] { import_onnx(m); });
  EXPECT_NE(msg.find("sequence_lens shorter than the sequence in a reverse direction is not "
                     "supported yet"),
            std::string::npos)
      << msg;
}

TEST(OnnxRnn, WrongWeightShapeIsAUserError) {
  OnnxModel m = tiny_lstm("forward");
  m.initializers["W"] = array({1, 3, 1}, random_vec(3, 1));
  std::string msg = error_of([&] { import_onnx(m); });
  EXPECT_NE(msg.find("node 'lstm7' (LSTM): W must be [1, 4·hidden, 1]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln::frontend
