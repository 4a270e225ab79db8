// Dead-code elimination: a backward sweep over the node vector marks live nodes (results are
// live; the inputs of a live node are live — because producers precede consumers, one reverse
// pass suffices), then a forward pass copies the live nodes and the graph inputs.

#include "kiln/graph/transform.h"
#include "pass_util.h"

namespace kiln::graph {

Graph dead_code_elimination(const Graph& g) {
  std::vector<char> live(static_cast<size_t>(g.num_nodes()), 0);
  for (const Entry& e : g.outputs()) live[static_cast<size_t>(e.node)] = 1;
  for (int i = g.num_nodes() - 1; i >= 0; --i) {
    const Node& n = g.node(i);
    if (n.is_input()) live[static_cast<size_t>(i)] = 1;
    if (!live[static_cast<size_t>(i)]) continue;
    for (const Entry& e : n.inputs) live[static_cast<size_t>(e.node)] = 1;
  }
  Graph out;
  detail::EntryMap map(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (!live[static_cast<size_t>(i)]) continue;
    const Node& n = g.node(i);
    map.set_node(i, out.add_node(map.remap(n)), n.num_outputs());
  }
  out.set_outputs(map.outputs(g));
  return out;
}

}  // namespace kiln::graph
