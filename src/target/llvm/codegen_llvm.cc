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

#include <numeric>

#include "../target_info.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/tir/packed_api.h"
#include "llvm_common.h"

namespace kiln::codegen {

namespace {

constexpr int64_t kMaxStackAllocBytes = 64 * 1024;
constexpr int kAllocAlign = 64;

/// (coeff, base): the expression is coeff * k + base for some integer k; coeff 0 = constant.
struct Modular {
  int64_t coeff = 1;
  int64_t base = 0;
};

Modular modular_of(const Expr& e) {
  auto norm = [](Modular m) {
    if (m.coeff < 0) m.coeff = -m.coeff;
    if (m.coeff != 0) m.base = ((m.base % m.coeff) + m.coeff) % m.coeff;
    return m;
  };
  if (const IntImm* i = e.as<IntImm>()) return {0, i->value};
  if (const Add* a = e.as<Add>()) {
    Modular x = modular_of(a->a), y = modular_of(a->b);
    return norm({std::gcd(x.coeff, y.coeff), x.base + y.base});
  }
  if (const Sub* s = e.as<Sub>()) {
    Modular x = modular_of(s->a), y = modular_of(s->b);
    return norm({std::gcd(x.coeff, y.coeff), x.base - y.base});
  }
  if (const Mul* m = e.as<Mul>()) {
    Modular x = modular_of(m->a), y = modular_of(m->b);
    if (x.coeff == 0) return norm({y.coeff * x.base, y.base * x.base});
    if (y.coeff == 0) return norm({x.coeff * y.base, x.base * y.base});
    return {std::gcd(x.coeff, x.base) * std::gcd(y.coeff, y.base), 0};
  }
  return {1, 0};
}

int64_t largest_pow2_divisor(int64_t v) {
  if (v == 0) return int64_t{1} << 30;
  return v & -v;
}

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
  std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(
      triple, cpu, fs, opt, llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOpt::Aggressive));
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
  KILN_USER_CHECK(!f->name.empty()) << "codegen llvm: a function has no name";
  KILN_USER_CHECK(module_->getFunction(f->name) == nullptr)
      << "codegen llvm: two functions are named '" << f->name << "'";
  std::vector<llvm::Type*> ptys;
  for (const Var& p : f->params) ptys.push_back(ty(p.dtype()));
  auto* ft = llvm::FunctionType::get(b_->getInt32Ty(), ptys, false);
  llvm::Function* fn =
      llvm::Function::Create(ft, llvm::Function::ExternalLinkage, f->name, module_.get());
  fn->setVisibility(llvm::GlobalValue::DefaultVisibility);
  fn->setDSOLocal(false);
  bool packed = f.attr("packed_api") == "1";
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
  cur_ = FuncState{fn, llvm::BasicBlock::Create(*ctx_, "entry", fn), {}};
  b_->SetInsertPoint(cur_.entry);
  if (f.attr("fast_math") == "1") {
    b_->setFastMathFlags(llvm::FastMathFlags::getFast());
  } else {
    b_->clearFastMathFlags();
  }
  visit_stmt(f->body);
  b_->CreateRet(b_->getInt32(0));
  names_.push_back(f->name);
  vars_.clear();
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
  llvm::IRBuilderBase::InsertPoint ip = b_->saveIP();
  vars_.clear();
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
  b_->restoreIP(ip);
  return fn;
}

std::vector<Var> CodeGenLLVM::free_vars(const Stmt& s) {
  FreeVarCollector c(vars_);
  c.visit_stmt(s);
  return c.vars;
}

