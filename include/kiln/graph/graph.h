/// \file graph.h
/// \brief The graph IR: a typed dataflow graph of operators, stored in topological order.
///
/// Semantics. A Graph is a vector of nodes in which every node's inputs refer to EARLIER
/// nodes (topological order is an invariant, checked by `verify`). A node is one of
/// * an input: a tensor supplied at run time, named, with a declared type;
/// * a constant: a named tensor whose value (a runtime::NDArray) is known at compile time
///   (weights, folded shape computations) — the module's "params";
/// * an op: an operator of the op registry (op_registry.h) applied to entries of earlier nodes,
///   with attributes; it has one or more outputs.
/// An Entry {node, index} names output `index` of node `node`: the graph's edges. Every
/// output has a TensorType (static shape and dtype), filled by `infer_types` (transform.h).
/// The graph's results are a list of entries.
///
/// Passes are plain functions `Graph f(const Graph&)` (transform.h) that ITERATE over the node
/// vector: nothing in graph/ recurses over the graph, so 10,000-node chains are fine.
///
/// Text form (`Graph::str`), one line per node, stable for golden tests:
///   %0 = input data : float32[1, 3, 8, 8]
///   %1 = constant w : float32[4, 3, 3, 3]
///   %2 = conv2d(%0, %1, padding=[1, 1, 1, 1], strides=[1, 1]) : float32[1, 4, 8, 8]
///   %3 = split(%2, axis=1, sections=2) : (float32[1, 2, 8, 8], float32[1, 2, 8, 8])
///   %4 = relu(%3.1) : float32[1, 2, 8, 8]  # act1
///   output %4
/// Attributes print in name order; an op's node name, when set, follows as a comment; an
/// output whose type is not known yet prints as `?`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "kiln/runtime/data_type.h"
#include "kiln/runtime/ndarray.h"

namespace kiln::autotune {
struct Task;
}  // namespace kiln::autotune

namespace kiln::graph {

/// An attribute value: int, float, string, int list or float list.
using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

/// The kinds of AttrValue, in the variant's order.
enum class AttrKind : int { kInt = 0, kFloat = 1, kString = 2, kInts = 3, kFloats = 4 };

/// "int", "float", "string", "int list", "float list".
const char* attr_kind_name(AttrKind k);
/// The kind of a value.
inline AttrKind attr_kind(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }
/// The value as printed in graph text: 3, 0.5, "NCHW", [1, 2], [0.5, 1.0].
std::string attr_value_str(const AttrValue& v);

/// A node's attributes: a small map from name to value, ordered by name (so printing and
/// comparison are deterministic).
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : map_(init) {}

  /// Sets (or replaces) an attribute; returns *this for chaining.
  Attrs& set(const std::string& name, AttrValue v);
  /// True when the attribute is present.
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  /// The attribute's value; throws a user error naming the attribute when it is absent.
  const AttrValue& get(const std::string& name) const;
  /// Typed getters; each throws a user error naming the attribute when it is absent or of
  /// another kind (an int is accepted where a float is asked for).
  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const std::vector<int64_t>& get_ints(const std::string& name) const;
  std::vector<double> get_floats(const std::string& name) const;

  /// All attributes, ordered by name.
  const std::map<std::string, AttrValue>& map() const { return map_; }
  bool empty() const { return map_.empty(); }
  bool operator==(const Attrs& o) const { return map_ == o.map_; }
  bool operator!=(const Attrs& o) const { return !(*this == o); }
  /// "padding=[1, 1, 1, 1], strides=[1, 1]" (empty string for no attributes).
  std::string str() const;

 private:
  std::map<std::string, AttrValue> map_;
};

/// The type of a tensor: static shape and element type. Default-constructed: unknown
/// (dtype void), printed as `?`.
struct TensorType {
  std::vector<int64_t> shape;
  DataType dtype = DataType::Void();

