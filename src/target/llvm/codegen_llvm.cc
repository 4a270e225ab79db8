// LLVM IR generation for PrimFuncs. Expressions map one to one onto IR values (vectors for
// lanes > 1): Ramp is base + stride * <0..n-1>, Broadcast a splat, loads and stores with a
// stride-1 Ramp index one vector memory access (aligned from a small modular analysis of the
// Ramp base when the buffer is known 64-byte aligned), other vector indices gathers and
// scatters, predicates masked intrinsics. Integer floor division and modulo take a shift/mask
// fast path for positive power-of-two constant divisors and otherwise correct the truncating
// result by the signs. Statements: serial loops are header/body/latch blocks with a phi
// (unrolled ones carry llvm.loop.unroll.full); a parallel loop's body is outlined into an
// internal function taking its free variables as noalias parameters, called from a closure
// `int32 (int64 begin, int64 end, void* closure)` that unpacks a struct of captured values and
// is run by kiln_parallel_for; the packed API's compute_scope is outlined the same way so that
// buffer pointers are noalias. Allocations are 64-aligned entry-block allocas when constant
// and at most 64 KiB, otherwise kiln_workspace_alloc blocks freed on every exit path (each
// error return frees the live blocks of its function). Failing checks set the last error and
// return -1; callers of outlined functions propagate non-zero codes. finish() adds the
// `__kiln_func_names` list and runs the O3 pipeline of the new pass manager for the target.
// This file has the target machine, functions and expressions; codegen_llvm_stmt.cc calls and
// statements; codegen_llvm_memory.cc loads and stores.
#include "codegen_llvm.h"

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

#include <algorithm>

#include "../target_info.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/tir/packed_api.h"
#include "llvm_common.h"

namespace kiln::codegen {

namespace {

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

int log2_of(int64_t v) {
  int k = 0;
  while ((int64_t{1} << k) < v) ++k;
  return k;
}

/// Finds variables bound in the enclosing function.
class FreeVarCollector : public IRVisitor {
 public:
  explicit FreeVarCollector(const std::unordered_map<const Variable*, llvm::Value*>& bound)
      : bound_(bound) {}
  std::vector<Var> vars;

 protected:
  using IRVisitor::visit;
  void visit(const Variable* op) override {
    if (bound_.count(op) && seen_.insert(op).second) vars.push_back(Var(op));
  }

