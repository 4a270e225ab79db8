// ONNX importer: TfIdfVectorizer, quantized linear ops, bfloat16 and other corner cases.
#include "converter.h"

namespace kiln::frontend::onnx_import {

void register_misc_converters(ConvertTable& t) { (void)t; }

}  // namespace kiln::frontend::onnx_import