  /// True once the type has been set (dtype is not void).
  bool known() const { return !dtype.is_void(); }
  /// Number of elements.
  int64_t numel() const;
  /// "float32[1, 3, 224, 224]", "float32[]" for a scalar, "?" when unknown.
  std::string str() const;
  bool operator==(const TensorType& o) const { return shape == o.shape && dtype == o.dtype; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};

/// An op output with a bounded, data-dependent shape (NonZero, Unique, NonMaxSuppression): its
/// TensorType holds an upper bound; at run time the kernel writes the actual extent of `axis`
/// into output `extent_output` (int64, one element) and the tensor itself densely, row-major
/// with the actual shape, at the start of the bound-sized storage. Only graph outputs may have
/// a data-dependent shape yet (build_module rejects a static-shape consumer).
struct BoundedOutput {
  int output = 0;         ///< the bounded output's index
  int axis = 0;           ///< its data-dependent axis
  int extent_output = 0;  ///< the index of the int64 output holding the actual extent
};

/// An edge: output `index` of node `node`.
struct Entry {
  int node = -1;
  int index = 0;
  bool operator==(const Entry& o) const { return node == o.node && index == o.index; }
  bool operator!=(const Entry& o) const { return !(*this == o); }
  bool operator<(const Entry& o) const { return node != o.node ? node < o.node : index < o.index; }
};

/// What a node is.
enum class NodeKind : uint8_t { kInput, kConstant, kOp };

/// One node of the graph.
/// The implementation an op's strategy chose for a node on the compile target (strategy.h):
/// recorded once, by the layout pass or select_implementations, and read by the build and task
/// extraction. Not part of the text form.
struct ImplChoice {
  std::string name;  ///< the implementation's registered name; empty until chosen
  /// Its tuning task when the implementation is tunable (the workload key is built there),
  /// else empty. Called only when a tuning log is looked in.
  std::function<autotune::Task()> task;
};

struct Node {
  NodeKind kind = NodeKind::kOp;
  std::string op;                   ///< the operator's name (kOp); "input" / "constant" otherwise
  std::string name;                 ///< the user's name (required for inputs and constants)
  std::vector<Entry> inputs;        ///< kOp: the operands, entries of earlier nodes
  Attrs attrs;                      ///< kOp: the attributes
  std::vector<TensorType> outputs;  ///< one type per output (unknown until infer_types)
  runtime::NDArray value;           ///< kConstant: the value
  ImplChoice impl;                  ///< kOp: the chosen implementation (strategy.h)

  bool is_input() const { return kind == NodeKind::kInput; }
  bool is_constant() const { return kind == NodeKind::kConstant; }
  bool is_op() const { return kind == NodeKind::kOp; }
  int num_outputs() const { return static_cast<int>(outputs.size()); }
};

/// A dataflow graph in topological order (see the file comment).
class Graph {
 public:
  /// Adds a graph input; `name` must be non-empty and unique among inputs and constants.
  Entry add_input(const std::string& name, std::vector<int64_t> shape, DataType dtype);
  /// Adds a constant holding `value` (defined, on the CPU); `name` must be non-empty and
  /// unique among inputs and constants.
  Entry add_constant(const std::string& name, runtime::NDArray value);
  /// Adds an op node reading `inputs` (entries of existing nodes). Its number of outputs is
  /// the registered op's (op_registry.h) for these attributes, 1 for an unregistered op (which
  /// infer_types reports). Output types stay unknown until infer_types.
  Entry add_op(const std::string& op, std::vector<Entry> inputs, Attrs attrs = {},
               const std::string& name = "");
  /// Appends a node as it is (used by passes); its inputs must refer to earlier nodes. Returns
  /// its index.
  int add_node(Node node);
  /// Marks `e` as a result of the graph (results keep their order).
  void add_output(Entry e);
  /// Replaces the result list.
  void set_outputs(std::vector<Entry> outs);

  /// All nodes, producers before consumers.
  const std::vector<Node>& nodes() const { return nodes_; }
  /// Node `i`; a mutable form lets passes set types and attributes in place.
  const Node& node(int i) const { return nodes_.at(static_cast<size_t>(i)); }
  Node& mutable_node(int i) { return nodes_.at(static_cast<size_t>(i)); }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  /// The graph's results.
  const std::vector<Entry>& outputs() const { return outputs_; }
  /// Names of the results (e.g. the ONNX graph's output names), one per result, or empty for
  /// none: the compiled module's outputs (and `kiln run`'s .npy files) are named after them.
  /// The optimizer keeps them across passes; a user error when the count differs.
  void set_output_names(std::vector<std::string> names);
  const std::vector<std::string>& output_names() const { return output_names_; }
  /// Indices of the input nodes, in graph order.
  std::vector<int> input_nodes() const;
  /// Indices of the constant nodes, in graph order.
  std::vector<int> constant_nodes() const;
  /// The type of an entry (unknown before infer_types).
  const TensorType& type_of(Entry e) const;

  /// "%3" or "%3.1" for output 1 of a multi-output node.
  std::string entry_str(Entry e) const;
  /// One node's line of the text form (without the newline).
  std::string node_str(int i) const;
  /// The text form (see the file comment), ending with a newline.
  std::string str() const;

  /// Checks the invariants: inputs refer to earlier nodes and to existing outputs, inputs and
  /// constants are named uniquely and have their types, constants hold values matching their
  /// types, results are valid entries. Throws an internal error (naming `after`, e.g. the pass
  /// that produced the graph) on violation.
  void verify(const std::string& after = "") const;

 private:
  void check_new_name(const std::string& name, const char* what) const;

  std::vector<Node> nodes_;
  std::vector<Entry> outputs_;
  std::vector<std::string> output_names_;
};

/// The type of a constant's value.
TensorType type_of(const runtime::NDArray& a);

/// True when `a` and `b` are the same graph: the same nodes in the same order (kind, op, name,
/// inputs, attributes, output types, chosen implementation's name; constants' values bitwise),
/// the same results and result names. The pass runner's "changed" (support/pass_runner.h).
bool structural_equal(const Graph& a, const Graph& b);

}  // namespace kiln::graph
