// Tensor intrinsic declarations (decl_tensor_intrin) and the operand views their lowerings are
// written against: every operand of the declared compute gets an IntrinBuffer whose data
// pointer, element offset and strides are fresh variables (the innermost stride the constant 1
// unless the declaration says otherwise), and the user's lowering function is called once on
// those views. The schedule primitive Stage::tensorize only records the intrinsic on a leaf
// loop; matching and binding happen in loop generation (tensorize.cc). Also the builders of
// the bit-operation and LLVM-intrinsic builtins (ir/op.h) that lowerings use.
#include "kiln/te/tensor_intrin.h"

#include "kiln/te/schedule.h"

namespace kiln::te {

Expr IntrinBuffer::offset_of(const std::vector<Expr>& indices) const {
  KILN_USER_CHECK(indices.size() == strides.size())
      << "intrinsic buffer '" << tensor.name() << "' has " << strides.size()
      << " dimensions, indexed with " << indices.size();
  Expr off = elem_offset;
  for (size_t d = 0; d < indices.size(); ++d) off = off + indices[d] * strides[d];
  return off;
}

Expr IntrinBuffer::vload(const std::vector<Expr>& begin, DataType t) const {
  KILN_USER_CHECK(t.element_of() == dtype())
      << "intrinsic buffer '" << tensor.name() << "' holds " << dtype() << ", loaded as " << t;
  Expr base = offset_of(begin);
  Expr index = t.lanes() == 1 ? base : Ramp::make(base, Expr(1), t.lanes());
  return Load::make(t, data, index);
}

Stmt IntrinBuffer::vstore(const std::vector<Expr>& begin, Expr value) const {
  KILN_USER_CHECK(value.dtype().element_of() == dtype())
      << "intrinsic buffer '" << tensor.name() << "' holds " << dtype() << ", stored "
      << value.dtype();
  Expr base = offset_of(begin);
  int lanes = value.dtype().lanes();
  Expr index = lanes == 1 ? base : Ramp::make(base, Expr(1), lanes);
  return Store::make(data, std::move(value), index);
}

Expr IntrinBuffer::access_ptr(const std::vector<Expr>& begin) const {
  Expr off = begin.empty() ? Expr(elem_offset) : offset_of(begin);
  return Call::make(DataType::Handle(), builtin::kAddressOf, {Load::make(dtype(), data, off)},
                    CallKind::kPureIntrinsic);
}

TensorIntrin decl_tensor_intrin(const std::string& name, const Tensor& out,
                                const FIntrinLower& lower,
                                const std::map<const TensorNode*, std::vector<Expr>>& strides) {
  KILN_USER_CHECK(!name.empty()) << "decl_tensor_intrin: the intrinsic needs a name";
  KILN_USER_CHECK(out.defined() && out->op->kind == OpKind::kCompute)
      << "decl_tensor_intrin '" << name << "': the declared tensor must be a compute";
  auto n = std::make_shared<TensorIntrinNode>();
  n->name = name;
  n->op = out.op();
  const auto* c = static_cast<const ComputeOpNode*>(n->op.get());
  KILN_USER_CHECK(c->num_outputs() == 1)
      << "decl_tensor_intrin '" << name << "': the compute must have one output, it has "
      << c->num_outputs();
  n->inputs = n->op->input_tensors();
  for (const Tensor& t : n->inputs) {
    KILN_USER_CHECK(t->op->kind == OpKind::kPlaceholder)
        << "decl_tensor_intrin '" << name << "': the compute reads '" << t.name()
        << "', which is not a placeholder (declare the intrinsic over its inputs directly)";
  }
  auto view = [&](const Tensor& t) {
    IntrinBuffer b;
    b.tensor = t;
    b.data = Var(t.name(), DataType::Handle());
    b.elem_offset = Var(t.name() + ".elem_offset");
    const size_t rank = t->shape.size();
    auto given = strides.find(t.get());
    KILN_USER_CHECK(given == strides.end() || given->second.size() == rank)
        << "decl_tensor_intrin '" << name << "': " << given->second.size() << " strides given for '"
        << t.name() << "' of rank " << rank;
    for (size_t d = 0; d < rank; ++d) {
      Expr s;
      if (given != strides.end()) s = given->second[d];
      if (!s.defined()) {
        s = d + 1 == rank && given == strides.end() ? Expr(1)
                                                    : Var(t.name() + ".stride" + std::to_string(d));
      }
      b.strides.push_back(s);
    }
    return b;
  };
  std::vector<IntrinBuffer> ins, outs;
  for (const Tensor& t : n->inputs) ins.push_back(view(t));
  outs.push_back(view(out));
  n->lowering = lower(ins, outs);
  KILN_USER_CHECK(n->lowering.body.defined())
      << "decl_tensor_intrin '" << name << "': the lowering gives no body";
  n->buffers = ins;
  n->buffers.push_back(outs[0]);
  return n;
}

Stage& Stage::tensorize(const IterVar& iv, const TensorIntrin& intrin) {
  KILN_USER_CHECK(intrin != nullptr)
      << "tensorize: no intrinsic given for stage '" << n_->name() << "'";
  KILN_USER_CHECK(iv.defined() && n_->leaf_index(iv) >= 0)
      << "tensorize: axis '" << (iv.defined() ? iv->var.name() : std::string("<undefined>"))
      << "' is not a loop of stage '" << n_->name()
      << "' (it was split or fused already, or belongs to another stage)";
  KILN_USER_CHECK(n_->op->kind == OpKind::kCompute)
      << "tensorize: stage '" << n_->name() << "' is not a compute";
  for (const auto& [node, a] : n_->iter_var_attrs) {
    KILN_USER_CHECK(a.tensor_intrin == nullptr || node == iv.get())
        << "tensorize: stage '" << n_->name() << "' is already tensorized at another axis";
  }
  n_->iter_var_attrs[iv.get()].tensor_intrin = intrin;
  return *this;
}

namespace {
Expr bit_call(const char* name, DataType t, std::vector<Expr> args) {
  return Call::make(t, name, std::move(args), CallKind::kPureIntrinsic);
}
Expr bit_binary(const char* name, Expr a, Expr b) {
  KILN_USER_CHECK(a.dtype().is_int() || a.dtype().is_uint())
      << name << ": needs integer operands, got " << a.dtype();
  if (b.dtype() != a.dtype()) b = cast(a.dtype().element_of(), b);
  if (b.dtype().lanes() != a.dtype().lanes()) b = broadcast(b, a.dtype().lanes());
  DataType t = a.dtype();
  return bit_call(name, t, {std::move(a), std::move(b)});
}
}  // namespace

Expr reinterpret(DataType t, Expr v) {
  KILN_USER_CHECK(t.bits() * t.lanes() == v.dtype().bits() * v.dtype().lanes())
      << "reinterpret: " << v.dtype() << " and " << t << " differ in width";
  if (t == v.dtype()) return v;
  return bit_call(builtin::kReinterpret, t, {std::move(v)});
}
Expr shift_right(Expr a, Expr b) {
  return bit_binary(builtin::kShiftRight, std::move(a), std::move(b));
}
Expr shift_left(Expr a, Expr b) {
  return bit_binary(builtin::kShiftLeft, std::move(a), std::move(b));
}
Expr bitwise_and(Expr a, Expr b) {
  return bit_binary(builtin::kBitwiseAnd, std::move(a), std::move(b));
}
Expr bitwise_or(Expr a, Expr b) {
  return bit_binary(builtin::kBitwiseOr, std::move(a), std::move(b));
}
Expr bitwise_xor(Expr a, Expr b) {
  return bit_binary(builtin::kBitwiseXor, std::move(a), std::move(b));
}
Expr popcount(Expr a) {
  KILN_USER_CHECK(a.dtype().is_int() || a.dtype().is_uint())
      << "popcount: needs an integer operand, got " << a.dtype();
  DataType t = a.dtype();
  return bit_call(builtin::kPopcount, t, {std::move(a)});
}
Expr call_llvm_intrin(DataType t, const std::string& name, std::vector<Expr> args) {
  KILN_USER_CHECK(name.rfind(builtin::kLLVMIntrinPrefix, 0) == 0)
      << "call_llvm_intrin: '" << name << "' does not name an LLVM intrinsic (llvm.…)";
  return Call::make(t, name, std::move(args), CallKind::kPureIntrinsic);
}

}  // namespace kiln::te
