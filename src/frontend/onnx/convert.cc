// ONNX -> graph IR. One converter function per ONNX operator, in a table keyed by op type; a
// converter reads the node's attributes (with ONNX's defaults for the model's opset) and its
// constant inputs (shape, axes, pads, … given as initializers or Constant nodes) and adds graph
// ops. Before converting anything, every node is checked against the table so that all
// unsupported operators are reported together.
#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "kiln/frontend/onnx.h"
#include "kiln/ir/op.h"
#include "kiln/support/error.h"

namespace kiln::frontend {

namespace {

using graph::Attrs;
using graph::Entry;
using Ints = std::vector<int64_t>;

class Converter {
 public:
  Converter(const OnnxModel& m, const ImportOptions& opt) : m_(m), opt_(opt) {}

  graph::Graph run();

  // --- what converters use
  const OnnxNode* node = nullptr;
  int64_t opset = 0;

  std::string where() const {
    return "'" + m_.path + "', node '" + node->name + "' (" + node->op_type + ")";
  }
  bool has_input(size_t i) const { return i < node->inputs.size() && !node->inputs[i].empty(); }
  Entry in(size_t i) const {
    KILN_USER_CHECK(has_input(i)) << where() << ": input " << i << " is required";
    return values_.at(node->inputs[i]);
  }
  /// The value of input i when it is a constant (initializer or Constant node).
  const runtime::NDArray* const_input(size_t i) const {
    if (!has_input(i)) return nullptr;
    const graph::Node& n = g_.node(in(i).node);
    return n.is_constant() ? &n.value : nullptr;
  }
  Ints const_ints(size_t i, const char* what) const {
    const runtime::NDArray* a = const_input(i);
    KILN_USER_CHECK(a) << where() << ": input " << i << " (" << what
                       << ") must be a constant; computed values are not supported yet";
    Ints out;
    for (int64_t k = 0; k < a->numel(); ++k) {
      if (a->dtype() == DataType::Int(64))
        out.push_back(a->data_as<int64_t>()[k]);
      else if (a->dtype() == DataType::Int(32))
        out.push_back(a->data_as<int32_t>()[k]);
      else
        KILN_ERROR << where() << ": input " << i << " (" << what << ") must be int32/int64";
    }
    return out;
  }
  double const_scalar(size_t i, const char* what) const {
    const runtime::NDArray* a = const_input(i);
    KILN_USER_CHECK(a && a->numel() == 1)
        << where() << ": input " << i << " (" << what << ") must be a constant scalar";
    DataType t = a->dtype();
    if (t == DataType::Float(32)) return a->data_as<float>()[0];
    if (t == DataType::Float(64)) return a->data_as<double>()[0];
    if (t == DataType::Int(8)) return a->data_as<int8_t>()[0];
    if (t == DataType::UInt(8)) return a->data_as<uint8_t>()[0];
    if (t == DataType::Int(16)) return a->data_as<int16_t>()[0];
    if (t == DataType::Int(32)) return a->data_as<int32_t>()[0];
    if (t == DataType::Int(64)) return static_cast<double>(a->data_as<int64_t>()[0]);
    KILN_ERROR << where() << ": input " << i << " (" << what << ") has unsupported type " << t;
  }
  bool has_attr(const char* name) const { return node->attrs.count(name) != 0; }
  int64_t attr_int(const char* name, int64_t dflt) const {
    auto it = node->attrs.find(name);
    if (it == node->attrs.end()) return dflt;
    const int64_t* v = std::get_if<int64_t>(&it->second);
    KILN_USER_CHECK(v) << where() << ": attribute '" << name << "' must be an int";
    return *v;
  }
  double attr_float(const char* name, double dflt) const {
    auto it = node->attrs.find(name);
    if (it == node->attrs.end()) return dflt;
    if (const double* v = std::get_if<double>(&it->second)) return *v;
    if (const int64_t* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
    KILN_ERROR << where() << ": attribute '" << name << "' must be a float";
  }
  Ints attr_ints(const char* name, Ints dflt) const {
    auto it = node->attrs.find(name);
    if (it == node->attrs.end()) return dflt;
    const Ints* v = std::get_if<Ints>(&it->second);
    KILN_USER_CHECK(v) << where() << ": attribute '" << name << "' must be a list of ints";
    return *v;
  }
  std::string attr_string(const char* name, const std::string& dflt) const {
    auto it = node->attrs.find(name);
    if (it == node->attrs.end()) return dflt;
    const std::string* v = std::get_if<std::string>(&it->second);
    KILN_USER_CHECK(v) << where() << ": attribute '" << name << "' must be a string";
    return *v;
  }
  void unsupported_if(bool cond, const std::string& what) const {
    KILN_USER_CHECK(!cond) << where() << ": " << what << " is not supported yet";
  }
  Entry op(const std::string& name, std::vector<Entry> inputs, Attrs attrs = {}) {
    return g_.add_op(name, std::move(inputs), std::move(attrs), unique_name(node->name));
  }
  Entry constant(const std::string& hint, runtime::NDArray v) {
    return g_.add_constant(unique_name(node->name + "." + hint), std::move(v));
  }
  /// Element type of an entry when known (graph inputs and constants), else Void.
  DataType dtype_of(Entry e) const {
    const graph::Node& n = g_.node(e.node);
    if (n.is_constant()) return n.value.dtype();
    if (n.is_input() && !n.outputs.empty()) return n.outputs[0].dtype;
    return DataType::Void();
  }
  /// Rank of an entry when its type is known (graph inputs and constants), else -1.
  int rank_of(Entry e) const {
    const graph::Node& n = g_.node(e.node);
    if (n.is_constant()) return n.value.ndim();
    if (n.is_input() && !n.outputs.empty()) return static_cast<int>(n.outputs[0].shape.size());
    return -1;
  }

 private:
  std::string unique_name(const std::string& base) {
    std::string n = base;
    for (int k = 1; used_.count(n); ++k) n = base + "_" + std::to_string(k);
    used_.insert(n);
    return n;
  }

  const OnnxModel& m_;
  const ImportOptions& opt_;
  graph::Graph g_;
  std::map<std::string, Entry> values_;
  std::set<std::string> used_;
};

using ConvertFn = std::function<std::vector<Entry>(Converter&)>;

ConvertFn unary(const char* op) {
  return [op](Converter& c) { return std::vector<Entry>{c.op(op, {c.in(0)})}; };
}
ConvertFn binary(const char* op) {
  return [op](Converter& c) { return std::vector<Entry>{c.op(op, {c.in(0), c.in(1)})}; };
}
/// Max/Min/Sum over any number of inputs.
ConvertFn variadic(const char* op) {
  return [op](Converter& c) {
    Entry acc = c.in(0);
    for (size_t i = 1; i < c.node->inputs.size(); ++i) acc = c.op(op, {acc, c.in(i)});
    return std::vector<Entry>{acc};
  };
}

/// Spatial attributes of 2-D Conv/Pool nodes.
struct Spatial {
  Ints kernel, strides, pads, dilations;
};
Spatial spatial(const Converter& c, Ints kernel) {
  Spatial s;
  s.kernel = c.attr_ints("kernel_shape", kernel);
  c.unsupported_if(s.kernel.size() != 2,
                   "a " + std::to_string(s.kernel.size()) + "-D window (only 2-D)");
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  c.unsupported_if(auto_pad != "NOTSET" && auto_pad != "VALID", "auto_pad=" + auto_pad);
  s.strides = c.attr_ints("strides", {1, 1});
  s.dilations = c.attr_ints("dilations", {1, 1});
  s.pads = auto_pad == "VALID" ? Ints{0, 0, 0, 0} : c.attr_ints("pads", {0, 0, 0, 0});
  return s;
}

std::vector<Entry> convert_conv(Converter& c) {
  const runtime::NDArray* w = c.const_input(1);
  Ints kshape = w && w->ndim() == 4 ? Ints{w->shape()[2], w->shape()[3]} : Ints{};
  Spatial s = spatial(c, kshape);
  Entry y = c.op("conv2d", {c.in(0), c.in(1)},
                 {{"strides", s.strides},
                  {"padding", s.pads},
                  {"dilation", s.dilations},
                  {"groups", c.attr_int("group", 1)}});
  if (c.has_input(2)) {
    Entry b = c.op("reshape", {c.in(2)}, {{"newshape", Ints{1, -1, 1, 1}}});
    y = c.op("add", {y, b});
  }
  return {y};
}

std::vector<Entry> convert_pool(Converter& c, const char* op) {
  c.unsupported_if(c.node->outputs.size() > 1 && !c.node->outputs[1].empty(),
                   "MaxPool's Indices output");
  Spatial s = spatial(c, {});
  Attrs a{{"pool_size", s.kernel},
          {"strides", s.strides},
          {"padding", s.pads},
          {"ceil_mode", c.attr_int("ceil_mode", 0)}};
  if (std::string(op) == "max_pool2d")
    a.set("dilation", s.dilations);
  else
    a.set("count_include_pad", c.attr_int("count_include_pad", 0));
  return {c.op(op, {c.in(0)}, a)};
}

std::vector<Entry> convert_gemm(Converter& c) {
  Entry a = c.in(0), b = c.in(1);
  if (c.attr_int("transA", 0)) a = c.op("transpose", {a}, {{"axes", Ints{1, 0}}});
  // dense computes a · bᵀ, so B is transposed unless transB already is.
  if (!c.attr_int("transB", 0)) b = c.op("transpose", {b}, {{"axes", Ints{1, 0}}});
  Entry y = c.op("dense", {a, b});
  double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  auto scalar = [&](const char* hint, double v) {
    runtime::NDArray s = runtime::NDArray::empty({}, DataType::Float(32));
    s.data_as<float>()[0] = static_cast<float>(v);
    return c.constant(hint, s);
  };
  if (alpha != 1.0) y = c.op("multiply", {y, scalar("alpha", alpha)});
  if (c.has_input(2) && beta != 0.0) {
    Entry bias = c.in(2);
    if (beta != 1.0) bias = c.op("multiply", {bias, scalar("beta", beta)});
    y = c.op("add", {y, bias});
  }
  return {y};
}

std::vector<Entry> convert_clip(Converter& c) {
  std::optional<double> lo, hi;
  if (c.opset < 11) {
    if (c.has_attr("min")) lo = c.attr_float("min", 0);
    if (c.has_attr("max")) hi = c.attr_float("max", 0);
  } else {
    if (c.has_input(1)) lo = c.const_scalar(1, "min");
    if (c.has_input(2)) hi = c.const_scalar(2, "max");
  }
  if (!lo && !hi) return {c.op("identity", {c.in(0)})};
  // A missing bound is the element type's limit; float limits would overflow integer types.
  DataType t = c.dtype_of(c.in(0));
  c.unsupported_if(t.is_void() && (!lo || !hi), "Clip with one bound of a computed tensor");
  double tmin = t.is_float() ? -std::numeric_limits<float>::max()
                             : static_cast<double>(*as_const_int(ir::min_value(t)));
  double tmax = t.is_float() ? std::numeric_limits<float>::max()
                             : static_cast<double>(*as_const_int(ir::max_value(t)));
  return {c.op("clip", {c.in(0)}, {{"a_min", lo.value_or(tmin)}, {"a_max", hi.value_or(tmax)}})};
}

std::vector<Entry> convert_softmax(Converter& c, const char* op) {
  int64_t axis = c.attr_int("axis", c.opset < 13 ? 1 : -1);
  if (c.opset < 13) {
    // Before opset 13, Softmax flattens to 2-D at `axis`: the same as the last-axis softmax only
    // when `axis` is the last axis.
    int r = c.rank_of(c.in(0));
    c.unsupported_if(!(axis == -1 || (r > 0 && axis == r - 1)),
                     "Softmax before opset 13 over axis " + std::to_string(axis) +
                         " of a tensor that is not known to have rank " + std::to_string(axis + 1));
    axis = -1;
  }
  return {c.op(op, {c.in(0)}, {{"axis", axis}})};
}

std::vector<Entry> convert_reduce(Converter& c, const char* op) {
  Ints axes = c.attr_ints("axes", {});
  bool axes_as_input = (std::string(op) == "sum" && c.opset >= 13) || c.opset >= 18;
  if (axes_as_input && c.has_input(1)) axes = c.const_ints(1, "axes");
  c.unsupported_if(axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0,
                   "noop_with_empty_axes=1");
  return {c.op(op, {c.in(0)}, {{"axes", axes}, {"keepdims", c.attr_int("keepdims", 1)}})};
}

std::vector<Entry> convert_constant(Converter& c) {
  auto it = c.node->attrs.find("value");
  runtime::NDArray v;
  if (it != c.node->attrs.end()) {
    const runtime::NDArray* t = std::get_if<runtime::NDArray>(&it->second);
    KILN_USER_CHECK(t) << c.where() << ": attribute 'value' must be a tensor";
    v = *t;
  } else if (c.has_attr("value_float")) {
    v = runtime::NDArray::empty({}, DataType::Float(32));
    v.data_as<float>()[0] = static_cast<float>(c.attr_float("value_float", 0));
  } else if (c.has_attr("value_int")) {
    v = runtime::NDArray::empty({}, DataType::Int(64));
    v.data_as<int64_t>()[0] = c.attr_int("value_int", 0);
  } else if (c.has_attr("value_ints")) {
    Ints xs = c.attr_ints("value_ints", {});
    v = runtime::NDArray::empty({static_cast<int64_t>(xs.size())}, DataType::Int(64));
    std::copy(xs.begin(), xs.end(), v.data_as<int64_t>());
  } else {
    c.unsupported_if(true, "this form of Constant");
  }
  return {c.constant("value", v)};
}

const std::map<std::string, ConvertFn>& table() {
  static const std::map<std::string, ConvertFn> t = [] {
    std::map<std::string, ConvertFn> m;
    for (auto [onnx, op] :
         std::vector<std::pair<const char*, const char*>>{{"Relu", "relu"},
                                                          {"Sigmoid", "sigmoid"},
                                                          {"Tanh", "tanh"},
                                                          {"Exp", "exp"},
                                                          {"Log", "log"},
                                                          {"Sqrt", "sqrt"},
                                                          {"Erf", "erf"},
                                                          {"Abs", "abs"},
                                                          {"Neg", "negative"},
                                                          {"Floor", "floor"},
                                                          {"Ceil", "ceil"},
                                                          {"Sign", "sign"},
                                                          {"Reciprocal", "reciprocal"},
                                                          {"Softplus", "softplus"},
                                                          {"Identity", "identity"},
                                                          {"Not", "logical_not"}})
      m[onnx] = unary(op);
    for (auto [onnx, op] :
         std::vector<std::pair<const char*, const char*>>{{"Add", "add"},
                                                          {"Sub", "subtract"},
                                                          {"Mul", "multiply"},
                                                          {"Div", "divide"},
                                                          {"Pow", "power"},
                                                          {"Equal", "equal"},
                                                          {"Less", "less"},
                                                          {"Greater", "greater"},
                                                          {"LessOrEqual", "less_equal"},
                                                          {"GreaterOrEqual", "greater_equal"}})
      m[onnx] = binary(op);
    m["Max"] = variadic("maximum");
    m["Min"] = variadic("minimum");
    m["Sum"] = variadic("add");
    m["Where"] = [](Converter& c) {
      return std::vector<Entry>{c.op("where", {c.in(0), c.in(1), c.in(2)})};
    };
    m["Dropout"] = [](Converter& c) {
      c.unsupported_if(c.node->outputs.size() > 1 && !c.node->outputs[1].empty(),
                       "Dropout's mask output");
      // Inference only: training_mode (input 2) must be absent or a constant false.
      if (c.has_input(2)) {
        const runtime::NDArray* tm = c.const_input(2);
        c.unsupported_if(!tm || tm->numel() != 1 || tm->data_as<uint8_t>()[0] != 0,
                         "Dropout in training mode");
      }
      return std::vector<Entry>{c.op("identity", {c.in(0)})};
    };
    m["Clip"] = convert_clip;
    m["LeakyRelu"] = [](Converter& c) {
      return std::vector<Entry>{
          c.op("leaky_relu", {c.in(0)}, {{"alpha", c.attr_float("alpha", 0.01)}})};
    };
    m["Conv"] = convert_conv;
    m["MaxPool"] = [](Converter& c) { return convert_pool(c, "max_pool2d"); };
    m["AveragePool"] = [](Converter& c) { return convert_pool(c, "avg_pool2d"); };
    m["GlobalAveragePool"] = unary("global_avg_pool2d");
    m["GlobalMaxPool"] = unary("global_max_pool2d");
    m["Gemm"] = convert_gemm;
    m["MatMul"] = binary("matmul");
    m["BatchNormalization"] = [](Converter& c) {
      c.unsupported_if(c.attr_int("training_mode", 0) != 0, "training_mode=1");
      return std::vector<Entry>{c.op("batch_norm", {c.in(0), c.in(1), c.in(2), c.in(3), c.in(4)},
                                     {{"epsilon", c.attr_float("epsilon", 1e-5)}})};
    };
    m["Softmax"] = [](Converter& c) { return convert_softmax(c, "softmax"); };
    m["LogSoftmax"] = [](Converter& c) { return convert_softmax(c, "log_softmax"); };
    m["Flatten"] = [](Converter& c) {
      return std::vector<Entry>{c.op("flatten", {c.in(0)}, {{"axis", c.attr_int("axis", 1)}})};
    };
    m["Reshape"] = [](Converter& c) {
      c.unsupported_if(c.attr_int("allowzero", 0) != 0, "allowzero=1");
      Ints shape = c.opset < 5 ? c.attr_ints("shape", {}) : c.const_ints(1, "shape");
      return std::vector<Entry>{c.op("reshape", {c.in(0)}, {{"newshape", shape}})};
    };
    m["Transpose"] = [](Converter& c) {
      return std::vector<Entry>{c.op("transpose", {c.in(0)}, {{"axes", c.attr_ints("perm", {})}})};
    };
    m["Concat"] = [](Converter& c) {
      std::vector<Entry> ins;
      for (size_t i = 0; i < c.node->inputs.size(); ++i) ins.push_back(c.in(i));
      return std::vector<Entry>{c.op("concat", ins, {{"axis", c.attr_int("axis", 0)}})};
    };
    m["Squeeze"] = [](Converter& c) {
      Ints axes = c.opset < 13 ? c.attr_ints("axes", {})
                               : (c.has_input(1) ? c.const_ints(1, "axes") : Ints{});
      return std::vector<Entry>{c.op("squeeze", {c.in(0)}, {{"axes", axes}})};
    };
    m["Unsqueeze"] = [](Converter& c) {
      Ints axes = c.opset < 13 ? c.attr_ints("axes", {}) : c.const_ints(1, "axes");
      return std::vector<Entry>{c.op("unsqueeze", {c.in(0)}, {{"axes", axes}})};
    };
    m["Gather"] = [](Converter& c) {
      return std::vector<Entry>{
          c.op("take", {c.in(0), c.in(1)}, {{"axis", c.attr_int("axis", 0)}})};
    };
    m["ReduceMean"] = [](Converter& c) { return convert_reduce(c, "mean"); };
    m["ReduceSum"] = [](Converter& c) { return convert_reduce(c, "sum"); };
    m["ReduceMax"] = [](Converter& c) { return convert_reduce(c, "max"); };
    m["ReduceMin"] = [](Converter& c) { return convert_reduce(c, "min"); };
    m["ReduceProd"] = [](Converter& c) { return convert_reduce(c, "prod"); };
    m["Constant"] = convert_constant;
    return m;
  }();
  return t;
}

graph::Graph Converter::run() {
  // 1. Every operator supported? Report all that are not, at once.
  std::vector<std::string> missing;
  for (const OnnxNode& n : m_.nodes) {
    std::string dom = n.domain.empty() ? "ai.onnx" : n.domain;
    auto op = m_.opsets.find(n.domain);
    int64_t ver = op == m_.opsets.end() ? 0 : op->second;
    bool ok = n.domain.empty() && table().count(n.op_type) && !n.has_subgraph;
    if (!ok) {
      missing.push_back(n.op_type + " (domain " + dom + ", opset " + std::to_string(ver) +
                        ", node '" + n.name + "')");
    }
  }
  if (!missing.empty()) {
    std::ostringstream os;
    os << "'" << m_.path << "' uses " << missing.size() << " unsupported ONNX operator"
       << (missing.size() == 1 ? "" : "s") << ":";
    for (const std::string& s : missing) os << "\n  " << s;
    KILN_ERROR << os.str();
  }
  opset = m_.default_opset();
  // 2. Inputs and initializers.
  for (const OnnxValueInfo& v : m_.inputs) {
    KILN_USER_CHECK(!v.dtype.is_void())
        << "'" << m_.path << "': input '" << v.name << "' is not a tensor of a supported type";
    Ints shape;
    auto given = opt_.input_shapes.find(v.name);
    if (given != opt_.input_shapes.end()) {
      shape = given->second;
    } else {
      KILN_USER_CHECK(v.has_shape)
          << "'" << m_.path << "': input '" << v.name << "' has no shape; give one";
      for (size_t d = 0; d < v.shape.size(); ++d) {
        KILN_USER_CHECK(v.shape[d].size >= 0)
            << "'" << m_.path << "': input '" << v.name << "' dimension " << d << " is symbolic ('"
            << v.shape[d].param << "'); give the input's shape";
        shape.push_back(v.shape[d].size);
      }
    }
    values_[v.name] = g_.add_input(v.name, shape, v.dtype);
    used_.insert(v.name);
  }
  for (const auto& [name, value] : m_.initializers) {
    values_[name] = g_.add_constant(name, value);
    used_.insert(name);
  }
  // 3. Nodes, in order.
  for (const OnnxNode& n : m_.nodes) {
    node = &n;
    int first_new = g_.num_nodes();
    std::vector<Entry> outs = table().at(n.op_type)(*this);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty()) continue;
      KILN_USER_CHECK(i < outs.size())
          << where() << ": output " << i << " ('" << n.outputs[i] << "') is not supported yet";
      values_[n.outputs[i]] = outs[i];
      // The graph node that produces an ONNX value carries the value's name (unique in ONNX;
      // graph outputs and their .npy files are named after it).
      graph::Node& prod = g_.mutable_node(outs[i].node);
      if (outs[i].node >= first_new && prod.is_op() && g_.node(outs[i].node).num_outputs() <= 1 &&
          !used_.count(n.outputs[i])) {
        used_.erase(prod.name);
        prod.name = n.outputs[i];
        used_.insert(prod.name);
      }
    }
  }
  std::vector<Entry> heads;
  for (const OnnxValueInfo& v : m_.outputs) heads.push_back(values_.at(v.name));
  g_.set_outputs(heads);
  return g_;
}

}  // namespace

graph::Graph import_onnx(const OnnxModel& model, const ImportOptions& opt) {
  return Converter(model, opt).run();
}

graph::Graph import_onnx(const std::string& path, const ImportOptions& opt) {
  return import_onnx(load_onnx_model(path), opt);
}

std::vector<std::string> supported_onnx_ops() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : table()) out.push_back(name);
  return out;
}

}  // namespace kiln::frontend
