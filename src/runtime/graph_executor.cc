// The graph executor. Loading parses graph.json (nlohmann-json) into nodes and entries and
// validates everything up front, so that run() cannot fail on a malformed graph: nodes in
// topological order (every input refers to an earlier node's existing output), node_row_ptr
// consistent with each node's outputs, one shape / dtype / storage id per entry, argument
// nodes exactly the "null" nodes, and argument (input and param) storage never shared with
// another entry, so inputs and params survive run() and can be reused across runs. Every error
// names the graph and the node or entry at fault. It then allocates one buffer per storage id
// sized to the largest entry using it, builds a KilnArray view per entry over its buffer, copies
// the params in after checking their shape and dtype, looks up each op node's function once and
// pre-packs its arguments (input views then output views). run() is a loop of packed calls.
//
// Bounded (data-dependent) outputs ("bounded" in graph.json): such an entry keeps its upper-
// bound shape in `shape` (what its kernel is called with) and its current shape in `actual`;
// after its node ran, the extent entry's int64 value (checked against the bound) sets the
// actual extent of the axis, and the view, get_output and copies use the actual shape. The
// kernel wrote the tensor densely with that shape at the start of the storage, so the view is
// simply the same storage with fewer elements.
#include "kiln/runtime/graph_executor.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kiln/runtime/device_api.h"
#include "kiln/runtime/params.h"
#include "kiln/support/error.h"
#include "kiln/support/file.h"

namespace kiln::runtime {

using json = nlohmann::json;

namespace {

struct Entry {
  std::vector<int64_t> shape;   ///< the static shape (the upper bound of a bounded entry)
  std::vector<int64_t> actual;  ///< the current shape (== shape unless bounded)
  DataType dtype;
  int64_t storage_id = 0;
  size_t offset = 0;  ///< bytes into its storage (attrs.storage_offset; views)
  size_t nbytes = 0;
  int node = 0;           ///< the node producing it
  int bounded_axis = -1;  ///< the data-dependent axis of a bounded entry, else -1
  int extent_eid = -1;    ///< the entry holding that axis' actual extent
  KilnArray view{};
};

struct Node {
  std::string op;  ///< "null", "kiln_op" or "kiln_view"
  std::string name;
  std::vector<std::pair<int, int>> inputs;  ///< (node, output index)
  std::string func_name;
};

struct OpCall {
  int node = 0;
  PackedFunc fn;
  std::vector<KilnValue> args;
  std::vector<int32_t> codes;
  std::vector<int> bounded;  ///< its bounded output entries
};

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s.empty() ? "(none)" : s;
}

/// Builds errors that name the graph (and the node / entry) at fault.
struct Ctx {
  std::string source;
  [[noreturn]] void fail(const std::string& what) const {
    KILN_ERROR << "graph '" << source << "': " << what;
  }
  const json& field(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object() || !obj.contains(key)) fail(where + "missing \"" + key + "\"");
    return obj.at(key);
  }
  const json& array(const json& obj, const char* key, const std::string& where) const {
    const json& v = field(obj, key, where);
    if (!v.is_array()) fail(where + "\"" + key + "\" is not a list");
    return v;
  }
  /// An integer, or a string holding one (TVM writes "num_inputs": "2").
  int64_t integer(const json& v, const std::string& what) const {
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      size_t used = 0;
      int64_t x = 0;
      try {
        x = std::stoll(s, &used);
      } catch (...) {
        used = 0;
      }
      if (used == s.size() && !s.empty()) return x;
    }
    fail(what + " is not an integer: " + v.dump());
  }
  std::string string(const json& v, const std::string& what) const {
    if (!v.is_string()) fail(what + " is not a string: " + v.dump());
    return v.get<std::string>();
  }
};

std::string node_where(int i, const std::string& name) {
  return "node " + std::to_string(i) + " ('" + name + "'): ";
}

}  // namespace

struct GraphExecutor::Impl {
  std::string source;
  Module lib;
  std::vector<Node> nodes;
  std::vector<int64_t> row_ptr;
  std::vector<Entry> entries;
  std::vector<NDArray> storage;  ///< one uint8 buffer per storage id (undefined when unused)
  std::vector<OpCall> ops;
  std::vector<std::string> input_names, output_names, param_names;
  std::vector<int> input_eids, output_eids;
  std::vector<bool> input_set;
  size_t storage_bytes = 0;
  /// Where the storage lives and the kernels run: graph.json's "device" ("cpu" when absent).
  Device device = Device::cpu();

