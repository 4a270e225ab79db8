/// \file codegen_llvm.h
/// \brief Translation of PrimFuncs to LLVM IR (private to src/target/llvm).
///
/// CodeGenLLVM walks statements and expressions with the IR functors and emits IR through one
/// IRBuilder. State per LLVM function (the packed entry point, an outlined compute scope, a
/// parallel closure) sits in FuncState; outlining saves and restores it. See codegen_llvm.cc.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/functor.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/module.h"
#include "kiln/target/target.h"
#include "kiln/tir/function.h"

namespace kiln::codegen {

using namespace kiln::ir;  // NOLINT

/// Allocations up to this size are entry-block allocas; larger ones come from the workspace.
inline constexpr int64_t kMaxStackAllocBytes = 64 * 1024;
/// The alignment of every allocation.
inline constexpr int kAllocAlign = 64;

/// Creates the TargetMachine for `target` (PIC, O3). Throws kiln::Error for an unknown triple.
std::unique_ptr<llvm::TargetMachine> create_target_machine(const Target& target);
/// The CPU name and the feature string LLVM gets for `target` (-mcpu=native: host features).
std::pair<std::string, std::string> cpu_and_features(const Target& target);

/// Translates PrimFuncs into one llvm::Module.
class CodeGenLLVM : public ExprFunctor<llvm::Value*(const Expr&)>,
                    public StmtFunctor<void(const Stmt&)> {
 public:
  CodeGenLLVM(llvm::LLVMContext* ctx, llvm::TargetMachine* tm, const Target& target,
              const std::string& module_name);
  /// Emits one function; a packed one (attr packed_api = "1") becomes an exported entry point.
  void add_function(const tir::PrimFunc& f);
  /// Adds __kiln_func_names listing `name_list` (when not null: one module of a build defines
  /// the list of all its entry points), verifies, optimizes at O3; returns the module.
  std::unique_ptr<llvm::Module> finish(const std::vector<std::string>* name_list);
  /// Defines the module's device code (PTX, OpenCL C) and the runtime's cache for it: the
  /// globals __kiln_device_code and __kiln_device_module that kiln.device_launch passes to
  /// kiln_device_launch (other parts of a build declare them). Call before add_function.
  void add_device_code(const std::string& device_code);
  /// Names of the entry points added, in order.
  const std::vector<std::string>& function_names() const { return names_; }

 protected:
  using ExprFunctor<llvm::Value*(const Expr&)>::visit;
  using StmtFunctor<void(const Stmt&)>::visit;
#define KILN_EXPR_NODE(T) llvm::Value* visit(const T* op) override;
#define KILN_STMT_NODE(T) void visit(const T* op) override;
#include "kiln/ir/node_kinds.def"

 protected:
  /// Per-LLVM-function state.
  struct FuncState {
    llvm::Function* fn = nullptr;
    llvm::BasicBlock* entry = nullptr;      ///< where allocas go
    std::vector<llvm::Value*> heap_allocs;  ///< live workspace blocks, freed on exit
  };

  llvm::Type* ty(DataType t);
  llvm::Value* cast_value(DataType from, DataType to, llvm::Value* v);
  /// Creates the function `f->name` with f's parameter types and result `ret`; a user error
  /// when the module has one of that name.
  llvm::Function* declare_function(const tir::PrimFunc& f, llvm::Type* ret);
  /// Starts emitting `f`'s body into `fn`: a fresh entry block, fast-math flags by f's attr.
  void begin_body(const tir::PrimFunc& f, llvm::Function* fn);
  /// Called by finish() on the verified module before it is optimized (the NVPTX generator
  /// links libdevice here).
  virtual void prepare_module(llvm::Module& m) {}
  llvm::Value* emit_expr(const Expr& e) { return visit_expr(e); }
  llvm::Value* const_int(DataType t, int64_t v);
  llvm::Value* buffer_ptr(const Var& buffer_var, DataType elem, llvm::Value* index);
  /// The address of element `index` (a scalar integer expression) of a buffer, the index
  /// computed in 64 bits (emit_index64) so that its constant and invariant parts fold into the
  /// x86 addressing mode.
  llvm::Value* element_ptr(const Var& buffer_var, DataType elem, const Expr& index);
  /// A scalar integer index as a 64-bit value, its sums and products computed in 64 bits.
  llvm::Value* emit_index64(const Expr& e);
  /// tanh of a float32 scalar or vector, computed inline (rational approximation).
  llvm::Value* emit_tanh_f32(llvm::Value* x, DataType t);
  llvm::Value* emit_exp_f32(llvm::Value* x, DataType t);
  llvm::Value* emit_erf_f32(llvm::Value* x, DataType t);
  llvm::Value* emit_sigmoid_f32(llvm::Value* x, DataType t);
  std::pair<llvm::Value*, llvm::Value*> exp_reduced(llvm::Value* xc, DataType t);
  llvm::Value* pow2_f32(llvm::Value* e, DataType t);
  llvm::Align vector_align(const Var& buffer_var, DataType t, const Expr& base);
  llvm::Value* emit_call(const Call* op);
  llvm::Value* emit_builtin(const Call* op);
  /// Math functions: LLVM intrinsics, inline approximations (exp, tanh, erf of float32) or libm.
  virtual llvm::Value* emit_math(const Call* op);
  /// Calls the pure scalar function `fname` (element type of `t`) on `args`, once per lane of
  /// `t` (libm, libdevice).
  llvm::Value* emit_lane_calls(const std::string& fname, DataType t,
                               const std::vector<llvm::Value*>& args);
  /// kiln.device_launch (a host function launching a kernel of the module's device code): one
  /// kiln_device_launch call with the kernel's arguments in a table of pointers to their values.
  void emit_device_launch(const Call* op);
  /// Frees a workspace block (kiln_workspace_free, or the device's in a GPU function's host
  /// code).
  void emit_workspace_free(llvm::Value* p);
  /// Bit operations (reinterpret, shifts, bitwise, popcount), calls named "llvm.*" (LLVM
  /// intrinsics by name) and the AMX tile product; null for other calls
  /// (codegen_llvm_intrin.cc).
  llvm::Value* emit_target_intrin(const Call* op);
  /// `e` as a value of type `want` of the same width: a contiguous load (under reinterprets)
  /// loads `want` directly, a broadcast splats the converted value, anything else is bitcast.
  llvm::Value* emit_as(const Expr& e, llvm::Type* want);
  llvm::Value* emit_if_then_else(const Expr& cond, const Expr& t, const Expr& f, DataType type);
  void emit_arg_check(const Call* op);
  /// kiln.array_check: one kiln_check_array call with the expected shape and strides as a
  /// constant table; returns -1 when it fails.
  void emit_array_check(const Call* op);
  /// Frees live workspace blocks and returns `rc` from the current function; leaves the
  /// builder in a fresh unreachable block so emission can go on.
  void emit_error_return(llvm::Value* rc);
  /// Branches to an error return of `rc` when rc != 0.
  void emit_propagate(llvm::Value* rc);
  /// A loop over [begin, end); `rolled`: a serial loop LLVM must not unroll.
  void emit_loop(const Var& loop_var, llvm::Value* begin, llvm::Value* end, ForKind kind,
                 const std::function<void()>& body, bool rolled = false);
  void emit_parallel_for(const For* op);
  /// Variables of `s` bound in the current function, in first-use order.
  std::vector<Var> free_vars(const Stmt& s);
  /// Emits an internal function returning int32 with parameters `params`, whose body is
  /// `body()` followed by `ret 0`. Handle parameters are noalias. Restores the builder.
  llvm::Function* emit_outlined(const std::string& name, const std::vector<Var>& params,
                                const std::function<void()>& body, bool always_inline);
  llvm::Function* runtime_fn(const std::string& name, llvm::Type* ret,
                             std::vector<llvm::Type*> args);
  llvm::Value* string_ptr(const std::string& s);
  std::string unique_name(const std::string& base);
  [[noreturn]] void fail(const std::string& what);

  llvm::LLVMContext* ctx_;
  llvm::TargetMachine* tm_;
  Target target_;
  std::unique_ptr<llvm::Module> module_;
  std::unique_ptr<llvm::IRBuilder<>> b_;
  FuncState cur_;
  std::unordered_map<const Variable*, llvm::Value*> vars_;
  /// Buffer vars known to be 64-byte aligned (checked arguments, allocations).
  std::unordered_set<const Variable*> aligned_;
  std::map<std::string, llvm::Value*> strings_;
  std::vector<std::string> names_;
  std::map<std::string, int> name_counts_;
  std::string func_name_;
  /// The function's attr "shared_compute" (tir::share_compute_bodies): the name of a compute
  /// body its family shares; the bodies emitted so far by that name.
  std::string shared_compute_;
  std::map<std::string, llvm::Function*> shared_bodies_;
  /// The 64-bit counters of the enclosing 32-bit loops (emit_loop).
  std::unordered_map<const Variable*, llvm::Value*> wide_;
  /// Index expressions emitted in block index_block_ (emit_index64), by structural hash.
  llvm::BasicBlock* index_block_ = nullptr;
  std::unordered_multimap<size_t, std::pair<Expr, llvm::Value*>> index_cache_;
  /// Depth of pragma_no_unroll attributes around the statement being emitted: serial loops
  /// inside get llvm.loop.unroll.disable.
  int no_unroll_ = 0;
  llvm::StructType* array_type_ = nullptr;
  /// The device (a KilnDeviceType) the current packed function's tensors live on (its attr
  /// "device_type"; the CPU when absent).
  int device_type_ = 1;
};

}  // namespace kiln::codegen
