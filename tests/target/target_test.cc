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
  EXPECT_EQ(error_of([] { Target("cuda"); }),
            "target 'cuda': unknown target kind 'cuda' (known: llvm)");
  EXPECT_EQ(error_of([] { Target("llvm -mfoo=1"); }),
            "target 'llvm -mfoo=1': unknown option '-mfoo=1' (known: -mcpu=, -mtriple=, -mattr=)");
  EXPECT_EQ(error_of([] { Target("llvm -mcpu="); }),
            "target 'llvm -mcpu=': option '-mcpu=' needs a value (-mcpu=...)");
  EXPECT_EQ(error_of([] { Target("llvm -mattr=avx2"); }),
            "target 'llvm -mattr=avx2': option '-mattr=avx2': feature 'avx2' must be written "
            "+name or -name");
  EXPECT_NE(error_of([] { Target("llvm -mcpu=notacpu"); }).find("option '-mcpu=notacpu'"),
            std::string::npos);
  EXPECT_NE(error_of([] { Target(""); }).find("empty target string"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