  void parse(const std::string& text);
  void plan_and_bind(const std::map<std::string, NDArray>& params);

  int input_index(const std::string& name, const char* what) const {
    auto it = std::find(input_names.begin(), input_names.end(), name);
    KILN_USER_CHECK(it != input_names.end()) << what << ": unknown input '" << name
                                             << "'; the graph's inputs are: " << join(input_names);
    return static_cast<int>(it - input_names.begin());
  }
  NDArray copy_entry(int eid) const {
    const Entry& e = entries[eid];
    NDArray out = NDArray::empty(e.actual, e.dtype);
    size_t bytes = static_cast<size_t>(out.numel()) * static_cast<size_t>(e.dtype.bytes());
    device_copy(out.data(), Device::cpu(), e.view.data, device, bytes);
    return out;
  }
};

void GraphExecutor::Impl::parse(const std::string& text) {
  Ctx cx{source};
  json g;
  try {
    g = json::parse(text);
  } catch (const json::exception& e) {
    cx.fail(std::string("invalid JSON: ") + e.what());
  } catch (const std::bad_alloc&) {
    cx.fail("out of memory parsing " + std::to_string(text.size()) + " bytes of JSON");
  }
  if (!g.is_object()) cx.fail("the top level is not a JSON object");
  if (g.contains("version") && cx.integer(g["version"], "\"version\"") != 1) {
    cx.fail("unsupported version " + g["version"].dump() + " (this runtime reads version 1)");
  }

  // Nodes.
  const json& jnodes = cx.array(g, "nodes", "");
  const json& jrow = cx.array(g, "node_row_ptr", "");
  if (jrow.size() != jnodes.size() + 1) {
    cx.fail("\"node_row_ptr\" has " + std::to_string(jrow.size()) + " elements, expected " +
            std::to_string(jnodes.size() + 1) + " (number of nodes + 1)");
  }
  for (size_t i = 0; i < jrow.size(); ++i) {
    row_ptr.push_back(cx.integer(jrow[i], "node_row_ptr[" + std::to_string(i) + "]"));
    if ((i == 0 && row_ptr[0] != 0) || (i > 0 && row_ptr[i] < row_ptr[i - 1])) {
      cx.fail("\"node_row_ptr\" must start at 0 and not decrease (element " + std::to_string(i) +
              " is " + std::to_string(row_ptr[i]) + ")");
    }
  }
  auto num_outputs_of = [&](int n) { return static_cast<int>(row_ptr[n + 1] - row_ptr[n]); };
  for (size_t i = 0; i < jnodes.size(); ++i) {
    const json& jn = jnodes[i];
    int ni = static_cast<int>(i);
    Node n;
    std::string where = "node " + std::to_string(i) + ": ";
    if (!jn.is_object()) cx.fail(where + "not a JSON object");
    n.name = cx.string(cx.field(jn, "name", where), where + "\"name\"");
    where = node_where(ni, n.name);
    n.op = cx.string(cx.field(jn, "op", where), where + "\"op\"");
    if (n.op != "null" && n.op != "kiln_op" && n.op != "kiln_view") {
      cx.fail(where + "unknown op \"" + n.op +
              "\" (expected \"null\", \"kiln_op\" or \"kiln_view\")");
    }
    if (jn.contains("inputs")) {
      const json& ins = cx.array(jn, "inputs", where);
      for (size_t k = 0; k < ins.size(); ++k) {
        std::string w = where + "input " + std::to_string(k) + " ";
        if (!ins[k].is_array() || ins[k].size() < 2 || ins[k].size() > 3) {
          cx.fail(w + ins[k].dump() + " is not [node, output_index]");
        }
        int64_t src = cx.integer(ins[k][0], w + "node");
        int64_t idx = cx.integer(ins[k][1], w + "output index");
        if (src < 0 || src >= ni) {
          cx.fail(w + ins[k].dump() + " does not refer to an earlier node (nodes must be in " +
                  "topological order)");
        }
        if (idx < 0 || idx >= num_outputs_of(static_cast<int>(src))) {
          cx.fail(w + ins[k].dump() + ": node " + std::to_string(src) + " ('" + nodes[src].name +
                  "') has " + std::to_string(num_outputs_of(src)) + " output(s)");
        }
        n.inputs.emplace_back(static_cast<int>(src), static_cast<int>(idx));
      }
    }
    if (n.op == "null") {
      if (!n.inputs.empty()) cx.fail(where + "a \"null\" node has no inputs");
      if (num_outputs_of(ni) != 1) {
        cx.fail(where + "a \"null\" node has 1 output, node_row_ptr gives it " +
                std::to_string(num_outputs_of(ni)));
      }
    } else if (n.op == "kiln_view") {
      // Its outputs are placed over its inputs' storage (attrs.storage_offset): nothing runs.
      if (n.inputs.empty() || num_outputs_of(ni) != 1)
        cx.fail(where + "a \"kiln_view\" node has inputs and 1 output");
    } else {
      const json& attrs = cx.field(jn, "attrs", where);
      n.func_name =
          cx.string(cx.field(attrs, "func_name", where + "attrs: "), where + "attrs.func_name");
      if (n.func_name.empty()) cx.fail(where + "attrs.func_name is empty");
      int64_t nin =
          cx.integer(cx.field(attrs, "num_inputs", where + "attrs: "), where + "attrs.num_inputs");
      int64_t nout = cx.integer(cx.field(attrs, "num_outputs", where + "attrs: "),
                                where + "attrs.num_outputs");
      if (nin != static_cast<int64_t>(n.inputs.size())) {
        cx.fail(where + "attrs.num_inputs is " + std::to_string(nin) + " but the node has " +
                std::to_string(n.inputs.size()) + " inputs");
      }
      if (nout < 1 || nout != num_outputs_of(ni)) {
        cx.fail(where + "attrs.num_outputs is " + std::to_string(nout) +
                " but node_row_ptr gives it " + std::to_string(num_outputs_of(ni)) + " output(s)");
      }
    }
    nodes.push_back(std::move(n));
  }

  // Per-entry attributes.
  size_t num_entries = static_cast<size_t>(row_ptr.back());
  const json& attrs = cx.field(g, "attrs", "");
  const json& jshape = cx.array(attrs, "shape", "attrs: ");
  const json& jdtype = cx.array(attrs, "dtype", "attrs: ");
  const json& jsid = cx.array(attrs, "storage_id", "attrs: ");
  for (auto [key, arr] : {std::pair<const char*, const json*>{"shape", &jshape},
                          {"dtype", &jdtype},
                          {"storage_id", &jsid}}) {
    if (arr->size() != num_entries) {
      cx.fail(std::string("attrs.") + key + " has " + std::to_string(arr->size()) +
              " elements, expected one per entry: " + std::to_string(num_entries));
    }
  }
  entries.resize(num_entries);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int64_t eid = row_ptr[n]; eid < row_ptr[n + 1]; ++eid) {
      Entry& e = entries[eid];
      e.node = static_cast<int>(n);
      std::string where = "entry " + std::to_string(eid) + " (node " + std::to_string(n) + " '" +
                          nodes[n].name + "' output " + std::to_string(eid - row_ptr[n]) + "): ";
      const json& s = jshape[eid];
      if (!s.is_array()) cx.fail(where + "shape " + s.dump() + " is not a list");
      for (const json& x : s) {
        int64_t ext = cx.integer(x, where + "shape extent");
        if (ext < 0) cx.fail(where + "negative extent in shape " + s.dump());
        e.shape.push_back(ext);
      }
      std::string dt = cx.string(jdtype[eid], where + "dtype");
      try {
        e.dtype = DataType::parse(dt);
      } catch (const Error& err) {
        cx.fail(where + "bad dtype '" + dt + "': " + err.what());
      }
      if (e.dtype.is_void() || e.dtype.is_handle()) cx.fail(where + "bad dtype '" + dt + "'");
      e.storage_id = cx.integer(jsid[eid], where + "storage_id");
      if (e.storage_id < 0 || e.storage_id >= static_cast<int64_t>(num_entries)) {
        cx.fail(where + "storage_id " + std::to_string(e.storage_id) + " out of range [0, " +
                std::to_string(num_entries) + ")");
      }
      size_t bytes = static_cast<size_t>(e.dtype.bytes());
      for (int64_t ext : e.shape) {
        if (ext != 0 && bytes > SIZE_MAX / static_cast<size_t>(ext)) {
          cx.fail(where + "shape " + s.dump() + " is too large");
        }
        bytes *= static_cast<size_t>(ext);
      }
      e.nbytes = bytes;
    }
  }
  // Optional byte offsets into the storages (views); aligned as kernels assume their operands.
  if (attrs.contains("storage_offset")) {
    const json& joff = cx.array(attrs, "storage_offset", "attrs: ");
    if (joff.size() != num_entries) {
      cx.fail("attrs.storage_offset has " + std::to_string(joff.size()) +
              " elements, expected one per entry: " + std::to_string(num_entries));
    }
    for (size_t eid = 0; eid < num_entries; ++eid) {
      Entry& e = entries[eid];
      std::string where = "entry " + std::to_string(eid) + ": ";
      int64_t off = cx.integer(joff[eid], where + "storage_offset");
      if (off < 0 || static_cast<uint64_t>(off) % kArrayAlignment != 0 ||
          static_cast<uint64_t>(off) > SIZE_MAX - e.nbytes) {
        cx.fail(where + "storage_offset " + std::to_string(off) +
                " must be a non-negative multiple of " + std::to_string(kArrayAlignment) +
                " (kernels need aligned operands)");
      }
      e.offset = static_cast<size_t>(off);
    }
  }

  // Argument nodes and inputs.
  const json& jargs = cx.array(g, "arg_nodes", "");
  std::set<int> arg_set;
  for (const json& a : jargs) {
    int64_t n = cx.integer(a, "arg_nodes element");
    if (n < 0 || n >= static_cast<int64_t>(nodes.size())) {
      cx.fail("arg_nodes: " + std::to_string(n) + " is not a node index");
    }
    if (nodes[n].op != "null") {
      cx.fail("arg_nodes: " + node_where(static_cast<int>(n), nodes[n].name) +
              "is a \"kiln_op\" node, not an argument (\"null\") node");
    }
    arg_set.insert(static_cast<int>(n));
  }
  std::map<std::string, int> arg_by_name;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (nodes[n].op != "null") continue;
    std::string where = node_where(static_cast<int>(n), nodes[n].name);
    if (!arg_set.count(static_cast<int>(n)))
      cx.fail(where + "a \"null\" node missing from arg_nodes");
    if (!arg_by_name.emplace(nodes[n].name, static_cast<int>(n)).second) {
      cx.fail(where + "another argument node has the same name");
    }
  }
  if (g.contains("device")) {
    std::string dev = cx.string(g["device"], "\"device\"");
    if (dev == "cuda") {
      device = Device{kKilnCUDA, 0};
    } else if (dev == "opencl") {
      device = Device{kKilnOpenCL, 0};
    } else if (dev != "cpu") {
      cx.fail("\"device\" is '" + dev + "'; this runtime runs graphs on cpu, cuda or opencl");
    }
  }
  const json& jinputs = cx.array(g, "inputs", "");
  for (const json& x : jinputs) {
    std::string name = cx.string(x, "an element of \"inputs\"");
    auto it = arg_by_name.find(name);
    if (it == arg_by_name.end()) {
      cx.fail("\"inputs\" names '" + name + "', which is not an argument node");
    }
    if (std::find(input_names.begin(), input_names.end(), name) != input_names.end()) {
      cx.fail("\"inputs\" names '" + name + "' twice");
    }
    input_names.push_back(name);
    input_eids.push_back(static_cast<int>(row_ptr[it->second]));
  }
  for (const auto& [name, n] : arg_by_name) {
    if (std::find(input_names.begin(), input_names.end(), name) == input_names.end()) {
      param_names.push_back(name);
    }
  }

  // Outputs.
  const json& jheads = cx.array(g, "heads", "");
  if (jheads.empty()) cx.fail("\"heads\" is empty: the graph has no outputs");
  for (size_t k = 0; k < jheads.size(); ++k) {
    const json& h = jheads[k];
    std::string w = "heads[" + std::to_string(k) + "] ";
    if (!h.is_array() || h.size() < 2 || h.size() > 3)
      cx.fail(w + h.dump() + " is not [node, output_index]");
    int64_t n = cx.integer(h[0], w + "node");
    int64_t idx = cx.integer(h[1], w + "output index");
    if (n < 0 || n >= static_cast<int64_t>(nodes.size()) || idx < 0 ||
        idx >= num_outputs_of(static_cast<int>(n))) {
      cx.fail(w + h.dump() + " does not refer to a node output");
    }
    output_eids.push_back(static_cast<int>(row_ptr[n] + idx));
    output_names.push_back(num_outputs_of(static_cast<int>(n)) == 1
                               ? nodes[n].name
                               : nodes[n].name + ":" + std::to_string(idx));
  }
  if (g.contains("outputs")) {
    const json& jo = cx.array(g, "outputs", "");
    if (jo.size() != jheads.size()) {
      cx.fail("\"outputs\" has " + std::to_string(jo.size()) + " names for " +
              std::to_string(jheads.size()) + " heads");
    }
    for (size_t k = 0; k < jo.size(); ++k) {
      output_names[k] = cx.string(jo[k], "an element of \"outputs\"");
    }
  }

  // Bounded entries: {"entry", "axis", "extent_entry"}; the extent is an int64 output of the
  // same op node.
  if (g.contains("bounded")) {
    const json& jb = cx.array(g, "bounded", "");
    for (size_t k = 0; k < jb.size(); ++k) {
      std::string w = "bounded[" + std::to_string(k) + "] ";
      int64_t eid = cx.integer(cx.field(jb[k], "entry", w), w + "entry");
      int64_t axis = cx.integer(cx.field(jb[k], "axis", w), w + "axis");
      int64_t xid = cx.integer(cx.field(jb[k], "extent_entry", w), w + "extent_entry");
      if (eid < 0 || eid >= static_cast<int64_t>(num_entries) || xid < 0 ||
          xid >= static_cast<int64_t>(num_entries)) {
        cx.fail(w + "entry " + std::to_string(eid) + " or extent_entry " + std::to_string(xid) +
                " out of range [0, " + std::to_string(num_entries) + ")");
      }
      Entry& e = entries[eid];
      const Entry& x = entries[xid];
      if (nodes[e.node].op != "kiln_op" || x.node != e.node || xid == eid) {
        cx.fail(w + "entry " + std::to_string(eid) + " and its extent_entry " +
                std::to_string(xid) + " must be two outputs of the same kiln_op node");
      }
      if (axis < 0 || axis >= static_cast<int64_t>(e.shape.size())) {
        cx.fail(w + "axis " + std::to_string(axis) + " out of range for shape " +
                shape_str(e.shape));
      }
      if (x.dtype != DataType::Int(64) || x.nbytes < 8) {
        cx.fail(w + "extent_entry " + std::to_string(xid) + " must be int64 with an element, got " +
                x.dtype.str() + " " + shape_str(x.shape));
      }
      if (e.bounded_axis >= 0) cx.fail(w + "entry " + std::to_string(eid) + " is listed twice");
      e.bounded_axis = static_cast<int>(axis);
      e.extent_eid = static_cast<int>(xid);
    }
  }

  // Argument storage is exclusive: inputs and params must survive run().
  std::map<int64_t, int> users;
  for (const Entry& e : entries) ++users[e.storage_id];
  for (int n : arg_set) {
    const Entry& e = entries[row_ptr[n]];
    if (users[e.storage_id] > 1) {
      cx.fail(node_where(n, nodes[n].name) + "argument storage_id " + std::to_string(e.storage_id) +
              " is shared with another entry (input and param storage must not be reused)");
    }
  }
}

