// Schedule construction and the schedule primitives. Each primitive records data on a stage
// (relations, leaf order, annotations, attachment) after checking its preconditions; bound
// inference and loop generation (schedule_ops.cc) interpret the records. cache_read and
// cache_write also rewrite the dataflow: they add a stage and replace readers' operations,
// while every stage keeps its original operation, whose tensors name its storage.
#include "kiln/te/schedule.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "kiln/ir/functor.h"
#include "kiln/ir/printer.h"

namespace kiln::te {

namespace {

std::string iv_name(const IterVar& iv) { return iv.defined() ? iv->var.name() : "<undefined>"; }

void check_leaf(const StageNode* s, const IterVar& iv, const char* prim) {
  KILN_USER_CHECK(iv.defined()) << prim << ": undefined axis on stage '" << s->name() << "'";
  KILN_USER_CHECK(s->leaf_index(iv) >= 0)
      << prim << ": axis '" << iv_name(iv) << "' is not a loop of stage '" << s->name()
      << "' (it was split or fused already, or belongs to another stage)";
}

void check_not_placeholder(const StageNode* s, const char* prim) {
  KILN_USER_CHECK(s->op->kind != OpKind::kPlaceholder)
      << prim << ": stage '" << s->name() << "' is a placeholder (an input) and has no loops";
}

/// Replaces ProducerLoads of `from` by ProducerLoads of `to` with the same indices.
class ReplaceTensor : public IRMutator {
 public:
  ReplaceTensor(const TensorNode* from, Tensor to) : from_(from), to_(std::move(to)) {}
  bool found = false;

 protected:
  using IRMutator::visit;
  Expr visit(const ProducerLoad* op) override {
    Expr e = IRMutator::visit(op);
    const ProducerLoad* pl = e.as<ProducerLoad>();
    if (pl->producer.get() != from_) return e;
    found = true;
    return ProducerLoad::make(Producer(to_.get()), pl->indices);
  }

