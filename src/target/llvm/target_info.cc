// CPU and triple facts from LLVM for target.cc (see target_info.h). Host features come from
// llvm::sys::getHostCPUFeatures (CPUID), never from the host CPU's name. A named CPU's
// features come from the target's MCSubtargetInfo for that CPU.
#include "../target_info.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/TargetParser/Host.h>

#include <memory>

#include "kiln/support/error.h"
#include "llvm_common.h"

namespace kiln::target_info {

std::string host_triple() { return llvm::sys::getDefaultTargetTriple(); }

std::string host_cpu_name() { return llvm::sys::getHostCPUName().str(); }

std::vector<std::string> host_cpu_features() {
  llvm::StringMap<bool> features;
  std::vector<std::string> out;
  if (!llvm::sys::getHostCPUFeatures(features)) return out;
  for (const auto& kv : features) out.push_back((kv.second ? "+" : "-") + kv.getKey().str());
  return out;
}

namespace {
std::unique_ptr<llvm::MCSubtargetInfo> subtarget(const std::string& triple,
                                                 const std::string& cpu) {
  codegen::initialize_llvm();
  std::string err;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, err);
  KILN_USER_CHECK(t != nullptr) << "target triple '" << triple
                                << "' is not supported by LLVM: " << err;
  return std::unique_ptr<llvm::MCSubtargetInfo>(t->createMCSubtargetInfo(triple, cpu, ""));
}
}  // namespace

bool cpu_has_feature(const std::string& triple, const std::string& cpu,
                     const std::string& feature) {
  auto sti = subtarget(triple, cpu);
  return sti && sti->checkFeatures("+" + feature);
}

bool is_known_cpu(const std::string& triple, const std::string& cpu) {
  if (cpu.empty() || cpu == "generic") return true;
  auto sti = subtarget(triple, "");  // a generic subtarget: an unknown name would warn
  return sti && sti->isCPUStringValid(cpu);
}

}  // namespace kiln::target_info
