// Operator fusion (the TVM paper, section 3, with the post-dominator analysis of TVM's FuseOps):
// partitions a typed graph's op nodes into groups, each of which build_module compiles into one
// kernel. First the immediate post-dominator of every node (the nearest node that every path
// from it to a graph result passes through) is found in one backward sweep (the lowest common
// ancestor of its consumers in the post-dominator tree). Then node v fuses with the region
// between it and its post-dominator p — every node on a path from v to p, and p — when the
// union of their groups is still a valid group: convex, read from outside only at its last
// node, at most one master (an out-fusable op first, followed by its element-wise / broadcast /
// shape-only epilogue; or a reduction last, fed by injective ops; opaque ops alone), within the
// size cap, and cheap: inlining must not recompute an expensive value per element (the cost
// check below). Two sweeps in topological order, as in TVM: the first grows only the groups of
// out-fusable masters (so a convolution's epilogue is taken before injective fusion claims its
// nodes), the second every other node. A chain is the special case where p is the only
// consumer, so the in-trees of the paper are still built; diamonds (SiLU x·sigmoid(x), GELU,
// residual adds) now fuse too. An epilogue's last node must have a shape the master's template
// writes (is_epilogue_shape, strategy.h: a dense's [M, N] may gain unit extents); when the
// post-dominator's shape is only a step on the way ([M, 1, N] before a transpose to
// [1, M, N]), the next post-dominators are tried. Shape-only epilogue ops are recognised on
// their compute: one direct load of the input at the output's axis variables, in order.
//
// The cost check, per candidate group: (1) duplication: a value read by several nodes of the
// group is inlined into each use; the float work so added per output element (each node's
// float ops × its extra uses) must stay under kMaxDuplicatedCost. (2) broadcast reads: a value
// of the group read with a broadcast (a [N,C,1,1] scale multiplied into [N,C,H,W]) would be
// recomputed per output element, so its cone (it and its producers in the group) may hold no
// master (no convolution, matmul or reduction) and at most kMaxBroadcastCost float ops. A node's
// float ops are counted on its own compute (topi), built once on placeholders: one per
// arithmetic node, kCallCost per intrinsic call (exp, erf, sigmoid, ...); index arithmetic and
// data movement (reshape, transpose, broadcast_to) cost nothing.

#include <algorithm>
#include <deque>

#include "kiln/graph/op_registry.h"
#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"
#include "kiln/ir/functor.h"
#include "kiln/support/error.h"
#include "kiln/te/tensor.h"

namespace kiln::graph {

namespace {

using topi::OpPattern;

/// Extra float ops per output element that inlining a value into several uses may add.
constexpr int64_t kMaxDuplicatedCost = 4;
/// Float ops per output element that may be recomputed for a value read with a broadcast.
constexpr int64_t kMaxBroadcastCost = 2;
/// The weight of an intrinsic call (a transcendental function) in a node's cost.
constexpr int64_t kCallCost = 8;
/// How many further post-dominators an epilogue tries when its own is not a valid last node.
constexpr int kMaxSinkHops = 2;
/// The cost of a node whose compute cannot be built on placeholders (never inlined twice).
constexpr int64_t kUnknownCost = 1000;

bool is_master(OpPattern p) {
  return p == OpPattern::kOutEWiseFusable || p == OpPattern::kCommReduce;
}

class Fuser {
 public:
  Fuser(const Graph& g, int max_group_size, const std::set<int>& alone)
      : g_(g), max_(max_group_size), n_(g.num_nodes()) {
    const OpRegistry& reg = OpRegistry::global();
    consumers_.resize(size(n_));
    pattern_.assign(size(n_), OpPattern::kOpaque);
    is_result_.assign(size(n_), false);
    for (int i = 0; i < n_; ++i) {
      const Node& node = g.node(i);
      if (node.is_op()) {
        const OpDef* def = reg.find(node.op);
        // Data-dependent shapes only leave the graph: such ops stand alone.
        if (def && !def->bounded && !alone.count(i)) pattern_[size(i)] = def->pattern;
      }
      for (const Entry& e : node.inputs) {
        std::vector<int>& c = consumers_[size(e.node)];
        if (c.empty() || c.back() != i) c.push_back(i);
      }
    }
    for (const Entry& e : g.outputs()) is_result_[size(e.node)] = true;
    cost_.assign(size(n_), -1);
    mark_.assign(size(n_), 0);
    parent_.resize(size(n_));
    members_.resize(size(n_));
    for (int i = 0; i < n_; ++i) {
      parent_[size(i)] = i;
      if (g.node(i).is_op()) members_[size(i)] = {i};
    }
    post_dominators();
  }

