// Tensor expression construction: placeholder, compute (with reduction axes collected from the
// body), reducers (built-in and user-defined, tuple reductions), extern ops, and the post-order
// walk of the operation graph.
#include "kiln/te/tensor.h"

#include <unordered_set>

#include "kiln/ir/functor.h"

namespace kiln::te {

TensorNode::~TensorNode() {
  if (op && static_cast<size_t>(value_index) < op->outputs_cache.size() &&
      op->outputs_cache[value_index] == this) {
    op->outputs_cache[value_index] = nullptr;
  }
}

std::string TensorNode::producer_name() const {
  if (op->num_outputs() == 1) return op->name;
  return op->name + ".v" + std::to_string(value_index);
}

OperationNode::~OperationNode() = default;

Operation Tensor::op() const { return Operation(get()->op.get()); }

Expr Tensor::operator()(std::vector<Expr> indices) const {
  KILN_USER_CHECK(defined()) << "reading an undefined tensor";
  KILN_USER_CHECK(static_cast<int>(indices.size()) == ndim())
      << "tensor " << name() << " has " << ndim() << " dimensions but is indexed with "
      << indices.size() << " indices";
  for (Expr& i : indices) {
    KILN_USER_CHECK(i.defined() && i.dtype().is_scalar() &&
                    (i.dtype().is_int() || i.dtype().is_uint()))
        << "tensor " << name() << ": indices must be scalar integers, got "
        << (i.defined() ? i.dtype().str() : "undefined");
    if (i.dtype() != DataType::Int(32) && i.dtype() != DataType::Int(64))
      i = cast(DataType::Int(32), i);
  }
  return ProducerLoad::make(Producer(get()), std::move(indices));
}

Tensor Operation::output(int i) const {
  const OperationNode* n = get();
  KILN_USER_CHECK(i >= 0 && i < n->num_outputs())
      << "operation " << n->name << " has " << n->num_outputs() << " outputs, asked for output "
      << i;
  if (n->outputs_cache.size() < static_cast<size_t>(n->num_outputs()))
    n->outputs_cache.resize(n->num_outputs(), nullptr);
  if (const TensorNode* t = n->outputs_cache[i]) return Tensor(t);
  auto* t = new TensorNode();
  t->op = Ref<OperationNode>(n);
  t->value_index = i;
  t->dtype = n->output_dtype(i);
  t->shape = n->output_shape(i);
  if (n->kind == OpKind::kCompute) {
    t->axis = static_cast<const ComputeOpNode*>(n)->axis;
    t->reduce_axis = static_cast<const ComputeOpNode*>(n)->reduce_axis;
  }
  n->outputs_cache[i] = t;
  return Tensor(t);
}

namespace {
void check_shape(const std::vector<Expr>& shape, const std::string& what) {
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_USER_CHECK(shape[i].defined() && shape[i].dtype().is_scalar() &&
                    (shape[i].dtype().is_int() || shape[i].dtype().is_uint()))
        << what << ": dimension " << i << " of the shape must be an integer";
    if (auto v = as_const_int(shape[i]))
      KILN_USER_CHECK(*v >= 0) << what << ": dimension " << i << " is negative (" << *v << ")";
  }
}
}  // namespace

Tensor placeholder(std::vector<Expr> shape, DataType dtype, std::string name) {
  check_shape(shape, "placeholder " + name);
  auto* n = new PlaceholderOpNode();
  n->name = std::move(name);
  n->shape = std::move(shape);
  n->dtype = dtype;
  return Operation(n).output(0);
}

IterVar reduce_axis(Range dom, std::string name) {
  return IterVar(std::move(dom), Var(name), IterVarType::kCommReduce);
}

std::vector<Expr> ComputeOpNode::output_shape(int) const {
  std::vector<Expr> s;
  for (const IterVar& iv : axis) s.push_back(iv->dom->extent);
  return s;
}

std::vector<Tensor> ComputeOpNode::input_tensors() const {
  std::vector<Tensor> out;
  std::unordered_set<const Object*> seen;
  for (const Expr& b : body) {
    post_order_visit(b, [&](const IRNode* n) {
      if (n->kind != NodeKind::ProducerLoad) return;
      const auto* pl = static_cast<const ProducerLoad*>(n);
      const auto* t = dynamic_cast<const TensorNode*>(pl->producer.get());
      KILN_ICHECK(t) << "ProducerLoad of a non-tensor in compute " << name;
      if (seen.insert(t).second) out.push_back(Tensor(t));
    });
  }
  return out;
}

