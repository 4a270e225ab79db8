// Common-subexpression elimination by value numbering: walking the nodes forward, an op node
// is keyed by (op, mapped input entries, attribute text); the first node with a key is kept
// and later nodes with the same key are mapped onto it. Since inputs are mapped before the
// key is formed, whole duplicated chains merge in one pass. Constants merge by value (type,
// shape and bytes): constant folding leaves one copy of a computed weight per use (an LSTM's
// recurrent weights transposed at each of 35 steps), and layout alteration one packed copy per
// node; merged, they are stored once in the module's parameters. A constant is keyed by its
// type, shape and a fingerprint of at most 64 words sampled across its bytes (hashing all of
// them cost a third of a second per run on VGG-16's 550 MB); equal keys are compared in full.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "kiln/graph/transform.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {
/// A hash of the size and of up to 64 eight-byte words evenly spaced over `bytes` (the last
/// word ends at the last byte).
size_t sampled_fingerprint(std::string_view bytes) {
  size_t h = std::hash<size_t>{}(bytes.size());
  auto mix = [&](uint64_t w) {
    h ^= std::hash<uint64_t>{}(w) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  if (bytes.size() < 8) {
    for (char c : bytes) mix(static_cast<unsigned char>(c));
    return h;
  }
  const size_t span = bytes.size() - 8, n = std::min<size_t>(64, bytes.size() / 8);
  for (size_t i = 0; i < n; ++i) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + (n == 1 ? 0 : span * i / (n - 1)), 8);
    mix(w);
  }
  return h;
}
}  // namespace

Graph common_subexpression_elimination(const Graph& g) {
  Graph out;
  detail::EntryMap map(g);
  std::unordered_map<std::string, int> seen;
  std::unordered_multimap<std::string, int> constants;
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
    if (n.is_constant() && n.value.defined()) {
      const runtime::NDArray& v = n.value;
      std::string_view bytes(static_cast<const char*>(v.data()), v.nbytes());
      std::string key = "const " + v.dtype().str() + " " + runtime::shape_str(v.shape()) + " " +
                        std::to_string(sampled_fingerprint(bytes));
      auto [lo, hi] = constants.equal_range(key);
      bool merged = false;
      for (auto it = lo; it != hi && !merged; ++it) {
        const runtime::NDArray& w = out.node(it->second).value;
        if (w.nbytes() == v.nbytes() && std::memcmp(w.data(), v.data(), v.nbytes()) == 0) {
          map.set_node(i, it->second, 1);
          merged = true;
        }
      }
      if (merged) continue;
      int id = out.add_node(std::move(n));
      constants.emplace(std::move(key), id);
      map.set_node(i, id, 1);
      continue;
    }
    int outs = n.num_outputs();
    map.set_node(i, out.add_node(std::move(n)), outs);
  }
  out.set_outputs(map.outputs(g));
  return out;
}

}  // namespace kiln::graph
