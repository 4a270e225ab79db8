// build(): the last steps of compilation, packed-API wrapping (and, for CPUs, compute bodies
// shared between kernels that differ only in constants) then the code generator chosen by the
// target's kind (TargetKind::codegen: llvm for CPUs, cuda and opencl for GPUs).
#include "kiln/target/build.h"

#include "kiln/support/error.h"
#include "kiln/target/codegen.h"
#include "kiln/tir/packed_api.h"

namespace kiln {

runtime::Module build(const std::vector<tir::PrimFunc>& funcs, const Target& target) {
  const TargetKind& kind = target.kind_info();
  if (kind.codegen == "cuda" || kind.codegen == "opencl") return codegen::build_gpu(funcs, target);
  std::vector<tir::PrimFunc> packed;
  packed.reserve(funcs.size());
  for (const tir::PrimFunc& f : funcs) packed.push_back(tir::make_packed_api(f));
  KILN_USER_CHECK(kind.codegen == "llvm")
      << "build: target '" << target.str() << "': no code generator for target kind '"
      << target.kind << "' yet";
  return codegen::build_llvm(tir::share_compute_bodies(packed), target);
}

}  // namespace kiln
