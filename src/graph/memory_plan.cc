// Static memory planning by lifetimes (the graph executor's storage_id). One forward walk over
// the nodes in topological order with a reference count per entry (its number of uses as an
// input). At each op node, every output first gets a storage: a head (graph output) a new one
// of its own; otherwise a free storage of the same dtype — the smallest whose size fits, else
// the largest, which grows to the new size — or a new one when none is free. Only then are the
// node's inputs whose count drops to zero, and its outputs that nobody reads, released to the
// free list (so an output never aliases one of its node's inputs). Argument entries (inputs
// and params) and heads are never released, so their storage is never shared.
//
// Views (plan_views): a concat whose inputs can be written where the concat's output would hold
// them becomes a view. Its output and its inputs (recursively, for chained concats) form one
// group in the storage of the group's root at fixed byte offsets; the group is planned as one
// value, live from its first producer to the last use of any member. Regions of different
// inputs are disjoint and a view always follows every input it covers, so no kernel writes
// bytes it also reads.

#include "kiln/graph/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "kiln/graph/op_registry.h"
#include "kiln/runtime/ndarray.h"
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

ViewPlan plan_views(const Graph& g, const std::vector<std::vector<int>>& groups) {
  ViewPlan v;
  const OpRegistry& reg = OpRegistry::global();
  const std::set<Entry> heads(g.outputs().begin(), g.outputs().end());
  std::vector<int> group_of(static_cast<size_t>(g.num_nodes()), -1);
  for (size_t k = 0; k < groups.size(); ++k)
    for (int i : groups[k]) group_of[static_cast<size_t>(i)] = static_cast<int>(k);
  auto fused_with_producer = [&](int i) {
    const int grp = group_of[static_cast<size_t>(i)];
    if (grp < 0) return false;
    for (const Entry& e : g.node(i).inputs)
      if (group_of[static_cast<size_t>(e.node)] == grp) return true;
    return false;
  };
  for (int i = g.num_nodes() - 1; i >= 0; --i) {
    const Node& n = g.node(i);
    if (!n.is_op() || n.num_outputs() != 1 || fused_with_producer(i)) continue;
    const OpDef* def = reg.find(n.op);
    if (!def || !def->in_place || def->bounded) continue;
    std::vector<TensorType> in;
    for (const Entry& e : n.inputs) in.push_back(g.type_of(e));
    std::optional<std::vector<size_t>> offsets =
        def->in_place(in, def->normalize_attrs(n.attrs, ""));
    if (!offsets || offsets->size() != n.inputs.size()) continue;
    const Entry out{i, 0};
    auto placed = v.slots.find(out);
    Slot base = placed != v.slots.end() ? placed->second : Slot{out, 0};
    std::vector<std::pair<Entry, Slot>> place;
    if (placed == v.slots.end() && !heads.count(out)) {
      // An input already placed by a later concat places this one in the same storage
      // (DenseNet: concat(x0..xk) inside concat(x0..xk+1), which does not read it).
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        auto f = v.slots.find(n.inputs[k]);
        if (f == v.slots.end() || f->second.offset < (*offsets)[k]) continue;
        Slot at{f->second.root, f->second.offset - (*offsets)[k]};
        if (at.offset + type_bytes(n.outputs[0]) <= type_bytes(g.type_of(at.root))) {
          base = at;
          place.emplace_back(out, at);
        }
        break;
      }
    }
    std::set<Entry> seen;
    bool ok = true;
    for (size_t k = 0; k < n.inputs.size() && ok; ++k) {
      const Entry& e = n.inputs[k];
      const Node& p = g.node(e.node);
      const OpDef* pdef = p.is_op() ? reg.find(p.op) : nullptr;
      const Slot want{base.root, base.offset + (*offsets)[k]};
      auto f = v.slots.find(e);
      ok = seen.insert(e).second && pdef && !pdef->bounded && !heads.count(e) &&
           want.offset % runtime::kArrayAlignment == 0 && (f == v.slots.end() || f->second == want);
      place.emplace_back(e, want);
    }
    if (!ok) continue;
    v.nodes.insert(i);
    for (const auto& [e, slot] : place) v.slots[e] = slot;
  }
  return v;
}

