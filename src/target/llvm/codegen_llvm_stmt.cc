// LLVM IR generation for PrimFuncs, part two (codegen_llvm.cc has the file's design): calls
// (if_then_else as branches and a phi, math intrinsics and the f32 tanh approximation, the
// runtime's builtins, argument checks) and statements (serial loops with a phi, parallel loops
// outlined into closures run by kiln_parallel_for, allocations on the stack or from the
// workspace, asserts and error returns).
#include <llvm/ADT/StringExtras.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>

#include <limits>
#include <numeric>

#include "../target_info.h"
#include "codegen_llvm.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/tir/packed_api.h"
#include "llvm_common.h"

namespace kiln::codegen {

// --- calls

llvm::Value* CodeGenLLVM::visit(const Call* op) { return emit_call(op); }

llvm::Value* CodeGenLLVM::emit_if_then_else(const Expr& cond, const Expr& t, const Expr& f,
                                            DataType type) {
  if (!cond.dtype().is_scalar()) {
    // Per-lane choice: both sides are evaluated (documented limitation for vector guards).
    return b_->CreateSelect(emit_expr(cond), emit_expr(t), emit_expr(f));
  }
  llvm::Value* c = emit_expr(cond);
  llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "ite_then", cur_.fn);
  llvm::BasicBlock* else_bb = llvm::BasicBlock::Create(*ctx_, "ite_else", cur_.fn);
  llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "ite_end", cur_.fn);
  b_->CreateCondBr(c, then_bb, else_bb);
  b_->SetInsertPoint(then_bb);
  llvm::Value* tv = emit_expr(t);
  llvm::BasicBlock* then_end = b_->GetInsertBlock();
  b_->CreateBr(end_bb);
  b_->SetInsertPoint(else_bb);
  llvm::Value* fv = emit_expr(f);
  llvm::BasicBlock* else_end = b_->GetInsertBlock();
  b_->CreateBr(end_bb);
  b_->SetInsertPoint(end_bb);
  llvm::PHINode* phi = b_->CreatePHI(ty(type), 2);
  phi->addIncoming(tv, then_end);
  phi->addIncoming(fv, else_end);
  return phi;
}

llvm::Value* CodeGenLLVM::emit_tanh_f32(llvm::Value* x, DataType t) {
  // Eigen's generic_fast_tanh_float: x clamped to +-7.90531 (where tanh rounds to +-1 in
  // float32), then an odd degree-13 over an even degree-6 polynomial; |error| < 4e-7 against
  // tanhf. Plain arithmetic, so a vector stays a vector: libm's tanhf was one call per lane
  // (DCGAN's output layer: 0.2-0.3 ms of tanh alone). NaN passes through.
  llvm::Type* vt = ty(t);
  auto c = [&](double v) { return llvm::ConstantFP::get(vt, v); };
  llvm::Value* lim = c(7.90531110763549805);
  llvm::Value* neg_lim = c(-7.90531110763549805);
  llvm::Value* xc = b_->CreateSelect(b_->CreateFCmpOGT(x, lim), lim, x);
  xc = b_->CreateSelect(b_->CreateFCmpOLT(xc, neg_lim), neg_lim, xc);
  llvm::Value* x2 = b_->CreateFMul(xc, xc);
  llvm::Value* p =
      b_->CreateFAdd(b_->CreateFMul(x2, c(-2.76076847742355e-16)), c(2.00018790482477e-13));
  for (double a : {-8.60467152213735e-11, 5.12229709037114e-08, 1.48572235717979e-05,
                   6.37261928875436e-04, 4.89352455891786e-03})
    p = b_->CreateFAdd(b_->CreateFMul(x2, p), c(a));
  llvm::Value* q =
      b_->CreateFAdd(b_->CreateFMul(x2, c(1.19825839466702e-06)), c(1.18534705686654e-04));
  q = b_->CreateFAdd(b_->CreateFMul(x2, q), c(2.26843463243900e-03));
  q = b_->CreateFAdd(b_->CreateFMul(x2, q), c(4.89352518554385e-03));
  llvm::Value* r = b_->CreateFDiv(b_->CreateFMul(xc, p), q);
  // Past the clamp the float32 tanh is exactly +-1 (the polynomial is 1 ulp off there).
  r = b_->CreateSelect(b_->CreateFCmpOGE(x, lim), c(1.0), r);
  r = b_->CreateSelect(b_->CreateFCmpOLE(x, neg_lim), c(-1.0), r);
  return b_->CreateSelect(b_->CreateFCmpUNO(x, x), x, r);
}

/// ln(FLT_MAX) rounded up to a float: exp of anything above it overflows float32.
constexpr double kLnFltMax = 88.72283935546875;

llvm::Value* CodeGenLLVM::pow2_f32(llvm::Value* e, DataType t) {
  // 2^e for int32 lanes e in [-126, 127] built in the exponent bits (e = 128 gives +inf).
  llvm::Type* it = ty(DataType::Int(32, t.lanes()));
  auto ci = [&](int64_t v) { return llvm::ConstantInt::get(it, static_cast<uint64_t>(v), true); };
  return b_->CreateBitCast(b_->CreateShl(b_->CreateAdd(e, ci(127)), ci(23)), ty(t));
}

