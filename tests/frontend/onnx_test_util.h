// Shared by the ONNX importer tests: compile an in-memory ONNX model for the host and run it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"

namespace kiln::frontend::test_util {

/// Imports `m`, compiles it for the host at the default level, runs it on `inputs` (by graph
/// input name) and returns the outputs in order; `imported`, when given, receives the imported
/// graph.
inline std::vector<runtime::NDArray> run(const OnnxModel& m,
                                         const std::map<std::string, runtime::NDArray>& inputs,
                                         graph::Graph* imported = nullptr) {
  graph::Graph g = import_onnx(m);
  if (imported) *imported = g;
  graph::CompiledModule cm = graph::build_module(g, Target::host(), {});
  runtime::GraphExecutor ex = runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m");
  for (const auto& [name, v] : inputs) ex.set_input(name, v);
  ex.run();
  std::vector<runtime::NDArray> out;
  for (int i = 0; i < ex.num_outputs(); ++i) out.push_back(ex.get_output(i));
  return out;
}

/// `got` is float32 of `shape` and within atol + rtol * |want| of `want` element by element
/// (the first five misses are reported, prefixed with `what`).
inline void expect_close_to(const runtime::NDArray& got, const std::vector<float>& want,
                            const std::vector<int64_t>& shape, float atol, float rtol,
                            const std::string& what = "") {
  ASSERT_EQ(got.shape(), shape) << what;
  ASSERT_EQ(got.dtype(), DataType::Float(32)) << what;
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    float g = got.data_as<float>()[i];
    if (!(std::abs(g - want[i]) <= atol + rtol * std::abs(want[i])) && bad++ < 5)
      ADD_FAILURE() << what << (what.empty() ? "" : " ") << "element " << i << ": got " << g
                    << ", expected " << want[i];
  }
}

/// A value info that only names a value (no type): graph outputs and sub-graph inputs/outputs.
inline OnnxValueInfo named(const std::string& name) {
  return OnnxValueInfo{name, DataType::Void(), false, {}, ""};
}

/// A node of type `op` named "<op>_<first output>".
inline OnnxNode node(const std::string& op, std::vector<std::string> in,
                     std::vector<std::string> out, std::map<std::string, OnnxAttr> attrs = {}) {
  OnnxNode n;
  n.op_type = op;
  n.name = op + "_" + out[0];
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attrs = std::move(attrs);
  return n;
}

/// A sub-graph (an If branch, a Loop or Scan body) with named inputs and outputs.
inline std::shared_ptr<const OnnxGraph> graph(const std::string& name, std::vector<std::string> ins,
                                              std::vector<OnnxNode> nodes,
                                              std::vector<std::string> outs,
                                              std::map<std::string, runtime::NDArray> inits = {}) {
  auto g = std::make_shared<OnnxGraph>();
  g->name = name;
  for (const std::string& s : ins) g->inputs.push_back(named(s));
  for (const std::string& s : outs) g->outputs.push_back(named(s));
  g->nodes = std::move(nodes);
  g->initializers = std::move(inits);
  return g;
}

/// `n` with graph attribute `attr` set to `g`.
inline OnnxNode with_body(OnnxNode n, const std::string& attr, std::shared_ptr<const OnnxGraph> g) {
  n.has_subgraph = true;
  n.subgraphs[attr] = std::move(g);
  return n;
}

}  // namespace kiln::frontend::test_util
