// Tensorize (TVM paper section 4.3): matching a loop nest against a declared tensor intrinsic
// and binding the intrinsic's buffers to the regions the nest touches.
//
// 1. Regions. Every root axis r of the stage has a value in leaf variables; setting the leaves
//    inside the tensorized axis to their minimum gives its offset min_r (an expression of the
//    outer loops), and the rest must be a single inner leaf (its extent is the region's extent
//    along r) or nothing (r is fixed inside the region). A nest whose inner loops mix axes
//    (fused) or may run past an axis's end (a split that does not divide) is rejected.
// 2. Axes. The intrinsic's axes map onto the stage's trailing axes, its reduction axes onto
//    the trailing reduction axes; their extents must agree and the stage's leading axes must
//    be fixed in the region. Substituting r -> min_r + (its intrinsic axis) into the stage's
//    body leaves an expression over the intrinsic's variables.
// 3. Body. That expression and the intrinsic's body are walked together: same node kinds,
//    types, call names, constants; a stage tensor read where the intrinsic reads placeholder
//    P binds P to it, and the indices must agree up to an offset that does not depend on the
//    intrinsic's variables (simplified by the analyzer) — the offsets are the region's mins —
//    or be a constant multiple c of the intrinsic's index plus such an offset (a strided
//    read: the view's stride is then c times the tensor's).
//    The first difference is reported with both sub-expressions.
// 4. Binding. Each intrinsic statement is wrapped in one buffer_bind_scope attribute per
//    operand (the tensor, the region mins, the view's data / elem_offset / stride variables,
//    the steps);
//    storage_flatten replaces the variables by the tensor's storage, flat offset and strides,
//    and checks strides the intrinsic declared as constants.
#include "tensorize.h"

#include <sstream>

#include "kiln/ir/printer.h"
#include "kiln/ir/structural.h"

namespace kiln::te::detail {

namespace {

/// Walks the stage's expression and the intrinsic's together; records the first mismatch.
class BodyMatcher {
 public:
  BodyMatcher(const TensorIntrinNode* intrin, const VarSet& ivars, arith::Analyzer* ana)
      : intrin_(intrin), ivars_(ivars), ana_(ana) {
    bound.resize(intrin->inputs.size());
    mins.resize(intrin->inputs.size());
    scales.resize(intrin->inputs.size());
  }

  std::string why;
  Expr at_stage, at_intrin;
  std::vector<Producer> bound;          ///< per intrinsic input: the stage's tensor
  std::vector<std::vector<Expr>> mins;  ///< per intrinsic input: that tensor's region mins
  /// per intrinsic input, per operand dimension: the tensor's index step per intrinsic step
  std::vector<std::vector<int64_t>> scales;

  bool match(const Expr& s, const Expr& i) {
    if (s.dtype() != i.dtype()) {
      return fail(s, i, "type " + s.dtype().str() + " where the intrinsic has " + i.dtype().str());
    }
    if (s.kind() != i.kind()) {
      return fail(s, i,
                  std::string("operation ") + node_kind_name(s.kind()) +
                      " where the intrinsic has " + node_kind_name(i.kind()));
    }
    switch (s.kind()) {
#define KILN_BINARY_NODE(T)                        \
  case NodeKind::T: {                              \
    const auto *a = s.as<T>(), *b = i.as<T>();     \
    return match(a->a, b->a) && match(a->b, b->b); \
  }
#include "kiln/ir/node_kinds.def"
      case NodeKind::Cast:
        return match(s.as<Cast>()->value, i.as<Cast>()->value);
      case NodeKind::Not:
        return match(s.as<Not>()->a, i.as<Not>()->a);
      case NodeKind::Select: {
        const auto *a = s.as<Select>(), *b = i.as<Select>();
        return match(a->condition, b->condition) && match(a->true_value, b->true_value) &&
               match(a->false_value, b->false_value);
      }
      case NodeKind::Call: {
        const auto *a = s.as<Call>(), *b = i.as<Call>();
        if (a->name != b->name || a->args.size() != b->args.size())
          return fail(s, i, "call '" + a->name + "' where the intrinsic calls '" + b->name + "'");
        for (size_t k = 0; k < a->args.size(); ++k)
          if (!match(a->args[k], b->args[k])) return false;
        return true;
      }
      case NodeKind::ProducerLoad:
        return match_load(s, i);
      default:
        if (structural_equal(s, i)) return true;
        return fail(s, i, "a different value");
    }
  }

