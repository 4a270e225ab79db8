/// \file tensor.h
/// \brief Tensor expressions: placeholders, computes, reductions, extern ops.
///
/// A Tensor is an output of an Operation. Compute bodies read tensors with `A(i, j)`, which
/// builds an ir::ProducerLoad; the Tensor object itself is the producer, so identity matters:
/// `op.output(i)` returns the same Tensor object for as long as anything holds it.
///
///   auto A = te::placeholder({n, m}, DataType::Float(32), "A");
///   auto k = te::reduce_axis({0, m}, "k");
///   auto B = te::compute({n}, [&](Var i) { return te::sum(A(i, k), {k}); }, "B");
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/expr.h"
#include "kiln/ir/op.h"
#include "kiln/ir/stmt.h"

namespace kiln::te {

using namespace kiln::ir;  // NOLINT: te is written in terms of the IR

class Operation;
struct OperationNode;

struct TensorNode : ProducerNode {
  ~TensorNode() override;
  /// The operation this is an output of (owning).
  Ref<OperationNode> op;
  int value_index = 0;
  DataType dtype;
  std::vector<Expr> shape;
  /// For compute ops: the op's spatial and reduction axes (the paper's `C.op.axis`).
  std::vector<IterVar> axis, reduce_axis;

  std::string producer_name() const override;
  DataType producer_dtype() const override { return dtype; }
  std::vector<Expr> producer_shape() const override { return shape; }
};

class Tensor : public Ref<TensorNode> {
 public:
  Tensor() = default;
  explicit Tensor(const TensorNode* n) : Ref<TensorNode>(n) {}
  Operation op() const;
  int ndim() const { return static_cast<int>(get()->shape.size()); }
  const std::string name() const { return get()->producer_name(); }
  /// Reads the tensor: builds a ProducerLoad. The index count must equal ndim().
  Expr operator()(std::vector<Expr> indices) const;
  template <typename... Args>
  Expr operator()(Args&&... args) const {
    return (*this)(std::vector<Expr>{to_expr(std::forward<Args>(args))...});
  }

 private:
  static Expr to_expr(const Expr& e) { return e; }
  static Expr to_expr(const IterVar& iv) { return iv->var; }
  static Expr to_expr(int v) { return Expr(v); }
  static Expr to_expr(int64_t v) { return Expr(v); }
};

enum class OpKind : uint8_t { kPlaceholder, kCompute, kExtern };

struct OperationNode : Object {
  ~OperationNode() override;
  OpKind kind;
  std::string name;
  std::string tag;
  explicit OperationNode(OpKind k) : kind(k) {}

  virtual int num_outputs() const = 0;
  virtual DataType output_dtype(int i) const = 0;
  virtual std::vector<Expr> output_shape(int i) const = 0;
  /// Tensors this operation reads, each once, in first-use order.
  virtual std::vector<Tensor> input_tensors() const = 0;
  /// The spatial axes of the op's output (one per output dimension); empty for placeholders.
  virtual std::vector<IterVar> root_iter_vars() const { return {}; }

