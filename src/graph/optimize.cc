// The graph recipe: the passes in order, each through the shared instrumented runner
// (support/pass_runner.h) that times it, verifies the graph after it (Graph::verify), notes
// whether it changed anything (graph::structural_equal) and prints the graph to stderr when
// KILN_DUMP_AFTER names the pass (or is "all"). Every step keeps the graph's result names.

#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"

namespace kiln::graph {

namespace {

PassHooks<Graph> graph_hooks() {
  PassHooks<Graph> h;
  h.what = "graph";
  h.changed = [](const Graph& in, const Graph& out) { return !structural_equal(in, out); };
  h.verify = [](const Graph& g, const std::string& pass) { g.verify(pass); };
  h.print = [](const Graph& g) { return g.str(); };
  return h;
}

}  // namespace

Graph optimize(Graph g, const Target& target, const OptimizeOptions& opt) {
  PassRunner<Graph> p(graph_hooks(), opt);
  p.verify_input(g, "construction");
  auto step = [&](const char* name, const std::function<Graph(const Graph&)>& pass) {
    g = p.run(name, g, [&](const Graph& x) {
      Graph r = pass(x);
      if (r.outputs().size() == x.outputs().size()) r.set_output_names(x.output_names());
      return r;
    });
  };
  step("infer_types", infer_types);
  // A legalization, at every level: CPUs compute float16 graphs in float32.
  if (target.kind == "llvm") step("float16_in_float32", float16_in_float32);
  auto select = [&](const Graph& x) { return select_implementations(x, target); };
  if (opt.opt_level < 1) {
    step("select_implementations", select);
    return g;
  }
  step("quantize_realize", [&](const Graph& x) { return quantize_realize(x, target); });
  step("simplify", simplify);
  step("constant_folding", constant_folding);
  step("simplify", simplify);
  step("common_subexpression_elimination", common_subexpression_elimination);
  step("fold_batch_norm", fold_batch_norm);
  // Moves sink through the batch norms that fold_batch_norm just made element-wise; scales
  // that then meet their convolution fold into it.
  step("simplify", simplify);
  step("dead_code_elimination", dead_code_elimination);
  step("fold_batch_norm", fold_batch_norm);
  if (opt.opt_level >= 2) {
    step("alter_op_layout", [&](const Graph& x) { return alter_op_layout(x, target, opt.tuned); });
    step("infer_types", infer_types);
    // The reshapes the layout pass adds around a 1x1 convolution it runs as a matrix product
    // sink below the bias and activation after it, which then fuse into the product.
    step("simplify", simplify);
    // Weights packed once per node: identical packed copies (an LSTM's steps) merge.
    step("common_subexpression_elimination", common_subexpression_elimination);
  }
  step("dead_code_elimination", dead_code_elimination);
  step("select_implementations", select);
  return g;
}

Graph optimize(Graph g, int opt_level, const Target& target, TunedConfigs* tuned) {
  OptimizeOptions opt;
  opt.opt_level = opt_level;
  opt.tuned = tuned;
  return optimize(std::move(g), target, opt);
}

Graph optimize(Graph g, int opt_level) { return optimize(std::move(g), opt_level, Target::host()); }

}  // namespace kiln::graph
