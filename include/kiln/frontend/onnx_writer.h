/// \file onnx_writer.h
/// \brief Writing an OnnxModel (onnx_model.h) back to an ONNX file, e.g. after a tool rewrote
/// its nodes and initializers (`kiln quantize`).
///
///   frontend::OnnxModel m = frontend::load_onnx_model("model.onnx");
///   ...  // edit m.nodes / m.initializers
///   frontend::save_onnx_model(m, "out.onnx");
/// Initializers are written as raw little-endian data; graph inputs and outputs with their
/// element type and shape when known. Nodes with graph-valued attributes (If / Loop / Scan
/// bodies) are refused with a user error naming the node.
#pragma once

#include <string>

#include "kiln/frontend/onnx_model.h"

namespace kiln::frontend {

/// The model as serialized ONNX (ModelProto bytes).
std::string serialize_onnx_model(const OnnxModel& m);
/// Writes the model to `path`; a user error naming the file when it cannot be written.
void save_onnx_model(const OnnxModel& m, const std::string& path);

}  // namespace kiln::frontend