 private:
  const std::unordered_map<const Variable*, llvm::Value*>& bound_;
  std::unordered_set<const Variable*> seen_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Target machine

std::pair<std::string, std::string> cpu_and_features(const Target& target) {
  // NVPTX: the GPU architecture, and PTX ISA 7.8 (LLVM 16's newest; it covers sm_90).
  if (target.kind == "cuda") return {target.attr("arch", "sm_75"), "+ptx78"};
  std::string cpu = target.mcpu;
  std::vector<std::string> feats;
  if (cpu == "native") {
    cpu = target_info::host_cpu_name();
    feats = target_info::host_cpu_features();
  } else if (cpu.empty()) {
    cpu = "generic";
  }
  feats.insert(feats.end(), target.mattrs.begin(), target.mattrs.end());
  std::string fs;
  for (const std::string& f : feats) fs += (fs.empty() ? "" : ",") + f;
  return {cpu, fs};
}

std::unique_ptr<llvm::TargetMachine> create_target_machine(const Target& target) {
  initialize_llvm();
  std::string triple = target.triple();
  std::string err;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, err);
  KILN_USER_CHECK(t != nullptr) << "target '" << target.str()
                                << "': LLVM has no target for triple '" << triple << "': " << err;
  auto [cpu, fs] = cpu_and_features(target);
  llvm::TargetOptions opt;
  // Contract a*b + c into one FMA where the target has it (as TVM and clang -ffp-contract=fast
  // do): without it every multiply-accumulate costs two instructions, halving GEMM speed.
  opt.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  static const llvm::CodeGenOpt::Level kLevels[] = {llvm::CodeGenOpt::None, llvm::CodeGenOpt::Less,
                                                    llvm::CodeGenOpt::Default,
                                                    llvm::CodeGenOpt::Aggressive};
  std::unique_ptr<llvm::TargetMachine> tm(
      t->createTargetMachine(triple, cpu, fs, opt, llvm::Reloc::PIC_, std::nullopt,
                             kLevels[std::clamp<int64_t>(target.attr_int("opt", 3), 0, 3)]));
  KILN_USER_CHECK(tm != nullptr) << "target '" << target.str()
                                 << "': LLVM cannot create a target machine";
  return tm;
}

// ---------------------------------------------------------------------------------------------
// Set-up

CodeGenLLVM::CodeGenLLVM(llvm::LLVMContext* ctx, llvm::TargetMachine* tm, const Target& target,
                         const std::string& module_name)
    : ctx_(ctx), tm_(tm), target_(target) {
  module_ = std::make_unique<llvm::Module>(module_name, *ctx_);
  module_->setTargetTriple(tm_->getTargetTriple().str());
  module_->setDataLayout(tm_->createDataLayout());
  b_ = std::make_unique<llvm::IRBuilder<>>(*ctx_);
  llvm::Type* ptr = llvm::PointerType::getUnqual(*ctx_);
  llvm::Type* i32 = b_->getInt32Ty();
  // KilnArray: data, device_type, device_id, ndim, dtype word, shape, strides, byte_offset.
  array_type_ = llvm::StructType::create(
      *ctx_, {ptr, i32, i32, i32, i32, ptr, ptr, b_->getInt64Ty()}, "KilnArray");
}

void CodeGenLLVM::fail(const std::string& what) {
  KILN_ERROR << "codegen llvm: function '" << func_name_ << "': " << what;
}

std::string CodeGenLLVM::unique_name(const std::string& base) {
  int n = name_counts_[base]++;
  return n == 0 ? base : base + "_" + std::to_string(n);
}

llvm::Type* CodeGenLLVM::ty(DataType t) {
  if (t.is_void()) return b_->getVoidTy();
  llvm::Type* e = nullptr;
  if (t.is_handle()) {
    e = llvm::PointerType::getUnqual(*ctx_);
  } else if (t.is_bool()) {
    e = b_->getInt1Ty();
  } else if (t.is_bfloat16()) {
    e = b_->getBFloatTy();
  } else if (t.is_float()) {
    switch (t.bits()) {
      case 16:
        e = b_->getHalfTy();
        break;
      case 32:
        e = b_->getFloatTy();
        break;
      case 64:
        e = b_->getDoubleTy();
        break;
      default:
        fail("unsupported float type " + t.str());
    }
  } else {
    e = b_->getIntNTy(t.bits());
  }
  return t.lanes() > 1 ? llvm::FixedVectorType::get(e, t.lanes()) : e;
}

llvm::Value* CodeGenLLVM::const_int(DataType t, int64_t v) {
  llvm::Type* et = ty(t.element_of());
  llvm::Constant* c = llvm::ConstantInt::getSigned(et, v);
  if (t.lanes() > 1)
    return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(t.lanes()), c);
  return c;
}

llvm::Function* CodeGenLLVM::runtime_fn(const std::string& name, llvm::Type* ret,
                                        std::vector<llvm::Type*> args) {
  if (llvm::Function* f = module_->getFunction(name)) return f;
  auto* ft = llvm::FunctionType::get(ret, args, false);
  return llvm::Function::Create(ft, llvm::Function::ExternalLinkage, name, module_.get());
}

llvm::Value* CodeGenLLVM::string_ptr(const std::string& s) {
  auto it = strings_.find(s);
  if (it != strings_.end()) return it->second;
  llvm::Constant* init = llvm::ConstantDataArray::getString(*ctx_, s, true);
  auto* gv = new llvm::GlobalVariable(*module_, init->getType(), true,
                                      llvm::GlobalValue::PrivateLinkage, init, ".str");
  gv->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  gv->setAlignment(llvm::Align(1));
  strings_[s] = gv;
  return gv;
}

// ---------------------------------------------------------------------------------------------
// Functions

void CodeGenLLVM::add_function(const tir::PrimFunc& f) {
  func_name_ = f->name;
  shared_compute_ = f.attr("shared_compute");
  KILN_USER_CHECK(!f->name.empty()) << "codegen llvm: a function has no name";
  llvm::Function* fn = declare_function(f, b_->getInt32Ty());
  fn->setVisibility(llvm::GlobalValue::DefaultVisibility);
  fn->setDSOLocal(false);
  bool packed = f.attr("packed_api") == "1";
  device_type_ = kKilnCPU;
  if (std::string d = f.attr("device_type"); !d.empty()) device_type_ = std::stoi(d);
  vars_.clear();
  for (size_t i = 0; i < f->params.size(); ++i) {
    llvm::Argument* a = fn->getArg(i);
    a->setName(f->params[i].name());
    vars_[f->params[i].get()] = a;
    if (!packed && f->params[i].dtype().is_handle()) {
      a->addAttr(llvm::Attribute::NoAlias);
      if (f->buffer_map.count(f->params[i])) {
        // A buffer parameter of a non-packed function: its data var is the param itself.
        const Buffer& buf = f->buffer_map.at(f->params[i]);
        vars_[buf->data.get()] = a;
      }
    }
  }
  begin_body(f, fn);
  visit_stmt(f->body);
  b_->CreateRet(b_->getInt32(0));
  names_.push_back(f->name);
  vars_.clear();
}

llvm::Function* CodeGenLLVM::declare_function(const tir::PrimFunc& f, llvm::Type* ret) {
  KILN_USER_CHECK(module_->getFunction(f->name) == nullptr)
      << "codegen llvm: two functions are named '" << f->name << "'";
  std::vector<llvm::Type*> ptys;
  for (const Var& p : f->params) ptys.push_back(ty(p.dtype()));
  auto* ft = llvm::FunctionType::get(ret, ptys, false);
  return llvm::Function::Create(ft, llvm::Function::ExternalLinkage, f->name, module_.get());
}

void CodeGenLLVM::begin_body(const tir::PrimFunc& f, llvm::Function* fn) {
  cur_ = FuncState{fn, llvm::BasicBlock::Create(*ctx_, "entry", fn), {}};
  b_->SetInsertPoint(cur_.entry);
  if (f.attr("fast_math") == "1") {
    b_->setFastMathFlags(llvm::FastMathFlags::getFast());
  } else {
    b_->clearFastMathFlags();
  }
}

void CodeGenLLVM::add_device_code(const std::string& device_code) {
  llvm::Constant* init = llvm::ConstantDataArray::getString(*ctx_, device_code, true);
  auto* code =
      new llvm::GlobalVariable(*module_, init->getType(), true, llvm::GlobalValue::ExternalLinkage,
                               init, "__kiln_device_code");
  code->setAlignment(llvm::Align(1));
  llvm::Type* ptr = llvm::PointerType::getUnqual(*ctx_);
  new llvm::GlobalVariable(*module_, ptr, false, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantPointerNull::get(llvm::PointerType::getUnqual(*ctx_)),
                           "__kiln_device_module");
}

llvm::Function* CodeGenLLVM::emit_outlined(const std::string& name, const std::vector<Var>& params,
                                           const std::function<void()>& body, bool always_inline) {
  std::vector<llvm::Type*> ptys;
  for (const Var& p : params) ptys.push_back(ty(p.dtype()));
  auto* ft = llvm::FunctionType::get(b_->getInt32Ty(), ptys, false);
  llvm::Function* fn =
      llvm::Function::Create(ft, llvm::Function::InternalLinkage, unique_name(name), module_.get());
  if (always_inline) fn->addFnAttr(llvm::Attribute::AlwaysInline);
  // Save the caller's state.
  FuncState saved = cur_;
  auto saved_vars = vars_;
  auto saved_wide = std::move(wide_);  // the caller's loop counters are not this function's
  llvm::IRBuilderBase::InsertPoint ip = b_->saveIP();
  vars_.clear();
  wide_.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    llvm::Argument* a = fn->getArg(i);
    a->setName(params[i].name());
    if (params[i].dtype().is_handle()) a->addAttr(llvm::Attribute::NoAlias);
    vars_[params[i].get()] = a;
  }
  cur_ = FuncState{fn, llvm::BasicBlock::Create(*ctx_, "entry", fn), {}};
  b_->SetInsertPoint(cur_.entry);
  body();
  b_->CreateRet(b_->getInt32(0));
  cur_ = saved;
  vars_ = std::move(saved_vars);
  wide_ = std::move(saved_wide);
  b_->restoreIP(ip);
  return fn;
}

