/// \file onnx_writer.h
/// \brief Writing an OnnxModel (onnx_model.h) back to an ONNX file, e.g. after a tool rewrote
/// its nodes and initializers (`kiln quantize`).
///
///   frontend::OnnxModel m = frontend::load_onnx_model("model.onnx");
///   ...  // edit m.nodes / m.initializers
///   frontend::save_onnx_model(m, "out.onnx");
/// Initializers are written as raw little-endian data, in the model or in an external data file
/// beside it (OnnxSaveOptions); graph inputs and outputs with their
/// element type and shape when known. Nodes with graph-valued attributes (If / Loop / Scan
/// bodies) are refused with a user error naming the node.
#pragma once

#include <string>

#include "kiln/frontend/onnx_model.h"

namespace kiln::frontend {

/// The model as serialized ONNX (ModelProto bytes), every tensor inside it.
std::string serialize_onnx_model(const OnnxModel& m);

struct OnnxSaveOptions {
  /// Initializers of at least `external_min_bytes` go to this file (a name, written next to the
  /// model; ONNX's external data). Empty: only when the model would not fit in protobuf's
  /// 2 GiB, then into "<model file name>.data".
  std::string external_data;
  uint64_t external_min_bytes = 1024;
};
/// Writes the model to `path`; a user error naming the file when it cannot be written.
void save_onnx_model(const OnnxModel& m, const std::string& path, const OnnxSaveOptions& opt = {});

}  // namespace kiln::frontend
