// What the `kiln` subcommands share: loading a model (an ONNX file or a built-in model),
// seeded random inputs, timing runs, comparing tensors, and the Command type through which
// each subcommand's file registers its options with CLI11. One file per subcommand:
// cmd_demo.cc, cmd_compile_run.cc, cmd_bench.cc, cmd_inspect.cc, cmd_compare.cc.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kiln/autotune/record.h"
#include "kiln/graph/build_module.h"
#include "kiln/graph/graph.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/ndarray.h"

namespace kiln::frontend {
struct OnnxModel;
}

namespace kiln::cli {

using Clock = std::chrono::steady_clock;

/// Milliseconds since t0.
double ms_since(Clock::time_point t0);

/// A registered subcommand: after parsing, `run` executes it (throwing kiln::Error on bad
/// input) and returns the process's exit code.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_demo_command(CLI::App& app);
Command add_compile_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_inspect_command(CLI::App& app);
Command add_compare_command(CLI::App& app);
Command add_tune_command(CLI::App& app);
Command add_quantize_command(CLI::App& app);

/// A CLI11 check for an integer option in [lo, hi]; CLI11 reports a bad value as
/// "--threads: expected an integer from 1 to 1024, got 'abc'" (instead of CLI11's own
/// "Value abc not in range ...").
CLI::Validator int_range(int64_t lo, int64_t hi);
/// A CLI11 check for a finite number in [lo, hi] (hi = infinity: no upper bound); NaN and
/// infinities are refused: "--atol: expected a finite number >= 0, got 'nan'".
CLI::Validator real_range(double lo, double hi = std::numeric_limits<double>::infinity());

/// Adds `--threads N` (1..1024) to `cmd`, stored in `threads` (0: leave the default).
void add_threads_option(CLI::App* cmd, int& threads);
/// Sets the runtime's thread count when `threads` > 0.
void apply_threads(int threads);

/// The MODEL argument's help text.
extern const char* const kModelHelp;

/// Parses --input-shape specs "NAME=D1,D2,..." (user errors name the bad spec).
std::map<std::string, std::vector<int64_t>> parse_input_shapes(
    const std::vector<std::string>& specs);

/// Checks --input-shape specs against a parsed model before import: every name must be a
/// tensor input of the model (else a user error listing its inputs), the rank must match a
/// declared shape, and a static (non-symbolic) dimension cannot be changed (the error names the
/// input, the dimension and both values). An input left to its declared shape whose dimension
/// is negative, or has neither a size nor a name, is a user error saying so.
void check_input_shapes(const frontend::OnnxModel& m,
                        const std::map<std::string, std::vector<int64_t>>& shapes);

/// Loads a model: an ONNX file, or "builtin:resnet18" (frontend/model_zoo.h; an input shape
/// "data=B,3,S,S" picks the batch and image size). User errors name the path or list the
/// built-in models.
graph::Graph load_model(const std::string& model, const std::vector<std::string>& shape_specs);

/// The records of `--tuning-log PATH` for a build: "--tuning-log 'PATH': no such file" when it
/// is missing (a build given a log expects one; `kiln tune` starts a missing log instead), and
/// load_records' error when it is not a regular file (a FIFO, /dev/zero, a directory).
std::vector<autotune::Record> load_tuning_log(const std::string& path);

/// Makes an executor of a compiled module held in memory; `source` names it in errors.
runtime::GraphExecutor executor_of(const graph::CompiledModule& m, const std::string& source);

/// "float32[1, 3, 224, 224]".
std::string type_str(const runtime::NDArray& a);

/// Seeded random values for an input of this shape and dtype: floats (bfloat16 included)
/// uniform in [-1, 1),
/// integers in [0, 10), bools 0 or 1. Other dtypes: a user error naming the input.
runtime::NDArray random_input(const runtime::TensorInfo& info, std::mt19937& rng);

/// Sets every input of `ex` not in `given` to seeded random values (drawn in input order);
/// returns them by name.
std::map<std::string, runtime::NDArray> set_random_inputs(runtime::GraphExecutor& ex,
                                                          unsigned seed);

/// Latency of `repeat` runs after `warmup` untimed ones, in milliseconds.
struct Latency {
  double median = 0, min = 0, max = 0;
  int repeat = 0;
};
Latency time_runs(runtime::GraphExecutor& ex, int warmup, int repeat);

/// The elements of a tensor of any integer, bool or float dtype, as doubles.
std::vector<double> to_doubles(const runtime::NDArray& a);

/// Human-readable bytes: "512 B", "1.5 KiB", "44.8 MiB", "2.0 TiB".
std::string bytes_str(size_t bytes);

/// The module's memory plan, "memory plan: 5 storages, 1.2 MiB (no sharing: 3.4 MiB)", computed
/// from graph_json's shapes with overflow-checked 64-bit arithmetic: a tensor whose byte size
/// does not fit is named ("memory plan: more than 16 EiB: tensor 3 (float32[...]) ...")
/// instead of a wrapped-around size.
std::string memory_summary(const graph::CompiledModule& m);

}  // namespace kiln::cli