std::pair<llvm::Value*, llvm::Value*> CodeGenLLVM::exp_reduced(llvm::Value* xc, DataType t) {
  // Cephes' expf as Eigen vectorizes it: x = m·ln2 + r with |r| <= ln2/2 (ln2 in two parts),
  // exp(r) by a degree-7 polynomial. Returns exp(r) and m as int32 lanes.
  llvm::Type* vt = ty(t);
  auto c = [&](double v) { return llvm::ConstantFP::get(vt, v); };
  llvm::Value* m = b_->CreateUnaryIntrinsic(
      llvm::Intrinsic::floor, b_->CreateFAdd(b_->CreateFMul(xc, c(1.44269504088896341)), c(0.5)));
  llvm::Value* r = b_->CreateFSub(xc, b_->CreateFMul(m, c(0.693359375)));
  r = b_->CreateFSub(r, b_->CreateFMul(m, c(-2.12194440e-4)));
  llvm::Value* y = c(1.9875691500e-4);
  for (double a :
       {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
    y = b_->CreateFAdd(b_->CreateFMul(y, r), c(a));
  y = b_->CreateFAdd(b_->CreateFAdd(b_->CreateFMul(y, b_->CreateFMul(r, r)), r), c(1.0));
  return {y, b_->CreateFPToSI(m, ty(DataType::Int(32, t.lanes())))};
}

llvm::Value* CodeGenLLVM::emit_exp_f32(llvm::Value* x, DataType t) {
  // exp_reduced's exp(r), times 2^m built in the exponent bits (in two factors, so
  // that results down to the denormals stay exact). Within 8e-8 relatively of exp in the
  // normal range; +inf above ln(FLT_MAX), 0 below -104, NaN through. llvm.exp on a vector was
  // one expf call per lane (softmax, sigmoid, SiLU, GELU's tanh form).
  llvm::Type* vt = ty(t);
  llvm::Type* it = ty(DataType::Int(32, t.lanes()));
  auto c = [&](double v) { return llvm::ConstantFP::get(vt, v); };
  auto ci = [&](int64_t v) { return llvm::ConstantInt::get(it, static_cast<uint64_t>(v), true); };
  llvm::Value* hi = c(kLnFltMax);
  llvm::Value* xc = b_->CreateSelect(b_->CreateFCmpOGT(x, hi), hi, x);
  xc = b_->CreateSelect(b_->CreateFCmpOLT(xc, c(-104.0)), c(-104.0), xc);
  auto [y, mi] = exp_reduced(xc, t);
  llvm::Value* m1 = b_->CreateAShr(mi, ci(1));
  llvm::Value* m2 = b_->CreateSub(mi, m1);
  llvm::Value* res = b_->CreateFMul(b_->CreateFMul(y, pow2_f32(m1, t)), pow2_f32(m2, t));
  res = b_->CreateSelect(b_->CreateFCmpOGT(x, hi), c(std::numeric_limits<double>::infinity()), res);
  return b_->CreateSelect(b_->CreateFCmpUNO(x, x), x, res);
}

llvm::Value* CodeGenLLVM::emit_sigmoid_f32(llvm::Value* x, DataType t) {
  // 1 / (1 + e) with e = exp(-x) as in emit_exp_f32, cheaper where a sigmoid allows: -x is
  // clamped to [-87, ln(FLT_MAX)], so 2^m is one float (one multiply; m = 128 builds +inf,
  // where the sigmoid is about 4e-39 or less and becomes 0) and there are no infinity or
  // denormal cases to select (below the clamp the sigmoid rounds to 1). A NaN passes through
  // the clamp's selects and the arithmetic. SiLU's epilogue (x * sigmoid(x)) after a 1x1
  // convolution cost as much as the convolution on AVX2; this drops 6 of exp's operations
  // per vector, 3 of them blends. (A reciprocal estimate with a Newton step instead of the
  // division measured no faster on Zen 3 and cost ~2 ulp: ONNX's test_gru_seq_length then
  // missed its tolerance.)
  auto c = [&](double v) { return llvm::ConstantFP::get(ty(t), v); };
  llvm::Value* nx = b_->CreateFNeg(x);
  llvm::Value* hi = c(kLnFltMax);
  llvm::Value* xc = b_->CreateSelect(b_->CreateFCmpOGT(nx, hi), hi, nx);
  xc = b_->CreateSelect(b_->CreateFCmpOLT(xc, c(-87.0)), c(-87.0), xc);
  auto [y, mi] = exp_reduced(xc, t);
  llvm::Value* one = c(1.0);
  return b_->CreateFDiv(one, b_->CreateFAdd(b_->CreateFMul(y, pow2_f32(mi, t)), one));
}

llvm::Value* CodeGenLLVM::emit_erf_f32(llvm::Value* x, DataType t) {
  // Eigen's generic_fast_erf_float: x clamped to +-4 (where erf rounds to +-1 in float32), an
  // odd degree-13 over an even degree-8 polynomial; |error| < 5e-7 against erf. erff was one
  // libm call per lane (GELU). NaN passes through.
  llvm::Type* vt = ty(t);
  auto c = [&](double v) { return llvm::ConstantFP::get(vt, v); };
  llvm::Value* xc = b_->CreateSelect(b_->CreateFCmpOGT(x, c(4.0)), c(4.0), x);
  xc = b_->CreateSelect(b_->CreateFCmpOLT(xc, c(-4.0)), c(-4.0), xc);
  llvm::Value* x2 = b_->CreateFMul(xc, xc);
  llvm::Value* p = c(-2.72614225801306e-10);
  for (double a : {2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
                   -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02})
    p = b_->CreateFAdd(b_->CreateFMul(p, x2), c(a));
  llvm::Value* q = c(-1.45660718464996e-05);
  for (double a :
       {-2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03, -1.42647390514189e-02})
    q = b_->CreateFAdd(b_->CreateFMul(q, x2), c(a));
  return b_->CreateFDiv(b_->CreateFMul(xc, p), q);
}

llvm::Value* CodeGenLLVM::emit_math(const Call* op) {
  static const std::map<std::string, llvm::Intrinsic::ID> intrinsics = {
      {"exp", llvm::Intrinsic::exp},          {"exp2", llvm::Intrinsic::exp2},
      {"log", llvm::Intrinsic::log},          {"log2", llvm::Intrinsic::log2},
      {"log10", llvm::Intrinsic::log10},      {"sqrt", llvm::Intrinsic::sqrt},
      {"fabs", llvm::Intrinsic::fabs},        {"floor", llvm::Intrinsic::floor},
      {"ceil", llvm::Intrinsic::ceil},        {"round", llvm::Intrinsic::round},
      {"trunc", llvm::Intrinsic::trunc},      {"nearbyint", llvm::Intrinsic::nearbyint},
      {"pow", llvm::Intrinsic::pow},          {"fma", llvm::Intrinsic::fma},
      {"sin", llvm::Intrinsic::sin},          {"cos", llvm::Intrinsic::cos},
      {"copysign", llvm::Intrinsic::copysign}};
  static const std::unordered_set<std::string> libm = {"tanh",  "erf",   "tan",   "atan",
                                                       "asin",  "acos",  "sinh",  "cosh",
                                                       "atan2", "log1p", "expm1", "cbrt"};
  DataType t = op->dtype;
  const bool f32 = t.is_float() && t.bits() == 32;
  if (op->name == "sigmoid" && !f32) {
    // Other float types: 1 / (1 + exp(-x)), exp as this target computes it (libdevice, libm).
    if (!t.is_float()) fail("math intrinsic 'sigmoid' on non-float type " + t.str());
    Expr one = make_one(t);
    return emit_expr(one / (one + exp(-op->args.at(0))));
  }
  std::vector<llvm::Value*> args;
  for (const Expr& a : op->args) args.push_back(emit_expr(a));
  if (op->name == "exp" && f32) return emit_exp_f32(args[0], t);
  if (op->name == "sigmoid" && f32) return emit_sigmoid_f32(args[0], t);
  auto it = intrinsics.find(op->name);
  if (it != intrinsics.end()) {
    if (!t.is_float()) fail("math intrinsic '" + op->name + "' on non-float type " + t.str());
    return b_->CreateIntrinsic(it->second, {ty(t)}, args);
  }
  if (!libm.count(op->name)) return nullptr;
  if (op->name == "tanh" && f32) return emit_tanh_f32(args[0], t);
  if (op->name == "erf" && f32) return emit_erf_f32(args[0], t);
  if (!t.is_float() || (t.bits() != 32 && t.bits() != 64)) {
    fail("math function '" + op->name + "' on type " + t.str());
  }
  return emit_lane_calls(op->name + (t.bits() == 32 ? "f" : ""), t, args);
}

llvm::Value* CodeGenLLVM::emit_lane_calls(const std::string& fname, DataType t,
                                          const std::vector<llvm::Value*>& args) {
  llvm::Type* st = ty(t.element_of());
  std::vector<llvm::Type*> ptys(args.size(), st);
  llvm::Function* fn = runtime_fn(fname, st, ptys);
  fn->setDoesNotAccessMemory();
  fn->setDoesNotThrow();
  if (t.is_scalar()) return b_->CreateCall(fn, args);
  // Scalarize: one call per lane.
  llvm::Value* out = llvm::PoisonValue::get(ty(t));
  for (int i = 0; i < t.lanes(); ++i) {
    std::vector<llvm::Value*> lane;
    for (llvm::Value* a : args) lane.push_back(b_->CreateExtractElement(a, i));
    out = b_->CreateInsertElement(out, b_->CreateCall(fn, lane), i);
  }
  return out;
}

llvm::Value* CodeGenLLVM::emit_builtin(const Call* op) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(*ctx_);
  auto const_arg = [&](size_t i) -> int64_t {
    if (i >= op->args.size()) fail(op->name + ": missing argument " + std::to_string(i));
    auto v = as_const_int(op->args[i]);
    if (!v) fail(op->name + ": argument " + std::to_string(i) + " must be a constant");
    return *v;
  };
  if (op->name == builtin::kAddressOf) {
    // address_of(Load): the address of the loaded element, for passing buffers to C.
    const Load* l = op->args.size() == 1 ? op->args[0].as<Load>() : nullptr;
    if (!l || !l->dtype.is_scalar()) fail("address_of needs one scalar Load argument");
    return element_ptr(l->buffer_var, l->dtype, l->index);
  }
  if (op->name == builtin::kPrefetch) {
    // prefetch(address_of(Load), locality): llvm.prefetch (read, data cache). The address is a
    // plain GEP, not inbounds: a prefetch may point past its buffer (the next block of a
    // stream), where it does nothing.
    const Call* a = op->args.size() == 2 ? op->args[0].as<Call>() : nullptr;
    const Load* l = a && a->name == builtin::kAddressOf && a->args.size() == 1
                        ? a->args[0].as<Load>()
                        : nullptr;
    if (!l || !l->dtype.is_scalar()) fail("prefetch needs address_of(scalar Load) and a locality");
    const int64_t locality = const_arg(1);
    if (locality < 0 || locality > 3) fail("prefetch: locality must be 0..3");
    llvm::Value* p = b_->CreateGEP(ty(l->dtype), emit_expr(l->buffer_var), emit_index64(l->index));
    b_->CreateIntrinsic(
        llvm::Intrinsic::prefetch, {ptr},
        {p, b_->getInt32(0), b_->getInt32(static_cast<uint32_t>(locality)), b_->getInt32(1)});
    return b_->getInt32(0);
  }
  if (op->name == builtin::kArgValue) {
    llvm::Value* args = emit_expr(op->args[0]);
    llvm::Value* p = b_->CreateInBoundsGEP(b_->getInt64Ty(), args, b_->getInt64(const_arg(1)));
    return b_->CreateAlignedLoad(ty(op->dtype), p, llvm::Align(8));
  }
  if (op->name == builtin::kArgTypeCode) {
    llvm::Value* codes = emit_expr(op->args[0]);
    llvm::Value* p = b_->CreateInBoundsGEP(b_->getInt32Ty(), codes, b_->getInt64(const_arg(1)));
    return b_->CreateAlignedLoad(b_->getInt32Ty(), p, llvm::Align(4));
  }
  if (op->name == builtin::kArrayGet) {
    llvm::Value* arr = emit_expr(op->args[0]);
    auto field = static_cast<tir::ArrayField>(const_arg(1));
    auto load_field = [&](unsigned idx, llvm::Type* t) {
      return b_->CreateLoad(t, b_->CreateStructGEP(array_type_, arr, idx));
    };
    switch (field) {
      case tir::ArrayField::kData: {
        llvm::Value* data = load_field(0, ptr);
        llvm::Value* off = load_field(7, b_->getInt64Ty());
        return b_->CreateInBoundsGEP(b_->getInt8Ty(), data, off);
      }
      case tir::ArrayField::kDeviceType:
        return load_field(1, b_->getInt32Ty());
      case tir::ArrayField::kDeviceId:
        return load_field(2, b_->getInt32Ty());
      case tir::ArrayField::kNDim:
        return load_field(3, b_->getInt32Ty());
      case tir::ArrayField::kDTypeWord:
        return load_field(4, b_->getInt32Ty());
      case tir::ArrayField::kShape:
      case tir::ArrayField::kStrides: {
        llvm::Value* p = load_field(field == tir::ArrayField::kShape ? 5 : 6, ptr);
        llvm::Value* q = b_->CreateInBoundsGEP(b_->getInt64Ty(), p, b_->getInt64(const_arg(2)));
        return b_->CreateLoad(b_->getInt64Ty(), q);
      }
      case tir::ArrayField::kStridesIsNull:
        return b_->CreateIsNull(load_field(6, ptr));
      case tir::ArrayField::kByteOffset:
        return load_field(7, b_->getInt64Ty());
    }
    fail("kiln.array_get: unknown field " + std::to_string(const_arg(1)));
  }
  if (op->name == builtin::kSetError) {
    llvm::Function* fn = runtime_fn("kiln_set_last_error", b_->getVoidTy(), {ptr});
    b_->CreateCall(fn, {emit_expr(op->args.at(0))});
    return b_->getInt32(0);
  }
  if (op->name == builtin::kArgCheck) fail("kiln.arg_check is only valid as a statement");
  if (op->name == builtin::kArrayCheck) fail("kiln.array_check is only valid as a statement");
  return nullptr;
}

llvm::Value* CodeGenLLVM::emit_call(const Call* op) {
  if (op->call_kind == CallKind::kExtern || op->call_kind == CallKind::kPureExtern) {
    std::vector<llvm::Value*> args;
    std::vector<llvm::Type*> ptys;
    for (const Expr& a : op->args) {
      args.push_back(emit_expr(a));
      ptys.push_back(args.back()->getType());
    }
    llvm::Type* ret = ty(op->dtype);
    llvm::Function* fn = module_->getFunction(op->name);
    if (fn == nullptr) {
      fn = runtime_fn(op->name, ret, ptys);
    } else if (fn->getFunctionType() != llvm::FunctionType::get(ret, ptys, false)) {
      fail("extern function '" + op->name + "' is called with two different signatures");
    }
    llvm::Value* r = b_->CreateCall(fn, args);
    return op->dtype.is_void() ? b_->getInt32(0) : r;
  }
  if (op->name == builtin::kLikely) {
    llvm::Value* c = emit_expr(op->args.at(0));
    if (!op->dtype.is_scalar()) return c;
    return b_->CreateIntrinsic(llvm::Intrinsic::expect, {c->getType()}, {c, b_->getTrue()});
  }
  if (op->name == builtin::kIfThenElse) {
    return emit_if_then_else(op->args.at(0), op->args.at(1), op->args.at(2), op->dtype);
  }
  if (llvm::Value* v = emit_target_intrin(op)) return v;
  if (llvm::Value* v = emit_builtin(op)) return v;
  if (llvm::Value* v = emit_math(op)) return v;
  fail("unknown intrinsic '" + op->name + "' (" + call_kind_name(op->call_kind) + ")");
}

// ---------------------------------------------------------------------------------------------
// Statements

void CodeGenLLVM::emit_arg_check(const Call* op) {
  if (op->args.size() != 4 || !op->args[1].as<StringImm>()) {
    fail("kiln.arg_check needs (cond, prefix string, kind, got)");
  }
  llvm::Value* cond = emit_expr(op->args[0]);
  llvm::BasicBlock* fail_bb = llvm::BasicBlock::Create(*ctx_, "arg_check_fail", cur_.fn);
  llvm::BasicBlock* ok_bb = llvm::BasicBlock::Create(*ctx_, "arg_check_ok", cur_.fn);
  llvm::MDBuilder md(*ctx_);
  b_->CreateCondBr(cond, ok_bb, fail_bb, md.createBranchWeights(1 << 20, 1));
  b_->SetInsertPoint(fail_bb);
  llvm::Value* got = cast_value(op->args[3].dtype(), DataType::Int(64), emit_expr(op->args[3]));
  llvm::Type* ptr = llvm::PointerType::getUnqual(*ctx_);
  llvm::Function* fn =
      runtime_fn("kiln_set_arg_error", b_->getVoidTy(), {ptr, b_->getInt32Ty(), b_->getInt64Ty()});
  llvm::Value* kind = cast_value(op->args[2].dtype(), DataType::Int(32), emit_expr(op->args[2]));
  b_->CreateCall(fn, {emit_expr(op->args[1]), kind, got});
  emit_error_return(b_->getInt32(-1));
  b_->CreateBr(ok_bb);
  b_->SetInsertPoint(ok_bb);
}

void CodeGenLLVM::emit_array_check(const Call* op) {
  const size_t n = op->args.size();
  auto ndim = n >= 5 ? as_const_int(op->args[2]) : std::nullopt;
  if (!ndim || n != 5 + 2 * static_cast<size_t>(*ndim) || !op->args[1].as<StringImm>()) {
    fail(
        "kiln.array_check needs (arr, prefix, ndim, dtype word, alignment, ndim shape and ndim "
        "stride constants)");
  }
  std::vector<llvm::Constant*> expect;
  for (size_t k = 5; k < n; ++k) {
    auto v = as_const_int(op->args[k]);
    if (!v) fail("kiln.array_check: shape and strides must be constants");
    expect.push_back(b_->getInt64(*v));
  }
  auto* aty = llvm::ArrayType::get(b_->getInt64Ty(), expect.size());
  auto* table = new llvm::GlobalVariable(*module_, aty, true, llvm::GlobalValue::PrivateLinkage,
                                         llvm::ConstantArray::get(aty, expect), "array_check");
  table->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  llvm::Type* ptr = llvm::PointerType::getUnqual(*ctx_);
  std::vector<llvm::Value*> args{
      emit_expr(op->args[0]),
      emit_expr(op->args[1]),
      cast_value(op->args[2].dtype(), DataType::Int(32), emit_expr(op->args[2])),
      cast_value(op->args[3].dtype(), DataType::Int(32), emit_expr(op->args[3])),
      cast_value(op->args[4].dtype(), DataType::Int(64), emit_expr(op->args[4])),
      table};
  llvm::Value* r;
  if (device_type_ == kKilnCPU) {
    llvm::Function* fn =
        runtime_fn("kiln_check_array", b_->getInt32Ty(),
                   {ptr, ptr, b_->getInt32Ty(), b_->getInt32Ty(), b_->getInt64Ty(), ptr});
    r = b_->CreateCall(fn, args);
  } else {
    llvm::Function* fn = runtime_fn(
        "kiln_check_array_on", b_->getInt32Ty(),
        {ptr, ptr, b_->getInt32Ty(), b_->getInt32Ty(), b_->getInt64Ty(), ptr, b_->getInt32Ty()});
    args.push_back(b_->getInt32(device_type_));
    r = b_->CreateCall(fn, args);
  }
  llvm::BasicBlock* fail_bb = llvm::BasicBlock::Create(*ctx_, "array_check_fail", cur_.fn);
  llvm::BasicBlock* ok_bb = llvm::BasicBlock::Create(*ctx_, "array_check_ok", cur_.fn);
  llvm::MDBuilder md(*ctx_);
  b_->CreateCondBr(b_->CreateICmpEQ(r, b_->getInt32(0)), ok_bb, fail_bb,
                   md.createBranchWeights(1 << 20, 1));
  b_->SetInsertPoint(fail_bb);
  emit_error_return(b_->getInt32(-1));
  b_->CreateBr(ok_bb);
  b_->SetInsertPoint(ok_bb);
}

void CodeGenLLVM::emit_device_launch(const Call* op) {
  const size_t n = op->args.size();
  const StringImm* kernel = n >= 8 ? op->args[0].as<StringImm>() : nullptr;
  if (!kernel) {
    fail("kiln.device_launch needs (kernel name, 6 launch extents, shared bytes, args...)");
  }
  llvm::Type* ptr = llvm::PointerType::getUnqual(*ctx_);
  // The argument table: a pointer to each argument's value, as cuLaunchKernel takes them.
  const size_t nargs = n - 8;
  llvm::IRBuilderBase::InsertPoint ip = b_->saveIP();
  b_->SetInsertPoint(cur_.entry, cur_.entry->getFirstInsertionPt());
  auto* table_ty = llvm::ArrayType::get(ptr, std::max<size_t>(1, nargs));
  llvm::AllocaInst* table = b_->CreateAlloca(table_ty, nullptr, "launch_args");
  std::vector<llvm::AllocaInst*> slots;
  for (size_t i = 0; i < nargs; ++i)
    slots.push_back(b_->CreateAlloca(ty(op->args[8 + i].dtype()), nullptr, "launch_arg"));
  b_->restoreIP(ip);
  for (size_t i = 0; i < nargs; ++i) {
    b_->CreateStore(emit_expr(op->args[8 + i]), slots[i]);
    b_->CreateStore(slots[i], b_->CreateConstInBoundsGEP2_32(table_ty, table, 0, i));
  }
  // The launch extents, then each argument's size (0: a device buffer), as constant tables.
  llvm::Type* i64 = b_->getInt64Ty();
  llvm::Type* i32 = b_->getInt32Ty();
  auto* dims_ty = llvm::ArrayType::get(i64, 6);
  ip = b_->saveIP();
  b_->SetInsertPoint(cur_.entry, cur_.entry->getFirstInsertionPt());
  llvm::AllocaInst* dims = b_->CreateAlloca(dims_ty, nullptr, "launch_dims");
  b_->restoreIP(ip);
  for (size_t i = 1; i <= 6; ++i) {
    b_->CreateStore(cast_value(op->args[i].dtype(), DataType::Int(64), emit_expr(op->args[i])),
                    b_->CreateConstInBoundsGEP2_32(dims_ty, dims, 0, i - 1));
  }
  std::vector<llvm::Constant*> sizes;
  for (size_t i = 0; i < nargs; ++i) {
    DataType t = op->args[8 + i].dtype();
    sizes.push_back(b_->getInt32(t.is_handle() ? 0 : std::max(1, t.bytes())));
  }
  if (sizes.empty()) sizes.push_back(b_->getInt32(0));
  auto* sizes_ty = llvm::ArrayType::get(i32, sizes.size());
  auto* sizes_gv = new llvm::GlobalVariable(
      *module_, sizes_ty, true, llvm::GlobalValue::PrivateLinkage,
      llvm::ConstantArray::get(sizes_ty, sizes), kernel->value + "_arg_sizes");
  std::vector<llvm::Value*> args{
      b_->getInt32(device_type_),
      module_->getOrInsertGlobal("__kiln_device_module", ptr),
      module_->getOrInsertGlobal("__kiln_device_code", b_->getInt8Ty()),
      string_ptr(kernel->value),
      dims,
      cast_value(op->args[7].dtype(), DataType::Int(32), emit_expr(op->args[7])),
      table,
      sizes_gv,
      b_->getInt32(static_cast<int32_t>(nargs))};
  llvm::Function* fn =
      runtime_fn("kiln_device_launch", i32, {i32, ptr, ptr, ptr, ptr, i32, ptr, ptr, i32});
  emit_propagate(b_->CreateCall(fn, args));
}

void CodeGenLLVM::visit(const Evaluate* op) {
  if (const Call* c = op->value.as<Call>(); c && c->name == builtin::kArgCheck) {
    emit_arg_check(c);
    return;
  }
  if (const Call* c = op->value.as<Call>(); c && c->name == builtin::kArrayCheck) {
    emit_array_check(c);
    return;
  }
  if (const Call* c = op->value.as<Call>(); c && c->name == builtin::kDeviceLaunch) {
    emit_device_launch(c);
    return;
  }
  if (is_const(op->value)) return;
  emit_expr(op->value);
}

void CodeGenLLVM::visit(const LetStmt* op) {
  llvm::Value* v = emit_expr(op->value);
  if (op->var.dtype().is_handle()) {
    if (const Call* c = op->value.as<Call>();
        c && c->name == builtin::kArrayGet && is_const_int(c->args.at(1), 0)) {
      aligned_.insert(op->var.get());  // checked by the packed API
    }
  }
  if (llvm::isa<llvm::Instruction>(v) && !v->hasName()) v->setName(op->var.name());
  vars_[op->var.get()] = v;
  index_block_ = nullptr;  // cached indices may read an earlier binding of the var
  visit_stmt(op->body);
  index_block_ = nullptr;
}

void CodeGenLLVM::visit(const AttrStmt* op) {
  if (op->key == attr::kComputeScope) {
    std::string name = func_name_ + "_compute_";
    if (const StringImm* s = op->value.as<StringImm>()) name = s->value;
    std::vector<Var> params = free_vars(op->body);
    llvm::Function* fn = nullptr;
    if (name == shared_compute_) {
      // A body shared by a family of kernels (tir::share_compute_bodies): emitted by the first
      // member, called by the others with their own buffers and constants. Kept out of line,
      // or LLVM would inline it back into every member.
      if (auto it = shared_bodies_.find(name); it != shared_bodies_.end()) {
        fn = it->second;
        KILN_ICHECK(fn->arg_size() == params.size())
            << "shared compute body " << name << ": " << fn->arg_size() << " parameters, "
            << func_name_ << " passes " << params.size();
        for (size_t i = 0; i < params.size(); ++i) {
          KILN_ICHECK(fn->getArg(i)->getType() == ty(params[i].dtype()))
              << "shared compute body " << name << ": parameter " << i << " of " << func_name_
              << " has another type";
        }
        fn->addFnAttr(llvm::Attribute::NoInline);
      }
    }
    if (!fn)
      fn = emit_outlined(
          name, params, [&] { visit_stmt(op->body); }, false);
    if (name == shared_compute_) shared_bodies_.emplace(name, fn);
    std::vector<llvm::Value*> args;
    for (const Var& p : params) args.push_back(vars_.at(p.get()));
    emit_propagate(b_->CreateCall(fn, args));
    return;
  }
  if (op->key == attr::kPragmaNoUnroll && !op->node.as<IterVarNode>()) {
    ++no_unroll_;
    visit_stmt(op->body);
    --no_unroll_;
    return;
  }
  visit_stmt(op->body);
}

void CodeGenLLVM::visit(const AssertStmt* op) {
  llvm::Value* cond = emit_expr(op->condition);
  llvm::BasicBlock* fail_bb = llvm::BasicBlock::Create(*ctx_, "assert_fail", cur_.fn);
  llvm::BasicBlock* ok_bb = llvm::BasicBlock::Create(*ctx_, "assert_ok", cur_.fn);
  llvm::MDBuilder md(*ctx_);
  b_->CreateCondBr(cond, ok_bb, fail_bb, md.createBranchWeights(1 << 20, 1));
  b_->SetInsertPoint(fail_bb);
  llvm::Function* fn =
      runtime_fn("kiln_set_last_error", b_->getVoidTy(), {llvm::PointerType::getUnqual(*ctx_)});
  b_->CreateCall(fn, {emit_expr(op->message)});
  emit_error_return(b_->getInt32(-1));
  b_->CreateBr(ok_bb);
  b_->SetInsertPoint(ok_bb);
  visit_stmt(op->body);
}

void CodeGenLLVM::visit(const IfThenElse* op) {
  llvm::Value* c = emit_expr(op->condition);
  llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "if_then", cur_.fn);
  llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "if_end", cur_.fn);
  llvm::BasicBlock* else_bb =
      op->else_case.defined() ? llvm::BasicBlock::Create(*ctx_, "if_else", cur_.fn) : end_bb;
  b_->CreateCondBr(c, then_bb, else_bb);
  b_->SetInsertPoint(then_bb);
  visit_stmt(op->then_case);
  b_->CreateBr(end_bb);
  if (op->else_case.defined()) {
    b_->SetInsertPoint(else_bb);
    visit_stmt(op->else_case);
    b_->CreateBr(end_bb);
  }
  b_->SetInsertPoint(end_bb);
}