void CodeGenLLVM::emit_error_return(llvm::Value* rc) {
  llvm::Function* free_fn =
      runtime_fn("kiln_workspace_free", b_->getVoidTy(), {llvm::PointerType::getUnqual(*ctx_)});
  for (auto it = cur_.heap_allocs.rbegin(); it != cur_.heap_allocs.rend(); ++it) {
    b_->CreateCall(free_fn, {*it});
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
  // O3 with the new pass manager, tuned for the target machine.
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
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
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

namespace {
/// builtin::kDpbusd on i32 values of equal lanes (see ir/op.h): vpdpbusd for 16 lanes with
/// avx512vnni, otherwise bytes widened (a zero-, b sign-extended), multiplied and summed in
/// groups of 4 by shuffles.
llvm::Value* emit_dpbusd(llvm::IRBuilder<>& b, const Target& target, llvm::Value* acc,
                         llvm::Value* x, llvm::Value* y) {
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(acc->getType());
  const unsigned n = vt ? vt->getNumElements() : 1;
  if (n == 16 && target.has_feature("avx512vnni"))
    return b.CreateIntrinsic(llvm::Intrinsic::x86_avx512_vpdpbusd_512, {}, {acc, x, y});
  auto* bytes = llvm::FixedVectorType::get(b.getInt8Ty(), 4 * n);
  auto* wide = llvm::FixedVectorType::get(b.getInt32Ty(), 4 * n);
  llvm::Value* p = b.CreateMul(b.CreateZExt(b.CreateBitCast(x, bytes), wide),
                               b.CreateSExt(b.CreateBitCast(y, bytes), wide));
  llvm::Value* sum = nullptr;
  for (unsigned j = 0; j < 4; ++j) {
    llvm::SmallVector<int, 64> mask;
    for (unsigned l = 0; l < n; ++l) mask.push_back(static_cast<int>(4 * l + j));
    llvm::Value* part = b.CreateShuffleVector(p, mask);
    sum = sum ? b.CreateAdd(sum, part) : part;
  }
  if (!vt) sum = b.CreateExtractElement(sum, uint64_t{0});
  return b.CreateAdd(acc, sum);
}

/// The call when `e` is dpbusd(0, a, b), else null.
const Call* as_zero_acc_dpbusd(const Expr& e) {
  const Call* c = e.as<Call>();
  return c && c->name == builtin::kDpbusd && c->args.size() == 3 && is_zero(c->args[0]) ? c
                                                                                        : nullptr;
}
}  // namespace

llvm::Value* CodeGenLLVM::visit(const Add* op) {
  // x + dpbusd(0, a, b) -> dpbusd(x, a, b): one vpdpbusd per accumulator update.
  const Call* dp = as_zero_acc_dpbusd(op->b);
  const Expr* other = &op->a;
  if (!dp) {
    dp = as_zero_acc_dpbusd(op->a);
    other = &op->b;
  }
  if (dp) {
    return emit_dpbusd(*b_, target_, emit_expr(*other), emit_expr(dp->args[1]),
                       emit_expr(dp->args[2]));
  }
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
  llvm::Value* r = emit_expr(op->body);
  vars_.erase(op->var.get());
  return r;
}

llvm::Value* CodeGenLLVM::visit(const Reduce*) {
  fail("Reduce must be lowered to loops before code generation");
}
llvm::Value* CodeGenLLVM::visit(const ProducerLoad* op) {
  fail("ProducerLoad of '" + op->producer->producer_name() +
       "' must be flattened before code generation");
}

// --- memory

llvm::Value* CodeGenLLVM::buffer_ptr(const Var& buffer_var, DataType elem, llvm::Value* index) {
  llvm::Value* base = emit_expr(buffer_var);
  return b_->CreateInBoundsGEP(ty(elem), base, index);
}

llvm::Value* CodeGenLLVM::element_ptr(const Var& buffer_var, DataType elem, const Expr& index) {
  if (!index.dtype().is_int() || index.dtype().bits() > 64)
    return buffer_ptr(buffer_var, elem, emit_expr(index));
  return buffer_ptr(buffer_var, elem, emit_index64(index));
}

llvm::Value* CodeGenLLVM::emit_index64(const Expr& e) {
  // Indices are 32-bit in the IR. Emitted as 32-bit sums and one sign extension per access,
  // `sext(a + b + c)` reached the backend as 32-bit adds and a movslq per load (LLVM does not
  // always distribute the extension over nsw adds, and loop strength reduction then keeps the
  // 32-bit sums), e.g. two extra instructions per input vector in a depthwise convolution's
  // register tile. The sums and products of an address are emitted in 64 bits instead
  // (the leaves extended once each), so constants and loop-invariant parts fold into the
  // address modes.
  llvm::Type* i64 = b_->getInt64Ty();
  if (auto c = as_const_int(e)) return llvm::ConstantInt::get(i64, *c, true);
  if (const Add* a = e.as<Add>())
    return b_->CreateAdd(emit_index64(a->a), emit_index64(a->b), "", false, true);
  if (const Sub* a = e.as<Sub>())
    return b_->CreateSub(emit_index64(a->a), emit_index64(a->b), "", false, true);
  if (const Mul* a = e.as<Mul>())
    return b_->CreateMul(emit_index64(a->a), emit_index64(a->b), "", false, true);
  llvm::Value* v = emit_expr(e);
  return v->getType() == i64 ? v : b_->CreateSExt(v, i64);
}

llvm::Align CodeGenLLVM::vector_align(const Var& buffer_var, DataType t, const Expr& base) {
  int64_t elem_bytes = std::max(1, t.element_of().bytes());
  if (!aligned_.count(buffer_var.get())) return llvm::Align(elem_bytes);
  Modular m = modular_of(base);
  int64_t elems =
      m.coeff == 0 ? largest_pow2_divisor(m.base) : largest_pow2_divisor(std::gcd(m.coeff, m.base));
  int64_t bytes = std::min<int64_t>(elems * elem_bytes, kAllocAlign);
  bytes = std::min<int64_t>(bytes, largest_pow2_divisor(elem_bytes * t.lanes()));
  return llvm::Align(std::max<int64_t>(bytes, elem_bytes));
}

llvm::Value* CodeGenLLVM::visit(const Load* op) {
  if (op->dtype.is_bool()) {
    // Bools are one byte each in memory; LLVM's <N x i1> would be bit-packed.
    Expr bytes =
        Load::make(DataType::UInt(8, op->dtype.lanes()), op->buffer_var, op->index, op->predicate);
    return b_->CreateICmpNE(emit_expr(bytes),
                            llvm::Constant::getNullValue(ty(DataType::UInt(8, op->dtype.lanes()))));
  }
  DataType t = op->dtype;
  DataType elem = t.element_of();
  bool unpredicated = is_one(op->predicate);
  if (t.is_scalar()) {
    llvm::Value* ptr = element_ptr(op->buffer_var, elem, op->index);
    if (unpredicated) return b_->CreateAlignedLoad(ty(t), ptr, llvm::Align(std::max(1, t.bytes())));
    // A scalar predicated load reads only when the predicate holds (0 otherwise).
    llvm::Value* pred = emit_expr(op->predicate);
    llvm::BasicBlock* pre = b_->GetInsertBlock();
    llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "pload", cur_.fn);
    llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "pload_end", cur_.fn);
    b_->CreateCondBr(pred, then_bb, end_bb);
    b_->SetInsertPoint(then_bb);
    llvm::Value* v = b_->CreateAlignedLoad(ty(t), ptr, llvm::Align(std::max(1, t.bytes())));
    llvm::BasicBlock* then_end = b_->GetInsertBlock();
    b_->CreateBr(end_bb);
    b_->SetInsertPoint(end_bb);
    llvm::PHINode* phi = b_->CreatePHI(ty(t), 2);
    phi->addIncoming(v, then_end);
    phi->addIncoming(llvm::Constant::getNullValue(ty(t)), pre);
    return phi;
  }
  llvm::Type* vt = ty(t);
  const Ramp* ramp = op->index.as<Ramp>();
  if (op->index.dtype().is_scalar() || (ramp && is_one(ramp->stride))) {
    // Contiguous: one vector access starting at the (base) index.
    Expr base = ramp ? ramp->base : op->index;
    llvm::Value* ptr = element_ptr(op->buffer_var, elem, base);
    llvm::Align align = vector_align(op->buffer_var, t, base);
    if (unpredicated) return b_->CreateAlignedLoad(vt, ptr, align);
    return b_->CreateMaskedLoad(vt, ptr, align, emit_expr(op->predicate),
                                llvm::Constant::getNullValue(vt));
  }
  llvm::Value* ptrs = buffer_ptr(op->buffer_var, elem, emit_expr(op->index));
  llvm::Value* mask = unpredicated ? nullptr : emit_expr(op->predicate);
  return b_->CreateMaskedGather(vt, ptrs, llvm::Align(std::max(1, elem.bytes())), mask,
                                llvm::Constant::getNullValue(vt));
}

