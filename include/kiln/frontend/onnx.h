/// \file onnx.h
/// \brief Importing ONNX models into Kiln's graph IR.
///
///   graph::Graph g = frontend::import_onnx("model.onnx");
/// The graph is checked first as onnx.checker does (one producer per value; each node's input
/// and output counts within its operator's schema, required inputs present), then every
/// operator: if any is not supported, one error lists all of them with op type, domain, opset
/// and node name. Symbolic input dimensions need a size
/// (ImportOptions::input_shapes), else the error names the input and the dimension.
///
/// Sequence-typed graph inputs and outputs are flattened into tensors: a sequence input `s`
/// whose length and element shapes are given (ImportOptions::sequence_inputs) becomes the tensor
/// inputs "s.0" … "s.<n-1>"; with ImportOptions::flatten_sequence_outputs a sequence output `t`
/// becomes the outputs "t.0" … in order (its length is known after import, since sequences are
/// tracked at import time).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/frontend/onnx_model.h"
#include "kiln/graph/graph.h"

namespace kiln::frontend {

struct ImportOptions {
  /// Shapes for graph inputs, overriding the model's (needed for symbolic dimensions).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  /// Sequence-typed graph inputs: the shape of each element, in order (an empty list for an
  /// empty sequence). Input `s` becomes tensor inputs "s.0", "s.1", … of the element type the
  /// model declares. A sequence input not listed here is an error.
  std::map<std::string, std::vector<std::vector<int64_t>>> sequence_inputs;
  /// Whether a sequence-typed graph output `t` becomes graph outputs "t.0", "t.1", … (one per
  /// element, in order; none for an empty sequence). When false such an output is an error, so
  /// that the graph's outputs stay one per model output.
  bool flatten_sequence_outputs = false;
  /// Optional-typed graph inputs that are empty (None). Any other optional input holds its
  /// value: a tensor input of the same name, or (optional sequences) the tensor inputs of
  /// sequence_inputs. Optional values are resolved at import time: OptionalHasElement becomes
  /// a constant, OptionalGetElement its value (an error on an empty optional); an optional
  /// graph output is returned as its value (an empty one is an error).
  std::set<std::string> empty_optional_inputs;
};

/// Converts a parsed model to a graph (types not yet inferred: run graph::infer_types).
graph::Graph import_onnx(const OnnxModel& model, const ImportOptions& opt = {});
/// Reads and converts an ONNX file.
graph::Graph import_onnx(const std::string& path, const ImportOptions& opt = {});

/// The ONNX operators (default domain) the importer converts, sorted.
std::vector<std::string> supported_onnx_ops();

}  // namespace kiln::frontend
