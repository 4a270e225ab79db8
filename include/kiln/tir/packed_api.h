/// \file packed_api.h
/// \brief make_packed_api: turns a PrimFunc with tensor and scalar parameters into an entry
/// point with the packed C signature that checks every argument before touching memory.
///
/// Input: params are handle Vars with a Buffer in buffer_map (compact, static shapes; a shape
/// entry may also be a Var, which is then bound from the first array that has it) or scalar
/// int/uint/float/bool Vars; the body reads and writes the buffers' data vars.
/// Output: params (args: handle, type_codes: handle, num_args: int32), attr packed_api = "1",
/// and a body that
///   1. checks num_args == N                 "f: expected 3 arguments, got 2"
///   2. checks every type code (array for tensors, int for ints, float for floats)
///                                           "f: argument 1 (B): type code expected array, got int"
///   3. per tensor, in this order: ndim, dtype, device, each shape[d], each strides[d] (NULL
///      or compact), data pointer alignment
///                                           "f: argument 0 (A): ndim expected 2, got 1"
///                                           "f: argument 0 (A): dtype expected float32, got int32"
///                                           "f: argument 0 (A): device expected cpu, got cuda"
///                                           "f: argument 2 (C): shape[1] expected 1024, got 512"
///                                           "f: argument 0 (A): strides[0] expected 8, got 16"
///                                           "f: argument 0 (A): data pointer expected 64-byte
///                                           aligned, got 0x..."
///      A tensor whose shape and strides are all constants (the usual case) gets these checks,
///      in the same order and with the same messages, as one kiln.array_check statement: one
///      call of kiln_check_array (c_runtime_api.h) with the expected values in a constant table,
///      instead of a dozen inline compare-and-branch blocks (code size, compile time).
///   4. binds scalars (LetStmt p = cast(p.dtype, arg_value)) and buffer data vars
///      (data + byte_offset), then runs the original body inside
///      AttrStmt(null, "compute_scope", StringImm("<name>_compute_")), which the LLVM code
///      generator outlines into a function whose buffer pointers are noalias.
/// A failing check sets the last error (kiln_get_last_error) and the function returns -1.
///
/// The builtins it uses (names in ir/op.h, namespace builtin), all CallKind::kIntrinsic:
///   kiln.arg_value(args, i)         args[i] read as the call's dtype: int64, float64 or handle
///   kiln.arg_type_code(codes, i)    type_codes[i], int32
///   kiln.array_get(arr, field[, d]) a KilnArray field, see ArrayField (i and d are IntImms)
///   kiln.arg_check(cond, prefix, got_kind, got)
///       only as an Evaluate statement: if cond (bool) is false, calls
///       kiln_set_arg_error(prefix, got_kind, got) (c_runtime_api.h; got_kind a KilnGotKind,
///       got an int64 evaluated only on failure) and returns -1 from the function.
#pragma once

#include "kiln/tir/function.h"

namespace kiln::tir {

/// The fields kiln.array_get reads, with the dtype of the call.
enum class ArrayField : int32_t {
  kData = 0,           ///< handle: data + byte_offset
  kNDim = 1,           ///< int32
  kDTypeWord = 2,      ///< int32: the KilnDataType word, code | bits << 8 | lanes << 16
  kDeviceType = 3,     ///< int32
  kDeviceId = 4,       ///< int32
  kShape = 5,          ///< int64: shape[d]
  kStrides = 6,        ///< int64: strides[d] (only when strides is not NULL)
  kStridesIsNull = 7,  ///< bool: strides == NULL
  kByteOffset = 8,     ///< int64
};

/// The KilnDataType word of `t` (what ArrayField::kDTypeWord reads for an array of type t).
inline int64_t dtype_word(DataType t) {
  return static_cast<int64_t>(t.code()) | (static_cast<int64_t>(t.bits()) << 8) |
         (static_cast<int64_t>(t.lanes()) << 16);
}

/// Wraps `f` in the packed calling convention with argument checks (see the file comment).
/// Returns `f` unchanged when its attr "packed_api" is already "1". Throws kiln::Error for a
/// parameter it cannot pass (a handle without a buffer, a non-constant non-Var shape).
PrimFunc make_packed_api(PrimFunc f);

/// Lets packed functions whose compute bodies differ only in integer constants share one body
/// (src/tir/transform/share_compute.cc says which constants may vary: operands of + - * min
/// max and comparisons, bounds of serial and parallel loops; never divisors, ramp strides,
/// allocation sizes, call arguments or unrolled loops' bounds). For each family of two or more
/// such functions, the constants that differ become variables bound by LetStmts just outside
/// the compute scope, every member's compute scope takes the first member's name, and every
/// member gets attr "shared_compute" = that name; the LLVM code generator then emits the body
/// once (in the part of the module that holds the family) and calls it with each member's
/// values. Each member keeps its own argument checks. Functions without a compute scope and
/// families of one are returned unchanged; the result is in the order of `funcs`.
std::vector<PrimFunc> share_compute_bodies(const std::vector<PrimFunc>& funcs);

}  // namespace kiln::tir
