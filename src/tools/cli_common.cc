// Helpers shared by the `kiln` subcommands (cli_common.h): model loading (ONNX files and the
// built-in models of frontend/model_zoo.h), --input-shape parsing, seeded random inputs,
// timing (median / min / max of repeated runs) and conversions of tensors to doubles.
#include "cli_common.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "kiln/frontend/model_zoo.h"
#include "kiln/frontend/onnx.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/support/error.h"

namespace kiln::cli {

const char* const kModelHelp =
    "The model: an ONNX file, or builtin:resnet18 (Kiln's own ResNet-18 with random weights; "
    "--input-shape data=B,3,S,S sets batch and image size)";

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void add_threads_option(CLI::App* cmd, int& threads) {
  cmd->add_option("--threads", threads, "Threads (default: KILN_NUM_THREADS or all cores)")
      ->check(CLI::Range(1, 1024));
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
      KILN_USER_CHECK(!d.empty() && d.size() <= 12 &&
                      d.find_first_not_of("0123456789") == std::string::npos)
          << "--input-shape '" << spec << "': '" << d << "' is not a dimension";
      dims.push_back(std::stoll(d));
    }
    std::string name = spec.substr(0, eq);
    KILN_USER_CHECK(!shapes.count(name)) << "--input-shape '" << name << "' given twice";
    shapes[name] = dims;
  }
  return shapes;
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
  frontend::ImportOptions opt;
  opt.input_shapes = shapes;
  return frontend::import_onnx(model, opt);
}

runtime::GraphExecutor executor_of(const graph::CompiledModule& m, const std::string& source) {
  return runtime::GraphExecutor::create(m.graph_json, m.lib, m.params, source);
}

std::string type_str(const runtime::NDArray& a) {
  return a.dtype().str() + runtime::shape_str(a.shape());
}

runtime::NDArray random_input(const runtime::TensorInfo& info, std::mt19937& rng) {
  runtime::NDArray a = runtime::NDArray::empty(info.shape, info.dtype);
  DataType t = info.dtype;
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, t.is_bool() ? 1 : 9);
  int64_t n = a.numel();
  auto fill = [&](auto* p, bool is_real) {
    using T = std::remove_pointer_t<decltype(p)>;
    for (int64_t i = 0; i < n; ++i)
      p[i] = is_real ? static_cast<T>(real(rng)) : static_cast<T>(small(rng));
  };
  if (t == DataType::Float(32)) {
    fill(a.data_as<float>(), true);
  } else if (t == DataType::Float(64)) {
    fill(a.data_as<double>(), true);
  } else if (t.is_scalar() && (t.is_integer() || t.is_bool()) && t.bits() <= 64) {
    switch (t.bytes()) {
      case 1:
        fill(a.data_as<uint8_t>(), false);
        break;
      case 2:
        fill(a.data_as<uint16_t>(), false);
        break;
      case 4:
        fill(a.data_as<uint32_t>(), false);
        break;
      default:
        fill(a.data_as<uint64_t>(), false);
        break;
    }
  } else {
    KILN_ERROR << "input '" << info.name << "': cannot generate random values of dtype " << t.str()
               << "; give it with --input " << info.name << "=FILE.npy";
  }
  return a;
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

std::string bytes_str(size_t bytes) {
  char buf[64];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  } else if (bytes < 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  }
  return buf;
}

}  // namespace kiln::cli
