/// \file memory_plan.h
/// \brief Static memory planning (DESIGN.md: memory is planned statically): the graph executor's
/// storage is assigned at build time by lifetime analysis, so tensors whose lifetimes do not
/// overlap share a buffer. build_module plans the executable graph (build_module.h,
/// CompiledModule::memory); `kiln inspect` reports the plan's peak.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::graph {

/// One node of the executable graph, as the memory planner sees it.
struct PlanNode {
  /// An argument (graph input or param): its outputs get their own, never shared storage.
  bool is_arg = false;
  /// The entries the node reads.
  std::vector<Entry> inputs;
  /// The node's outputs.
  std::vector<TensorType> outputs;
};

/// Where a view's entry lives: `offset` bytes into the storage of `root`, an entry that is
/// itself no one's slot.
struct Slot {
  Entry root;
  size_t offset = 0;
  bool operator==(const Slot& o) const { return root == o.root && offset == o.offset; }
};

/// Concats and reshapes computed by placement instead of a kernel (plan_views).
struct ViewPlan {
  std::set<int> nodes;          ///< op nodes whose output is a view of their inputs
  std::map<Entry, Slot> slots;  ///< each entry placed inside another's storage
};

/// Chooses the ops whose output can be a view (OpDef::in_place: a concat along an axis with
/// unit extents outside it, a reshape) and places their inputs: the producer of each input writes
/// into its slot of the output's storage, and the op runs no kernel. Nested and chained concats
/// (DenseNet's concat(x0..xk) feeding concat(x0..xk+1)) share one storage when every shared
/// input has the same place in each. A concat stays a kernel (a copy) when an input is not an
/// op's output (a graph input, a constant), is a graph output, has a data-dependent shape, is
/// given twice, would need two places, or would start at a byte offset that is not a multiple
/// of runtime::kArrayAlignment (kernels assume aligned operands). Nodes are chosen from the
/// last to the first, so the largest concat of a chain is the storage's root.
///
/// `groups`, when given, is the fusion partition of `g` without views (fuse_ops): a concat
/// that fusion joined with the producer of one of its inputs (a slice or an element-wise op
/// inlined into the concat's kernel, as ShuffleNet's split → concat → shuffle) stays a copy,
/// since a view would write that producer's result out only to read it again.
ViewPlan plan_views(const Graph& g, const std::vector<std::vector<int>>& groups = {});

/// A static memory plan: a storage id per entry (entries numbered node by node, output by
/// output, as graph.json's node_row_ptr numbers them) and the size of every storage.
struct MemoryPlan {
  std::vector<int> storage_id;         ///< per entry
  std::vector<size_t> storage_offset;  ///< per entry: bytes into its storage (0 but for views)
  std::vector<size_t> storage_bytes;   ///< per storage id: the largest entry it holds
  size_t total_bytes = 0;              ///< sum of storage_bytes (what the executor allocates)
  size_t naive_bytes = 0;              ///< sum of all entries' bytes (no sharing at all)
  int num_storages() const { return static_cast<int>(storage_bytes.size()); }
  /// "memory plan: 5 storages, 1.2 MiB (no sharing: 3.4 MiB)".
  std::string summary() const;
};

/// Lifetime-based planning over nodes in topological order. An op output takes a released
/// storage of the same dtype (the smallest that fits, else the largest, grown to the new
/// size) or a new one; an entry's storage is released after its last consumer has run (an
/// output nobody reads, right after its producer). Argument entries and the `heads` (graph
/// outputs) get storages of their own that are never shared. An op's output never shares
/// with one of its own inputs (kernels are not in place).
///
/// `slots` places entries inside the storage of a root entry (plan_views, in the numbering of
/// `nodes`): the root and its slotted entries share one storage, the root's size, which is
/// taken when the first of them is produced and released after the last use of any of them.
MemoryPlan plan_memory(const std::vector<PlanNode>& nodes, const std::vector<Entry>& heads,
                       const std::map<Entry, Slot>& slots = {});

/// The plan of a typed graph executed one op node per kernel (inputs and constants are
/// arguments, the results are the heads).
MemoryPlan plan_memory(const Graph& g);

/// Bytes of a tensor of this type.
size_t type_bytes(const TensorType& t);

}  // namespace kiln::graph
