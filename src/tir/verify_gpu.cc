// verify_gpu_kernel (verify.h): a GPU kernel's use of threads, shared and local memory against
// the target's limits, checked before code generation.
#include <map>
#include <string>

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/support/error.h"
#include "kiln/tir/verify.h"

namespace kiln::tir {

void verify_gpu_kernel(const PrimFunc& kernel, const GpuLimits& limits) {
  struct Usage : IRVisitor {
    std::map<std::string, int64_t> thread_extent;
    int64_t shared = 0, local = 0;
    std::string variable;  // the first allocation of non-constant size
    using IRVisitor::visit;
    void visit(const For* op) override {
      if (op->for_kind == ForKind::kThreadBinding && op->thread_tag.rfind("threadIdx.", 0) == 0) {
        if (auto c = as_const_int(op->extent)) {
          int64_t& e = thread_extent[op->thread_tag];
          e = std::max(e, *c);
        }
      }
      IRVisitor::visit(op);
    }
    void visit(const Allocate* op) override {
      int64_t n = op->constant_size();
      if (n < 0) {
        if (variable.empty()) variable = op->buffer_var.name();
      } else {
        int64_t bytes = n * std::max(1, op->dtype.bytes());
        (op->scope == "shared" ? shared : local) += bytes;
      }
      IRVisitor::visit(op);
    }
  } u;
  u.visit_stmt(kernel->body);
  const std::string where = "kernel '" + kernel->name + "'";
  KILN_USER_CHECK(u.variable.empty())
      << where << ": allocation '" << u.variable << "' has no constant size; GPU kernels "
      << "allocate a fixed amount of memory";
  int64_t threads = 1;
  for (const auto& [tag, e] : u.thread_extent) threads *= e;
  KILN_USER_CHECK(threads <= limits.max_threads_per_block)
      << where << " uses " << threads << " threads per block; the target allows "
      << limits.max_threads_per_block << " (-max_threads_per_block)";
  KILN_USER_CHECK(u.shared <= limits.max_shared_memory_per_block)
      << where << " uses " << u.shared << " bytes of shared memory per block; the target allows "
      << limits.max_shared_memory_per_block << " (-max_shared_memory_per_block)";
  KILN_USER_CHECK(u.local <= limits.max_local_memory_per_thread)
      << where << " uses " << u.local << " bytes of local arrays per thread; at most "
      << limits.max_local_memory_per_thread << " are allowed";
}

}  // namespace kiln::tir
