// Helpers shared by the `kiln` subcommands (cli_common.h): model loading (ONNX files and the
// built-in models of frontend/model_zoo.h), --input-shape parsing, seeded random inputs,
// timing (median / min / max of repeated runs) and conversions of tensors to doubles.
#include "cli_common.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/frontend/model_zoo.h"
#include "kiln/frontend/onnx.h"
#include "kiln/frontend/onnx_model.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/support/error.h"
#include "kiln/support/file.h"
#include "runner/run_module.h"

namespace kiln::cli {

namespace {

/// "1,3,224,224".
std::string join_dims(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s;
}

/// A model input's declared shape: "[batch, 3, 224, 224]" (symbolic names, '?' for unknown).
std::string model_dims(const frontend::OnnxValueInfo& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.shape.size(); ++i) {
    const frontend::OnnxDim& d = v.shape[i];
    s += (i ? ", " : "") + (d.size >= 0 ? std::to_string(d.size) : d.param.empty() ? "?" : d.param);
  }
  return s + "]";
}

}  // namespace

const char* const kModelHelp =
    "The model: an ONNX file, or builtin:resnet18 (Kiln's own ResNet-18 with random weights; "
    "--input-shape data=B,3,S,S sets batch and image size)";

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

CLI::Validator int_range(int64_t lo, int64_t hi) {
  std::string desc = "INT in " + std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi](std::string& in) -> std::string {
        int64_t v = 0;
        const char* end = in.data() + in.size();
        auto [p, ec] = std::from_chars(in.data(), end, v);
        if (ec == std::errc() && p == end && v >= lo && v <= hi) return "";
        return "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
               ", got '" + in + "'";
      },
      desc);
}

/// A number for messages: "0", "0.1", "100000".
static std::string num_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

CLI::Validator real_range(double lo, double hi) {
  const bool open = std::isinf(hi);
  std::string range = open ? ">= " + num_text(lo) : "from " + num_text(lo) + " to " + num_text(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& in) -> std::string {
        const char* s = in.c_str();
        char* end = nullptr;
        errno = 0;
        double v = std::strtod(s, &end);
        bool parsed = !in.empty() && end == s + in.size() && errno != ERANGE;
        if (parsed && std::isfinite(v) && v >= lo && v <= hi) return "";
        return "expected a finite number " + range + ", got '" + in + "'";
      },
      open ? "FLOAT >= " + num_text(lo) : "FLOAT in " + num_text(lo) + ".." + num_text(hi));
}

void add_threads_option(CLI::App* cmd, int& threads) {
  cmd->add_option("--threads", threads, "Threads (default: KILN_NUM_THREADS or all cores)")
      ->check(int_range(1, 1024));
}

void apply_threads(int threads) {
  if (threads > 0) kiln_set_num_threads(threads);
}

std::map<std::string, std::vector<int64_t>> parse_input_shapes(
    const std::vector<std::string>& specs) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& spec : specs) {
    size_t eq = spec.find('=');
    KILN_USER_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < spec.size())
        << "--input-shape '" << spec << "': expected NAME=D1,D2,... (e.g. data=1,3,224,224)";
    std::vector<int64_t> dims;
    std::stringstream ss(spec.substr(eq + 1));
    for (std::string d; std::getline(ss, d, ',');) {
      bool digits = !d.empty() && d.find_first_not_of("0123456789") == std::string::npos;
      bool negative =
          d.size() > 1 && d[0] == '-' && d.find_first_not_of("0123456789", 1) == std::string::npos;
      KILN_USER_CHECK(!negative) << "--input-shape '" << spec << "': dimension " << dims.size()
                                 << " is negative (" << d << ")";
      KILN_USER_CHECK(digits) << "--input-shape '" << spec << "': '" << d << "' is not a dimension";
      KILN_USER_CHECK(d.size() <= 12) << "--input-shape '" << spec << "': dimension " << dims.size()
                                      << " (" << d << ") is too large";
      dims.push_back(std::stoll(d));
    }
    std::string name = spec.substr(0, eq);
    KILN_USER_CHECK(!shapes.count(name)) << "--input-shape '" << name << "' given twice";
    shapes[name] = dims;
  }
  return shapes;
}

std::vector<autotune::Record> load_tuning_log(const std::string& path) {
  std::error_code ec;
  KILN_USER_CHECK(std::filesystem::exists(path, ec))
      << "--tuning-log '" << path << "': no such file";
  return autotune::load_records(path).records;
}

