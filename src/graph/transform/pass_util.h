// Shared by the graph passes: the old-entry → new-entry map that every rebuilding pass keeps
// while it walks the old graph in topological order.
#pragma once

#include <set>
#include <string>
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

/// Unique names for the constants a pass creates: "<base>" or, when taken (by a node of the old
/// graph or an earlier call), "<base>_1", "<base>_2", …
class NameGen {
 public:
  explicit NameGen(const Graph& old) {
    for (const Node& n : old.nodes())
      if (!n.is_op()) used_.insert(n.name);
  }
  std::string operator()(const std::string& base) {
    std::string name = base;
    for (int k = 1; used_.count(name); ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }

 private:
  std::set<std::string> used_;
};

/// Per node: the number of distinct op nodes reading it, plus one when it is a graph result.
inline std::vector<int> use_counts(const Graph& g) {
  std::vector<int> uses(static_cast<size_t>(g.num_nodes()), 0);
  std::vector<int> last(static_cast<size_t>(g.num_nodes()), -1);
  for (int i = 0; i < g.num_nodes(); ++i) {
    for (const Entry& e : g.node(i).inputs) {
      if (last[static_cast<size_t>(e.node)] == i) continue;
      last[static_cast<size_t>(e.node)] = i;
      ++uses[static_cast<size_t>(e.node)];
    }
  }
  for (const Entry& e : g.outputs()) ++uses[static_cast<size_t>(e.node)];
  return uses;
}

}  // namespace kiln::graph::detail