  std::vector<std::vector<int>> run() {
    for (int phase = 0; phase < 2; ++phase) {
      for (int v = 0; v < n_; ++v) {
        if (!g_.node(v).is_op()) continue;
        bool master_group = out_fusable_group(find(v));
        if ((phase == 0) == master_group) try_fuse(v);
      }
    }
    std::vector<std::vector<int>> out;
    for (int i = 0; i < n_; ++i) {
      if (g_.node(i).is_op() && find(i) == i) out.push_back(members_[size(i)]);
    }
    std::sort(out.begin(), out.end());  // by first node (members are sorted)
    return out;
  }

 private:
  static size_t size(int i) { return static_cast<size_t>(i); }
  OpPattern pattern(int i) const { return pattern_[size(i)]; }
  int64_t numel(int i) const { return g_.node(i).outputs.at(0).numel(); }

  int find(int i) {
    while (parent_[size(i)] != i) {
      parent_[size(i)] = parent_[size(parent_[size(i)])];
      i = parent_[size(i)];
    }
    return i;
  }

  bool out_fusable_group(int root) const {
    for (int i : members_[size(root)])
      if (pattern(i) == OpPattern::kOutEWiseFusable) return true;
    return false;
  }

  /// ipdom_[v]: v's immediate post-dominator, -1 when only the exit post-dominates v (v is a
  /// graph result, has no consumer, or its paths meet only at the exit). One backward sweep: a
  /// node's post-dominator is the lowest common ancestor of its consumers in the tree.
  void post_dominators() {
    ipdom_.assign(size(n_), -1);
    depth_.assign(size(n_), 1);  // the exit is the root, at depth 0
    for (int v = n_ - 1; v >= 0; --v) {
      const std::vector<int>& cs = consumers_[size(v)];
      if (is_result_[size(v)] || cs.empty()) continue;
      int d = cs[0];
      for (size_t k = 1; k < cs.size() && d >= 0; ++k) d = lca(d, cs[k]);
      ipdom_[size(v)] = d;
      depth_[size(v)] = d < 0 ? 1 : depth_[size(d)] + 1;
    }
  }

  int lca(int a, int b) const {
    while (a != b && a >= 0 && b >= 0) {
      if (depth_[size(a)] < depth_[size(b)]) std::swap(a, b);
      a = ipdom_[size(a)];  // a is at least as deep as b
    }
    return a == b ? a : -1;
  }

  /// Fuses v with the region up to its post-dominator when the merged group is valid.
  /// When that fails and v is in an epilogue, the next post-dominators are tried (up to
  /// kMaxSinkHops): an epilogue may pass through a shape the template cannot write out
  /// (dense [M, N] → reshape [M, 1, N] → transpose [1, M, N]).
  void try_fuse(int v) {
    if (g_.node(v).num_outputs() != 1) return;
    const bool epilogue = out_fusable_group(find(v));
    int p = ipdom_[size(v)];
    for (int hop = 0; hop <= kMaxSinkHops && p >= 0 && find(v) != find(p); ++hop) {
      if (fuse_region(v, p) || !epilogue || numel(p) != numel(v)) return;
      p = ipdom_[size(p)];
    }
  }

  /// Fuses v with every node on its paths to p (a post-dominator of v) when the merged group
  /// is valid; false otherwise.
  bool fuse_region(int v, int p) {
    // The region: every node reachable from v without passing p (all reach p), and p.
    std::vector<int> region{p};
    std::deque<int> work{v};
    ++stamp_;
    mark_[size(p)] = stamp_;
    while (!work.empty()) {
      int u = work.front();
      work.pop_front();
      for (int c : consumers_[size(u)]) {
        if (mark_[size(c)] == stamp_) continue;
        mark_[size(c)] = stamp_;
        region.push_back(c);
        if (static_cast<int>(region.size()) > max_) return false;
        work.push_back(c);
      }
    }
    std::vector<int> roots{find(v)};
    for (int u : region) roots.push_back(find(u));
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    std::vector<int> merged;
    for (int r : roots) {
      merged.insert(merged.end(), members_[size(r)].begin(), members_[size(r)].end());
      if (static_cast<int>(merged.size()) > max_) return false;
    }
    std::sort(merged.begin(), merged.end());
    if (!valid(merged)) return false;
    int root = roots[0];
    for (int r : roots) {
      parent_[size(r)] = root;
      if (r != root) members_[size(r)].clear();
    }
    members_[size(root)] = std::move(merged);
    return true;
  }

