// CUDA code generation: device kernels through LLVM's NVPTX back end (PTX text); build_gpu
// (src/target/build_gpu.cc) adds the host code that launches them.
//
// A kernel (tir::split_host_device) becomes a `ptx_kernel` function returning void; each loop
// bound to a thread axis becomes that axis's special register (guarded where its extent is
// below the launch extent); shared allocations become addrspace(3) globals; math functions that
// LLVM cannot lower for NVPTX come from libdevice, linked with only the functions used.
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include <cstdlib>
#include <map>
#include <set>

#include "codegen_llvm.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/target/codegen.h"
#include "llvm_common.h"

namespace kiln::codegen {
namespace {

constexpr unsigned kSharedAddrSpace = 3;

class CodeGenNVPTX : public CodeGenLLVM {
 public:
  using CodeGenLLVM::CodeGenLLVM;

  void add_kernel(const tir::PrimFunc& f) {
    func_name_ = f->name;
    llvm::Function* fn = declare_function(f, b_->getVoidTy());
    fn->setCallingConv(llvm::CallingConv::PTX_Kernel);
    // The kernel annotation too: older PTX back ends look only at nvvm.annotations.
    llvm::NamedMDNode* md = module_->getOrInsertNamedMetadata("nvvm.annotations");
    auto annotate = [&](const char* key, int v) {
      md->addOperand(
          llvm::MDNode::get(*ctx_, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(*ctx_, key),
                                    llvm::ValueAsMetadata::get(b_->getInt32(v))}));
    };
    annotate("kernel", 1);
    launch_.clear();
    static const char* kTags[] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z",
                                  "threadIdx.x", "threadIdx.y", "threadIdx.z"};
    std::string dims = f.attr("launch");
    for (int i = 0; i < 6; ++i) {
      size_t comma = dims.find(',');
      launch_[kTags[i]] = std::stoll(dims.substr(0, comma));
      dims = comma == std::string::npos ? "" : dims.substr(comma + 1);
    }
    annotate("maxntidx", static_cast<int>(launch_["threadIdx.x"]));
    annotate("maxntidy", static_cast<int>(launch_["threadIdx.y"]));
    annotate("maxntidz", static_cast<int>(launch_["threadIdx.z"]));
    vars_.clear();
    for (size_t i = 0; i < f->params.size(); ++i) {
      llvm::Argument* a = fn->getArg(i);
      a->setName(f->params[i].name());
      if (f->params[i].dtype().is_handle()) a->addAttr(llvm::Attribute::NoAlias);
      vars_[f->params[i].get()] = a;
    }
    begin_body(f, fn);
    visit_stmt(f->body);
    b_->CreateRetVoid();
    vars_.clear();
  }

 protected:
  using CodeGenLLVM::visit;

