// build_gpu (codegen.h): a GPU function becomes kernels in the target's device language and host
// code that launches them, the same split for CUDA and OpenCL.
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/support/error.h"
#include "kiln/target/codegen.h"
#include "kiln/tir/packed_api.h"
#include "kiln/tir/transform.h"
#include "kiln/tir/verify.h"

namespace kiln::codegen {
namespace {

/// True when `s` reads or writes a buffer (a Load under address_of is an address, not a read;
/// allocations in the host code of a GPU function are device memory).
bool touches_memory(const ir::Stmt& s) {
  struct Finder : ir::IRVisitor {
    bool found = false;
    using IRVisitor::visit;
    void visit(const ir::Load* op) override { found = true; }
    void visit(const ir::Store* op) override { found = true; }
    void visit(const ir::Call* op) override {
      if (op->name != ir::builtin::kAddressOf) IRVisitor::visit(op);
    }
  } f;
  f.visit_stmt(s);
  return f.found;
}

}  // namespace

runtime::Module build_gpu(const std::vector<tir::PrimFunc>& funcs, const Target& target) {
  const std::string& codegen = target.kind_info().codegen;
  KILN_USER_CHECK(codegen == "cuda" || codegen == "opencl")
      << "build_gpu: target '" << target.str() << "' is not a GPU target (cuda, opencl)";
  const int device_type = codegen == "cuda" ? kKilnCUDA : kKilnOpenCL;
  tir::GpuLimits limits;
  limits.max_threads_per_block =
      target.attr_int("max_threads_per_block", limits.max_threads_per_block);
  limits.max_shared_memory_per_block =
      target.attr_int("max_shared_memory_per_block", limits.max_shared_memory_per_block);
  std::vector<tir::PrimFunc> hosts, kernels;
  for (const tir::PrimFunc& f : funcs) {
    tir::HostDeviceSplit split = tir::split_host_device(tir::bind_extern_stages(f));
    KILN_USER_CHECK(!touches_memory(split.host->body))
        << "codegen " << codegen << ": function '" << f->name
        << "' reads or writes memory outside a GPU kernel; bind its outer loops to "
           "blockIdx/threadIdx (every buffer lives on the GPU)";
    hosts.push_back(
        tir::make_packed_api(split.host.with_attr("device_type", std::to_string(device_type))));
    for (const tir::PrimFunc& k : split.kernels) {
      tir::verify_gpu_kernel(k, limits);
      kernels.push_back(tir::storage_sync(k));
    }
  }
  if (codegen == "cuda") {
    return build_llvm_host(hosts, target.host_or_default(), "ptx", build_ptx(kernels, target));
  }
  return build_llvm_host(hosts, target.host_or_default(), "cl",
                         build_opencl_source(kernels, target));
}

}  // namespace kiln::codegen
