/// \file op.h
/// \brief Building expressions: constants, operators with type matching and constant folding,
/// and math intrinsics.
///
/// Integer `/` and `%` on Exprs use FLOOR semantics (like Python and index arithmetic);
/// `truncdiv`/`truncmod` give C semantics. Immediates adopt the other operand's type
/// (`x + 1` with x:int64 makes an int64 one; but a float immediate never becomes an int:
/// `i + 0.5f` casts i to float32); scalars broadcast to the other side's lanes;
/// int with float promotes to float; two different ints promote to the wider. Anything else is
/// an error naming both types.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/ir/expr.h"
#include "kiln/ir/stmt.h"

namespace kiln::ir {

Expr make_const(DataType t, int64_t value);
Expr make_const(DataType t, double value);
/// Any other integer type (int, size_t, …) goes through the int64_t form.
template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
Expr make_const(DataType t, T value) {
  return make_const(t, static_cast<int64_t>(value));
}
inline Expr make_const(DataType t, float value) {
  return make_const(t, static_cast<double>(value));
}
Expr make_zero(DataType t);
Expr make_one(DataType t);
Expr const_true(int lanes = 1);
Expr const_false(int lanes = 1);
/// The value of an integer (or bool) immediate, or of a Broadcast of one.
std::optional<int64_t> as_const_int(const Expr& e);
std::optional<double> as_const_float(const Expr& e);
bool is_const_int(const Expr& e, int64_t value);
inline bool is_zero(const Expr& e) { return is_const_int(e, 0); }
inline bool is_one(const Expr& e) { return is_const_int(e, 1); }
/// An IntImm, FloatImm, or Broadcast of one.
bool is_const(const Expr& e);
/// Largest / smallest value of a type, as an immediate.
Expr max_value(DataType t);
Expr min_value(DataType t);

/// Cast with constant folding; a no-op when the type already matches.
Expr cast(DataType t, Expr value);
/// Repeats a scalar into `lanes` lanes (no-op for lanes == 1).
Expr broadcast(Expr value, int lanes);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
/// Float division, or FLOOR division for integers.
Expr operator/(Expr a, Expr b);
/// FLOOR modulo for integers.
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);
Expr truncdiv(Expr a, Expr b);
Expr truncmod(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr select(Expr cond, Expr t, Expr f);
/// (a + b - 1) / b for non-negative ints.
Expr ceildiv(Expr a, Expr b);

// Math intrinsics (pure calls, lowered by code generators).
Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr rsqrt(Expr x);
Expr tanh(Expr x);
Expr sigmoid(Expr x);
Expr erf(Expr x);
Expr abs(Expr x);
Expr floor(Expr x);
Expr ceil(Expr x);
Expr round(Expr x);
Expr pow(Expr x, Expr y);
Expr fma(Expr a, Expr b, Expr c);
/// A hint that `cond` is usually true (loop partitioning looks for it).
Expr likely(Expr cond);
/// Evaluates only the chosen branch (unlike select); used for guarded loads.
Expr if_then_else(Expr cond, Expr t, Expr f);

/// Names of builtin calls shared by passes and code generators.
namespace builtin {
constexpr const char* kLikely = "likely";
constexpr const char* kIfThenElse = "if_then_else";
/// address_of(Load) is the address of the loaded element (a handle); used to pass tensors to
/// extern functions.
constexpr const char* kAddressOf = "address_of";
/// tuple(a, b, …): a pack of values, used as an AttrStmt value (e.g. storage_align's
/// (dim, factor, offset)).
constexpr const char* kTuple = "tuple";
/// kiln.array_get(arr_handle, field, [dim]) reads a KilnArray field (see tir packed API).
constexpr const char* kArrayGet = "kiln.array_get";
constexpr const char* kArgValue = "kiln.arg_value";
constexpr const char* kArgTypeCode = "kiln.arg_type_code";
constexpr const char* kSetError = "kiln.set_error";
/// kiln.arg_check(cond, prefix, got_kind, got) as an Evaluate statement: when cond is false,
/// sets the last error to prefix + got formatted by got_kind and makes the function return -1;
/// got is evaluated only then (see tir/packed_api.h).
constexpr const char* kArgCheck = "kiln.arg_check";
/// kiln.array_check(arr, prefix, ndim, dtype_word, alignment, shape..., strides...) as an
/// Evaluate statement: the checks of one tensor argument with constant shape and strides in
/// one call of kiln_check_array (c_runtime_api.h), which sets the message of the first failing
/// check; the function then returns -1 (see tir/packed_api.h).
constexpr const char* kArrayCheck = "kiln.array_check";
/// reinterpret(x): the bits of x as the call's type, whose total width equals x's (e.g. the
/// uint8x4 of 4 consecutive bytes as one int32, int8x64 as int32x16). Pure, not element-wise.
constexpr const char* kReinterpret = "reinterpret";
/// Integer bit operations, element-wise on equal types: shift_right(a, b) (arithmetic for
/// signed a, logical for unsigned), shift_left(a, b), bitwise_and / bitwise_or / bitwise_xor
/// (a, b), popcount(a) (the number of set bits, in a's type).
constexpr const char* kShiftRight = "shift_right";
constexpr const char* kShiftLeft = "shift_left";
constexpr const char* kBitwiseAnd = "bitwise_and";
constexpr const char* kBitwiseOr = "bitwise_or";
constexpr const char* kBitwiseXor = "bitwise_xor";
constexpr const char* kPopcount = "popcount";
/// kiln.vector_slice(v, begin): lanes [begin, begin + n) of the vector v, n the call's lanes
/// (n = 1: the scalar lane). Pure, not element-wise; tir::vectorize writes it for the tree that
/// combines a reduction's lanes (attr::kReduceLanes).
constexpr const char* kVectorSlice = "kiln.vector_slice";
/// A pure call whose name starts with "llvm." is the LLVM intrinsic of that name (e.g.
/// "llvm.x86.avx512.vpdpbusd.512"), emitted as is with the call's argument and result types
/// (an overloaded intrinsic is instantiated at the result type). Only the LLVM code generator
/// accepts it; tensor intrinsics (te/tensor_intrin.h) lower to such calls.
constexpr const char* kLLVMIntrinPrefix = "llvm.";
/// kiln.amx_tile_dot(op, M, NB, KB, c, ldc, a, lda, b, ldb) as an Evaluate statement: one AMX
/// tile product C[M, NB bytes] (+)= A[M, KB bytes] · B[KB/4, NB bytes] with op "tdpbusd" (u8 ×
/// s8 → s32) or "tdpbf16ps" (bf16 → f32): loads the three tiles from the pointers c, a, b with
/// the given row strides in bytes, multiplies, stores C. The LLVM code generator emits the
/// tileloadd / tdp* / tilestored sequence (LLVM configures the tiles); x86 targets with amx-int8
/// / amx-bf16 only.
constexpr const char* kAmxTileDot = "kiln.amx_tile_dot";
/// prefetch(address_of(Load), locality) as an Evaluate statement: a hint to bring the cache line
/// holding that element closer (locality 3: all levels, prefetcht0; 2: L2, prefetcht1; 1: L3;
/// 0: non-temporal). It never faults, so the element may lie past the buffer's end: nothing is
/// loaded. Emitted by Stage::prefetch.
constexpr const char* kPrefetch = "prefetch";
/// kiln.device_launch(kernel, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes,
/// args...) as an Evaluate statement of a host function: launches the device kernel named
/// `kernel` (a string) of the same module with those launch extents and arguments (buffer data
/// pointers, then scalars), as tir::split_host_device writes it; the function returns the
/// runtime's error when the launch fails.
constexpr const char* kDeviceLaunch = "kiln.device_launch";
/// kiln.sync_threads() as an Evaluate statement of a GPU kernel: a barrier of the threads of a
/// block (CUDA's __syncthreads) that also orders their shared-memory accesses; placed by
/// tir::storage_sync.
constexpr const char* kSyncThreads = "kiln.sync_threads";
}  // namespace builtin

/// Replaces variables by expressions (by identity).
Expr substitute(const Expr& e, const VarMap<Expr>& map);
Stmt substitute(const Stmt& s, const VarMap<Expr>& map);

/// True if `e` reads any variable in `vars` (or, with no set, any variable satisfying `pred`).
bool uses_var(const Expr& e, const std::function<bool(const Variable*)>& pred);
bool uses_var(const Stmt& s, const std::function<bool(const Variable*)>& pred);

}  // namespace kiln::ir
