// Graph ops: Control-flow ops.
#include "kiln/graph/op_registry.h"

namespace kiln::graph {

void register_control_ops(OpRegistry& r) { (void)r; }

}  // namespace kiln::graph
