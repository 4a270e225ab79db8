// `kiln quantize MODEL.onnx -o QMODEL.onnx --calibrate DIR`: post-training static quantization
// into the QDQ form that ONNX Runtime's quantize_static writes, so that Kiln (quantize_realize)
// and any ONNX runtime run the same int8 model. Weights of Conv / Gemm / MatMul become int8,
// symmetric per output channel (or per tensor with --per-tensor), each read through a
// DequantizeLinear; biases int32 with scale s_x·s_w[o]; the activations around the products
// (their data inputs, their outputs — or the output of a Relu / Clip reading only them — and
// the sums and global average pools of such tensors) get QuantizeLinear → DequantizeLinear
// pairs with int8 asymmetric parameters from a calibration: the float model, compiled by Kiln
// with those tensors as extra outputs, runs on every .npy file of DIR (one sample, or a stack
// of samples along a new first axis, of the model's single input); min-max ranges (with 0
// included), with --method percentile the --percentile quantiles of a sample of each tensor's
// values, or with --method entropy the range whose 128-level quantization of a histogram of all
// its values has the least KL divergence from it (graph/quantize_calibration.h: ONNX Runtime's
// CalibrationMethod.Entropy with its defaults — 128 bins to start with, more as later samples
// widen the range, 128 levels — each calibration sample one collection step, as a data reader
// yielding one sample at a time gives them). Needs opset >= 13 (per-axis quantization).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "cli_common.h"
#include "kiln/frontend/onnx.h"
#include "kiln/frontend/onnx_model.h"
#include "kiln/frontend/onnx_writer.h"
#include "kiln/graph/quantize_calibration.h"
#include "kiln/runtime/npy.h"
#include "kiln/support/error.h"
#include "kiln/target/target.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;
using frontend::OnnxModel;
using frontend::OnnxNode;
using runtime::NDArray;

struct QuantizeOptions {
  std::string model, output, calibrate, method = "minmax";
  double percentile = 99.999;
  bool per_tensor = false;
};

/// The entropy method's initial histogram bins and quantization levels (ONNX Runtime's).
constexpr int64_t kEntropyBins = 128, kEntropyLevels = 128;

/// Running statistics of one tensor over the calibration samples.
struct Range {
  double lo = INFINITY, hi = -INFINITY;
  std::vector<float> sample;   ///< up to 4096 values per calibration sample (percentile)
  graph::Histogram histogram;  ///< of every value (entropy)
  void add(const NDArray& a, const std::string& method, std::mt19937& rng) {
    const float* p = a.data_as<float>();
    for (int64_t k = 0; k < a.numel(); ++k) {
      lo = std::min(lo, double(p[k]));
      hi = std::max(hi, double(p[k]));
    }
    if (method == "entropy") histogram.add(p, a.numel(), kEntropyBins);
    if (method != "percentile") return;
    std::uniform_int_distribution<int64_t> d(0, std::max<int64_t>(a.numel() - 1, 0));
    for (int k = 0; k < 4096 && a.numel() > 0; ++k) sample.push_back(p[d(rng)]);
  }
};

struct QParams {
  float scale = 1;
  int8_t zero_point = 0;
};

/// int8 asymmetric parameters of [lo, hi] with 0 included (quantize_static's rule).
QParams act_params(double lo, double hi) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  QParams q;
  q.scale = hi > lo ? static_cast<float>((hi - lo) / 255.0) : 1.0f;
  const double z = std::nearbyint(-128.0 - lo / q.scale);
  q.zero_point = static_cast<int8_t>(std::clamp(z, -128.0, 127.0));
  return q;
}

NDArray scalar_f32(float v) {
  NDArray a = NDArray::empty({}, DataType::Float(32));
  a.data_as<float>()[0] = v;
  return a;
}

NDArray scalar_s8(int8_t v) {
  NDArray a = NDArray::empty({}, DataType::Int(8));
  a.data_as<int8_t>()[0] = v;
  return a;
}

