// `kiln run` on the runtime alone (run_module.h): load a module directory with the
// GraphExecutor, feed inputs from .npy files (or seeded random values), run, print the outputs'
// names and shapes and optionally save them as DIR/<output name>.npy. .npy has no bfloat16: a
// bfloat16 input is read from a uint16 file of its bit patterns, and a bfloat16 output is
// written as float32 (an exact conversion) with a note on stderr. --output-dir is checked (and
// made) before the run. Compiled into both `kiln` and the cross-built `kiln-run`, so that a
// module gets the same random inputs on the workstation and on the board (or under qemu).
#include "run_module.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>

#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/npy.h"
#include "kiln/support/error.h"
#include "kiln/support/half.h"

namespace kiln::runner {

void add_run_options(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("dir", o.dir, "Module directory (graph.json, lib.so, params.bin)")->required();
  cmd->add_option("--input", o.inputs,
                  "NAME=FILE.npy, repeatable; inputs not given get seeded random values. "
                  ".npy has no bfloat16: a bfloat16 input is read from a uint16 .npy of its bit "
                  "patterns");
  cmd->add_option("--output-dir", o.output_dir,
                  "Write each output to DIR/<output name>.npy (a bfloat16 output as float32, "
                  "with a note)");
  cmd->add_option("--seed", o.seed, "Seed of the random inputs (default 0)");
  cmd->add_option("--threads", o.threads, "Threads (default: KILN_NUM_THREADS or all cores)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--repeat", o.repeat,
                  "After the first run, time N more and print their mean and minimum (the "
                  "first run loads the module and, on a GPU, compiles its device code)")
      ->check(CLI::Range(0, 1000000));
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
  } else if (t == DataType::Float(16)) {
    uint16_t* p = a.data_as<uint16_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = support::float_to_half(static_cast<float>(real(rng)));
  } else if (t == DataType::BFloat16()) {
    // Values in [-1, 1) rounded to bfloat16 (the upper half of a float32, to nearest even).
    uint16_t* p = a.data_as<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      float f = static_cast<float>(real(rng));
      uint32_t bits = 0;
      std::memcpy(&bits, &f, sizeof bits);
      p[i] = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
    }
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

}  // namespace

int run_module(const RunOptions& o) {
  if (o.threads > 0) kiln_set_num_threads(o.threads);
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
  auto t0 = std::chrono::steady_clock::now();
  ex.run();
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
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
  if (o.repeat > 0) {
    double total = 0, best = 0;
    for (int k = 0; k < o.repeat; ++k) {
      auto t = std::chrono::steady_clock::now();
      ex.run();
      double r =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
      total += r;
      best = k == 0 ? r : std::min(best, r);
    }
    std::printf("repeat: mean %.3f ms, min %.3f ms over %d runs\n", total / o.repeat, best,
                o.repeat);
  }
  return 0;
}

}  // namespace kiln::runner
