// Graph ops: recurrent cells (the LSTM cell of unrolled ONNX LSTM layers).
//   lstm_cell(xg, h, c, R)         one step of an ONNX LSTM layer (no peepholes, default
//                                  activations): gates = xg + h·Rᵀ, xg [B, 4H] the step's input
//                                  projection with both biases, R [4H, H], both in ONNX's gate
//                                  order (i, o, f, c); outputs h', c' [B, H]. topi's plain rule
//                                  (a dense and the gate math), so it runs at any opt level.
//   lstm_cell_packed(xg, h, c, Rp) the same with R packed by layout alteration
//                                  (topi::pack_lstm_onnx_weight's layout, [ceil(H/hb), H, 4hb]):
//                                  one kernel per step with the gate tile in registers.
// lstm_cell_packed is out-fusable for fusion, with nothing fused after it (its two outputs are
// read by the next step and by the layer's outputs) and nothing before it: the slice of the
// step's row out of the projection of all steps stays a small kernel of its own, so every step
// calls the same cell kernel. (Fused into the cell, the row's offset made each of a layer's
// steps a kernel of its own: the LSTM LM compiled in 7.7 s instead of 1.5 s, for no measurable
// run-time gain.)
#include "kiln/graph/op_registry.h"
#include "kiln/topi/lstm.h"

namespace kiln::graph {

void register_rnn_ops(OpRegistry& r) {
  OpDef cell;
  cell.name = "lstm_cell";
  cell.min_inputs = cell.max_inputs = 4;
  cell.num_outputs = 2;
  cell.pattern = topi::OpPattern::kOutEWiseFusable;
  cell.compute = [](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    return topi::lstm_cell_onnx(in[0], in[1], in[2], in[3], n);
  };
  r.add(cell);

  OpDef packed;
  packed.name = "lstm_cell_packed";
  packed.min_inputs = packed.max_inputs = 4;
  packed.num_outputs = 2;
  packed.pattern = topi::OpPattern::kOutEWiseFusable;
  packed.compute = [](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    return topi::lstm_cell_onnx_packed(in[0], in[1], in[2], in[3], n);
  };
  r.add(packed);
}

}  // namespace kiln::graph
