// Tests of build_module (graph → graph.json + lib + params) and the static memory planner:
// small models are compiled, saved, loaded back with the runtime's GraphExecutor alone and run
// on seeded random inputs against naive C++ references; the planner is checked on chains
// (sharing happens, arguments and outputs are never shared) and on a 10,000-node chain.

#include "kiln/graph/build_module.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "common/error.h"
#include "graph/graph_test_util.h"
#include "kiln/graph/transform.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/params.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;
using testing::error_of;
const DataType f32 = DataType::Float(32);
using test_util::random_array;

std::vector<float> values(const NDArray& a) {
  return std::vector<float>(a.data_as<float>(), a.data_as<float>() + a.numel());
}

void expect_close(const NDArray& got, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), ref.size()) << what;
  double err = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    err = std::max(err, std::abs(static_cast<double>(got.data_as<float>()[i]) - ref[i]) /
                            (1.0 + std::abs(ref[i])));
  EXPECT_LT(err, 1e-4) << what;
}

std::string temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() /
           ("kiln_build_module_test_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  return d.string();
}

// Reference: y = x·Wᵀ + b.
std::vector<float> dense_ref(const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>* b, int m, int n, int k) {
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = b ? (*b)[j] : 0.0;
      for (int kk = 0; kk < k; ++kk) s += static_cast<double>(x[i * k + kk]) * w[j * k + kk];
      y[i * n + j] = static_cast<float>(s);
    }
  return y;
}

