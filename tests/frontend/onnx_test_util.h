// Shared by the ONNX importer tests: compile an in-memory ONNX model for the host and run it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
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

}  // namespace kiln::frontend::test_util
