// ONNX importer: Signal processing and sampling operators.
#include "converter.h"

namespace kiln::frontend::onnx_import {

void register_signal_converters(ConvertTable& t) { (void)t; }

}  // namespace kiln::frontend::onnx_import
