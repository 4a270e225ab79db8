// The graph recipe: the passes in order, each through one helper that runs the pass,
// verifies the result, and prints the graph to stderr when KILN_DUMP_AFTER names the pass
// (or is "all").

#include <cstdlib>
#include <functional>
#include <iostream>

#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"

namespace kiln::graph {

namespace {

Graph step(const char* name, const std::function<Graph(const Graph&)>& pass, const Graph& g) {
  Graph r = pass(g);
  if (r.outputs().size() == g.outputs().size()) r.set_output_names(g.output_names());
  r.verify(name);
  const char* dump = std::getenv("KILN_DUMP_AFTER");
  if (dump && (std::string(dump) == name || std::string(dump) == "all")) {
    std::cerr << "// graph after " << name << "\n" << r.str();
  }
  return r;
}

}  // namespace

Graph optimize(Graph g, int opt_level, const Target& target, TunedConfigs* tuned) {
  g.verify("construction");
  g = step("infer_types", infer_types, g);
  auto select = [&](const Graph& x) { return select_implementations(x, target); };
  if (opt_level < 1) return step("select_implementations", select, g);
  g = step("simplify", simplify, g);
  g = step("constant_folding", constant_folding, g);
  g = step("simplify", simplify, g);
  g = step("common_subexpression_elimination", common_subexpression_elimination, g);
  g = step("fold_batch_norm", fold_batch_norm, g);
  if (opt_level >= 2) {
    g = step(
        "alter_op_layout", [&](const Graph& x) { return alter_op_layout(x, target, tuned); }, g);
    g = step("infer_types", infer_types, g);
    // Weights packed once per node: identical packed copies (an LSTM's steps) merge.
    g = step("common_subexpression_elimination", common_subexpression_elimination, g);
  }
  g = step("dead_code_elimination", dead_code_elimination, g);
  return step("select_implementations", select, g);
}

Graph optimize(Graph g, int opt_level) { return optimize(std::move(g), opt_level, Target::host()); }

}  // namespace kiln::graph
