/// \file transform.h
/// \brief Every tir pass, one function per pass, one pass per file in src/tir/transform/.
///
/// Each pass takes a PrimFunc and returns a new one (the same handle when nothing changed). The
/// comment of each pass says what it requires of its input and what it guarantees of its output;
/// `tir::verify` (verify.h) checks the guarantees between passes, and the order in which the
/// passes run is written once, in pipeline.cc.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kiln/tir/function.h"

namespace kiln::tir {

/// Producer object (a te Tensor) -> the Buffer that holds it. Used for the function's argument
/// tensors, which have no ProducerRealize.
using ExternBufferMap = std::unordered_map<const Object*, Buffer>;

/// Flattens multi-dimensional storage into flat buffers.
///
/// * `ProducerRealize(p, bounds, cond, body, scope)` becomes `Allocate(v, p.dtype, {size}, cond,
///   body, scope)` with a fresh handle Var `v` named after the producer; scope "" means
///   "global", unless an enclosing `AttrStmt(p, attr::kRealizeScope, StringImm)` names one.
///   Element (i0, …, in-1) lives at sum_k (ik - bounds[k].min) * stride_k, row-major.
/// * `AttrStmt(p, attr::kStorageAlign, Call(_, {dim, factor, offset}))` (any call name, three
///   integer immediates) pads the stride of dimension `dim` of p's realize so that
///   stride % factor == offset; size = stride_0 * extent_0.
/// * `ProducerLoad`/`ProducerStore` of an argument tensor (a key of `extern_buffers`) become
///   `Load`/`Store` on the buffer's data var at `Buffer::flat_index`.
/// * AttrStmts kRealizeScope and kStorageAlign about producers are removed.
/// Requires: every ProducerLoad/Store is inside its producer's realize or names an extern
/// buffer. Guarantees: no ProducerRealize/ProducerStore/ProducerLoad remains.
PrimFunc storage_flatten(PrimFunc f, const ExternBufferMap& extern_buffers);

/// Simplifies every expression of the body with `arith::simplify(Stmt)` (loop vars bound to their
/// ranges, constant folding, provable ifs folded, extent-0 loops removed).
PrimFunc simplify(PrimFunc f);

/// Lowers loops bound to a virtual thread (`bind(axis, thread_axis("vthread"))`): the loop
/// disappears and each innermost statement that depends on it (its variable, or a buffer it
/// wrote) is written once per virtual thread, the copies side by side (a serial loop over them
/// beyond 16), so the virtual threads' work interleaves in one thread: register tiling with
/// independent chains for latency hiding. The loop is pushed inwards through sequences, loops,
/// conditions and lets that do not depend on it; statements that do not depend on it (a
/// cooperative fetch into shared memory) run once. An allocation inside the loop that a
/// virtual thread writes gets one copy per virtual thread (element i of copy v at v*size + i).
/// A vthread loop needs a constant extent (a user error names the loop otherwise).
PrimFunc inject_virtual_thread(PrimFunc f);

/// Splits loops around `if (likely(cond))` guards (from non-divisible splits).
///
/// For a serial, parallel or unrolled loop with constant extent whose body holds an
/// `IfThenElse(likely(c))` with c depending on the loop var, the loop is split at the largest
/// prefix (or suffix) of its range on which c is provably true for all values of the loops in
/// between: the main part has the guard removed, the rest keeps it (and is partitioned again
/// further in). Guards provably true (false) for the whole loop are replaced by their then
/// (else) branch. The tail loop gets a fresh loop variable.
/// Also splits loops on `likely(c)` conditions of `if_then_else` calls and `select`s (padding):
/// each conjunct of c that is an inequality affine in the loop var is proven on the longest
/// prefix or suffix of the range (for all values of the inner loops); the loop becomes
/// [min, a) [a, b) [b, end) with every such conjunct true on the middle part, where the
/// `if_then_else`/`select` becomes its true branch; the borders keep the conjuncts not proven
/// there. At most 4 distinct conjuncts per loop and 2 nested split loops; conjuncts on the var
/// of an enclosing split loop do not split inner loops again.
/// Guarantees: no `likely` call remains (the wrappers of kept conditions are removed).
PrimFunc loop_partition(PrimFunc f);

/// Options of `vectorize`.
struct VectorizeOptions {
  /// Largest vectorized extent; longer vectorized loops become serial.
  int max_lanes = 64;
};

/// Turns `For(kind = kVectorized)` loops with a constant extent L (2 <= L <= max_lanes) into
/// vector code: the loop var becomes Ramp(min, 1, L), expressions depending on it become vector
/// expressions (scalars broadcast where mixed), loads and stores take vector indices (stride-1
/// accesses come out as Ramp(base, 1, L)), conditions become predicated stores/loads or Selects.
/// A loop whose body cannot be vectorized (inner loop bounds depending on the var, a guard that
/// is not a pure store nest, an extern call on the var, an Allocate, a store of a varying value
/// to one address, a non-constant extent) becomes a serial loop: correctness first. Extent-1
/// loops are replaced by their body with the var substituted.
/// Guarantees: no kVectorized loop remains.
PrimFunc vectorize(PrimFunc f, const VectorizeOptions& opt = {});

/// Options of `unroll`.
struct UnrollOptions {
  /// kUnrolled loops with a constant extent up to this are replaced by copies of their body.
  int64_t max_extent = 64;
  /// When > 0, serial loops with constant extent <= this and no inner loop are unrolled too.
  int64_t auto_max_step = 0;
};

/// Replaces unrolled loops by copies of their body, the loop var substituted by each value and
/// the result simplified; variables bound inside the body are renamed in each copy.
/// kUnrolled loops that cannot be unrolled (non-constant or too long) become serial.
/// Guarantees: no kUnrolled loop remains.
PrimFunc unroll(PrimFunc f, const UnrollOptions& opt = {});

/// Reuses storage: allocations of constant size, one dtype and one scope, found along one chain
/// of nested Allocate/SeqStmt (not crossing a loop or an attribute), whose lifetimes in
/// sequence do not overlap share one allocation (the greatest size), hoisted to the top of the
/// chain. Allocations never used are removed. Conservative: a statement touching two buffers
/// keeps them apart. First, an allocation whose size depends on enclosing loop variables gets
/// the constant upper bound of its size over the loops' ranges (no heap allocation per
/// iteration for the tail tile of a non-divisible split).
PrimFunc storage_rewrite(PrimFunc f);

/// Removes statements that do nothing: Evaluate of a constant, loops with an empty body or
/// extent 0, ifs with empty branches, lets/attrs/allocates around nothing, and stores of a
/// location into itself (`A[i] = A[i]`).
PrimFunc remove_no_op(PrimFunc f);

/// Places barriers (kiln.sync_threads) in a GPU kernel so that every access to a buffer in
/// shared memory (an Allocate with scope "shared") by one thread is ordered with the conflicting
/// accesses of the others: a barrier goes before a statement that reads a shared buffer written
/// since the last barrier, or writes one read or written since then; and at the end of the body
/// of a serial loop whose first accesses (before its first barrier) conflict with those since
/// the last barrier at its end (the next iteration would overwrite what this one still reads).
/// Statements are taken whole below the sequence level: a conditional or a vectorized loop is
/// one statement, and a barrier never goes inside a condition (where threads could diverge).
/// Loops bound to thread axes are not sequential: their bodies are one pass. A kernel without
/// shared buffers is returned unchanged.
PrimFunc storage_sync(PrimFunc f);

/// Runs the extern stages of a GPU function (AttrStmt extern_scope: hand-written loops, e.g.
/// Gather's index check, and 0-d computes) that lie outside every thread-bound region on one
/// GPU thread: each is
/// wrapped in a region bound to blockIdx.x and threadIdx.x with extent 1. Allocations that
/// enclose kernels stay in the host code (their buffers are then device memory). Correct, and
/// slow for anything but small loops.
PrimFunc bind_extern_stages(PrimFunc f);

/// The host function and the device kernels of a function scheduled for a GPU.
struct HostDeviceSplit {
  PrimFunc host;
  std::vector<PrimFunc> kernels;
};

/// Splits a function whose loops are bound to GPU threads into device kernels and the host code
/// that launches them. Each region that starts at an `AttrStmt thread_extent` not inside another
/// becomes a kernel `<f>_kernel<i>` (attrs device_kernel = "1", launch = "gx,gy,gz,bx,by,bz",
/// threads_per_block): its parameters are the region's free variables, the buffer data handles
/// first, then the scalars, each in first-use order; the launch extent of each thread axis is the
/// largest constant extent of a loop bound to it in the region (loops with a smaller one get a
/// guard in the code generator). In the host function the region becomes an Evaluate of
/// kiln.device_launch with those extents and arguments. A thread-bound loop with a non-constant
/// extent, an unknown thread tag or a vthread loop is a user error naming the function.
/// Run after the pipeline, before make_packed_api (on the host function).
HostDeviceSplit split_host_device(const PrimFunc& f);

}  // namespace kiln::tir