  /// Whether the sorted op nodes `s` may form one group (the rules in the file comment).
  bool valid(const std::vector<int>& s) {
    const int last = s.back();
    int master = -1;
    ++stamp_;
    for (int i : s) mark_[size(i)] = stamp_;
    for (int i : s) {
      OpPattern p = pattern(i);
      if (p == OpPattern::kOpaque) return false;
      if (is_master(p)) {
        if (master >= 0) return false;
        master = i;
      }
      if (i == last) continue;
      // Only the last node is read outside the group.
      if (is_result_[size(i)] || g_.node(i).num_outputs() != 1) return false;
      for (int c : consumers_[size(i)])
        if (mark_[size(c)] != stamp_) return false;
    }
    if (master >= 0 && pattern(master) == OpPattern::kOutEWiseFusable) {
      if (master != s.front()) return false;
      const std::vector<int64_t>& ms = g_.node(master).outputs.at(0).shape;
      for (int i : s)
        if (i != master && !epilogue_node(i, ms, i == last)) return false;
    } else if (master >= 0) {  // a reduction: the last node, fed by injective ops
      if (master != last) return false;
    }
    for (int i : s)
      if (i != master && pattern(i) > OpPattern::kInjective) return false;
    return convex(s) && cheap(s, master);
  }

  /// An epilogue node of an out-fusable master whose output has shape `ms`: element-wise or
  /// broadcast, or shape-only (reshape, squeeze, expand_dims, … adding or removing unit
  /// extents). The group's last node (the kernel's output) has the master's shape, or for a 2-D
  /// master that shape with unit extents added (is_epilogue_shape, strategy.h); the others,
  /// inlined, the master's number of elements. Broadcast reads of the master's value are
  /// refused by the cost check.
  bool epilogue_node(int i, const std::vector<int64_t>& ms, bool last) {
    int64_t m = 1;
    for (int64_t d : ms) m *= d;
    if (last ? !is_epilogue_shape(ms, g_.node(i).outputs.at(0).shape) : numel(i) != m) return false;
    if (pattern(i) <= OpPattern::kBroadcast) return true;
    return pattern(i) == OpPattern::kInjective && shape_only(i);
  }

  /// Whether node i only adds, removes or moves unit extents, reading its input directly: its
  /// compute is one stage whose body loads its one input at the output's axis variables (in
  /// order) and zeros. (A flat-index reshape would hide the tile of the master's value that an
  /// epilogue element reads from bound inference.)
  bool shape_only(int i) {
    const Node& n = g_.node(i);
    if (n.inputs.size() != 1) return false;
    const std::vector<int64_t>& in = g_.type_of(n.inputs[0]).shape;
    const std::vector<int64_t>& out = n.outputs.at(0).shape;
    auto non_unit = [](const std::vector<int64_t>& s) {
      std::vector<int64_t> r;
      for (int64_t d : s)
        if (d != 1) r.push_back(d);
      return r;
    };
    if (in == out || non_unit(in) != non_unit(out)) return false;
    std::vector<te::Tensor> outs = compute_of(i);
    if (outs.size() != 1 || outs[0].op()->kind != te::OpKind::kCompute) return false;
    const auto* op = static_cast<const te::ComputeOpNode*>(outs[0].op().get());
    const ir::ProducerLoad* load =
        op->body.size() == 1 ? op->body[0].as<ir::ProducerLoad>() : nullptr;
    if (!load || op->input_tensors().size() != 1 ||
        op->input_tensors()[0].op()->kind != te::OpKind::kPlaceholder)
      return false;
    size_t next_axis = 0;
    for (const ir::Expr& idx : load->indices) {
      if (const ir::IntImm* c = idx.as<ir::IntImm>()) {
        if (c->value != 0) return false;
        continue;
      }
      size_t j = 0;
      while (j < op->axis.size() && idx.get() != op->axis[j]->var.get()) ++j;
      if (j == op->axis.size()) return false;
      if (out[j] == 1) continue;  // a unit axis' variable is 0
      if (j < next_axis) return false;
      next_axis = j + 1;
    }
    return true;
  }

  /// No path leaves `s` and comes back (so the group can be emitted at its last node).
  bool convex(const std::vector<int>& s) {
    // mark_ == stamp_: in s (set by valid); outside_ == stamp_: reached from s through a node
    // outside it.
    if (outside_.size() != mark_.size()) outside_.assign(mark_.size(), 0);
    for (int k = s.front() + 1; k <= s.back(); ++k) {
      bool in_s = mark_[size(k)] == stamp_;
      bool tainted = false;
      for (const Entry& e : g_.node(k).inputs) {
        size_t j = size(e.node);
        tainted = tainted || outside_[j] == stamp_ || (!in_s && mark_[j] == stamp_);
      }
      if (!tainted) continue;
      if (in_s) return false;
      outside_[size(k)] = stamp_;
    }
    return true;
  }

