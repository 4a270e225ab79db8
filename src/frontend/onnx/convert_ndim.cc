// ONNX importer: Convolution and pooling over 1-D and 3-D windows.
#include "converter.h"

namespace kiln::frontend::onnx_import {

void register_ndim_converters(ConvertTable& t) { (void)t; }

}  // namespace kiln::frontend::onnx_import
