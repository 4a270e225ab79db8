// The built-in ResNet-18 (frontend/model_zoo.h): its graph types, has torchvision's 20
// convolutions and names, is deterministic in its seed, refuses bad sizes; compiled it runs to
// finite, non-degenerate logits that match the unoptimized build, and — with its weights fed
// to torchvision's own resnet18 (an independent reference, /usr/bin/python3) — the same
// numbers as PyTorch.
#include "kiln/frontend/model_zoo.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "common/ndarray_access.h"
#include "kiln/graph/build_module.h"
#include "kiln/graph/transform.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/npy.h"
#include "kiln/target/target.h"

namespace kiln::frontend {
namespace {

using ::kiln::testing::element;
using ::kiln::testing::error_of;
namespace fs = std::filesystem;

int count_op(const graph::Graph& g, const std::string& op) {
  int n = 0;
  for (const graph::Node& node : g.nodes()) n += node.is_op() && node.op == op;
  return n;
}

bool has_node(const graph::Graph& g, const std::string& name) {
  for (const graph::Node& node : g.nodes())
    if (node.name == name) return true;
  return false;
}

TEST(ModelZoo, ResNet18TypesWithTorchvisionsTopology) {
  graph::Graph g = graph::infer_types(resnet18());
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.type_of(g.outputs()[0]).str(), "float32[1, 1000]");
  EXPECT_EQ(count_op(g, "conv2d"), 20);
  EXPECT_EQ(count_op(g, "batch_norm"), 20);
  EXPECT_EQ(count_op(g, "add"), 8);
  EXPECT_EQ(count_op(g, "relu"), 17);
  EXPECT_EQ(count_op(g, "max_pool2d"), 1);
  EXPECT_EQ(count_op(g, "dense"), 1);
  for (const char* name : {"conv1", "layer1.0.conv1", "layer2.0.downsample.0",
                           "layer4.1.bn2.running_var", "fc.weight", "fc"})
    EXPECT_TRUE(has_node(g, name)) << name;
  int64_t params = 0;
  for (int i : g.constant_nodes()) params += g.node(i).value.numel();
  EXPECT_EQ(params, 11689512 + 2 * 4800);  // torchvision's count + BN running mean and var
  // The stage shapes: layer4's output is [1, 512, 7, 7].
  int last_relu = -1;
  for (int i = 0; i < g.num_nodes(); ++i)
    if (g.node(i).name == "layer4.1.relu_1") last_relu = i;
  ASSERT_GE(last_relu, 0);
  EXPECT_EQ(g.node(last_relu).outputs[0].str(), "float32[1, 512, 7, 7]");
}

TEST(ModelZoo, BatchAndImageSizeAreParameters) {
  graph::Graph g = graph::infer_types(resnet18(3, 0, 64));
  EXPECT_EQ(g.type_of(g.outputs()[0]).str(), "float32[3, 1000]");
  EXPECT_EQ(g.type_of(graph::Entry{g.input_nodes()[0], 0}).str(), "float32[3, 3, 64, 64]");
  EXPECT_NE(error_of([] { resnet18(0); }).find("resnet18: batch must be positive, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              resnet18(1, 0, 16);
            }).find("image_size must be at least 32 (the network downsamples 32x), got 16"),
            std::string::npos);
}

TEST(ModelZoo, WeightsAreDeterministicInTheSeed) {
  graph::Graph a = resnet18(1, 5, 32), b = resnet18(1, 5, 32), c = resnet18(1, 6, 32);
  int w = -1;
  for (int i : a.constant_nodes())
    if (a.node(i).name == "layer3.1.conv2.weight") w = i;
  ASSERT_GE(w, 0);
  const runtime::NDArray &va = a.node(w).value, &vb = b.node(w).value, &vc = c.node(w).value;
  ASSERT_EQ(va.numel(), 256 * 256 * 9);
  double diff_seed = 0, sum_sq = 0;
  for (int64_t i = 0; i < va.numel(); ++i) {
    ASSERT_EQ(element(va, i), element(vb, i)) << i;
    diff_seed = std::max(diff_seed, std::abs(element(va, i) - element(vc, i)));
    sum_sq += element(va, i) * element(va, i);
  }
  EXPECT_GT(diff_seed, 0.01);
  // Kaiming-uniform: variance 2 / fan_in.
  EXPECT_NEAR(sum_sq / static_cast<double>(va.numel()), 2.0 / (256 * 9), 0.1 * 2.0 / (256 * 9));
}

