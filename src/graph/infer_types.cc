// Type/shape inference: one forward walk over the node vector. Inputs and constants carry
// their types; for each op node the registry's definition checks the input count and the
// attributes (filling defaults) and its type rule computes the output types from the input
// types, which are already known because producers come first. Errors from a type rule are
// re-thrown prefixed with the node, so a shape mismatch names both shapes and the node.

#include <set>
#include <string>

#include "kiln/graph/op_registry.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"
#include "pass_util.h"

namespace kiln::graph {

Graph infer_types(const Graph& g) {
  Graph out = g;
  const OpRegistry& reg = OpRegistry::global();
  for (int i = 0; i < out.num_nodes(); ++i) {
    Node& n = out.mutable_node(i);
    if (!n.is_op()) continue;
    std::string where = "infer_types: " + detail::describe_node(out, i);
    const OpDef& def = reg.get(n.op, where);
    def.check_num_inputs(static_cast<int>(n.inputs.size()), where);
    n.attrs = def.normalize_attrs(n.attrs, where);
    std::vector<TensorType> in;
    for (const Entry& e : n.inputs) in.push_back(out.type_of(e));
    // bfloat16 is a storage type: LLVM cannot select its arithmetic on this target, so only
    // casts and data movement may touch it.
    static const std::set<std::string> kBfloat16Ops = {
        "cast",          "reshape", "flatten",      "transpose",
        "concat",        "squeeze", "unsqueeze",    "expand_dims",
        "strided_slice", "take",    "broadcast_to", "layout_transform",
        "split",         "copy",    "tile",         "reverse"};
    if (!kBfloat16Ops.count(n.op))
      for (const TensorType& t : in)
        KILN_USER_CHECK(!t.dtype.is_bfloat16())
            << where << ": bfloat16 arithmetic is not supported yet (only Cast to and from "
            << "bfloat16 and data movement such as reshape and transpose); cast to float32 first";
    std::vector<TensorType> types;
    try {
      types = def.infer(in, n.attrs);
    } catch (const Error& err) {
      std::string shapes;
      for (const TensorType& t : in) shapes += (shapes.empty() ? "" : ", ") + t.str();
      KILN_ERROR << where << " with inputs (" << shapes << "): " << err.what();
    }
    KILN_ICHECK(static_cast<int>(types.size()) == def.num_outputs)
        << where << ": type rule returned " << types.size() << " types";
    n.outputs = std::move(types);
  }
  return out;
}

}  // namespace kiln::graph
