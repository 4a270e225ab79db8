// Static memory planning by lifetimes (the graph executor's storage_id). One forward walk over
// the nodes in topological order with a reference count per entry (its number of uses as an
// input). At each op node, every output first gets a storage: a head (graph output) a new one
// of its own; otherwise a free storage of the same dtype — the smallest whose size fits, else
// the largest, which grows to the new size — or a new one when none is free. Only then are the
// node's inputs whose count drops to zero, and its outputs that nobody reads, released to the
// free list (so an output never aliases one of its node's inputs). Argument entries (inputs
// and params) and heads are never released, so their storage is never shared.

#include "kiln/graph/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "kiln/support/error.h"

namespace kiln::graph {

size_t type_bytes(const TensorType& t) {
  return static_cast<size_t>(t.numel()) * static_cast<size_t>(t.dtype.bytes());
}

namespace {

std::string bytes_str(size_t b) {
  char buf[64];
  if (b >= (size_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1 << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(b) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%zu B", b);
  }
  return buf;
}

}  // namespace

std::string MemoryPlan::summary() const {
  return "memory plan: " + std::to_string(num_storages()) + " storages, " + bytes_str(total_bytes) +
         " (no sharing: " + bytes_str(naive_bytes) + ")";
}

MemoryPlan plan_memory(const std::vector<PlanNode>& nodes, const std::vector<Entry>& heads) {
  // Entry numbering (node_row_ptr).
  std::vector<int> row(nodes.size() + 1, 0);
  for (size_t i = 0; i < nodes.size(); ++i)
    row[i + 1] = row[i] + static_cast<int>(nodes[i].outputs.size());
  const int num_entries = row.back();
  auto eid = [&](Entry e) {
    KILN_ICHECK(e.node >= 0 && static_cast<size_t>(e.node) < nodes.size() && e.index >= 0 &&
                static_cast<size_t>(e.index) < nodes[static_cast<size_t>(e.node)].outputs.size())
        << "plan_memory: invalid entry " << e.node << "." << e.index;
    return row[static_cast<size_t>(e.node)] + e.index;
  };
  std::vector<int> uses(static_cast<size_t>(num_entries), 0);
  std::vector<bool> pinned(static_cast<size_t>(num_entries), false);  // never released
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const Entry& e : nodes[i].inputs) {
      KILN_ICHECK(static_cast<size_t>(e.node) < i)
          << "plan_memory: node " << i << " reads a later node " << e.node;
      ++uses[static_cast<size_t>(eid(e))];
    }
  }
  for (const Entry& e : heads) pinned[static_cast<size_t>(eid(e))] = true;

  MemoryPlan plan;
  plan.storage_id.assign(static_cast<size_t>(num_entries), -1);
  std::vector<DataType> storage_dtype;
  std::vector<int> free_list;  // storage ids available for reuse
  auto new_storage = [&](DataType dt, size_t bytes) {
    plan.storage_bytes.push_back(bytes);
    storage_dtype.push_back(dt);
    return plan.num_storages() - 1;
  };
  auto take_free = [&](DataType dt, size_t bytes) -> int {
    int best = -1, largest = -1;
    for (int s : free_list) {
      if (storage_dtype[static_cast<size_t>(s)] != dt) continue;
      size_t sz = plan.storage_bytes[static_cast<size_t>(s)];
      if (sz >= bytes && (best < 0 || sz < plan.storage_bytes[static_cast<size_t>(best)])) best = s;
      if (largest < 0 || sz > plan.storage_bytes[static_cast<size_t>(largest)]) largest = s;
    }
    int s = best >= 0 ? best : largest;
    if (s < 0) return -1;
    free_list.erase(std::find(free_list.begin(), free_list.end(), s));
    size_t& sz = plan.storage_bytes[static_cast<size_t>(s)];
    sz = std::max(sz, bytes);
    return s;
  };
  auto release = [&](int entry) {
    if (pinned[static_cast<size_t>(entry)]) return;
    free_list.push_back(plan.storage_id[static_cast<size_t>(entry)]);
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    const PlanNode& n = nodes[i];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      int e = row[i] + static_cast<int>(k);
      const TensorType& t = n.outputs[k];
      KILN_ICHECK(t.known()) << "plan_memory: node " << i << " output " << k << " has no type";
      size_t bytes = type_bytes(t);
      plan.naive_bytes += bytes;
      if (n.is_arg) pinned[static_cast<size_t>(e)] = true;
      int s = pinned[static_cast<size_t>(e)] ? -1 : take_free(t.dtype, bytes);
      if (s < 0) s = new_storage(t.dtype, bytes);
      plan.storage_id[static_cast<size_t>(e)] = s;
    }
    for (const Entry& in : n.inputs) {
      int e = eid(in);
      if (--uses[static_cast<size_t>(e)] == 0) release(e);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      int e = row[i] + static_cast<int>(k);
      if (uses[static_cast<size_t>(e)] == 0) release(e);
    }
  }
  for (size_t b : plan.storage_bytes) plan.total_bytes += b;
  return plan;
}

MemoryPlan plan_memory(const Graph& g) {
  std::vector<PlanNode> nodes;
  nodes.reserve(static_cast<size_t>(g.num_nodes()));
  for (const Node& n : g.nodes()) nodes.push_back(PlanNode{!n.is_op(), n.inputs, n.outputs});
  return plan_memory(nodes, g.outputs());
}

}  // namespace kiln::graph
