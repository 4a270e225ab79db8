// The `kiln` command line. `kiln demo`: the paper's matrix product end to end (write it as a
// tensor expression, schedule it, lower, compile for this CPU, run, check against a naive
// reference, export a shared library and load it back with the runtime alone). `kiln run DIR`:
// load a module directory with the runtime's GraphExecutor, feed inputs from .npy files (or
// seeded random values), run, print the outputs' names and shapes and optionally save them.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>
#include <set>
#include <sstream>

#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/runtime/npy.h"
#include "kiln/target/build.h"

namespace {

using namespace kiln;  // NOLINT
using ir::Var;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int run_demo(int n, int threads, const std::string& out_dir, bool show_ir) {
  if (threads > 0) kiln_set_num_threads(threads);
  std::cout << "Kiln demo: C[y, x] = sum_k A[k, y] * B[k, x]  (the TVM paper's Figure 5), n = " << n
            << "\n\n";
  auto t0 = Clock::now();
  auto A = te::placeholder({n, n}, DataType::Float(32), "A");
  auto B = te::placeholder({n, n}, DataType::Float(32), "B");
  auto k = te::reduce_axis({0, n}, "k");
  // Data layout, as BLAS libraries do: A and B are packed into panels of 8 and 32 columns,
  // Ap[y / 8, k, y % 8] = A[k, y], so the micro-kernel reads consecutive memory per k instead
  // of touching a new 4 KiB page.
  const int mr = 8, nr = 32;
  auto Ap = te::compute(
      {n / mr, n, mr}, [&](Var yo, Var kk, Var yi) { return A(kk, yo * mr + yi); }, "Ap");
  auto Bp = te::compute(
      {n / nr, n, nr}, [&](Var xo, Var kk, Var xi) { return B(kk, xo * nr + xi); }, "Bp");
  auto C = te::compute(
      {n, n},
      [&](Var y, Var x) { return te::sum(Ap(y / mr, k, y % mr) * Bp(x / nr, k, x % nr), {k}); },
      "C");
  // Register blocking (docs/gemm-schedule.md): 8x32 tiles of C accumulate in a local buffer
  // that LLVM keeps in 16 zmm registers; per k step, 2 vector loads of B, 8 broadcasts of Ap
  // and 16 FMAs. The 32-column panel loop is outermost and parallel, so a panel of B stays in
  // cache while every row block uses it.
  auto s = te::create_schedule({C});
  auto CL = s.cache_write(C, "local");
  auto [yo, xo, yi, xi] = s[C].tile(s[C].op_axis()[0], s[C].op_axis()[1], mr, nr);
  s[C].reorder({xo, yo, yi, xi});
  s[CL].compute_at(s[C], yo);
  auto cy = s[CL].op_axis()[0], cx = s[CL].op_axis()[1];
  auto [cxo, cxi] = s[CL].split(cx, 16);
  s[CL].reorder({k, cy, cxo, cxi});
  s[CL].unroll(cy);
  s[CL].unroll(cxo);
  s[CL].vectorize(cxi);
  auto [xio, xii] = s[C].split(xi, 16);
  s[C].vectorize(xii);
  s[C].parallel(xo);
  for (const te::Tensor& P : {Ap, Bp}) {
    s[P].parallel(s[P].op_axis()[0]);
    s[P].vectorize(s[P].op_axis()[2]);
  }
  std::cout << "Schedule:\n" << s.to_string() << "\n";
  tir::PrimFunc f = tir::lower(s, {A, B, C}, "matmul");
  if (show_ir) std::cout << "Lowered loop program:\n" << f << "\n";
  runtime::Module m = build({f}, Target::host());
  double compile_ms = ms_since(t0);
  std::cout << "Target: " << Target::host() << "\n";
  std::printf("Lower + compile: %.1f ms\n", compile_ms);

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto a = runtime::NDArray::empty({n, n}, DataType::Float(32));
  auto b = runtime::NDArray::empty({n, n}, DataType::Float(32));
  auto c = runtime::NDArray::empty({n, n}, DataType::Float(32));
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = dist(rng);
  for (int64_t i = 0; i < b.numel(); ++i) b.data_as<float>()[i] = dist(rng);
  std::fill(c.data_as<float>(), c.data_as<float>() + c.numel(), NAN);
  runtime::PackedFunc fn = m.get_function("matmul");
  fn(a, b, c);

  // Naive reference (k outermost for speed; the same sum).
  std::vector<float> ref(static_cast<size_t>(n) * n, 0.0f);
  const float* pa = a.data_as<float>();
  const float* pb = b.data_as<float>();
  for (int kk = 0; kk < n; ++kk)
    for (int y = 0; y < n; ++y) {
      float av = pa[kk * n + y];
      for (int x = 0; x < n; ++x) ref[y * n + x] += av * pb[kk * n + x];
    }
  auto max_err = [&](const float* got) {
    double e = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      e = std::max(e, std::abs(static_cast<double>(got[i]) - ref[i]) / (1.0 + std::abs(ref[i])));
    return e;
  };
  double err = max_err(c.data_as<float>());
  std::printf("Max relative error vs naive C++ reference: %.2e\n", err);
  if (!(err < 1e-3)) {
    std::cerr << "kiln demo: result does not match the reference\n";
    return 1;
  }
  // Time it.
  for (int w = 0; w < 2; ++w) fn(a, b, c);
  std::vector<double> times;
  for (int r = 0; r < 10; ++r) {
    auto t = Clock::now();
    fn(a, b, c);
    times.push_back(ms_since(t));
  }
  std::sort(times.begin(), times.end());
  double med = times[times.size() / 2];
  std::printf("Run time (median of 10, %d thread(s)): %.2f ms = %.1f GFLOP/s\n",
              kiln_get_num_threads(), med, 2.0 * n * n * n / (med * 1e6));

  // Deploy: export a shared library and load it back with the runtime alone.
  std::filesystem::create_directories(out_dir);
  std::string so = out_dir + "/matmul.so";
  m.export_library(so);
  runtime::Module loaded = runtime::Module::load(so);
  std::fill(c.data_as<float>(), c.data_as<float>() + c.numel(), NAN);
  loaded.get_function("matmul")(a, b, c);
  double err2 = max_err(c.data_as<float>());
  std::printf("Exported %s; reloaded with the runtime, max relative error %.2e\n", so.c_str(),
              err2);
  if (!(err2 < 1e-3)) {
    std::cerr << "kiln demo: exported library gives a wrong result\n";
    return 1;
  }
  // A wrong call returns an error, not a crash.
  try {
    auto bad = runtime::NDArray::empty({n, n / 2}, DataType::Float(32));
    fn(a, b, bad);
  } catch (const Error& e) {
    std::cout << "A call with a wrong shape is refused: " << e.what() << "\n";
  }
  return 0;
}

/// An output name as a file name: characters other than [A-Za-z0-9._-] become '_'.
std::string safe_file_name(const std::string& name) {
  std::string r = name;
  for (char& c : r)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  if (r.empty() || r == "." || r == "..") r = "_" + r;
  return r;
}

std::string type_str(const runtime::NDArray& a) {
  return a.dtype().str() + runtime::shape_str(a.shape());
}

/// Seeded random values for an input of this shape and dtype: floats uniform in [-1, 1),
/// integers in [0, 10), bools 0 or 1.
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

int run_module(const std::string& dir, const std::vector<std::string>& input_specs,
               const std::string& output_dir, unsigned seed) {
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(dir);
  std::set<std::string> given;
  for (const std::string& spec : input_specs) {
    size_t eq = spec.find('=');
    KILN_USER_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < spec.size())
        << "--input expects NAME=FILE.npy, got '" << spec << "'";
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    KILN_USER_CHECK(!given.count(name)) << "--input '" << name << "' given twice";
    std::vector<std::string> valid = ex.input_names();
    if (std::find(valid.begin(), valid.end(), name) == valid.end()) {
      std::string list;
      for (const std::string& v : valid) list += (list.empty() ? "'" : ", '") + v + "'";
      KILN_ERROR << "--input '" << name << "': the module has no such input; its inputs: " << list;
    }
    runtime::NDArray a = runtime::load_npy(file);
    ex.set_input(name, a);
    given.insert(name);
    std::cout << "input " << name << ": " << type_str(a) << " from " << file << "\n";
  }
  std::mt19937 rng(seed);
  for (int i = 0; i < ex.num_inputs(); ++i) {
    runtime::TensorInfo info = ex.input_info(i);
    if (given.count(info.name)) continue;
    runtime::NDArray a = random_input(info, rng);
    ex.set_input(i, a);
    std::cout << "input " << info.name << ": " << type_str(a) << " random (seed " << seed << ")\n";
  }
  auto t0 = Clock::now();
  ex.run();
  double ms = ms_since(t0);
  if (!output_dir.empty()) std::filesystem::create_directories(output_dir);
  std::set<std::string> files;
  std::vector<std::string> names = ex.output_names();
  for (int i = 0; i < ex.num_outputs(); ++i) {
    runtime::NDArray out = ex.get_output(i);
    std::cout << "output " << names[static_cast<size_t>(i)] << ": " << type_str(out);
    if (!output_dir.empty()) {
      std::string base = safe_file_name(names[static_cast<size_t>(i)]), file = base;
      for (int k = 1; files.count(file); ++k) file = base + "_" + std::to_string(k);
      files.insert(file);
      std::string path = (std::filesystem::path(output_dir) / (file + ".npy")).string();
      runtime::save_npy(path, out);
      std::cout << " -> " << path;
    }
    std::cout << "\n";
  }
  std::printf("run: %.3f ms (%d op nodes, %zu bytes of storage)\n", ms, ex.num_op_nodes(),
              ex.storage_bytes());
  return 0;
}