runtime::NDArray random_image(const std::vector<int64_t>& shape, unsigned seed) {
  runtime::NDArray x = runtime::NDArray::empty(shape, DataType::Float(32));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = dist(rng);
  return x;
}

runtime::NDArray run(const graph::Graph& g, int opt_level, const runtime::NDArray& x) {
  graph::BuildOptions opt;
  opt.opt_level = opt_level;
  graph::CompiledModule m = graph::build_module(g, Target::host(), opt);
  runtime::GraphExecutor ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  ex.set_input("data", x);
  ex.run();
  return ex.get_output(0);
}

/// max |a - b| / max |b|.
double rel_error(const runtime::NDArray& a, const runtime::NDArray& b) {
  double err = 0, scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    err = std::max(err, std::abs(element(a, i) - element(b, i)));
    scale = std::max(scale, std::abs(element(b, i)));
  }
  return err / scale;
}

/// The small ResNet-18 both numerical tests use (batch 2, 64x64, seed 0), its input and its
/// logits at opt-level 2 and 0: compiled once (each compile takes seconds).
struct SmallRun {
  graph::Graph g = resnet18(2, 0, 64);
  runtime::NDArray x = random_image({2, 3, 64, 64}, 1);
  runtime::NDArray y = run(g, 2, x), y0 = run(g, 0, x);
};
const SmallRun& small_run() {
  static const SmallRun r;
  return r;
}

TEST(ModelZoo, SmallResNet18CompilesAndMatchesOptLevel0) {
  const SmallRun& r = small_run();
  const runtime::NDArray &y = r.y, &y0 = r.y0;
  ASSERT_EQ(runtime::shape_str(y.shape()), "[2, 1000]");
  double sum_sq = 0, batch_diff = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(element(y, i))) << i;
    sum_sq += element(y, i) * element(y, i);
    if (i < 1000) batch_diff = std::max(batch_diff, std::abs(element(y, i) - element(y, i + 1000)));
  }
  double rms = std::sqrt(sum_sq / static_cast<double>(y.numel()));
  EXPECT_GT(rms, 0.05);         // activations stay of order one: logits neither vanish …
  EXPECT_LT(rms, 20.0);         // … nor explode
  EXPECT_GT(batch_diff, 1e-3);  // the two images give different logits
  EXPECT_LT(rel_error(y, y0), 1e-4);
}

// torchvision's resnet18, given the graph's constants as its state dict (the names are
// torchvision's state-dict keys), computes the same logits: an independent check of the
// topology, the attributes and the compiled code.
TEST(ModelZoo, ResNet18EqualsTorchvisionWithTheSameWeights) {
  const char* py = "/usr/bin/python3";
  if (std::system("/usr/bin/python3 -c 'import torch, torchvision, numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << py << " with torch, torchvision and numpy is not available";
  const SmallRun& r = small_run();
  fs::path dir = fs::temp_directory_path() / ("kiln_model_zoo_" + std::to_string(::getpid()));
  fs::create_directories(dir / "params");
  for (int i : r.g.constant_nodes())
    runtime::save_npy((dir / "params" / (r.g.node(i).name + ".npy")).string(), r.g.node(i).value);
  runtime::save_npy((dir / "x.npy").string(), r.x);
  std::ofstream(dir / "ref.py") << R"PY(
import os, sys, numpy as np, torch, torchvision
d = sys.argv[1]
m = torchvision.models.resnet18(weights=None).eval()
sd = m.state_dict()
n = 0
for k in sd:
    if k.endswith("num_batches_tracked"):
        continue
    sd[k] = torch.from_numpy(np.load(os.path.join(d, "params", k + ".npy")))
    n += 1
assert n == len(os.listdir(os.path.join(d, "params"))), "unused Kiln constants"
m.load_state_dict(sd)
with torch.no_grad():
    y = m(torch.from_numpy(np.load(os.path.join(d, "x.npy"))))
np.save(os.path.join(d, "y.npy"), y.numpy())
)PY";
  std::string cmd = std::string(py) + " " + (dir / "ref.py").string() + " " + dir.string();
  int rc = std::system(cmd.c_str());
  runtime::NDArray want;
  if (rc == 0) want = runtime::load_npy((dir / "y.npy").string());
  fs::remove_all(dir);
  ASSERT_EQ(rc, 0) << cmd;
  ASSERT_EQ(want.shape(), r.y.shape());
  EXPECT_LT(rel_error(r.y, want), 1e-4);
}

}  // namespace
}  // namespace kiln::frontend