void CodeGenLLVM::visit(const SeqStmt* op) {
  for (const Stmt& s : op->seq) visit_stmt(s);
}

void CodeGenLLVM::emit_loop(const Var& loop_var, llvm::Value* begin, llvm::Value* end, ForKind kind,
                            const std::function<void()>& body, bool rolled) {
  // A 32-bit loop counts in 64 bits: addresses use the 64-bit counter directly (emit_index64)
  // and other uses its truncation, so LLVM's IndVarSimplify has no sign extensions to widen
  // (widening them, per loop and per use, was the largest part of the optimization time of
  // kernels with deep loop nests).
  const bool widen = begin->getType()->isIntegerTy(32);
  if (widen) {
    begin = b_->CreateSExt(begin, b_->getInt64Ty());
    end = b_->CreateSExt(end, b_->getInt64Ty());
  }
  llvm::BasicBlock* pre = b_->GetInsertBlock();
  llvm::BasicBlock* head = llvm::BasicBlock::Create(*ctx_, "for_head", cur_.fn);
  llvm::BasicBlock* body_bb = llvm::BasicBlock::Create(*ctx_, "for_body", cur_.fn);
  llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "for_end", cur_.fn);
  b_->CreateBr(head);
  b_->SetInsertPoint(head);
  llvm::PHINode* i = b_->CreatePHI(begin->getType(), 2, loop_var.name());
  i->addIncoming(begin, pre);
  b_->CreateCondBr(b_->CreateICmpSLT(i, end), body_bb, end_bb);
  b_->SetInsertPoint(body_bb);
  if (widen) {
    vars_[loop_var.get()] = b_->CreateTrunc(i, b_->getInt32Ty(), loop_var.name() + ".i32");
    wide_[loop_var.get()] = i;
  } else {
    vars_[loop_var.get()] = i;
  }
  body();
  wide_.erase(loop_var.get());
  llvm::Value* next = b_->CreateAdd(i, llvm::ConstantInt::get(i->getType(), 1), "", false, true);
  llvm::BranchInst* back = b_->CreateBr(head);
  i->addIncoming(next, b_->GetInsertBlock());
  if (kind == ForKind::kUnrolled || (kind == ForKind::kSerial && (no_unroll_ > 0 || rolled))) {
    const char* what =
        kind == ForKind::kUnrolled ? "llvm.loop.unroll.full" : "llvm.loop.unroll.disable";
    llvm::MDNode* unroll = llvm::MDNode::get(*ctx_, {llvm::MDString::get(*ctx_, what)});
    llvm::MDNode* loop = llvm::MDNode::getDistinct(*ctx_, {nullptr, unroll});
    loop->replaceOperandWith(0, loop);
    back->setMetadata(llvm::LLVMContext::MD_loop, loop);
  }
  vars_.erase(loop_var.get());
  b_->SetInsertPoint(end_bb);
}