namespace {

/// The most storage a memory plan may ask for: KILN_MAX_MEMORY_MB when set (a deployment's cap;
/// the fuzz targets set one), else the machine's physical memory. A plan beyond it would be
/// refused by the allocator or die of the OOM killer while running.
size_t storage_limit_bytes() {
  if (const char* env = std::getenv("KILN_MAX_MEMORY_MB"); env && *env) {
    char* end = nullptr;
    unsigned long long mb = std::strtoull(env, &end, 10);  // NOLINT(runtime/int)
    if (*end == '\0' && mb > 0 && mb < (1ull << 40)) return static_cast<size_t>(mb) << 20;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);  // NOLINT
  if (pages > 0 && page > 0) return static_cast<size_t>(pages) * static_cast<size_t>(page);
  return std::numeric_limits<size_t>::max();
}

}  // namespace

void GraphExecutor::Impl::plan_and_bind(const std::map<std::string, NDArray>& params) {
  Ctx cx{source};
  // Storage: one buffer per used storage id, sized to its largest entry.
  std::vector<size_t> sizes;
  for (const Entry& e : entries) {
    if (static_cast<size_t>(e.storage_id) >= sizes.size()) sizes.resize(e.storage_id + 1, 0);
    sizes[e.storage_id] = std::max(sizes[e.storage_id], e.offset + e.nbytes);
  }
  std::vector<bool> used(sizes.size(), false);
  for (const Entry& e : entries) used[e.storage_id] = true;
  // The whole plan against the memory there is, before any of it is allocated.
  size_t total = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    if (used[s] && __builtin_add_overflow(total, sizes[s], &total))
      total = std::numeric_limits<size_t>::max();
  }
  const size_t limit = storage_limit_bytes();
  if (total > limit) {
    cx.fail("the memory plan needs " + std::to_string(total) + " bytes of storage, more than " +
            (std::getenv("KILN_MAX_MEMORY_MB") ? "KILN_MAX_MEMORY_MB allows ("
                                               : "this machine's memory (") +
            std::to_string(limit) + " bytes)");
  }
  storage.resize(sizes.size());
  for (size_t s = 0; s < sizes.size(); ++s) {
    if (!used[s]) continue;
    if (__builtin_add_overflow(storage_bytes, sizes[s], &storage_bytes) ||
        sizes[s] > static_cast<size_t>(std::numeric_limits<int64_t>::max())) {
      cx.fail("the memory plan's storage does not fit in 64 bits (storage " + std::to_string(s) +
              " has " + std::to_string(sizes[s]) + " bytes)");
    }
    try {
      storage[s] = NDArray::empty({static_cast<int64_t>(sizes[s])}, DataType::UInt(8), device);
    } catch (const Error& e) {
      cx.fail("storage " + std::to_string(s) + " (" + std::to_string(sizes[s]) + " bytes; " +
              std::to_string(storage_bytes) + " bytes in all so far): " + e.what());
    } catch (const std::bad_alloc&) {
      cx.fail("storage " + std::to_string(s) + ": out of memory allocating " +
              std::to_string(sizes[s]) + " bytes");
    }
  }
  for (Entry& e : entries) {
    e.actual = e.shape;
    e.view.data = static_cast<char*>(storage[e.storage_id].data()) + e.offset;
    e.view.device = device.to_c();
    e.view.ndim = static_cast<int32_t>(e.shape.size());
    e.view.dtype =
        KilnDataType{static_cast<uint8_t>(e.dtype.code()), static_cast<uint8_t>(e.dtype.bits()),
                     static_cast<uint16_t>(e.dtype.lanes())};
    e.view.shape = e.shape.data();
    e.view.strides = nullptr;
    e.view.byte_offset = 0;
  }

  // Params.
  for (const auto& [name, arr] : params) {
    if (std::find(param_names.begin(), param_names.end(), name) == param_names.end()) {
      cx.fail("params has '" + name +
              "', which is not a param of the graph (its params: " + join(param_names) + ")");
    }
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    const std::string& name = nodes[n].name;
    if (nodes[n].op != "null" ||
        std::find(param_names.begin(), param_names.end(), name) == param_names.end()) {
      continue;
    }
    const Entry& e = entries[row_ptr[n]];
    auto it = params.find(name);
    if (it == params.end()) {
      cx.fail(node_where(static_cast<int>(n), name) +
              "param missing from params (an argument node not listed in \"inputs\" is a param)");
    }
    const NDArray& p = it->second;
    if (p.dtype() != e.dtype || p.shape() != e.shape) {
      cx.fail(node_where(static_cast<int>(n), name) + "param is " + p.dtype().str() + " " +
              shape_str(p.shape()) + " in params, the graph expects " + e.dtype.str() + " " +
              shape_str(e.shape));
    }
    device_copy(e.view.data, device, p.data(), p.device(), e.nbytes);
  }

  // Functions, looked up once per name, and pre-packed arguments.
  std::map<std::string, PackedFunc> funcs;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    if (node.op != "kiln_op") continue;
    auto it = funcs.find(node.func_name);
    if (it == funcs.end()) {
      try {
        it = funcs.emplace(node.func_name, lib.get_function(node.func_name)).first;
      } catch (const Error& err) {
        cx.fail(node_where(static_cast<int>(n), node.name) + err.what());
      }
    }
    OpCall call;
    call.node = static_cast<int>(n);
    call.fn = it->second;
    auto push = [&](int eid) {
      KilnValue v;
      v.v_handle = &entries[eid].view;
      call.args.push_back(v);
      call.codes.push_back(kKilnArrayHandle);
    };
    for (auto [src, idx] : node.inputs) push(static_cast<int>(row_ptr[src] + idx));
    for (int64_t eid = row_ptr[n]; eid < row_ptr[n + 1]; ++eid) {
      push(static_cast<int>(eid));
      if (entries[eid].bounded_axis >= 0) call.bounded.push_back(static_cast<int>(eid));
    }
    ops.push_back(std::move(call));
  }
  input_set.assign(input_names.size(), false);
}