 private:
  const TensorNode* from_;
  Tensor to_;
};

Stage make_stage(const Operation& op) {
  auto n = std::make_shared<StageNode>();
  n->op = op;
  n->origin_op = op;
  n->all_iter_vars = op->root_iter_vars();
  n->leaf_iter_vars = n->all_iter_vars;
  return Stage(n);
}

}  // namespace

int StageNode::leaf_index(const IterVar& iv) const {
  for (size_t i = 0; i < leaf_iter_vars.size(); ++i)
    if (leaf_iter_vars[i].same_as(iv)) return static_cast<int>(i);
  return -1;
}

const std::vector<IterVar>& Stage::op_axis() const {
  static const std::vector<IterVar> kEmpty;
  if (n_->op->kind != OpKind::kCompute) return kEmpty;
  return static_cast<const ComputeOpNode*>(n_->op.get())->axis;
}
const std::vector<IterVar>& Stage::op_reduce_axis() const {
  static const std::vector<IterVar> kEmpty;
  if (n_->op->kind != OpKind::kCompute) return kEmpty;
  return static_cast<const ComputeOpNode*>(n_->op.get())->reduce_axis;
}

namespace {
std::pair<IterVar, IterVar> do_split(StageNode* s, const IterVar& parent, Expr factor, Expr nparts,
                                     const char* prim, bool shift_tail = false) {
  check_not_placeholder(s, prim);
  check_leaf(s, parent, prim);
  Expr amount = factor.defined() ? factor : nparts;
  KILN_USER_CHECK(amount.defined() && amount.dtype().is_int())
      << prim << ": the factor for axis '" << iv_name(parent) << "' of stage '" << s->name()
      << "' must be an integer";
  if (auto v = as_const_int(amount))
    KILN_USER_CHECK(*v > 0) << prim << ": factor must be positive, got " << *v << " (axis '"
                            << iv_name(parent) << "' of stage '" << s->name() << "')";
  DataType t = parent->var.dtype();
  amount = cast(t, amount);
  IterVarType it = parent->iter_type;
  IterVar outer(Range(), Var(parent->var.name() + ".outer", t), it);
  IterVar inner(Range(), Var(parent->var.name() + ".inner", t), it);
  IterVarRelation r;
  r.kind = IterVarRelation::kSplit;
  r.parent = parent;
  r.outer = outer;
  r.inner = inner;
  (factor.defined() ? r.factor : r.nparts) = amount;
  KILN_USER_CHECK(!shift_tail || it == IterVarType::kDataPar)
      << prim << ": axis '" << iv_name(parent) << "' of stage '" << s->name()
      << "' is a reduction axis; a shifted tail would accumulate its overlap twice";
  r.shift_tail = shift_tail;
  s->relations.push_back(r);
  int pos = s->leaf_index(parent);
  s->leaf_iter_vars[pos] = outer;
  s->leaf_iter_vars.insert(s->leaf_iter_vars.begin() + pos + 1, inner);
  s->all_iter_vars.push_back(outer);
  s->all_iter_vars.push_back(inner);
  return {outer, inner};
}
}  // namespace

std::pair<IterVar, IterVar> Stage::split(const IterVar& parent, Expr factor, bool shift_tail) {
  return do_split(n_.get(), parent, std::move(factor), Expr(), "split", shift_tail);
}

std::pair<IterVar, IterVar> Stage::split_nparts(const IterVar& parent, Expr nparts) {
  return do_split(n_.get(), parent, Expr(), std::move(nparts), "split_nparts");
}

std::tuple<IterVar, IterVar, IterVar, IterVar> Stage::tile(const IterVar& x, const IterVar& y,
                                                           Expr x_factor, Expr y_factor) {
  auto [xo, xi] = split(x, std::move(x_factor));
  auto [yo, yi] = split(y, std::move(y_factor));
  reorder({xo, yo, xi, yi});
  return {xo, yo, xi, yi};
}

IterVar Stage::fuse(const IterVar& outer, const IterVar& inner) {
  StageNode* s = n_.get();
  check_not_placeholder(s, "fuse");
  check_leaf(s, outer, "fuse");
  check_leaf(s, inner, "fuse");
  int po = s->leaf_index(outer), pi = s->leaf_index(inner);
  KILN_USER_CHECK(pi == po + 1) << "fuse: axes '" << iv_name(outer) << "' and '" << iv_name(inner)
                                << "' of stage '" << s->name()
                                << "' must be adjacent loops with the first directly outside "
                                   "the second (reorder them first)";
  KILN_USER_CHECK(outer->iter_type == inner->iter_type)
      << "fuse: cannot fuse a reduction axis with a data-parallel axis ('" << iv_name(outer)
      << "', '" << iv_name(inner) << "' of stage '" << s->name() << "')";
  DataType t = outer->var.dtype();
  IterVar fused(Range(), Var(outer->var.name() + "." + inner->var.name() + ".fused", t),
                outer->iter_type);
  IterVarRelation r;
  r.kind = IterVarRelation::kFuse;
  r.outer = outer;
  r.inner = inner;
  r.fused = fused;
  s->relations.push_back(r);
  s->leaf_iter_vars[po] = fused;
  s->leaf_iter_vars.erase(s->leaf_iter_vars.begin() + pi);
  s->all_iter_vars.push_back(fused);
  return fused;
}

IterVar Stage::fuse(const std::vector<IterVar>& axes) {
  KILN_USER_CHECK(!axes.empty()) << "fuse: no axes given for stage '" << n_->name() << "'";
  IterVar f = axes[0];
  for (size_t i = 1; i < axes.size(); ++i) f = fuse(f, axes[i]);
  return f;
}

Stage& Stage::reorder(const std::vector<IterVar>& order) {
  StageNode* s = n_.get();
  std::vector<int> pos;
  std::unordered_set<const IterVarNode*> seen;
  for (const IterVar& iv : order) {
    check_leaf(s, iv, "reorder");
    KILN_USER_CHECK(seen.insert(iv.get()).second)
        << "reorder: axis '" << iv_name(iv) << "' appears twice (stage '" << s->name() << "')";
    pos.push_back(s->leaf_index(iv));
  }
  std::sort(pos.begin(), pos.end());
  for (size_t i = 0; i < order.size(); ++i) s->leaf_iter_vars[pos[i]] = order[i];
  return *this;
}

namespace {
/// True if stage `consumer` reads `producer`'s outputs, directly or through other stages.
bool consumes(const Operation& consumer, const OperationNode* producer) {
  for (const Operation& op : post_dfs_order({consumer}))
    if (op.get() == producer) return op.get() != consumer.get();
  return false;
}
}  // namespace

Stage& Stage::compute_at(const Stage& parent, const IterVar& scope) {
  StageNode* s = n_.get();
  check_not_placeholder(s, "compute_at");
  KILN_USER_CHECK(parent.defined() && !parent.same_as(*this))
      << "compute_at: stage '" << s->name() << "' cannot be computed at itself";
  KILN_USER_CHECK(!s->is_output) << "compute_at: stage '" << s->name()
                                 << "' is an output of the schedule; only intermediate stages "
                                    "can be computed inside another stage";
  KILN_USER_CHECK(parent->leaf_index(scope) >= 0)
      << "compute_at: axis '" << iv_name(scope) << "' is not a loop of stage '" << parent->name()
      << "'";
  KILN_USER_CHECK(consumes(parent->op, s->op.get()))
      << "compute_at: stage '" << parent->name() << "' does not read stage '" << s->name()
      << "', so '" << s->name() << "' cannot be computed inside it";
  s->attach_type = AttachType::kScope;
  s->attach_stage = parent;
  s->attach_ivar = scope;
  return *this;
}

Stage& Stage::compute_inline() {
  StageNode* s = n_.get();
  KILN_USER_CHECK(s->op->kind == OpKind::kCompute)
      << "compute_inline: stage '" << s->name() << "' is not a compute stage";
  KILN_USER_CHECK(!s->is_output) << "compute_inline: stage '" << s->name()
                                 << "' is an output of the schedule and must be stored";
  KILN_USER_CHECK(static_cast<const ComputeOpNode*>(s->op.get())->reduce_axis.empty())
      << "compute_inline: stage '" << s->name() << "' is a reduction and cannot be inlined";
  s->attach_type = AttachType::kInline;
  s->attach_stage = Stage();
  s->attach_ivar = IterVar();
  return *this;
}

Stage& Stage::compute_root() {
  n_->attach_type = AttachType::kGroupRoot;
  n_->attach_stage = Stage();
  n_->attach_ivar = IterVar();
  return *this;
}

Stage& Stage::set_scope(const std::string& scope) {
  KILN_USER_CHECK(scope.empty() || scope == "global" || scope == "local" || scope == "shared")
      << "set_scope: unknown storage scope '" << scope << "' for stage '" << n_->name()
      << "' (expected global, local or shared)";
  n_->scope = scope == "global" ? "" : scope;
  return *this;
}

namespace {
Stage& annotate(Stage& st, const IterVar& iv, ForKind k, const char* prim) {
  check_leaf(st.get(), iv, prim);
  st->iter_var_attrs[iv.get()].for_kind = k;
  return st;
}
}  // namespace

Stage& Stage::parallel(const IterVar& iv) {
  KILN_USER_CHECK(iv.defined() && iv->iter_type != IterVarType::kCommReduce)
      << "parallel: axis '" << iv_name(iv) << "' of stage '" << n_->name()
      << "' is a reduction axis; parallel loops must be data-parallel";
  return annotate(*this, iv, ForKind::kParallel, "parallel");
}
Stage& Stage::vectorize(const IterVar& iv) {
  return annotate(*this, iv, ForKind::kVectorized, "vectorize");
}
Stage& Stage::unroll(const IterVar& iv) {
  return annotate(*this, iv, ForKind::kUnrolled, "unroll");
}

Stage& Stage::pragma(const IterVar& iv, const std::string& key, Expr value) {
  check_leaf(n_.get(), iv, "pragma");
  KILN_USER_CHECK(!key.empty()) << "pragma: empty key on stage '" << n_->name() << "'";
  n_->iter_var_attrs[iv.get()].pragmas.emplace_back(key, value);
  return *this;
}

Stage& Stage::prefetch(const Tensor& t, const IterVar& iv, std::vector<Expr> index, int locality) {
  check_leaf(n_.get(), iv, "prefetch");
  KILN_USER_CHECK(t.defined() && index.size() == t->shape.size())
      << "prefetch: tensor '" << (t.defined() ? t.name() : std::string("?")) << "' has "
      << (t.defined() ? t->shape.size() : 0) << " dimensions, got " << index.size()
      << " indices (stage '" << n_->name() << "', axis '" << iv_name(iv) << "')";
  KILN_USER_CHECK(locality >= 0 && locality <= 3)
      << "prefetch: locality " << locality << " is not 0..3 (stage '" << n_->name() << "', axis '"
      << iv_name(iv) << "')";
  for (Expr& e : index) e = cast(DataType::Int(32), e);
  Expr addr = Call::make(DataType::Handle(), builtin::kAddressOf,
                         {ProducerLoad::make(Producer(t.get()), index)}, CallKind::kPureIntrinsic);
  n_->iter_var_attrs[iv.get()].prefetches.push_back(Evaluate::make(Call::make(
      DataType::Int(32), builtin::kPrefetch, {addr, Expr(locality)}, CallKind::kIntrinsic)));
  return *this;
}

Stage& Stage::bind(const IterVar& iv, const IterVar& thread) {
  check_leaf(n_.get(), iv, "bind");
  KILN_USER_CHECK(thread.defined() && thread->iter_type == IterVarType::kThreadIndex)
      << "bind: the target of axis '" << iv_name(iv) << "' of stage '" << n_->name()
      << "' must be a thread axis (te::thread_axis)";
  IterVarAttr& a = n_->iter_var_attrs[iv.get()];
  a.for_kind = ForKind::kThreadBinding;
  a.bind_thread = thread;
  return *this;
}

Stage& Stage::storage_align(const IterVar& axis, int factor, int offset) {
  const auto& ax = op_axis();
  int dim = -1;
  for (size_t i = 0; i < ax.size(); ++i)
    if (ax[i].same_as(axis)) dim = static_cast<int>(i);
  KILN_USER_CHECK(dim >= 0) << "storage_align: axis '" << iv_name(axis)
                            << "' is not a data-parallel root axis of stage '" << n_->name() << "'";
  KILN_USER_CHECK(factor > 0 && offset >= 0 && offset < factor)
      << "storage_align: need factor > 0 and 0 <= offset < factor, got factor " << factor
      << ", offset " << offset << " (stage '" << n_->name() << "')";
  n_->storage_aligns.push_back({dim, factor, offset});
  return *this;
}

// ---------------------------------------------------------------------------------------------

Stage Schedule::operator[](const Operation& op) const {
  KILN_USER_CHECK(op.defined()) << "schedule lookup of an undefined operation";
  auto it = n_->stage_map.find(op.get());
  KILN_USER_CHECK(it != n_->stage_map.end())
      << "operation '" << op->name << "' is not part of this schedule";
  return it->second;
}

Stage Schedule::operator[](const Tensor& t) const {
  KILN_USER_CHECK(t.defined()) << "schedule lookup of an undefined tensor";
  return (*this)[t.op()];
}

Schedule create_schedule(const std::vector<Operation>& outputs) {
  KILN_USER_CHECK(!outputs.empty()) << "create_schedule: no outputs";
  auto n = std::make_shared<ScheduleNode>();
  n->outputs = outputs;
  for (const Operation& op : post_dfs_order(outputs)) {
    Stage st = make_stage(op);
    n->stages.push_back(st);
    n->stage_map[op.get()] = st;
  }
  for (const Operation& op : outputs) n->stage_map[op.get()]->is_output = true;
  return Schedule(n);
}

Schedule create_schedule(const std::vector<Tensor>& outputs) {
  std::vector<Operation> ops;
  for (const Tensor& t : outputs) {
    KILN_USER_CHECK(t.defined()) << "create_schedule: undefined output tensor";
    bool dup = false;
    for (const Operation& o : ops) dup |= o.same_as(t.op());
    if (!dup) ops.push_back(t.op());
  }
  return create_schedule(ops);
}

namespace {
size_t stage_position(const ScheduleNode* s, const Stage& st) {
  for (size_t i = 0; i < s->stages.size(); ++i)
    if (s->stages[i].same_as(st)) return i;
  KILN_ICHECK(false) << "stage not in schedule";
  return 0;
}
}  // namespace

Tensor Schedule::cache_read(const Tensor& t, const std::string& scope,
                            const std::vector<Tensor>& readers) {
  Stage producer = (*this)[t];
  KILN_USER_CHECK(!readers.empty()) << "cache_read: no readers given for tensor " << t.name();
  std::vector<Expr> shape = t->shape;
  Tensor cache = compute(shape, FCompute([&](const std::vector<Var>& v) {
                           return t(std::vector<Expr>(v.begin(), v.end()));
                         }),
                         t.name() + "." + (scope.empty() ? "global" : scope));
  Stage cs = make_stage(cache.op());
  cs.set_scope(scope);
  for (const Tensor& r : readers) {
    Stage rs = (*this)[r];
    KILN_USER_CHECK(rs->op->kind == OpKind::kCompute)
        << "cache_read: reader '" << rs->name() << "' of tensor " << t.name()
        << " is not a compute stage";
    const auto* old = static_cast<const ComputeOpNode*>(rs->op.get());
    ReplaceTensor rep(t.get(), cache);
    auto* n = new ComputeOpNode();
    Operation nop(n);
    n->name = old->name;
    n->tag = old->tag;
    n->axis = old->axis;
    n->reduce_axis = old->reduce_axis;
    for (const Expr& b : old->body) n->body.push_back(rep.mutate(b));
    KILN_USER_CHECK(rep.found) << "cache_read: stage '" << rs->name() << "' does not read tensor "
                               << t.name();
    rs->op = nop;
    n_->stage_map[nop.get()] = rs;
  }
  n_->stages.insert(n_->stages.begin() + stage_position(n_.get(), producer) + 1, cs);
  n_->stage_map[cache.op().get()] = cs;
  return cache;
}

Tensor Schedule::cache_write(const Tensor& t, const std::string& scope) {
  Stage st = (*this)[t];
  KILN_USER_CHECK(st->op->kind == OpKind::kCompute)
      << "cache_write: stage '" << st->name() << "' is not a compute stage";
  KILN_USER_CHECK(st->relations.empty() && st->iter_var_attrs.empty())
      << "cache_write: stage '" << st->name()
      << "' already has schedule primitives applied; call cache_write before scheduling it";
  const auto* old = static_cast<const ComputeOpNode*>(st->op.get());
  KILN_USER_CHECK(old->num_outputs() == 1)
      << "cache_write: stage '" << st->name() << "' has several outputs (not supported)";
  // The cache stage computes the original body (same axes) into `scope`.
  auto* cn = new ComputeOpNode();
  Operation cop(cn);
  cn->name = st->name() + "." + (scope.empty() ? "global" : scope);
  cn->tag = old->tag;
  cn->axis = old->axis;
  cn->reduce_axis = old->reduce_axis;
  cn->body = old->body;
  Tensor cache = cop.output(0);
  // The original stage becomes a copy out of the cache, with fresh axes.
  auto* n = new ComputeOpNode();
  Operation nop(n);
  n->name = old->name;
  n->tag = old->tag;
  std::vector<Expr> idx;
  for (const IterVar& iv : old->axis) {
    n->axis.emplace_back(iv->dom, Var(iv->var.name(), iv->var.dtype()), IterVarType::kDataPar);
    idx.push_back(n->axis.back()->var);
  }
  n->body = {cache(idx)};
  st->op = nop;
  st->all_iter_vars = nop->root_iter_vars();
  st->leaf_iter_vars = st->all_iter_vars;
  n_->stage_map[nop.get()] = st;
  Stage cs = make_stage(cop);
  cs.set_scope(scope);
  n_->stages.insert(n_->stages.begin() + stage_position(n_.get(), st), cs);
  n_->stage_map[cop.get()] = cs;
  return cache;
}

std::string Schedule::to_string() const {
  std::ostringstream os;
  for (const Stage& st : n_->stages) {
    os << "stage " << st->name();
    if (st->op->kind == OpKind::kPlaceholder) {
      os << " (placeholder)\n";
      continue;
    }
    switch (st->attach_type) {
      case AttachType::kGroupRoot:
        os << " @root";
        break;
      case AttachType::kInline:
        os << " @inline";
        break;
      case AttachType::kScope:
        os << " @" << st->attach_stage->name() << "." << st->attach_ivar->var.name();
        break;
    }
    if (!st->scope.empty()) os << " scope=" << st->scope;
    os << ": ";
    for (const IterVar& iv : st->leaf_iter_vars) {
      auto it = st->iter_var_attrs.find(iv.get());
      if (it != st->iter_var_attrs.end() && it->second.for_kind != ForKind::kSerial)
        os << for_kind_name(it->second.for_kind) << ":";
      os << iv->var.name() << " ";
    }
    os << "\n";
  }
  return os.str();
}

IterVar thread_axis(const std::string& tag, Range dom) {
  KILN_USER_CHECK(!tag.empty()) << "thread_axis: empty thread tag";
  return IterVar(std::move(dom), Var(tag), IterVarType::kThreadIndex, tag);
}

}  // namespace kiln::te
