// Graph ops: Signal processing and sampling ops.
#include "kiln/graph/op_registry.h"

namespace kiln::graph {

void register_signal_ops(OpRegistry& r) { (void)r; }

}  // namespace kiln::graph
