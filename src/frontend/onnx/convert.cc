// ONNX -> graph IR: the importer's driver. It checks the model (graph inputs and outputs,
// import options), reports every unsupported operator at once (sub-graphs included), adds the
// graph inputs and initializers, converts the nodes in order through the converter table (one
// converter per ONNX op, each family in its convert_<family>.cc; converter.h lists them), imports
// sub-graphs for the control-flow converters (Converter::import_body) and sets the outputs, a
// sequence output flattened into one output per element. Converters that need a value's type run
// graph::infer_types over the graph built so far; inputs computed from constants only are folded
// on demand (Converter::folded). A value with no elements becomes an empty constant.
#include "converter.h"

namespace kiln::frontend::onnx_import {

const ConvertTable& table() {
  static const ConvertTable t = [] {
    ConvertTable m;
    register_math_converters(m);
    register_conv_converters(m);
    register_nn_converters(m);
    register_tensor_converters(m);
    register_index_converters(m);
    register_reduce_converters(m);
    register_quant_converters(m);
    register_training_converters(m);
    register_rnn_converters(m);
    register_signal_converters(m);
    register_text_converters(m);
    register_dynamic_converters(m);
    register_control_converters(m);
    return m;
  }();
  return t;
}

void Converter::find_unsupported(const std::vector<OnnxNode>& nodes,
                                 std::vector<std::string>& missing) {
  for (const OnnxNode& n : nodes) {
    std::string dom = n.domain.empty() ? "ai.onnx" : n.domain;
    auto op = m_.opsets.find(n.domain);
    int64_t ver = op == m_.opsets.end() ? 0 : op->second;
    // The optimizer steps of the preview training domain are element-wise updates.
    bool training = n.domain == "ai.onnx.preview.training" &&
                    (n.op_type == "Adagrad" || n.op_type == "Momentum" || n.op_type == "Adam");
    // A node with a list of graphs as an attribute (none of the converted operators has one).
    bool graphs_unread = n.has_subgraph && n.subgraphs.empty();
    bool ok = (n.domain.empty() || training) && table().find(n.op_type) && !graphs_unread;
    if (!ok) {
      missing.push_back(n.op_type + " (domain " + dom + ", opset " + std::to_string(ver) +
                        ", node '" + n.name + "')");
    }
    for (const auto& [name, body] : n.subgraphs) find_unsupported(body->nodes, missing);
  }
}

void Converter::convert_nodes(const std::vector<OnnxNode>& nodes, bool name_values) {
  for (const OnnxNode& n : nodes) {
    node = &n;
    int first_new = g_.num_nodes();
    std::vector<Entry> outs = (*table().find(n.op_type))(*this);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty()) continue;
      KILN_USER_CHECK(i < outs.size())
          << where() << ": output " << i << " ('" << n.outputs[i] << "') is not supported yet";
      values_[n.outputs[i]] = outs[i];
      if (is_sequence(outs[i]) || is_optional(outs[i])) continue;
      // A value with no elements (a zero batch or zero channels) is a constant whatever computes
      // it: kernels, layouts and schedule templates never see an empty tensor (issue 26).
      if (!g_.node(outs[i].node).is_constant()) {
        std::optional<graph::TensorType> t = known_type(outs[i]);
        if (t && t->known() && t->numel() == 0) {
          outs[i] = empty_tensor(*this, t->shape, t->dtype);
          emptied_ = true;
          values_[n.outputs[i]] = outs[i];
          continue;
        }
      }
      if (!name_values) continue;
      // The graph node that produces an ONNX value carries the value's name (unique in ONNX;
      // graph outputs and their .npy files are named after it).
      graph::Node& prod = g_.mutable_node(outs[i].node);
      if (outs[i].node >= first_new && prod.is_op() && g_.node(outs[i].node).num_outputs() <= 1 &&
          !used_.count(n.outputs[i])) {
        release_name(prod.name);
        prod.name = n.outputs[i];
        used_.insert(prod.name);
      }
    }
  }
}