void CodeGenLLVM::visit(const For* op) {
  if (op->for_kind == ForKind::kParallel) {
    emit_parallel_for(op);
    return;
  }
  if (op->for_kind == ForKind::kThreadBinding) {
    fail("loop '" + op->loop_var.name() + "' is bound to GPU thread '" + op->thread_tag +
         "'; the LLVM CPU code generator cannot run it");
  }
  llvm::Value* begin = emit_expr(op->min);
  llvm::Value* end = b_->CreateAdd(begin, emit_expr(op->extent), "", false, true);
  // pragma(iv, "no_unroll") sits directly inside iv's loop: this loop stays rolled.
  const auto* pragma = op->body.as<AttrStmt>();
  const bool rolled = op->for_kind == ForKind::kSerial && pragma &&
                      pragma->key == attr::kPragmaNoUnroll && pragma->node.as<IterVarNode>();
  emit_loop(
      op->loop_var, begin, end, op->for_kind, [&] { visit_stmt(op->body); }, rolled);
}

void CodeGenLLVM::emit_parallel_for(const For* op) {
  // Captured: the free variables of the body plus the loop's minimum.
  Var min_var(op->loop_var.name() + "_min", op->loop_var.dtype());
  vars_[min_var.get()] = emit_expr(op->min);
  llvm::Value* extent = cast_value(op->extent.dtype(), DataType::Int(64), emit_expr(op->extent));
  std::vector<Var> captured = free_vars(op->body);
  captured.push_back(min_var);

  // Inner function: (begin, end, captured...) with noalias pointers, runs the loop.
  Var begin_var("begin", DataType::Int(64)), end_var("end", DataType::Int(64));
  std::vector<Var> inner_params{begin_var, end_var};
  inner_params.insert(inner_params.end(), captured.begin(), captured.end());
  std::string base = func_name_ + "_parallel_" + op->loop_var.name();
  llvm::Function* inner = emit_outlined(
      base + "_body", inner_params,
      [&] {
        llvm::Value* b = vars_.at(begin_var.get());
        llvm::Value* e = vars_.at(end_var.get());
        Var k("k", DataType::Int(64));
        emit_loop(k, b, e, ForKind::kSerial, [&] {
          llvm::Value* kv = cast_value(DataType::Int(64), op->loop_var.dtype(), vars_.at(k.get()));
          vars_[op->loop_var.get()] =
              b_->CreateAdd(vars_.at(min_var.get()), kv, op->loop_var.name(), false, true);
          visit_stmt(op->body);
          vars_.erase(op->loop_var.get());
        });
      },
      true);

  // Closure struct and the lambda kiln_parallel_for calls.
  std::vector<llvm::Type*> fields;
  for (const Var& v : captured) fields.push_back(ty(v.dtype()));
  llvm::StructType* st = llvm::StructType::create(*ctx_, fields, base + "_closure");
  llvm::Type* ptr = llvm::PointerType::getUnqual(*ctx_);
  auto* lambda_ty =
      llvm::FunctionType::get(b_->getInt32Ty(), {b_->getInt64Ty(), b_->getInt64Ty(), ptr}, false);
  llvm::Function* lambda = llvm::Function::Create(lambda_ty, llvm::Function::InternalLinkage,
                                                  unique_name(base), module_.get());
  {
    llvm::IRBuilderBase::InsertPoint ip = b_->saveIP();
    b_->SetInsertPoint(llvm::BasicBlock::Create(*ctx_, "entry", lambda));
    std::vector<llvm::Value*> args{lambda->getArg(0), lambda->getArg(1)};
    for (size_t i = 0; i < captured.size(); ++i) {
      args.push_back(b_->CreateLoad(fields[i], b_->CreateStructGEP(st, lambda->getArg(2), i)));
    }
    b_->CreateRet(b_->CreateCall(inner, args));
    b_->restoreIP(ip);
  }

  // Caller: fill the closure on the stack, run the loop, propagate errors.
  llvm::Value* closure;
  {
    llvm::IRBuilderBase::InsertPoint ip = b_->saveIP();
    b_->SetInsertPoint(cur_.entry, cur_.entry->getFirstInsertionPt());
    closure = b_->CreateAlloca(st, nullptr, base + "_closure");
    b_->restoreIP(ip);
  }
  for (size_t i = 0; i < captured.size(); ++i) {
    b_->CreateStore(vars_.at(captured[i].get()), b_->CreateStructGEP(st, closure, i));
  }
  llvm::Function* pfor =
      runtime_fn("kiln_parallel_for", b_->getInt32Ty(), {b_->getInt64Ty(), ptr, ptr});
  emit_propagate(b_->CreateCall(pfor, {extent, lambda, closure}));
  vars_.erase(min_var.get());
}

