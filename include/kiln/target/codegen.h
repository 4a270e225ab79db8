/// \file codegen.h
/// \brief Code generators: PrimFuncs (after make_packed_api) to a runtime::Module.
///
/// build_llvm emits one LLVM module for all functions, optimizes it at O3 for the target (CPU
/// and features from the Target, loop and SLP vectorizers on), compiles it to an object file
/// and JIT-loads that object with ORC LLJIT (runtime symbols such as kiln_parallel_for are
/// resolved against the current process). The returned module's export_library(path) links
/// the same object into a shared library with the system compiler (`cc -shared`, or KILN_CC),
/// loadable by runtime::Module::load. The JIT is created on the first get_function, so modules
/// for other architectures can be built for get_source and exported: for a foreign triple the
/// linker is KILN_CROSS_CC, else `<triple>-gcc` on PATH (aarch64-linux-gnu-gcc from Debian's
/// gcc-aarch64-linux-gnu for any aarch64 Linux triple); a missing one is a user error naming
/// the package. Every library carries its target record (runtime/library_target.h).
#pragma once

#include <string>
#include <vector>

#include "kiln/runtime/module.h"
#include "kiln/target/target.h"
#include "kiln/tir/function.h"

namespace kiln::codegen {

/// Compiles `funcs` for `target`. Every function with attr packed_api = "1" becomes an exported
/// entry point with the packed signature; its name is its symbol. Throws kiln::Error for IR the
/// generator cannot translate (naming the node and the function) and for duplicate names.
runtime::Module build_llvm(const std::vector<tir::PrimFunc>& funcs, const Target& target);

/// The source of a module returned by build_llvm: "ll" (optimized LLVM IR), "asm" (assembly
/// for the target). Throws kiln::Error for another format or another kind of module.
std::string get_source(const runtime::Module& m, const std::string& fmt);

}  // namespace kiln::codegen
