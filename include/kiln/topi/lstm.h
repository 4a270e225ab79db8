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
/// The cell is a batch-1 GEMV for the language model (B = 1), bound by reading Wp once. In
/// float32 the gate math uses a rational approximation of tanh (σ(x) = (1 + tanh(x/2)) / 2;
/// |error| < 4e-7) that vectorizes, instead of one libm call per lane.
///
/// The ONNX form (`lstm_cell_onnx*`) is one step of an ONNX LSTM layer (no peepholes, default
/// activations) whose input projection of all steps is precomputed:
///
///   gates = xg + h·Rᵀ      xg [B, 4H] (x·Wᵀ + Wb + Rb of this step), R [4H, H]
///
/// with xg and R in ONNX's gate order (i, o, f, c). The product is a reduction over H only;
/// the packed weight Rp [ceil(H/hb), H, 4hb] holds the gates in topi's order (i, f, g, o) per
/// panel (the reorder is done by the packing, and xg is indexed in ONNX's order), and the same
/// schedule (schedule_lstm_cell) runs it.
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

/// The ONNX form's plain rule: {h', c'} from xg [B, 4H] and R [4H, H] in ONNX gate order
/// (dense + element-wise stages). pattern: out_ewise_fusable
std::vector<te::Tensor> lstm_cell_onnx(const te::Tensor& xg, const te::Tensor& h,
                                       const te::Tensor& c, const te::Tensor& R,
                                       const std::string& name = "lstm_cell");

/// The shape of the ONNX form's packed weight: [ceil(H/hb), H, 4hb].
std::vector<int64_t> packed_lstm_onnx_weight_shape(int64_t hidden, int64_t hb);
/// The flat index in the packed weight (row-major, packed_lstm_onnx_weight_shape) of R[row, k]
/// (R [4H, H] in ONNX gate order): for packing constants on the host. Padding units past H
/// (when hb does not divide H) are zeros.
int64_t packed_lstm_onnx_index(int64_t row, int64_t k, int64_t hidden, int64_t hb);
/// Rp[p, k, q·hb + u] = R[o(q)·H + p·hb + u, k] (0 past H), o = (0, 2, 3, 1) maps topi's gate
/// q (i, f, g, o) to ONNX's row block. pattern: injective
te::Tensor pack_lstm_onnx_weight(const te::Tensor& R, int64_t hb,
                                 const std::string& name = "lstm_pack");

/// The ONNX form from packed weights Rp (pack_lstm_onnx_weight; hb = Rp's last extent / 4):
/// {h', c'}. pattern: out_ewise_fusable
std::vector<te::Tensor> lstm_cell_onnx_packed(const te::Tensor& xg, const te::Tensor& h,
                                              const te::Tensor& c, const te::Tensor& Rp,
                                              const std::string& name = "lstm_cell");

/// Schedules the outputs {h', c'} of lstm_cell_packed or lstm_cell_onnx_packed in `s` (see the
/// file comment).
void schedule_lstm_cell(autotune::Config& cfg, te::Schedule& s, const std::vector<te::Tensor>& outs,
                        const Target& target);

struct LstmWorkload {
  int64_t batch = 1, input = 1, hidden = 1;
};

/// Declares (all modes) the hidden block knob tile_x and returns hb: call before building Wp.
int64_t lstm_block_width(autotune::Config& cfg, int64_t hidden);

/// The template "lstm_cell_cpu": arguments x, h, c, Wp, b, h', c'.
autotune::Template lstm_cell_template(const LstmWorkload& w, const Target& target);

/// The template "lstm_cell_onnx_cpu" (w.input unused): arguments xg, h, c, Rp, h', c'.
autotune::Template lstm_cell_onnx_template(const LstmWorkload& w, const Target& target);

}  // namespace kiln::topi
