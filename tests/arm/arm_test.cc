// aarch64 on the host alone (issue 30): the CPU features a target records, the target record
// every library carries (written by the code generator, read back from the file), the cross
// linker and its error when missing, and the error for loading an aarch64 library on x86-64.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "arm/arm_test_util.h"
#include "common/error.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/library_target.h"
#include "kiln/runtime/module.h"
#include "kiln/target/target.h"

namespace kiln::testing {
namespace {

using runtime::LibraryTarget;

/// A small graph: relu(x + c) on [4, 16].
graph::Graph add_relu() {
  graph::Graph g;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1, 1);
  runtime::NDArray c = runtime::NDArray::empty({4, 16}, DataType::Float(32));
  for (int64_t i = 0; i < c.numel(); ++i) c.data_as<float>()[i] = d(rng);
  graph::Entry x = g.add_input("x", {4, 16}, DataType::Float(32));
  graph::Entry a = g.add_op("add", {x, g.add_constant("c", c)}, {}, "add");
  g.add_output(g.add_op("relu", {a}, {}, "relu"));
  return g;
}

TEST(ArmTarget, RuntimeFeaturesFollowTheCpuAndAttributes) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Target(kArmTarget).runtime_features(), V{"neon"});
  EXPECT_EQ(Target("llvm -mtriple=aarch64-linux-gnu -mattr=+sve").runtime_features(),
            (V{"neon", "sve"}));
  EXPECT_EQ(Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72").runtime_features(),
            V{"neon"});
  V v1 = Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1").runtime_features();
  for (const char* f : {"neon", "dotprod", "i8mm", "bf16", "sve"})
    EXPECT_NE(std::find(v1.begin(), v1.end(), f), v1.end()) << f;
  EXPECT_EQ(
      Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1 -mattr=-sve").runtime_features(),
      (V{"neon", "fullfp16", "dotprod", "i8mm", "bf16"}));
  EXPECT_EQ(Target("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512").runtime_features(), V{});
  // The 128-bit NEON registers and their count size the templates' blocks and tiles.
  EXPECT_EQ(Target(kArmTarget).vector_bits(), 128);
  EXPECT_EQ(Target(kArmTarget).vector_registers(), 32);
  EXPECT_EQ(Target(kArmTarget).keys(), (V{"arm", "cpu"}));
}

TEST(LibraryTarget, TextRoundTripsAndBadRecordsAreNamed) {
  LibraryTarget t{
      "aarch64-linux-gnu", "llvm -mtriple=aarch64-linux-gnu -mattr=+sve", {"neon", "sve"}};
  std::string text = runtime::library_target_text(t);
  EXPECT_EQ(text,
            "kiln-target 1\ntriple=aarch64-linux-gnu\ntarget=llvm -mtriple=aarch64-linux-gnu "
            "-mattr=+sve\nfeatures=neon,sve\n");
  LibraryTarget back = runtime::parse_library_target(text + "later=ignored\n", "lib");
  EXPECT_EQ(back.triple, t.triple);
  EXPECT_EQ(back.target, t.target);
  EXPECT_EQ(back.features, t.features);
  EXPECT_EQ(error_of([] { runtime::parse_library_target("kiln-target 2\n", "lib.so"); }),
            "lib.so: malformed target record (section .kiln_target): the first line is "
            "'kiln-target 2', expected 'kiln-target 1'");
  EXPECT_EQ(error_of([] {
              runtime::parse_library_target("kiln-target 1\ntriple=x\nfeatures\n", "lib.so");
            }),
            "lib.so: malformed target record (section .kiln_target): line 3 'features' is not "
            "KEY=VALUE");
  EXPECT_EQ(error_of([] {
              runtime::parse_library_target("kiln-target 1\ntriple=x\nfeatures=\n", "lib.so");
            }),
            "lib.so: malformed target record (section .kiln_target): no target");
  // A feature this runtime does not know is never assumed present (on aarch64; elsewhere
  // nothing is checked yet).
#if defined(__aarch64__)
  EXPECT_EQ(runtime::missing_cpu_features({"sme9"}), std::vector<std::string>{"sme9"});
#else
  EXPECT_TRUE(runtime::missing_cpu_features({"sme9", "sve"}).empty());
#endif
}

TEST(ArmExport, HostLibraryRecordsItsTarget) {
  std::string dir = fresh_dir("host_record");
  graph::CompiledModule m = graph::build_module(add_relu(), Target::host());
  m.save(dir);
  LibraryTarget t = runtime::read_library_target(dir + "/lib.so");
  EXPECT_EQ(t.triple, Target::host().triple());
  EXPECT_EQ(t.target, "llvm -mcpu=native");
  EXPECT_TRUE(t.features.empty());
  EXPECT_NO_THROW(runtime::Module::load(dir + "/lib.so"));
  std::filesystem::remove_all(dir);
}

TEST(ArmExport, Aarch64LibraryIsLinkedRecordsItsTargetAndIsRefusedHere) {
  if (std::string why = cross_linker_missing(); !why.empty()) GTEST_SKIP() << why;
  const std::string target = "llvm -mtriple=aarch64-linux-gnu -mattr=+sve";
  std::string dir = fresh_dir("arm_record");
  graph::CompiledModule m = graph::build_module(add_relu(), Target(target));
  m.save(dir);
  const std::string lib = dir + "/lib.so";
  LibraryTarget t = runtime::read_library_target(lib);
  EXPECT_EQ(t.triple, "aarch64-linux-gnu");
  EXPECT_EQ(t.target, target);
  EXPECT_EQ(t.features, (std::vector<std::string>{"neon", "sve"}));
#if defined(__x86_64__)
  EXPECT_EQ(error_of([&] { runtime::Module::load(lib); }),
            "Module::load: cannot load '" + lib + "': built for aarch64 (target '" + target +
                "'), but this host is x86-64 (a module compiled for another target runs on a "
                "machine of that target; `kiln run DIR --emulate` runs an aarch64 module here "
                "under qemu-aarch64)");
#endif
  std::filesystem::remove_all(dir);
}

/// Sets an environment variable for the scope, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

TEST(ArmExport, MissingCrossLinkerNamesThePackage) {
  graph::CompiledModule m = graph::build_module(add_relu(), Target(kArmTarget));
  std::string dir = fresh_dir("no_linker");
  ScopedEnv path("PATH", dir.c_str()), cross("KILN_CROSS_CC", nullptr);
  EXPECT_EQ(error_of([&] { m.lib.export_library(dir + "/lib.so"); }),
            "export_library: no linker for target triple 'aarch64-linux-gnu' (target 'llvm "
            "-mtriple=aarch64-linux-gnu'): aarch64-linux-gnu-gcc is not on PATH. Install the "
            "cross compiler (Debian/Ubuntu: apt-get install gcc-aarch64-linux-gnu) or set "
            "KILN_CROSS_CC to a C compiler that links shared libraries for this triple");
  // Another spelling of the triple looks for the same Debian compiler too.
  graph::CompiledModule u =
      graph::build_module(add_relu(), Target("llvm -mtriple=aarch64-unknown-linux-gnu"));
  std::string msg = error_of([&] { u.lib.export_library(dir + "/lib.so"); });
  EXPECT_NE(msg.find("aarch64-unknown-linux-gnu-gcc or aarch64-linux-gnu-gcc is not on PATH"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(std::filesystem::exists(dir + "/lib.so"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::testing
