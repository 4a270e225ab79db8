// The AArch64 dot-product intrinsics of topi/arm_intrin.h (sdot, udot), tensorized into a small
// int8 matrix product C[m, n] = Σ_k A[m, k] · W[n, k] with W packed in [N/4, K/4, 4, 4] blocks.
// Host only: with +dotprod the assembly has the instruction, without it (or on x86) the plain
// loops stay. Under qemu: the tensorized kernel, exported in a one-node module directory, is run
// by the cross-built kiln-run on random bytes and compared exactly with a scalar reference.
#include "kiln/topi/arm_intrin.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "arm/arm_test_util.h"
#include "e2e/e2e_util.h"
#include "kiln/runtime/npy.h"
#include "kiln/target/build.h"
#include "kiln/target/codegen.h"
#include "kiln/te/schedule.h"

namespace kiln::testing {
namespace {

using namespace kiln::ir;  // NOLINT
using runtime::NDArray;
const DataType kI32 = DataType::Int(32);

/// C[m, no, ni] = Σ_{k4, kk} A[m, 4·k4 + kk] · Bp[no, k4, ni, kk] (int32).
struct Int8Product {
  DataType t;
  int M = 3, K4 = 6, N4 = 5;
  te::Tensor A = te::placeholder({M, 4 * K4}, t, "A");
  te::Tensor Bp = te::placeholder({N4, K4, 4, 4}, t, "Bp");
  te::IterVar k4 = te::reduce_axis({0, K4}, "k4"), kk = te::reduce_axis({0, 4}, "kk");
  te::Tensor C = te::compute(
      {M, N4, 4},
      [&](Var m, Var no, Var ni) {
        return te::sum(cast(kI32, A(m, k4 * 4 + kk)) * cast(kI32, Bp(no, k4, ni, kk)), {k4, kk});
      },
      "C");

  explicit Int8Product(DataType type) : t(type) {}

  te::Schedule schedule(const Target& target) const {
    te::Schedule s = te::create_schedule({C});
    te::Stage st = s[C];
    st.reorder({C->axis[0], C->axis[1], k4, C->axis[2], kk});
    if (topi::has_dot_arm(target)) {
      st.tensorize(C->axis[2], t.is_int() ? topi::dot_s8s8_arm() : topi::dot_u8u8_arm());
    } else {
      st.unroll(kk);
    }
    return s;
  }

  NDArray reference(const NDArray& a, const NDArray& b) const {
    NDArray c = NDArray::empty({M, N4, 4}, kI32);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N4 * 4; ++n) {
        int64_t acc = 0;
        for (int k = 0; k < 4 * K4; ++k) {
          const int64_t ai = m * 4 * K4 + k, bi = (((n / 4) * K4 + k / 4) * 4 + n % 4) * 4 + k % 4;
          acc += t.is_int() ? int64_t{a.data_as<int8_t>()[ai]} * b.data_as<int8_t>()[bi]
                            : int64_t{a.data_as<uint8_t>()[ai]} * b.data_as<uint8_t>()[bi];
        }
        c.data_as<int32_t>()[m * N4 * 4 + n] = static_cast<int32_t>(acc);
      }
    return c;
  }
};

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(ArmIntrin, DotInstructionsOnlyWithDotprod) {
  for (DataType t : {DataType::Int(8), DataType::UInt(8)}) {
    const std::string instr = t.is_int() ? "sdot\t" : "udot\t";
    Int8Product p(t);
    Target dot("llvm -mtriple=aarch64-linux-gnu -mattr=+dotprod"), plain(kArmTarget);
    EXPECT_TRUE(topi::has_dot_arm(dot));
    EXPECT_FALSE(topi::has_dot_arm(plain));
    EXPECT_FALSE(topi::has_dot_arm(Target("llvm -mtriple=x86_64-linux-gnu -mattr=+avx512vnni")));
    runtime::Module m = build(p.schedule(dot), {p.A, p.Bp, p.C}, dot, "f");
    EXPECT_GE(count(codegen::get_source(m, "asm"), instr), 1) << t;
    runtime::Module q = build(p.schedule(plain), {p.A, p.Bp, p.C}, plain, "f");
    EXPECT_EQ(count(codegen::get_source(q, "asm"), instr), 0) << t;
  }
}

/// A module directory whose graph calls `f(A, Bp) -> C` once.
void write_one_node_module(const Int8Product& p, const runtime::Module& lib,
                           const std::string& dir) {
  std::filesystem::create_directories(dir);
  lib.export_library(dir + "/lib.so");
  const std::string t = p.t.str();
  std::ofstream(dir + "/graph.json")
      << R"({"version": 1, "nodes": [{"op": "null", "name": "A", "inputs": []},
      {"op": "null", "name": "Bp", "inputs": []},
      {"op": "kiln_op", "name": "f", "inputs": [[0, 0], [1, 0]],
       "attrs": {"func_name": "f", "num_inputs": 2, "num_outputs": 1}}],
      "arg_nodes": [0, 1], "inputs": ["A", "Bp"], "heads": [[2, 0]], "outputs": ["C"],
      "node_row_ptr": [0, 1, 2, 3],
      "attrs": {"shape": [[)"
      << p.M << ", " << 4 * p.K4 << "], [" << p.N4 << ", " << p.K4 << ", 4, 4], [" << p.M << ", "
      << p.N4 << R"(, 4]], "dtype": [")" << t << R"(", ")" << t
      << R"(", "int32"], "storage_id": [0, 1, 2]}})";
}

TEST(EmulatedArmIntrin, SdotAndUdotMatchScalar) {
  KILN_REQUIRE_EMULATION();
  const std::string dir = fresh_dir("dot");
  for (DataType t : {DataType::Int(8), DataType::UInt(8)}) {
    Int8Product p(t);
    Target target("llvm -mtriple=aarch64-linux-gnu -mattr=+dotprod");
    runtime::Module m = build(p.schedule(target), {p.A, p.Bp, p.C}, target, "f");
    const std::string mod = dir + "/" + t.str(), out = mod + "_out";
    write_one_node_module(p, m, mod);
    const double lo = t.is_int() ? -128 : 0, hi = t.is_int() ? 127 : 255;
    NDArray a = e2e::random_array({p.M, 4 * p.K4}, t, 21, lo, hi);
    NDArray b = e2e::random_array({p.N4, p.K4, 4, 4}, t, 22, lo, hi);
    runtime::save_npy(mod + "_a.npy", a);
    runtime::save_npy(mod + "_b.npy", b);
    ProcessResult r = run_emulated({mod, "--input", "A=" + mod + "_a.npy", "--input",
                                    "Bp=" + mod + "_b.npy", "--output-dir", out},
                                   "neoverse-n1");  // Armv8.2 with dotprod
    ASSERT_EQ(r.status, 0) << r.output;
    NDArray c = runtime::load_npy(out + "/C.npy"), want = p.reference(a, b);
    ASSERT_EQ(c.shape(), want.shape());
    for (int64_t i = 0; i < c.numel(); ++i)
      ASSERT_EQ(c.data_as<int32_t>()[i], want.data_as<int32_t>()[i]) << t << " element " << i;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::testing