std::vector<IterVar> ComputeOpNode::root_iter_vars() const {
  std::vector<IterVar> r = axis;
  r.insert(r.end(), reduce_axis.begin(), reduce_axis.end());
  return r;
}

std::vector<Tensor> compute_multi(std::vector<Expr> shape, FComputeMulti f, std::string name,
                                  std::string tag) {
  check_shape(shape, "compute " + name);
  auto* n = new ComputeOpNode();
  Operation op(n);  // owns n from here on, also on error
  n->name = name;
  n->tag = std::move(tag);
  static const char* kAxisNames[] = {"i", "j", "k", "l", "m", "n"};
  std::vector<Var> vars;
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string vn = shape.size() <= 6 ? kAxisNames[d] : "ax" + std::to_string(d);
    vars.emplace_back(vn, shape[d].dtype());
    n->axis.emplace_back(Range(make_zero(shape[d].dtype()), shape[d]), vars.back(),
                         IterVarType::kDataPar);
  }
  n->body = f(vars);
  KILN_USER_CHECK(!n->body.empty()) << "compute " << name << ": the body produced no values";
  // Reductions must be top level and, for several outputs, share one combiner and axis.
  const Reduce* first = nullptr;
  for (size_t i = 0; i < n->body.size(); ++i) {
    const Expr& b = n->body[i];
    KILN_USER_CHECK(b.defined()) << "compute " << name << ": output " << i << " is undefined";
    const Reduce* r = b.as<Reduce>();
    int nested = 0;
    post_order_visit(b, [&](const IRNode* x) {
      if (x->kind == NodeKind::Reduce && x != r) ++nested;
    });
    KILN_USER_CHECK(nested == 0) << "compute " << name
                                 << ": a reduction must be the whole body (e.g. sum(A(i, k), {k})),"
                                 << " not part of a larger expression; compute it as its own stage";
    if (i == 0) {
      first = r;
    } else {
      KILN_USER_CHECK((first == nullptr) == (r == nullptr))
          << "compute " << name << ": outputs must be all reductions or none";
      if (r)
        KILN_USER_CHECK(r->combiner.same_as(first->combiner))
            << "compute " << name << ": the outputs of a tuple reduction must share a combiner";
    }
  }
  if (first) n->reduce_axis = first->axis;
  std::vector<Tensor> outs;
  for (int i = 0; i < n->num_outputs(); ++i) outs.push_back(op.output(i));
  return outs;
}

Tensor compute(std::vector<Expr> shape, FCompute f, std::string name, std::string tag) {
  return compute_multi(
      std::move(shape), [&](const std::vector<Var>& v) { return std::vector<Expr>{f(v)}; },
      std::move(name), std::move(tag))[0];
}

Reducer::Reducer(FCombine combine, FIdentity identity, std::string name)
    : combine_(std::move(combine)), identity_(std::move(identity)), name_(std::move(name)) {}

std::vector<Expr> Reducer::operator()(std::vector<Expr> sources, std::vector<IterVar> axis,
                                      Expr where) const {
  KILN_USER_CHECK(!sources.empty()) << "reducer " << name_ << ": no source values";
  for (const IterVar& iv : axis)
    KILN_USER_CHECK(iv->iter_type == IterVarType::kCommReduce)
        << "reducer " << name_ << ": axis " << iv->var.name()
        << " is not a reduction axis (make it with te::reduce_axis)";
  std::vector<Var> lhs, rhs;
  std::vector<DataType> types;
  for (const Expr& s : sources) {
    types.push_back(s.dtype());
    lhs.emplace_back("x", s.dtype());
    rhs.emplace_back("y", s.dtype());
  }
  std::vector<Expr> l(lhs.begin(), lhs.end()), r(rhs.begin(), rhs.end());
  std::vector<Expr> result = combine_(l, r);
  std::vector<Expr> identity = identity_(types);
  KILN_USER_CHECK(result.size() == sources.size() && identity.size() == sources.size())
      << "reducer " << name_ << ": combiner/identity arity does not match " << sources.size()
      << " sources";
  for (size_t i = 0; i < result.size(); ++i) {
    result[i] = cast(types[i], result[i]);
    identity[i] = cast(types[i], identity[i]);
  }
  CommReducer comb(lhs, rhs, result, identity);
  std::vector<Expr> out;
  for (size_t i = 0; i < sources.size(); ++i)
    out.push_back(Reduce::make(comb, sources, axis, where, static_cast<int>(i)));
  return out;
}