 private:
  bool fail(const Expr& s, const Expr& i, const std::string& why_text) {
    if (why.empty()) {
      why = why_text;
      at_stage = s;
      at_intrin = i;
    }
    return false;
  }

  bool uses_intrin_var(const Expr& e) const {
    return uses_var(e, [&](const Variable* v) { return ivars_.count(Var(v)) > 0; });
  }

  bool match_load(const Expr& s, const Expr& i) {
    const auto *a = s.as<ProducerLoad>(), *b = i.as<ProducerLoad>();
    size_t j = 0;
    while (j < intrin_->inputs.size() && intrin_->inputs[j].get() != b->producer.get()) ++j;
    KILN_ICHECK(j < intrin_->inputs.size()) << "intrinsic body reads a non-input";
    const std::string tname = a->producer->producer_name();
    const std::string pname = b->producer->producer_name();
    if (bound[j].defined() && bound[j].get() != a->producer.get()) {
      return fail(s, i,
                  "reads '" + tname + "' where the intrinsic reads '" + pname + "', which is '" +
                      bound[j]->producer_name() + "' elsewhere");
    }
    const size_t m = a->indices.size(), n = b->indices.size();
    if (n > m) {
      return fail(s, i,
                  "reads '" + tname + "' of rank " + std::to_string(m) +
                      " where the intrinsic reads '" + pname + "' of rank " + std::to_string(n));
    }
    std::vector<Expr> lo(m);
    std::vector<int64_t> scale(n, 1);
    for (size_t d = 0; d < m; ++d) {
      Expr e = d < m - n ? a->indices[d] : a->indices[d] - b->indices[d - (m - n)];
      e = ana_->simplify(e);
      if (d >= m - n && uses_intrin_var(e)) {
        // A constant multiple c > 1 of the intrinsic's index (a strided access, e.g. a
        // convolution's stride): the view's stride along it is c times the tensor's.
        if (int64_t c = step_of(a->indices[d], b->indices[d - (m - n)]); c > 1) {
          e = ana_->simplify(a->indices[d] -
                             make_const(a->indices[d].dtype(), c) * b->indices[d - (m - n)]);
          scale[d - (m - n)] = c;
        }
      }
      if (uses_intrin_var(e)) {
        std::string what = d < m - n ? "varies with the intrinsic's loops, but the intrinsic's "
                                       "operand has no dimension for it"
                                     : "is not the intrinsic's index (times a constant) plus an "
                                       "offset";
        return fail(
            s, i, "index pattern: dimension " + std::to_string(d) + " of '" + tname + "' " + what);
      }
      lo[d] = e;
    }
    if (bound[j].defined()) {
      for (size_t d = 0; d < m; ++d) {
        if (!ana_->can_prove(mins[j][d] == lo[d]))
          return fail(s, i, "reads '" + tname + "' at two different offsets");
      }
      if (scales[j] != scale) return fail(s, i, "reads '" + tname + "' at two different steps");
      return true;
    }
    bound[j] = a->producer;
    mins[j] = lo;
    scales[j] = scale;
    return true;
  }

  /// How much `index` grows when the intrinsic's variable `ivar` grows by one, when that is a
  /// constant (0 otherwise).
  int64_t step_of(const Expr& index, const Expr& ivar) {
    const Variable* v = ivar.as<Variable>();
    if (!v) return 0;
    VarMap<Expr> next;
    next[Var(v)] = ivar + make_const(ivar.dtype(), 1);
    auto c = as_const_int(ana_->simplify(substitute(index, next) - index));
    return c ? *c : 0;
  }

