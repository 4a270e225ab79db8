// Constant folding: one forward walk. An op node whose (mapped) inputs are all constant nodes
// is evaluated now: its registered compute is built on placeholders of the constants' types,
// scheduled with the default te schedule, compiled for the host with kiln::build and run on
// the constants' arrays; each output becomes a new constant node. Because the walk maps
// inputs before looking at a node, a node fed by folded nodes folds in turn, so a whole
// constant sub-graph (e.g. a shape computation) collapses in one pass.

#include <set>

#include "kiln/graph/op_registry.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"
#include "kiln/target/build.h"
#include "kiln/te/schedule.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {

std::vector<runtime::NDArray> evaluate(const OpDef& def, const Node& n,
                                       const std::vector<runtime::NDArray>& args) {
  std::vector<TensorType> in_types;
  for (const runtime::NDArray& a : args) in_types.push_back(type_of(a));
  std::vector<te::Tensor> ins = placeholders_for(in_types);
  std::vector<te::Tensor> outs = def.compute(ins, n.attrs, "folded");
  std::vector<te::Tensor> params = ins;
  params.insert(params.end(), outs.begin(), outs.end());
  static const Target host = Target::parse("llvm");
  runtime::Module mod = build(te::create_schedule(outs), params, host, "fold");
  std::vector<runtime::NDArray> results;
  std::vector<KilnValue> values;
  std::vector<int32_t> codes;
  for (const runtime::NDArray& a : args) {
    KilnValue v{};
    v.v_handle = a.raw();
    values.push_back(v);
    codes.push_back(kKilnArrayHandle);
  }
  for (const te::Tensor& t : outs) {
    TensorType tt = tensor_type(t);
    results.push_back(runtime::NDArray::empty(tt.shape, tt.dtype));
    KilnValue v{};
    v.v_handle = results.back().raw();
    values.push_back(v);
    codes.push_back(kKilnArrayHandle);
  }
  mod.get_function("fold").call_packed(values.data(), codes.data(),
                                       static_cast<int32_t>(values.size()));
  return results;
}

}  // namespace

Graph constant_folding(const Graph& g) {
  Graph out;
  detail::EntryMap map(g);
  std::set<std::string> names;
  for (const Node& n : g.nodes())
    if (!n.is_op()) names.insert(n.name);
  const OpRegistry& reg = OpRegistry::global();
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node n = map.remap(g.node(i));
    bool foldable = n.is_op() && !n.inputs.empty();
    for (const Entry& e : n.inputs) foldable = foldable && out.node(e.node).is_constant();
    if (const OpDef* d = foldable ? reg.find(n.op) : nullptr; d && d->bounded)
      foldable = false;  // a data-dependent shape stays for the executor (ops_dynamic.cc)
    if (!foldable) {
      int outs = n.num_outputs();
      map.set_node(i, out.add_node(std::move(n)), outs);
      continue;
    }
    std::string where = "constant_folding: " + detail::describe_node(g, i);
    const OpDef& def = reg.get(n.op, where);
    std::vector<runtime::NDArray> args;
    for (const Entry& e : n.inputs) args.push_back(out.node(e.node).value);
    std::vector<runtime::NDArray> vals;
    try {
      vals = evaluate(def, n, args);
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
