// Shared by the graph tests: seeded random arrays, and a graph built at two opt levels, run on
// the same random inputs through the GraphExecutor and compared output by output.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"

namespace kiln::graph::test_util {

/// A float32 array of `shape` with values uniform in [lo, hi).
inline runtime::NDArray random_array(std::vector<int64_t> shape, std::mt19937& rng, float lo = -1,
                                     float hi = 1) {
  runtime::NDArray a = runtime::NDArray::empty(std::move(shape), DataType::Float(32));
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = d(rng);
  return a;
}

/// The host's fp32 vector lanes (16 with AVX-512, 8 with AVX2): the default channel block of
/// the blocked layouts, which golden graph text on this machine holds.
inline int64_t host_lanes() { return std::max(1, Target::host().vector_bits() / 32); }

/// What comparing two builds of one graph found.
struct LevelComparison {
  double max_err = 0;  ///< max over all outputs of |a - b| / (1 + |a|), a from opt_level 0
  int kernels0 = 0;    ///< distinct kernels at opt_level 0
  int kernels = 0;     ///< ... and at the other level
};

/// Builds `g` at opt_level 0 and `level`, runs both on the same seeded random inputs, and
/// compares every output (shapes must agree; the optimized values must be finite).
inline LevelComparison compare_with_unoptimized(const Graph& g, int level, uint32_t seed) {
  CompiledModule m0 = build_module(g, Target::host(), BuildOptions{0, true});
  CompiledModule m = build_module(g, Target::host(), BuildOptions{level, true});
  auto e0 = runtime::GraphExecutor::create(m0.graph_json, m0.lib, m0.params);
  auto e = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  std::mt19937 rng(seed);
  for (int i : g.input_nodes()) {
    runtime::NDArray v = random_array(g.node(i).outputs[0].shape, rng);
    e0.set_input(g.node(i).name, v);
    e.set_input(g.node(i).name, v);
  }
  e0.run();
  e.run();
  LevelComparison r{0, m0.num_kernels, m.num_kernels};
  EXPECT_EQ(e0.num_outputs(), e.num_outputs());
  for (int o = 0; o < std::min(e0.num_outputs(), e.num_outputs()); ++o) {
    runtime::NDArray a = e0.get_output(o), b = e.get_output(o);
    EXPECT_EQ(a.shape(), b.shape()) << "output " << o;
    if (a.shape() != b.shape()) return {1e9, r.kernels0, r.kernels};
    for (int64_t k = 0; k < a.numel(); ++k) {
      double x = a.data_as<float>()[k], y = b.data_as<float>()[k];
      EXPECT_TRUE(std::isfinite(y)) << "output " << o << " element " << k;
      r.max_err = std::max(r.max_err, std::abs(x - y) / (1.0 + std::abs(x)));
    }
  }
  return r;
}

}  // namespace kiln::graph::test_util
