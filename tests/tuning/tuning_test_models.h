/// \file tuning_test_models.h
/// \brief Small models the tuning tests build (tests/tuning only).
#pragma once

#include <random>

#include "graph/graph_test_util.h"
#include "kiln/graph/graph.h"

namespace kiln::tuning::test_models {

/// x [1, 32, 6, 6] → conv 3x3 (32→32, "conv1") → relu → conv 1x1 (32→32, "conv2") → add(x). (6x6
/// outputs: too small for Winograd, so each conv is one direct task.)
inline graph::Graph two_convs(std::mt19937& rng) {
  using graph::Entry;
  using Ints = std::vector<int64_t>;
  const DataType f32 = DataType::Float(32);
  graph::Graph g;
  Entry x = g.add_input("x", {1, 32, 6, 6}, f32);
  Entry a = g.add_op("conv2d",
                     {x, g.add_constant("w1", graph::test_util::random_array({32, 32, 3, 3}, rng))},
                     {{"padding", Ints{1, 1, 1, 1}}}, "conv1");
  Entry b = g.add_op("conv2d",
                     {g.add_op("relu", {a}),
                      g.add_constant("w2", graph::test_util::random_array({32, 32, 1, 1}, rng))},
                     {}, "conv2");
  g.add_output(g.add_op("add", {b, x}));
  return g;
}

}  // namespace kiln::tuning::test_models
