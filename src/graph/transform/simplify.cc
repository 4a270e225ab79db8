// Algebraic simplification: one forward walk that, for each op node (inputs already mapped),
// either forwards one of its inputs in its place or rewrites it, looking only at the node
// and its producers in the graph being built:
//   identity(x), dropout(x)                     → x
//   reshape(x) to x's own shape                  → x
//   reshape(reshape(x))                          → reshape(x) (or x)
//   transpose(x) by the identity permutation     → x
//   transpose(transpose(x, q), p)                → transpose(x, q∘p) (or x)
//   x·1, 1·x, x/1, x+0, 0+x, x−0, x^1            → x   (constant all ones / zeros, and only
//                                                       when the result has x's type)
//   x^2                                          → x·x (likewise)
// Because rewritten nodes are themselves seen by their consumers, chains collapse fully in
// one pass. Bypassed nodes are left for dead_code_elimination.

#include <numeric>

#include "kiln/graph/transform.h"
#include "kiln/support/error.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {

/// True when `e` is a constant whose every element equals `v`.
bool is_constant_all(const Graph& g, Entry e, double v) {
  const Node& n = g.node(e.node);
  if (!n.is_constant()) return false;
  const runtime::NDArray& a = n.value;
  DataType t = a.dtype();
  int64_t num = a.numel();
  if (num == 0) return false;
  auto all = [&](auto* p) {
    for (int64_t i = 0; i < num; ++i)
      if (static_cast<double>(p[i]) != v) return false;
    return true;
  };
  if (t == DataType::Float(32)) return all(a.data_as<float>());
  if (t == DataType::Float(64)) return all(a.data_as<double>());
  if (t == DataType::Int(32)) return all(a.data_as<int32_t>());
  if (t == DataType::Int(64)) return all(a.data_as<int64_t>());
  return false;
}

/// The permutation of a transpose node (empty axes: reversed; negative axes wrapped).
std::vector<int64_t> permutation(const Node& n, size_t rank) {
  std::vector<int64_t> p = n.attrs.has("axes") ? n.attrs.get_ints("axes") : std::vector<int64_t>{};
  if (p.empty()) {
    for (size_t i = 0; i < rank; ++i) p.push_back(static_cast<int64_t>(rank - 1 - i));
  }
  for (int64_t& x : p)
    if (x < 0) x += static_cast<int64_t>(rank);
  return p;
}

bool is_identity_perm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

/// What to do with a node: forward an existing entry, or add `node` (possibly rewritten).
struct Rewrite {
  bool forward = false;
  Entry entry;
};

Rewrite simplify_node(const Graph& out, Node& n) {
  auto fwd = [](Entry e) { return Rewrite{true, e}; };
  const std::string& op = n.op;
  if (op == "identity" || op == "dropout") return fwd(n.inputs[0]);
  if (op == "reshape") {
    Entry x = n.inputs[0];
    if (out.type_of(x) == n.outputs[0]) return fwd(x);
    const Node& p = out.node(x.node);
    if (p.is_op() && p.op == "reshape") {
      Entry inner = p.inputs[0];
      if (out.type_of(inner) == n.outputs[0]) return fwd(inner);
      n.inputs[0] = inner;
      n.attrs.set("newshape", n.outputs[0].shape);
    }
    return {};
  }
  if (op == "transpose") {
    Entry x = n.inputs[0];
    size_t rank = out.type_of(x).shape.size();
    std::vector<int64_t> perm = permutation(n, rank);
    if (is_identity_perm(perm)) return fwd(x);
    const Node& p = out.node(x.node);
    if (p.is_op() && p.op == "transpose") {
      std::vector<int64_t> q = permutation(p, rank), c(rank);
      for (size_t d = 0; d < rank; ++d) c[d] = q[static_cast<size_t>(perm[d])];
      if (is_identity_perm(c)) return fwd(p.inputs[0]);
      n.inputs[0] = p.inputs[0];
      n.attrs.set("axes", c);
    }
    return {};
  }
  bool binary = n.inputs.size() == 2;
  if (!binary) return {};
  Entry a = n.inputs[0], b = n.inputs[1];
  auto same = [&](Entry e) { return out.type_of(e) == n.outputs[0]; };
  if (op == "multiply") {
    if (is_constant_all(out, b, 1.0) && same(a)) return fwd(a);
    if (is_constant_all(out, a, 1.0) && same(b)) return fwd(b);
  } else if (op == "add") {
    if (is_constant_all(out, b, 0.0) && same(a)) return fwd(a);
    if (is_constant_all(out, a, 0.0) && same(b)) return fwd(b);
  } else if (op == "subtract") {
    if (is_constant_all(out, b, 0.0) && same(a)) return fwd(a);
  } else if (op == "divide") {
    if (is_constant_all(out, b, 1.0) && same(a)) return fwd(a);
  } else if (op == "power" && same(a)) {
    if (is_constant_all(out, b, 1.0)) return fwd(a);
    if (is_constant_all(out, b, 2.0)) {  // x·x is pow(x, 2) correctly rounded, without libm
      n.op = "multiply";
      n.inputs = {a, a};
    }
  }
  return {};
}

}  // namespace

Graph simplify(const Graph& g) {
  Graph out;
  detail::EntryMap map(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node n = map.remap(g.node(i));
    if (n.is_op()) {
      for (const TensorType& t : n.outputs) {
        KILN_USER_CHECK(t.known())
            << "simplify: " << detail::describe_node(g, i) << " has no type; run infer_types first";
      }
      Rewrite r = simplify_node(out, n);
      if (r.forward) {
        map.set(i, 0, r.entry);
        continue;
      }
    }
    int outs = n.num_outputs();
    map.set_node(i, out.add_node(std::move(n)), outs);
  }
  out.set_outputs(map.outputs(g));
  return out;
}

}  // namespace kiln::graph
