// Graph ops: Ops whose output shape depends on the data.
#include "kiln/graph/op_registry.h"

namespace kiln::graph {

void register_dynamic_ops(OpRegistry& r) { (void)r; }

}  // namespace kiln::graph
