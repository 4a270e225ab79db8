/// \file lstm.h
/// \brief The LSTM cell of the LSTM language model (PyTorch's torch.nn.LSTMCell semantics).
///
///   gates = x·Wiᵀ + h·Whᵀ + b            (4 gates in PyTorch's order: i, f, g, o)
///   c' = σ(f)·c + σ(i)·tanh(g),   h' = σ(o)·tanh(c')
///
/// x [B, I], h and c [B, H], Wi [4H, I], Wh [4H, H], b [4H] (PyTorch's b_ih + b_hh, summed at
/// compile time). Outputs (h', c'), both [B, H].
///
/// Pattern kind: `kOutEWiseFusable` — a dense product with its element-wise gate math fused
/// into one kernel (the gate math is part of the op, not a separate fused group).
///
/// The packed form is what the CPU schedule runs: `pack_lstm_weight(Wi, Wh, hb)` concatenates
/// the two weights along k (so the two products are one dense over [x, h]) and interleaves the
/// gates per block of hb hidden units: Wp[p, k, g·hb + u] = W_g[p·hb + u, k], Wp
/// [ceil(H/hb), I + H, 4·hb]. Panel p then holds all four gates of hidden units
/// [p·hb, (p+1)·hb), so the schedule computes one mr × 4hb gate tile in registers (dense.h's
/// micro-kernel) at the loop over the output's hidden blocks and applies the gate math to it
/// right away, vectorized over the 16 lanes of the block: gates never reach memory. Knobs:
/// tile_x (hb, 16 or 32), tile_y (rows), tile_k (split of I + H), unroll (inner k unrolled).
/// The cell is a batch-1 GEMV for the language model (B = 1), bound by reading Wp once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/autotune/template.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

namespace tag {
constexpr const char* kLstmGates = "lstm_gates";  ///< the packed gate product
constexpr const char* kLstmCell = "lstm_cell";    ///< the gate math (outputs h', c')
constexpr const char* kLstmPack = "lstm_pack";
}  // namespace tag

/// The plain compute rule: {h', c'} from unpacked weights (dense + element-wise stages).
/// pattern: out_ewise_fusable
std::vector<te::Tensor> lstm_cell(const te::Tensor& x, const te::Tensor& h, const te::Tensor& c,
                                  const te::Tensor& Wi, const te::Tensor& Wh, const te::Tensor& b,
                                  const std::string& name = "lstm_cell");

/// Wp[p, k, g·hb + u] = concat(Wi, Wh, axis 1)[g·H + p·hb + u, k] (0 past H); see the file
/// comment. pattern: injective
te::Tensor pack_lstm_weight(const te::Tensor& Wi, const te::Tensor& Wh, int64_t hb,
                            const std::string& name = "lstm_pack");

/// {h', c'} from packed weights Wp (pack_lstm_weight; hb = Wp's last extent / 4).
/// pattern: out_ewise_fusable
std::vector<te::Tensor> lstm_cell_packed(const te::Tensor& x, const te::Tensor& h,
                                         const te::Tensor& c, const te::Tensor& Wp,
                                         const te::Tensor& b,
                                         const std::string& name = "lstm_cell");

/// Schedules the outputs {h', c'} of lstm_cell_packed in `s` (see the file comment).
void schedule_lstm_cell(autotune::Config& cfg, te::Schedule& s, const std::vector<te::Tensor>& outs,
                        const Target& target);

struct LstmWorkload {
  int64_t batch = 1, input = 1, hidden = 1;
};

/// Declares (all modes) the hidden block knob tile_x and returns hb: call before building Wp.
int64_t lstm_block_width(autotune::Config& cfg, int64_t hidden);

/// The template "lstm_cell_cpu": arguments x, h, c, Wp, b, h', c'.
autotune::Template lstm_cell_template(const LstmWorkload& w, const Target& target);

}  // namespace kiln::topi
