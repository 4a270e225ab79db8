// Built-in models (model_zoo.h): torchvision's ResNet-18 built node by node with the graph
// builder. Weights come from a SplitMix64 stream seeded by the caller, turned into uniform
// floats by hand (not std:: distributions, whose output differs between standard libraries), so
// a (batch, seed, image size) triple gives the same graph and values everywhere. Scales:
// conv and dense weights are Kaiming-uniform (bound sqrt(6 / fan_in)), which keeps the second
// moment of relu activations constant through a layer; batch norms get gamma in [0.5, 1],
// beta in [-0.1, 0.1], running mean in [-0.1, 0.1] and running variance in [0.5, 1.5]. The
// second batch norm of each block has its gamma halved so the residual sums grow slowly.

#include "kiln/frontend/model_zoo.h"

#include <cmath>
#include <string>
#include <vector>

#include "kiln/support/error.h"

namespace kiln::frontend {

namespace {

using graph::Attrs;
using graph::Entry;
using graph::Graph;
using Ints = std::vector<int64_t>;

/// SplitMix64: a tiny, fully specified generator.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi).
  float uniform(double lo, double hi) {
    double u = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return static_cast<float>(lo + (hi - lo) * u);
  }

 private:
  uint64_t state_;
};

class ResNetBuilder {
 public:
  explicit ResNetBuilder(uint64_t seed) : rng_(seed) {}

  Graph& graph() { return g_; }

  Entry input(const std::string& name, Ints shape) {
    return g_.add_input(name, std::move(shape), DataType::Float(32));
  }

  /// A float32 constant with values uniform in [lo, hi).
  Entry constant(const std::string& name, Ints shape, double lo, double hi) {
    runtime::NDArray a = runtime::NDArray::empty(shape, DataType::Float(32));
    float* p = a.data_as<float>();
    for (int64_t i = 0; i < a.numel(); ++i) p[i] = rng_.uniform(lo, hi);
    return g_.add_constant(name, a);
  }

  /// conv2d without bias, Kaiming-uniform weights "<name>.weight" [out, in, k, k].
  Entry conv(Entry x, const std::string& name, int64_t in, int64_t out, int64_t k, int64_t stride,
             int64_t pad) {
    double bound = std::sqrt(6.0 / static_cast<double>(in * k * k));
    Entry w = constant(name + ".weight", {out, in, k, k}, -bound, bound);
    return g_.add_op(
        "conv2d", {x, w},
        Attrs{{"strides", Ints{stride, stride}}, {"padding", Ints{pad, pad, pad, pad}}}, name);
  }

  /// batch_norm (inference form) with constants "<name>.weight", ".bias", ".running_mean",
  /// ".running_var"; `gamma_scale` scales the weight's range.
  Entry bn(Entry x, const std::string& name, int64_t c, double gamma_scale = 1.0) {
    Entry gamma = constant(name + ".weight", {c}, 0.5 * gamma_scale, 1.0 * gamma_scale);
    Entry beta = constant(name + ".bias", {c}, -0.1, 0.1);
    Entry mean = constant(name + ".running_mean", {c}, -0.1, 0.1);
    Entry var = constant(name + ".running_var", {c}, 0.5, 1.5);
    return g_.add_op("batch_norm", {x, gamma, beta, mean, var}, Attrs{{"epsilon", 1e-5}}, name);
  }

  Entry relu(Entry x, const std::string& name) { return g_.add_op("relu", {x}, {}, name); }

  /// torchvision's BasicBlock: conv3x3(stride) → bn → relu → conv3x3 → bn, plus the input (or
  /// its 1x1 downsample + bn when the shape changes), → relu.
  Entry basic_block(Entry x, const std::string& p, int64_t in, int64_t out, int64_t stride) {
    Entry y = conv(x, p + "conv1", in, out, 3, stride, 1);
    y = bn(y, p + "bn1", out);
    y = relu(y, p + "relu");
    y = conv(y, p + "conv2", out, out, 3, 1, 1);
    y = bn(y, p + "bn2", out, 0.5);
    Entry identity = x;
    if (stride != 1 || in != out) {
      identity = conv(x, p + "downsample.0", in, out, 1, stride, 0);
      identity = bn(identity, p + "downsample.1", out);
    }
    y = g_.add_op("add", {y, identity}, {}, p + "add");
    return relu(y, p + "relu_1");
  }

 private:
  Graph g_;
  Rng rng_;
};

}  // namespace

graph::Graph resnet18(int batch, uint64_t seed, int image_size) {
  KILN_USER_CHECK(batch > 0) << "resnet18: batch must be positive, got " << batch;
  KILN_USER_CHECK(image_size >= 32)
      << "resnet18: image_size must be at least 32 (the network downsamples 32x), got "
      << image_size;
  ResNetBuilder b(seed);
  Entry x = b.input("data", {batch, 3, image_size, image_size});
  x = b.conv(x, "conv1", 3, 64, 7, 2, 3);
  x = b.bn(x, "bn1", 64);
  x = b.relu(x, "relu");
  x = b.graph().add_op(
      "max_pool2d", {x},
      Attrs{{"pool_size", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"padding", Ints{1, 1, 1, 1}}},
      "maxpool");
  int64_t in = 64;
  const int64_t widths[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    for (int block = 0; block < 2; ++block) {
      std::string prefix = "layer" + std::to_string(stage + 1) + "." + std::to_string(block) + ".";
      int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
      x = b.basic_block(x, prefix, in, widths[stage], stride);
      in = widths[stage];
    }
  }
  x = b.graph().add_op("global_avg_pool2d", {x}, {}, "avgpool");
  x = b.graph().add_op("flatten", {x}, Attrs{{"axis", int64_t{1}}}, "flatten");
  // Uniform weights of variance 1 / fan_in: logits of the order of the pooled features.
  double bound = std::sqrt(3.0 / 512.0);
  Entry w = b.constant("fc.weight", {1000, 512}, -bound, bound);
  Entry bias = b.constant("fc.bias", {1000}, -0.1, 0.1);
  x = b.graph().add_op("dense", {x, w, bias}, {}, "fc");
  b.graph().add_output(x);
  return std::move(b.graph());
}

}  // namespace kiln::frontend