OnnxNode make_node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                   const std::string& name) {
  OnnxNode n;
  n.op_type = op;
  n.name = name;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

int64_t attr_int(const OnnxNode& n, const std::string& k, int64_t dflt) {
  auto it = n.attrs.find(k);
  if (it == n.attrs.end()) return dflt;
  const int64_t* v = std::get_if<int64_t>(&it->second);
  return v ? *v : dflt;
}

/// A product whose weight is a float32 initializer: its weight, bias and output-channel axis.
struct Product {
  size_t node;
  std::string weight, bias;
  int axis;  ///< the weight's output-channel axis
};

class Quantizer {
 public:
  Quantizer(OnnxModel m, QuantizeOptions o) : m_(std::move(m)), o_(std::move(o)) {}

  void run() {
    KILN_USER_CHECK(m_.default_opset() >= 13)
        << "kiln quantize: '" << o_.model << "' has opset " << m_.default_opset()
        << "; per-channel QuantizeLinear / DequantizeLinear need opset 13 or later";
    KILN_USER_CHECK(m_.inputs.size() == 1)
        << "kiln quantize: the calibration feeds one input, but '" << o_.model << "' has "
        << m_.inputs.size();
    find_products();
    KILN_USER_CHECK(!products_.empty())
        << "kiln quantize: '" << o_.model
        << "' has no Conv, Gemm or MatMul with a float32 initializer weight to quantize";
    choose_activations();
    calibrate();
    rewrite();
    frontend::save_onnx_model(m_, o_.output);
    std::cout << "kiln quantize: " << products_.size() << " products, " << acts_.size()
              << " activations (" << o_.method << " over " << samples_
              << " calibration samples) -> " << o_.output << "\n";
  }

 private:
  const NDArray* init(const std::string& name) const {
    auto it = m_.initializers.find(name);
    return it == m_.initializers.end() ? nullptr : &it->second;
  }
  bool is_f32_init(const std::string& name, int64_t ndim) const {
    const NDArray* a = init(name);
    return a && a->dtype() == DataType::Float(32) && (ndim < 0 || a->ndim() == ndim);
  }

  void find_products() {
    std::set<std::string> seen;
    for (size_t i = 0; i < m_.nodes.size(); ++i) {
      const OnnxNode& n = m_.nodes[i];
      if (!n.domain.empty() || n.inputs.size() < 2) continue;
      Product p{i, n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : "", 0};
      if (n.op_type == "Conv") {
        if (!is_f32_init(p.weight, 4)) continue;
      } else if (n.op_type == "Gemm") {
        if (!is_f32_init(p.weight, 2) || attr_int(n, "transA", 0) != 0) continue;
        p.axis = attr_int(n, "transB", 0) ? 0 : 1;
      } else if (n.op_type == "MatMul") {
        if (!is_f32_init(p.weight, 2)) continue;
        p.axis = 1;
      } else {
        continue;
      }
      if (!p.bias.empty() && !is_f32_init(p.bias, 1)) continue;
      if (!seen.insert(p.weight).second) continue;  // a weight shared by two products: once
      products_.push_back(p);
    }
  }

  /// The tensor to quantize for `t`: the output of a Relu / Clip that alone reads it.
  std::string through_activation(const std::string& t) const {
    const OnnxNode* only = nullptr;
    int readers = 0;
    for (const OnnxNode& n : m_.nodes)
      for (const std::string& in : n.inputs)
        if (in == t) {
          ++readers;
          only = &n;
        }
    for (const auto& o : m_.outputs)
      if (o.name == t) return t;
    if (readers == 1 && (only->op_type == "Relu" || only->op_type == "Clip"))
      return only->outputs[0];
    return t;
  }

  void choose_activations() {
    for (const Product& p : products_) {
      const OnnxNode& n = m_.nodes[p.node];
      acts_.insert(n.inputs[0]);
      acts_.insert(through_activation(n.outputs[0]));
    }
    // Sums and global pools of quantized tensors (QLinearAdd / QLinearGlobalAveragePool).
    for (const OnnxNode& n : m_.nodes) {
      if (!n.domain.empty() || n.inputs.empty()) continue;
      const bool add = n.op_type == "Add" && n.inputs.size() == 2 && acts_.count(n.inputs[0]) &&
                       acts_.count(n.inputs[1]);
      const bool pool = n.op_type == "GlobalAveragePool" && acts_.count(n.inputs[0]);
      if (add || pool) acts_.insert(through_activation(n.outputs[0]));
    }
  }

  void calibrate() {
    std::vector<fs::path> files;
    KILN_USER_CHECK(fs::is_directory(o_.calibrate))
        << "kiln quantize: --calibrate '" << o_.calibrate << "' is not a directory";
    for (const auto& e : fs::directory_iterator(o_.calibrate))
      if (e.path().extension() == ".npy") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    KILN_USER_CHECK(!files.empty())
        << "kiln quantize: no .npy files in '" << o_.calibrate << "' to calibrate on";
    // The float model with every activation to quantize as an extra output.
    OnnxModel cal = m_;
    const std::string input = m_.inputs[0].name;
    std::vector<std::string> outs;
    for (const std::string& a : acts_) {
      if (a == input) continue;
      frontend::OnnxValueInfo v;
      v.name = a;
      cal.outputs.push_back(v);
      outs.push_back(a);
    }
    graph::Graph g = frontend::import_onnx(cal);
    graph::CompiledModule cm = graph::build_module(g, Target::host(), {});
    runtime::GraphExecutor ex =
        runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m");
    const int first = static_cast<int>(m_.outputs.size());
    std::vector<int64_t> in_shape;
    for (const graph::Node& n : g.nodes())
      if (n.is_input() && n.name == input) in_shape = n.outputs.at(0).shape;
    std::mt19937 rng(1);
    for (const fs::path& f : files) {
      NDArray x = runtime::load_npy(f.string());
      const bool stack = x.ndim() == static_cast<int64_t>(in_shape.size()) + 1;
      std::vector<int64_t> want(x.shape().begin() + (stack ? 1 : 0), x.shape().end());
      KILN_USER_CHECK(want == in_shape && x.dtype() == DataType::Float(32))
          << "kiln quantize: '" << f.string() << "' is not a float32 sample of the input '" << input
          << "' (or a stack of them)";
      const int64_t n = stack ? x.shape()[0] : 1, bytes = x.nbytes() / std::max<int64_t>(n, 1);
      for (int64_t s = 0; s < n; ++s) {
        NDArray one = NDArray::empty(in_shape, DataType::Float(32));
        std::memcpy(one.data(), static_cast<const char*>(x.data()) + s * bytes, size_t(bytes));
        if (acts_.count(input)) ranges_[input].add(one, o_.method, rng);
        ex.set_input(0, one);
        ex.run();
        for (size_t k = 0; k < outs.size(); ++k)
          ranges_[outs[k]].add(ex.get_output(first + static_cast<int>(k)), o_.method, rng);
        ++samples_;
      }
    }
  }

  QParams params_of(const std::string& t) {
    Range& r = ranges_[t];
    if (o_.method == "entropy" && !r.histogram.counts.empty()) {
      const auto [lo, hi] = graph::entropy_range(r.histogram, kEntropyLevels);
      return act_params(lo, hi);
    }
    if (o_.method != "percentile" || r.sample.empty()) return act_params(r.lo, r.hi);
    std::sort(r.sample.begin(), r.sample.end());
    auto q = [&](double p) {
      const size_t k = static_cast<size_t>(std::llround(p / 100.0 * double(r.sample.size() - 1)));
      return double(r.sample[std::min(k, r.sample.size() - 1)]);
    };
    return act_params(q(100.0 - o_.percentile), q(o_.percentile));
  }

  /// Replaces initializer `name` by its quantized values, scale and zero point, and returns
  /// the DequantizeLinear node (along `axis`) that recomputes `name` from them.
  OnnxNode dequantized_initializer(const std::string& name, const NDArray& q, const NDArray& scale,
                                   const NDArray& zero_point, int64_t axis) {
    m_.initializers.erase(name);
    m_.initializers[name + "_quantized"] = q;
    m_.initializers[name + "_scale"] = scale;
    m_.initializers[name + "_zero_point"] = zero_point;
    OnnxNode dq =
        make_node("DequantizeLinear", {name + "_quantized", name + "_scale", name + "_zero_point"},
                  {name}, name + "_DequantizeLinear");
    dq.attrs["axis"] = axis;
    return dq;
  }

  void rewrite() {
    std::vector<OnnxNode> head, body;
    std::map<std::string, QParams> qp;
    for (const std::string& a : acts_) qp[a] = params_of(a);
    const std::string input = m_.inputs[0].name;
    std::map<std::string, std::string> rename;  // graph-input activations: consumers' new input
    auto add_qparams = [&](const std::string& t, const QParams& q) {
      m_.initializers[t + "_scale"] = scalar_f32(q.scale);
      m_.initializers[t + "_zero_point"] = scalar_s8(q.zero_point);
    };
    for (const std::string& a : acts_) {
      add_qparams(a, qp[a]);
      if (a != input) continue;
      head.push_back(make_node("QuantizeLinear", {a, a + "_scale", a + "_zero_point"},
                               {a + "_quantized"}, a + "_QuantizeLinear"));
      head.push_back(make_node("DequantizeLinear",
                               {a + "_quantized", a + "_scale", a + "_zero_point"},
                               {a + "_dequantized"}, a + "_DequantizeLinear"));
      rename[a] = a + "_dequantized";
    }
    // Weights (int8, symmetric per channel) and biases (int32, scale s_x·s_w).
    for (const Product& p : products_) {
      const OnnxNode& n = m_.nodes[p.node];
      const NDArray w = m_.initializers.at(p.weight);
      const int64_t O = w.shape()[size_t(p.axis)];
      const int64_t inner = p.axis == 0 ? w.numel() / O : 1, outer = p.axis == 0 ? 1 : w.shape()[0];
      std::vector<float> sw(size_t(O), 0.0f);
      auto index = [&](int64_t o, int64_t k) {  // element k of channel o
        return p.axis == 0 ? o * inner + k : k * O + o;
      };
      const int64_t per = p.axis == 0 ? inner : outer;
      for (int64_t o = 0; o < O; ++o) {
        float m = 0;
        for (int64_t k = 0; k < per; ++k)
          m = std::max(m, std::abs(w.data_as<float>()[index(o, k)]));
        sw[size_t(o)] = m > 0 ? m / 127.0f : 1.0f;
      }
      if (o_.per_tensor) {
        const float m = *std::max_element(sw.begin(), sw.end());
        std::fill(sw.begin(), sw.end(), m);
      }
      NDArray wq = NDArray::empty(w.shape(), DataType::Int(8));
      for (int64_t o = 0; o < O; ++o)
        for (int64_t k = 0; k < per; ++k) {
          const int64_t e = index(o, k);
          const double q = std::nearbyint(w.data_as<float>()[e] / sw[size_t(o)]);
          wq.data_as<int8_t>()[e] = static_cast<int8_t>(std::clamp(q, -127.0, 127.0));
        }
      NDArray scale = NDArray::empty({O}, DataType::Float(32)),
              zp = NDArray::empty({O}, DataType::Int(8));
      std::copy(sw.begin(), sw.end(), scale.data_as<float>());
      std::memset(zp.data(), 0, zp.nbytes());
      head.push_back(dequantized_initializer(p.weight, wq, scale, zp, p.axis));
      if (p.bias.empty()) continue;
      const float sx = qp.at(n.inputs[0]).scale;
      const NDArray b = m_.initializers.at(p.bias);
      NDArray bq = NDArray::empty({O}, DataType::Int(32)),
              bs = NDArray::empty({O}, DataType::Float(32)),
              bz = NDArray::empty({O}, DataType::Int(32));
      for (int64_t o = 0; o < O; ++o) {
        const float s = sx * sw[size_t(o)];
        bs.data_as<float>()[o] = s;
        bq.data_as<int32_t>()[o] = static_cast<int32_t>(std::clamp(
            std::nearbyint(double(b.data_as<float>()[o]) / s), -2147483647.0, 2147483647.0));
        bz.data_as<int32_t>()[o] = 0;
      }
      head.push_back(dequantized_initializer(p.bias, bq, bs, bz, 0));
    }
    // Every activation produced by a node: the node writes "<t>_float", then Q → DQ writes t.
    for (OnnxNode n : m_.nodes) {
      for (std::string& in : n.inputs)
        if (auto it = rename.find(in); it != rename.end()) in = it->second;
      std::vector<OnnxNode> after;
      for (std::string& out : n.outputs) {
        if (!acts_.count(out) || out == input) continue;
        const std::string t = out;
        out = t + "_float";
        after.push_back(make_node("QuantizeLinear", {out, t + "_scale", t + "_zero_point"},
                                  {t + "_quantized"}, t + "_QuantizeLinear"));
        after.push_back(make_node("DequantizeLinear",
                                  {t + "_quantized", t + "_scale", t + "_zero_point"}, {t},
                                  t + "_DequantizeLinear"));
      }
      body.push_back(std::move(n));
      body.insert(body.end(), after.begin(), after.end());
    }
    head.insert(head.end(), body.begin(), body.end());
    m_.nodes = std::move(head);
  }

  OnnxModel m_;
  QuantizeOptions o_;
  std::vector<Product> products_;
  std::set<std::string> acts_;
  std::map<std::string, Range> ranges_;
  int64_t samples_ = 0;
};

}  // namespace

Command add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Post-training int8 quantization of an ONNX model into QDQ form (calibrated)");
  cmd->add_option("model", o->model, "The float ONNX model")->required();
  cmd->add_option("-o,--output", o->output, "The quantized ONNX model to write")->required();
  cmd->add_option("--calibrate", o->calibrate,
                  "Folder of .npy calibration inputs (a sample or a stack of samples each)")
      ->required();
  cmd->add_option("--method", o->method,
                  "minmax (default), percentile, or entropy (KL divergence, as ONNX Runtime's)")
      ->check(CLI::IsMember({"minmax", "percentile", "entropy"}));
  cmd->add_option("--percentile", o->percentile,
                  "With --method percentile: the quantile kept at each end (default 99.999)")
      ->check(real_range(50, 100));
  cmd->add_flag("--per-tensor", o->per_tensor, "One weight scale per tensor (default per channel)");
  return Command{cmd, [o] {
                   Quantizer(frontend::load_onnx_model(o->model), *o).run();
                   return 0;
                 }};
}

}  // namespace kiln::cli