GraphExecutor GraphExecutor::create(const std::string& graph_json, const Module& lib,
                                    const std::map<std::string, NDArray>& params,
                                    const std::string& source) {
  KILN_USER_CHECK(lib.defined()) << "graph '" << source << "': the lib module is undefined";
  auto impl = std::make_shared<Impl>();
  impl->source = source;
  impl->lib = lib;
  impl->parse(graph_json);
  impl->plan_and_bind(params);
  GraphExecutor ex;
  ex.impl_ = std::move(impl);
  return ex;
}

GraphExecutor GraphExecutor::load(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec_dir;
  KILN_USER_CHECK(fs::is_directory(dir, ec_dir))
      << "module '" << dir << "': not a directory (a module directory holds graph.json, lib.so "
      << "and params.bin)";
  std::string graph_path = (fs::path(dir) / "graph.json").string();
  // Regular files only, bounded by their size (support/file.h): a FIFO named graph.json or a
  // link to /dev/zero is an error, not a hang.
  std::string text = support::read_file(graph_path, "graph '" + graph_path + "'");
  Module lib = Module::load((fs::path(dir) / "lib.so").string());
  std::string params_path = (fs::path(dir) / "params.bin").string();
  std::map<std::string, NDArray> params;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(params_path, ec))) params = load_params(params_path);
  return create(text, lib, params, graph_path);
}