TEST(BuildModule, ConvNetMatchesNaiveReference) {
  const int N = 2, C = 3, H = 32, W = 32, F = 8, K = 3, O = 5;
  std::mt19937 rng(7);
  NDArray wc = random_array({F, C, K, K}, rng), bc = random_array({1, F, 1, 1}, rng);
  NDArray wd = random_array({O, F}, rng), bd = random_array({O}, rng);
  Graph g;
  Entry x = g.add_input("data", {N, C, H, W}, f32);
  Entry c = g.add_op("conv2d", {x, g.add_constant("conv.weight", wc)},
                     {{"padding", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  Entry a = g.add_op("add", {c, g.add_constant("conv.bias", bc)}, {}, "bias");
  Entry r = g.add_op("relu", {a}, {}, "relu");
  Entry p = g.add_op("global_avg_pool2d", {r}, {}, "pool");
  Entry f = g.add_op("flatten", {p}, {}, "flatten");
  Entry d = g.add_op("dense", {f, g.add_constant("fc.weight", wd), g.add_constant("fc.bias", bd)},
                     {}, "fc");
  g.add_output(g.add_op("softmax", {d}, {}, "prob"));

  CompiledModule m = build_module(g, Target::host());
  // Layout alteration (8 output channels: NCHW8c) and fusion: {data → NCHW3c}, {conv2d_nchwc,
  // add, relu}, pool (blocked), {→ NCHW, flatten}, dense_packed over a 16-wide panel,
  // {slice to 5 columns, bias add}, softmax.
  EXPECT_EQ(m.num_kernels, 7);
  std::set<std::string> pnames;
  for (const auto& [k, v] : m.params) pnames.insert(k);
  EXPECT_EQ(pnames, (std::set<std::string>{"conv.bias_NCHW8c", "conv.weight_packed", "fc.bias",
                                           "fc.weight_packed"}));
  std::string dir = temp_dir("convnet");
  m.save(dir);
  EXPECT_TRUE(std::filesystem::exists(dir + "/lib.so"));
  EXPECT_EQ(runtime::load_params(dir + "/params.bin").size(), 4u);

  runtime::GraphExecutor ex = runtime::GraphExecutor::load(dir);
  EXPECT_EQ(ex.input_names(), std::vector<std::string>{"data"});
  EXPECT_EQ(ex.output_names(), std::vector<std::string>{"prob"});
  EXPECT_EQ(ex.num_op_nodes(), 7);
  NDArray xv = random_array({N, C, H, W}, rng);
  ex.set_input("data", xv);
  ex.run();
  NDArray out = ex.get_output(0);
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{N, O}));

  // Naive reference.
  std::vector<float> X = values(xv), WC = values(wc), BC = values(bc);
  std::vector<float> pooled(static_cast<size_t>(N * F));
  for (int n = 0; n < N; ++n)
    for (int ff = 0; ff < F; ++ff) {
      double sum = 0;
      for (int y = 0; y < H; ++y)
        for (int xx = 0; xx < W; ++xx) {
          double s = 0;
          for (int cc = 0; cc < C; ++cc)
            for (int ky = 0; ky < K; ++ky)
              for (int kx = 0; kx < K; ++kx) {
                int iy = y + ky - 1, ix = xx + kx - 1;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                s += static_cast<double>(X[((n * C + cc) * H + iy) * W + ix]) *
                     WC[((ff * C + cc) * K + ky) * K + kx];
              }
          s += BC[ff];
          sum += std::max(s, 0.0);
        }
      pooled[n * F + ff] = static_cast<float>(sum / (H * W));
    }
  std::vector<float> BD = values(bd);
  std::vector<float> logits = dense_ref(pooled, values(wd), &BD, N, O, F);
  std::vector<float> ref(logits.size());
  for (int n = 0; n < N; ++n) {
    float mx = -INFINITY;
    for (int o = 0; o < O; ++o) mx = std::max(mx, logits[n * O + o]);
    double z = 0;
    for (int o = 0; o < O; ++o) z += std::exp(logits[n * O + o] - mx);
    for (int o = 0; o < O; ++o)
      ref[n * O + o] = static_cast<float>(std::exp(logits[n * O + o] - mx) / z);
  }
  expect_close(out, ref, "convnet softmax output");

  // A second run gives the same result (params survive runs).
  ex.set_input("data", xv);
  ex.run();
  expect_close(ex.get_output("prob"), ref, "second run");
  std::filesystem::remove_all(dir);
}

TEST(BuildModule, ResidualTwoOutputsAndSharedKernels) {
  const int M = 4, D = 16;
  std::mt19937 rng(11);
  NDArray w = random_array({D, D}, rng);
  Graph g;
  Entry x = g.add_input("x", {M, D}, f32);
  Entry a = g.add_op("relu", {x}, {}, "act0");
  Entry d = g.add_op("dense", {a, g.add_constant("w", w)}, {}, "fc");
  Entry s = g.add_op("add", {d, a}, {}, "residual");
  Entry y = g.add_op("relu", {s}, {}, "act1");
  g.add_output(y);
  g.add_output(a);

  CompiledModule m = build_module(g, Target::host(), BuildOptions{0, true});
  EXPECT_EQ(m.num_kernels, 3);  // the two relus share one function
  auto j = nlohmann::json::parse(m.graph_json);
  EXPECT_EQ(j["arg_nodes"], nlohmann::json::parse("[0, 2]"));
  EXPECT_EQ(j["inputs"], nlohmann::json::parse(R"(["x"])"));
  EXPECT_EQ(j["outputs"], nlohmann::json::parse(R"(["act1", "act0"])"));
  EXPECT_EQ(j["nodes"][1]["attrs"]["func_name"], j["nodes"][5]["attrs"]["func_name"]);
  EXPECT_EQ(j["nodes"][3]["attrs"]["num_inputs"], 2);

  runtime::GraphExecutor ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  NDArray xv = random_array({M, D}, rng);
  ex.set_input(0, xv);
  ex.run();
  std::vector<float> A = values(xv);
  for (float& v : A) v = std::max(v, 0.0f);
  std::vector<float> Y = dense_ref(A, values(w), nullptr, M, D, D);
  for (size_t i = 0; i < Y.size(); ++i) Y[i] = std::max(Y[i] + A[i], 0.0f);
  expect_close(ex.get_output(0), Y, "act1");
  expect_close(ex.get_output("act0"), A, "act0");

  // Without sharing every op has its own function.
  EXPECT_EQ(build_module(g, Target::host(), BuildOptions{0, false}).num_kernels, 4);
}

TEST(BuildModule, KernelMastersAreKeyedByNodeIndexNotByName) {
  // A Conv1d as the ONNX importer writes it, its ReLU and the squeeze after it both named after
  // the model's output: two kernel nodes named "y", whose masters differ.
  std::mt19937 rng(13);
  Graph g;
  Entry x = g.add_input("x", {1, 16, 32}, f32);
  Entry u = g.add_op("unsqueeze", {x}, {{"axes", std::vector<int64_t>{2}}}, "conv");
  Entry c = g.add_op("conv2d", {u, g.add_constant("w", random_array({32, 16, 1, 3}, rng))},
                     {{"padding", std::vector<int64_t>{0, 1, 0, 1}}}, "conv");
  Entry r = g.add_op("relu", {c}, {}, "y");
  g.add_output(g.add_op("squeeze", {r}, {{"axes", std::vector<int64_t>{2}}}, "y"));
  CompiledModule m = build_module(g, Target::host(), BuildOptions{2, true});
  auto j = nlohmann::json::parse(m.graph_json);
  std::vector<int> named_y;
  for (size_t i = 0; i < j["nodes"].size(); ++i)
    if (j["nodes"][i]["name"] == "y" && j["nodes"][i]["attrs"].contains("func_name"))
      named_y.push_back(static_cast<int>(i));
  ASSERT_EQ(named_y.size(), 2u) << m.graph_json;
  std::set<std::string> masters;
  for (int i : named_y) {
    ASSERT_TRUE(m.kernel_masters.count(i)) << i << "\n" << m.graph_json;
    masters.insert(m.kernel_masters.at(i));
  }
  EXPECT_EQ(masters.size(), 2u) << m.graph_json;
  EXPECT_TRUE(masters.count("conv")) << m.graph_json;
}

TEST(BuildModule, OutputThatIsAnInputAndNoParams) {
  Graph g;
  Entry x = g.add_input("x", {8}, f32);
  g.add_output(g.add_op("negative", {x}, {}, "neg"));
  g.add_output(x);
  CompiledModule m = build_module(g, Target::host());
  EXPECT_TRUE(m.params.empty());
  std::string dir = temp_dir("noparams");
  m.save(dir);
  EXPECT_FALSE(std::filesystem::exists(dir + "/params.bin"));
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(dir);
  std::mt19937 rng(3);
  NDArray xv = random_array({8}, rng);
  ex.set_input("x", xv);
  ex.run();
  std::vector<float> neg = values(xv);
  for (float& v : neg) v = -v;
  expect_close(ex.get_output(0), neg, "neg");
  expect_close(ex.get_output(1), values(xv), "x");
  std::filesystem::remove_all(dir);
}

TEST(BuildModule, UnknownOpIsReportedByNodeName) {
  Graph g;
  Entry x = g.add_input("x", {4}, f32);
  g.add_output(g.add_op("frobnicate", {x}, {}, "my_layer"));
  std::string msg = error_of([&] { build_module(g, Target::host()); });
  EXPECT_NE(msg.find("unknown op 'frobnicate'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'my_layer'"), std::string::npos) << msg;
}

TEST(MemoryPlan, ChainSharesIntermediatesButNotArgumentsOrOutputs) {
  Graph g;
  Entry e = g.add_input("x", {1024}, f32);
  for (int i = 0; i < 6; ++i) e = g.add_op(i % 2 ? "relu" : "negative", {e});
  g.add_output(e);
  Graph t = infer_types(g);
  MemoryPlan p = plan_memory(t);
  // Entries: x, then 6 ops. Intermediates ping-pong between two storages.
  ASSERT_EQ(p.storage_id.size(), 7u);
  EXPECT_EQ(p.num_storages(), 4);
  EXPECT_EQ(p.storage_id[1], p.storage_id[3]);
  EXPECT_EQ(p.storage_id[2], p.storage_id[4]);
  EXPECT_NE(p.storage_id[1], p.storage_id[2]);
  for (int k = 1; k < 7; ++k) EXPECT_NE(p.storage_id[k], p.storage_id[0]) << k;
  for (int k = 0; k < 6; ++k) EXPECT_NE(p.storage_id[k], p.storage_id[6]) << k;
  EXPECT_EQ(p.naive_bytes, 7u * 4096);
  EXPECT_EQ(p.total_bytes, 4u * 4096);
  EXPECT_LT(p.total_bytes, p.naive_bytes);
  EXPECT_EQ(p.summary(), "memory plan: 4 storages, 16.00 KiB (no sharing: 28.00 KiB)");

  // The compiled chain computes the right thing on the shared buffers.
  CompiledModule m = build_module(g, Target::host(), BuildOptions{0, true});
  EXPECT_EQ(m.memory.storage_id, p.storage_id);
  runtime::GraphExecutor ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  std::mt19937 rng(5);
  NDArray xv = random_array({1024}, rng);
  ex.set_input("x", xv);
  ex.run();
  std::vector<float> y = values(xv);
  for (int i = 0; i < 6; ++i)
    for (float& v : y) v = i % 2 ? std::max(v, 0.0f) : -v;
  expect_close(ex.get_output(0), y, "chain");
}

TEST(MemoryPlan, GrowsAFreedStorageAndKeepsHeadsPinned) {
  // x[4] → a[4] → b[16] (a head) → c[32] → d[8] → e[2] (a head).
  std::vector<PlanNode> n(6);
  n[0] = {true, {}, {{{4}, f32}}};
  n[1] = {false, {{0, 0}}, {{{4}, f32}}};   // a
  n[2] = {false, {{1, 0}}, {{{16}, f32}}};  // b: a is released after it
  n[3] = {false, {{2, 0}}, {{{32}, f32}}};  // c: takes a's storage, grown to 32 floats
  n[4] = {false, {{3, 0}}, {{{8}, f32}}};   // d: b would fit, but b is a head
  n[5] = {false, {{4, 0}}, {{{2}, f32}}};   // e
  MemoryPlan p = plan_memory(n, {{5, 0}, {2, 0}});
  EXPECT_EQ(p.storage_id[3], p.storage_id[1]);
  EXPECT_EQ(p.storage_bytes[static_cast<size_t>(p.storage_id[3])], 128u);
  EXPECT_EQ(std::set<int>(p.storage_id.begin(), p.storage_id.end()).size(), 5u);
  EXPECT_EQ(p.total_bytes, 16u + 128 + 64 + 32 + 8);
}

TEST(MemoryPlan, ReuseNeedsTheSameDtype) {
  // x → a f32[8] → b f32[8] (a released) → c i32[2]: fits a's storage, but another dtype.
  std::vector<PlanNode> n(5);
  n[0] = {true, {}, {{{8}, f32}}};
  n[1] = {false, {{0, 0}}, {{{8}, f32}}};
  n[2] = {false, {{1, 0}}, {{{8}, f32}}};
  n[3] = {false, {{2, 0}}, {{{2}, DataType::Int(32)}}};
  n[4] = {false, {{3, 0}}, {{{2}, f32}}};
  MemoryPlan p = plan_memory(n, {{4, 0}});
  EXPECT_NE(p.storage_id[3], p.storage_id[1]);
  EXPECT_EQ(p.num_storages(), 5);
}

TEST(MemoryPlan, TenThousandNodeChain) {
  Graph g;
  Entry e = g.add_input("x", {64}, f32);
  for (int i = 0; i < 10000; ++i) e = g.add_op("relu", {e});
  g.add_output(e);
  MemoryPlan p = plan_memory(infer_types(g));
  EXPECT_EQ(p.num_storages(), 4);
  EXPECT_EQ(p.naive_bytes, 10001u * 256);
}

}  // namespace
}  // namespace kiln::graph
