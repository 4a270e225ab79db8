// Common-subexpression elimination by value numbering: walking the nodes forward, an op node
// is keyed by (op, mapped input entries, attribute text); the first node with a key is kept
// and later nodes with the same key are mapped onto it. Since inputs are mapped before the
// key is formed, whole duplicated chains merge in one pass.

#include <unordered_map>

#include "kiln/graph/transform.h"
#include "pass_util.h"

namespace kiln::graph {

Graph common_subexpression_elimination(const Graph& g) {
  Graph out;
  detail::EntryMap map(g);
  std::unordered_map<std::string, int> seen;
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node n = map.remap(g.node(i));
    if (n.is_op()) {
      std::string key = n.op + "(";
      for (const Entry& e : n.inputs)
        key += std::to_string(e.node) + "." + std::to_string(e.index) + ",";
      key += n.attrs.str() + ")";
      auto it = seen.find(key);
      if (it != seen.end() && out.node(it->second).outputs == n.outputs) {
        map.set_node(i, it->second, n.num_outputs());
        continue;
      }
      int id = out.add_node(std::move(n));
      seen.emplace(std::move(key), id);
      map.set_node(i, id, out.node(id).num_outputs());
      continue;
    }
    int outs = n.num_outputs();
    map.set_node(i, out.add_node(std::move(n)), outs);
  }
  out.set_outputs(map.outputs(g));
  return out;
}

}  // namespace kiln::graph
