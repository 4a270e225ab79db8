// Target strings: parsing, canonical printing, errors naming the bad option, and feature
// queries (vector width from CPU names, -mattr overrides, the host's features).
#include "kiln/target/target.h"

#include <gtest/gtest.h>

#include "target/codegen_test_util.h"

namespace kiln::testing {
namespace {

TEST(Target, Parse) {
  Target t("llvm -mcpu=skylake-avx512 -mattr=+avx512f,-avx512bw");
  EXPECT_EQ(t.kind, "llvm");
  EXPECT_EQ(t.mcpu, "skylake-avx512");
  EXPECT_EQ(t.mtriple, "");
  EXPECT_EQ(t.mattrs, (std::vector<std::string>{"+avx512f", "-avx512bw"}));
  EXPECT_EQ(t.str(), "llvm -mcpu=skylake-avx512 -mattr=+avx512f,-avx512bw");
  EXPECT_EQ(Target::parse(t.str()), t);
  Target arm("llvm   -mtriple=aarch64-linux-gnu");
  EXPECT_EQ(arm.mtriple, "aarch64-linux-gnu");
  EXPECT_EQ(arm.triple(), "aarch64-linux-gnu");
  EXPECT_FALSE(arm.is_host_arch());
  EXPECT_EQ(Target::host().str(), "llvm -mcpu=native");
}

TEST(Target, VectorBits) {
  EXPECT_EQ(Target("llvm").vector_bits(), 128);
  EXPECT_EQ(Target("llvm -mcpu=haswell").vector_bits(), 256);
  EXPECT_EQ(Target("llvm -mcpu=skylake-avx512").vector_bits(), 512);
  EXPECT_EQ(Target("llvm -mcpu=skylake-avx512 -mattr=-avx512f").vector_bits(), 256);
  EXPECT_EQ(Target("llvm -mattr=+avx2").vector_bits(), 256);
  EXPECT_EQ(Target("llvm -mcpu=x86-64 -mattr=+avx512f").vector_bits(), 512);
  EXPECT_EQ(Target("llvm -mtriple=aarch64-linux-gnu").vector_bits(), 128);
  Target host = Target::host();
  EXPECT_EQ(host.vector_bits(), host.has_feature("avx512f") ? 512
                                : host.has_feature("avx2")  ? 256
                                                            : 128);
}

TEST(Target, VectorRegisters) {
  EXPECT_EQ(Target("llvm -mcpu=skylake-avx512").vector_registers(), 32);
  EXPECT_EQ(Target("llvm -mcpu=skylake-avx512 -mattr=-avx512f").vector_registers(), 16);
  EXPECT_EQ(Target("llvm -mcpu=haswell").vector_registers(), 16);
  EXPECT_EQ(Target("llvm -mcpu=znver1").vector_registers(), 16);
  EXPECT_EQ(Target("llvm -mtriple=aarch64-linux-gnu").vector_registers(), 32);
  EXPECT_EQ(Target("llvm -mtriple=i686-linux-gnu -mattr=+avx512f").vector_registers(), 8);
}

TEST(Target, Errors) {
  EXPECT_EQ(error_of([] { Target("tpu -mcpu=x"); }),
            "target 'tpu -mcpu=x': unknown target kind 'tpu' (known: cuda, llvm, opencl, vdla)");
  EXPECT_EQ(error_of([] { Target("cuda -mcpu=native"); }),
            "target 'cuda -mcpu=native': unknown option '-mcpu=native' (known: -arch=, "
            "-max_threads_per_block=, -max_shared_memory_per_block=)");
  EXPECT_EQ(error_of([] { Target("cuda -max_threads_per_block=many"); }),
            "target 'cuda -max_threads_per_block=many': option '-max_threads_per_block=many' "
            "needs a positive integer");
  EXPECT_EQ(error_of([] { Target("vdla -x=1"); }),
            "target 'vdla -x=1': unknown option '-x=1' (kind 'vdla' takes no options)");
  EXPECT_EQ(error_of([] { Target("llvm -mfoo=1"); }),
            "target 'llvm -mfoo=1': unknown option '-mfoo=1' (known: -mcpu=, -mtriple=, -mattr=, "
            "-opt=)");
  EXPECT_EQ(error_of([] { Target("llvm -opt=4"); }),
            "target 'llvm -opt=4': option '-opt=4' needs an LLVM optimization level 0..3");
  EXPECT_EQ(error_of([] { Target("llvm -mcpu="); }),
            "target 'llvm -mcpu=': option '-mcpu=' needs a value (-mcpu=...)");
  EXPECT_EQ(error_of([] { Target("llvm -mattr=avx2"); }),
            "target 'llvm -mattr=avx2': option '-mattr=avx2': feature 'avx2' must be written "
            "+name or -name");
  EXPECT_NE(error_of([] { Target("llvm -mcpu=notacpu"); }).find("option '-mcpu=notacpu'"),
            std::string::npos);
  EXPECT_NE(error_of([] { Target(""); }).find("empty target string"), std::string::npos);
}

TEST(Target, KindsKeysAndAttributes) {
  Target x86("llvm -mtriple=x86_64-linux-gnu");
  EXPECT_EQ(x86.keys(), (std::vector<std::string>{"x86", "cpu"}));
  EXPECT_EQ(Target("llvm -mtriple=aarch64-linux-gnu").keys(),
            (std::vector<std::string>{"arm", "cpu"}));
  Target gpu("cuda -arch=sm_90 -max_threads_per_block=512");
  EXPECT_EQ(gpu.keys(), (std::vector<std::string>{"cuda", "gpu"}));
  EXPECT_TRUE(gpu.has_key("gpu"));
  EXPECT_FALSE(gpu.has_key("cpu"));
  EXPECT_EQ(gpu.attr("arch"), "sm_90");
  EXPECT_EQ(gpu.attr_int("max_threads_per_block", 0), 512);
  EXPECT_EQ(gpu.attr_int("max_shared_memory_per_block", 0), 49152);  // the kind's default
  EXPECT_EQ(gpu.str(), "cuda -arch=sm_90 -max_threads_per_block=512");
  EXPECT_EQ(Target::parse(gpu.str()), gpu);
  // A default written out is the same target as one left out.
  EXPECT_EQ(Target("cuda -arch=sm_75"), Target("cuda"));
  EXPECT_EQ(gpu.host_or_default(), Target::host());
  Target with = gpu.with_host(Target("llvm -mcpu=skylake-avx512"));
  EXPECT_EQ(with.host_or_default().str(), "llvm -mcpu=skylake-avx512");
  EXPECT_EQ(Target("opencl").keys(), (std::vector<std::string>{"opencl", "gpu"}));
  // LLVM's optimization level: 3 unless asked (constant folding compiles at 0).
  EXPECT_EQ(Target("llvm").attr_int("opt", -1), 3);
  EXPECT_EQ(Target("llvm -opt=3"), Target("llvm"));
  EXPECT_EQ(Target("llvm -opt=0").attr_int("opt", -1), 0);
}

TEST(Target, RegisteredKindIsData) {
  TargetKind k;
  k.name = "test_kind_target_test";
  k.keys = {"toy", "cpu"};
  k.options = {"mcpu", "lanes"};
  k.codegen = "llvm";
  register_target_kind(k);
  Target t("test_kind_target_test -lanes=4");
  EXPECT_EQ(t.keys(), (std::vector<std::string>{"toy", "cpu"}));
  EXPECT_EQ(t.attr("lanes"), "4");
  EXPECT_NE(error_of([] { register_target_kind(target_kind("llvm")); }).find("registered already"),
            std::string::npos);
  std::vector<std::string> names = target_kind_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "test_kind_target_test"), names.end());
}

}  // namespace
}  // namespace kiln::testing