  /// The cost check (file comment): duplicated inlined work and broadcast reads.
  bool cheap(const std::vector<int>& s, int master) {
    // Uses of each node's value inside the group when everything but the master is inlined:
    // the number of paths from it to the last node, one per reading occurrence.
    std::vector<int64_t> uses(s.size(), 0);
    auto pos = [&](int node) {
      return static_cast<size_t>(std::lower_bound(s.begin(), s.end(), node) - s.begin());
    };
    uses.back() = 1;
    for (size_t k = s.size() - 1; k-- > 0;) {
      for (int c : consumers_[size(s[k])]) {
        int64_t occurrences = 0;
        for (const Entry& e : g_.node(c).inputs) occurrences += e.node == s[k];
        uses[k] = std::min<int64_t>(uses[k] + occurrences * uses[pos(c)], 1 << 20);
      }
    }
    int64_t duplicated = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] == master || uses[k] <= 1) continue;
      duplicated += cost(s[k]) * (uses[k] - 1);
      if (duplicated > kMaxDuplicatedCost) return false;
    }
    for (int c : s) {
      for (const Entry& e : g_.node(c).inputs) {
        if (mark_[size(e.node)] != stamp_ || !broadcast_read(e.node, c)) continue;
        // The cone of the value: it and its producers in the group, recomputed per element.
        int64_t total = 0;
        std::vector<int> stack{e.node};
        std::vector<int> seen;
        while (!stack.empty()) {
          int u = stack.back();
          stack.pop_back();
          if (std::find(seen.begin(), seen.end(), u) != seen.end()) continue;
          seen.push_back(u);
          if (is_master(pattern(u))) return false;
          total += cost(u);
          if (total > kMaxBroadcastCost) return false;
          for (const Entry& in : g_.node(u).inputs)
            if (mark_[size(in.node)] == stamp_) stack.push_back(in.node);
        }
      }
    }
    return true;
  }

  /// Whether node c reads the value of node u with a broadcast (several output elements per
  /// element of u): u is smaller than c's output, and for an injective op (concatenate, …)
  /// smaller than its inputs together.
  bool broadcast_read(int u, int c) const {
    if (numel(u) >= numel(c)) return false;
    if (pattern(c) <= OpPattern::kBroadcast) return true;
    int64_t in_total = 0;
    for (const Entry& e : g_.node(c).inputs) in_total += g_.type_of(e).numel();
    return in_total < numel(c);
  }

  /// Node i's compute (topi) on placeholders of its input types; empty when it fails.
  std::vector<te::Tensor> compute_of(int i) const {
    const Node& n = g_.node(i);
    const OpDef* def = OpRegistry::global().find(n.op);
    if (!def) return {};
    std::vector<TensorType> in;
    for (const Entry& e : n.inputs) in.push_back(g_.type_of(e));
    try {
      return def->compute(placeholders_for(in), n.attrs, n.op);
    } catch (const Error&) {
      return {};
    }
  }

  /// Float ops per output element of node i's compute (file comment), built once.
  int64_t cost(int i) {
    int64_t& c = cost_[size(i)];
    if (c >= 0) return c;
    c = kUnknownCost;
    std::vector<te::Tensor> outs = compute_of(i);
    if (outs.empty()) return c;
    std::vector<te::Operation> ops;
    for (const te::Tensor& t : outs) ops.push_back(t.op());
    int64_t total = 0;
    for (const te::Operation& op : te::post_dfs_order(ops)) {
      if (op->kind != te::OpKind::kCompute) continue;
      for (const ir::Expr& body : static_cast<const te::ComputeOpNode*>(op.get())->body) {
        ir::post_order_visit(body, [&](const ir::IRNode* node) {
          int64_t w = 0;
          switch (node->kind) {
            case ir::NodeKind::Call:
              w = kCallCost;
              break;
            case ir::NodeKind::Add:
            case ir::NodeKind::Sub:
            case ir::NodeKind::Mul:
            case ir::NodeKind::Div:
            case ir::NodeKind::Min:
            case ir::NodeKind::Max:
            case ir::NodeKind::Select:
            case ir::NodeKind::Cast:
              w = 1;
              break;
            default:
              return;
          }
          if (static_cast<const ir::BaseExprNode*>(node)->dtype.is_float()) total += w;
        });
      }
    }
    return c = total;
  }

  const Graph& g_;
  const int max_;
  const int n_;
  std::vector<std::vector<int>> consumers_;  ///< distinct consumer nodes, in order
  std::vector<OpPattern> pattern_;
  std::vector<bool> is_result_;
  std::vector<int> ipdom_, depth_;
  std::vector<int> parent_;                ///< union-find over nodes
  std::vector<std::vector<int>> members_;  ///< a group's sorted nodes, at its root
  std::vector<int64_t> cost_;              ///< cost(i), -1 until computed
  std::vector<int> mark_, outside_;        ///< scratch marks, valid when equal to stamp_
  int stamp_ = 0;
};

}  // namespace

std::vector<std::vector<int>> fuse_ops(const Graph& g, int max_group_size,
                                       const std::set<int>& alone) {
  KILN_ICHECK(max_group_size >= 1) << "fuse_ops: max_group_size must be positive";
  return Fuser(g, max_group_size, alone).run();
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
