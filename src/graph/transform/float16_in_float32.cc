// float16 computed in float32: CPUs have no float16 arithmetic (LLVM converts every element to
// float32 and back around each operation: ResNet-18 in float16 ran 47x slower than in float32,
// and rounded every intermediate), so a float16 graph runs in float32 and keeps its float16
// interface. One forward walk:
//   float16 input x               → x, then cast(x, float32) for its readers
//   float16 constant              → the same values as float32 (exact)
//   cast(x, float16)              → cast(cast(x, float16), float32): the model's own rounding
//                                   to float16 stays (any op whose dtype attribute says
//                                   float16: cast is the one)
//   any other op                  → the same op; its float16 outputs become float32 when the
//                                   graph is typed again
//   float16 result                → cast(·, float16)
// The results differ from float16 arithmetic only by being more accurate (one rounding to
// float16 at the end instead of one per operation).

#include "kiln/graph/transform.h"
#include "kiln/support/half.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {

const DataType kF16 = DataType::Float(16), kF32 = DataType::Float(32);

bool has_float16(const Graph& g) {
  for (const Node& n : g.nodes())
    for (const TensorType& t : n.outputs)
      if (t.dtype == kF16) return true;
  return false;
}

}  // namespace

Graph float16_in_float32(const Graph& g) {
  if (!has_float16(g)) return g;
  Graph out;
  detail::EntryMap map(g);
  detail::NameGen names(g);
  auto cast = [&](Entry x, DataType t, const std::string& name) {
    Node c;
    c.op = "cast";
    c.name = name;
    c.attrs.set("dtype", t.str());
    c.inputs = {x};
    c.outputs = {TensorType{out.type_of(x).shape, t}};
    return Entry{out.add_node(std::move(c)), 0};
  };
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_input()) {
      const int m = out.add_node(n);
      map.set_node(i, m, n.num_outputs());
      if (n.outputs[0].dtype == kF16) map.set(i, 0, cast(Entry{m, 0}, kF32, n.name + "_float32"));
      continue;
    }
    if (n.is_constant() && n.value.defined() && n.value.dtype() == kF16) {
      runtime::NDArray v = runtime::NDArray::empty(n.value.shape(), kF32);
      const uint16_t* src = n.value.data_as<uint16_t>();
      float* dst = v.data_as<float>();
      for (int64_t k = 0; k < v.numel(); ++k) dst[k] = support::half_to_float(src[k]);
      map.set(i, 0, out.add_constant(n.name, std::move(v)));
      continue;
    }
    Node r = map.remap(n);
    if (r.is_op()) {
      for (TensorType& t : r.outputs)
        if (t.dtype == kF16) t.dtype = kF32;
      if (r.attrs.has("dtype") && DataType::parse(r.attrs.get_string("dtype")) == kF16) {
        // An op that makes float16 by its dtype attribute (a cast): the model's own rounding
        // to float16, back in float32.
        Node c = r;
        c.name = names(r.name + "_to_float16");
        c.outputs = {TensorType{r.outputs[0].shape, kF16}};
        Entry h{out.add_node(std::move(c)), 0};
        map.set(i, 0, cast(h, kF32, r.name));
        continue;
      }
    }
    map.set_node(i, out.add_node(std::move(r)), n.num_outputs());
  }
  std::vector<Entry> results = map.outputs(g);
  for (size_t k = 0; k < results.size(); ++k)
    if (g.type_of(g.outputs()[k]).dtype == kF16)
      results[k] = cast(results[k], kF16, names("result" + std::to_string(k) + "_float16"));
  out.set_outputs(results);
  return infer_types(out);
}

}  // namespace kiln::graph
