// Internal to the ONNX importer: the Converter that the per-family converter files
// (convert_<family>.cc) share. A converter function reads one ONNX node through it (inputs,
// constant inputs, attributes with defaults, inferred types) and adds graph ops; the table of
// all converters, one per ONNX op, is assembled in convert.cc from each family's register_*
// function.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/frontend/onnx.h"
#include "kiln/graph/transform.h"
#include "kiln/ir/op.h"
#include "kiln/support/error.h"
#include "kiln/support/half.h"
#include "kiln/support/saturating.h"

namespace kiln::frontend::onnx_import {

using graph::Attrs;
using graph::Entry;
using Ints = std::vector<int64_t>;

class Converter {
 public:
  Converter(const OnnxModel& m, const ImportOptions& opt) : m_(m), opt_(opt) {}

  graph::Graph run();

  // --- what converters use
  const OnnxNode* node = nullptr;
  int64_t opset = 0;

  std::string where() const {
    return "'" + m_.path + "', node '" + node->name + "' (" + node->op_type + ")";
  }
  bool has_input(size_t i) const { return i < node->inputs.size() && !node->inputs[i].empty(); }
  Entry in(size_t i) const {
    KILN_USER_CHECK(has_input(i)) << where() << ": input " << i << " is required";
    Entry e = values_.at(node->inputs[i]);
    KILN_USER_CHECK(!is_sequence(e)) << where() << ": input " << i << " ('" << node->inputs[i]
                                     << "') is a sequence, which this operator does not take";
    KILN_USER_CHECK(!is_optional(e))
        << where() << ": input " << i << " ('" << node->inputs[i]
        << "') is an optional value, which this operator does not take (OptionalGetElement "
           "gives its tensor)";
    return e;
  }

