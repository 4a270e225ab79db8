// Folding batch normalization and per-channel scales into convolution weights (TVM's
// SimplifyInference + FoldScaleAxis, forward direction). Two forward walks:
//
// 1. Inference-mode batch_norm(x, γ, β, μ, σ²) with constant float32 parameters becomes
//      multiply(x, s) → add(·, t),  s = γ / sqrt(σ² + ε),  t = β − μ·s,
//    with s and t constants of shape [1, C, 1, …] (x's rank). The add keeps the batch_norm's
//    name, so tools that match nodes by name (kiln compare) still find it.
// 2. A multiply by a constant per-output-channel scale s (a scalar, or C values along axis 1)
//    of a 4-D conv2d output folds into the convolution's constant weights:
//      multiply(conv2d(x, W), s)          → conv2d(x, W·s)
//      multiply(add(conv2d(x, W), b), s)  → add(conv2d(x, W·s), b·s)   (b per-channel constant)
//    when every intermediate node has no other reader and is not a graph result, and the
//    multiply does not broadcast its result beyond the convolution's shape. W·s scales kernel
//    row o (output channel o) by s[o], which is right for grouped convolutions too. Not into
//    a convolution marked exact (a quantized product's integer sums: W·s is no integer).
// Both walks build new constants directly (no compilation), so the pass is cheap; the old
// constants are left for dead_code_elimination.

#include <cmath>
#include <map>

#include "../op_attrs.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {

using runtime::NDArray;

bool is_f32_constant(const Graph& g, Entry e) {
  const Node& n = g.node(e.node);
  return n.is_constant() && n.value.dtype() == DataType::Float(32);
}

/// True when `c` (a constant's type) broadcasts as one value per channel of a tensor of type
/// `x` (channel axis 1): a single value, or C values on the axis that lines up with axis 1.
bool is_per_channel(const TensorType& c, const TensorType& x) {
  if (c.numel() == 1) return c.shape.size() <= x.shape.size();
  if (x.shape.size() < 2 || c.shape.size() > x.shape.size()) return false;
  const size_t off = x.shape.size() - c.shape.size();  // numpy: right-aligned
  for (size_t d = 0; d < c.shape.size(); ++d) {
    const size_t xd = d + off;
    const int64_t want = xd == 1 ? x.shape[1] : 1;
    if (c.shape[d] != want) return false;
  }
  return true;
}

/// Value `o` of a per-channel constant (the single value when it has one).
float channel_value(const NDArray& c, int64_t o) {
  return c.data_as<float>()[c.numel() == 1 ? 0 : o];
}

std::vector<float> channel_values(const NDArray& c, int64_t channels) {
  std::vector<float> v(static_cast<size_t>(channels));
  for (int64_t o = 0; o < channels; ++o) v[static_cast<size_t>(o)] = channel_value(c, o);
  return v;
}

/// A [1, C, 1, …] constant (rank `rank`) holding `v`.
NDArray per_channel_array(const std::vector<float>& v, size_t rank) {
  std::vector<int64_t> shape(rank, 1);
  shape[1] = static_cast<int64_t>(v.size());
  NDArray a = NDArray::empty(shape, DataType::Float(32));
  std::copy(v.begin(), v.end(), a.data_as<float>());
  return a;
}

// ---------------------------------------------------------------------------------------------
// 1. batch_norm → multiply, add

Graph decompose_batch_norm(const Graph& g) {
  Graph out;
  detail::EntryMap map(g);
  detail::NameGen names(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    bool fold = n.is_op() && n.op == "batch_norm" && n.num_outputs() == 1;
    if (fold) {
      for (int k = 1; k <= 4; ++k) fold = fold && is_f32_constant(g, n.inputs[k]);
      const TensorType& xt = g.type_of(n.inputs[0]);
      fold = fold && xt.dtype == DataType::Float(32) && xt.shape.size() >= 2;
      for (int k = 1; fold && k <= 4; ++k) fold = g.type_of(n.inputs[k]).numel() == xt.shape[1];
    }
    if (!fold) {
      map.set_node(i, out.add_node(map.remap(n)), n.num_outputs());
      continue;
    }
    const TensorType& xt = g.type_of(n.inputs[0]);
    const int64_t C = xt.shape[1];
    const double eps = n.attrs.get_float("epsilon");
    const float* gamma = g.node(n.inputs[1].node).value.data_as<float>();
    const float* beta = g.node(n.inputs[2].node).value.data_as<float>();
    const float* mean = g.node(n.inputs[3].node).value.data_as<float>();
    const float* var = g.node(n.inputs[4].node).value.data_as<float>();
    std::vector<float> s(static_cast<size_t>(C)), t(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      const double sc = gamma[c] / std::sqrt(static_cast<double>(var[c]) + eps);
      s[static_cast<size_t>(c)] = static_cast<float>(sc);
      t[static_cast<size_t>(c)] = static_cast<float>(beta[c] - mean[c] * sc);
    }
    std::string base = n.name.empty() ? "batch_norm" + std::to_string(i) : n.name;
    Entry se = out.add_constant(names(base + "_scale"), per_channel_array(s, xt.shape.size()));
    Entry te = out.add_constant(names(base + "_shift"), per_channel_array(t, xt.shape.size()));
    Node mul;
    mul.op = "multiply";
    mul.inputs = {map[n.inputs[0]], se};
    mul.outputs = {xt};
    Entry m{out.add_node(std::move(mul)), 0};
    Node add;
    add.op = "add";
    add.name = n.name;
    add.inputs = {m, te};
    add.outputs = {xt};
    map.set_node(i, out.add_node(std::move(add)), 1);
  }
  out.set_outputs(map.outputs(g));
  return out;
}