graph::Graph load_model(const std::string& model, const std::vector<std::string>& shape_specs) {
  std::map<std::string, std::vector<int64_t>> shapes = parse_input_shapes(shape_specs);
  const std::string prefix = "builtin:";
  if (model.rfind(prefix, 0) == 0) {
    std::string name = model.substr(prefix.size());
    KILN_USER_CHECK(name == "resnet18")
        << "unknown built-in model '" << name << "'; the built-in models: resnet18";
    int batch = 1, size = 224;
    for (const auto& [input, dims] : shapes) {
      KILN_USER_CHECK(input == "data")
          << "--input-shape '" << input << "': builtin:resnet18 has one input, 'data'";
      KILN_USER_CHECK(dims.size() == 4 && dims[1] == 3 && dims[2] == dims[3] && dims[0] >= 1 &&
                      dims[0] <= 4096 && dims[2] <= 4096)
          << "--input-shape data=" << runtime::shape_str(dims)
          << ": builtin:resnet18 takes data=B,3,S,S (batch B, square image of side S >= 32)";
      batch = static_cast<int>(dims[0]);
      size = static_cast<int>(dims[2]);
    }
    return frontend::resnet18(batch, 0, size);
  }
  std::error_code ec;
  KILN_USER_CHECK(std::filesystem::is_regular_file(model, ec))
      << "model file '" << model << "' does not exist or is not a file";
  frontend::OnnxModel m = frontend::load_onnx_model(model);
  check_input_shapes(m, shapes);
  frontend::ImportOptions opt;
  opt.input_shapes = shapes;
  return frontend::import_onnx(m, opt);
}

void check_input_shapes(const frontend::OnnxModel& m,
                        const std::map<std::string, std::vector<int64_t>>& shapes) {
  std::string names;
  for (const frontend::OnnxValueInfo& v : m.inputs)
    names += (names.empty() ? "'" : ", '") + v.name + "'";
  if (names.empty()) names = "(none)";
  for (const auto& [name, dims] : shapes) {
    auto it = std::find_if(m.inputs.begin(), m.inputs.end(),
                           [&](const frontend::OnnxValueInfo& v) { return v.name == name; });
    if (it == m.inputs.end()) {
      bool is_weight = m.initializers.count(name) != 0;
      KILN_ERROR << "--input-shape '" << name << "': the model has no input of that name"
                 << (is_weight ? " (it is an initializer, whose shape is fixed)" : "")
                 << "; its inputs: " << names;
    }
    const frontend::OnnxValueInfo& v = *it;
    KILN_USER_CHECK(v.kind.empty()) << "--input-shape '" << name << "': input '" << name
                                    << "' is a " << v.kind << ", not a tensor";
    if (!v.has_shape) continue;  // the model leaves the whole shape to the user
    KILN_USER_CHECK(dims.size() == v.shape.size())
        << "--input-shape " << name << "=" << join_dims(dims) << ": input '" << name << "' has "
        << v.shape.size() << " dimension(s) in the model (" << model_dims(v)
        << "), the option gives " << dims.size();
    for (size_t d = 0; d < dims.size(); ++d) {
      const frontend::OnnxDim& md = v.shape[d];
      if (md.size < 0) continue;  // symbolic or unknown: the option sets it
      KILN_USER_CHECK(md.size == dims[d])
          << "--input-shape " << name << "=" << join_dims(dims) << ": dimension " << d
          << " of input '" << name << "' is " << md.size << " in the model, the option gives "
          << dims[d] << " (only symbolic dimensions can be set; the model's shape is "
          << model_dims(v) << ")";
    }
  }
  for (const frontend::OnnxValueInfo& v : m.inputs) {
    if (!v.kind.empty() || !v.has_shape || shapes.count(v.name)) continue;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      const frontend::OnnxDim& md = v.shape[d];
      if (md.size >= 0) continue;
      if (!md.param.empty()) {
        KILN_ERROR << "'" << m.path << "': input '" << v.name << "' dimension " << d
                   << " is symbolic ('" << md.param << "'); give the input's shape with "
                   << "--input-shape " << v.name << "=D1,D2,... (the model's shape is "
                   << model_dims(v) << ")";
      }
      if (md.size < -1) {
        KILN_ERROR << "'" << m.path << "': input '" << v.name << "' dimension " << d
                   << " is negative (" << md.size << "); give the input's shape with --input-shape "
                   << v.name << "=D1,D2,...";
      }
      KILN_ERROR << "'" << m.path << "': input '" << v.name << "' dimension " << d
                 << " has no size (no value and no name, or the invalid value -1); give the "
                 << "input's shape with --input-shape " << v.name << "=D1,D2,...";
    }
  }
}

runtime::GraphExecutor executor_of(const graph::CompiledModule& m, const std::string& source) {
  return runtime::GraphExecutor::create(m.graph_json, m.lib, m.params, source);
}

std::string type_str(const runtime::NDArray& a) {
  return a.dtype().str() + runtime::shape_str(a.shape());
}

runtime::NDArray random_input(const runtime::TensorInfo& info, std::mt19937& rng) {
  return runner::random_input(info, rng);  // the same values as kiln run and kiln-run give
}

