/// \file target.h
/// \brief Target descriptions: which machine code is generated for.
///
/// A target is written as a string, LLVM-style:
///   "llvm"                                   generic CPU of the host triple (x86-64: SSE2)
///   "llvm -mcpu=native"                      the host CPU with all its features
///   "llvm -mcpu=skylake-avx512 -mattr=+avx512f,-avx512bw"
///   "llvm -mtriple=aarch64-linux-gnu"        cross-compilation
/// Only the kind "llvm" exists for now. `-mattr` may be given several times; its features are
/// appended in order. A bad string throws kiln::Error naming the bad option.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kiln {

/// A code-generation target.
class Target {
 public:
  /// Parses a target string (see the file comment). Throws kiln::Error on a bad string.
  static Target parse(const std::string& s);
  /// The host CPU with all its features: "llvm -mcpu=native".
  static Target host();

  Target() = default;
  /// Same as parse(s).
  explicit Target(const std::string& s) { *this = parse(s); }

  std::string kind = "llvm";        ///< code generator family
  std::string mcpu;                 ///< CPU name ("" = generic, "native" = the host CPU)
  std::string mtriple;              ///< target triple ("" = the host triple)
  std::vector<std::string> mattrs;  ///< features, each "+name" or "-name"

  /// The triple code is generated for (mtriple, or the host triple when empty).
  std::string triple() const;
  /// True when code for this target runs on this machine (same architecture).
  bool is_host_arch() const;
  /// True when `feature` ("avx512f", "avx2", "neon", …) is enabled for this target: by the CPU
  /// (host features for "native"), then overridden by mattrs.
  bool has_feature(const std::string& feature) const;
  /// Native SIMD register width in bits: 512 with avx512f, 256 with avx2, else 128.
  int vector_bits() const;
  /// Architectural SIMD registers: 32 on x86-64 with avx512f (zmm0-31) and on AArch64 (v0-31),
  /// 16 on x86-64 without it (ymm/xmm0-15). The templates size their register tiles by it.
  int vector_registers() const;
  /// The canonical string form; parse(str()) == *this.
  std::string str() const;

  bool operator==(const Target& o) const {
    return kind == o.kind && mcpu == o.mcpu && mtriple == o.mtriple && mattrs == o.mattrs;
  }
  bool operator!=(const Target& o) const { return !(*this == o); }
};

inline std::ostream& operator<<(std::ostream& os, const Target& t) { return os << t.str(); }

}  // namespace kiln
