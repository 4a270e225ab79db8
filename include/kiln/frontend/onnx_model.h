/// \file onnx_model.h
/// \brief Reading ONNX files: a parsed, checked description of a model (no ONNX or protobuf
/// types in this header), and the tensors it holds as runtime::NDArrays.
///
///   frontend::OnnxModel m = frontend::load_onnx_model("resnet18.onnx");
///   for (const auto& n : m.nodes) std::cout << n.op_type << "\n";
/// Tensors kept in external data files (ONNX's `location` / `offset` / `length` entries, paths
/// relative to the model's folder) are read. Errors name the file and what is wrong with it:
/// missing, not an ONNX model, truncated, an external data file missing, too short or outside
/// the model's folder, an unsupported element type, two initializers of one name, a node input
/// that nothing produces.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kiln/runtime/ndarray.h"

namespace kiln::frontend {

/// A dimension is a size (>= 0) or a symbolic name ("batch") with size -1.
struct OnnxDim {
  int64_t size = -1;
  std::string param;
};

/// A graph input or output: name, element type, shape (empty when unknown). For a sequence of
/// tensors, `dtype` and `shape` describe its elements (Void / no shape when not declared).
struct OnnxValueInfo {
  std::string name;
  DataType dtype;
  bool has_shape = false;
  std::vector<OnnxDim> shape;
  /// "" for a tensor (or an undeclared type); else what the value is: "sequence", "optional",
  /// "map" or "sparse tensor" (Kiln computes with tensors only). For an optional tensor or
  /// sequence, `optional` is set and the rest describes the contained value.
  std::string kind;
  bool optional = false;
};

/// An attribute value. Graph-valued attributes (If/Loop bodies) are not held here: the node's
/// `has_subgraph` is set and a single graph is in OnnxNode::subgraphs.
using OnnxAttr = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                              std::vector<double>, std::vector<std::string>, runtime::NDArray>;

struct OnnxGraph;

struct OnnxNode {
  std::string op_type;
  std::string domain;               ///< "" is the default ONNX domain
  std::string name;                 ///< may be empty in the file; then "<op_type>_<index>"
  std::vector<std::string> inputs;  ///< "" marks an omitted optional input
  std::vector<std::string> outputs;
  std::map<std::string, OnnxAttr> attrs;
  bool has_subgraph = false;
  /// Graph-valued attributes (If's branches, Loop's and Scan's body) by attribute name.
  std::map<std::string, std::shared_ptr<const OnnxGraph>> subgraphs;
};

/// A sub-graph (the body of If, Loop or Scan). Its nodes may use values of enclosing graphs.
struct OnnxGraph {
  std::string name;
  std::vector<OnnxValueInfo> inputs;
  std::vector<OnnxValueInfo> outputs;
  std::map<std::string, runtime::NDArray> initializers;
  std::vector<OnnxNode> nodes;
};

struct OnnxModel {
  std::string path;
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;  ///< domain -> version ("" = ai.onnx)
  std::string producer;
  std::vector<OnnxValueInfo> inputs;  ///< graph inputs that are not initializers
  std::vector<OnnxValueInfo> outputs;
  std::map<std::string, runtime::NDArray> initializers;
  std::vector<OnnxNode> nodes;  ///< in file order (ONNX requires topological order)

  /// The opset of the default domain (0 if none is declared).
  int64_t default_opset() const;
};

/// Parses and checks an ONNX model file.
OnnxModel load_onnx_model(const std::string& path);
/// Parses a model from bytes; `what` names the source in errors.
OnnxModel parse_onnx_model(const std::string& bytes, const std::string& what);
/// Reads a serialized TensorProto (the ONNX test suites' input_0.pb / output_0.pb files).
runtime::NDArray load_onnx_tensor(const std::string& path);
/// Reads a serialized SequenceProto of tensors (test data of a sequence-typed value): its
/// tensors in order (none for an empty sequence). A user error when the file is not a sequence
/// of tensors.
std::vector<runtime::NDArray> load_onnx_sequence(const std::string& path);

/// The value of a serialized OptionalProto (test data of an optional-typed value): empty, a
/// tensor, or a sequence of tensors.
struct OnnxOptionalValue {
  bool present = false;
  bool is_sequence = false;
  runtime::NDArray tensor;              ///< when present and not a sequence
  std::vector<runtime::NDArray> items;  ///< when present and a sequence
};
/// Reads a serialized OptionalProto. A user error when the file is not one, or holds a map,
/// a sparse tensor or a nested optional.
OnnxOptionalValue load_onnx_optional(const std::string& path);

}  // namespace kiln::frontend