void CodeGenLLVM::visit(const Store* op) {
  if (op->value.dtype().is_bool()) {
    DataType bytes = DataType::UInt(8, op->value.dtype().lanes());
    visit(Store::make(op->buffer_var, Cast::make(bytes, op->value), op->index, op->predicate)
              .as<Store>());
    return;
  }
  DataType t = op->value.dtype();
  DataType elem = t.element_of();
  llvm::Value* value = emit_expr(op->value);
  bool unpredicated = is_one(op->predicate);
  if (t.is_scalar()) {
    llvm::Value* ptr = element_ptr(op->buffer_var, elem, op->index);
    if (unpredicated) {
      b_->CreateAlignedStore(value, ptr, llvm::Align(std::max(1, t.bytes())));
      return;
    }
    llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "pstore", cur_.fn);
    llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "pstore_end", cur_.fn);
    b_->CreateCondBr(emit_expr(op->predicate), then_bb, end_bb);
    b_->SetInsertPoint(then_bb);
    b_->CreateAlignedStore(value, ptr, llvm::Align(std::max(1, t.bytes())));
    b_->CreateBr(end_bb);
    b_->SetInsertPoint(end_bb);
    return;
  }
  const Ramp* ramp = op->index.as<Ramp>();
  if (op->index.dtype().is_scalar() || (ramp && is_one(ramp->stride))) {
    Expr base = ramp ? ramp->base : op->index;
    llvm::Value* ptr = element_ptr(op->buffer_var, elem, base);
    llvm::Align align = vector_align(op->buffer_var, t, base);
    if (unpredicated) {
      b_->CreateAlignedStore(value, ptr, align);
    } else {
      b_->CreateMaskedStore(value, ptr, align, emit_expr(op->predicate));
    }
    return;
  }
  llvm::Value* ptrs = buffer_ptr(op->buffer_var, elem, emit_expr(op->index));
  llvm::Value* mask = unpredicated ? nullptr : emit_expr(op->predicate);
  b_->CreateMaskedScatter(value, ptrs, llvm::Align(std::max(1, elem.bytes())), mask);
}

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
  std::vector<llvm::Value*> args;
  for (const Expr& a : op->args) args.push_back(emit_expr(a));
  auto it = intrinsics.find(op->name);
  if (it != intrinsics.end()) {
    if (!t.is_float()) fail("math intrinsic '" + op->name + "' on non-float type " + t.str());
    return b_->CreateIntrinsic(it->second, {ty(t)}, args);
  }
  if (!libm.count(op->name)) return nullptr;
  if (op->name == "tanh" && t.is_float() && t.bits() == 32) return emit_tanh_f32(args[0], t);
  if (!t.is_float() || (t.bits() != 32 && t.bits() != 64)) {
    fail("math function '" + op->name + "' on type " + t.str());
  }
  llvm::Type* st = ty(t.element_of());
  std::string fname = op->name + (t.bits() == 32 ? "f" : "");
  std::vector<llvm::Type*> ptys(args.size(), st);
  llvm::Function* fn = runtime_fn(fname, st, ptys);
  fn->setDoesNotAccessMemory();
  fn->setDoesNotThrow();
  if (t.is_scalar()) return b_->CreateCall(fn, args);
  // Scalarize: one libm call per lane.
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
  if (op->name == builtin::kDpbusd && op->args.size() == 3) {
    return emit_dpbusd(*b_, target_, emit_expr(op->args[0]), emit_expr(op->args[1]),
                       emit_expr(op->args[2]));
  }
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

