// Operator fusion (the TVM paper, section 3): partitions a typed graph's op nodes into groups,
// each of which build_module compiles into one kernel. One forward sweep over the nodes in
// topological order (no recursion): a node joins the group of one of its producers when that
// producer has a single output, exactly one consumer node and is not a graph result, the group
// is not full, and the pair is allowed by the op patterns: injective ops chain (element-wise,
// broadcast, injective), a reduction takes injective inputs (it becomes the master and ends the
// group), a complex out-fusable op (conv2d, dense, pooling) takes element-wise / broadcast ops
// on its output (the epilogue), and opaque ops always stand alone. Because a producer that
// merges has its only consumer inside the group, every group is an in-tree whose last node is
// the only one read from outside: groups are convex and can be emitted at their last node.

#include <map>
#include <set>

#include "kiln/graph/op_registry.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"

namespace kiln::graph {

namespace {

using topi::OpPattern;

OpPattern pattern_of(const Node& n) {
  const OpDef* def = OpRegistry::global().find(n.op);
  return def ? def->pattern : OpPattern::kOpaque;
}

bool is_injective(OpPattern p) { return p <= OpPattern::kInjective; }

/// What a group already holds, for the join rules.
struct GroupState {
  std::vector<int> nodes;
  bool has_master = false;     ///< an out-fusable op (the group's first node)
  bool has_reduction = false;  ///< a reduction (the group's last node; nothing joins after)
};

}  // namespace

std::vector<std::vector<int>> fuse_ops(const Graph& g, int max_group_size) {
  KILN_ICHECK(max_group_size >= 1) << "fuse_ops: max_group_size must be positive";
  const int n = g.num_nodes();
  // Distinct consumer nodes per node, and graph results.
  std::vector<int> num_consumers(static_cast<size_t>(n), 0);
  std::vector<int> last_consumer(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i) {
    for (const Entry& e : g.node(i).inputs) {
      if (last_consumer[static_cast<size_t>(e.node)] == i) continue;
      last_consumer[static_cast<size_t>(e.node)] = i;
      ++num_consumers[static_cast<size_t>(e.node)];
    }
  }
  std::vector<bool> is_result(static_cast<size_t>(n), false);
  for (const Entry& e : g.outputs()) is_result[static_cast<size_t>(e.node)] = true;

  std::vector<GroupState> groups;
  std::vector<int> group_of(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    if (!node.is_op()) continue;
    OpPattern p = pattern_of(node);
    int joined = -1;
    if (p != OpPattern::kOpaque && p != OpPattern::kOutEWiseFusable) {
      for (const Entry& e : node.inputs) {
        const Node& prod = g.node(e.node);
        size_t pi = static_cast<size_t>(e.node);
        if (!prod.is_op() || prod.num_outputs() != 1 || num_consumers[pi] != 1 || is_result[pi])
          continue;
        GroupState& grp = groups[static_cast<size_t>(group_of[pi])];
        if (static_cast<int>(grp.nodes.size()) >= max_group_size || grp.has_reduction) continue;
        OpPattern pp = pattern_of(prod);
        if (pp == OpPattern::kOpaque) continue;
        bool ok = false;
        if (grp.has_master) {
          // the epilogue, of the master's shape (an SE block's x · s is not s's epilogue)
          ok = (p == OpPattern::kElemWise || p == OpPattern::kBroadcast) &&
               node.outputs[0].shape == prod.outputs[0].shape;
        } else if (is_injective(pp)) {
          ok = is_injective(p) || p == OpPattern::kCommReduce;
        }
        if (!ok) continue;
        joined = group_of[pi];
        break;
      }
    }
    if (joined < 0) {
      joined = static_cast<int>(groups.size());
      groups.emplace_back();
      groups.back().has_master = p == OpPattern::kOutEWiseFusable;
    }
    GroupState& grp = groups[static_cast<size_t>(joined)];
    grp.nodes.push_back(i);
    if (p == OpPattern::kCommReduce) grp.has_reduction = true;
    group_of[static_cast<size_t>(i)] = joined;
  }
  std::vector<std::vector<int>> out;
  out.reserve(groups.size());
  for (GroupState& grp : groups) out.push_back(std::move(grp.nodes));
  return out;
}

std::vector<std::vector<int>> partition_unfused(const Graph& g) {
  std::vector<std::vector<int>> out;
  for (int i = 0; i < g.num_nodes(); ++i)
    if (g.node(i).is_op()) out.push_back({i});
  return out;
}

std::string groups_str(const Graph& g, const std::vector<std::vector<int>>& groups) {
  std::string r;
  for (const std::vector<int>& grp : groups) {
    r += "{";
    for (size_t k = 0; k < grp.size(); ++k) {
      if (k) r += ", ";
      r += g.node(grp[k]).op + " %" + std::to_string(grp[k]);
    }
    r += "}\n";
  }
  return r;
}

}  // namespace kiln::graph