const GraphExecutor::Impl& GraphExecutor::get(const char* what) const {
  KILN_USER_CHECK(impl_ != nullptr) << "GraphExecutor::" << what << ": the executor is undefined";
  return *impl_;
}

GraphExecutor::Impl& GraphExecutor::get(const char* what) {
  KILN_USER_CHECK(impl_ != nullptr) << "GraphExecutor::" << what << ": the executor is undefined";
  return *impl_;
}

void GraphExecutor::set_input(const std::string& name, const NDArray& value) {
  Impl& g = get("set_input");
  set_input(g.input_index(name, "set_input"), value);
}

void GraphExecutor::set_input(int index, const NDArray& value) {
  Impl& g = get("set_input");
  KILN_USER_CHECK(index >= 0 && index < static_cast<int>(g.input_names.size()))
      << "set_input: input index " << index << " out of range; the graph has "
      << g.input_names.size() << " input(s)";
  const std::string& name = g.input_names[index];
  KILN_USER_CHECK(value.defined()) << "set_input '" << name << "': the array is undefined";
  const Entry& e = g.entries[g.input_eids[index]];
  KILN_USER_CHECK(value.dtype() == e.dtype)
      << "set_input '" << name << "': dtype expected " << e.dtype << ", got " << value.dtype();
  KILN_USER_CHECK(value.shape() == e.shape)
      << "set_input '" << name << "': shape expected " << shape_str(e.shape) << ", got "
      << shape_str(value.shape());
  KILN_USER_CHECK(value.device() == Device::cpu() || value.device() == g.device)
      << "set_input '" << name << "': array is on " << value.device().str() << ", not cpu:0 or "
      << g.device.str();
  device_copy(e.view.data, g.device, value.data(), value.device(), e.nbytes);
  g.input_set[index] = true;
}

