// Private to the op registrations (ops_nn.cc, ops_layout.cc) and the passes that build their
// attributes: the convolution and pooling attributes of a node, read into topi's structs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/graph/op_registry.h"
#include "kiln/topi/nn_util.h"
#include "kiln/topi/pooling.h"

namespace kiln::graph::detail {

/// A 2-element attribute (a single value stands for both): strides, dilation, pool_size. A
/// user error naming the op and the attribute otherwise.
std::pair<int64_t, int64_t> pair_attr(const Attrs& a, const std::string& key,
                                      const std::string& op);

/// strides / padding / dilation / groups (groups 1 when absent) of a convolution node.
topi::Conv2DParams conv_params(const Attrs& a, const std::string& op = "conv2d");

/// A conv2d node's `exact` (its sums must be the direct convolution's: a quantized product's
/// integer sums computed in float; false when absent).
inline bool exact_sums(const Attrs& a) { return a.has("exact") && a.get_int("exact") != 0; }

/// The attribute schema conv_params reads: strides (default 1, 1), padding (0, 0, 0, 0),
/// dilation (1, 1), and groups (1) unless the op implies them.
inline std::vector<AttrSpec> conv2d_attr_specs(bool with_groups = true) {
  using Ints = std::vector<int64_t>;
  std::vector<AttrSpec> s = {{"strides", AttrKind::kInts, Ints{1, 1}},
                             {"padding", AttrKind::kInts, Ints{0, 0, 0, 0}},
                             {"dilation", AttrKind::kInts, Ints{1, 1}}};
  if (with_groups) s.push_back({"groups", AttrKind::kInt, int64_t{1}});
  return s;
}

/// pool_size / strides / padding / dilation / ceil_mode / count_include_pad of a pooling node.
topi::Pool2DAttrs pool_attrs(const Attrs& a, const std::string& op);

}  // namespace kiln::graph::detail