MemoryPlan plan_memory(const std::vector<PlanNode>& nodes, const std::vector<Entry>& heads,
                       const std::map<Entry, Slot>& slots) {
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
  auto type_of = [&](Entry e) -> const TensorType& {
    return nodes[static_cast<size_t>(e.node)].outputs[static_cast<size_t>(e.index)];
  };
  const size_t n_entries = static_cast<size_t>(num_entries);
  std::vector<const TensorType*> entry_type;
  for (const PlanNode& n : nodes)
    for (const TensorType& t : n.outputs) entry_type.push_back(&t);
  // Each entry's group (the entry id of its root; itself when it has no slot), and the group's
  // outstanding uses and members not yet produced: released when both reach zero.
  std::vector<int> group(n_entries);
  std::vector<size_t> offset(n_entries, 0);
  for (size_t e = 0; e < n_entries; ++e) group[e] = static_cast<int>(e);
  for (const auto& [e, slot] : slots) {
    const size_t x = static_cast<size_t>(eid(e));
    KILN_ICHECK(!slots.count(slot.root)) << "plan_memory: the root of a slot has a slot itself";
    KILN_ICHECK(slot.offset + type_bytes(type_of(e)) <= type_bytes(type_of(slot.root)))
        << "plan_memory: entry " << e.node << "." << e.index << " does not fit its slot";
    group[x] = eid(slot.root);
    offset[x] = slot.offset;
  }
  std::vector<int> uses(n_entries, 0), unproduced(n_entries, 0);
  std::vector<bool> pinned(n_entries, false);  // per group: never released
  for (size_t e = 0; e < n_entries; ++e) ++unproduced[static_cast<size_t>(group[e])];
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const Entry& e : nodes[i].inputs) {
      KILN_ICHECK(static_cast<size_t>(e.node) < i)
          << "plan_memory: node " << i << " reads a later node " << e.node;
      ++uses[static_cast<size_t>(group[static_cast<size_t>(eid(e))])];
    }
    if (nodes[i].is_arg) {
      for (size_t k = 0; k < nodes[i].outputs.size(); ++k) {
        const int e = row[i] + static_cast<int>(k);
        KILN_ICHECK(group[static_cast<size_t>(e)] == e) << "plan_memory: an argument is a view";
        pinned[static_cast<size_t>(e)] = true;
      }
    }
  }
  for (const Entry& e : heads)
    pinned[static_cast<size_t>(group[static_cast<size_t>(eid(e))])] = true;

  MemoryPlan plan;
  plan.storage_id.assign(n_entries, -1);
  plan.storage_offset = offset;
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
  std::vector<int> group_storage(n_entries, -1);
  auto release_if_done = [&](size_t grp) {
    if (uses[grp] == 0 && unproduced[grp] == 0 && !pinned[grp])
      free_list.push_back(group_storage[grp]);
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    const PlanNode& n = nodes[i];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const size_t e = static_cast<size_t>(row[i]) + k;
      const size_t grp = static_cast<size_t>(group[e]);
      const TensorType& t = n.outputs[k];
      KILN_ICHECK(t.known()) << "plan_memory: node " << i << " output " << k << " has no type";
      plan.naive_bytes += type_bytes(t);
      if (group_storage[grp] < 0) {
        // The group's size is its root's (every slot lies inside it).
        const TensorType& rt = *entry_type[grp];
        const size_t bytes = type_bytes(rt);
        const DataType dt = rt.dtype;
        int s = pinned[grp] ? -1 : take_free(dt, bytes);
        if (s < 0) s = new_storage(dt, bytes);
        group_storage[grp] = s;
      }
      plan.storage_id[e] = group_storage[grp];
      --unproduced[grp];
    }
    for (const Entry& in : n.inputs) {
      const size_t grp = static_cast<size_t>(group[static_cast<size_t>(eid(in))]);
      --uses[grp];
      release_if_done(grp);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k)
      release_if_done(static_cast<size_t>(group[static_cast<size_t>(row[i]) + k]));
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