std::vector<Entry> Converter::import_body(const OnnxGraph& body, const std::vector<Entry>& inputs) {
  KILN_USER_CHECK(inputs.size() == body.inputs.size())
      << where() << ": the sub-graph '" << body.name << "' has " << body.inputs.size()
      << " inputs, but " << inputs.size() << " are given to it";
  const OnnxNode* outer = node;
  // The body sees the enclosing scopes' values; its own names shadow them until it ends.
  std::map<std::string, Entry> saved = values_;
  for (size_t i = 0; i < inputs.size(); ++i) values_[body.inputs[i].name] = inputs[i];
  for (const auto& [name, value] : body.initializers)
    values_[name] = g_.add_constant(unique_name(body.name + "." + name), value);
  convert_nodes(body.nodes, false);
  std::vector<Entry> outs;
  for (const OnnxValueInfo& v : body.outputs) outs.push_back(values_.at(v.name));
  values_ = std::move(saved);
  node = outer;
  return outs;
}

graph::Graph Converter::run() {
  // 0. Graph inputs and outputs hold tensors, or sequences of tensors (flattened into tensors);
  //    optionals, maps and sparse tensors are not computed.
  for (const std::vector<OnnxValueInfo>* vs : {&m_.inputs, &m_.outputs}) {
    for (const OnnxValueInfo& v : *vs) {
      KILN_USER_CHECK(v.kind.empty() || v.kind == "sequence")
          << "'" << m_.path << "': graph " << (vs == &m_.inputs ? "input" : "output") << " '"
          << v.name << "' is " << (v.kind == "optional" ? "an " : "a ") << v.kind
          << " value, which Kiln does not support yet (only tensors, sequences of tensors and "
             "optionals of these)";
    }
  }
  for (const std::string& name : opt_.empty_optional_inputs) {
    bool found = std::any_of(m_.inputs.begin(), m_.inputs.end(),
                             [&](const OnnxValueInfo& v) { return v.name == name && v.optional; });
    KILN_USER_CHECK(found) << "'" << m_.path << "': ImportOptions::empty_optional_inputs names '"
                           << name << "', which is not an optional-typed graph input of the model";
  }
  for (const auto& [name, shapes] : opt_.sequence_inputs) {
    bool found = std::any_of(m_.inputs.begin(), m_.inputs.end(), [&](const OnnxValueInfo& v) {
      return v.name == name && v.kind == "sequence";
    });
    KILN_USER_CHECK(found) << "'" << m_.path << "': ImportOptions::sequence_inputs names '" << name
                           << "', which is not a sequence-typed graph input of the model";
  }
  // 1. A valid graph (one producer per value, input counts per schema), and every operator
  //    supported (sub-graphs included)? Report all that are not, at once.
  validate_model(m_);
  std::vector<std::string> missing;
  find_unsupported(m_.nodes, missing);
  if (!missing.empty()) {
    std::ostringstream os;
    os << "'" << m_.path << "' uses " << missing.size() << " unsupported ONNX operator"
       << (missing.size() == 1 ? "" : "s") << ":";
    for (const std::string& s : missing) os << "\n  " << s;
    KILN_ERROR << os.str();
  }
  opset = m_.default_opset();
  // 2. Inputs and initializers. The names of flattened sequence elements are reserved first.
  for (const OnnxValueInfo& v : m_.inputs) used_.insert(v.name);
  for (const auto& [name, value] : m_.initializers) used_.insert(name);
  for (const OnnxValueInfo& v : m_.inputs) {
    if (v.optional && opt_.empty_optional_inputs.count(v.name)) {
      values_[v.name] = make_optional(std::nullopt);
      continue;
    }
    if (v.kind == "sequence") {
      add_sequence_input(v);
      if (v.optional) values_[v.name] = make_optional(values_.at(v.name));
      continue;
    }
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
        const OnnxDim& dim = v.shape[d];
        KILN_USER_CHECK(dim.size >= 0)
            << "'" << m_.path << "': input '" << v.name << "' dimension " << d
            << (!dim.param.empty() ? " is symbolic ('" + dim.param + "')"
                : dim.size < -1    ? " is negative (" + std::to_string(dim.size) + ")"
                                   : " has neither a value nor a name")
            << "; give the input's shape";
        shape.push_back(dim.size);
      }
    }
    values_[v.name] = g_.add_input(v.name, shape, v.dtype);
    if (v.optional) values_[v.name] = make_optional(values_.at(v.name));
  }
  for (const auto& [name, value] : m_.initializers) {
    values_[name] = g_.add_constant(name, value);
    used_.insert(name);
  }
  // 3. Nodes, in order.
  convert_nodes(m_.nodes, true);
  // 4. Outputs; a sequence gives one output per element. Each output is an op node of its own
  //    (an element may be a graph input, a constant, or appear twice).
  std::vector<Entry> heads;
  std::vector<std::string> head_names;
  std::set<Entry> taken;
  for (const OnnxValueInfo& v : m_.outputs) {
    Entry e = values_.at(v.name);
    if (is_optional(e)) {
      std::optional<Entry> held = optional_value(e);
      KILN_USER_CHECK(held) << "'" << m_.path << "': graph output '" << v.name
                            << "' is an empty optional value, which Kiln cannot return (outputs "
                               "are tensors)";
      e = *held;
    }
    if (!is_sequence(e)) {
      heads.push_back(e);
      head_names.push_back(v.name);
      taken.insert(e);
      continue;
    }
    KILN_USER_CHECK(opt_.flatten_sequence_outputs)
        << "'" << m_.path << "': graph output '" << v.name
        << "' is a sequence value, which Kiln does not support yet (only tensors) unless "
        << "ImportOptions::flatten_sequence_outputs is set (then its elements become outputs '"
        << v.name << ".0', '" << v.name << ".1', …)";
    const std::vector<Entry> items = sequence_items(e);
    for (size_t k = 0; k < items.size(); ++k) {
      std::string name = v.name + "." + std::to_string(k);
      Entry x = items[k];
      if (!g_.node(x.node).is_op() || taken.count(x))
        x = g_.add_op("identity", {x}, {}, unique_name(name));
      heads.push_back(x);
      head_names.push_back(name);
      taken.insert(x);
    }
  }
  g_.set_outputs(heads);
  g_.set_output_names(head_names);
  // The ops whose empty results were replaced by constants are dead: removed here, so that no
  // opt level compiles a kernel over an empty tensor.
  if (emptied_) {
    graph::Graph live = graph::dead_code_elimination(g_);
    live.set_output_names(head_names);  // passes keep the outputs, not their names
    return live;
  }
  return g_;
}

