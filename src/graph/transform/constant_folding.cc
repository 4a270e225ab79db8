// Constant folding: an op node whose inputs are all constants, or fold themselves, is evaluated
// at compile time: its registered compute is built on placeholders of its inputs' types,
// scheduled with the default te schedule and lowered; all folding nodes are compiled for the
// host as one module without LLVM optimization (kiln::build for "llvm -opt=0": these kernels
// run once, on small shape, index and mask tensors), then run in graph order on
// the constants' arrays, each output becoming a new constant node. A whole constant sub-graph
// (e.g. a shape computation) collapses in one pass.

#include <algorithm>
#include <map>
#include <set>

#include "kiln/graph/op_registry.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"
#include "kiln/target/build.h"
#include "kiln/te/schedule.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {

/// One folding node's kernel: its function name, output types and where its inputs come from
/// (a constant of the input graph, or an output of an earlier folding node).
struct FoldJob {
  std::string fn;
  std::vector<TensorType> outs;
};

/// Calls `fn` of `mod` on `args`, returning fresh arrays of `outs`' types.
std::vector<runtime::NDArray> run_fold(runtime::Module& mod, const FoldJob& job,
                                       const std::vector<runtime::NDArray>& args) {
  std::vector<runtime::NDArray> results;
  std::vector<KilnValue> values;
  std::vector<int32_t> codes;
  for (const runtime::NDArray& a : args) {
    KilnValue v{};
    v.v_handle = a.raw();
    values.push_back(v);
    codes.push_back(kKilnArrayHandle);
  }
  for (const TensorType& tt : job.outs) {
    results.push_back(runtime::NDArray::empty(tt.shape, tt.dtype));
    KilnValue v{};
    v.v_handle = results.back().raw();
    values.push_back(v);
    codes.push_back(kKilnArrayHandle);
  }
  mod.get_function(job.fn).call_packed(values.data(), codes.data(),
                                       static_cast<int32_t>(values.size()));
  return results;
}

}  // namespace

Graph constant_folding(const Graph& g) {
  const OpRegistry& reg = OpRegistry::global();
  // Which nodes fold: ops (not of data-dependent shape, ops_dynamic.cc) whose every input is a
  // constant or folds. Each one's compute is lowered, and all of them are compiled as one
  // module: one code generation for the pass, not one per node.
  std::vector<bool> folds(static_cast<size_t>(g.num_nodes()), false);
  std::map<int, FoldJob> jobs;
  std::vector<tir::PrimFunc> funcs;
  // Nodes with the same op, attributes and input types share one kernel (swin_t: 2,000 folded
  // nodes, a few dozen kernels: each block repeats its shape and mask computations).
  std::map<std::string, std::vector<std::pair<Attrs, std::string>>> kernels;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    bool foldable = n.is_op() && !n.inputs.empty();
    for (const Entry& e : n.inputs)
      foldable = foldable && (g.node(e.node).is_constant() || folds[static_cast<size_t>(e.node)]);
    if (const OpDef* d = foldable ? reg.find(n.op) : nullptr; d && d->bounded) foldable = false;
    if (!foldable) continue;
    folds[static_cast<size_t>(i)] = true;
    std::string where = "constant_folding: " + detail::describe_node(g, i);
    const OpDef& def = reg.get(n.op, where);
    FoldJob job{"fold_" + std::to_string(i), n.outputs};
    std::vector<TensorType> in_types;
    std::string key = n.op;
    for (const Entry& e : n.inputs) {
      in_types.push_back(g.type_of(e));
      key += " " + in_types.back().str();
    }
    std::vector<std::pair<Attrs, std::string>>& same = kernels[key];
    auto shared =
        std::find_if(same.begin(), same.end(), [&](const auto& k) { return k.first == n.attrs; });
    if (shared != same.end()) {
      job.fn = shared->second;
      jobs.emplace(i, std::move(job));
      continue;
    }
    same.emplace_back(n.attrs, job.fn);
    try {
      std::vector<te::Tensor> ins = placeholders_for(in_types);
      std::vector<te::Tensor> outs = def.compute(ins, n.attrs, "folded");
      std::vector<te::Tensor> params = ins;
      params.insert(params.end(), outs.begin(), outs.end());
      funcs.push_back(tir::lower(te::create_schedule(outs), params, job.fn));
    } catch (const Error& err) {
      KILN_ERROR << where << ": " << err.what();
    }
    jobs.emplace(i, std::move(job));
  }
  runtime::Module mod;
  if (!funcs.empty()) {
    // Each kernel runs once, mostly on small shape, index and mask tensors: LLVM without
    // optimization (swin_t's ~2,000 folded ops: 4 s of graph passes; 22 s at O1, 46 s at O3).
    static const Target host = Target::parse("llvm -opt=0");
    try {
      mod = build(funcs, host);
    } catch (const Error& err) {
      KILN_ERROR << "constant_folding: compiling " << funcs.size()
                 << " folded op(s): " << err.what();
    }
  }

  Graph out;
  detail::EntryMap map(g);
  std::set<std::string> names;
  for (const Node& n : g.nodes())
    if (!n.is_op()) names.insert(n.name);
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node n = map.remap(g.node(i));
    if (!folds[static_cast<size_t>(i)]) {
      int outs = n.num_outputs();
      map.set_node(i, out.add_node(std::move(n)), outs);
      continue;
    }
    // The inputs are constant nodes of `out` by now (folded ones included).
    std::string where = "constant_folding: " + detail::describe_node(g, i);
    std::vector<runtime::NDArray> args;
    for (const Entry& e : n.inputs) args.push_back(out.node(e.node).value);
    std::vector<runtime::NDArray> vals;
    try {
      vals = run_fold(mod, jobs.at(i), args);
    } catch (const Error& err) {
      KILN_ERROR << where << ": " << err.what();
    }
    std::string base = (n.name.empty() ? n.op : n.name) + "_folded";
    for (size_t k = 0; k < vals.size(); ++k) {
      std::string name = base;
      for (int c = 1; names.count(name); ++c) name = base + std::to_string(c);
      names.insert(name);
      KILN_ICHECK(type_of(vals[k]) == n.outputs[k])
          << where << ": folded value " << type_of(vals[k]).str() << " differs from the type "
          << n.outputs[k].str();
      map.set(i, static_cast<int>(k), out.add_constant(name, vals[k]));
    }
  }
  out.set_outputs(map.outputs(g));
  return out;
}

}  // namespace kiln::graph
