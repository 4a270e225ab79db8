// simplify: the arith simplifier over the whole body (arith::simplify(Stmt) binds loop vars to
// their ranges, folds constants and provable conditions, and drops extent-0 loops).
#include "kiln/arith/analyzer.h"
#include "kiln/tir/transform.h"

namespace kiln::tir {

PrimFunc simplify(PrimFunc f) {
  Stmt body = arith::simplify(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace kiln::tir
