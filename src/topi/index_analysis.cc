// Index analysis through inlined injective producers (index_analysis.h).
#include "index_analysis.h"

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi::detail {

using namespace kiln::ir;  // NOLINT

bool uses(const Expr& e, const Var& v) {
  return uses_var(e, [&](const Variable* x) { return x == v.get(); });
}

namespace {

class InjectiveInliner : public IRMutator {
 protected:
  using IRMutator::visit;
  Expr visit(const ProducerLoad* op) override {
    Expr e = IRMutator::visit(op);
    const auto* pl = e.as<ProducerLoad>();
    const auto* t = dynamic_cast<const te::TensorNode*>(pl->producer.get());
    if (!t || t->op->kind != te::OpKind::kCompute || !is_injective_tag(t->op->tag)) return e;
    const auto* c = static_cast<const te::ComputeOpNode*>(t->op.get());
    if (c->body.size() != 1 || !c->reduce_axis.empty() || c->axis.size() != pl->indices.size())
      return e;
    VarMap<Expr> m;
    for (size_t i = 0; i < c->axis.size(); ++i) m[c->axis[i]->var] = pl->indices[i];
    return mutate(substitute(c->body[0], m));
  }
};

}  // namespace

std::optional<int64_t> coefficient(const Expr& e, const Var& v) {
  if (!uses(e, v)) return 0;
  switch (e->kind) {
    case NodeKind::Variable:
      return 1;
    case NodeKind::Cast:
      return coefficient(static_cast<const Cast*>(e.get())->value, v);
    case NodeKind::Add:
    case NodeKind::Sub: {
      const auto* b = static_cast<const Add*>(e.get());
      auto x = coefficient(b->a, v), y = coefficient(b->b, v);
      if (!x || !y) return std::nullopt;
      return e->kind == NodeKind::Add ? *x + *y : *x - *y;
    }
    case NodeKind::Mul: {
      const auto* b = static_cast<const Mul*>(e.get());
      auto ca = as_const_int(b->a), cb = as_const_int(b->b);
      if (cb) {
        auto x = coefficient(b->a, v);
        return x ? std::optional<int64_t>(*x * *cb) : std::nullopt;
      }
      if (ca) {
        auto y = coefficient(b->b, v);
        return y ? std::optional<int64_t>(*y * *ca) : std::nullopt;
      }
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

Expr inline_injective_loads(const Expr& e) { return InjectiveInliner().mutate(e); }

bool contiguous_in(const Expr& e, const Var& v) {
  bool ok = true;
  post_order_visit(inline_injective_loads(e), [&](const IRNode* n) {
    if (n->kind != NodeKind::ProducerLoad) return;
    const auto* pl = static_cast<const ProducerLoad*>(n);
    for (size_t d = 0; d + 1 < pl->indices.size(); ++d) ok = ok && !uses(pl->indices[d], v);
    if (!pl->indices.empty() && uses(pl->indices.back(), v))
      ok = ok && coefficient(pl->indices.back(), v) == std::optional<int64_t>(1);
  });
  return ok;
}

}  // namespace kiln::topi::detail
