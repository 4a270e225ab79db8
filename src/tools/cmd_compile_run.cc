// `kiln compile MODEL -o DIR`: import (or build) the model, optimize, compile, write the module
// directory. `kiln run DIR`: load a module directory with the runtime's GraphExecutor, feed
// inputs from .npy files (or seeded random values), run, print the outputs' names and shapes
// and optionally save them as DIR/<output name>.npy. .npy has no bfloat16: a bfloat16 input is
// read from a uint16 file of its bit patterns, and a bfloat16 output is written as float32 (an
// exact conversion) with a note on stderr. --output-dir is checked (and made) before the run.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "cli_common.h"
#include "kiln/autotune/record.h"
#include "kiln/runtime/npy.h"
#include "kiln/support/error.h"
#include "kiln/target/target.h"

namespace kiln::cli {

namespace {

/// An output name as a file name: characters other than [A-Za-z0-9._-] become '_'.
std::string safe_file_name(const std::string& name) {
  std::string r = name;
  for (char& c : r)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  if (r.empty() || r == "." || r == "..") r = "_" + r;
  return r;
}

/// Makes --output-dir `dir` (with its parents) before the run, so that a path that cannot hold
/// the outputs is refused before the model runs: a regular file, a path under a file, or a
/// directory this process cannot write to.
void prepare_output_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // The nearest ancestor that exists must be a directory.
  for (fs::path p = fs::path(dir); !p.empty(); p = p.parent_path()) {
    fs::file_status st = fs::status(p, ec);
    if (fs::exists(st)) {
      KILN_USER_CHECK(fs::is_directory(st))
          << "--output-dir '" << dir
          << "': " << (p == fs::path(dir) ? std::string("it") : "'" + p.string() + "'")
          << " exists and is not a directory";
      break;
    }
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  KILN_USER_CHECK(!ec) << "--output-dir '" << dir
                       << "': cannot create the directory: " << ec.message();
  KILN_USER_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0)
      << "--output-dir '" << dir << "': cannot write there: " << std::strerror(errno);
}

/// A bfloat16 tensor's values as float32 (exact: bfloat16 is float32's upper half).
runtime::NDArray bf16_to_f32(const runtime::NDArray& a) {
  runtime::NDArray out = runtime::NDArray::empty(a.shape(), DataType::Float(32));
  const uint16_t* src = a.data_as<uint16_t>();
  float* dst = out.data_as<float>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(&dst[i], &bits, sizeof bits);
  }
  return out;
}

struct RunOptions {
  std::string dir, output_dir;
  std::vector<std::string> inputs;
  unsigned seed = 0;
  int threads = 0;
};

int run_module(const RunOptions& o) {
  apply_threads(o.threads);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(o.dir);
  std::set<std::string> given;
  for (const std::string& spec : o.inputs) {
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
    const int index = static_cast<int>(std::find(valid.begin(), valid.end(), name) - valid.begin());
    const DataType want = ex.input_info(index).dtype;
    std::string how;
    if (want == DataType::BFloat16() && a.dtype() == DataType::UInt(16)) {
      // .npy has no bfloat16: a uint16 file holds the bit patterns.
      runtime::NDArray b = runtime::NDArray::empty(a.shape(), want);
      b.copy_from(a.data(), a.nbytes());
      a = b;
      how = " (uint16 bit patterns)";
    }
    KILN_USER_CHECK(want != DataType::BFloat16() || a.dtype() == want)
        << "--input " << name << "='" << file << "': the input is bfloat16, the file holds "
        << a.dtype() << "; .npy has no bfloat16: give its bit patterns as a uint16 .npy "
        << "(numpy: (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16))";
    ex.set_input(name, a);
    given.insert(name);
    std::cout << "input " << name << ": " << type_str(a) << " from " << file << how << "\n";
  }
  if (!o.output_dir.empty()) prepare_output_dir(o.output_dir);
  std::mt19937 rng(o.seed);
  for (int i = 0; i < ex.num_inputs(); ++i) {
    runtime::TensorInfo info = ex.input_info(i);
    if (given.count(info.name)) continue;
    runtime::NDArray a = random_input(info, rng);
    ex.set_input(i, a);
    std::cout << "input " << info.name << ": " << type_str(a) << " random (seed " << o.seed
              << ")\n";
  }
  auto t0 = Clock::now();
  ex.run();
  double ms = ms_since(t0);
  std::set<std::string> files;
  std::vector<std::string> names = ex.output_names();
  for (int i = 0; i < ex.num_outputs(); ++i) {
    runtime::NDArray out = ex.get_output(i);
    std::cout << "output " << names[static_cast<size_t>(i)] << ": " << type_str(out);
    if (!o.output_dir.empty()) {
      std::string base = safe_file_name(names[static_cast<size_t>(i)]), file = base;
      for (int k = 1; files.count(file); ++k) file = base + "_" + std::to_string(k);
      files.insert(file);
      std::string path = (std::filesystem::path(o.output_dir) / (file + ".npy")).string();
      if (out.dtype() == DataType::BFloat16()) {
        std::cerr << "note: output " << names[static_cast<size_t>(i)]
                  << " is bfloat16, which .npy cannot hold: written as float32 (the same "
                     "values)\n";
        out = bf16_to_f32(out);
      }
      runtime::save_npy(path, out);
      std::cout << " -> " << path;
    }
    std::cout << "\n";
  }
  std::printf("run: %.3f ms (%d op nodes, %zu bytes of storage)\n", ms, ex.num_op_nodes(),
              ex.storage_bytes());
  return 0;
}

