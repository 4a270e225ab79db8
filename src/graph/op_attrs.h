// Private to the op registrations (ops_nn.cc, ops_layout.cc) and the passes that build their
// attributes: the convolution and pooling attributes of a node, read into topi's structs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/topi/nn_util.h"
#include "kiln/topi/pooling.h"

namespace kiln::graph::detail {

/// A 2-element attribute (a single value stands for both): strides, dilation, pool_size. A
/// user error naming the op and the attribute otherwise.
std::pair<int64_t, int64_t> pair_attr(const Attrs& a, const std::string& key,
                                      const std::string& op);

/// strides / padding / dilation / groups (groups 1 when absent) of a convolution node.
topi::Conv2DParams conv_params(const Attrs& a, const std::string& op = "conv2d");

/// pool_size / strides / padding / dilation / ceil_mode / count_include_pad of a pooling node.
topi::Pool2DAttrs pool_attrs(const Attrs& a, const std::string& op);

}  // namespace kiln::graph::detail