  const TensorIntrinNode* intrin_;
  const VarSet& ivars_;
  arith::Analyzer* ana_;
};

/// Wraps `s` in the bind attribute of view `b` to tensor `t` at region `mins`, stepping
/// `scales[d]` elements of the tensor per element of the view along its dimension d (empty: 1).
Stmt bind_buffer(const IntrinBuffer& b, const Producer& t, const std::vector<Expr>& mins,
                 const std::vector<int64_t>& scales, const std::string& what, Stmt s) {
  std::vector<Expr> v = {StringImm::make(what + ", operand '" + b.tensor.name() + "'"), b.data,
                         b.elem_offset, Expr(static_cast<int>(b.strides.size()))};
  for (const Expr& e : b.strides) v.push_back(e);
  for (size_t d = 0; d < b.strides.size(); ++d)
    v.push_back(Expr(static_cast<int>(scales.empty() ? 1 : scales[d])));
  for (const Expr& e : mins) v.push_back(e);
  return AttrStmt::make(t, kBufferBindScope,
                        Call::make(DataType::Int(32), builtin::kTuple, v, CallKind::kPureIntrinsic),
                        std::move(s));
}

}  // namespace

int tensorized_leaf(const Stage& st) {
  for (size_t i = 0; i < st->leaf_iter_vars.size(); ++i) {
    auto it = st->iter_var_attrs.find(st->leaf_iter_vars[i].get());
    if (it != st->iter_var_attrs.end() && it->second.tensor_intrin) return static_cast<int>(i);
  }
  return -1;
}

TensorizedNest make_tensorize(const Stage& st, size_t loc,
                              const std::unordered_map<const IterVarNode*, Expr>& values,
                              const BoundMap& bounds, const std::vector<Expr>& bodies,
                              arith::Analyzer* ana) {
  const IterVar& tax = st->leaf_iter_vars[loc];
  const TensorIntrinNode* in = st->iter_var_attrs.at(tax.get()).tensor_intrin.get();
  std::ostringstream where_os;
  where_os << "tensorize: stage '" << st->name() << "' at axis '" << tax->var.name()
           << "' with intrinsic '" << in->name << "'";
  const std::string where = where_os.str();
  const auto* c = static_cast<const ComputeOpNode*>(st->op.get());
  const auto* ic = static_cast<const ComputeOpNode*>(in->op.get());
  KILN_USER_CHECK(c->num_outputs() == 1)
      << where << ": the stage has " << c->num_outputs() << " outputs, the intrinsic one";

  // 1. The region of every root axis inside the tensorized loops.
  VarMap<Expr> inner_min;
  std::unordered_map<const Variable*, const IterVarNode*> inner_leaf;
  for (size_t i = loc; i < st->leaf_iter_vars.size(); ++i) {
    const IterVar& l = st->leaf_iter_vars[i];
    inner_min[l->var] = bounds.at(l.get())->min;
    inner_leaf[l->var.get()] = l.get();
    auto it = st->iter_var_attrs.find(l.get());
    KILN_USER_CHECK(i == loc || it == st->iter_var_attrs.end() ||
                    it->second.for_kind == ForKind::kSerial)
        << where << ": loop '" << l->var.name()
        << "' inside the tensorized axis is annotated (parallel, vectorized or unrolled); the "
           "intrinsic replaces these loops";
  }
  struct AxisRegion {
    Expr min;
    Expr extent;  ///< 1 when fixed
  };
  auto region_of = [&](const IterVar& r) {
    Expr v = values.at(r.get());
    Expr mn = ana->simplify(substitute(v, inner_min));
    Expr inner = ana->simplify(v - mn);
    if (is_zero(inner)) return AxisRegion{mn, Expr(1)};
    // The one inner leaf the axis moves with, counted from its loop's start (a loop of a
    // stage computed at another starts at an offset).
    auto it = inner_leaf.end();
    for (auto l = inner_leaf.begin(); l != inner_leaf.end(); ++l) {
      Var lv(l->first);
      if (is_zero(ana->simplify(inner - (lv - inner_min.at(lv))))) it = l;
    }
    KILN_USER_CHECK(it != inner_leaf.end())
        << where << ": axis '" << r->var.name() << "' is " << inner
        << " inside the tensorized loops; each loop inside must be one whole axis (or one part "
           "of a split), not fused or split twice";
    Expr ext = bounds.at(it->second)->extent;
    const Range& dom = bounds.at(r.get());
    KILN_USER_CHECK(ana->can_prove(mn + ext <= dom->min + dom->extent))
        << where << ": the tensorized loops cover " << ext << " values of axis '" << r->var.name()
        << "' from " << mn << ", which can run past its extent " << dom->extent
        << " (a split that does not divide the axis); tensorize needs whole tiles";
    return AxisRegion{mn, ext};
  };

  // 2. Map the intrinsic's axes onto the stage's trailing axes.
  VarMap<Expr> to_intrin;
  VarSet ivars;
  auto map_axes = [&](const std::vector<IterVar>& sa, const std::vector<IterVar>& ia,
                      const char* kind, std::vector<Expr>* mins) {
    KILN_USER_CHECK(ia.size() <= sa.size()) << where << ": the intrinsic has " << ia.size() << " "
                                            << kind << " axes, the stage " << sa.size();
    const size_t off = sa.size() - ia.size();
    for (size_t d = 0; d < sa.size(); ++d) {
      AxisRegion reg = region_of(sa[d]);
      if (mins) mins->push_back(reg.min);
      if (d < off) {
        KILN_USER_CHECK(is_one(reg.extent))
            << where << ": " << kind << " axis '" << sa[d]->var.name() << "' varies (extent "
            << reg.extent << ") inside the tensorized loops, but the intrinsic has no axis for "
            << "it";
        to_intrin[sa[d]->var] = reg.min;
        continue;
      }
      const IterVar& iv = ia[d - off];
      KILN_USER_CHECK(ana->can_prove(reg.extent == iv->dom->extent))
          << where << ": extent mismatch: " << kind << " axis '" << sa[d]->var.name()
          << "' has extent " << reg.extent << " inside the tensorized loops, the intrinsic's axis '"
          << iv->var.name() << "' has extent " << iv->dom->extent;
      ana->bind(iv->var, iv->dom);
      ivars.insert(iv->var);
      Expr x = iv->var;
      if (!is_zero(iv->dom->min)) x = x - iv->dom->min;
      x = cast(sa[d]->var.dtype(), x);  // e.g. int64 axes of a shape given in int64
      to_intrin[sa[d]->var] = is_zero(reg.min) ? x : reg.min + x;
    }
  };
  std::vector<Expr> out_mins;
  map_axes(c->axis, ic->axis, "data-parallel", &out_mins);

  const Reduce* sr = bodies[0].as<Reduce>();
  const Reduce* ir = ic->body[0].as<Reduce>();
  KILN_USER_CHECK((sr != nullptr) == (ir != nullptr))
      << where << ": the stage " << (sr ? "is a reduction" : "is not a reduction")
      << " but the intrinsic " << (ir ? "is" : "is not");
  Expr s_expr = bodies[0], i_expr = ic->body[0];
  if (sr) {
    map_axes(c->reduce_axis, ic->reduce_axis, "reduction", nullptr);
    KILN_USER_CHECK(sr->source.size() == 1 && ir->source.size() == 1)
        << where << ": tuple reductions cannot be tensorized";
    KILN_USER_CHECK(is_one(sr->condition) || !sr->condition.defined())
        << where << ": the stage's reduction has a condition (" << sr->condition
        << "); tensorize needs an unconditional reduction";
    s_expr = sr->source[0];
    i_expr = ir->source[0];
  }

  // 3. Walk the bodies together.
  BodyMatcher m(in, ivars, ana);
  if (!m.match(substitute(s_expr, to_intrin), i_expr)) {
    KILN_ERROR << where << ": the loop nest does not compute what the intrinsic declares: " << m.why
               << "\n  stage:     " << m.at_stage << "\n  intrinsic: " << m.at_intrin;
  }

  if (sr) {
    VarMap<Expr> lr;
    lr[ir->combiner->lhs[0]] = sr->combiner->lhs[0];
    lr[ir->combiner->rhs[0]] = sr->combiner->rhs[0];
    KILN_USER_CHECK(
        structural_equal(sr->combiner->result[0], substitute(ir->combiner->result[0], lr)) &&
        structural_equal(sr->combiner->identity[0], ir->combiner->identity[0]))
        << where << ": the stage reduces with " << sr->combiner->result[0] << " (identity "
        << sr->combiner->identity[0] << "), the intrinsic with " << ir->combiner->result[0]
        << " (identity " << ir->combiner->identity[0] << ")";
  }

  // 4. Bind the operands.
  Producer out(st->origin_op.output(0).get());
  auto bind_outputs = [&](Stmt s) {
    return bind_buffer(in->buffers.back(), out, out_mins, {}, where, std::move(s));
  };
  auto bind_all = [&](Stmt s) {
    if (!s.defined()) return s;
    s = bind_outputs(s);
    for (size_t j = in->inputs.size(); j-- > 0;)
      s = bind_buffer(in->buffers[j], m.bound[j], m.mins[j], m.scales[j], where, s);
    return s;
  };
  TensorizedNest r;
  r.body = bind_all(in->lowering.body);
  r.update = bind_all(in->lowering.update);
  if (in->lowering.reset.defined()) r.reset = bind_outputs(in->lowering.reset);
  return r;
}

}  // namespace kiln::te::detail