std::vector<Var> CodeGenLLVM::free_vars(const Stmt& s) {
  FreeVarCollector c(vars_);
  c.visit_stmt(s);
  return c.vars;
}

void CodeGenLLVM::emit_workspace_free(llvm::Value* p) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(*ctx_);
  if (device_type_ != kKilnCPU) {
    b_->CreateCall(
        runtime_fn("kiln_device_workspace_free", b_->getVoidTy(), {b_->getInt32Ty(), ptr}),
        {b_->getInt32(device_type_), p});
  } else {
    b_->CreateCall(runtime_fn("kiln_workspace_free", b_->getVoidTy(), {ptr}), {p});
  }
}

void CodeGenLLVM::emit_error_return(llvm::Value* rc) {
  for (auto it = cur_.heap_allocs.rbegin(); it != cur_.heap_allocs.rend(); ++it) {
    emit_workspace_free(*it);
  }
  b_->CreateRet(rc);
  b_->SetInsertPoint(llvm::BasicBlock::Create(*ctx_, "after_return", cur_.fn));
}

void CodeGenLLVM::emit_propagate(llvm::Value* rc) {
  llvm::BasicBlock* err = llvm::BasicBlock::Create(*ctx_, "propagate_error", cur_.fn);
  llvm::BasicBlock* ok = llvm::BasicBlock::Create(*ctx_, "call_ok", cur_.fn);
  llvm::MDBuilder md(*ctx_);
  b_->CreateCondBr(b_->CreateICmpNE(rc, b_->getInt32(0)), err, ok,
                   md.createBranchWeights(1, 1 << 20));
  b_->SetInsertPoint(err);
  emit_error_return(rc);
  b_->CreateBr(ok);  // the unreachable block after the return falls into ok
  b_->SetInsertPoint(ok);
}