std::map<std::string, runtime::NDArray> set_random_inputs(runtime::GraphExecutor& ex,
                                                          unsigned seed) {
  std::mt19937 rng(seed);
  std::map<std::string, runtime::NDArray> values;
  for (int i = 0; i < ex.num_inputs(); ++i) {
    runtime::TensorInfo info = ex.input_info(i);
    runtime::NDArray a = random_input(info, rng);
    ex.set_input(i, a);
    values[info.name] = a;
  }
  return values;
}

Latency time_runs(runtime::GraphExecutor& ex, int warmup, int repeat) {
  KILN_USER_CHECK(repeat >= 1) << "--repeat must be at least 1, got " << repeat;
  for (int w = 0; w < warmup; ++w) ex.run();
  std::vector<double> times;
  for (int r = 0; r < repeat; ++r) {
    auto t = Clock::now();
    ex.run();
    times.push_back(ms_since(t));
  }
  std::sort(times.begin(), times.end());
  Latency l;
  size_t n = times.size();
  l.median = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  l.min = times.front();
  l.max = times.back();
  l.repeat = repeat;
  return l;
}

std::vector<double> to_doubles(const runtime::NDArray& a) {
  DataType t = a.dtype();
  std::vector<double> r(static_cast<size_t>(a.numel()));
  auto copy = [&](const auto* p) {
    for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<double>(p[i]);
  };
  if (t == DataType::Float(32)) {
    copy(a.data_as<float>());
  } else if (t == DataType::Float(64)) {
    copy(a.data_as<double>());
  } else if (t.is_bool() || t == DataType::UInt(8)) {
    copy(a.data_as<uint8_t>());
  } else if (t == DataType::Int(8)) {
    copy(a.data_as<int8_t>());
  } else if (t == DataType::Int(16)) {
    copy(a.data_as<int16_t>());
  } else if (t == DataType::UInt(16)) {
    copy(a.data_as<uint16_t>());
  } else if (t == DataType::Int(32)) {
    copy(a.data_as<int32_t>());
  } else if (t == DataType::UInt(32)) {
    copy(a.data_as<uint32_t>());
  } else if (t == DataType::Int(64)) {
    copy(a.data_as<int64_t>());
  } else if (t == DataType::UInt(64)) {
    copy(a.data_as<uint64_t>());
  } else {
    KILN_ERROR << "cannot compare tensors of dtype " << t.str();
  }
  return r;
}

std::string bytes_str(size_t bytes) { return support::bytes_text(bytes); }

std::string memory_summary(const graph::CompiledModule& m) {
  using json = nlohmann::json;
  json g = json::parse(m.graph_json, nullptr, /*allow_exceptions=*/false);
  if (!g.is_object() || !g.contains("attrs")) return m.memory.summary();
  const json& attrs = g["attrs"];
  if (!attrs.contains("shape") || !attrs.contains("dtype") || !attrs.contains("storage_id") ||
      !attrs["shape"].is_array() || attrs["shape"].size() != attrs["dtype"].size() ||
      attrs["shape"].size() != attrs["storage_id"].size()) {
    return m.memory.summary();
  }
  // Sizes in 64-bit unsigned arithmetic with overflow checks: a tensor whose byte size does not
  // fit is named, instead of printing a wrapped-around "0 B".
  std::map<int64_t, uint64_t> storage;
  uint64_t naive = 0;
  try {
    for (size_t e = 0; e < attrs["shape"].size(); ++e) {
      std::vector<int64_t> shape = attrs["shape"][e].get<std::vector<int64_t>>();
      DataType dt = DataType::parse(attrs["dtype"][e].get<std::string>());
      uint64_t bytes = static_cast<uint64_t>(dt.bytes());
      bool overflow = false;
      for (int64_t d : shape)
        overflow |= d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
      overflow |= __builtin_add_overflow(naive, bytes, &naive);
      if (overflow) {
        return "memory plan: more than 16 EiB: tensor " + std::to_string(e) + " (" + dt.str() +
               runtime::shape_str(shape) + ") has more bytes than a 64-bit size can count";
      }
      uint64_t& s = storage[attrs["storage_id"][e].get<int64_t>()];
      s = std::max(s, bytes);
    }
  } catch (const std::exception&) {  // not the graph.json Kiln writes: the plan's own summary
    return m.memory.summary();
  }
  uint64_t total = 0;
  for (const auto& [id, bytes] : storage) {
    if (__builtin_add_overflow(total, bytes, &total))
      return "memory plan: " + std::to_string(storage.size()) + " storages, more than 16 EiB";
  }
  return "memory plan: " + std::to_string(storage.size()) + " storages, " + bytes_str(total) +
         " (no sharing: " + bytes_str(naive) + ")";
}

}  // namespace kiln::cli
