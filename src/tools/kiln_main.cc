// The `kiln` command line: parses the arguments with CLI11 and runs one subcommand. Each
// subcommand lives in its own file and registers its options through cli_common.h:
//   demo     (cmd_demo.cc)         the built-in ResNet-18 end to end; --gemm: the paper's matmul
//   compile  (cmd_compile_run.cc)  ONNX model → module directory
//   run      (cmd_compile_run.cc)  module directory + .npy inputs → outputs
//   bench    (cmd_bench.cc)        latency of a model or module (median / min / max)
//   inspect  (cmd_inspect.cc)      the optimized graph, the fused kernels and their loop programs
//   compare  (cmd_compare.cc)      unoptimized vs optimized, group by group
//   quantize (cmd_quantize.cc)     float ONNX model + calibration .npy files → QDQ int8 model
// A kiln::Error from a subcommand is printed as "kiln CMD: error: ..." with exit code 1 (2 for
// `compare`, whose exit code 1 means "the outputs differ"); so is anything else that escapes a
// subcommand (std::bad_alloc, std::filesystem::filesystem_error, any other exception), on one
// line, so that no input ends the process with an abort.
#include <filesystem>
#include <iostream>
#include <new>
#include <string>

#include "cli_common.h"
#include "kiln/support/allocator.h"
#include "kiln/support/error.h"

/// `s` with line breaks replaced by spaces.
static std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return s;
}

int main(int argc, char** argv) {
  using namespace kiln::cli;  // NOLINT
  // Most subcommands compile a model (allocator.h).
  kiln::support::keep_freed_memory();
  CLI::App app{"kiln: an end-to-end optimizing compiler for deep learning"};
  app.require_subcommand(1);
  std::vector<Command> commands = {add_demo_command(app),    add_compile_command(app),
                                   add_run_command(app),     add_bench_command(app),
                                   add_inspect_command(app), add_compare_command(app)};
  commands.push_back(add_tune_command(app));      // cmd_tune.cc
  commands.push_back(add_quantize_command(app));  // cmd_quantize.cc
  CLI11_PARSE(app, argc, argv);
  for (const Command& c : commands) {
    if (!c.app->parsed()) continue;
    const std::string name = c.app->get_name();
    const int code = name == "compare" ? 2 : 1;
    auto report = [&](const std::string& what) {
      std::cerr << "kiln " << name << ": error: " << what << "\n";
      return code;
    };
    // Whatever escapes becomes one line naming the command, never an abort.
    try {
      return c.run();
    } catch (const kiln::Error& e) {
      return report(e.what());
    } catch (const std::bad_alloc&) {
      return report(
          "out of memory: an allocation failed (a tensor, a file or the model is too "
          "large for this machine's memory)");
    } catch (const std::filesystem::filesystem_error& e) {
      return report(one_line(e.what()));
    } catch (const std::exception& e) {
      return report(one_line(e.what()) + " (an unexpected error: please report it)");
    } catch (...) {
      return report("an unknown exception (an unexpected error: please report it)");
    }
  }
  return 0;
}
