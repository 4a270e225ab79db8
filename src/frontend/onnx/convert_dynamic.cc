// ONNX importer: operators whose output shape depends on the data. NonZero, Unique and
// NonMaxSuppression map to the graph ops of ops_dynamic.cc, whose outputs have bounded,
// data-dependent shapes (graph.h, BoundedOutput); the ops' extra extent output is internal and
// maps to no ONNX output. NonMaxSuppression's optional scalar inputs may be runtime values; an
// absent one before a present one becomes its default constant (max_output_boxes_per_class 0,
// iou_threshold 0). Shape and Size read only their input's static type, which for such an
// output is the upper bound: they refuse one through check_static_shape, defined here (an op
// reading it as data is refused later, by build_module).
#include "converter.h"
#include "kiln/graph/op_registry.h"

namespace kiln::frontend::onnx_import {

void check_static_shape(const Converter& c, Entry e) {
  const graph::Node& n = c.graph().node(e.node);
  const graph::OpDef* def = n.is_op() ? graph::OpRegistry::global().find(n.op) : nullptr;
  if (!def || !def->bounded) return;
  std::vector<graph::TensorType> in;
  for (const Entry& x : n.inputs) in.push_back(c.known_type(x).value_or(graph::TensorType{}));
  for (const graph::BoundedOutput& b : def->bounded(in, n.attrs)) {
    c.unsupported_if(b.output == e.index, "reading the shape of the output of " + n.op + " '" +
                                              n.name + "', which depends on the data,");
  }
}

void register_dynamic_converters(ConvertTable& t) {
  t.add("NonZero", [](Converter& c) {
    c.unsupported_if(c.rank_of(c.in(0)) == 0, "NonZero of a scalar");
    Entry e = c.op("nonzero", {c.in(0)});
    return std::vector<Entry>{e};
  });
  t.add("Unique", [](Converter& c) {
    Attrs a;
    a.set("sorted", c.attr_int("sorted", 1));
    if (c.has_attr("axis")) {
      int rank = c.rank_of(c.in(0));
      KILN_USER_CHECK(rank >= 0) << c.where() << ": the rank of the input cannot be inferred";
      a.set("axis", Ints{norm_axis(c, c.attr_int("axis", 0), rank)});
    }
    Entry e = c.op("unique", {c.in(0)}, a);
    std::vector<Entry> outs;
    for (int k = 0; k < 4; ++k) outs.push_back(Entry{e.node, k});
    return outs;
  });
  t.add("NonMaxSuppression", [](Converter& c) {
    std::vector<Entry> ins{c.in(0), c.in(1)};
    size_t last = 1;
    for (size_t i = 2; i < 5; ++i)
      if (c.has_input(i)) last = i;
    for (size_t i = 2; i <= last; ++i) {
      if (c.has_input(i)) {
        ins.push_back(c.in(i));
      } else if (i == 2) {
        ins.push_back(c.constant("max_output_boxes_per_class", int64_array({0})));
      } else {
        ins.push_back(c.fill("iou_threshold", 0.0, DataType::Float(32), {1}));
      }
    }
    Attrs a;
    a.set("center_point_box", c.attr_int("center_point_box", 0));
    return std::vector<Entry>{c.op("non_max_suppression", ins, a)};
  });
}

}  // namespace kiln::frontend::onnx_import
