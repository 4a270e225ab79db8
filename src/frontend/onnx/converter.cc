// ONNX importer: the converter table (one converter per ONNX op, a second registration refused),
// the folding of values computed from constants (Converter::folded: on the host where
// eval_on_host can, else through the compiler, remembering every value found) and small helpers
// shared by the converter families: element-type codes, int64 arrays, iota constants, empty
// tensors; Converter::op, which turns a product over an empty reduction into zeros.
#include "converter.h"

namespace kiln::frontend::onnx_import {

void ConvertTable::add(const std::string& op, ConvertFn fn) {
  KILN_ICHECK(fn) << "the converter of ONNX op '" << op << "' is empty";
  bool fresh = fns_.emplace(op, std::move(fn)).second;
  KILN_ICHECK(fresh) << "ONNX op '" << op
                     << "' has two converters: each op is converted in one place only";
}

std::vector<std::string> ConvertTable::ops() const {
  std::vector<std::string> out;
  for (const auto& [name, fn] : fns_) out.push_back(name);
  return out;
}

const runtime::NDArray* Converter::folded(Entry e) const {
  if (is_sequence(e) || is_optional(e)) return nullptr;
  auto value_of = [&](Entry x) -> const runtime::NDArray* {
    const graph::Node& n = g_.node(x.node);
    if (n.is_constant()) return &n.value;
    auto it = folded_.find(x);
    return it != folded_.end() && it->second ? &*it->second : nullptr;
  };
  auto known = [&](Entry x) { return g_.node(x.node).is_constant() || folded_.count(x) != 0; };
  if (known(e)) return value_of(e);
  // The ops between e and the values known so far, inputs first (post-order, iteratively: an
  // unrolled loop makes long chains). A graph input on the way: not a constant.
  std::vector<int> order;
  std::set<int> seen{e.node};
  std::vector<std::pair<int, size_t>> stack{{e.node, 0}};
  while (!stack.empty()) {
    auto& [k, next] = stack.back();
    const graph::Node& m = g_.node(k);
    if (m.is_input()) {
      folded_[e].reset();
      return nullptr;
    }
    if (next < m.inputs.size()) {
      Entry x = m.inputs[next++];
      if (known(x) && !value_of(x)) {  // found before not to be a constant
        folded_[e].reset();
        return nullptr;
      }
      if (!known(x) && seen.insert(x.node).second) stack.push_back({x.node, 0});
      continue;
    }
    order.push_back(k);
    stack.pop_back();
  }
  // On the host where each op allows it.
  bool host = true;
  for (int k : order) {
    const graph::Node& m = g_.node(k);
    std::vector<const runtime::NDArray*> ins;
    for (const Entry& x : m.inputs) ins.push_back(value_of(x));
    std::optional<runtime::NDArray> v = eval_on_host(m, ins);
    if (!v) {
      host = false;
      break;
    }
    folded_[Entry{k, 0}] = std::move(*v);
  }
  if (host) return value_of(e);
  // Through the compiler: the remaining ops over the known values as constants.
  graph::Graph sub;
  std::map<Entry, Entry> remap;
  auto input_of = [&](Entry x) {
    auto it = remap.find(x);
    if (it != remap.end()) return it->second;
    const runtime::NDArray* v = value_of(x);
    KILN_ICHECK(v) << "folding: an input of the sub-graph is neither computed nor known";
    Entry c = sub.add_constant("folded.known." + std::to_string(remap.size()), *v);
    remap[x] = c;
    return c;
  };
  for (int k : order) {
    if (known(Entry{k, 0}) && g_.node(k).num_outputs() <= 1) continue;  // found on the host
    graph::Node copy = g_.node(k);
    for (Entry& x : copy.inputs) x = input_of(x);
    int id = sub.add_node(std::move(copy));
    for (int i = 0; i < std::max(1, g_.node(k).num_outputs()); ++i) remap[Entry{k, i}] = {id, i};
  }
  std::optional<runtime::NDArray>& slot = folded_[e];
  sub.set_outputs({input_of(e)});
  try {
    graph::Graph f = graph::constant_folding(graph::infer_types(sub));
    const graph::Node& out = f.node(f.outputs()[0].node);
    if (out.is_constant()) slot = out.value;
  } catch (const Error&) {
    slot.reset();
  }
  return slot ? &*slot : nullptr;
}

DataType onnx_elem_type(int64_t code) {
  switch (code) {
    case 1:
      return DataType::Float(32);
    case 2:
      return DataType::UInt(8);
    case 3:
      return DataType::Int(8);
    case 5:
      return DataType::Int(16);
    case 6:
      return DataType::Int(32);
    case 7:
      return DataType::Int(64);
    case 9:
      return DataType::Bool();
    case 11:
      return DataType::Float(64);
    case 10:
      return DataType::Float(16);
    default:
      return DataType::Void();
  }
}

runtime::NDArray int64_array(const Ints& xs) {
  runtime::NDArray a =
      runtime::NDArray::empty({static_cast<int64_t>(xs.size())}, DataType::Int(64));
  std::copy(xs.begin(), xs.end(), a.data_as<int64_t>());
  return a;
}

Entry iota(Converter& c, int64_t n, size_t r, int64_t axis, DataType t) {
  Ints shape(r, 1);
  shape[static_cast<size_t>(axis)] = n;
  runtime::NDArray a = runtime::NDArray::empty(shape, t);
  for (int64_t k = 0; k < n; ++k) c.set_elem(a, k, static_cast<double>(k));
  return c.constant("iota", a);
}

Entry Converter::op(const std::string& name, std::vector<Entry> inputs, Attrs attrs) {
  static const std::set<std::string> kProducts = {"conv2d",           "conv3d", "conv2d_transpose",
                                                  "conv3d_transpose", "dense",  "matmul"};
  bool empty_input = false;
  if (kProducts.count(name)) {
    for (Entry x : inputs) {
      std::optional<graph::TensorType> t = known_type(x);
      empty_input = empty_input || (t && t->known() && t->numel() == 0);
    }
  }
  Entry e = g_.add_op(name, std::move(inputs), std::move(attrs), unique_name(node->name));
  if (!empty_input) return e;
  std::optional<graph::TensorType> t = known_type(e);
  if (!t || !t->known()) return e;
  runtime::NDArray zeros = runtime::NDArray::empty(t->shape, t->dtype);
  if (zeros.nbytes()) std::memset(zeros.data(), 0, zeros.nbytes());
  emptied_ = true;
  return constant(t->numel() ? "zeros" : "empty", std::move(zeros));
}

Entry empty_tensor(Converter& c, const Ints& shape, DataType t) {
  return c.constant("empty", runtime::NDArray::empty(shape, t));
}

}  // namespace kiln::frontend::onnx_import
