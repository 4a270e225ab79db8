/// \file memory_plan.h
/// \brief Static memory planning (DESIGN.md: memory is planned statically): the graph executor's
/// storage is assigned at build time by lifetime analysis, so tensors whose lifetimes do not
/// overlap share a buffer. build_module plans the executable graph (build_module.h,
/// CompiledModule::memory); `kiln inspect` reports the plan's peak.
#pragma once

#include <cstddef>
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

/// A static memory plan: a storage id per entry (entries numbered node by node, output by
/// output, as graph.json's node_row_ptr numbers them) and the size of every storage.
struct MemoryPlan {
  std::vector<int> storage_id;        ///< per entry
  std::vector<size_t> storage_bytes;  ///< per storage id: the largest entry it holds
  size_t total_bytes = 0;             ///< sum of storage_bytes (what the executor allocates)
  size_t naive_bytes = 0;             ///< sum of all entries' bytes (no sharing at all)
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
MemoryPlan plan_memory(const std::vector<PlanNode>& nodes, const std::vector<Entry>& heads);

/// The plan of a typed graph executed one op node per kernel (inputs and constants are
/// arguments, the results are the heads).
MemoryPlan plan_memory(const Graph& g);

/// Bytes of a tensor of this type.
size_t type_bytes(const TensorType& t);

}  // namespace kiln::graph
