/// \file library_target.h
/// \brief The target record of a compiled library, and the CPU feature check made with it.
///
/// The code generator writes into every library it builds a record of the target the code is
/// for: a NUL-terminated text in the ELF section `.kiln_target` (symbol `__kiln_target`),
///
///   kiln-target 1
///   triple=aarch64-linux-gnu
///   target=llvm -mtriple=aarch64-linux-gnu -mattr=+sve
///   features=neon,sve
///
/// `features` lists the CPU features of the target that a runtime can check before it runs
/// any of the code (Target::runtime_features). Module::load reads the record from the file
/// before dlopen: a library for another architecture is refused naming its target, and on
/// AArch64 a library whose features the CPU lacks (HWCAP/HWCAP2 from getauxval) is refused
/// naming the feature, instead of the process dying of SIGILL at the first such instruction.
/// Libraries written before the record existed have none and load as before.
#pragma once

#include <string>
#include <vector>

namespace kiln::runtime {

/// The ELF section that holds the record.
inline constexpr const char* kLibraryTargetSection = ".kiln_target";

/// What a library says about the target it was built for.
struct LibraryTarget {
  std::string triple;                 ///< e.g. "aarch64-linux-gnu"; "" when there is no record
  std::string target;                 ///< the target string, e.g. "llvm -mtriple=... -mattr=+sve"
  std::vector<std::string> features;  ///< checkable CPU features, without '+': {"neon", "sve"}
  /// True when the library has a record.
  bool known() const { return !triple.empty(); }
};

/// The record's text (see the file comment), without the terminating NUL.
std::string library_target_text(const LibraryTarget& t);

/// Parses a record's text. Throws kiln::Error "WHAT: malformed target record: ..." naming the
/// line when the header or a required key (triple, target, features) is missing. Unknown keys
/// are ignored, so later versions may add some.
LibraryTarget parse_library_target(const std::string& text, const std::string& what);

/// The library's record, read from the file without loading it (any architecture): an empty
/// LibraryTarget when the library has none. Throws kiln::Error like check_elf_library for a
/// file that is not an intact ELF shared library, whatever machine it is for.
LibraryTarget read_library_target(const std::string& path);

/// The features of `features` this CPU lacks. On AArch64 Linux each known feature maps to its
/// HWCAP or HWCAP2 bit; a name the runtime does not know counts as missing (a newer compiler's
/// feature is not assumed present). On other hosts: none (nothing is checked there yet).
std::vector<std::string> missing_cpu_features(const std::vector<std::string>& features);

/// Throws kiln::Error "WHAT: compiled for target 'T', which needs CPU feature(s) F that this
/// CPU lacks ..." when missing_cpu_features(t.features) is not empty.
void check_cpu_features(const LibraryTarget& t, const std::string& what);

}  // namespace kiln::runtime