std::unique_ptr<llvm::Module> CodeGenLLVM::finish(const std::vector<std::string>* name_list) {
  if (name_list) {
    // The list of entry points: NUL-separated names, ended by an empty name.
    std::string list;
    for (const std::string& n : *name_list) {
      list += n;
      list.push_back('\0');
    }
    llvm::Constant* init = llvm::ConstantDataArray::getString(*ctx_, list, true);
    auto* gv =
        new llvm::GlobalVariable(*module_, init->getType(), true,
                                 llvm::GlobalValue::ExternalLinkage, init, "__kiln_func_names");
    gv->setVisibility(llvm::GlobalValue::DefaultVisibility);
  }

  auto [cpu, fs] = cpu_and_features(target_);
  for (llvm::Function& fn : *module_) {
    if (fn.isDeclaration()) continue;
    fn.addFnAttr("target-cpu", cpu);
    if (!fs.empty()) fn.addFnAttr("target-features", fs);
    if (target_.vector_bits() >= 512) fn.addFnAttr("prefer-vector-width", "512");
    fn.addFnAttr(llvm::Attribute::NoUnwind);
  }
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(*module_, &es)) {
    es.flush();
    KILN_ERROR << "internal error: codegen llvm produced invalid IR: " << err
               << " [this is a Kiln bug]";
  }
  prepare_module(*module_);
  // O3 (the target's -opt level) with the new pass manager, tuned for the target machine.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopUnrolling = true;
  llvm::PassBuilder pb(tm_, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  static const llvm::OptimizationLevel kPipelines[] = {
      llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1, llvm::OptimizationLevel::O2,
      llvm::OptimizationLevel::O3};
  const int64_t level = std::clamp<int64_t>(target_.attr_int("opt", 3), 0, 3);
  llvm::ModulePassManager mpm = level == 0 ? pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0)
                                           : pb.buildPerModuleDefaultPipeline(kPipelines[level]);
  mpm.run(*module_, mam);
  return std::move(module_);
}