void Converter::add_sequence_input(const OnnxValueInfo& v) {
  auto given = opt_.sequence_inputs.find(v.name);
  KILN_USER_CHECK(given != opt_.sequence_inputs.end())
      << "'" << m_.path << "': graph input '" << v.name
      << "' is a sequence value, which Kiln does not support yet without its length and element "
      << "shapes: give them in ImportOptions::sequence_inputs (the elements become tensor inputs '"
      << v.name << ".0', '" << v.name << ".1', …)";
  KILN_USER_CHECK(!v.dtype.is_void())
      << "'" << m_.path << "': sequence input '" << v.name
      << "' does not declare its element type, or it is not a tensor type Kiln supports";
  std::vector<Entry> items;
  for (size_t k = 0; k < given->second.size(); ++k) {
    const Ints& shape = given->second[k];
    std::string name = v.name + "." + std::to_string(k);
    std::ostringstream where;
    where << "'" << m_.path << "': element " << k << " of sequence input '" << v.name << "'";
    for (int64_t d : shape)
      KILN_USER_CHECK(d >= 0) << where.str() << " has a negative dimension " << d;
    if (v.has_shape) {
      bool ok = v.shape.size() == shape.size();
      for (size_t d = 0; ok && d < shape.size(); ++d)
        ok = v.shape[d].size < 0 || v.shape[d].size == shape[d];
      if (!ok) {
        std::ostringstream decl;
        decl << "[";
        for (size_t d = 0; d < v.shape.size(); ++d)
          decl << (d ? ", " : "")
               << (v.shape[d].size >= 0 ? std::to_string(v.shape[d].size) : v.shape[d].param);
        decl << "]";
        KILN_ERROR << where.str() << " is given shape " << runtime::shape_str(shape)
                   << ", but the model declares its elements " << decl.str();
      }
    }
    KILN_USER_CHECK(!used_.count(name)) << where.str() << " would be the tensor input '" << name
                                        << "', but the model already has a value of that name";
    used_.insert(name);
    items.push_back(g_.add_input(name, shape, v.dtype));
  }
  values_[v.name] = make_sequence(std::move(items));
}

}  // namespace kiln::frontend::onnx_import

namespace kiln::frontend {

graph::Graph import_onnx(const OnnxModel& model, const ImportOptions& opt) {
  return onnx_import::Converter(model, opt).run();
}

graph::Graph import_onnx(const std::string& path, const ImportOptions& opt) {
  return import_onnx(load_onnx_model(path), opt);
}

std::vector<std::string> supported_onnx_ops() { return onnx_import::table().ops(); }

}  // namespace kiln::frontend