namespace {

void call_op(GraphExecutor::Impl& g, const OpCall& op);

}  // namespace

void GraphExecutor::run() {
  Impl& g = get("run");
  for (size_t i = 0; i < g.input_names.size(); ++i) {
    KILN_USER_CHECK(g.input_set[i])
        << "run: input '" << g.input_names[i] << "' was not set (call set_input first)";
  }
  for (const OpCall& op : g.ops) call_op(g, op);
  if (g.device.type != kKilnCPU) device_synchronize(g.device);
}

std::vector<NodeTime> GraphExecutor::profile(int repeat) {
  KILN_USER_CHECK(repeat >= 1) << "profile: repeat must be positive, got " << repeat;
  run();  // checks the inputs; warms up
  Impl& g = get("profile");
  std::vector<NodeTime> r;
  for (const OpCall& op : g.ops)
    r.push_back({g.nodes[op.node].name, g.nodes[op.node].func_name, 0, op.node});
  for (int k = 0; k < repeat; ++k) {
    for (size_t i = 0; i < g.ops.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      call_op(g, g.ops[i]);
      if (g.device.type != kKilnCPU) device_synchronize(g.device);
      r[i].ms +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
          repeat;
    }
  }
  return r;
}

namespace {

void call_op(GraphExecutor::Impl& g, const OpCall& op) {
  // A bounded output's kernel is called with its upper-bound shape.
  for (int eid : op.bounded) g.entries[eid].view.shape = g.entries[eid].shape.data();
  try {
    op.fn.call_packed(op.args.data(), op.codes.data(), static_cast<int32_t>(op.args.size()));
  } catch (const Error& err) {
    KILN_ERROR << "run: node " << op.node << " ('" << g.nodes[op.node].name << "'), function '"
               << g.nodes[op.node].func_name << "': " << err.what();
  }
  for (int eid : op.bounded) {
    Entry& e = g.entries[eid];
    int64_t n = 0;
    device_copy(&n, Device::cpu(), g.entries[e.extent_eid].view.data, g.device, sizeof(n));
    int64_t bound = e.shape[static_cast<size_t>(e.bounded_axis)];
    KILN_USER_CHECK(n >= 0 && n <= bound)
        << "run: node " << op.node << " ('" << g.nodes[op.node].name << "'), function '"
        << g.nodes[op.node].func_name << "': the kernel gave extent " << n << " for axis "
        << e.bounded_axis << " of a data-dependent output bounded by " << shape_str(e.shape);
    e.actual = e.shape;
    e.actual[static_cast<size_t>(e.bounded_axis)] = n;
    e.view.shape = e.actual.data();
  }
}

}  // namespace

