// `kiln-run`: the runner of a board. It links only libkiln_runtime.so (cmake/runtime_only.cmake)
// and does what `kiln run` does, with the same flags, lines and files (run_module.h), so it is
// cross-built for aarch64 and run there, or on a workstation under qemu-user by
// `kiln run DIR --emulate`. A kiln::Error is printed as "kiln-run: error: ..." with exit code 1;
// a command-line error as CLI11 prints it, with its exit code.
#include <exception>
#include <iostream>
#include <string>

#include "kiln/support/error.h"
#include "run_module.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln-run: run a compiled module directory on .npy inputs (the runtime alone)"};
  kiln::runner::RunOptions o;
  kiln::runner::add_run_options(&app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return kiln::runner::run_module(o);
  } catch (const kiln::Error& e) {
    std::cerr << "kiln-run: error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "kiln-run: error: " << e.what() << " (an unexpected error: please report it)\n";
  }
  return 1;
}
