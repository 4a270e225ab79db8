/// \file verify.h
/// \brief The IR invariant checker run between passes (STYLE.md item 7).
///
/// A failure is a compiler bug in the pass named by `after_pass`; it throws kiln::Error with an
/// "internal error" message naming the pass, the function and the rule broken.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/tir/function.h"

namespace kiln::tir {

/// Which pass-dependent guarantees to check besides the always-on rules.
struct VerifyOptions {
  /// storage_flatten has run: no ProducerRealize/ProducerStore/ProducerLoad may remain.
  bool flattened = false;
  /// vectorize has run: no For of kind kVectorized may remain.
  bool vectorized = false;
};

/// Checks, always:
/// * every variable is used inside the scope of its definition (parameters, buffer data and
///   shape vars of the buffer map, For, Let/LetStmt, Allocate, thread_extent attributes), and no
///   variable is bound again inside its own scope;
/// * Load/Store buffer vars are allocated (Allocate in scope), a parameter buffer's data var, or
///   a handle variable in scope (a handle parameter or let-bound pointer);
/// * types: stored value / loaded type element type equal to the allocation's dtype, index and
///   predicate lanes match the access lanes, conditions (If, Select, Assert, Allocate,
///   predicates) are Bool, binary operands agree, For min/extent match the loop var type.
/// Throws kiln::Error (internal) on the first violation.
void verify(const PrimFunc& f, const std::string& after_pass, const VerifyOptions& opt = {});

}  // namespace kiln::tir

namespace kiln::tir {

/// What a GPU allows one block (thread block, OpenCL work-group) to use.
struct GpuLimits {
  int64_t max_threads_per_block = 1024;
  int64_t max_shared_memory_per_block = 48 * 1024;  ///< bytes
  int64_t max_local_memory_per_thread = 64 * 1024;  ///< bytes of per-thread arrays
};

/// Checks a device kernel (from split_host_device) against `limits` before code generation: the
/// threads of a block (the product of its threadIdx extents), its shared allocations (bytes,
/// summed) and each thread's local arrays (bytes, summed), all of constant size. A kernel over
/// a limit is the schedule's fault, not the compiler's: throws a user kiln::Error naming the
/// kernel, the quantity, its value and the limit ("... uses 2048 threads per block; the target
/// allows 1024 (-max_threads_per_block)").
void verify_gpu_kernel(const PrimFunc& kernel, const GpuLimits& limits);

}  // namespace kiln::tir
