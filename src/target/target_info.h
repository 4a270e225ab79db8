/// \file target_info.h
/// \brief What the rest of src/target needs to know from LLVM about CPUs, without including
/// LLVM headers. Implemented in src/target/llvm/target_info.cc.
#pragma once

#include <string>
#include <vector>

namespace kiln::target_info {

/// LLVM's default target triple for this process ("x86_64-pc-linux-gnu").
std::string host_triple();
/// LLVM's name for the host CPU (only used for -mcpu=native; may under-report features).
std::string host_cpu_name();
/// The host CPU's features from llvm::sys::getHostCPUFeatures, each "+name" or "-name".
std::vector<std::string> host_cpu_features();
/// True when `cpu` (an LLVM CPU name, "" = generic) on `triple` enables `feature`; throws
/// kiln::Error when the triple has no LLVM target.
bool cpu_has_feature(const std::string& triple, const std::string& cpu, const std::string& feature);
/// True when `cpu` names a CPU LLVM knows for `triple` ("" and "generic" always do).
bool is_known_cpu(const std::string& triple, const std::string& cpu);

}  // namespace kiln::target_info
