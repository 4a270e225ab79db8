/// \file target.h
/// \brief Target descriptions: which machine code is generated for.
///
/// A target is a kind plus options, written as a string, LLVM-style:
///   "llvm"                                   generic CPU of the host triple (x86-64: SSE2)
///   "llvm -mcpu=native"                      the host CPU with all its features
///   "llvm -mcpu=skylake-avx512 -mattr=+avx512f,-avx512bw"
///   "llvm -mtriple=aarch64-linux-gnu"        cross-compilation
///   "cuda -arch=sm_90"                       an NVIDIA GPU (PTX; docs/gpu.md)
///   "opencl -max_threads_per_block=256"      an OpenCL device (no code generator yet)
/// Kinds are data (TargetKind): each says which options its strings accept, the keys that op
/// strategies match on ("cpu", "x86", "arm", "gpu", …, most specific first) and which code
/// generator serves it. The built-in kinds are llvm, cuda, opencl and vdla; tests register
/// their own with register_target_kind. `-mattr` may be given several times; its features are
/// appended in order. A bad string throws kiln::Error naming the bad option (or listing the
/// known kinds). A device target may carry a host target for the code around its kernels.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace kiln {

class Target;

/// A kind of target: what its strings accept and what strategies and code generation see.
struct TargetKind {
  std::string name;               ///< "llvm", "cuda", …: the first word of a target string
  std::vector<std::string> keys;  ///< strategy keys every target of the kind has, e.g. {"gpu"}
  /// Options its strings accept, without the leading '-' ("mcpu", "arch", …). The LLVM
  /// options mcpu, mtriple and mattr fill Target's fields of those names; the others are kept
  /// in Target::attrs.
  std::vector<std::string> options;
  /// Default values of attrs (e.g. max_threads_per_block for a GPU).
  std::map<std::string, std::string> defaults;
  /// The code generator that serves the kind: "llvm", or "" when there is none yet.
  std::string codegen;
  /// Optional: keys that depend on the target's options, placed before `keys` (the llvm kind
  /// adds "x86" or "arm" by the triple's architecture).
  std::function<std::vector<std::string>(const Target&)> derived_keys;
};

/// Adds a kind (a test-only kind, or a new back end's). An internal error when the name is
/// taken or empty.
void register_target_kind(TargetKind kind);
/// The kind called `name`; a user error listing the known kinds otherwise.
const TargetKind& target_kind(const std::string& name);
/// The names of all known kinds, sorted.
std::vector<std::string> target_kind_names();

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

  std::string kind = "llvm";        ///< the kind's name (TargetKind)
  std::string mcpu;                 ///< CPU name ("" = generic, "native" = the host CPU)
  std::string mtriple;              ///< target triple ("" = the host triple)
  std::vector<std::string> mattrs;  ///< features, each "+name" or "-name"
  /// The kind's other options (without '-'), e.g. {"arch": "sm_90"}; defaults not included.
  std::map<std::string, std::string> attrs;
  /// The target of the code around a device's kernels; null = the host CPU (host()).
  std::shared_ptr<const Target> host_target;

  /// The kind's description.
  const TargetKind& kind_info() const { return target_kind(kind); }
  /// The keys strategies match on, most specific first: derived keys, then the kind's, e.g.
  /// {"x86", "cpu"} for llvm on x86-64, {"cuda", "gpu"} for cuda.
  std::vector<std::string> keys() const;
  /// True when `key` is one of keys().
  bool has_key(const std::string& key) const;
  /// Option `name` (attrs, else the kind's default); `fallback` when neither has it.
  std::string attr(const std::string& name, const std::string& fallback = "") const;
  /// Option `name` as an integer; a user error naming the option when it is not one.
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  /// The target code around this target's kernels runs on: host_target, else host().
  Target host_or_default() const;
  /// This target with `host` as its host target.
  Target with_host(const Target& host) const;

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
  /// The CPU features of this target that a runtime can check before it loads code built for
  /// it, without the leading '+' (AArch64: "neon", "fullfp16", "dotprod", "i8mm", "bf16",
  /// "sve", "sve2"; none for other architectures yet). The code generator records them in the
  /// library (section .kiln_target) and Module::load refuses a library whose features the CPU
  /// lacks, instead of dying of SIGILL at the first such instruction.
  std::vector<std::string> runtime_features() const;
  /// The canonical string form; parse(str()) == *this (the host target is not part of it).
  std::string str() const;

  bool operator==(const Target& o) const {
    return kind == o.kind && mcpu == o.mcpu && mtriple == o.mtriple && mattrs == o.mattrs &&
           attrs == o.attrs;
  }
  bool operator!=(const Target& o) const { return !(*this == o); }
};

inline std::ostream& operator<<(std::ostream& os, const Target& t) { return os << t.str(); }

}  // namespace kiln
