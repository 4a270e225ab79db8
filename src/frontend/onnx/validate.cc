// ONNX importer: checks of a parsed model that onnx.checker makes and the converters rely on,
// run before anything is converted. Every value has one producer (single static assignment): a
// graph input, an initializer or one node output, in its graph or an enclosing one (the last
// writer no longer wins silently). Every node of a domain whose operator schemas libonnx knows
// (ai.onnx, ai.onnx.preview.training) at the model's opset is given as many inputs and outputs
// as its schema allows, its required inputs present (extra inputs are no longer ignored). A
// model's opset newer than libonnx's schemas is not checked against them (the schemas would be
// older versions). Each failure is a user error naming the file, the node and the value.
#include <onnx/defs/schema.h>

#include <set>

#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

/// Names of the values defined in a graph and the graphs around it, with their producers.
struct Scope {
  const Scope* outer = nullptr;
  std::map<std::string, std::string> names;  ///< value -> what defines it

  const std::string* find(const std::string& v) const {
    for (const Scope* s = this; s; s = s->outer) {
      auto it = s->names.find(v);
      if (it != s->names.end()) return &it->second;
    }
    return nullptr;
  }
};

std::string node_text(const OnnxNode& n) { return "node '" + n.name + "' (" + n.op_type + ")"; }

void check_schema(const OnnxModel& m, const OnnxNode& n, const std::string& where) {
  std::string domain = n.domain.empty() ? std::string(onnx::ONNX_DOMAIN) : n.domain;
  auto ver = m.opsets.find(n.domain);
  if (ver == m.opsets.end()) return;
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto range = known.find(domain);
  if (range == known.end() || ver->second > range->second.second) return;
  const onnx::OpSchema* s =
      onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(ver->second), domain);
  if (!s) return;
  std::string op = n.op_type + " (opset " + std::to_string(ver->second) + ")";
  int given = static_cast<int>(n.inputs.size());
  KILN_USER_CHECK(given <= s->max_input()) << where << ": " << given << " inputs given, but " << op
                                           << " takes at most " << s->max_input();
  KILN_USER_CHECK(given >= s->min_input())
      << where << ": " << given << " input" << (given == 1 ? "" : "s") << " given, but " << op
      << " needs at least " << s->min_input();
  const auto& formal = s->inputs();
  for (size_t i = 0; i < n.inputs.size() && !formal.empty(); ++i) {
    const auto& f = formal[std::min(i, formal.size() - 1)];
    KILN_USER_CHECK(!n.inputs[i].empty() || f.GetOption() != onnx::OpSchema::Single)
        << where << ": input " << i << " ('" << f.GetName() << "') of " << op
        << " is required, but it is omitted (an empty name)";
  }
  int outs = static_cast<int>(n.outputs.size());
  KILN_USER_CHECK(outs <= s->max_output())
      << where << ": " << outs << " outputs, but " << op << " has at most " << s->max_output();
}

void check_graph(const OnnxModel& m, const std::string& what,
                 const std::vector<OnnxValueInfo>& inputs,
                 const std::map<std::string, runtime::NDArray>& initializers,
                 const std::vector<OnnxNode>& nodes, const Scope* outer) {
  Scope scope{outer, {}};
  for (const OnnxValueInfo& v : inputs) {
    KILN_USER_CHECK(!scope.names.count(v.name))
        << what << ": graph input '" << v.name << "' is declared twice";
    scope.names[v.name] = "graph input '" + v.name + "'";
  }
  for (const auto& [name, value] : initializers) {
    KILN_USER_CHECK(!scope.names.count(name))
        << what << ": initializer '" << name << "' has the name of a graph input";
    scope.names[name] = "initializer '" + name + "'";
  }
  for (const OnnxNode& n : nodes) {
    std::string where = what + ", " + node_text(n);
    check_schema(m, n, where);
    for (const auto& [attr, body] : n.subgraphs) {
      if (!body) continue;
      check_graph(m, what + ", sub-graph '" + n.name + "." + attr + "'", body->inputs,
                  body->initializers, body->nodes, &scope);
    }
    for (const std::string& o : n.outputs) {
      if (o.empty()) continue;
      const std::string* before = scope.find(o);
      KILN_USER_CHECK(!before) << where << ": output '" << o << "' is already written by "
                               << *before
                               << " (every ONNX value has one producer; a model that writes a "
                                  "value twice is invalid)";
      scope.names[o] = node_text(n);
    }
  }
}

}  // namespace

void validate_model(const OnnxModel& m) {
  check_graph(m, "'" + m.path + "'", m.inputs, m.initializers, m.nodes, nullptr);
}

}  // namespace kiln::frontend::onnx_import
