// LLVM IR generation for the target-level builtins that tensor intrinsics lower to
// (te/tensor_intrin.h): reinterpret (a bitcast between types of equal width), the integer bit
// operations (shifts, and / or / xor, popcount as llvm.ctpop), calls named "llvm.*" (an LLVM
// intrinsic looked up by name, e.g. llvm.x86.avx512.vpdpbusd.512; arguments and result are
// bitcast to the intrinsic's declared types when only the element type differs, so one Kiln
// call works across LLVM versions that changed e.g. bf16 operands from i32 to bfloat vectors),
// and kiln.amx_tile_dot, the tileloadd / tdp* / tilestored sequence of one AMX tile product
// (LLVM's tile-configuration passes insert ldtilecfg).
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include "codegen_llvm.h"
#include "kiln/ir/op.h"

namespace kiln::codegen {

namespace {

/// The value converted to type `t` by a bitcast when their widths match (the operand
/// conventions of an intrinsic), else unchanged.
llvm::Value* bitcast_to(llvm::IRBuilder<>& b, llvm::Value* v, llvm::Type* t) {
  if (v->getType() == t) return v;
  if (v->getType()->getPrimitiveSizeInBits() != t->getPrimitiveSizeInBits()) return v;
  return b.CreateBitCast(v, t);
}

}  // namespace

llvm::Value* CodeGenLLVM::emit_as(const Expr& e, llvm::Type* want) {
  Expr x = e;
  while (const Call* c = x.as<Call>()) {
    if (c->name != builtin::kReinterpret || c->args.size() != 1) break;
    x = c->args[0];
  }
  const uint64_t bits = want->getPrimitiveSizeInBits();
  if (x.dtype().bits() * x.dtype().lanes() == static_cast<int>(bits)) {
    if (const Load* l = x.as<Load>(); l && is_one(l->predicate)) {
      const Ramp* r = l->index.as<Ramp>();
      if (l->index.dtype().is_scalar() || (r && is_one(r->stride))) {
        llvm::Value* ptr =
            element_ptr(l->buffer_var, l->dtype.element_of(), r ? r->base : l->index);
        return b_->CreateAlignedLoad(want, ptr, llvm::Align(std::max(1, l->dtype.bytes())));
      }
    }
  }
  if (const Broadcast* bc = x.as<Broadcast>()) {
    // Splat the value converted first: no bitcast after the shuffle.
    auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(want);
    const int n = bc->lanes;
    if (vt && n > 0 && vt->getNumElements() % n == 0) {
      const unsigned per = vt->getNumElements() / n;
      llvm::Type* part =
          per == 1 ? vt->getElementType() : llvm::FixedVectorType::get(vt->getElementType(), per);
      llvm::Value* v = emit_as(bc->value, part);
      if (v->getType() == part) {
        if (per == 1) return b_->CreateVectorSplat(n, v);
        llvm::SmallVector<int, 64> mask;
        for (int i = 0; i < n; ++i)
          for (unsigned j = 0; j < per; ++j) mask.push_back(static_cast<int>(j));
        return b_->CreateShuffleVector(v, mask);
      }
    }
  }
  return bitcast_to(*b_, emit_expr(e), want);
}

llvm::Value* CodeGenLLVM::emit_target_intrin(const Call* op) {
  const std::string& name = op->name;
  auto arg = [&](size_t i) {
    if (i >= op->args.size()) fail(name + ": missing argument " + std::to_string(i));
    return emit_expr(op->args[i]);
  };
  // The second operand of a binary bit operation, splat and resized to the first's type.
  auto second = [&](llvm::Value* a, llvm::Value* v) {
    llvm::Type* at = a->getType();
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(at); vt && !v->getType()->isVectorTy())
      v = b_->CreateVectorSplat(vt->getNumElements(), v);
    return b_->CreateIntCast(v, at, op->args[1].dtype().is_int());
  };
  if (name == builtin::kReinterpret) {
    llvm::Type* t = ty(op->dtype);
    // reinterpret(contiguous Load) is one load of the new type: no vector of the old element
    // type in the IR (LLVM 16's VectorCombine recurses forever on bitcasts of bfloat vectors).
    if (const Load* l = op->args.at(0).as<Load>(); l && is_one(l->predicate)) {
      const Ramp* r = l->index.as<Ramp>();
      if (l->index.dtype().is_scalar() || (r && is_one(r->stride))) {
        if (l->dtype.bits() * l->dtype.lanes() != op->dtype.bits() * op->dtype.lanes())
          fail("reinterpret from " + l->dtype.str() + " to " + op->dtype.str() +
               ": the widths differ");
        llvm::Value* ptr =
            element_ptr(l->buffer_var, l->dtype.element_of(), r ? r->base : l->index);
        return b_->CreateAlignedLoad(t, ptr, llvm::Align(std::max(1, l->dtype.bytes())));
      }
    }
    llvm::Value* v = arg(0);
    if (v->getType()->getPrimitiveSizeInBits() != t->getPrimitiveSizeInBits())
      fail("reinterpret from " + op->args[0].dtype().str() + " to " + op->dtype.str() +
           ": the widths differ");
    return b_->CreateBitCast(v, t);
  }
  if (name == builtin::kShiftRight || name == builtin::kShiftLeft || name == builtin::kBitwiseAnd ||
      name == builtin::kBitwiseOr || name == builtin::kBitwiseXor) {
    if (!op->dtype.is_int() && !op->dtype.is_uint()) fail(name + " on type " + op->dtype.str());
    llvm::Value* a = arg(0);
    llvm::Value* b = second(a, arg(1));
    if (name == builtin::kShiftRight)
      return op->dtype.is_int() ? b_->CreateAShr(a, b) : b_->CreateLShr(a, b);
    if (name == builtin::kShiftLeft) return b_->CreateShl(a, b);
    if (name == builtin::kBitwiseAnd) return b_->CreateAnd(a, b);
    if (name == builtin::kBitwiseOr) return b_->CreateOr(a, b);
    return b_->CreateXor(a, b);
  }
  if (name == builtin::kVectorSlice) {
    llvm::Value* v = arg(0);
    auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType());
    auto begin = op->args.size() == 2 ? as_const_int(op->args[1]) : std::nullopt;
    const int n = op->dtype.lanes();
    if (!vt || !begin || *begin < 0 || *begin + n > static_cast<int64_t>(vt->getNumElements()))
      fail("vector_slice: needs a vector and a constant start inside it");
    if (n == 1) return b_->CreateExtractElement(v, b_->getInt64(static_cast<uint64_t>(*begin)));
    std::vector<int> mask;
    for (int i = 0; i < n; ++i) mask.push_back(static_cast<int>(*begin) + i);
    return b_->CreateShuffleVector(v, mask);
  }
  if (name == builtin::kPopcount) {
    if (!op->dtype.is_int() && !op->dtype.is_uint()) fail("popcount on type " + op->dtype.str());
    llvm::Value* a = arg(0);
    return b_->CreateIntrinsic(llvm::Intrinsic::ctpop, {a->getType()}, {a});
  }
  if (name.rfind(builtin::kLLVMIntrinPrefix, 0) == 0) {
    llvm::Intrinsic::ID id = llvm::Function::lookupIntrinsicID(name);
    if (id == llvm::Intrinsic::not_intrinsic) fail("'" + name + "' is not an LLVM intrinsic");
    llvm::Type* ret = ty(op->dtype);
    llvm::Function* fn = nullptr;
    if (llvm::Intrinsic::isOverloaded(id)) {
      // Overloaded on the result and, for some (AArch64's sdot: <4 x i32> from <16 x i8>
      // operands), on operand types too: match the call's own types against the intrinsic's
      // signature; when they do not match, overload on the result alone.
      std::vector<llvm::Type*> params;
      for (const Expr& a : op->args) params.push_back(ty(a.dtype()));
      llvm::SmallVector<llvm::Intrinsic::IITDescriptor, 8> table;
      llvm::Intrinsic::getIntrinsicInfoTableEntries(id, table);
      llvm::ArrayRef<llvm::Intrinsic::IITDescriptor> ref = table;
      llvm::SmallVector<llvm::Type*, 4> overloads;
      bool match = llvm::Intrinsic::matchIntrinsicSignature(
                       llvm::FunctionType::get(ret, params, false), ref, overloads) ==
                   llvm::Intrinsic::MatchIntrinsicTypes_Match;
      fn = llvm::Intrinsic::getDeclaration(
          module_.get(), id,
          match ? llvm::ArrayRef<llvm::Type*>(overloads) : llvm::ArrayRef<llvm::Type*>(ret));
    } else {
      fn = llvm::Intrinsic::getDeclaration(module_.get(), id);
    }
    llvm::FunctionType* ft = fn->getFunctionType();
    if (ft->getNumParams() != op->args.size())
      fail("LLVM intrinsic '" + name + "' takes " + std::to_string(ft->getNumParams()) +
           " arguments, called with " + std::to_string(op->args.size()));
    std::vector<llvm::Value*> args;
    for (size_t i = 0; i < op->args.size(); ++i) {
      llvm::Value* v = emit_as(op->args[i], ft->getParamType(static_cast<unsigned>(i)));
      if (v->getType() != ft->getParamType(static_cast<unsigned>(i)))
        fail("LLVM intrinsic '" + name + "': argument " + std::to_string(i) + " of type " +
             op->args[i].dtype().str() + " does not fit the intrinsic's operand");
      args.push_back(v);
    }
    llvm::Value* r = b_->CreateCall(fn, args);
    if (op->dtype.is_void()) return b_->getInt32(0);
    r = bitcast_to(*b_, r, ret);
    if (r->getType() != ret)
      fail("LLVM intrinsic '" + name + "' does not return " + op->dtype.str());
    return r;
  }
  if (name == builtin::kAmxTileDot) {
    const StringImm* kind = op->args.empty() ? nullptr : op->args[0].as<StringImm>();
    if (!kind || op->args.size() != 10)
      fail("kiln.amx_tile_dot needs (op, M, NB, KB, c, ldc, a, lda, b, ldb)");
    llvm::Intrinsic::ID dot;
    if (kind->value == "tdpbusd") {
      dot = llvm::Intrinsic::x86_tdpbusd_internal;
    } else if (kind->value == "tdpbf16ps") {
      dot = llvm::Intrinsic::x86_tdpbf16ps_internal;
    } else {
      fail("kiln.amx_tile_dot: unknown tile product '" + kind->value + "'");
    }
    auto i16 = [&](size_t i) { return b_->CreateIntCast(arg(i), b_->getInt16Ty(), false); };
    auto i64 = [&](size_t i) { return b_->CreateIntCast(arg(i), b_->getInt64Ty(), false); };
    llvm::Value *m = i16(1), *nb = i16(2), *kb = i16(3);
    llvm::Value* krows = b_->CreateUDiv(kb, b_->getInt16(4));
    auto load = [&](llvm::Value* rows, llvm::Value* cols, size_t p, size_t ld) {
      return b_->CreateIntrinsic(llvm::Intrinsic::x86_tileloadd64_internal, {},
                                 {rows, cols, arg(p), i64(ld)});
    };
    llvm::Value* c = load(m, nb, 4, 5);
    llvm::Value* a = load(m, kb, 6, 7);
    llvm::Value* bt = load(krows, nb, 8, 9);
    llvm::Value* r = b_->CreateIntrinsic(dot, {}, {m, nb, kb, c, a, bt});
    b_->CreateIntrinsic(llvm::Intrinsic::x86_tilestored64_internal, {}, {m, nb, arg(4), i64(5), r});
    return b_->getInt32(0);
  }
  return nullptr;
}

}  // namespace kiln::codegen
