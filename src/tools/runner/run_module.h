/// \file run_module.h
/// \brief `kiln run` itself, on the runtime alone: shared by the `kiln` command line and by
/// `kiln-run`, the runner built for a board (cmake/runtime_only.cmake) and run under qemu by
/// `kiln run --emulate`. Both print the same lines and write the same files, and give a
/// module the same seeded random inputs, so their outputs can be compared.
#pragma once

#include <CLI/CLI.hpp>
#include <random>
#include <string>
#include <vector>

#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/ndarray.h"

namespace kiln::runner {

/// The options of `kiln run` / `kiln-run`.
struct RunOptions {
  std::string dir;                  ///< the module directory
  std::string output_dir;           ///< --output-dir: where outputs go as .npy ("" = nowhere)
  std::vector<std::string> inputs;  ///< --input NAME=FILE.npy
  unsigned seed = 0;                ///< --seed of the inputs not given
  int threads = 0;                  ///< --threads (0 = KILN_NUM_THREADS or all cores)
  int repeat = 0;                   ///< --repeat: timed runs after the first (0 = none)
};

/// Adds the options of RunOptions to `cmd` (the same flags and help in both programs).
void add_run_options(CLI::App* cmd, RunOptions& o);

/// Loads the module directory, sets the inputs (files, then seeded random values for the
/// others), runs it once and prints one line per input and output and the time; writes the
/// outputs when asked. Throws kiln::Error for a bad module, input or output directory.
int run_module(const RunOptions& o);

/// Seeded random values for an input: reals uniform in [-1, 1), integers in 0..9, booleans 0
/// or 1. A user error naming the input for a dtype it cannot fill.
runtime::NDArray random_input(const runtime::TensorInfo& info, std::mt19937& rng);

/// "float32[1, 3, 224, 224]".
std::string type_str(const runtime::NDArray& a);

}  // namespace kiln::runner