// ---------------------------------------------------------------------------------------------
// Expressions

llvm::Value* CodeGenLLVM::visit(const IntImm* op) { return const_int(op->dtype, op->value); }

llvm::Value* CodeGenLLVM::visit(const FloatImm* op) {
  return llvm::ConstantFP::get(ty(op->dtype), op->value);
}

llvm::Value* CodeGenLLVM::visit(const StringImm* op) { return string_ptr(op->value); }

llvm::Value* CodeGenLLVM::visit(const Variable* op) {
  auto it = vars_.find(op);
  if (it == vars_.end()) fail("variable '" + op->name + "' is used but not defined");
  return it->second;
}

llvm::Value* CodeGenLLVM::cast_value(DataType from, DataType to, llvm::Value* v) {
  llvm::Type* t = ty(to);
  if (from == to) return v;
  if (from.is_bfloat16() != to.is_bfloat16()) {
    // LLVM 16 cannot select bfloat conversions on x86, so they go through float32's bits:
    // bfloat16 is float32's upper half. To bfloat16 rounds to nearest even; a NaN stays a NaN
    // (sign and top payload bits kept, made quiet) instead of rounding into infinity.
    int lanes = from.lanes();
    DataType f32 = DataType::Float(32, lanes);
    llvm::Type* i32 = ty(DataType::Int(32, lanes));
    llvm::Type* i16 = ty(DataType::Int(16, lanes));
    if (from.is_bfloat16()) {
      llvm::Value* bits = b_->CreateZExt(b_->CreateBitCast(v, i16), i32);
      return cast_value(f32, to, b_->CreateBitCast(b_->CreateShl(bits, 16), ty(f32)));
    }
    llvm::Value* f = cast_value(from, f32, v);
    llvm::Value* u = b_->CreateBitCast(f, i32);
    llvm::Value* hi = b_->CreateLShr(u, 16);
    llvm::Value* bias = b_->CreateAdd(b_->CreateAnd(hi, 1), llvm::ConstantInt::get(i32, 0x7FFF));
    llvm::Value* rounded = b_->CreateLShr(b_->CreateAdd(u, bias), 16);
    llvm::Value* nan = b_->CreateOr(hi, 0x40);
    llvm::Value* r = b_->CreateSelect(b_->CreateFCmpUNO(f, f), nan, rounded);
    return b_->CreateBitCast(b_->CreateTrunc(r, i16), ty(to));
  }
  if (to.is_bool()) {
    if (from.is_float()) return b_->CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
    if (from.is_handle()) return b_->CreateIsNotNull(v);
    return b_->CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  }
  if (from.is_handle() && to.is_handle()) return v;
  if (from.is_handle()) return b_->CreatePtrToInt(v, t);
  if (to.is_handle()) return b_->CreateIntToPtr(v, t);
  if (from.is_float() && to.is_float()) return b_->CreateFPCast(v, t);
  if (from.is_float()) return to.is_int() ? b_->CreateFPToSI(v, t) : b_->CreateFPToUI(v, t);
  if (to.is_float()) return from.is_int() ? b_->CreateSIToFP(v, t) : b_->CreateUIToFP(v, t);
  return b_->CreateIntCast(v, t, from.is_int());
}

llvm::Value* CodeGenLLVM::visit(const Cast* op) {
  return cast_value(op->value.dtype(), op->dtype, emit_expr(op->value));
}