struct CompileOptions {
  std::string model, out, target = "llvm -mcpu=native";
  std::string tuning_log;
  int opt_level = 2, tuning_threads = 1;
  std::vector<std::string> shapes;
};

int compile_model(const CompileOptions& o) {
  auto t0 = Clock::now();
  graph::Graph g = load_model(o.model, o.shapes);
  graph::BuildOptions bopt;
  bopt.opt_level = o.opt_level;
  if (!o.tuning_log.empty()) {
    bopt.tuning_records = load_tuning_log(o.tuning_log);
    bopt.tuning_threads = o.tuning_threads;
  }
  graph::CompiledModule m = graph::compile_to_directory(g, Target(o.target), bopt, o.out);
  std::printf("compiled %s -> %s in %.0f ms: %d kernels; %s\n", o.model.c_str(), o.out.c_str(),
              ms_since(t0), m.num_kernels, memory_summary(m).c_str());
  std::printf("  graph passes %.0f ms, kernels lowered %.0f ms, code generation %.0f ms\n",
              m.optimize_ms, m.lower_ms, m.codegen_ms);
  for (const std::string& line : m.tuning_report) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

Command add_compile_command(CLI::App& app) {
  auto o = std::make_shared<CompileOptions>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile an ONNX model to a module directory");
  cmd->add_option("model", o->model, kModelHelp)->required();
  cmd->add_option("-o,--output", o->out, "Output module directory")->required();
  cmd->add_option("--target", o->target, "Target, e.g. 'llvm -mcpu=native' (default)");
  cmd->add_option("--opt-level", o->opt_level, "0: no graph optimization; 1-3: optimize")
      ->check(int_range(0, 3));
  cmd->add_option("--input-shape", o->shapes,
                  "NAME=D1,D2,...: shape of an input (needed for symbolic dimensions)");
  cmd->add_option("--tuning-log", o->tuning_log,
                  "Use the best config of each workload in this `kiln tune` log");
  cmd->add_option("--tuning-threads", o->tuning_threads,
                  "Use the records `kiln tune --threads N` made: the thread count the module "
                  "will run with (default 1)")
      ->check(int_range(1, 1024));
  return {cmd, [o] { return compile_model(*o); }};
}

Command add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a compiled module directory on .npy inputs");
  cmd->add_option("dir", o->dir, "Module directory (graph.json, lib.so, params.bin)")->required();
  cmd->add_option("--input", o->inputs,
                  "NAME=FILE.npy, repeatable; inputs not given get seeded random values. "
                  ".npy has no bfloat16: a bfloat16 input is read from a uint16 .npy of its bit "
                  "patterns");
  cmd->add_option("--output-dir", o->output_dir,
                  "Write each output to DIR/<output name>.npy (a bfloat16 output as float32, "
                  "with a note)");
  cmd->add_option("--seed", o->seed, "Seed of the random inputs (default 0)");
  add_threads_option(cmd, o->threads);
  return {cmd, [o] { return run_module(*o); }};
}

}  // namespace kiln::cli
