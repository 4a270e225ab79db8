/// \file expr.h
/// \brief Kiln's loop-program IR: expressions.
///
/// Semantics (the IR in one paragraph, as Halide's IR.h does):
/// * Every expression has a DataType; vector expressions have lanes > 1. Binary operators
///   require both operands to have the same type (op.h inserts casts for immediates).
/// * Integer `Div` and `Mod` truncate toward zero (C semantics); `FloorDiv` and `FloorMod` round
///   toward negative infinity, so `floormod(x, c)` is in [0, c) for c > 0. Index arithmetic
///   produced by schedules (split, fuse) uses the floor forms. For floats `Div` is division.
/// * Comparisons and logic produce Bool with the operands' lanes.
/// * `Load` reads element `index` (counted in elements of the load's scalar type) of the flat
///   buffer behind `buffer_var` (a handle variable); a vector load has a Ramp index.
/// * `ProducerLoad` reads a multi-dimensional tensor (a te stage) before storage flattening.
/// * `Reduce` exists only inside te compute bodies; lowering turns it into loops.
/// * Variables are identities, not names: two Vars with one name are different variables.
/// Nodes are immutable and shared; build them with each node's `make`, which checks types.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/runtime/data_type.h"
#include "kiln/support/error.h"
#include "kiln/support/object.h"

namespace kiln::ir {

/// One entry per node in node_kinds.def.
enum class NodeKind : uint8_t {
#define KILN_EXPR_NODE(T) T,
#define KILN_STMT_NODE(T) T,
#include "kiln/ir/node_kinds.def"
};
/// The node's name as written in node_kinds.def ("Add", "For", …).
const char* node_kind_name(NodeKind k);

/// Base of all IR nodes: a reference-counted object with a kind tag for switch dispatch.
struct IRNode : Object {
  explicit IRNode(NodeKind k) : kind(k) {}
  const NodeKind kind;
};

struct BaseExprNode : IRNode {
  using IRNode::IRNode;
  DataType dtype;
};

struct BaseStmtNode : IRNode {
  using IRNode::IRNode;
};

/// CRTP helper giving each node its static kind.
template <typename T>
struct ExprNode : BaseExprNode {
  ExprNode() : BaseExprNode(T::kKind) {}
};
template <typename T>
struct StmtNode : BaseStmtNode {
  StmtNode() : BaseStmtNode(T::kKind) {}
};

/// A handle to an immutable expression node.
class Expr : public Ref<BaseExprNode> {
 public:
  Expr() = default;
  explicit Expr(const BaseExprNode* n) : Ref<BaseExprNode>(n) {}
  template <typename T, typename = std::enable_if_t<std::is_base_of_v<BaseExprNode, T>>>
  Expr(const Ref<T>& r) : Ref<BaseExprNode>(r.get()) {}  // NOLINT
  /// An int32 immediate.
  Expr(int32_t v);  // NOLINT(runtime/explicit)
  /// An int64 immediate.
  Expr(int64_t v);  // NOLINT(runtime/explicit)
  /// A float32 immediate.
  Expr(float v);  // NOLINT(runtime/explicit)
  /// A float64 immediate (binary operators cast it to the other operand's type).
  Expr(double v);  // NOLINT(runtime/explicit)

