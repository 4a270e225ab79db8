/// \file op_registry.h
/// \brief The typed registry of graph operators.
///
/// Per op: its attribute schema, how many inputs it takes, its fusion pattern kind, a
/// shape/type rule and a compute rule (te tensors from the operator library, topi). The
/// registry is built once, on first use, by explicit registration functions (no static
/// initialisers), and every definition is checked then (names unique, compute present,
/// defaults of the declared kind): a bad definition fails at start-up, not in the middle of a
/// compilation.
///
///   const OpDef& def = OpRegistry::global().get("conv2d");
///   Attrs a = def.normalize_attrs(node.attrs, "%3");     // defaults filled, kinds checked
///   std::vector<TensorType> out = def.infer(in_types, a);
///   std::vector<te::Tensor> t = def.compute(in_tensors, a, "conv1");
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::graph {

/// One attribute of an op's schema.
struct AttrSpec {
  std::string name;
  AttrKind kind = AttrKind::kInt;
  /// The value used when the attribute is absent; none for a required attribute.
  std::optional<AttrValue> default_value;
  /// Integer values may exceed 32 bits (ONNX writes INT64_MAX for "to the end" in slice
  /// bounds); every other integer attribute must fit Kiln's 32-bit index arithmetic.
  bool wide = false;
  bool required() const { return !default_value.has_value(); }
};

/// Builds the output tensors of an op from its input tensors and (normalized) attributes;
/// `name` names the te stages.
using FCompute = std::function<std::vector<te::Tensor>(const std::vector<te::Tensor>&, const Attrs&,
                                                       const std::string& name)>;
/// The output types of an op from its input types and (normalized) attributes; throws a
/// kiln::Error describing the problem (shapes, attributes).
using FInferType =
    std::function<std::vector<TensorType>(const std::vector<TensorType>&, const Attrs&)>;

/// How a node computes on channel-blocked data (layout propagation in alter_op_layout, TVM's
/// FInferCorrectLayout): a node of `op` with `attrs` reading `inputs` (entries of the graph
/// asked, each read in NCHW<block>c) computes the asked node's logical NCHW value in
/// NCHW<block>c.
/// A form whose output carries no channels (a reduction over them) gives that output's shape in
/// `plain_shape`: the output is reshaped to the asked node's NCHW type (a view).
struct BlockedForm {
  std::string op;
  Attrs attrs;
  std::vector<Entry> inputs;
  int64_t block = 0;
  std::vector<int64_t> plain_shape;
};
/// The blocked form of node `n` of `g` given `block(e)`, the channel block of the layout entry
/// `e` of `g` is computed in (0: NCHW); nullopt when the node computes in NCHW.
using FBlocked = std::function<std::optional<BlockedForm>(
    const Graph& g, const Node& n, const std::function<int64_t(Entry)>& block)>;

/// The definition of one operator.
struct OpDef {
  std::string name;
  std::vector<AttrSpec> attrs;
  int min_inputs = 1;
  int max_inputs = 1;  ///< -1: any number (>= min_inputs)
  int num_outputs = 1;
  topi::OpPattern pattern = topi::OpPattern::kOpaque;
  FCompute compute;
  /// Optional: when absent, `infer` builds `compute` on placeholders and reads the shapes.
  FInferType infer_rule;
  /// Optional: the outputs with a data-dependent (bounded) shape (graph.h, BoundedOutput) for
  /// these input types and normalized attributes; absent for static-shape ops.
  std::function<std::vector<BoundedOutput>(const std::vector<TensorType>&, const Attrs&)> bounded;
  /// Optional: checks node `n` of `g` beyond its types (e.g. constant indices against an axis,
  /// `in` its input types) and throws a user error naming `where`; run by infer_types.
  std::function<void(const Graph& g, const Node& n, const std::vector<TensorType>& in,
                     const std::string& where)>
      check;
  /// Optional: how a node with a 4-D output computes on channel-blocked operands (concat on
  /// whole channel blocks, ...); alter_op_layout asks it for ops that are neither element-wise
  /// nor pooling.
  FBlocked blocked;
  /// Optional: when the output is only the inputs laid end to end in memory (concat along an
  /// axis with unit extents outside it; reshape, flatten, squeeze, unsqueeze and expand_dims,
  /// whose one input is the output's bytes), the byte offset of each input in the output for
  /// these input types and normalized attributes; nullopt otherwise. build_module may then
  /// make the output a view (memory_plan.h, plan_views): each input's producer writes into
  /// its slot and the op runs no kernel.
  std::function<std::optional<std::vector<size_t>>(const std::vector<TensorType>&, const Attrs&)>
      in_place;
  /// True for the ops whose output is always their one input's bytes, reinterpreted (reshape,
  /// flatten, squeeze, unsqueeze, expand_dims): simplify cancels and sinks their chains.
  bool reinterprets = false;
  /// True when the output is the inputs laid side by side along the "axis" attribute, each
  /// unchanged (concat): simplify moves reshapes and transposes across it.
  bool joins = false;

  /// The attribute schema entry `name`, or nullptr.
  const AttrSpec* find_attr(const std::string& name) const;
  /// Checks `given` against the schema and returns it with defaults filled in (an int given
  /// for a float attribute becomes a float). A user error naming `where` (the node), the op
  /// and the attribute for an unknown attribute, a missing required one or a wrong kind.
  Attrs normalize_attrs(const Attrs& given, const std::string& where) const;
  /// Checks the number of inputs; a user error naming `where` and the op otherwise.
  void check_num_inputs(int n, const std::string& where) const;
  /// The output types for these input types and normalized attributes (infer_rule, or the
  /// compute on placeholders).
  std::vector<TensorType> infer(const std::vector<TensorType>& inputs, const Attrs& attrs) const;
};

/// All registered operators.
class OpRegistry {
 public:
  /// The registry of every built-in op, built and checked on first use.
  static const OpRegistry& global();

  /// The op called `name`, or nullptr.
  const OpDef* find(const std::string& name) const;
  /// The op called `name`; a user error "unknown op 'x'" naming `where` otherwise.
  const OpDef& get(const std::string& name, const std::string& where = "") const;
  /// Names of all ops, sorted.
  std::vector<std::string> names() const;

  /// Adds a definition after checking it (internal error on a bad or duplicate definition).
  void add(OpDef def);
  /// Adds an op defined outside the compiler (a plugin's, a test's) to the global registry,
  /// checked like the built-in ones; its strategies are registered with register_strategy
  /// (strategy.h). Call it before compiling anything, from one thread.
  static void register_op(OpDef def);

 private:
  std::map<std::string, OpDef> ops_;
};

/// te placeholders with these types (names "in0", "in1", …).
std::vector<te::Tensor> placeholders_for(const std::vector<TensorType>& types);
/// The static type of a te tensor (internal error if its shape is not constant).
TensorType tensor_type(const te::Tensor& t);

// Registration functions, one per family (src/graph/ops/ops_*.cc); called by OpRegistry::global.
void register_elemwise_ops(OpRegistry& r);
void register_nn_ops(OpRegistry& r);
void register_transform_ops(OpRegistry& r);
/// Blocked-layout (NCHW[x]c) convolutions, weight packing and layout transforms (ops_layout.cc).
void register_layout_ops(OpRegistry& r);
/// Sequence models, transposed convolution, resize and the other ONNX-driven ops (ops_extra.cc).
void register_extra_ops(OpRegistry& r);
/// N-d convolution and pooling (ops_ndim.cc), signal processing and sampling (ops_signal.cc),
/// data-dependent output shapes (ops_dynamic.cc), LSTM cells (ops_rnn.cc).
void register_ndim_ops(OpRegistry& r);
void register_signal_ops(OpRegistry& r);
void register_dynamic_ops(OpRegistry& r);
void register_rnn_ops(OpRegistry& r);
/// Quantized-model ops: quantize / dequantize and the integer products (ops_qnn.cc).
void register_qnn_ops(OpRegistry& r);

}  // namespace kiln::graph