void CodeGenLLVM::visit(const Evaluate* op) {
  if (const Call* c = op->value.as<Call>(); c && c->name == builtin::kArgCheck) {
    emit_arg_check(c);
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
  visit_stmt(op->body);
}

void CodeGenLLVM::visit(const AttrStmt* op) {
  if (op->key == attr::kComputeScope) {
    std::string name = func_name_ + "_compute_";
    if (const StringImm* s = op->value.as<StringImm>()) name = s->value;
    std::vector<Var> params = free_vars(op->body);
    llvm::Function* fn = emit_outlined(
        name, params, [&] { visit_stmt(op->body); }, false);
    std::vector<llvm::Value*> args;
    for (const Var& p : params) args.push_back(vars_.at(p.get()));
    emit_propagate(b_->CreateCall(fn, args));
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
                            const std::function<void()>& body) {
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
  vars_[loop_var.get()] = i;
  body();
  llvm::Value* next = b_->CreateAdd(i, llvm::ConstantInt::get(i->getType(), 1), "", false, true);
  llvm::BranchInst* back = b_->CreateBr(head);
  i->addIncoming(next, b_->GetInsertBlock());
  if (kind == ForKind::kUnrolled) {
    llvm::MDNode* unroll =
        llvm::MDNode::get(*ctx_, {llvm::MDString::get(*ctx_, "llvm.loop.unroll.full")});
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
  emit_loop(op->loop_var, begin, end, op->for_kind, [&] { visit_stmt(op->body); });
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
  bool heap = n < 0 || n * elem_bytes > kMaxStackAllocBytes;
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
    llvm::Function* alloc = runtime_fn("kiln_workspace_alloc", ptr, {b_->getInt64Ty()});
    p = b_->CreateCall(alloc, {bytes}, op->buffer_var.name());
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
    llvm::Function* free_fn =
        runtime_fn("kiln_workspace_free", b_->getVoidTy(), {llvm::PointerType::getUnqual(*ctx_)});
    b_->CreateCall(free_fn, {p});
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
