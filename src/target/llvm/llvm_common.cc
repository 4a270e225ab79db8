// One-time LLVM initialization: all targets (cross-compilation to ARM needs more than the
// native one), their MC layers, assembly printers and parsers.
#include "llvm_common.h"

#include <llvm/Support/TargetSelect.h>

#include <mutex>

namespace kiln::codegen {

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
  });
}

}  // namespace kiln::codegen