NDArray GraphExecutor::get_output(int index) const {
  const Impl& g = get("get_output");
  KILN_USER_CHECK(index >= 0 && index < static_cast<int>(g.output_eids.size()))
      << "get_output: output index " << index << " out of range; the graph has "
      << g.output_eids.size() << " output(s)";
  return g.copy_entry(g.output_eids[index]);
}

NDArray GraphExecutor::get_output(const std::string& name) const {
  const Impl& g = get("get_output");
  auto it = std::find(g.output_names.begin(), g.output_names.end(), name);
  KILN_USER_CHECK(it != g.output_names.end())
      << "get_output: unknown output '" << name
      << "'; the graph's outputs are: " << join(g.output_names);
  return get_output(static_cast<int>(it - g.output_names.begin()));
}

NDArray GraphExecutor::get_input(const std::string& name) const {
  const Impl& g = get("get_input");
  return g.copy_entry(g.input_eids[g.input_index(name, "get_input")]);
}

int GraphExecutor::num_inputs() const {
  return static_cast<int>(get("num_inputs").input_names.size());
}
int GraphExecutor::num_outputs() const {
  return static_cast<int>(get("num_outputs").output_names.size());
}
std::vector<std::string> GraphExecutor::input_names() const {
  return get("input_names").input_names;
}
std::vector<std::string> GraphExecutor::output_names() const {
  return get("output_names").output_names;
}
std::vector<std::string> GraphExecutor::param_names() const {
  return get("param_names").param_names;
}

TensorInfo GraphExecutor::input_info(int index) const {
  const Impl& g = get("input_info");
  KILN_USER_CHECK(index >= 0 && index < static_cast<int>(g.input_names.size()))
      << "input_info: input index " << index << " out of range";
  const Entry& e = g.entries[g.input_eids[index]];
  return TensorInfo{g.input_names[index], e.shape, e.dtype};
}

TensorInfo GraphExecutor::output_info(int index) const {
  const Impl& g = get("output_info");
  KILN_USER_CHECK(index >= 0 && index < static_cast<int>(g.output_names.size()))
      << "output_info: output index " << index << " out of range";
  const Entry& e = g.entries[g.output_eids[index]];
  return TensorInfo{g.output_names[index], e.shape, e.dtype, e.bounded_axis};
}

int GraphExecutor::num_nodes() const { return static_cast<int>(get("num_nodes").nodes.size()); }
int GraphExecutor::num_op_nodes() const { return static_cast<int>(get("num_op_nodes").ops.size()); }
size_t GraphExecutor::storage_bytes() const { return get("storage_bytes").storage_bytes; }

}  // namespace kiln::runtime
