// Type/shape inference: one forward walk over the node vector. Inputs and constants carry
// their types; for each op node the registry's definition checks the input count and the
// attributes (filling defaults) and its type rule computes the output types from the input
// types, which are already known because producers come first. Errors from a type rule are
// re-thrown prefixed with the node, so a shape mismatch names both shapes and the node.
// Every type (inputs, constants, op outputs) is checked for negative extents and for more
// elements than 32-bit indices reach, with overflow-safe products, before any later pass loops
// over it; then the op's own check (OpDef::check: a Gather's constant indices against the
// axis).

#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "kiln/graph/op_registry.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {

/// Generated code indexes every tensor with 32-bit integers (flattened), so no tensor may hold
/// more than 2^31 - 1 elements; this also keeps every byte size far inside int64.
constexpr int64_t kMaxElements = std::numeric_limits<int32_t>::max();

/// A user error naming `what` (a node's output or an input) when `t` has a negative extent or
/// more elements than kMaxElements. Overflow-safe: the product is checked before each step.
void check_extents(const TensorType& t, const std::string& where, const std::string& what) {
  int64_t n = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const int64_t e = t.shape[d];
    KILN_USER_CHECK(e >= 0) << where << ": " << what << " has shape " << t.str()
                            << " with a negative extent " << e << " in dimension " << d;
    KILN_USER_CHECK(e <= kMaxElements && (e == 0 || n <= kMaxElements / e))
        << where << ": " << what << " has shape " << t.str() << ", more than " << kMaxElements
        << " (2^31 - 1) elements, the largest tensor Kiln supports (32-bit indices)";
    n *= e;
  }
}

/// Integer attributes (padding, strides, dilations, kernel sizes, axes, …) become 32-bit
/// constants in the generated index arithmetic, so each must fit in int32; a larger value (a
/// Conv with pads 2^40) is a user error here rather than a silent truncation later. Attributes
/// the schema marks `wide` are exempt (slice bounds: ONNX writes INT64_MAX for "to the end"
/// and topi clamps them).
void check_int_attrs(const OpDef& def, const Node& n, const std::string& where) {
  constexpr int64_t lo = std::numeric_limits<int32_t>::min(), hi = kMaxElements;
  for (const auto& [name, v] : n.attrs.map()) {
    const AttrSpec* spec = def.find_attr(name);
    if (spec && spec->wide) continue;
    auto check = [&](int64_t x) {
      KILN_USER_CHECK(x >= lo && x <= hi)
          << where << ": attribute '" << name << "' = " << attr_value_str(v) << " holds " << x
          << ", outside the 32-bit range [" << lo << ", " << hi << "] of Kiln's index arithmetic";
    };
    if (const int64_t* i = std::get_if<int64_t>(&v)) check(*i);
    if (const auto* is = std::get_if<std::vector<int64_t>>(&v))
      for (int64_t x : *is) check(x);
  }
}

}  // namespace

Graph infer_types(const Graph& g) {
  Graph out = g;
  infer_types_from(out, 0);
  return out;
}

void infer_types_from(Graph& out, int first) {
  const OpRegistry& reg = OpRegistry::global();
  for (int i = first; i < out.num_nodes(); ++i) {
    Node& n = out.mutable_node(i);
    if (!n.is_op()) {
      if (!n.outputs.empty())
        check_extents(n.outputs[0], "infer_types: " + detail::describe_node(out, i),
                      n.is_input() ? "input '" + n.name + "'" : "constant '" + n.name + "'");
      continue;
    }
    std::string where = "infer_types: " + detail::describe_node(out, i);
    const OpDef& def = reg.get(n.op, where);
    def.check_num_inputs(static_cast<int>(n.inputs.size()), where);
    n.attrs = def.normalize_attrs(n.attrs, where);
    check_int_attrs(def, n, where);
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
    for (size_t o = 0; o < types.size(); ++o)
      check_extents(types[o], where, "output " + std::to_string(o));
    if (def.check) def.check(out, n, in, where);
    n.outputs = std::move(types);
  }
}

}  // namespace kiln::graph
