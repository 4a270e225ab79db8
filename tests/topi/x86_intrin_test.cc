// The x86 tensor intrinsics of topi/x86_intrin.h, each tensorized into a small kernel and run
// against a scalar reference on random inputs with poisoned outputs: VNNI 512 and 256 (u8 × s8
// → s32), AVX-512 BF16 (bf16 pairs → f32), VPOPCNTDQ (AND-popcount); the same kernels built for
// a target without the feature (no tensorize) give the same values and no such instruction;
// AMX (tdpbusd) and AVX-VNNI ({vex} vpdpbusd) are compile-tested for CPUs that have them.
#include "kiln/topi/x86_intrin.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "e2e/e2e_util.h"
#include "kiln/target/codegen.h"
#include "kiln/te/schedule.h"

namespace kiln::topi {
namespace {

using namespace kiln::ir;  // NOLINT
using e2e::NDArray;
const DataType kU8 = DataType::UInt(8), kI32 = DataType::Int(32), kU32 = DataType::UInt(32),
               kF32 = DataType::Float(32), kBF16 = DataType::BFloat16();

/// Builds for `target`, runs on `inputs` (the output poisoned first); returns the output and
/// the assembly. Runs nothing when `run` is false (another CPU's code).
std::pair<NDArray, std::string> build_run(const te::Schedule& s,
                                          const std::vector<te::Tensor>& args, const Target& target,
                                          const std::vector<NDArray>& inputs, bool run = true) {
  runtime::Module m = build(s, args, target, "f");
  NDArray out = e2e::poisoned(e2e::shape_of(args.back()), args.back()->dtype);
  if (run) {
    std::vector<NDArray> all = inputs;
    all.push_back(out);
    e2e::call(m.get_function("f"), all);
  }
  return {out, codegen::get_source(m, "asm")};
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

/// The lines of `text` containing `what`.
std::string lines_with(const std::string& text, const std::string& what) {
  std::string out;
  size_t p = 0;
  while ((p = text.find(what, p)) != std::string::npos) {
    size_t b = text.rfind('\n', p), e = text.find('\n', p);
    out += text.substr(b + 1, e - b - 1) + "\n";
    p = e;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// u8 × s8 (VNNI)

struct DotU8S8 {
  int M = 3, K4 = 8, N = 32;
  te::Tensor A = te::placeholder({M, 4 * K4}, kU8, "A");
  te::Tensor Bp = te::placeholder({K4, N}, kI32, "Bp");  ///< 4 weight bytes per int32
  te::IterVar k4 = te::reduce_axis({0, K4}, "k4"), kk = te::reduce_axis({0, 4}, "kk");
  te::Tensor C = te::compute(
      {M, N},
      [&](Var m, Var n) {
        return te::sum(cast(kI32, A(m, k4 * 4 + kk)) * packed_s8(Bp(k4, n), kk), {k4, kk});
      },
      "C");

  /// Lanes of `lanes` outputs tensorized when the target has the intrinsic.
  te::Schedule schedule(int lanes, const Target& t, bool* tensorized) const {
    te::Schedule s = te::create_schedule({C});
    te::Stage st = s[C];
    auto [no, ni] = st.split(C->axis[1], lanes);
    *tensorized = has_dot_u8s8(t, lanes);
    if (*tensorized) {
      st.reorder({C->axis[0], no, k4, ni, kk});
      st.tensorize(ni, dot_u8s8(lanes));
    } else {
      st.reorder({C->axis[0], no, k4, kk, ni});
      st.unroll(kk);
      st.vectorize(ni);
    }
    return s;
  }

  NDArray reference(const NDArray& a, const NDArray& b) const {
    return e2e::reference({M, N}, kI32, [&](const std::vector<int64_t>& i) {
      int64_t acc = 0;
      for (int64_t k = 0; k < 4 * K4; ++k) {
        uint32_t w = static_cast<uint32_t>(b.data_as<int32_t>()[(k / 4) * N + i[1]]);
        acc += int64_t(a.data_as<uint8_t>()[i[0] * 4 * K4 + k]) *
               static_cast<int8_t>(w >> (8 * (k % 4)));
      }
      return double(static_cast<int32_t>(acc));
    });
  }
};

void check_dot_u8s8(int lanes, const Target& target, const char* instr_reg) {
  DotU8S8 d;
  bool tensorized = false;
  te::Schedule s = d.schedule(lanes, target, &tensorized);
  NDArray a = e2e::random_array({d.M, 4 * d.K4}, kU8, 1, 0, 255);
  NDArray b = e2e::random_array({d.K4, d.N}, kI32, 2, INT32_MIN, INT32_MAX);
  auto [c, text] = build_run(s, {d.A, d.Bp, d.C}, target, {a, b});
  EXPECT_TRUE(e2e::all_close(c, d.reference(a, b))) << e2e::lowered_text(s, {d.A, d.Bp, d.C});
  if (tensorized) {
    EXPECT_NE(lines_with(text, "vpdpbusd").find(instr_reg), std::string::npos)
        << lines_with(text, "vpdpbusd");
    EXPECT_GE(count(text, "vpdpbusd"), 1);
  } else {
    EXPECT_EQ(count(text, "vpdpbusd"), 0);
  }
}

TEST(X86Intrin, DotU8S8Avx512VnniMatchesScalar) {
  if (!has_dot_u8s8(e2e::host_target(), 16)) GTEST_SKIP() << "host has no avx512vnni";
  check_dot_u8s8(16, e2e::host_target(), "zmm");
  // The TIR shows the intrinsic call by its LLVM name.
  DotU8S8 d;
  bool t = false;
  std::string tir = e2e::lowered_text(d.schedule(16, e2e::host_target(), &t), {d.A, d.Bp, d.C});
  EXPECT_NE(tir.find("llvm.x86.avx512.vpdpbusd.512(C[ramp("), std::string::npos) << tir;
}

TEST(X86Intrin, DotU8S8Vnni256MatchesScalar) {
  if (!has_dot_u8s8(e2e::host_target(), 8)) GTEST_SKIP() << "host has no 256-bit VNNI";
  check_dot_u8s8(8, e2e::host_target(), "ymm");
}

TEST(X86Intrin, DotU8S8WithoutVnniIsThePlainLoopWithTheSameValues) {
  Target plain("llvm -mcpu=native -mattr=-avx512vnni,-avxvnni");
  EXPECT_FALSE(has_dot_u8s8(plain, 16));
  EXPECT_FALSE(has_dot_u8s8(plain, 8));
  check_dot_u8s8(16, plain, "");
  check_dot_u8s8(8, plain, "");
}

TEST(X86Intrin, AvxVnniCompilesToTheVexForm) {
  // Alder Lake: AVX-VNNI without AVX-512; compile only (this host may lack AVX-VNNI).
  Target adl("llvm -mcpu=alderlake");
  ASSERT_TRUE(has_dot_u8s8(adl, 8));
  EXPECT_FALSE(has_dot_u8s8(adl, 16));
  DotU8S8 d;
  bool t = false;
  te::Schedule s = d.schedule(8, adl, &t);
  auto [c, text] = build_run(s, {d.A, d.Bp, d.C}, adl, {}, /*run=*/false);
  EXPECT_NE(text.find("{vex}\tvpdpbusd"), std::string::npos) << lines_with(text, "vpdpbusd");
}

TEST(X86Intrin, ErrorsNameTheProblem) {
  EXPECT_EQ(e2e::error_of([] { dot_u8s8(4); }),
            "dot_u8s8: lanes must be 16 (AVX-512 VNNI) or 8 (AVX-VNNI), got 4");
  EXPECT_EQ(e2e::error_of([] { popcount_and(0); }),
            "popcount_and: words must be in [1, 64], got 0");
  EXPECT_EQ(e2e::error_of([] { popcount_and(4, 17); }),
            "popcount_and: rows must be in [1, 16], got 17");
  EXPECT_EQ(e2e::error_of([] { te::call_llvm_intrin(kI32, "x86.foo", {}); }),
            "call_llvm_intrin: 'x86.foo' does not name an LLVM intrinsic (llvm.…)");
}

// ---------------------------------------------------------------------------------------------
// bf16

uint16_t to_bf16(float f) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); }
float from_bf16(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

NDArray random_bf16(std::vector<int64_t> shape, uint32_t seed) {
  NDArray f = e2e::random_array(shape, kF32, seed);
  NDArray b = NDArray::empty(shape, kBF16);
  for (int64_t i = 0; i < f.numel(); ++i) b.data_as<uint16_t>()[i] = to_bf16(f.data_as<float>()[i]);
  return b;
}

TEST(X86Intrin, DotBf16MatchesScalar) {
  const int M = 2, K2 = 8, N = 32;
  te::Tensor A = te::placeholder({M, 2 * K2}, kBF16, "A");
  te::Tensor Bp = te::placeholder({N / 16, K2, 16, 2}, kBF16, "Bp");
  auto k2 = te::reduce_axis({0, K2}, "k2"), kk = te::reduce_axis({0, 2}, "kk");
  te::Tensor C = te::compute(
      {M, N},
      [&](Var m, Var n) {
        return te::sum(cast(kF32, A(m, k2 * 2 + kk)) *
                           cast(kF32, Bp(floordiv(n, 16), k2, floormod(n, 16), kk)),
                       {k2, kk});
      },
      "C");
  NDArray a = random_bf16({M, 2 * K2}, 3), b = random_bf16({N / 16, K2, 16, 2}, 4);
  NDArray ref = e2e::reference({M, N}, kF32, [&](const std::vector<int64_t>& i) {
    double acc = 0;
    for (int64_t k = 0; k < 2 * K2; ++k) {
      int64_t n = i[1];
      acc += double(from_bf16(a.data_as<uint16_t>()[i[0] * 2 * K2 + k])) *
             from_bf16(b.data_as<uint16_t>()[(((n / 16) * K2 + k / 2) * 16 + n % 16) * 2 + k % 2]);
    }
    return acc;
  });
  for (const Target& target :
       {e2e::host_target(), Target("llvm -mcpu=native -mattr=-avx512bf16")}) {
    te::Schedule s = te::create_schedule({C});
    auto [no, ni] = s[C].split(C->axis[1], 16);
    const bool tensorized = has_dot_bf16(target);
    if (tensorized) {
      s[C].reorder({C->axis[0], no, k2, ni, kk});
      s[C].tensorize(ni, dot_bf16());
    } else {
      s[C].reorder({C->axis[0], no, k2, kk, ni});
      s[C].vectorize(ni);
    }
    auto [c, text] = build_run(s, {A, Bp, C}, target, {a, b});
    EXPECT_TRUE(e2e::all_close(c, ref, {1e-5, 1e-5})) << target.str();
    EXPECT_EQ(count(text, "vdpbf16ps") > 0, tensorized) << target.str();
  }
  if (!has_dot_bf16(e2e::host_target())) GTEST_SKIP() << "host has no avx512bf16";
}

// ---------------------------------------------------------------------------------------------
// popcount

TEST(X86Intrin, PopcountAndMatchesScalar) {
  // One row of A per call (rows = 1) and a register block of 3 rows sharing B's loads.
  const int M = 6, W = 8, N = 32;
  te::Tensor A = te::placeholder({M, W}, kU32, "A");
  te::Tensor B = te::placeholder({W, N}, kU32, "B");
  auto w = te::reduce_axis({0, W}, "w");
  te::Tensor C = te::compute(
      {M, N},
      [&](Var m, Var n) {
        return te::sum(cast(kI32, te::popcount(te::bitwise_and(A(m, w), B(w, n)))), {w});
      },
      "C");
  NDArray a = e2e::random_array({M, W}, kU32, 5, 0, 4294967295.0);
  NDArray b = e2e::random_array({W, N}, kU32, 6, 0, 4294967295.0);
  NDArray ref = e2e::reference({M, N}, kI32, [&](const std::vector<int64_t>& i) {
    int64_t acc = 0;
    for (int64_t k = 0; k < W; ++k)
      acc +=
          std::popcount(a.data_as<uint32_t>()[i[0] * W + k] & b.data_as<uint32_t>()[k * N + i[1]]);
    return double(acc);
  });
  for (const Target& target :
       {e2e::host_target(), Target("llvm -mcpu=native -mattr=-avx512vpopcntdq")}) {
    for (int rows : {1, 3}) {
      te::Schedule s = te::create_schedule({C});
      auto [mo, mi] = s[C].split(C->axis[0], rows);
      auto [no, ni] = s[C].split(C->axis[1], 16);
      auto [wo, wi] = s[C].split(w, 4);
      const bool tensorized = has_popcount(target);
      if (tensorized) {
        s[C].reorder({mo, no, wo, mi, ni, wi});
        s[C].tensorize(rows == 1 ? ni : mi, popcount_and(4, rows));
      } else {
        s[C].reorder({mo, no, wo, mi, wi, ni});
        s[C].vectorize(ni);
      }
      auto [c, text] = build_run(s, {A, B, C}, target, {a, b});
      EXPECT_TRUE(e2e::all_close(c, ref)) << target.str() << " rows=" << rows << "\n"
                                          << e2e::lowered_text(s, {A, B, C});
      EXPECT_EQ(count(text, "vpopcntd") > 0, tensorized) << target.str();
      // The block loads each row of B once: 4 loads of B per call, whatever the rows.
      if (tensorized) {
        EXPECT_EQ(count(e2e::lowered_text(s, {A, B, C}), "B[ramp("), 4) << rows;
      }
    }
  }
  if (!has_popcount(e2e::host_target())) GTEST_SKIP() << "host has no avx512vpopcntdq";
}

// ---------------------------------------------------------------------------------------------
// AMX (compile only)

TEST(X86Intrin, AmxTileProductCompilesForSapphireRapids) {
  const int M = 32, K4 = 32, N = 32;
  te::Tensor A = te::placeholder({M, 4 * K4}, kU8, "A");
  te::Tensor Bp = te::placeholder({K4, N}, kI32, "Bp");
  auto k4 = te::reduce_axis({0, K4}, "k4"), kk = te::reduce_axis({0, 4}, "kk");
  te::Tensor C = te::compute(
      {M, N},
      [&](Var i, Var j) {
        return te::sum(cast(kI32, A(i, k4 * 4 + kk)) * packed_s8(Bp(k4, j), kk), {k4, kk});
      },
      "C");
  Target spr("llvm -mcpu=sapphirerapids");
  ASSERT_TRUE(has_amx_int8(spr));
  EXPECT_FALSE(has_amx_int8(Target("llvm -mcpu=skylake-avx512")));
  te::Schedule s = te::create_schedule({C});
  auto [io, ii] = s[C].split(C->axis[0], 16);
  auto [jo, ji] = s[C].split(C->axis[1], 16);
  auto [ko, ki] = s[C].split(k4, 16);
  s[C].reorder({io, jo, ko, ii, ji, ki, kk});
  s[C].tensorize(ii, amx_dot_u8s8());
  const std::string tir = e2e::lowered_text(s, {A, Bp, C});
  // Reset (16 zero rows) outside the k loop, one tile product per k step, strides in bytes.
  EXPECT_NE(tir.find("kiln.amx_tile_dot(\"tdpbusd\", 16, 64, 64, address_of(C[i.outer*512 + "
                     "j.outer*16]), 128, address_of(A[i.outer*2048 + k4.outer*64]), 128, "
                     "address_of(Bp[k4.outer*512 + j.outer*16]), 128)"),
            std::string::npos)
      << tir;
  auto [c, text] = build_run(s, {A, Bp, C}, spr, {}, /*run=*/false);
  for (const char* instr : {"ldtilecfg", "tileloadd", "tdpbusd", "tilestored"})
    EXPECT_NE(text.find(instr), std::string::npos) << instr;
}

}  // namespace
}  // namespace kiln::topi