/// `kiln compile MODEL.onnx -o OUT`: import, optimize, build, write the module directory.
int compile_model(const std::string& model, const std::string& out, const std::string& target,
                  int opt_level, const std::vector<std::string>& shape_specs) {
  frontend::ImportOptions opt;
  for (const std::string& spec : shape_specs) {
    size_t eq = spec.find('=');
    KILN_USER_CHECK(eq != std::string::npos && eq > 0)
        << "--input-shape '" << spec << "': expected NAME=D1,D2,... (e.g. data=1,3,224,224)";
    std::vector<int64_t> dims;
    std::stringstream ss(spec.substr(eq + 1));
    for (std::string d; std::getline(ss, d, ',');) {
      KILN_USER_CHECK(!d.empty() && d.find_first_not_of("0123456789") == std::string::npos)
          << "--input-shape '" << spec << "': '" << d << "' is not a dimension";
      dims.push_back(std::stoll(d));
    }
    opt.input_shapes[spec.substr(0, eq)] = dims;
  }
  auto t0 = Clock::now();
  graph::Graph g = frontend::import_onnx(model, opt);
  graph::BuildOptions bopt;
  bopt.opt_level = opt_level;
  graph::CompiledModule m = graph::compile_to_directory(g, Target(target), bopt, out);
  std::printf("compiled %s -> %s in %.0f ms: %d kernels; %s\n", model.c_str(), out.c_str(),
              ms_since(t0), m.num_kernels, m.memory.summary().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: an end-to-end optimizing compiler for deep learning"};
  app.require_subcommand(1);
  CLI::App* demo = app.add_subcommand("demo", "Compile and run the paper's matrix product");
  int n = 1024, threads = 0;
  std::string out_dir = "build/demo";
  bool show_ir = false;
  demo->add_option("--size", n, "Matrix size n (n x n x n), a multiple of 32")
      ->check(CLI::Range(32, 8192) & CLI::Validator(
                                         [](std::string& v) {
                                           return std::stoi(v) % 32
                                                      ? std::string("must be a multiple of 32")
                                                      : std::string();
                                         },
                                         "MULTIPLE OF 32"));
  demo->add_option("--threads", threads, "Threads (default: KILN_NUM_THREADS or all cores)")
      ->check(CLI::Range(1, 1024));
  demo->add_option("--out", out_dir, "Where to write matmul.so");
  demo->add_flag("--show-ir", show_ir, "Print the lowered loop program");

  CLI::App* run = app.add_subcommand("run", "Run a compiled module directory on .npy inputs");
  std::string module_dir, output_dir;
  std::vector<std::string> input_specs;
  unsigned seed = 0;
  run->add_option("dir", module_dir, "Module directory (graph.json, lib.so, params.bin)")
      ->required();
  run->add_option("--input", input_specs,
                  "NAME=FILE.npy, repeatable; inputs not given get seeded random values");
  run->add_option("--output-dir", output_dir, "Write each output to DIR/<output name>.npy");
  run->add_option("--seed", seed, "Seed of the random inputs (default 0)");
  run->add_option("--threads", threads, "Threads (default: KILN_NUM_THREADS or all cores)")
      ->check(CLI::Range(1, 1024));
  CLI::App* compile = app.add_subcommand("compile", "Compile an ONNX model to a module directory");
  std::string model_path, compile_out, target_str = "llvm -mcpu=native";
  int opt_level = 2;
  std::vector<std::string> shape_specs;
  compile->add_option("model", model_path, "The ONNX model")->required()->check(CLI::ExistingFile);
  compile->add_option("-o,--output", compile_out, "Output module directory")->required();
  compile->add_option("--target", target_str, "Target, e.g. 'llvm -mcpu=native' (default)");
  compile->add_option("--opt-level", opt_level, "0: no graph optimization; 1-3: optimize")
      ->check(CLI::Range(0, 3));
  compile->add_option("--input-shape", shape_specs,
                      "NAME=D1,D2,...: shape of an input (needed for symbolic dimensions)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (*compile) return compile_model(model_path, compile_out, target_str, opt_level, shape_specs);
    if (*demo) return run_demo(n, threads, out_dir, show_ir);
    if (*run) {
      if (threads > 0) kiln_set_num_threads(threads);
      return run_module(module_dir, input_specs, output_dir, seed);
    }
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
