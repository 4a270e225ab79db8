// Graph ops: Ops for corner cases of the ONNX importer.
#include "kiln/graph/op_registry.h"

namespace kiln::graph {

void register_misc_ops(OpRegistry& r) { (void)r; }

}  // namespace kiln::graph