  DataType dtype() const { return get()->dtype; }
  NodeKind kind() const { return get()->kind; }
  /// Downcast by kind tag; nullptr when the node is not a T (or the handle is null).
  template <typename T>
  const T* as() const {
    const BaseExprNode* n = get();
    return (n && n->kind == T::kKind) ? static_cast<const T*>(n) : nullptr;
  }
};

// ---------------------------------------------------------------------------------------------
// Leaves

struct IntImm : ExprNode<IntImm> {
  static constexpr NodeKind kKind = NodeKind::IntImm;
  int64_t value = 0;
  static Expr make(DataType t, int64_t value);
  template <typename F>
  void for_each_field(F&& f) const {
    f("value", value);
  }
};

struct FloatImm : ExprNode<FloatImm> {
  static constexpr NodeKind kKind = NodeKind::FloatImm;
  double value = 0;
  static Expr make(DataType t, double value);
  template <typename F>
  void for_each_field(F&& f) const {
    f("value", value);
  }
};

struct StringImm : ExprNode<StringImm> {
  static constexpr NodeKind kKind = NodeKind::StringImm;
  std::string value;
  static Expr make(std::string value);
  template <typename F>
  void for_each_field(F&& f) const {
    f("value", value);
  }
};

struct Variable : ExprNode<Variable> {
  static constexpr NodeKind kKind = NodeKind::Variable;
  std::string name;
  template <typename F>
  void for_each_field(F&& f) const {
    f("name", name);
  }
};

/// A variable handle. Each construction from a name makes a new, distinct variable.
class Var : public Expr {
 public:
  Var() = default;
  explicit Var(const std::string& name, DataType t = DataType::Int(32));
  explicit Var(const char* name, DataType t = DataType::Int(32)) : Var(std::string(name), t) {}
  explicit Var(const Variable* n) : Expr(n) {}
  const Variable* get() const { return static_cast<const Variable*>(Expr::get()); }
  const Variable* operator->() const { return get(); }
  const std::string& name() const { return get()->name; }
  /// A fresh variable with the same name and type.
  Var copy_with_suffix(const std::string& suffix) const { return Var(name() + suffix, dtype()); }
};

template <typename V>
using VarMap = std::unordered_map<Var, V, RefHash, RefEq>;
using VarSet = std::unordered_set<Var, RefHash, RefEq>;

// ---------------------------------------------------------------------------------------------
// Supporting objects: ranges, iteration variables, reducers, producers.

struct RangeNode : Object {
  Expr min, extent;
};
/// A half-open interval [min, min + extent).
class Range : public Ref<RangeNode> {
 public:
  Range() = default;
  Range(Expr min, Expr extent);
  /// [begin, end), extent end - begin.
  static Range from_begin_end(Expr begin, Expr end);
};

/// What an iteration variable iterates for.
enum class IterVarType : uint8_t {
  kDataPar,     ///< spatial axis of an output
  kCommReduce,  ///< reduction axis of a commutative reducer
  kOrdered,     ///< serial dependence; cannot be reordered freely
  kOpaque,      ///< unknown semantics
  kThreadIndex  ///< bound to a hardware thread (blockIdx.x, threadIdx.x, vthread…)
};
const char* iter_var_type_name(IterVarType t);

struct IterVarNode : Object {
  Range dom;  ///< may be undefined for axes created by schedule relations
  Var var;
  IterVarType iter_type = IterVarType::kDataPar;
  std::string thread_tag;
};
/// An iteration variable with its domain: a loop axis or a reduction axis.
class IterVar : public Ref<IterVarNode> {
 public:
  IterVar() = default;
  explicit IterVar(const IterVarNode* n) : Ref<IterVarNode>(n) {}
  IterVar(Range dom, Var var, IterVarType t, std::string thread_tag = "");
  const Var& var() const { return get()->var; }
  operator Expr() const { return get()->var; }  // NOLINT(runtime/explicit)
};

struct CommReducerNode : Object {
  std::vector<Var> lhs, rhs;   ///< the two arguments (one var per value in a tuple)
  std::vector<Expr> result;    ///< combiner(lhs, rhs), one per value
  std::vector<Expr> identity;  ///< identity element, one per value
};
/// A commutative, associative reduction combiner with its identity.
class CommReducer : public Ref<CommReducerNode> {
 public:
  CommReducer() = default;
  CommReducer(std::vector<Var> lhs, std::vector<Var> rhs, std::vector<Expr> result,
              std::vector<Expr> identity);
  /// Substitutes a and b into the combiner.
  std::vector<Expr> operator()(const std::vector<Expr>& a, const std::vector<Expr>& b) const;
};

/// Something a ProducerLoad can read: a te Tensor. Identity is the object; the IR only needs its
/// name, element type and shape.
struct ProducerNode : Object {
  virtual std::string producer_name() const = 0;
  virtual DataType producer_dtype() const = 0;
  virtual std::vector<Expr> producer_shape() const = 0;
};
using Producer = Ref<ProducerNode>;

// ---------------------------------------------------------------------------------------------
// Operators

struct Cast : ExprNode<Cast> {
  static constexpr NodeKind kKind = NodeKind::Cast;
  Expr value;
  static Expr make(DataType t, Expr value);
  template <typename F>
  void for_each_field(F&& f) const {
    f("value", value);
  }
};

/// Binary operators share one layout; comparisons and logic produce Bool.
template <typename T>
struct BinaryOpNode : ExprNode<T> {
  Expr a, b;
  static Expr make(Expr a, Expr b);
  template <typename F>
  void for_each_field(F&& f) const {
    f("a", a);
    f("b", b);
  }
};

#define KILN_DECLARE_BINARY(T)                     \
  struct T : BinaryOpNode<T> {                     \
    static constexpr NodeKind kKind = NodeKind::T; \
  };
KILN_DECLARE_BINARY(Add)
KILN_DECLARE_BINARY(Sub)
KILN_DECLARE_BINARY(Mul)
KILN_DECLARE_BINARY(Div)
KILN_DECLARE_BINARY(Mod)
KILN_DECLARE_BINARY(FloorDiv)
KILN_DECLARE_BINARY(FloorMod)
KILN_DECLARE_BINARY(Min)
KILN_DECLARE_BINARY(Max)
KILN_DECLARE_BINARY(EQ)
KILN_DECLARE_BINARY(NE)
KILN_DECLARE_BINARY(LT)
KILN_DECLARE_BINARY(LE)
KILN_DECLARE_BINARY(GT)
KILN_DECLARE_BINARY(GE)
KILN_DECLARE_BINARY(And)
KILN_DECLARE_BINARY(Or)
#undef KILN_DECLARE_BINARY

struct Not : ExprNode<Not> {
  static constexpr NodeKind kKind = NodeKind::Not;
  Expr a;
  static Expr make(Expr a);
  template <typename F>
  void for_each_field(F&& f) const {
    f("a", a);
  }
};

/// Evaluates both branches; picks one per lane.
struct Select : ExprNode<Select> {
  static constexpr NodeKind kKind = NodeKind::Select;
  Expr condition, true_value, false_value;
  static Expr make(Expr condition, Expr true_value, Expr false_value);
  template <typename F>
  void for_each_field(F&& f) const {
    f("condition", condition);
    f("true_value", true_value);
    f("false_value", false_value);
  }
};

struct Load : ExprNode<Load> {
  static constexpr NodeKind kKind = NodeKind::Load;
  Var buffer_var;
  Expr index;
  Expr predicate;  ///< Bool with the load's lanes; constant true when unpredicated
  static Expr make(DataType t, Var buffer_var, Expr index, Expr predicate = Expr());
  template <typename F>
  void for_each_field(F&& f) const {
    f("buffer_var", buffer_var);
    f("index", index);
    f("predicate", predicate);
  }
};

/// The vector base, base + stride, …, base + (lanes-1)*stride.
struct Ramp : ExprNode<Ramp> {
  static constexpr NodeKind kKind = NodeKind::Ramp;
  Expr base, stride;
  int lanes = 1;
  static Expr make(Expr base, Expr stride, int lanes);
  template <typename F>
  void for_each_field(F&& f) const {
    f("base", base);
    f("stride", stride);
    f("lanes", lanes);
  }
};

struct Broadcast : ExprNode<Broadcast> {
  static constexpr NodeKind kKind = NodeKind::Broadcast;
  Expr value;
  int lanes = 1;
  static Expr make(Expr value, int lanes);
  template <typename F>
  void for_each_field(F&& f) const {
    f("value", value);
    f("lanes", lanes);
  }
};

struct Let : ExprNode<Let> {
  static constexpr NodeKind kKind = NodeKind::Let;
  Var var;
  Expr value, body;
  static Expr make(Var var, Expr value, Expr body);
  template <typename F>
  void for_each_field(F&& f) const {
    f("var", var);
    f("value", value);
    f("body", body);
  }
};

/// How a Call behaves.
enum class CallKind : uint8_t {
  kPureIntrinsic,  ///< math or builtin without side effects (exp, sqrt, fma, likely, …)
  kIntrinsic,      ///< builtin with effects (kiln.* runtime helpers)
  kExtern,         ///< a C function, called by symbol name
  kPureExtern      ///< a C function without side effects
};
const char* call_kind_name(CallKind k);

struct Call : ExprNode<Call> {
  static constexpr NodeKind kKind = NodeKind::Call;
  std::string name;
  std::vector<Expr> args;
  CallKind call_kind = CallKind::kPureIntrinsic;
  static Expr make(DataType t, std::string name, std::vector<Expr> args, CallKind kind);
  template <typename F>
  void for_each_field(F&& f) const {
    f("name", name);
    f("args", args);
    f("call_kind", call_kind);
  }
};

/// A reduction of `source` over `axis` with `combiner`; `value_index` picks the result of a
/// tuple reduction. Only inside te compute bodies.
struct Reduce : ExprNode<Reduce> {
  static constexpr NodeKind kKind = NodeKind::Reduce;
  CommReducer combiner;
  std::vector<Expr> source;
  std::vector<IterVar> axis;
  Expr condition;  ///< predicate on the reduction domain (true when absent)
  int value_index = 0;
  static Expr make(CommReducer combiner, std::vector<Expr> source, std::vector<IterVar> axis,
                   Expr condition, int value_index);
  template <typename F>
  void for_each_field(F&& f) const {
    f("combiner", combiner);
    f("source", source);
    f("axis", axis);
    f("condition", condition);
    f("value_index", value_index);
  }
};

/// Reads tensor `producer` at `indices` (before storage flattening).
struct ProducerLoad : ExprNode<ProducerLoad> {
  static constexpr NodeKind kKind = NodeKind::ProducerLoad;
  Producer producer;
  std::vector<Expr> indices;
  static Expr make(Producer producer, std::vector<Expr> indices);
  template <typename F>
  void for_each_field(F&& f) const {
    f("producer", producer);
    f("indices", indices);
  }
};

}  // namespace kiln::ir
