/// \file onnx.h
/// \brief Importing ONNX models into Kiln's graph IR.
///
///   graph::Graph g = frontend::import_onnx("model.onnx");
/// Every operator of the model is checked first: if any is not supported, one error lists all
/// of them with op type, domain, opset and node name. Symbolic input dimensions need a size
/// (ImportOptions::input_shapes), else the error names the input and the dimension.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/frontend/onnx_model.h"
#include "kiln/graph/graph.h"

namespace kiln::frontend {

struct ImportOptions {
  /// Shapes for graph inputs, overriding the model's (needed for symbolic dimensions).
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

/// Converts a parsed model to a graph (types not yet inferred: run graph::infer_types).
graph::Graph import_onnx(const OnnxModel& model, const ImportOptions& opt = {});
/// Reads and converts an ONNX file.
graph::Graph import_onnx(const std::string& path, const ImportOptions& opt = {});

/// The ONNX operators (default domain) the importer converts, sorted.
std::vector<std::string> supported_onnx_ops();

}  // namespace kiln::frontend