  // --- sub-graphs and sequences (convert_control.cc)
  /// The graph-valued attribute `name` of the node (a body); a user error when it is missing.
  const OnnxGraph& subgraph(const char* name) const {
    auto it = node->subgraphs.find(name);
    KILN_USER_CHECK(it != node->subgraphs.end() && it->second)
        << where() << ": graph attribute '" << name << "' is missing";
    return *it->second;
  }
  /// Imports `body` into the graph once (one branch, one unrolled iteration): its inputs are
  /// bound to `inputs`, its initializers become constants, names of enclosing graphs resolve
  /// to their values; returns the entries of its outputs (sequences included).
  std::vector<Entry> import_body(const OnnxGraph& body, const std::vector<Entry>& inputs);
  /// A sequence value tracked at import time: the list of its tensors. Sequence values flow
  /// through values_ as entries that name no graph node.
  Entry make_sequence(std::vector<Entry> items) {
    sequences_.push_back(std::move(items));
    return Entry{kSequenceNode, static_cast<int>(sequences_.size() - 1)};
  }
  static bool is_sequence(Entry e) { return e.node == kSequenceNode; }
  /// An optional value tracked at import time: empty, or holding a tensor or sequence entry.
  Entry make_optional(std::optional<Entry> value) {
    optionals_.push_back(value);
    return Entry{kOptionalNode, static_cast<int>(optionals_.size() - 1)};
  }
  static bool is_optional(Entry e) { return e.node == kOptionalNode; }
  /// The value an optional entry holds (nullopt: empty).
  std::optional<Entry> optional_value(Entry e) const {
    KILN_ICHECK(is_optional(e)) << "not an optional entry";
    return optionals_.at(static_cast<size_t>(e.index));
  }
  /// Input i when it is a sequence (its tensors); a user error otherwise.
  const std::vector<Entry>& sequence_in(size_t i) const {
    KILN_USER_CHECK(has_input(i)) << where() << ": input " << i << " is required";
    Entry e = values_.at(node->inputs[i]);
    KILN_USER_CHECK(is_sequence(e))
        << where() << ": input " << i << " ('" << node->inputs[i] << "') must be a sequence";
    return sequences_.at(static_cast<size_t>(e.index));
  }
  /// The tensors of sequence entry `e`.
  const std::vector<Entry>& sequence_items(Entry e) const {
    KILN_ICHECK(is_sequence(e)) << "not a sequence entry";
    return sequences_.at(static_cast<size_t>(e.index));
  }
  /// Number of graph nodes so far (entries below it existed before a converter started).
  int num_nodes() const { return g_.num_nodes(); }
  /// The input entry i as it is (tensor or sequence); for converters that pass either through.
  Entry value_in(size_t i) const {
    KILN_USER_CHECK(has_input(i)) << where() << ": input " << i << " is required";
    return values_.at(node->inputs[i]);
  }
  /// The value of input i when it is a constant (initializer or Constant node) or computed
  /// from constants only (then folded at import time).
  const runtime::NDArray* const_input(size_t i) const {
    if (!has_input(i)) return nullptr;
    return folded(in(i));
  }
  /// The value of `e` when it depends on constants only. The ops not yet evaluated on the way
  /// to it are computed on the host when they are the small ops of shape arithmetic and loop
  /// conditions (eval_on_host: no compilation); otherwise the sub-graph from the values known
  /// so far is typed and constant-folded (compiled and run on the host). Every value found is
  /// remembered, so folding a chain that grows (an unrolled loop's condition) costs only its new
  /// ops. Null when it depends on a graph input or cannot be folded.
  const runtime::NDArray* folded(Entry e) const;
  /// The type of `e` from infer_types over the graph built so far; nullopt when the graph
  /// cannot be typed.
  std::optional<graph::TensorType> known_type(Entry e) const {
    if (is_sequence(e) || is_optional(e)) return std::nullopt;
    if (typed_n_ != g_.num_nodes() && typed_ok_) {
      // The graph only grows: the new nodes are copied and typed once (a node that cannot be
      // typed leaves every later one untyped, as a whole-graph inference would).
      const int first = typed_.num_nodes();
      KILN_ICHECK(first == typed_n_ && first <= g_.num_nodes())
          << "Converter::known_type: the graph shrank from " << first << " to " << g_.num_nodes()
          << " nodes";
      for (int k = first; k < g_.num_nodes(); ++k) typed_.add_node(g_.node(k));
      typed_n_ = g_.num_nodes();
      try {
        graph::infer_types_from(typed_, first);
      } catch (const Error&) {
        typed_ok_ = false;
      }
    }
    if (!typed_ok_) return std::nullopt;
    return typed_.type_of(e);
  }
  /// The type of input i; a user error naming the node when it cannot be inferred.
  graph::TensorType type_in(size_t i) const {
    std::optional<graph::TensorType> t = known_type(in(i));
    KILN_USER_CHECK(t && t->known())
        << where() << ": the type of input " << i << " cannot be inferred";
    return *t;
  }
  Ints const_ints(size_t i, const char* what) const {
    const runtime::NDArray* a = const_input(i);
    KILN_USER_CHECK(a) << where() << ": input " << i << " (" << what
                       << ") must be a constant; computed values are not supported yet";
    Ints out;
    for (int64_t k = 0; k < a->numel(); ++k) {
      if (a->dtype() == DataType::Int(64))
        out.push_back(a->data_as<int64_t>()[k]);
      else if (a->dtype() == DataType::Int(32))
        out.push_back(a->data_as<int32_t>()[k]);
      else
        KILN_ERROR << where() << ": input " << i << " (" << what << ") must be int32/int64";
    }
    return out;
  }
  double const_scalar(size_t i, const char* what) const {
    const runtime::NDArray* a = const_input(i);
    KILN_USER_CHECK(a && a->numel() == 1)
        << where() << ": input " << i << " (" << what << ") must be a constant scalar";
    DataType t = a->dtype();
    if (t == DataType::Float(32)) return a->data_as<float>()[0];
    if (t == DataType::Float(64)) return a->data_as<double>()[0];
    if (t == DataType::Int(8)) return a->data_as<int8_t>()[0];
    if (t == DataType::UInt(8)) return a->data_as<uint8_t>()[0];
    if (t == DataType::Int(16)) return a->data_as<int16_t>()[0];
    if (t == DataType::Int(32)) return a->data_as<int32_t>()[0];
    if (t == DataType::Int(64)) return static_cast<double>(a->data_as<int64_t>()[0]);
    if (t == DataType::Float(16)) return support::half_to_float(a->data_as<uint16_t>()[0]);
    if (t == DataType::UInt(16)) return a->data_as<uint16_t>()[0];
    if (t == DataType::UInt(32)) return a->data_as<uint32_t>()[0];
    if (t == DataType::UInt(64)) return static_cast<double>(a->data_as<uint64_t>()[0]);
    KILN_ERROR << where() << ": input " << i << " (" << what << ") has unsupported type " << t;
  }
  bool has_attr(const char* name) const { return node->attrs.count(name) != 0; }
  int64_t attr_int(const char* name, int64_t dflt) const {
    auto it = node->attrs.find(name);
    if (it == node->attrs.end()) return dflt;
    const int64_t* v = std::get_if<int64_t>(&it->second);
    KILN_USER_CHECK(v) << where() << ": attribute '" << name << "' must be an int";
    return *v;
  }
  double attr_float(const char* name, double dflt) const {
    auto it = node->attrs.find(name);
    if (it == node->attrs.end()) return dflt;
    if (const double* v = std::get_if<double>(&it->second)) return *v;
    if (const int64_t* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
    KILN_ERROR << where() << ": attribute '" << name << "' must be a float";
  }
  Ints attr_ints(const char* name, Ints dflt) const {
    auto it = node->attrs.find(name);
    if (it == node->attrs.end()) return dflt;
    const Ints* v = std::get_if<Ints>(&it->second);
    KILN_USER_CHECK(v) << where() << ": attribute '" << name << "' must be a list of ints";
    return *v;
  }
  std::string attr_string(const char* name, const std::string& dflt) const {
    auto it = node->attrs.find(name);
    if (it == node->attrs.end()) return dflt;
    const std::string* v = std::get_if<std::string>(&it->second);
    KILN_USER_CHECK(v) << where() << ": attribute '" << name << "' must be a string";
    return *v;
  }
  void unsupported_if(bool cond, const std::string& what) const {
    KILN_USER_CHECK(!cond) << where() << ": " << what << " is not supported yet";
  }
  /// Adds op `name`. A product or convolution over an empty reduction (zero input channels,
  /// a zero inner dimension) with a non-empty result is its sum over nothing: a constant of
  /// zeros instead of the op, so that no kernel reduces over an empty axis (the op is left
  /// dead, for run()'s dead-code elimination).
  Entry op(const std::string& name, std::vector<Entry> inputs, Attrs attrs = {});
  Entry constant(const std::string& hint, runtime::NDArray v) {
    return g_.add_constant(unique_name(node->name + "." + hint), std::move(v));
  }
  /// Element type of an entry when known (inferred), else Void.
  DataType dtype_of(Entry e) const {
    const graph::Node& n = g_.node(e.node);
    if (n.is_constant()) return n.value.dtype();
    if (n.is_input() && !n.outputs.empty()) return n.outputs[0].dtype;
    std::optional<graph::TensorType> t = known_type(e);
    return t ? t->dtype : DataType::Void();
  }
  /// Rank of an entry when its type is known (inferred), else -1.
  int rank_of(Entry e) const {
    const graph::Node& n = g_.node(e.node);
    if (n.is_constant()) return n.value.ndim();
    if (n.is_input() && !n.outputs.empty()) return static_cast<int>(n.outputs[0].shape.size());
    std::optional<graph::TensorType> t = known_type(e);
    return t && t->known() ? static_cast<int>(t->shape.size()) : -1;
  }
  /// A constant scalar (or tensor of `shape`) of type `t` holding `v` everywhere.
  Entry fill(const std::string& hint, double v, DataType t, Ints shape = {}) {
    runtime::NDArray a = runtime::NDArray::empty(shape, t);
    for (int64_t k = 0; k < a.numel(); ++k) set_elem(a, k, v);
    return constant(hint, a);
  }
  /// Stores `v` into element k of `a`, converted to its type.
  void set_elem(runtime::NDArray& a, int64_t k, double v) const {
    DataType t = a.dtype();
    if (t == DataType::Float(32))
      a.data_as<float>()[k] = static_cast<float>(v);
    else if (t == DataType::Float(64))
      a.data_as<double>()[k] = v;
    else if (t == DataType::Int(8))
      a.data_as<int8_t>()[k] = static_cast<int8_t>(v);
    else if (t == DataType::Int(16))
      a.data_as<int16_t>()[k] = static_cast<int16_t>(v);
    else if (t == DataType::Int(32))
      a.data_as<int32_t>()[k] = static_cast<int32_t>(v);
    else if (t == DataType::Int(64))
      a.data_as<int64_t>()[k] = static_cast<int64_t>(v);
    else if (t == DataType::UInt(8) || t.is_bool())
      a.data_as<uint8_t>()[k] = static_cast<uint8_t>(v);
    else if (t == DataType::UInt(16))
      a.data_as<uint16_t>()[k] = static_cast<uint16_t>(v);
    else if (t == DataType::UInt(32))
      a.data_as<uint32_t>()[k] = static_cast<uint32_t>(v);
    else if (t == DataType::UInt(64))
      a.data_as<uint64_t>()[k] = static_cast<uint64_t>(v);
    else
      KILN_ERROR << where() << ": constants of type " << t << " are not supported yet";
  }
  /// The graph built so far (read-only; e.g. to see which op produced an input).
  const graph::Graph& graph() const { return g_; }

 private:
  static constexpr int kSequenceNode = -2;
  static constexpr int kOptionalNode = -3;
  /// Converts `nodes` in order into values_; with `name_values`, the graph node producing an
  /// ONNX value takes its name (the main graph; a body unrolled many times keeps its own).
  void convert_nodes(const std::vector<OnnxNode>& nodes, bool name_values);
  /// Adds sequence graph input `v` as one tensor input per element ("<name>.<k>"), with the
  /// element shapes given in ImportOptions::sequence_inputs.
  void add_sequence_input(const OnnxValueInfo& v);
  /// Every node of `nodes` (and of their sub-graphs) supported? Appends those that are not.
  void find_unsupported(const std::vector<OnnxNode>& nodes, std::vector<std::string>& missing);

  /// `base`, or the first of "<base>_1", "<base>_2", … not used yet. The suffixes below
  /// next_suffix_[base] are known to be taken, so a body unrolled many times is not quadratic.
  std::string unique_name(const std::string& base) {
    std::string n = base;
    if (used_.count(n)) {
      int& k = next_suffix_[base];
      k = std::max(k, 1);
      for (n = base + "_" + std::to_string(k); used_.count(n); n = base + "_" + std::to_string(k))
        ++k;
    }
    used_.insert(n);
    return n;
  }
  /// Frees a name unique_name gave (a node renamed after its ONNX value).
  void release_name(const std::string& n) {
    used_.erase(n);
    size_t p = n.rfind('_');
    if (p == std::string::npos || p + 1 == n.size() ||
        n.find_first_not_of("0123456789", p + 1) != std::string::npos || n.size() - p > 10)
      return;
    auto it = next_suffix_.find(n.substr(0, p));
    int k = std::stoi(n.substr(p + 1));
    if (it != next_suffix_.end() && k < it->second) it->second = k;
  }

  const OnnxModel& m_;
  const ImportOptions& opt_;
  graph::Graph g_;
  std::map<std::string, Entry> values_;
  std::set<std::string> used_;
  std::map<std::string, int> next_suffix_;
  std::vector<std::vector<Entry>> sequences_;
  std::vector<std::optional<Entry>> optionals_;
  mutable std::map<Entry, std::optional<runtime::NDArray>> folded_;
  mutable graph::Graph typed_;
  mutable int typed_n_ = 0;  // nodes of g_ copied into typed_
  mutable bool typed_ok_ = true;
  bool emptied_ = false;  // a value with no elements was replaced by a constant
};

/// The value of op node `n` computed on the host from its inputs' values, when `n` is one of the
/// small exact ops of shape arithmetic and loop conditions (identity and reshaping ops, integer
/// arithmetic, comparisons, where, cast to integers or floats, concat, take in range) on small
/// tensors; nullopt otherwise (host_eval.cc).
std::optional<runtime::NDArray> eval_on_host(const graph::Node& n,
                                             const std::vector<const runtime::NDArray*>& in);

using ConvertFn = std::function<std::vector<Entry>(Converter&)>;

inline ConvertFn unary(const char* op) {
  return [op](Converter& c) { return std::vector<Entry>{c.op(op, {c.in(0)})}; };
}
inline ConvertFn binary(const char* op) {
  return [op](Converter& c) { return std::vector<Entry>{c.op(op, {c.in(0), c.in(1)})}; };
}
/// Max/Min/Sum over any number of inputs.
inline ConvertFn variadic(const char* op) {
  return [op](Converter& c) {
    Entry acc = c.in(0);
    for (size_t i = 1; i < c.node->inputs.size(); ++i) acc = c.op(op, {acc, c.in(i)});
    return std::vector<Entry>{acc};
  };
}

inline int64_t norm_axis(const Converter& c, int64_t axis, int64_t rank) {
  KILN_USER_CHECK(axis >= -rank && axis < rank)
      << c.where() << ": axis " << axis << " is out of range for rank " << rank;
  return axis < 0 ? axis + rank : axis;
}

/// The converters of all ONNX operators, one per op type. Each family file registers its
/// operators once (register_*_converters); a second registration of an op is an internal error,
/// so that no converter wraps or silently replaces another and no result depends on the order
/// of registration.
class ConvertTable {
 public:
  /// Registers the converter of ONNX op `op`; an internal error when `op` already has one.
  void add(const std::string& op, ConvertFn fn);
  /// The converter of `op`; null when there is none.
  const ConvertFn* find(const std::string& op) const {
    auto it = fns_.find(op);
    return it == fns_.end() ? nullptr : &it->second;
  }
  /// The op types with a converter, sorted.
  std::vector<std::string> ops() const;

