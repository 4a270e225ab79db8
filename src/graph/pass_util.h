// Shared by the graph passes: the old-entry → new-entry map that every rebuilding pass keeps
// while it walks the old graph in topological order.
#pragma once

#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::graph::detail {

/// Maps each output of each node of an old graph to an entry of the graph being built.
class EntryMap {
 public:
  explicit EntryMap(const Graph& old) : map_(static_cast<size_t>(old.num_nodes())) {}
  /// Output `i` of old node `n` becomes `e`.
  void set(int n, int i, Entry e) {
    auto& v = map_[static_cast<size_t>(n)];
    if (v.size() <= static_cast<size_t>(i)) v.resize(static_cast<size_t>(i) + 1);
    v[static_cast<size_t>(i)] = e;
  }
  /// All outputs of old node `n` become the outputs of new node `m`.
  void set_node(int n, int m, int num_outputs) {
    for (int i = 0; i < num_outputs; ++i) set(n, i, Entry{m, i});
  }
  Entry operator[](Entry old) const {
    return map_[static_cast<size_t>(old.node)][static_cast<size_t>(old.index)];
  }
  /// The node with its inputs mapped.
  Node remap(const Node& n) const {
    Node r = n;
    for (Entry& e : r.inputs) e = (*this)[e];
    return r;
  }
  /// The old graph's results, mapped.
  std::vector<Entry> outputs(const Graph& old) const {
    std::vector<Entry> r;
    for (const Entry& e : old.outputs()) r.push_back((*this)[e]);
    return r;
  }

 private:
  std::vector<std::vector<Entry>> map_;
};

/// "%3 (conv2d 'conv1')": how errors name a node.
inline std::string describe_node(const Graph& g, int i) {
  const Node& n = g.node(i);
  std::string s = "node %" + std::to_string(i) + " (" + n.op;
  if (!n.name.empty()) s += " '" + n.name + "'";
  return s + ")";
}

}  // namespace kiln::graph::detail
