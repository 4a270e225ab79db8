// unroll: replaces kUnrolled loops of constant extent (<= max_extent) by a sequence of copies of
// their body, the loop var substituted by min + k in copy k and the variables bound inside
// renamed per copy, then simplifies the copies. With auto_max_step > 0, innermost serial loops
// of small constant extent are unrolled as well. Loops are visited innermost first so nested
// unrolled loops multiply out. Unrolled loops that cannot be unrolled become serial.
#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/tir/transform.h"
#include "loop_utils.h"

namespace kiln::tir {
namespace {

bool has_loop(const Stmt& s) {
  bool found = false;
  post_order_visit(s, [&](const IRNode* n) { found |= n->kind == NodeKind::For; });
  return found;
}

class Unroller : public IRMutator {
 public:
  explicit Unroller(const UnrollOptions& opt) : opt_(opt) {}

 protected:
  using IRMutator::visit;
  Stmt visit(const For* op) override {
    Stmt s = IRMutator::visit(op);
    op = s.as<For>();
    if (!op) return s;
    auto ext = as_const_int(op->extent);
    bool want = op->for_kind == ForKind::kUnrolled ||
                (op->for_kind == ForKind::kSerial && opt_.auto_max_step > 0 && ext &&
                 *ext <= opt_.auto_max_step && !has_loop(op->body));
    if (!want) return s;
    if (!ext || *ext > opt_.max_extent || *ext < 0) {
      return For::make(op->loop_var, op->min, op->extent, ForKind::kSerial, op->body,
                       op->thread_tag);
    }
    std::vector<Stmt> copies;
    for (int64_t k = 0; k < *ext; ++k) {
      Expr value = op->min + make_const(op->loop_var.dtype(), k);
      Stmt c = substitute(op->body, {{op->loop_var, value}});
      copies.push_back(k == 0 ? c : renew_defs(c));
    }
    if (copies.empty()) return make_no_op();
    return arith::simplify(SeqStmt::make(std::move(copies)));
  }

 private:
  UnrollOptions opt_;
};

}  // namespace

PrimFunc unroll(PrimFunc f, const UnrollOptions& opt) {
  Stmt body = Unroller(opt).mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace kiln::tir
