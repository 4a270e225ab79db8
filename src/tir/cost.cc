// Kernel cost for the roofline of `kiln bench --profile` (cost.h): a walk over the loop nest
// that multiplies the trip counts of the loops around each store with the floating-point
// operations of its value, and the sizes of the buffer parameters.
#include "kiln/tir/cost.h"

#include <algorithm>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"

namespace kiln::tir {

namespace {

using namespace kiln::ir;  // NOLINT

/// Float operations in `e`, one per lane.
double expr_flops(const Expr& e) {
  double n = 0;
  post_order_visit(e, [&](const IRNode* node) {
    switch (node->kind) {
      case NodeKind::Add:
      case NodeKind::Sub:
      case NodeKind::Mul:
      case NodeKind::Div:
      case NodeKind::Min:
      case NodeKind::Max:
      case NodeKind::Call: {
        const auto* x = static_cast<const BaseExprNode*>(node);
        if (x->dtype.is_float()) n += x->dtype.lanes();
        break;
      }
      default:
        break;
    }
  });
  return n;
}

class CostWalker : public IRVisitor {
 public:
  double flops = 0;

 protected:
  using IRVisitor::visit;
  void visit(const For* op) override {
    double trips = 1;
    if (auto c = as_const_int(op->extent)) {
      trips = static_cast<double>(*c);
    } else {
      arith::ConstIntBound b = ana_.const_int_bound(op->extent);
      if (b.max_value != arith::ConstIntBound::kPosInf) trips = static_cast<double>(b.max_value);
    }
    trips = std::max(trips, 0.0);
    if (as_const_int(op->min) && as_const_int(op->extent))
      ana_.bind(op->loop_var, Range(op->min, op->extent));  // bounds inner extents
    const double saved = scale_;
    scale_ *= trips;
    visit_stmt(op->body);
    scale_ = saved;
  }
  void visit(const Store* op) override {
    flops += scale_ * expr_flops(op->value);
    IRVisitor::visit(op);
  }

 private:
  double scale_ = 1;
  arith::Analyzer ana_;
};

}  // namespace

KernelCost kernel_cost(const PrimFunc& f) {
  KernelCost c;
  CostWalker w;
  w.visit_stmt(f->body);
  c.flops = w.flops;
  for (const auto& [var, buf] : f->buffer_map) {
    double n = buf->dtype.bytes();
    for (const Expr& d : buf->shape) {
      auto v = as_const_int(d);
      n *= v ? static_cast<double>(*v) : 0.0;
    }
    c.bytes += n;
  }
  return c;
}

}  // namespace kiln::tir