llvm::Value* CodeGenLLVM::visit(const Add* op) {
  llvm::Value *a = emit_expr(op->a), *b = emit_expr(op->b);
  if (op->dtype.is_float()) return b_->CreateFAdd(a, b);
  return b_->CreateAdd(a, b, "", false, op->dtype.is_int());
}
llvm::Value* CodeGenLLVM::visit(const Sub* op) {
  llvm::Value *a = emit_expr(op->a), *b = emit_expr(op->b);
  if (op->dtype.is_float()) return b_->CreateFSub(a, b);
  return b_->CreateSub(a, b, "", false, op->dtype.is_int());
}
llvm::Value* CodeGenLLVM::visit(const Mul* op) {
  llvm::Value *a = emit_expr(op->a), *b = emit_expr(op->b);
  if (op->dtype.is_float()) return b_->CreateFMul(a, b);
  return b_->CreateMul(a, b, "", false, op->dtype.is_int());
}
llvm::Value* CodeGenLLVM::visit(const Div* op) {
  llvm::Value *a = emit_expr(op->a), *b = emit_expr(op->b);
  if (op->dtype.is_float()) return b_->CreateFDiv(a, b);
  return op->dtype.is_int() ? b_->CreateSDiv(a, b) : b_->CreateUDiv(a, b);
}
llvm::Value* CodeGenLLVM::visit(const Mod* op) {
  llvm::Value *a = emit_expr(op->a), *b = emit_expr(op->b);
  if (op->dtype.is_float()) return b_->CreateFRem(a, b);
  return op->dtype.is_int() ? b_->CreateSRem(a, b) : b_->CreateURem(a, b);
}

llvm::Value* CodeGenLLVM::visit(const FloorDiv* op) {
  DataType t = op->dtype;
  if (t.is_float()) fail("floordiv on floating-point " + t.str());
  llvm::Value *a = emit_expr(op->a), *b = emit_expr(op->b);
  if (!t.is_int()) return b_->CreateUDiv(a, b);
  auto c = as_const_int(op->b);
  if (c && is_pow2(*c)) return b_->CreateAShr(a, const_int(t, log2_of(*c)));
  if (c && *c > 0) {
    // a >= 0 ? a / c : (a - c + 1) / c, computed without a branch.
    llvm::Value* neg = b_->CreateICmpSLT(a, const_int(t, 0));
    llvm::Value* adj = b_->CreateSelect(neg, b_->CreateSub(a, const_int(t, *c - 1)), a);
    return b_->CreateSDiv(adj, b);
  }
  llvm::Value* q = b_->CreateSDiv(a, b);
  llvm::Value* r = b_->CreateSRem(a, b);
  llvm::Value* zero = const_int(t, 0);
  // q - 1 when r != 0 and sign(r) != sign(b).
  llvm::Value* fix =
      b_->CreateAnd(b_->CreateICmpNE(r, zero),
                    b_->CreateICmpNE(b_->CreateICmpSLT(r, zero), b_->CreateICmpSLT(b, zero)));
  return b_->CreateSub(q, b_->CreateZExt(fix, q->getType()));
}

llvm::Value* CodeGenLLVM::visit(const FloorMod* op) {
  DataType t = op->dtype;
  if (t.is_float()) fail("floormod on floating-point " + t.str());
  llvm::Value *a = emit_expr(op->a), *b = emit_expr(op->b);
  if (!t.is_int()) return b_->CreateURem(a, b);
  auto c = as_const_int(op->b);
  if (c && is_pow2(*c)) return b_->CreateAnd(a, const_int(t, *c - 1));
  llvm::Value* r = b_->CreateSRem(a, b);
  llvm::Value* zero = const_int(t, 0);
  llvm::Value* fix =
      b_->CreateAnd(b_->CreateICmpNE(r, zero),
                    b_->CreateICmpNE(b_->CreateICmpSLT(r, zero), b_->CreateICmpSLT(b, zero)));
  return b_->CreateSelect(fix, b_->CreateAdd(r, b), r);
}