  /// Weak cache so that output(i) returns one Tensor object per output while it lives.
  mutable std::vector<const TensorNode*> outputs_cache;
};

/// An operation handle.
class Operation : public Ref<OperationNode> {
 public:
  Operation() = default;
  explicit Operation(const OperationNode* n) : Ref<OperationNode>(n) {}
  Tensor output(int i) const;
};

struct PlaceholderOpNode : OperationNode {
  PlaceholderOpNode() : OperationNode(OpKind::kPlaceholder) {}
  std::vector<Expr> shape;
  DataType dtype;
  int num_outputs() const override { return 1; }
  DataType output_dtype(int) const override { return dtype; }
  std::vector<Expr> output_shape(int) const override { return shape; }
  std::vector<Tensor> input_tensors() const override { return {}; }
};

struct ComputeOpNode : OperationNode {
  ComputeOpNode() : OperationNode(OpKind::kCompute) {}
  std::vector<IterVar> axis;         ///< one data-parallel axis per output dimension
  std::vector<IterVar> reduce_axis;  ///< reduction axes (from the body's Reduce)
  std::vector<Expr> body;            ///< one expression per output
  int num_outputs() const override { return static_cast<int>(body.size()); }
  DataType output_dtype(int i) const override { return body[i].dtype(); }
  std::vector<Expr> output_shape(int) const override;
  std::vector<Tensor> input_tensors() const override;
  std::vector<IterVar> root_iter_vars() const override;
};

/// An operation implemented by a statement over buffers: typically a call to a C function.
/// `inputs[i]` is bound to `input_buffers[i]`, output j to `output_buffers[j]`.
struct ExternOpNode : OperationNode {
  ExternOpNode() : OperationNode(OpKind::kExtern) {}
  std::vector<Tensor> inputs;
  std::vector<Buffer> input_buffers;
  std::vector<Buffer> output_buffers;
  Stmt body;
  int num_outputs() const override { return static_cast<int>(output_buffers.size()); }
  DataType output_dtype(int i) const override { return output_buffers[i]->dtype; }
  std::vector<Expr> output_shape(int i) const override { return output_buffers[i]->shape; }
  std::vector<Tensor> input_tensors() const override { return inputs; }
};

/// A tensor to be supplied by the caller.
Tensor placeholder(std::vector<Expr> shape, DataType dtype = DataType::Float(32),
                   std::string name = "placeholder");

/// A reduction axis over `dom` = {min, extent} (for the usual min 0, the same as {0, end}).
IterVar reduce_axis(Range dom, std::string name = "k");

using FCompute = std::function<Expr(const std::vector<Var>&)>;
using FComputeMulti = std::function<std::vector<Expr>(const std::vector<Var>&)>;

/// out[i...] = f(i...) for every index of `shape`.
Tensor compute(std::vector<Expr> shape, FCompute f, std::string name = "compute",
               std::string tag = "");
/// Several outputs of one shape computed by one loop nest (e.g. argmax's index and value).
std::vector<Tensor> compute_multi(std::vector<Expr> shape, FComputeMulti f,
                                  std::string name = "compute", std::string tag = "");

/// Lambda forms: f takes one Var per dimension (1-D to 6-D).
template <typename F, typename = std::enable_if_t<!std::is_convertible_v<F, FCompute>>>
Tensor compute(std::vector<Expr> shape, F f, std::string name = "compute", std::string tag = "") {
  auto call = [f](const std::vector<Var>& v) -> Expr {
    switch (v.size()) {
      case 1:
        if constexpr (std::is_invocable_v<F, Var>) return f(v[0]);
        break;
      case 2:
        if constexpr (std::is_invocable_v<F, Var, Var>) return f(v[0], v[1]);
        break;
      case 3:
        if constexpr (std::is_invocable_v<F, Var, Var, Var>) return f(v[0], v[1], v[2]);
        break;
      case 4:
        if constexpr (std::is_invocable_v<F, Var, Var, Var, Var>) return f(v[0], v[1], v[2], v[3]);
        break;
      case 5:
        if constexpr (std::is_invocable_v<F, Var, Var, Var, Var, Var>)
          return f(v[0], v[1], v[2], v[3], v[4]);
        break;
      case 6:
        if constexpr (std::is_invocable_v<F, Var, Var, Var, Var, Var, Var>)
          return f(v[0], v[1], v[2], v[3], v[4], v[5]);
        break;
      default:
        break;
    }
    KILN_ERROR << "compute: the lambda's parameter count does not match the shape's " << v.size()
               << " dimensions";
  };
  return compute(std::move(shape), FCompute(call), std::move(name), std::move(tag));
}

/// A user-defined commutative reducer: `combine(a, b)` with `identity(dtype)`.
class Reducer {
 public:
  using FCombine =
      std::function<std::vector<Expr>(const std::vector<Expr>& a, const std::vector<Expr>& b)>;
  using FIdentity = std::function<std::vector<Expr>(const std::vector<DataType>& types)>;
  Reducer(FCombine combine, FIdentity identity, std::string name);
  /// Single-value reduction of `source` over `axis` where `where` holds.
  Expr operator()(Expr source, std::vector<IterVar> axis, Expr where = Expr()) const;
  /// Tuple reduction: one Reduce expression per value (share the combiner).
  std::vector<Expr> operator()(std::vector<Expr> sources, std::vector<IterVar> axis,
                               Expr where = Expr()) const;
  const std::string& name() const { return name_; }

 private:
  FCombine combine_;
  FIdentity identity_;
  std::string name_;
};

/// Makes a single-value reducer from a binary function and an identity element.
Reducer comm_reducer(std::function<Expr(Expr, Expr)> combine,
                     std::function<Expr(DataType)> identity, std::string name);

Expr sum(Expr source, std::vector<IterVar> axis, Expr where = Expr());
Expr max(Expr source, std::vector<IterVar> axis, Expr where = Expr());
Expr min(Expr source, std::vector<IterVar> axis, Expr where = Expr());
Expr prod(Expr source, std::vector<IterVar> axis, Expr where = Expr());

/// An extern op: `body_fn(input buffers, output buffers)` returns the statement (usually an
/// Evaluate of an extern Call) that computes the outputs from the inputs.
std::vector<Tensor> extern_op(
    std::vector<std::vector<Expr>> out_shapes, std::vector<DataType> out_dtypes,
    std::vector<Tensor> inputs,
    std::function<Stmt(const std::vector<Buffer>&, const std::vector<Buffer>&)> body_fn,
    std::string name = "extern");
/// Shorthand: an Evaluate of a call to the C function `fname` with the given args
/// (buffers are passed as their data pointers).
Stmt call_extern(const std::string& fname, std::vector<Expr> args);

/// All operations reachable from `outputs`, producers before consumers.
std::vector<Operation> post_dfs_order(const std::vector<Operation>& outputs);

}  // namespace kiln::te