 private:
  std::map<std::string, ConvertFn> fns_;
};

/// The table of every converter (built on first use from the register_* functions below).
const ConvertTable& table();

/// Element-wise operators: arithmetic, comparisons and logic, math functions, activations,
/// Clip, Cast / CastLike (convert_math.cc).
void register_math_converters(ConvertTable& t);
/// Convolution and pooling over 1-D, 2-D and 3-D windows, ConvTranspose, MaxUnpool
/// (convert_conv.cc).
void register_conv_converters(ConvertTable& t);
/// Gemm, MatMul, normalizations, Softmax-like layers, Dropout, Resize/Upsample (convert_nn.cc).
void register_nn_converters(ConvertTable& t);
/// Shapes and layouts: Reshape, Transpose, Concat, Slice, Split, Pad, Tile, Shape, constants,
/// Range, Trilu, … (convert_tensor.cc).
void register_tensor_converters(ConvertTable& t);
/// Gather / Scatter families, OneHot, Compress, ReverseSequence, TopK (convert_index.cc).
void register_index_converters(ConvertTable& t);
/// Reductions, ArgMax/ArgMin, CumSum, Einsum (convert_reduce.cc).
void register_reduce_converters(ConvertTable& t);
/// QuantizeLinear, DequantizeLinear, QLinearMatMul/Conv, MatMulInteger, ConvInteger
/// (convert_quant.cc).
void register_quant_converters(ConvertTable& t);
/// Adagrad, Momentum, Adam (domain ai.onnx.preview.training) and the losses
/// (convert_training.cc).
void register_training_converters(ConvertTable& t);
/// LSTM, GRU, RNN (convert_rnn.cc).
void register_rnn_converters(ConvertTable& t);
/// DFT, STFT, MelWeightMatrix, Det, GridSample, RoiAlign (convert_signal.cc).
void register_signal_converters(ConvertTable& t);
/// TfIdfVectorizer (convert_text.cc).
void register_text_converters(ConvertTable& t);
/// Operators whose output shape depends on the data: NonZero, Unique, NonMaxSuppression
/// (convert_dynamic.cc).
void register_dynamic_converters(ConvertTable& t);
/// If, Loop, Scan, sequences and optionals (convert_control.cc).
void register_control_converters(ConvertTable& t);

/// Checks `m` as onnx.checker does where the converters rely on it: one producer per value (in
/// its graph and the enclosing ones), node input and output counts within the operator's schema
/// at the model's opset, required inputs present. A user error names the file, node and value
/// (validate.cc).
void validate_model(const OnnxModel& m);

/// A user error when `e` is an output whose shape depends on the data (Shape and Size read a
/// static shape; convert_dynamic.cc).
void check_static_shape(const Converter& c, Entry e);

/// ONNX TensorProto element-type code -> Kiln type; Void for types Kiln cannot compute with.
DataType onnx_elem_type(int64_t code);
/// A 1-D int64 array holding xs.
runtime::NDArray int64_array(const std::vector<int64_t>& xs);
/// A constant int64 (or `t`) tensor of rank `r` holding 0..n-1 along `axis` (size 1 elsewhere).
graph::Entry iota(Converter& c, int64_t n, size_t r, int64_t axis, DataType t = DataType::Int(64));
/// A constant tensor of `shape` (with at least one zero dimension) and type `t`.
Entry empty_tensor(Converter& c, const Ints& shape, DataType t);

}  // namespace kiln::frontend::onnx_import