llvm::Value* CodeGenLLVM::visit(const Min* op) {
  llvm::Value *a = emit_expr(op->a), *b = emit_expr(op->b);
  DataType t = op->dtype;
  llvm::Value* lt = t.is_float() ? b_->CreateFCmpOLT(a, b)
                    : t.is_int() ? b_->CreateICmpSLT(a, b)
                                 : b_->CreateICmpULT(a, b);
  return b_->CreateSelect(lt, a, b);
}
llvm::Value* CodeGenLLVM::visit(const Max* op) {
  llvm::Value *a = emit_expr(op->a), *b = emit_expr(op->b);
  DataType t = op->dtype;
  llvm::Value* gt = t.is_float() ? b_->CreateFCmpOGT(a, b)
                    : t.is_int() ? b_->CreateICmpSGT(a, b)
                                 : b_->CreateICmpUGT(a, b);
  return b_->CreateSelect(gt, a, b);
}

#define KILN_CMP(Node, FOP, SOP, UOP)                                                  \
  llvm::Value* CodeGenLLVM::visit(const Node* op) {                                    \
    llvm::Value *a = emit_expr(op->a), *b = emit_expr(op->b);                          \
    DataType t = op->a.dtype();                                                        \
    if (t.is_float()) return b_->CreateFCmp(llvm::CmpInst::FOP, a, b);                 \
    return b_->CreateICmp(t.is_int() ? llvm::CmpInst::SOP : llvm::CmpInst::UOP, a, b); \
  }
KILN_CMP(EQ, FCMP_OEQ, ICMP_EQ, ICMP_EQ)
KILN_CMP(NE, FCMP_UNE, ICMP_NE, ICMP_NE)
KILN_CMP(LT, FCMP_OLT, ICMP_SLT, ICMP_ULT)
KILN_CMP(LE, FCMP_OLE, ICMP_SLE, ICMP_ULE)
KILN_CMP(GT, FCMP_OGT, ICMP_SGT, ICMP_UGT)
KILN_CMP(GE, FCMP_OGE, ICMP_SGE, ICMP_UGE)
#undef KILN_CMP

llvm::Value* CodeGenLLVM::visit(const And* op) {
  return b_->CreateAnd(emit_expr(op->a), emit_expr(op->b));
}
llvm::Value* CodeGenLLVM::visit(const Or* op) {
  return b_->CreateOr(emit_expr(op->a), emit_expr(op->b));
}
llvm::Value* CodeGenLLVM::visit(const Not* op) { return b_->CreateNot(emit_expr(op->a)); }

llvm::Value* CodeGenLLVM::visit(const Select* op) {
  llvm::Value* c = emit_expr(op->condition);
  llvm::Value* t = emit_expr(op->true_value);
  llvm::Value* f = emit_expr(op->false_value);
  return b_->CreateSelect(c, t, f);
}

llvm::Value* CodeGenLLVM::visit(const Ramp* op) {
  DataType t = op->dtype;
  if (!t.element_of().is_integer()) fail("Ramp of non-integer type " + t.str());
  llvm::Value* base = b_->CreateVectorSplat(op->lanes, emit_expr(op->base));
  llvm::Value* stride = b_->CreateVectorSplat(op->lanes, emit_expr(op->stride));
  std::vector<llvm::Constant*> iota;
  for (int i = 0; i < op->lanes; ++i) {
    iota.push_back(llvm::ConstantInt::get(ty(t.element_of()), i));
  }
  llvm::Value* offs = b_->CreateMul(stride, llvm::ConstantVector::get(iota));
  return b_->CreateAdd(base, offs);
}

llvm::Value* CodeGenLLVM::visit(const Broadcast* op) {
  return b_->CreateVectorSplat(op->lanes, emit_expr(op->value));
}

llvm::Value* CodeGenLLVM::visit(const Let* op) {
  llvm::Value* v = emit_expr(op->value);
  vars_[op->var.get()] = v;
  index_block_ = nullptr;  // cached indices may read an earlier binding of the var
  llvm::Value* r = emit_expr(op->body);
  vars_.erase(op->var.get());
  index_block_ = nullptr;
  return r;
}

llvm::Value* CodeGenLLVM::visit(const Reduce*) {
  fail("Reduce must be lowered to loops before code generation");
}
llvm::Value* CodeGenLLVM::visit(const ProducerLoad* op) {
  fail("ProducerLoad of '" + op->producer->producer_name() +
       "' must be flattened before code generation");
}

}  // namespace kiln::codegen
