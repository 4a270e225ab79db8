// The graph IR's data structures: attribute maps, tensor types, the node vector with its
// builders, the text printer, the invariant checker and structural equality. Everything iterates
// over the node vector once; the printer emits one line per node in index order, so its output is
// stable.

#include "kiln/graph/graph.h"

#include <charconv>
#include <cstring>
#include <set>
#include <sstream>

#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"

namespace kiln::graph {

const char* attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::kInt:
      return "int";
    case AttrKind::kFloat:
      return "float";
    case AttrKind::kString:
      return "string";
    case AttrKind::kInts:
      return "int list";
    case AttrKind::kFloats:
      return "float list";
  }
  return "?";
}

namespace {

std::string float_str(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // 1 -> 1.0; keeps inf, nan
  return s;
}

template <typename T, typename F>
std::string list_str(const std::vector<T>& v, F f) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + f(v[i]);
  return s + "]";
}

}  // namespace

std::string attr_value_str(const AttrValue& v) {
  switch (attr_kind(v)) {
    case AttrKind::kInt:
      return std::to_string(std::get<int64_t>(v));
    case AttrKind::kFloat:
      return float_str(std::get<double>(v));
    case AttrKind::kString:
      return "\"" + std::get<std::string>(v) + "\"";
    case AttrKind::kInts:
      return list_str(std::get<std::vector<int64_t>>(v),
                      [](int64_t x) { return std::to_string(x); });
    case AttrKind::kFloats:
      return list_str(std::get<std::vector<double>>(v), float_str);
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Attrs

Attrs& Attrs::set(const std::string& name, AttrValue v) {
  map_[name] = std::move(v);
  return *this;
}

const AttrValue& Attrs::get(const std::string& name) const {
  auto it = map_.find(name);
  KILN_USER_CHECK(it != map_.end()) << "attribute '" << name << "' is not set";
  return it->second;
}

namespace {
template <typename T>
const T& get_as(const Attrs& a, const std::string& name, AttrKind want) {
  const AttrValue& v = a.get(name);
  KILN_USER_CHECK(std::holds_alternative<T>(v))
      << "attribute '" << name << "' must be of kind " << attr_kind_name(want) << ", got "
      << attr_kind_name(attr_kind(v)) << " " << attr_value_str(v);
  return std::get<T>(v);
}
}  // namespace

int64_t Attrs::get_int(const std::string& name) const {
  return get_as<int64_t>(*this, name, AttrKind::kInt);
}
double Attrs::get_float(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return get_as<double>(*this, name, AttrKind::kFloat);
}
const std::string& Attrs::get_string(const std::string& name) const {
  return get_as<std::string>(*this, name, AttrKind::kString);
}
const std::vector<int64_t>& Attrs::get_ints(const std::string& name) const {
  return get_as<std::vector<int64_t>>(*this, name, AttrKind::kInts);
}
std::vector<double> Attrs::get_floats(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto* i = std::get_if<std::vector<int64_t>>(&v)) return {i->begin(), i->end()};
  return get_as<std::vector<double>>(*this, name, AttrKind::kFloats);
}

std::string Attrs::str() const {
  std::string s;
  for (const auto& [k, v] : map_) {
    if (!s.empty()) s += ", ";
    s += k + "=" + attr_value_str(v);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// TensorType

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorType::str() const {
  if (!known()) return "?";
  return dtype.str() + list_str(shape, [](int64_t x) { return std::to_string(x); });
}

TensorType type_of(const runtime::NDArray& a) { return TensorType{a.shape(), a.dtype()}; }

bool structural_equal(const Graph& a, const Graph& b) {
  if (a.num_nodes() != b.num_nodes() || a.outputs() != b.outputs() ||
      a.output_names() != b.output_names())
    return false;
  for (int i = 0; i < a.num_nodes(); ++i) {
    const Node &x = a.node(i), &y = b.node(i);
    if (x.kind != y.kind || x.op != y.op || x.name != y.name || x.inputs != y.inputs ||
        x.attrs != y.attrs || x.outputs != y.outputs || x.impl.name != y.impl.name)
      return false;
    if (x.value.defined() != y.value.defined()) return false;
    if (!x.value.defined() || x.value.data() == y.value.data()) continue;
    if (x.value.dtype() != y.value.dtype() || x.value.shape() != y.value.shape() ||
        std::memcmp(x.value.data(), y.value.data(), x.value.nbytes()) != 0)
      return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Graph builders

void Graph::check_new_name(const std::string& name, const char* what) const {
  KILN_USER_CHECK(!name.empty()) << "graph: a " << what << " needs a non-empty name";
  for (const Node& n : nodes_) {
    KILN_USER_CHECK(n.is_op() || n.name != name)
        << "graph: " << what << " name '" << name << "' is already used by node %"
        << (&n - nodes_.data());
  }
}

Entry Graph::add_input(const std::string& name, std::vector<int64_t> shape, DataType dtype) {
  check_new_name(name, "input");
  for (int64_t d : shape) {
    KILN_USER_CHECK(d >= 0) << "graph: input '" << name << "' has a negative extent in "
                            << TensorType{shape, dtype}.str();
  }
  KILN_USER_CHECK(!dtype.is_void()) << "graph: input '" << name << "' needs a dtype";
  Node n;
  n.kind = NodeKind::kInput;
  n.op = "input";
  n.name = name;
  n.outputs = {TensorType{std::move(shape), dtype}};
  return Entry{add_node(std::move(n)), 0};
}

Entry Graph::add_constant(const std::string& name, runtime::NDArray value) {
  check_new_name(name, "constant");
  KILN_USER_CHECK(value.defined()) << "graph: constant '" << name << "' has no value";
  Node n;
  n.kind = NodeKind::kConstant;
  n.op = "constant";
  n.name = name;
  n.outputs = {kiln::graph::type_of(value)};
  n.value = std::move(value);
  return Entry{add_node(std::move(n)), 0};
}

Entry Graph::add_op(const std::string& op, std::vector<Entry> inputs, Attrs attrs,
                    const std::string& name) {
  Node n;
  n.kind = NodeKind::kOp;
  n.op = op;
  n.name = name;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  const OpDef* def = OpRegistry::global().find(op);
  n.outputs.resize(def ? static_cast<size_t>(def->num_outputs) : 1);
  return Entry{add_node(std::move(n)), 0};
}

int Graph::add_node(Node node) {
  int id = num_nodes();
  for (const Entry& e : node.inputs) {
    KILN_USER_CHECK(e.node >= 0 && e.node < id && e.index >= 0 &&
                    e.index < nodes_[static_cast<size_t>(e.node)].num_outputs())
        << "graph: node %" << id << " (" << node.op << ") reads %" << e.node << "." << e.index
        << ", which is not an output of an earlier node";
  }
  nodes_.push_back(std::move(node));
  return id;
}

void Graph::add_output(Entry e) {
  KILN_USER_CHECK(e.node >= 0 && e.node < num_nodes() && e.index >= 0 &&
                  e.index < node(e.node).num_outputs())
      << "graph: output %" << e.node << "." << e.index << " is not an output of a node";
  outputs_.push_back(e);
}

void Graph::set_outputs(std::vector<Entry> outs) {
  outputs_.clear();
  for (const Entry& e : outs) add_output(e);
}

void Graph::set_output_names(std::vector<std::string> names) {
  KILN_USER_CHECK(names.empty() || names.size() == outputs_.size())
      << "graph: " << names.size() << " output names for " << outputs_.size() << " outputs";
  output_names_ = std::move(names);
}

std::vector<int> Graph::input_nodes() const {
  std::vector<int> r;
  for (int i = 0; i < num_nodes(); ++i)
    if (node(i).is_input()) r.push_back(i);
  return r;
}

std::vector<int> Graph::constant_nodes() const {
  std::vector<int> r;
  for (int i = 0; i < num_nodes(); ++i)
    if (node(i).is_constant()) r.push_back(i);
  return r;
}

const TensorType& Graph::type_of(Entry e) const {
  return node(e.node).outputs.at(static_cast<size_t>(e.index));
}

// ---------------------------------------------------------------------------------------------
// Printing

std::string Graph::entry_str(Entry e) const {
  std::string s = "%" + std::to_string(e.node);
  if (node(e.node).num_outputs() > 1) s += "." + std::to_string(e.index);
  return s;
}

std::string Graph::node_str(int i) const {
  const Node& n = node(i);
  std::string s = "%" + std::to_string(i) + " = ";
  if (n.is_input() || n.is_constant()) {
    s += n.op + " " + n.name;
  } else {
    s += n.op + "(";
    bool first = true;
    for (const Entry& e : n.inputs) {
      s += (first ? "" : ", ") + entry_str(e);
      first = false;
    }
    if (!n.attrs.empty()) s += (first ? "" : ", ") + n.attrs.str();
    s += ")";
  }
  s += " : ";
  if (n.num_outputs() == 1) {
    s += n.outputs[0].str();
  } else {
    std::string l = list_str(n.outputs, [](const TensorType& t) { return t.str(); });
    s += "(" + l.substr(1, l.size() - 2) + ")";
  }
  if (n.is_op() && !n.name.empty()) s += "  # " + n.name;
  return s;
}

std::string Graph::str() const {
  std::string s;
  for (int i = 0; i < num_nodes(); ++i) s += node_str(i) + "\n";
  s += "output ";
  for (size_t i = 0; i < outputs_.size(); ++i) s += (i ? ", " : "") + entry_str(outputs_[i]);
  return s + "\n";
}

// ---------------------------------------------------------------------------------------------
// Verification

void Graph::verify(const std::string& after) const {
  std::string where = after.empty() ? "" : " after " + after;
  std::set<std::string> names;
  for (int i = 0; i < num_nodes(); ++i) {
    const Node& n = node(i);
    for (const Entry& e : n.inputs) {
      KILN_ICHECK(e.node >= 0 && e.node < i && e.index >= 0 && e.index < node(e.node).num_outputs())
          << "graph" << where << ": node %" << i << " (" << n.op << ") reads %" << e.node << "."
          << e.index << ", not an output of an earlier node";
    }
    KILN_ICHECK(n.num_outputs() >= 1) << "graph" << where << ": node %" << i << " has no outputs";
    if (n.is_op()) continue;
    KILN_ICHECK(n.inputs.empty()) << "graph" << where << ": " << n.op << " %" << i << " has inputs";
    KILN_ICHECK(names.insert(n.name).second)
        << "graph" << where << ": name '" << n.name << "' of %" << i << " is used twice";
    KILN_ICHECK(n.num_outputs() == 1 && n.outputs[0].known())
        << "graph" << where << ": " << n.op << " %" << i << " must have one typed output";
    if (n.is_constant()) {
      KILN_ICHECK(n.value.defined() && kiln::graph::type_of(n.value) == n.outputs[0])
          << "graph" << where << ": constant %" << i << "'s value does not match its type "
          << n.outputs[0].str();
    }
  }
  KILN_ICHECK(output_names_.empty() || output_names_.size() == outputs_.size())
      << "graph" << where << ": " << output_names_.size() << " output names for " << outputs_.size()
      << " outputs";
  for (const Entry& e : outputs_) {
    KILN_ICHECK(e.node >= 0 && e.node < num_nodes() && e.index >= 0 &&
                e.index < node(e.node).num_outputs())
        << "graph" << where << ": result %" << e.node << "." << e.index << " is not valid";
  }
}

}  // namespace kiln::graph
