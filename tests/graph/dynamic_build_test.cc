// Data-dependent output shapes through the whole back end: graphs with nonzero, unique and
// non_max_suppression are built (build_module), and the GraphExecutor must return each bounded
// output with its actual shape, changing from run to run, with the values of a plain C++
// reference; the graph JSON records the bounded entries; a static-shape op reading a bounded
// output is refused at compile time naming both ops; a constant input is not folded (the shape
// would be lost); a module saved to a directory and loaded again (what `kiln run` does) gives the
// same shapes, and an .npy written from an output keeps the actual shape.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "common/error.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/npy.h"

namespace kiln::graph {
namespace {

using ::kiln::testing::error_of;
using runtime::NDArray;
using Shape = std::vector<int64_t>;

/// float32 values in [-1, 1] (|x| >= 0.1), a fraction `zeros` of them 0.
NDArray sparse_array(Shape s, double zeros, std::mt19937& rng) {
  NDArray a = NDArray::empty(std::move(s), DataType::Float(32));
  std::uniform_real_distribution<float> u(0.1f, 1.f);
  std::uniform_real_distribution<double> p(0, 1);
  for (int64_t i = 0; i < a.numel(); ++i)
    a.data_as<float>()[i] = p(rng) < zeros ? 0.f : (rng() & 1 ? u(rng) : -u(rng));
  return a;
}

/// Reference NonZero of a 2-D float32 array: [2, n].
std::vector<std::vector<int64_t>> nonzero_ref(const NDArray& a) {
  std::vector<std::vector<int64_t>> r(2);
  for (int64_t i = 0; i < a.shape()[0]; ++i)
    for (int64_t j = 0; j < a.shape()[1]; ++j)
      if (a.data_as<float>()[i * a.shape()[1] + j] != 0) r[0].push_back(i), r[1].push_back(j);
  return r;
}

void expect_nonzero(const NDArray& got, const NDArray& x) {
  auto want = nonzero_ref(x);
  const int64_t n = static_cast<int64_t>(want[0].size());
  ASSERT_EQ(got.shape(), (Shape{2, n}));
  for (int r = 0; r < 2; ++r)
    for (int64_t k = 0; k < n; ++k) EXPECT_EQ(got.data_as<int64_t>()[r * n + k], want[r][k]);
}

Graph nonzero_graph() {
  Graph g;
  Entry x = g.add_input("x", {4, 6}, DataType::Float(32));
  g.add_output(g.add_op("nonzero", {x}, {}, "nz"));
  g.add_output(g.add_op("relu", {x}, {}, "r"));  // a static output beside it
  return g;
}

TEST(DynamicBuild, NonZeroOutputHasItsActualShapeEveryRun) {
  for (int level : {0, 2}) {
    SCOPED_TRACE("opt_level " + std::to_string(level));
    CompiledModule m = build_module(nonzero_graph(), Target::host(), BuildOptions{level, true});
    EXPECT_NE(m.graph_json.find("\"bounded\": [{\"entry\":"), std::string::npos) << m.graph_json;
    auto ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
    EXPECT_EQ(ex.output_info(0).bounded_axis, 1);
    EXPECT_EQ(ex.output_info(0).shape, (Shape{2, 24}));
    EXPECT_EQ(ex.output_info(1).bounded_axis, -1);
    std::mt19937 rng(3);
    for (double zeros : {0.5, 0.9, 0.0, 1.0, 0.3}) {
      NDArray x = sparse_array({4, 6}, zeros, rng);
      ex.set_input("x", x);
      ex.run();
      expect_nonzero(ex.get_output(0), x);
      NDArray r = ex.get_output(1);
      ASSERT_EQ(r.shape(), (Shape{4, 6}));
      for (int64_t i = 0; i < 24; ++i)
        EXPECT_EQ(r.data_as<float>()[i], std::max(0.f, x.data_as<float>()[i]));
    }
  }
}

TEST(DynamicBuild, SavedModuleAndNpyKeepTheActualShape) {
  std::string dir = ::testing::TempDir() + "kiln_dynamic_build_" + std::to_string(getpid());
  compile_to_directory(nonzero_graph(), Target::host(), {}, dir);
  auto ex = runtime::GraphExecutor::load(dir);
  std::mt19937 rng(9);
  NDArray x = sparse_array({4, 6}, 0.6, rng);
  ex.set_input("x", x);
  ex.run();
  runtime::save_npy(dir + "/nz.npy", ex.get_output(0));
  NDArray back = runtime::load_npy(dir + "/nz.npy");
  expect_nonzero(back, x);
  std::filesystem::remove_all(dir);
}

TEST(DynamicBuild, StaticConsumerOfABoundedOutputIsRefused) {
  Graph g;
  Entry x = g.add_input("x", {4, 6}, DataType::Float(32));
  Entry nz = g.add_op("nonzero", {x}, {}, "nz");
  g.add_output(g.add_op("cast", {nz}, Attrs{{"dtype", std::string("float32")}}, "c"));
  std::string msg = error_of([&] { build_module(g, Target::host()); });
  EXPECT_NE(msg.find("the output of nonzero 'nz' has a data-dependent shape; only graph outputs "
                     "may have one yet (it is read by cast 'c')"),
            std::string::npos)
      << msg;
}

TEST(DynamicBuild, ConstantInputIsNotFolded) {
  std::mt19937 rng(4);
  NDArray c = sparse_array({4, 6}, 0.5, rng);
  Graph g;
  Entry k = g.add_constant("k", c);
  Entry x = g.add_input("x", {4, 6}, DataType::Float(32));
  g.add_output(g.add_op("nonzero", {k}, {}, "nz"));
  g.add_output(g.add_op("relu", {x}, {}, "r"));
  CompiledModule m = build_module(g, Target::host());
  auto ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  ex.set_input("x", sparse_array({4, 6}, 0.2, rng));
  ex.run();
  expect_nonzero(ex.get_output(0), c);
}

TEST(DynamicBuild, UniqueAllFourOutputs) {
  // x int64 [3, 8] with column j+4 == column j for j < 2: unique columns along axis 1.
  Graph g;
  Entry x = g.add_input("x", {3, 8}, DataType::Int(64));
  Entry u = g.add_op("unique", {x}, Attrs{{"axis", Shape{-1}}, {"sorted", int64_t{1}}}, "u");
  for (int k = 0; k < 4; ++k) g.add_output(Entry{u.node, k});
  CompiledModule m = build_module(g, Target::host());
  auto ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  EXPECT_EQ(ex.output_info(0).bounded_axis, 1);
  EXPECT_EQ(ex.output_info(2).bounded_axis, -1);  // inverse_indices: static
  std::mt19937 rng(12);
  for (int trial = 0; trial < 3; ++trial) {
    NDArray a = NDArray::empty({3, 8}, DataType::Int(64));
    int64_t* p = a.data_as<int64_t>();
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 8; ++j)
        p[i * 8 + j] = (j >= 4 && j - 4 < 2 + trial) ? p[i * 8 + j - 4] : rng() % 3;
    // Reference: columns as vectors, std::map orders them lexicographically.
    std::map<std::vector<int64_t>, std::pair<int64_t, int64_t>> cols;  // -> first, count
    std::vector<std::vector<int64_t>> col(8);
    for (int j = 0; j < 8; ++j) {
      for (int i = 0; i < 3; ++i) col[j].push_back(p[i * 8 + j]);
      auto [it, fresh] = cols.emplace(col[j], std::make_pair(int64_t{j}, int64_t{0}));
      ++it->second.second;
    }
    ex.set_input("x", a);
    ex.run();
    const int64_t nu = static_cast<int64_t>(cols.size());
    NDArray y = ex.get_output(0), idx = ex.get_output(1), inv = ex.get_output(2),
            cnt = ex.get_output(3);
    ASSERT_EQ(y.shape(), (Shape{3, nu}));
    ASSERT_EQ(idx.shape(), (Shape{nu}));
    ASSERT_EQ(inv.shape(), (Shape{8}));
    ASSERT_EQ(cnt.shape(), (Shape{nu}));
    int64_t k = 0;
    for (const auto& [v, fc] : cols) {
      for (int i = 0; i < 3; ++i) EXPECT_EQ(y.data_as<int64_t>()[i * nu + k], v[i]);
      EXPECT_EQ(idx.data_as<int64_t>()[k], fc.first);
      EXPECT_EQ(cnt.data_as<int64_t>()[k], fc.second);
      for (int j = 0; j < 8; ++j)
        if (col[j] == v) {
          EXPECT_EQ(inv.data_as<int64_t>()[j], k);
        }
      ++k;
    }
  }
}

TEST(DynamicBuild, NmsWithARuntimeMaxOutput) {
  // Three far-apart boxes in one class: max_output decides how many come out.
  Graph g;
  Entry b = g.add_input("boxes", {1, 3, 4}, DataType::Float(32));
  Entry s = g.add_input("scores", {1, 1, 3}, DataType::Float(32));
  Entry mo = g.add_input("max_out", {1}, DataType::Int(64));
  g.add_output(g.add_op("non_max_suppression", {b, s, mo}, {}, "nms"));
  CompiledModule m = build_module(g, Target::host());
  auto ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  EXPECT_EQ(ex.output_info(0).shape, (Shape{3, 3}));
  NDArray boxes = NDArray::empty({1, 3, 4}, DataType::Float(32));
  for (int i = 0; i < 3; ++i) {
    float* p = boxes.data_as<float>() + i * 4;
    p[0] = p[1] = 10.f * i, p[2] = p[3] = 10.f * i + 1;
  }
  NDArray scores = NDArray::empty({1, 1, 3}, DataType::Float(32));
  scores.data_as<float>()[0] = 0.2f, scores.data_as<float>()[1] = 0.9f,
  scores.data_as<float>()[2] = 0.5f;
  ex.set_input("boxes", boxes);
  ex.set_input("scores", scores);
  const int64_t order[3] = {1, 2, 0};
  for (int64_t max_out : {2, 0, 3, 1}) {
    NDArray mv = NDArray::empty({1}, DataType::Int(64));
    mv.data_as<int64_t>()[0] = max_out;
    ex.set_input("max_out", mv);
    ex.run();
    NDArray sel = ex.get_output(0);
    ASSERT_EQ(sel.shape(), (Shape{max_out, 3}));
    for (int64_t k = 0; k < max_out; ++k) {
      EXPECT_EQ(sel.data_as<int64_t>()[k * 3 + 0], 0);
      EXPECT_EQ(sel.data_as<int64_t>()[k * 3 + 1], 0);
      EXPECT_EQ(sel.data_as<int64_t>()[k * 3 + 2], order[k]);
    }
  }
}

}  // namespace
}  // namespace kiln::graph
