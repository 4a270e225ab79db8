// Graph ops: ops whose output shape depends on the data. nonzero, unique and
// non_max_suppression compute through topi/dynamic.h; each declares its bounded outputs (graph.h,
// BoundedOutput): the output's type holds an upper bound along one axis and a last int64 [1]
// output holds the actual extent. build_module records them in the graph JSON ("bounded"), and
// rejects a static-shape op reading one; the graph executor exposes them with their actual
// shapes. topk (static shapes) sorts in the runtime too.

#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"
#include "kiln/topi/dynamic.h"

namespace kiln::graph {

void register_dynamic_ops(OpRegistry& r) {
  // nonzero(x) -> (indices int64 [rank, <= numel], extent int64 [1]).
  OpDef nz;
  nz.name = "nonzero";
  nz.num_outputs = 2;
  nz.pattern = topi::OpPattern::kOpaque;
  nz.bounded = [](const std::vector<TensorType>&, const Attrs&) {
    return std::vector<BoundedOutput>{{0, 1, 1}};
  };
  nz.compute = [](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    return topi::nonzero(in[0], n);
  };
  r.add(nz);

  // unique(x, axis=[] (flatten) or [a], sorted) -> (y, indices, inverse_indices, counts, extent);
  // y, indices and counts are bounded by the extent (y along the axis, or axis 0 flattened).
  OpDef u;
  u.name = "unique";
  u.num_outputs = 5;
  u.pattern = topi::OpPattern::kOpaque;
  u.attrs = {{"axis", AttrKind::kInts, std::vector<int64_t>{}}, {"sorted", AttrKind::kInt, 1}};
  u.bounded = [](const std::vector<TensorType>& in, const Attrs& a) {
    const std::vector<int64_t>& ax = a.get_ints("axis");
    int64_t rank = static_cast<int64_t>(in.at(0).shape.size());
    int axis = ax.empty() ? 0 : static_cast<int>(ax[0] < 0 ? ax[0] + rank : ax[0]);
    return std::vector<BoundedOutput>{{0, axis, 4}, {1, 0, 4}, {3, 0, 4}};
  };
  u.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    const std::vector<int64_t>& ax = a.get_ints("axis");
    KILN_USER_CHECK(ax.size() <= 1)
        << "unique: 'axis' holds at most one axis, got " << attr_value_str(ax);
    std::optional<int64_t> axis;
    if (!ax.empty()) axis = ax[0];
    return topi::unique(in[0], axis, a.get_int("sorted") != 0, n);
  };
  r.add(u);

  // non_max_suppression(boxes, scores[, max_output_boxes_per_class[, iou_threshold[,
  // score_threshold]]]) -> (selected int64 [<= B*C*N, 3], extent int64 [1]).
  OpDef nms;
  nms.name = "non_max_suppression";
  nms.min_inputs = 2;
  nms.max_inputs = 5;
  nms.num_outputs = 2;
  nms.pattern = topi::OpPattern::kOpaque;
  nms.attrs = {{"center_point_box", AttrKind::kInt, int64_t{0}}};
  nms.bounded = [](const std::vector<TensorType>&, const Attrs&) {
    return std::vector<BoundedOutput>{{0, 0, 1}};
  };
  nms.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    auto opt = [&](size_t i) { return i < in.size() ? in[i] : te::Tensor(); };
    return topi::non_max_suppression(in[0], in[1], opt(2), opt(3), opt(4),
                                     a.get_int("center_point_box"), n);
  };
  r.add(nms);

  // topk(x; k, axis, largest) -> (values, indices int64): static shapes, a sort in the runtime.
  OpDef tk;
  tk.name = "topk";
  tk.num_outputs = 2;
  tk.pattern = topi::OpPattern::kOpaque;
  tk.attrs = {{"k", AttrKind::kInt, std::nullopt},
              {"axis", AttrKind::kInt, int64_t{-1}},
              {"largest", AttrKind::kInt, int64_t{1}}};
  tk.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return topi::topk(in[0], a.get_int("k"), a.get_int("axis"), a.get_int("largest") != 0, n);
  };
  r.add(tk);
  // topk_ranks: the same, as te computes (GPU targets rewrite topk into it: strategy/gpu.cc).
  OpDef tr = tk;
  tr.name = "topk_ranks";
  tr.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return topi::topk_by_rank(in[0], a.get_int("k"), a.get_int("axis"), a.get_int("largest") != 0,
                              n);
  };
  r.add(tr);
}

}  // namespace kiln::graph
