/// \file tensor_intrin.h
/// \brief Tensor intrinsics (TVM paper section 4.3): a hardware instruction or micro-kernel
/// declared by what it computes — a small te compute — and how it is called — a lowering rule
/// over buffer views of its operands. Stage::tensorize(axis, intrin) maps the loop nest under
/// `axis` onto it.
///
/// Declaring one (the paper's gemm8x8 shape, here AVX-512 VNNI's 16 × 4 dot product):
///
///   auto A = te::placeholder({4}, DataType::UInt(8), "A");
///   auto B = te::placeholder({16, 4}, DataType::Int(8), "B");
///   auto k = te::reduce_axis({0, 4}, "k");
///   auto C = te::compute({16}, [&](Var i) {
///     return te::sum(cast(i32, A(k)) * cast(i32, B(i, k)), {k}); }, "C");
///   TensorIntrin vnni = decl_tensor_intrin("vnni", C,
///       [](const std::vector<IntrinBuffer>& in, const std::vector<IntrinBuffer>& out) {
///         IntrinLowering l;
///         l.reset = out[0].vstore({0}, broadcast(Expr(0), 16));
///         l.update = out[0].vstore({0}, call_llvm_intrin(..., out[0].vload({0}, int32x16),
///                                                     ...));
///         l.body = ...;  // the same with a zero accumulator
///         return l;
///       });
///
/// Each operand is seen through an IntrinBuffer: a data pointer, an element offset and one
/// stride per dimension, all symbolic variables that tensorize binds to the region of the real
/// tensor the loop nest touches (data = that tensor's storage, elem_offset = the flat offset of
/// the region's first element, strides = the tensor's strides). A stride declared as a
/// constant is a requirement instead: tensorize fails when the tensor's stride differs (the
/// default declares the innermost stride 1, the others free).
///
/// The lowering has up to three forms: `body` computes the outputs from scratch (the whole
/// reduction inside the tensorized loops); `reset` sets the outputs to the reduction's
/// identity and `update` accumulates one more slice of the reduction into them. When the
/// reduction is split across the tensorized axis — some reduction loops outside it — the
/// loops get `reset` where the ordinary reduction's init would go and `update` inside the
/// outer reduction loops; without a reset, `body` runs on the first outer reduction iteration
/// and `update` on the others.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/te/tensor.h"

namespace kiln::te {

/// One operand of a tensor intrinsic as its lowering sees it.
struct IntrinBuffer {
  Tensor tensor;  ///< the placeholder (input) or output of the declared compute
  Var data;       ///< handle to the storage of the bound tensor
  Var elem_offset;
  /// Per dimension: a Var (bound to the tensor's stride) or a constant (required stride).
  std::vector<Expr> strides;

  DataType dtype() const { return tensor->dtype; }
  const std::vector<Expr>& shape() const { return tensor->shape; }
  /// elem_offset + Σ indices[d] · strides[d].
  Expr offset_of(const std::vector<Expr>& indices) const;
  /// Loads `t.lanes()` consecutive elements of type t.element_of() (which must be the buffer's
  /// element type) starting at `begin` along the innermost dimension.
  Expr vload(const std::vector<Expr>& begin, DataType t) const;
  /// Stores `value` (lanes consecutive elements) starting at `begin`.
  Stmt vstore(const std::vector<Expr>& begin, Expr value) const;
  /// The address of element `begin` (a handle), for calls to micro-kernels.
  Expr access_ptr(const std::vector<Expr>& begin = {}) const;
};

/// The lowering forms of an intrinsic (see the file comment); body is required.
struct IntrinLowering {
  Stmt body;
  Stmt reset;
  Stmt update;
};

using FIntrinLower = std::function<IntrinLowering(const std::vector<IntrinBuffer>& inputs,
                                                  const std::vector<IntrinBuffer>& outputs)>;

struct TensorIntrinNode {
  std::string name;
  Operation op;                       ///< the declared compute
  std::vector<Tensor> inputs;         ///< its placeholders, in first-use order
  std::vector<IntrinBuffer> buffers;  ///< views of inputs, then of outputs
  IntrinLowering lowering;
};

/// A declared tensor intrinsic (shared, immutable after declaration).
using TensorIntrin = std::shared_ptr<const TensorIntrinNode>;

/// Declares a tensor intrinsic computing `out` (a compute over placeholders only), lowered by
/// `lower`. `strides` overrides the default strides of a tensor's view (one Expr per dimension:
/// a constant requires that stride, an undefined Expr leaves it free). Throws a user error
/// naming `name` when `out` reads anything but placeholders or `lower` gives no body.
TensorIntrin decl_tensor_intrin(const std::string& name, const Tensor& out,
                                const FIntrinLower& lower,
                                const std::map<const TensorNode*, std::vector<Expr>>& strides = {});

/// The AttrStmt key by which tensorize binds an IntrinBuffer to a region of a tensor (node: the
/// tensor; value: tuple(description, data, elem_offset, rank, strides..., steps..., region
/// mins...), steps: the tensor elements per view element along each view dimension);
/// storage_flatten resolves it.
constexpr const char* kBufferBindScope = "buffer_bind_scope";

// Builders for the builtins of ir/op.h that lowerings use.

/// The bits of `v` as type `t` (equal total width).
Expr reinterpret(DataType t, Expr v);
Expr shift_right(Expr a, Expr b);
Expr shift_left(Expr a, Expr b);
Expr bitwise_and(Expr a, Expr b);
Expr bitwise_or(Expr a, Expr b);
Expr bitwise_xor(Expr a, Expr b);
Expr popcount(Expr a);
/// A pure call of the LLVM intrinsic `name` ("llvm.x86.…") returning `t`.
Expr call_llvm_intrin(DataType t, const std::string& name, std::vector<Expr> args);

}  // namespace kiln::te
