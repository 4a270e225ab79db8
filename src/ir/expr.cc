// Constructors of expression nodes. Each `make` checks operand types and undefined children,
// so malformed IR is caught where it is built, not later in a pass or code generator.
#include "kiln/ir/expr.h"

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"

namespace kiln::ir {

void internal_error(const std::string& what) {
  throw Error("internal error: " + what + " [this is a Kiln bug]");
}

const char* node_kind_name(NodeKind k) {
  switch (k) {
#define KILN_EXPR_NODE(T) \
  case NodeKind::T:       \
    return #T;
#define KILN_STMT_NODE(T) \
  case NodeKind::T:       \
    return #T;
#include "kiln/ir/node_kinds.def"
  }
  return "?";
}

const char* iter_var_type_name(IterVarType t) {
  switch (t) {
    case IterVarType::kDataPar:
      return "data_par";
    case IterVarType::kCommReduce:
      return "reduce";
    case IterVarType::kOrdered:
      return "ordered";
    case IterVarType::kOpaque:
      return "opaque";
    case IterVarType::kThreadIndex:
      return "thread_index";
  }
  return "?";
}

const char* call_kind_name(CallKind k) {
  switch (k) {
    case CallKind::kPureIntrinsic:
      return "pure_intrin";
    case CallKind::kIntrinsic:
      return "intrin";
    case CallKind::kExtern:
      return "extern";
    case CallKind::kPureExtern:
      return "pure_extern";
  }
  return "?";
}

namespace {
template <typename T>
T* new_node(DataType t) {
  T* n = new T();
  n->dtype = t;
  return n;
}
void check_defined(const Expr& e, const char* node, const char* field) {
  KILN_ICHECK(e.defined()) << node << "::make: " << field << " is undefined";
}
}  // namespace

Expr::Expr(int32_t v) : Expr(IntImm::make(DataType::Int(32), v)) {}
Expr::Expr(int64_t v) : Expr(IntImm::make(DataType::Int(64), v)) {}
Expr::Expr(float v) : Expr(FloatImm::make(DataType::Float(32), v)) {}
Expr::Expr(double v) : Expr(FloatImm::make(DataType::Float(64), v)) {}

Expr IntImm::make(DataType t, int64_t value) {
  KILN_ICHECK(t.is_scalar() && (t.is_int() || t.is_uint() || t.is_bool()))
      << "IntImm of type " << t;
  if (t.is_bool())
    value = value != 0;
  else if (t.bits() < 64) {
    // Wrap to the type's width, as hardware arithmetic does.
    int sh = 64 - t.bits();
    value = t.is_int() ? (static_cast<int64_t>(static_cast<uint64_t>(value) << sh) >> sh)
                       : static_cast<int64_t>((static_cast<uint64_t>(value) << sh) >> sh);
  }
  auto* n = new_node<IntImm>(t);
  n->value = value;
  return Expr(n);
}

Expr FloatImm::make(DataType t, double value) {
  KILN_ICHECK(t.is_scalar() && t.is_float()) << "FloatImm of type " << t;
  auto* n = new_node<FloatImm>(t);
  n->value = t.bits() == 32 ? static_cast<double>(static_cast<float>(value)) : value;
  return Expr(n);
}

Expr StringImm::make(std::string value) {
  auto* n = new_node<StringImm>(DataType::Handle());
  n->value = std::move(value);
  return Expr(n);
}

Var::Var(const std::string& name, DataType t) {
  auto* n = new_node<Variable>(t);
  n->name = name;
  *this = Var(static_cast<const Variable*>(n));
}

Range::Range(Expr min, Expr extent) {
  KILN_ICHECK(min.defined() && extent.defined()) << "Range with undefined bound";
  auto* n = new RangeNode();
  n->min = std::move(min);
  n->extent = std::move(extent);
  static_cast<Ref<RangeNode>&>(*this) = Ref<RangeNode>(n);
}

Range Range::from_begin_end(Expr begin, Expr end) { return Range(begin, end - begin); }

IterVar::IterVar(Range dom, Var var, IterVarType t, std::string thread_tag) {
  auto* n = new IterVarNode();
  n->dom = std::move(dom);
  n->var = std::move(var);
  n->iter_type = t;
  n->thread_tag = std::move(thread_tag);
  static_cast<Ref<IterVarNode>&>(*this) = Ref<IterVarNode>(n);
}

CommReducer::CommReducer(std::vector<Var> lhs, std::vector<Var> rhs, std::vector<Expr> result,
                         std::vector<Expr> identity) {
  KILN_ICHECK(lhs.size() == rhs.size() && lhs.size() == result.size() &&
              lhs.size() == identity.size())
      << "CommReducer arity mismatch";
  auto* n = new CommReducerNode();
  n->lhs = std::move(lhs);
  n->rhs = std::move(rhs);
  n->result = std::move(result);
  n->identity = std::move(identity);
  static_cast<Ref<CommReducerNode>&>(*this) = Ref<CommReducerNode>(n);
}

std::vector<Expr> CommReducer::operator()(const std::vector<Expr>& a,
                                          const std::vector<Expr>& b) const {
  VarMap<Expr> m;
  for (size_t i = 0; i < a.size(); ++i) {
    m[get()->lhs[i]] = a[i];
    m[get()->rhs[i]] = b[i];
  }
  std::vector<Expr> out;
  for (const Expr& r : get()->result) out.push_back(substitute(r, m));
  return out;
}

Expr Cast::make(DataType t, Expr value) {
  check_defined(value, "Cast", "value");
  KILN_ICHECK(t.lanes() == value.dtype().lanes())
      << "Cast from " << value.dtype() << " to " << t << " changes lanes";
  auto* n = new_node<Cast>(t);
  n->value = std::move(value);
  return Expr(n);
}

template <typename T>
Expr BinaryOpNode<T>::make(Expr a, Expr b) {
  check_defined(a, node_kind_name(T::kKind), "a");
  check_defined(b, node_kind_name(T::kKind), "b");
  KILN_ICHECK(a.dtype() == b.dtype()) << node_kind_name(T::kKind) << "::make: operand types "
                                      << a.dtype() << " and " << b.dtype() << " differ";
  DataType t = a.dtype();
  constexpr NodeKind k = T::kKind;
  if constexpr (k == NodeKind::EQ || k == NodeKind::NE || k == NodeKind::LT || k == NodeKind::LE ||
                k == NodeKind::GT || k == NodeKind::GE) {
    t = DataType::Bool(a.dtype().lanes());
  }
  if constexpr (k == NodeKind::And || k == NodeKind::Or) {
    KILN_ICHECK(a.dtype().is_bool()) << node_kind_name(k) << " on non-bool " << a.dtype();
  }
  auto* n = new_node<T>(t);
  n->a = std::move(a);
  n->b = std::move(b);
  return Expr(n);
}
#define KILN_BINARY_NODE(T) template struct BinaryOpNode<T>;
#include "kiln/ir/node_kinds.def"

Expr Not::make(Expr a) {
  check_defined(a, "Not", "a");
  KILN_ICHECK(a.dtype().is_bool()) << "Not on non-bool " << a.dtype();
  auto* n = new_node<Not>(a.dtype());
  n->a = std::move(a);
  return Expr(n);
}

Expr Select::make(Expr c, Expr t, Expr f) {
  check_defined(c, "Select", "condition");
  check_defined(t, "Select", "true_value");
  check_defined(f, "Select", "false_value");
  KILN_ICHECK(c.dtype().is_bool()) << "Select condition of type " << c.dtype();
  KILN_ICHECK(t.dtype() == f.dtype())
      << "Select branches of types " << t.dtype() << " and " << f.dtype();
  KILN_ICHECK(c.dtype().lanes() == 1 || c.dtype().lanes() == t.dtype().lanes())
      << "Select condition lanes " << c.dtype().lanes() << " vs value lanes " << t.dtype().lanes();
  auto* n = new_node<Select>(t.dtype());
  n->condition = std::move(c);
  n->true_value = std::move(t);
  n->false_value = std::move(f);
  return Expr(n);
}

Expr Load::make(DataType t, Var buffer_var, Expr index, Expr predicate) {
  check_defined(buffer_var, "Load", "buffer_var");
  check_defined(index, "Load", "index");
  KILN_ICHECK(index.dtype().lanes() == t.lanes() || index.dtype().lanes() == 1)
      << "Load of " << t << " with index of type " << index.dtype();
  if (!predicate.defined()) predicate = const_true(t.lanes());
  auto* n = new_node<Load>(t);
  n->buffer_var = std::move(buffer_var);
  n->index = std::move(index);
  n->predicate = std::move(predicate);
  return Expr(n);
}

Expr Ramp::make(Expr base, Expr stride, int lanes) {
  check_defined(base, "Ramp", "base");
  check_defined(stride, "Ramp", "stride");
  KILN_ICHECK(base.dtype().is_scalar() && base.dtype() == stride.dtype())
      << "Ramp base " << base.dtype() << " stride " << stride.dtype();
  KILN_ICHECK(lanes > 1) << "Ramp with " << lanes << " lanes";
  auto* n = new_node<Ramp>(base.dtype().with_lanes(lanes));
  n->base = std::move(base);
  n->stride = std::move(stride);
  n->lanes = lanes;
  return Expr(n);
}

Expr Broadcast::make(Expr value, int lanes) {
  check_defined(value, "Broadcast", "value");
  KILN_ICHECK(value.dtype().is_scalar()) << "Broadcast of vector " << value.dtype();
  KILN_ICHECK(lanes > 1) << "Broadcast with " << lanes << " lanes";
  auto* n = new_node<Broadcast>(value.dtype().with_lanes(lanes));
  n->value = std::move(value);
  n->lanes = lanes;
  return Expr(n);
}

Expr Let::make(Var var, Expr value, Expr body) {
  check_defined(value, "Let", "value");
  check_defined(body, "Let", "body");
  KILN_ICHECK(var.dtype() == value.dtype())
      << "Let " << var.name() << ": var " << var.dtype() << " value " << value.dtype();
  auto* n = new_node<Let>(body.dtype());
  n->var = std::move(var);
  n->value = std::move(value);
  n->body = std::move(body);
  return Expr(n);
}

Expr Call::make(DataType t, std::string name, std::vector<Expr> args, CallKind kind) {
  for (const Expr& a : args) KILN_ICHECK(a.defined()) << "Call " << name << ": undefined arg";
  auto* n = new_node<Call>(t);
  n->name = std::move(name);
  n->args = std::move(args);
  n->call_kind = kind;
  return Expr(n);
}

Expr Reduce::make(CommReducer combiner, std::vector<Expr> source, std::vector<IterVar> axis,
                  Expr condition, int value_index) {
  KILN_ICHECK(combiner.defined()) << "Reduce without combiner";
  KILN_ICHECK(value_index >= 0 && value_index < static_cast<int>(source.size()))
      << "Reduce value_index " << value_index;
  for (const IterVar& iv : axis)
    KILN_ICHECK(iv->iter_type == IterVarType::kCommReduce)
        << "Reduce axis " << iv->var.name() << " is not a reduction axis";
  if (!condition.defined()) condition = const_true();
  auto* n = new_node<Reduce>(source[value_index].dtype());
  n->combiner = std::move(combiner);
  n->source = std::move(source);
  n->axis = std::move(axis);
  n->condition = std::move(condition);
  n->value_index = value_index;
  return Expr(n);
}

Expr ProducerLoad::make(Producer producer, std::vector<Expr> indices) {
  KILN_ICHECK(producer.defined()) << "ProducerLoad of undefined producer";
  for (const Expr& i : indices)
    KILN_ICHECK(i.defined()) << "ProducerLoad " << producer->producer_name() << ": undefined index";
  auto* n = new_node<ProducerLoad>(producer->producer_dtype());
  n->producer = std::move(producer);
  n->indices = std::move(indices);
  return Expr(n);
}

}  // namespace kiln::ir