// ---------------------------------------------------------------------------------------------
// 2. per-channel scales into conv2d weights

/// The fold plan of one multiply.
struct ScalePlan {
  int conv = -1;        ///< the conv2d node whose weights absorb the scale
  int bias_add = -1;    ///< the add between them, or -1
  int scale_input = 0;  ///< which input of the multiply is the scale
};

/// The entry among a binary node's inputs that is a per-channel f32 constant for the other, or
/// -1.
int per_channel_operand(const Graph& g, const Node& n) {
  if (n.inputs.size() != 2) return -1;
  for (int k = 0; k < 2; ++k) {
    Entry c = n.inputs[static_cast<size_t>(k)], x = n.inputs[static_cast<size_t>(1 - k)];
    if (!is_f32_constant(g, c) || g.type_of(x).dtype != DataType::Float(32)) continue;
    if (g.type_of(x) != n.outputs[0]) continue;  // the result must keep x's type
    if (is_per_channel(g.type_of(c), g.type_of(x))) return k;
  }
  return -1;
}

/// A conv2d node with constant float32 weights and a 4-D output, read only by its consumer, not
/// marked exact.
bool foldable_conv(const Graph& g, Entry e, const std::vector<int>& uses) {
  const Node& n = g.node(e.node);
  return n.is_op() && n.op == "conv2d" && uses[static_cast<size_t>(e.node)] == 1 &&
         n.outputs[0].shape.size() == 4 && is_f32_constant(g, n.inputs[1]) &&
         !detail::exact_sums(n.attrs);
}

std::map<int, ScalePlan> plan_scale_folding(const Graph& g) {
  std::vector<int> uses = detail::use_counts(g);
  std::map<int, ScalePlan> plans;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (!n.is_op() || n.op != "multiply") continue;
    int k = per_channel_operand(g, n);
    if (k < 0) continue;
    Entry y = n.inputs[static_cast<size_t>(1 - k)];
    if (foldable_conv(g, y, uses)) {
      plans[i] = ScalePlan{y.node, -1, k};
      continue;
    }
    const Node& p = g.node(y.node);
    if (!p.is_op() || p.op != "add" || uses[static_cast<size_t>(y.node)] != 1) continue;
    int kb = per_channel_operand(g, p);
    if (kb < 0) continue;
    Entry z = p.inputs[static_cast<size_t>(1 - kb)];
    if (foldable_conv(g, z, uses)) plans[i] = ScalePlan{z.node, y.node, k};
  }
  return plans;
}

Graph fold_scale_into_conv(const Graph& g) {
  std::map<int, ScalePlan> plans = plan_scale_folding(g);
  if (plans.empty()) return g;
  std::map<int, const NDArray*> conv_scale, bias_scale;  // node → the scale constant
  for (const auto& [mul, p] : plans) {
    const NDArray* s = &g.node(g.node(mul).inputs[static_cast<size_t>(p.scale_input)].node).value;
    conv_scale[p.conv] = s;
    if (p.bias_add >= 0) bias_scale[p.bias_add] = s;
  }
  Graph out;
  detail::EntryMap map(g);
  detail::NameGen names(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (auto pm = plans.find(i); pm != plans.end()) {
      // The multiply itself: its input now carries the scaled values.
      map.set(i, 0, map[n.inputs[static_cast<size_t>(1 - pm->second.scale_input)]]);
      continue;
    }
    Node r = map.remap(n);
    if (auto cs = conv_scale.find(i); cs != conv_scale.end()) {
      const NDArray& w = g.node(n.inputs[1].node).value;
      const int64_t O = w.shape()[0], per = w.numel() / O;
      std::vector<float> s = channel_values(*cs->second, O);
      NDArray w2 = NDArray::empty(w.shape(), w.dtype());
      const float* src = w.data_as<float>();
      float* dst = w2.data_as<float>();
      for (int64_t o = 0; o < O; ++o)
        for (int64_t j = 0; j < per; ++j)
          dst[o * per + j] = src[o * per + j] * s[static_cast<size_t>(o)];
      std::string base = g.node(n.inputs[1].node).name;
      r.inputs[1] = out.add_constant(names(base + "_scaled"), w2);
    } else if (auto bs = bias_scale.find(i); bs != bias_scale.end()) {
      int kb = per_channel_operand(g, n);
      Entry be = n.inputs[static_cast<size_t>(kb)];
      const int64_t O = n.outputs[0].shape[1];
      std::vector<float> b = channel_values(g.node(be.node).value, O);
      std::vector<float> s = channel_values(*bs->second, O);
      for (int64_t o = 0; o < O; ++o) b[static_cast<size_t>(o)] *= s[static_cast<size_t>(o)];
      r.inputs[static_cast<size_t>(kb)] = out.add_constant(
          names(g.node(be.node).name + "_scaled"), per_channel_array(b, n.outputs[0].shape.size()));
    }
    map.set_node(i, out.add_node(std::move(r)), n.num_outputs());
  }
  out.set_outputs(map.outputs(g));
  return out;
}

}  // namespace

Graph fold_batch_norm(const Graph& g) { return fold_scale_into_conv(decompose_batch_norm(g)); }

}  // namespace kiln::graph
