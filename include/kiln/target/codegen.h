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

/// build_llvm for a host target, with device code embedded for the launches of its functions
/// (kiln.device_launch): `device_format` "ptx" (CUDA) or "cl" (OpenCL C), "" with no code.
/// get_source(m, device_format) returns the code.
runtime::Module build_llvm_host(const std::vector<tir::PrimFunc>& funcs, const Target& target,
                                const std::string& device_format, const std::string& device_code);

/// Compiles `funcs`, scheduled for a GPU (their loops bound to blockIdx/threadIdx), for a cuda
/// or opencl target: each is split into device kernels (tir::split_host_device, barriers by
/// tir::storage_sync), compiled to PTX (build_ptx) or OpenCL C (build_opencl_source), and a
/// host function (packed API, for tensors on that device) built by the CPU code generator for
/// the host target, which launches the kernels through kiln_device_launch; the device code
/// travels inside the host library. A function that touches memory outside a kernel is a user
/// error naming it.
runtime::Module build_gpu(const std::vector<tir::PrimFunc>& funcs, const Target& target);

/// The PTX of device kernels (attr device_kernel, from tir::split_host_device) for a cuda target.
std::string build_ptx(const std::vector<tir::PrimFunc>& kernels, const Target& target);

/// The OpenCL C source of device kernels (attr device_kernel) for an opencl target: one
/// `__kernel` per kernel with its buffers as `__global` pointers, its scalars, and a last
/// argument `__global int* kiln_error` that a failed run-time check sets (the runtime reads it
/// at synchronize); thread loops read get_group_id / get_local_id, shared allocations are
/// `__local` arrays at kernel scope, kiln.sync_threads is barrier(CLK_LOCAL_MEM_FENCE). Throws
/// kiln::Error for IR OpenCL C cannot express (vectors, extern calls), naming the kernel.
std::string build_opencl_source(const std::vector<tir::PrimFunc>& kernels, const Target& target);

/// The source of a module returned by build_llvm or build_gpu: "ll" (optimized LLVM IR),
/// "asm" (assembly for the host target), "ptx" / "cl" (the device code of a cuda / opencl
/// build). Throws
/// kiln::Error for another format or another kind of module.
std::string get_source(const runtime::Module& m, const std::string& fmt);

}  // namespace kiln::codegen
