// ONNX importer: Operators whose output shape depends on the data.
#include "converter.h"

namespace kiln::frontend::onnx_import {

void register_dynamic_converters(ConvertTable& t) { (void)t; }

}  // namespace kiln::frontend::onnx_import
