// Helpers of the aarch64 tests: what the emulated tests need (the cross linker, qemu-aarch64,
// the cross-built kiln-run) and why a test skips without it, running a program and capturing
// its output, and comparing arrays.
#pragma once

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/ndarray_access.h"
#include "common/temp_dir.h"
#include "kiln/runtime/ndarray.h"

extern char** environ;

namespace kiln::testing {

inline constexpr const char* kArmTarget = "llvm -mtriple=aarch64-linux-gnu";
inline constexpr const char* kSysroot = "/usr/aarch64-linux-gnu";

/// True when `name` is an executable in PATH.
inline bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  for (std::string dir; std::getline(ss, dir, ':');)
    if (::access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  return false;
}

/// Why a test that links for aarch64 cannot run here ("" when it can).
inline std::string cross_linker_missing() {
  return on_path("aarch64-linux-gnu-gcc")
             ? ""
             : "aarch64-linux-gnu-gcc is not on PATH (apt-get install gcc-aarch64-linux-gnu)";
}

/// Why an emulated test cannot run here ("" when it can): the cross linker, qemu-aarch64 and
/// the cross-built kiln-run (built with kiln when g++-aarch64-linux-gnu is installed).
inline std::string emulation_missing() {
  if (std::string why = cross_linker_missing(); !why.empty()) return why;
  if (std::string(KILN_QEMU_AARCH64).empty() || ::access(KILN_QEMU_AARCH64, X_OK) != 0)
    return "qemu-aarch64 was not found when kiln was configured (apt-get install qemu-user)";
  if (::access(KILN_AARCH64_RUNNER, X_OK) != 0)
    return std::string("the cross-built runner ") + KILN_AARCH64_RUNNER +
           " is missing (apt-get install g++-aarch64-linux-gnu, then reconfigure and build)";
  return "";
}

/// Skips the test, printing why, when emulation is not available. CI installs the packages
/// (scripts/install-deps.sh), so there these tests run; KILN_REQUIRE_AARCH64=1 turns the skip
/// into a failure.
#define KILN_REQUIRE_EMULATION()                                                          \
  do {                                                                                    \
    std::string why_ = ::kiln::testing::emulation_missing();                              \
    if (!why_.empty()) {                                                                  \
      const char* req_ = std::getenv("KILN_REQUIRE_AARCH64");                             \
      if (req_ && std::string(req_) == "1") FAIL() << "KILN_REQUIRE_AARCH64=1: " << why_; \
      GTEST_SKIP() << why_;                                                               \
    }                                                                                     \
  } while (0)

/// What a program did: its exit status (128 + signal when killed) and its stdout + stderr.
struct ProcessResult {
  int status = -1;
  std::string output;
};

/// Runs argv (argv[0] a path) with extra environment entries "NAME=VALUE", capturing its
/// output through a temporary file.
inline ProcessResult run_process(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env_extra = {}) {
  char log[] = "/tmp/kiln_arm_test_XXXXXX";
  int fd = mkstemp(log);
  EXPECT_GE(fd, 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  std::vector<char*> args, env;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (char** e = environ; *e; ++e) env.push_back(*e);
  for (const std::string& e : env_extra) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  pid_t pid;
  ProcessResult r;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fd);
  if (rc == 0) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  unlink(log);
  return r;
}

/// The cross-built runner under qemu-aarch64 with CPU model `cpu`: kiln-run ARGS.
inline ProcessResult run_emulated(const std::vector<std::string>& args,
                                  const std::string& cpu = "max") {
  std::vector<std::string> argv{KILN_QEMU_AARCH64,  "-L", kSysroot, "-cpu", cpu,
                                KILN_AARCH64_RUNNER};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv);
}

/// A fresh, empty temporary directory for this test (removed at exit).
inline std::string fresh_dir(const std::string& name) {
  return test_temp_dir("arm_test", name).string();
}

/// max|a - b| / max|b| (infinity for a NaN, a size mismatch or an all-zero reference).
inline double relative_error(const runtime::NDArray& a, const runtime::NDArray& b) {
  if (a.numel() != b.numel() || a.shape() != b.shape()) return INFINITY;
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = element(a, i), y = element(b, i);
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    num = std::max(num, std::abs(x - y));
    den = std::max(den, std::abs(y));
  }
  return den == 0 ? INFINITY : num / den;
}

}  // namespace kiln::testing
