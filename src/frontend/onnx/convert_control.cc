// ONNX importer: Control flow (If, Loop, Scan) and sequences.
#include "converter.h"

namespace kiln::frontend::onnx_import {

void register_control_converters(ConvertTable& t) { (void)t; }

}  // namespace kiln::frontend::onnx_import
