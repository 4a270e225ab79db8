/// \file llvm_common.h
/// \brief Small LLVM helpers shared by the files of src/target/llvm (no LLVM types here).
#pragma once

namespace kiln::codegen {

/// Registers every LLVM target, MC layer and assembly printer once per process.
void initialize_llvm();

}  // namespace kiln::codegen
