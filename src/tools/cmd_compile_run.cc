// `kiln compile MODEL -o DIR`: import (or build) the model, optimize, compile, write the module
// directory. `kiln run DIR`: runner/run_module.cc (load the module with the runtime's
// GraphExecutor, set .npy or seeded random inputs, run, print and save the outputs).
// `kiln run DIR --emulate`: the same, for an aarch64 module on an x86-64 workstation: the
// cross-built runner (kiln-run, cmake/runtime_only.cmake) under qemu-aarch64 -L <sysroot>
// -cpu <model>, given the same flags, so it prints the same lines and writes the same files.
#include <spawn.h>
#include <sys/wait.h>
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
#include <sstream>

#include "cli_common.h"
#include "kiln/autotune/record.h"
#include "kiln/runtime/library_target.h"
#include "kiln/runtime/npy.h"
#include "kiln/support/error.h"
#include "kiln/target/target.h"
#include "runner/run_module.h"

extern char** environ;

namespace kiln::cli {

namespace {

struct CompileOptions {
  std::string model, out, target = "llvm -mcpu=native";
  std::string tuning_log;
  int opt_level = 2, tuning_threads = 1;
  std::vector<std::string> shapes;
};

int compile_model(const CompileOptions& o) {
  auto t0 = Clock::now();
  graph::Graph g = load_model(o.model, o.shapes);
  const double import_ms = ms_since(t0);
  graph::BuildOptions bopt;
  bopt.opt_level = o.opt_level;
  if (!o.tuning_log.empty()) {
    bopt.tuning_records = load_tuning_log(o.tuning_log);
    bopt.tuning_threads = o.tuning_threads;
  }
  graph::CompiledModule m = graph::compile_to_directory(g, Target(o.target), bopt, o.out);
  std::printf("compiled %s -> %s in %.0f ms: %d kernels; %s\n", o.model.c_str(), o.out.c_str(),
              ms_since(t0), m.num_kernels, memory_summary(m).c_str());
  std::printf(
      "  import %.0f ms, graph passes %.0f ms, kernels lowered %.0f ms, code generation %.0f ms, "
      "files written %.0f ms\n",
      import_ms, m.optimize_ms, m.lower_ms, m.codegen_ms, m.save_ms);
  for (const std::string& line : m.tuning_report) std::printf("%s\n", line.c_str());
  return 0;
}

struct RunOptions {
  runner::RunOptions run;
  bool emulate = false;
  std::string cpu;
};

/// True when `file` is an executable regular file.
bool executable(const std::string& file) {
  std::error_code ec;
  return std::filesystem::is_regular_file(file, ec) && ::access(file.c_str(), X_OK) == 0;
}

/// `name` found in PATH, or "".
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  for (std::string dir; std::getline(ss, dir, ':');) {
    std::string file = (dir.empty() ? "." : dir) + "/" + name;
    if (executable(file)) return file;
  }
  return "";
}

/// `kiln run DIR --emulate`: the cross-built kiln-run under qemu-aarch64, given the same flags,
/// so it prints the same lines and writes the same files (and gives the module the same random
/// inputs: run_module.cc is the same code). Its exit status is ours.
int emulate(const RunOptions& o) {
  namespace fs = std::filesystem;
  const std::string lib = (fs::path(o.run.dir) / "lib.so").string();
  KILN_USER_CHECK(fs::is_directory(o.run.dir))
      << "module '" << o.run.dir << "': not a directory (a module directory holds graph.json, "
      << "lib.so and params.bin)";
  runtime::LibraryTarget t = runtime::read_library_target(lib);
  KILN_USER_CHECK(t.known()) << "--emulate: '" << lib << "' has no target record (it was "
                             << "compiled by an older kiln); compile the model again";
  const std::string arch = t.triple.substr(0, t.triple.find('-'));
  KILN_USER_CHECK(arch == "aarch64" || arch == "arm64")
      << "--emulate runs aarch64 modules under qemu; '" << o.run.dir << "' is compiled for target '"
      << t.target << "' (triple " << t.triple
      << "): run it without --emulate on a machine of that architecture";
  const char* qenv = std::getenv("KILN_QEMU_AARCH64");
  std::string qemu = qenv && *qenv ? qenv : find_on_path("qemu-aarch64");
  KILN_USER_CHECK(!qemu.empty() && executable(qemu))
      << "--emulate needs qemu-aarch64"
      << (qenv && *qenv ? " (KILN_QEMU_AARCH64='" + std::string(qenv) + "' is not executable)"
                        : std::string(" on PATH"))
      << ": install it (Debian/Ubuntu: apt-get install qemu-user)";
  const char* renv = std::getenv("KILN_AARCH64_RUNNER");
  std::string runner = renv && *renv ? renv : KILN_AARCH64_RUNNER_DEFAULT;
  KILN_USER_CHECK(executable(runner))
      << "--emulate needs kiln-run built for aarch64, and '" << runner << "' is not there"
      << (renv && *renv ? " (KILN_AARCH64_RUNNER)" : "")
      << ": install g++-aarch64-linux-gnu and rebuild (the build makes it in build/aarch64 "
         "when the cross compiler is found), or run scripts/build-aarch64-runtime.sh and set "
         "KILN_AARCH64_RUNNER to its bin/kiln-run";
  const char* lenv = std::getenv("QEMU_LD_PREFIX");
  std::string sysroot = lenv && *lenv ? lenv : "/usr/aarch64-linux-gnu";
  KILN_USER_CHECK(fs::is_directory(sysroot + "/lib"))
      << "--emulate: the aarch64 C library is not in '" << sysroot
      << "' (QEMU_LD_PREFIX): install it (Debian/Ubuntu: apt-get install libc6-arm64-cross, "
         "which gcc-aarch64-linux-gnu brings)";
  const char* cenv = std::getenv("QEMU_CPU");
  std::string cpu = !o.cpu.empty() ? o.cpu : cenv && *cenv ? cenv : "max";
  std::vector<std::string> argv{qemu, "-L", sysroot, "-cpu", cpu, runner, o.run.dir};
  for (const std::string& in : o.run.inputs) argv.insert(argv.end(), {"--input", in});
  if (!o.run.output_dir.empty()) argv.insert(argv.end(), {"--output-dir", o.run.output_dir});
  argv.insert(argv.end(), {"--seed", std::to_string(o.run.seed)});
  if (o.run.threads > 0) argv.insert(argv.end(), {"--threads", std::to_string(o.run.threads)});
  std::cerr << "emulating " << t.target << " on qemu-aarch64 -cpu " << cpu
            << " (times under qemu are not ARM performance)\n";
  std::cout.flush();
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, qemu.c_str(), nullptr, nullptr, args.data(), environ);
  KILN_USER_CHECK(rc == 0) << "--emulate: cannot run '" << qemu << "': " << std::strerror(rc);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  KILN_ERROR << "--emulate: qemu-aarch64 died of signal " << WTERMSIG(status) << " ("
             << strsignal(WTERMSIG(status)) << ")";
}

}  // namespace

Command add_compile_command(CLI::App& app) {
  auto o = std::make_shared<CompileOptions>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile an ONNX model to a module directory");
  cmd->add_option("model", o->model, kModelHelp)->required();
  cmd->add_option("-o,--output", o->out, "Output module directory")->required();
  cmd->add_option("--target", o->target,
                  "Target, e.g. 'llvm -mcpu=native' (default), 'llvm -mtriple=aarch64-linux-gnu "
                  "-mattr=+sve' (docs/aarch64.md)");
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
  runner::add_run_options(cmd, o->run);
  CLI::Option* emulate_flag =
      cmd->add_flag("--emulate", o->emulate,
                    "Run an aarch64 module here: the cross-built kiln-run under qemu-aarch64, "
                    "with the same inputs, lines and files (docs/aarch64.md)");
  cmd->add_option("--emulate-cpu", o->cpu,
                  "With --emulate: qemu's CPU model (default: QEMU_CPU, else max), e.g. "
                  "cortex-a72, 'max,sve-max-vq=2'")
      ->needs(emulate_flag);
  return {cmd, [o] { return o->emulate ? emulate(*o) : runner::run_module(o->run); }};
}

}  // namespace kiln::cli