Expr Reducer::operator()(Expr source, std::vector<IterVar> axis, Expr where) const {
  return (*this)(std::vector<Expr>{std::move(source)}, std::move(axis), std::move(where))[0];
}

Reducer comm_reducer(std::function<Expr(Expr, Expr)> combine,
                     std::function<Expr(DataType)> identity, std::string name) {
  return Reducer(
      [combine](const std::vector<Expr>& a, const std::vector<Expr>& b) {
        return std::vector<Expr>{combine(a[0], b[0])};
      },
      [identity](const std::vector<DataType>& t) { return std::vector<Expr>{identity(t[0])}; },
      std::move(name));
}

Expr sum(Expr source, std::vector<IterVar> axis, Expr where) {
  static const Reducer r = comm_reducer([](Expr a, Expr b) { return a + b; }, make_zero, "sum");
  return r(std::move(source), std::move(axis), std::move(where));
}
Expr max(Expr source, std::vector<IterVar> axis, Expr where) {
  static const Reducer r =
      comm_reducer([](Expr a, Expr b) { return ir::max(a, b); }, min_value, "max");
  return r(std::move(source), std::move(axis), std::move(where));
}
Expr min(Expr source, std::vector<IterVar> axis, Expr where) {
  static const Reducer r =
      comm_reducer([](Expr a, Expr b) { return ir::min(a, b); }, max_value, "min");
  return r(std::move(source), std::move(axis), std::move(where));
}
Expr prod(Expr source, std::vector<IterVar> axis, Expr where) {
  static const Reducer r = comm_reducer([](Expr a, Expr b) { return a * b; }, make_one, "prod");
  return r(std::move(source), std::move(axis), std::move(where));
}

std::vector<Tensor> extern_op(
    std::vector<std::vector<Expr>> out_shapes, std::vector<DataType> out_dtypes,
    std::vector<Tensor> inputs,
    std::function<Stmt(const std::vector<Buffer>&, const std::vector<Buffer>&)> body_fn,
    std::string name) {
  KILN_USER_CHECK(out_shapes.size() == out_dtypes.size() && !out_shapes.empty())
      << "extern " << name << ": give one dtype per output shape";
  auto* n = new ExternOpNode();
  Operation op(n);
  n->name = name;
  n->inputs = inputs;
  for (const Tensor& t : inputs)
    n->input_buffers.push_back(Buffer::make(t.name(), t->dtype, t->shape));
  for (size_t i = 0; i < out_shapes.size(); ++i) {
    check_shape(out_shapes[i], "extern " + name);
    std::string bn = out_shapes.size() == 1 ? name : name + ".v" + std::to_string(i);
    n->output_buffers.push_back(Buffer::make(bn, out_dtypes[i], out_shapes[i]));
  }
  n->body = body_fn(n->input_buffers, n->output_buffers);
  KILN_USER_CHECK(n->body.defined()) << "extern " << name << ": the body is undefined";
  std::vector<Tensor> outs;
  for (int i = 0; i < n->num_outputs(); ++i) outs.push_back(op.output(i));
  return outs;
}

Stmt call_extern(const std::string& fname, std::vector<Expr> args) {
  return Evaluate::make(Call::make(DataType::Int(32), fname, std::move(args), CallKind::kExtern));
}

std::vector<Operation> post_dfs_order(const std::vector<Operation>& outputs) {
  std::vector<Operation> order;
  std::unordered_set<const OperationNode*> visited;
  // Iterative DFS: (op, next input index).
  std::vector<std::pair<Operation, size_t>> stack;
  std::vector<std::vector<Tensor>> inputs_stack;
  for (const Operation& out : outputs) {
    if (visited.count(out.get())) continue;
    visited.insert(out.get());
    stack.emplace_back(out, 0);
    inputs_stack.push_back(out->input_tensors());
    while (!stack.empty()) {
      auto& [op, next] = stack.back();
      std::vector<Tensor>& ins = inputs_stack.back();
      if (next < ins.size()) {
        Operation in = ins[next++].op();
        if (visited.insert(in.get()).second) {
          stack.emplace_back(in, 0);
          inputs_stack.push_back(in->input_tensors());
        }
        continue;
      }
      order.push_back(op);
      stack.pop_back();
      inputs_stack.pop_back();
    }
  }
  return order;
}

}  // namespace kiln::te