  void visit(const For* op) override {
    if (op->for_kind == ForKind::kParallel) {
      fail("loop '" + op->loop_var.name() +
           "' is parallel on the CPU's thread pool; inside a GPU "
           "kernel bind it to a thread axis instead");
    }
    if (op->for_kind != ForKind::kThreadBinding) {
      CodeGenLLVM::visit(op);
      return;
    }
    auto it = launch_.find(op->thread_tag);
    if (it == launch_.end()) fail("unknown thread axis '" + op->thread_tag + "'");
    llvm::Value* idx = b_->CreateIntrinsic(sreg(op->thread_tag), {}, {});
    auto ext = as_const_int(op->extent);
    if (!ext) fail("the extent of the loop bound to " + op->thread_tag + " is not a constant");
    auto body = [&] {
      llvm::Value* v = cast_value(DataType::Int(32), op->loop_var.dtype(), idx);
      vars_[op->loop_var.get()] =
          b_->CreateAdd(emit_expr(op->min), v, op->loop_var.name(), false, true);
      visit_stmt(op->body);
      vars_.erase(op->loop_var.get());
    };
    if (*ext >= it->second) {
      body();
      return;
    }
    // A loop shorter than the launch extent of its axis: the other threads skip it.
    llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "thread_guard", cur_.fn);
    llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "thread_guard_end", cur_.fn);
    b_->CreateCondBr(b_->CreateICmpSLT(idx, b_->getInt32(static_cast<int32_t>(*ext))), then_bb,
                     end_bb);
    b_->SetInsertPoint(then_bb);
    body();
    b_->CreateBr(end_bb);
    b_->SetInsertPoint(end_bb);
  }

  void visit(const Evaluate* op) override {
    const Call* c = op->value.as<Call>();
    if (c && c->name == builtin::kSyncThreads) {
      b_->CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
      return;
    }
    if (c && c->name == builtin::kArgCheck) {
      // A kernel cannot set the host's error message: a failed check (an index out of range)
      // stops the kernel with a trap, reported by the next synchronize.
      llvm::BasicBlock* fail_bb = llvm::BasicBlock::Create(*ctx_, "check_fail", cur_.fn);
      llvm::BasicBlock* ok_bb = llvm::BasicBlock::Create(*ctx_, "check_ok", cur_.fn);
      b_->CreateCondBr(emit_expr(c->args.at(0)), ok_bb, fail_bb);
      b_->SetInsertPoint(fail_bb);
      b_->CreateIntrinsic(llvm::Intrinsic::trap, {}, {});
      b_->CreateUnreachable();
      b_->SetInsertPoint(ok_bb);
      return;
    }
    CodeGenLLVM::visit(op);
  }

  void visit(const Allocate* op) override {
    int64_t n = op->constant_size();
    if (n < 0) fail("allocation '" + op->buffer_var.name() + "' needs a constant size in a kernel");
    int64_t bytes = std::max<int64_t>(1, n * std::max(1, op->dtype.bytes()));
    llvm::Value* p;
    if (op->scope == "shared") {
      auto* aty = llvm::ArrayType::get(b_->getInt8Ty(), bytes);
      auto* gv = new llvm::GlobalVariable(
          *module_, aty, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(aty),
          unique_name(func_name_ + "_" + op->buffer_var.name()), nullptr,
          llvm::GlobalValue::NotThreadLocal, kSharedAddrSpace);
      gv->setAlignment(llvm::Align(16));
      p = b_->CreateAddrSpaceCast(gv, llvm::PointerType::getUnqual(*ctx_));
    } else {
      if (bytes > 64 * 1024) {
        fail("local allocation '" + op->buffer_var.name() + "' of " + std::to_string(bytes) +
             " bytes per thread is too large for a GPU kernel");
      }
      llvm::IRBuilderBase::InsertPoint ip = b_->saveIP();
      b_->SetInsertPoint(cur_.entry, cur_.entry->getFirstInsertionPt());
      llvm::AllocaInst* a = b_->CreateAlloca(llvm::ArrayType::get(b_->getInt8Ty(), bytes), nullptr,
                                             op->buffer_var.name());
      a->setAlignment(llvm::Align(16));
      b_->restoreIP(ip);
      p = a;
    }
    vars_[op->buffer_var.get()] = p;
    visit_stmt(op->body);
    vars_.erase(op->buffer_var.get());
  }

  llvm::Value* emit_math(const Call* op) override {
    static const std::set<std::string> libdevice = {
        "exp",  "exp2", "log",  "log2", "log10", "pow", "sin",   "cos",   "tan",   "atan",
        "asin", "acos", "sinh", "cosh", "tanh",  "erf", "atan2", "log1p", "expm1", "cbrt"};
    DataType t = op->dtype;
    const bool f32 = t.is_float() && t.bits() == 32;
    // exp, tanh and erf of float32 stay the inline approximations (plain arithmetic).
    bool inline_f32 = f32 && (op->name == "exp" || op->name == "tanh" || op->name == "erf");
    if (!libdevice.count(op->name) || inline_f32) return CodeGenLLVM::emit_math(op);
    if (!t.is_float() || (t.bits() != 32 && t.bits() != 64)) {
      fail("math function '" + op->name + "' on type " + t.str());
    }
    std::vector<llvm::Value*> args;
    for (const Expr& a : op->args) args.push_back(emit_expr(a));
    uses_libdevice_ = true;
    return emit_lane_calls("__nv_" + op->name + (f32 ? "f" : ""), t, args);
  }

  void prepare_module(llvm::Module& m) override {
    if (uses_libdevice_) link_libdevice(m);
    // Only the kernels are entry points: everything else may be inlined and removed.
    for (llvm::Function& fn : m) {
      if (!fn.isDeclaration() && fn.getCallingConv() != llvm::CallingConv::PTX_Kernel)
        fn.setLinkage(llvm::GlobalValue::InternalLinkage);
    }
  }

 private:
  static llvm::Intrinsic::ID sreg(const std::string& tag) {
    static const std::map<std::string, llvm::Intrinsic::ID> ids = {
        {"threadIdx.x", llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x},
        {"threadIdx.y", llvm::Intrinsic::nvvm_read_ptx_sreg_tid_y},
        {"threadIdx.z", llvm::Intrinsic::nvvm_read_ptx_sreg_tid_z},
        {"blockIdx.x", llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x},
        {"blockIdx.y", llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y},
        {"blockIdx.z", llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z}};
    return ids.at(tag);
  }

  void link_libdevice(llvm::Module& m) {
    const char* env = std::getenv("KILN_LIBDEVICE");
    std::string path = env && *env ? env : "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
    auto buf = llvm::MemoryBuffer::getFile(path);
    KILN_USER_CHECK(static_cast<bool>(buf))
        << "codegen cuda: kernel '" << func_name_ << "' needs math functions from libdevice, "
        << "but '" << path << "' cannot be read (" << buf.getError().message()
        << "); install the CUDA toolkit or set KILN_LIBDEVICE to libdevice.10.bc";
    auto lib = llvm::parseBitcodeFile(**buf, m.getContext());
    if (!lib) {
      std::string msg;
      llvm::raw_string_ostream os(msg);
      os << lib.takeError();
      KILN_ERROR << "codegen cuda: cannot read libdevice '" << path << "': " << os.str();
    }
    (*lib)->setTargetTriple(m.getTargetTriple());
    (*lib)->setDataLayout(m.getDataLayout());
    KILN_ICHECK(!llvm::Linker::linkModules(m, std::move(*lib), llvm::Linker::LinkOnlyNeeded))
        << "codegen cuda: linking libdevice failed";
    // libdevice asks __nvvm_reflect("__CUDA_FTZ"): no flush-to-zero.
    m.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t{0});
  }

  std::map<std::string, int64_t> launch_;
  bool uses_libdevice_ = false;
};

}  // namespace

std::string build_ptx(const std::vector<tir::PrimFunc>& kernels, const Target& target) {
  KILN_USER_CHECK(target.kind == "cuda")
      << "build_ptx: target '" << target.str() << "' is not a cuda target";
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::TargetMachine> tm = create_target_machine(target);
  const std::string arch = target.attr("arch", "sm_75");
  const int sm = arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0;
  KILN_USER_CHECK(sm >= 75 && tm->getMCSubtargetInfo()->isCPUStringValid(arch))
      << "target '" << target.str() << "': option '-arch=" << arch
      << "': Kiln generates code for sm_75 to sm_90 (CUDA 13 has nothing older, LLVM 16 "
         "nothing newer)";
  CodeGenNVPTX cg(&ctx, tm.get(), target, "kiln_device");
  for (const tir::PrimFunc& k : kernels) cg.add_kernel(k);
  std::unique_ptr<llvm::Module> m = cg.finish(nullptr);
  llvm::SmallVector<char, 0> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  KILN_ICHECK(!tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_AssemblyFile))
      << "the NVPTX target machine cannot emit PTX";
  pm.run(*m);
  return std::string(out.data(), out.size());
}

}  // namespace kiln::codegen
