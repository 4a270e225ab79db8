// Graph ops: N-d convolution and pooling.
#include "kiln/graph/op_registry.h"

namespace kiln::graph {

void register_ndim_ops(OpRegistry& r) { (void)r; }

}  // namespace kiln::graph
