// bind_extern_stages: the extern stages of a GPU function run on one GPU thread (see
// transform.h).
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/tir/transform.h"

namespace kiln::tir {
namespace {

Stmt on_one_thread(const Stmt& s) {
  Stmt r = s;
  for (const char* tag : {"threadIdx.x", "blockIdx.x"}) {
    const Expr zero = make_const(DataType::Int(32), 0), one = make_const(DataType::Int(32), 1);
    IterVar iv(Range(zero, one), Var(std::string(tag) + ".single", DataType::Int(32)),
               IterVarType::kThreadIndex, tag);
    r = AttrStmt::make(iv, attr::kThreadExtent, one,
                       For::make(iv->var, zero, one, ForKind::kThreadBinding, r, tag));
  }
  return r;
}

class Binder : public IRMutator {
 protected:
  using IRMutator::visit;
  Stmt visit(const AttrStmt* op) override {
    if (op->key == attr::kThreadExtent) return Stmt(op);  // a kernel already
    if (op->key == attr::kExternScope) return on_one_thread(Stmt(op));
    return IRMutator::visit(op);
  }
};

}  // namespace

PrimFunc bind_extern_stages(PrimFunc f) {
  KILN_USER_CHECK(f.defined()) << "bind_extern_stages: undefined function";
  Stmt body = Binder().mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace kiln::tir
