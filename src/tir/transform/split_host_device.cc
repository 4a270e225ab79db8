// split_host_device: each region of a function that runs on a GPU (an AttrStmt thread_extent
// not nested in another) becomes a device kernel; the host function launches it with
// kiln.device_launch (see transform.h).
#include <algorithm>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/ir/printer.h"
#include "kiln/tir/transform.h"

namespace kiln::tir {
namespace {

/// The variables a statement reads but does not define, in first-use order.
class FreeVars : public IRVisitor {
 public:
  std::vector<Var> vars;

 protected:
  using IRVisitor::visit;
  void use(const Variable* v) {
    if (defined_.count(v) || !seen_.insert(v).second) return;
    vars.push_back(Var(v));
  }
  void visit(const Variable* op) override { use(op); }
  void visit(const Load* op) override {
    use(op->buffer_var.get());
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    use(op->buffer_var.get());
    IRVisitor::visit(op);
  }
  void visit(const Let* op) override {
    visit_expr(op->value);
    defined_.insert(op->var.get());
    visit_expr(op->body);
  }
  void visit(const LetStmt* op) override {
    visit_expr(op->value);
    defined_.insert(op->var.get());
    visit_stmt(op->body);
  }
  void visit(const For* op) override {
    defined_.insert(op->loop_var.get());
    IRVisitor::visit(op);
  }
  void visit(const Allocate* op) override {
    defined_.insert(op->buffer_var.get());
    IRVisitor::visit(op);
  }

 private:
  std::unordered_set<const Variable*> defined_, seen_;
};

/// The launch extents of the thread axes bound in a device region, by tag.
class LaunchExtents : public IRVisitor {
 public:
  explicit LaunchExtents(std::string fname) : fname_(std::move(fname)) {}
  std::map<std::string, int64_t> extent;

 protected:
  using IRVisitor::visit;
  void visit(const For* op) override {
    if (op->for_kind == ForKind::kThreadBinding) {
      auto e = as_const_int(op->extent);
      KILN_USER_CHECK(e && *e > 0)
          << "split_host_device " << fname_ << ": the loop bound to " << op->thread_tag
          << " needs a constant positive extent, got " << op->extent;
      KILN_USER_CHECK(op->thread_tag != "vthread")
          << "split_host_device " << fname_ << ": vthread loops must be lowered first";
      int64_t& slot = extent[op->thread_tag];
      slot = std::max(slot, *e);
    }
    IRVisitor::visit(op);
  }

 private:
  std::string fname_;
};

class Splitter : public IRMutator {
 public:
  explicit Splitter(const PrimFunc& f) : f_(f) {}
  std::vector<PrimFunc> kernels;

 protected:
  using IRMutator::visit;
  Stmt visit(const AttrStmt* op) override {
    if (op->key != attr::kThreadExtent) return IRMutator::visit(op);
    Stmt region(op);
    const std::string name = f_->name + "_kernel" + std::to_string(kernels.size());
    LaunchExtents le(f_->name);
    le.visit_stmt(region);
    FreeVars fv;
    fv.visit_stmt(region);
    // Handles first (the buffers), then scalars, each in first-use order.
    std::vector<Var> params;
    for (const Var& v : fv.vars)
      if (v.dtype().is_handle()) params.push_back(v);
    for (const Var& v : fv.vars)
      if (!v.dtype().is_handle()) params.push_back(v);
    static const char* kTags[] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z",
                                  "threadIdx.x", "threadIdx.y", "threadIdx.z"};
    std::vector<Expr> args{StringImm::make(name)};
    std::string dims;
    int64_t threads = 1;
    for (int i = 0; i < 6; ++i) {
      auto it = le.extent.find(kTags[i]);
      int64_t e = it == le.extent.end() ? 1 : it->second;
      if (i >= 3) threads *= e;
      args.push_back(make_const(DataType::Int(64), e));
      dims += (i ? "," : "") + std::to_string(e);
    }
    for (const auto& [tag, e] : le.extent) {
      KILN_USER_CHECK(std::find(std::begin(kTags), std::end(kTags), tag) != std::end(kTags))
          << "split_host_device " << f_->name << ": unknown thread axis '" << tag
          << "' (known: blockIdx.x/y/z, threadIdx.x/y/z)";
    }
    args.push_back(make_const(DataType::Int(64), int64_t{0}));  // dynamic shared memory bytes
    for (const Var& v : params) args.push_back(v);
    PrimFunc k = PrimFunc::make(
        name, params, {}, region,
        {{"device_kernel", "1"}, {"launch", dims}, {"threads_per_block", std::to_string(threads)}});
    for (const auto& [key, value] : f_->attrs)
      if (key == "fast_math") k = k.with_attr(key, value);
    kernels.push_back(k);
    return Evaluate::make(
        Call::make(DataType::Int(32), builtin::kDeviceLaunch, args, CallKind::kIntrinsic));
  }

 private:
  const PrimFunc& f_;
};

}  // namespace

HostDeviceSplit split_host_device(const PrimFunc& f) {
  KILN_USER_CHECK(f.defined()) << "split_host_device: undefined function";
  Splitter s(f);
  Stmt body = s.mutate(f->body);
  HostDeviceSplit r;
  r.host = body.same_as(f->body) ? f : f.with_body(body);
  r.kernels = std::move(s.kernels);
  return r;
}

}  // namespace kiln::tir