void CodeGenLLVM::visit(const Allocate* op) {
  int64_t n = op->constant_size();
  int64_t elem_bytes = std::max(1, op->dtype.bytes());
  llvm::Value* p;
  // In the host code of a GPU function every buffer lives on the device.
  const bool device = device_type_ != kKilnCPU;
  bool heap = device || n < 0 || n * elem_bytes > kMaxStackAllocBytes;
  if (!heap) {
    llvm::IRBuilderBase::InsertPoint ip = b_->saveIP();
    b_->SetInsertPoint(cur_.entry, cur_.entry->getFirstInsertionPt());
    llvm::AllocaInst* a = b_->CreateAlloca(
        llvm::ArrayType::get(b_->getInt8Ty(), std::max<int64_t>(1, n * elem_bytes)), nullptr,
        op->buffer_var.name());
    a->setAlignment(llvm::Align(kAllocAlign));
    b_->restoreIP(ip);
    p = a;
  } else {
    llvm::Value* bytes = b_->getInt64(elem_bytes);
    for (const Expr& e : op->extents) {
      bytes = b_->CreateMul(bytes, cast_value(e.dtype(), DataType::Int(64), emit_expr(e)));
    }
    llvm::Type* ptr = llvm::PointerType::getUnqual(*ctx_);
    p = device ? b_->CreateCall(runtime_fn("kiln_device_workspace_alloc", ptr,
                                           {b_->getInt32Ty(), b_->getInt64Ty()}),
                                {b_->getInt32(device_type_), bytes}, op->buffer_var.name())
               : b_->CreateCall(runtime_fn("kiln_workspace_alloc", ptr, {b_->getInt64Ty()}),
                                {bytes}, op->buffer_var.name());
    llvm::BasicBlock* fail_bb = llvm::BasicBlock::Create(*ctx_, "alloc_fail", cur_.fn);
    llvm::BasicBlock* ok_bb = llvm::BasicBlock::Create(*ctx_, "alloc_ok", cur_.fn);
    llvm::MDBuilder md(*ctx_);
    b_->CreateCondBr(b_->CreateIsNull(p), fail_bb, ok_bb, md.createBranchWeights(1, 1 << 20));
    b_->SetInsertPoint(fail_bb);
    emit_error_return(b_->getInt32(-1));  // kiln_workspace_alloc set the message
    b_->CreateBr(ok_bb);
    b_->SetInsertPoint(ok_bb);
    cur_.heap_allocs.push_back(p);
  }
  vars_[op->buffer_var.get()] = p;
  aligned_.insert(op->buffer_var.get());
  visit_stmt(op->body);
  vars_.erase(op->buffer_var.get());
  if (heap) {
    cur_.heap_allocs.pop_back();
    emit_workspace_free(p);
  }
}

void CodeGenLLVM::visit(const ProducerStore* op) {
  fail("ProducerStore to '" + op->producer->producer_name() +
       "' must be flattened before code generation");
}
void CodeGenLLVM::visit(const ProducerRealize* op) {
  fail("ProducerRealize of '" + op->producer->producer_name() +
       "' must be flattened before code generation");
}

}  // namespace kiln::codegen
