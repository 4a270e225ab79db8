// The lstm_cell graph op (ops_rnn.cc) and its packed form (alter_op_layout → lstm_cell_packed,
// scheduled by topi's LSTM cell template): ONNX LSTM layers unrolled into lstm_cell ops the way
// the ONNX importer builds them (projection of all steps, one cell per step, Y as a concat of
// the steps), compiled at opt_level 0 (plain rule, unfused) and 2 (packed, fused), run on
// random inputs and compared with a naive C++ ONNX LSTM (gate order i, o, f, c) in double.
// Covers forward / reverse / bidirectional, initial states, B > 1, H not a multiple of the
// block width, a non-constant R (stays the plain op), a tuned config (its block width used by both
// the packing and the schedule), and the op's shape error.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>

#include "common/error.h"
#include "kiln/autotune/record.h"
#include "kiln/graph/build_module.h"
#include "kiln/graph/transform.h"
#include "kiln/graph/tuning.h"
#include "kiln/runtime/graph_executor.h"

namespace kiln::graph {
namespace {

using Ints = std::vector<int64_t>;
using Vec = std::vector<float>;
using runtime::NDArray;

struct LstmCase {
  int64_t S = 4, B = 2, I = 3, H = 5;
  int dirs = 1;
  bool reverse = false;  // the only direction runs backwards (dirs 1)
  bool initial = true;   // h0, c0 are inputs (else zeros)
  bool const_r = true;   // R a constant (packed at opt_level 2), else an input
};

struct LstmData {
  Vec X, W, R, Bv, h0, c0;  // [S,B,I], [D,4H,I], [D,4H,H], [D,8H], [D,B,H], [D,B,H]
};

Vec random_vec(int64_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> d(-scale, scale);
  Vec v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

LstmData make_data(const LstmCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t D = c.dirs, H = c.H;
  return {random_vec(c.S * c.B * c.I, rng, 1.0f), random_vec(D * 4 * H * c.I, rng, 0.6f),
          random_vec(D * 4 * H * H, rng, 0.6f),   random_vec(D * 8 * H, rng, 0.6f),
          random_vec(D * c.B * H, rng, 1.0f),     random_vec(D * c.B * H, rng, 1.0f)};
}

NDArray array(const Ints& shape, const float* v) {
  NDArray a = NDArray::empty(shape, DataType::Float(32));
  std::copy(v, v + a.numel(), a.data_as<float>());
  return a;
}

bool backwards(const LstmCase& c, int d) { return c.reverse || d == 1; }

/// The layer as lstm_cell ops; results Y [S, D, B, H], Y_h and Y_c [D, B, H].
Graph build_graph(const LstmCase& c, const LstmData& v) {
  const int64_t S = c.S, B = c.B, I = c.I, H = c.H, D = c.dirs;
  Graph g;
  Entry x = g.add_input("X", {S, B, I}, DataType::Float(32));
  Entry h0, c0;
  if (c.initial) {
    h0 = g.add_input("h0", {D, B, H}, DataType::Float(32));
    c0 = g.add_input("c0", {D, B, H}, DataType::Float(32));
  }
  auto slice0 = [&](Entry e, int64_t k) {
    Entry s = g.add_op("strided_slice", {e},
                       {{"begin", Ints{k}}, {"end", Ints{k + 1}}, {"axes", Ints{0}}});
    return g.add_op("squeeze", {s}, {{"axes", Ints{0}}});
  };
  std::vector<Entry> ys, hs, cs;
  for (int64_t d = 0; d < D; ++d) {
    const std::string sd = std::to_string(d);
    Entry w = g.add_constant("W" + sd, array({4 * H, I}, &v.W[d * 4 * H * I]));
    Entry r = c.const_r ? g.add_constant("R" + sd, array({4 * H, H}, &v.R[d * 4 * H * H]))
                        : g.add_input("R" + sd, {4 * H, H}, DataType::Float(32));
    Entry wb = g.add_constant("Wb" + sd, array({4 * H}, &v.Bv[d * 8 * H]));
    Entry rb = g.add_constant("Rb" + sd, array({4 * H}, &v.Bv[d * 8 * H + 4 * H]));
    Entry x2 = g.add_op("reshape", {x}, {{"newshape", Ints{S * B, I}}});
    Entry p = g.add_op("add", {g.add_op("dense", {x2, w}), g.add_op("add", {wb, rb})});
    Entry proj = g.add_op("reshape", {p}, {{"newshape", Ints{S, B, 4 * H}}});
    Entry h, cell;
    if (c.initial) {
      h = slice0(h0, d);
      cell = slice0(c0, d);
    } else {
      NDArray z = NDArray::empty({B, H}, DataType::Float(32));
      std::fill(z.data_as<float>(), z.data_as<float>() + z.numel(), 0.0f);
      h = cell = g.add_constant("zero" + sd, z);
    }
    std::vector<Entry> out(static_cast<size_t>(S));
    for (int64_t k = 0; k < S; ++k) {
      int64_t t = backwards(c, static_cast<int>(d)) ? S - 1 - k : k;
      Entry hc = g.add_op("lstm_cell", {slice0(proj, t), h, cell, r});
      h = hc;
      cell = Entry{hc.node, 1};
      out[static_cast<size_t>(t)] = h;
    }
    Entry all = g.add_op("concat", out, {{"axis", int64_t{0}}});
    ys.push_back(g.add_op("reshape", {all}, {{"newshape", Ints{S, 1, B, H}}}));
    hs.push_back(g.add_op("unsqueeze", {h}, {{"axes", Ints{0}}}));
    cs.push_back(g.add_op("unsqueeze", {cell}, {{"axes", Ints{0}}}));
  }
  auto cat = [&](const std::vector<Entry>& es, int64_t axis) {
    return es.size() == 1 ? es[0] : g.add_op("concat", es, {{"axis", axis}});
  };
  g.set_outputs({cat(ys, 1), cat(hs, 0), cat(cs, 0)});
  return g;
}

/// Naive ONNX LSTM in double: Y [S, D, B, H], Y_h and Y_c [D, B, H].
std::vector<std::vector<double>> reference(const LstmCase& c, const LstmData& v) {
  const int64_t S = c.S, B = c.B, I = c.I, H = c.H, D = c.dirs;
  std::vector<double> Y(static_cast<size_t>(S * D * B * H)), Yh(static_cast<size_t>(D * B * H)),
      Yc(Yh.size());
  auto sig = [](double a) { return 1.0 / (1.0 + std::exp(-a)); };
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(static_cast<size_t>(H)), cell(h.size()), gate(4 * h.size());
      for (int64_t j = 0; j < H; ++j) {
        h[j] = c.initial ? v.h0[(d * B + b) * H + j] : 0.0;
        cell[j] = c.initial ? v.c0[(d * B + b) * H + j] : 0.0;
      }
      for (int64_t k = 0; k < S; ++k) {
        int64_t t = backwards(c, static_cast<int>(d)) ? S - 1 - k : k;
        for (int64_t row = 0; row < 4 * H; ++row) {
          double acc = double(v.Bv[d * 8 * H + row]) + v.Bv[d * 8 * H + 4 * H + row];
          for (int64_t q = 0; q < I; ++q)
            acc += double(v.X[(t * B + b) * I + q]) * v.W[(d * 4 * H + row) * I + q];
          for (int64_t q = 0; q < H; ++q) acc += h[q] * v.R[(d * 4 * H + row) * H + q];
          gate[row] = acc;
        }
        for (int64_t j = 0; j < H; ++j) {
          double i = sig(gate[j]), o = sig(gate[H + j]), f = sig(gate[2 * H + j]),
                 g = std::tanh(gate[3 * H + j]);
          cell[j] = f * cell[j] + i * g;
          h[j] = o * std::tanh(cell[j]);
          Y[((t * D + d) * B + b) * H + j] = h[j];
        }
      }
      for (int64_t j = 0; j < H; ++j) {
        Yh[(d * B + b) * H + j] = h[j];
        Yc[(d * B + b) * H + j] = cell[j];
      }
    }
  }
  return {Y, Yh, Yc};
}

/// Launches of kernels whose name starts with `prefix` in a module's graph.
int launches(const CompiledModule& m, const std::string& prefix) {
  int n = 0;
  const std::string key = "\"func_name\":\"" + prefix;
  for (size_t p = m.graph_json.find(key); p != std::string::npos; p = m.graph_json.find(key, p + 1))
    ++n;
  return n;
}

void check(const LstmCase& c, int opt_level, uint32_t seed, BuildOptions bo = {}) {
  SCOPED_TRACE(::testing::Message()
               << "opt_level " << opt_level << " S " << c.S << " B " << c.B << " I " << c.I << " H "
               << c.H << " dirs " << c.dirs << " reverse " << c.reverse << " initial " << c.initial
               << " const_r " << c.const_r);
  LstmData v = make_data(c, seed);
  Graph g = build_graph(c, v);
  bo.opt_level = opt_level;
  CompiledModule m = build_module(g, Target::host(), bo);
  if (!bo.tuning_records.empty()) {
    std::string report;
    for (const std::string& line : m.tuning_report) report += line + "\n";
    EXPECT_NE(report.find("tuned   lstm_cell_onnx_cpu(lstm_cell B" + std::to_string(c.B) + " H" +
                          std::to_string(c.H) + ")"),
              std::string::npos)
        << report;
    // R packed in blocks of 32 hidden units (the record's tile_x): [ceil(H/32), H, 4·32].
    int packed32 = 0;
    for (const auto& [name, value] : m.params)
      packed32 += value.shape() == Ints{(c.H + 31) / 32, c.H, 128};
    EXPECT_EQ(packed32, c.dirs);
  }
  auto ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  const int64_t S = c.S, B = c.B, H = c.H, D = c.dirs;
  ex.set_input("X", array({S, B, c.I}, v.X.data()));
  if (c.initial) {
    ex.set_input("h0", array({D, B, H}, v.h0.data()));
    ex.set_input("c0", array({D, B, H}, v.c0.data()));
  }
  if (!c.const_r)
    for (int64_t d = 0; d < D; ++d)
      ex.set_input("R" + std::to_string(d), array({4 * H, H}, &v.R[d * 4 * H * H]));
  ex.run();
  std::vector<std::vector<double>> want = reference(c, v);
  const std::vector<Ints> shapes{{S, D, B, H}, {D, B, H}, {D, B, H}};
  ASSERT_EQ(ex.num_outputs(), 3);
  for (int o = 0; o < 3; ++o) {
    NDArray got = ex.get_output(o);
    ASSERT_EQ(got.shape(), shapes[o]) << "output " << o;
    int bad = 0;
    for (size_t k = 0; k < want[o].size(); ++k) {
      double x = got.data_as<float>()[k], y = want[o][k];
      if (!(std::abs(x - y) <= 2e-5 + 2e-4 * std::abs(y)) && bad++ < 5)
        ADD_FAILURE() << "output " << o << " element " << k << ": got " << x << ", expected " << y;
    }
  }
  // At opt_level 2 a constant R makes every step one launch of a packed-cell kernel that the
  // steps share (the step's row of the projection is sliced by a small kernel of its own);
  // otherwise no packed cell runs.
  const bool packed = opt_level >= 2 && c.const_r;
  EXPECT_EQ(launches(m, "fused_lstm_cell_packed"), packed ? S * D : 0);
  EXPECT_EQ(launches(m, "fused_lstm_cell_"), S * D);
  if (packed) {
    EXPECT_EQ(launches(m, "fused_squeeze"), S * D + (c.initial ? 2 * D : 0));
    std::set<std::string> cell_kernels;
    const std::string key = "\"func_name\":\"fused_lstm_cell_packed";
    for (size_t p = m.graph_json.find(key); p != std::string::npos;
         p = m.graph_json.find(key, p + 1))
      cell_kernels.insert(m.graph_json.substr(p, m.graph_json.find('"', p + 13) - p));
    // The first step may differ (its zero initial state is a constant); the others share one.
    EXPECT_LE(cell_kernels.size(), 2u) << "the steps should share the cell kernel";
  }
}

TEST(LstmCellOp, ForwardZeroStatesBatch1) {
  LstmCase c;
  c.S = 5, c.B = 1, c.I = 4, c.H = 16, c.initial = false;
  for (int level : {0, 2}) check(c, level, 1);
}

TEST(LstmCellOp, ReverseWithInitialStatesHiddenNotABlockMultiple) {
  LstmCase c;
  c.S = 4, c.B = 3, c.I = 5, c.H = 13, c.reverse = true;
  for (int level : {0, 2}) check(c, level, 2);
}

TEST(LstmCellOp, BidirectionalWithInitialStates) {
  LstmCase c;
  c.S = 3, c.B = 2, c.I = 3, c.H = 20, c.dirs = 2;
  for (int level : {0, 2}) check(c, level, 3);
}

TEST(LstmCellOp, WideHiddenSeveralPanels) {
  LstmCase c;
  c.S = 3, c.B = 2, c.I = 7, c.H = 40;
  for (int level : {0, 2}) check(c, level, 4);
}

TEST(LstmCellOp, NonConstantRecurrentWeightStaysPlain) {
  LstmCase c;
  c.S = 3, c.B = 2, c.I = 3, c.H = 7, c.const_r = false;
  for (int level : {0, 1, 2}) check(c, level, 5);
}

TEST(LstmCellOp, TunedConfigPacksAndSchedulesWithItsBlockWidth) {
  // A tuning-log record for the cell (block width 32, not the default 16): alter_op_layout packs
  // R with the record's block and build_module schedules with the same record.
  LstmCase c;
  c.S = 3, c.B = 1, c.I = 4, c.H = 40;
  // The cell's task as its strategy builds it (task extraction: tests/tuning/).
  const autotune::Task cell = lstm_cell_task(c.B, c.H, Target::host());
  std::optional<autotune::Config> wide;
  for (uint64_t i = 0; i < cell.space.size() && !wide; ++i)
    if (cell.space.get(i).knob("tile_x") == 32) wide = cell.space.get(i);
  ASSERT_TRUE(wide.has_value());
  autotune::MeasureResult r;
  r.mean_s = 1e-3;
  r.runs = {1e-3};
  BuildOptions bo;
  bo.tuning_records = {autotune::Record::make(cell, *wide, r)};
  check(c, 2, 6, bo);
}

TEST(LstmCellOp, WrongRecurrentWeightShapeIsAUserError) {
  Graph g;
  Entry xg = g.add_input("xg", {2, 20}, DataType::Float(32));
  Entry h = g.add_input("h", {2, 5}, DataType::Float(32));
  Entry c = g.add_input("c", {2, 5}, DataType::Float(32));
  Entry r = g.add_input("R", {20, 4}, DataType::Float(32));
  Entry hc = g.add_op("lstm_cell", {xg, h, c, r}, {}, "cell0");
  g.set_outputs({hc, Entry{hc.node, 1}});
  std::string msg = ::kiln::testing::error_of([&] { infer_types(g); });
  EXPECT_NE(msg.find("lstm_cell_onnx: R must be [4H, H] = [20, 5] of float32, got [20, 4]"),
            std::string::npos)
      << msg;
  Graph g2;
  Entry xg2 = g2.add_input("xg", {2, 16}, DataType::Float(32));
  Entry h2 = g2.add_input("h", {2, 5}, DataType::Float(32));
  Entry r2 = g2.add_input("R", {20, 5}, DataType::Float(32));
  g2.set_outputs({g2.add_op("lstm_cell", {xg2, h2, h2, r2}, {}, "cell1")});
  msg = ::kiln::testing::error_of([&] { infer_types(g2); });
  EXPECT_NE(msg.find("lstm_cell_onnx: xg must be [B, 4H] and h, c [B, H], got xg [2, 16]"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace kiln::graph
