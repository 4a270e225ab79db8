// AArch64 tensor intrinsics (topi/arm_intrin.h): the NEON int8 dot products sdot / udot, each a
// small te compute (what the instruction computes) lowered to LLVM's AArch64 intrinsic
// (llvm.aarch64.neon.sdot.v4i32.v16i8, see ir/op.h's "llvm." calls). The instruction's lane i
// adds the products of bytes 4i..4i+3 of its two 16-byte operands: A's 4 bytes are read as one
// int32 and broadcast to the 4 lanes, B's 16 bytes are loaded as they lie (row i, lane i).
// Intrinsics are declared once per process (function-local statics).
#include "kiln/topi/arm_intrin.h"

#include "kiln/te/tensor.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT

namespace {

const DataType kI32 = DataType::Int(32);

Expr ci(int64_t v) { return make_const(DataType::Int(32), v); }

te::TensorIntrin make_dot(bool is_signed) {
  const DataType in = is_signed ? DataType::Int(8) : DataType::UInt(8);
  te::Tensor A = te::placeholder({ci(4)}, in, "A");
  te::Tensor B = te::placeholder({ci(4), ci(4)}, in, "B");
  auto k = te::reduce_axis({0, ci(4)}, "k");
  te::Tensor C = te::compute(
      {ci(4)}, [&](Var i) { return te::sum(cast(kI32, A(k)) * cast(kI32, B(i, k)), {k}); }, "C");
  const std::string name = is_signed ? "sdot" : "udot";
  const std::string fn = "llvm.aarch64.neon." + name + ".v4i32.v16i8";
  const DataType vi = DataType::Int(32, 4), bytes = DataType(in.code(), 8, 16);
  return te::decl_tensor_intrin(
      "arm." + name + "_4x4", C,
      [=](const std::vector<te::IntrinBuffer>& ins, const std::vector<te::IntrinBuffer>& out) {
        Expr a = te::reinterpret(
            bytes, broadcast(te::reinterpret(kI32, ins[0].vload({ci(0)}, in.with_lanes(4))), 4));
        Expr b = ins[1].vload({ci(0), ci(0)}, bytes);
        auto dp = [&](Expr acc) { return te::call_llvm_intrin(vi, fn, {std::move(acc), a, b}); };
        te::IntrinLowering l;
        l.reset = out[0].vstore({ci(0)}, broadcast(ci(0), 4));
        l.body = out[0].vstore({ci(0)}, dp(broadcast(ci(0), 4)));
        l.update = out[0].vstore({ci(0)}, dp(out[0].vload({ci(0)}, vi)));
        return l;
      },
      {{B.get(), {ci(4), ci(1)}}});
}

}  // namespace

te::TensorIntrin dot_s8s8_arm() {
  static const te::TensorIntrin intrin = make_dot(true);
  return intrin;
}

te::TensorIntrin dot_u8u8_arm() {
  static const te::TensorIntrin intrin = make_dot(false);
  return intrin;
}

bool has_dot_arm(const Target& target) {
  return target.kind == "llvm" && target.has_key("arm") && target.has_feature("dotprod");
}

}  // namespace kiln::topi
