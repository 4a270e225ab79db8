// Constructors of statement nodes and buffers, with the same checks as expr.cc.
#include "kiln/ir/stmt.h"

#include "kiln/ir/op.h"

namespace kiln::ir {

namespace {
template <typename T>
T* new_stmt() {
  return new T();
}
}  // namespace

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorized";
    case ForKind::kUnrolled:
      return "unrolled";
    case ForKind::kThreadBinding:
      return "thread_binding";
  }
  return "?";
}

Stmt LetStmt::make(Var var, Expr value, Stmt body) {
  KILN_ICHECK(value.defined() && body.defined()) << "LetStmt with undefined child";
  KILN_ICHECK(var.dtype() == value.dtype())
      << "LetStmt " << var.name() << ": var " << var.dtype() << " value " << value.dtype();
  auto* n = new_stmt<LetStmt>();
  n->var = std::move(var);
  n->value = std::move(value);
  n->body = std::move(body);
  return Stmt(n);
}

Stmt AttrStmt::make(Ref<Object> node, std::string key, Expr value, Stmt body) {
  KILN_ICHECK(body.defined()) << "AttrStmt " << key << " with undefined body";
  auto* n = new_stmt<AttrStmt>();
  n->node = std::move(node);
  n->key = std::move(key);
  n->value = value.defined() ? std::move(value) : Expr(0);
  n->body = std::move(body);
  return Stmt(n);
}

Stmt AssertStmt::make(Expr condition, Expr message, Stmt body) {
  KILN_ICHECK(condition.defined() && condition.dtype().is_bool()) << "AssertStmt condition";
  KILN_ICHECK(message.as<StringImm>()) << "AssertStmt message must be a string";
  KILN_ICHECK(body.defined()) << "AssertStmt with undefined body";
  auto* n = new_stmt<AssertStmt>();
  n->condition = std::move(condition);
  n->message = std::move(message);
  n->body = std::move(body);
  return Stmt(n);
}

Stmt Store::make(Var buffer_var, Expr value, Expr index, Expr predicate) {
  KILN_ICHECK(buffer_var.defined() && value.defined() && index.defined())
      << "Store with undefined child";
  KILN_ICHECK(index.dtype().lanes() == value.dtype().lanes() || index.dtype().lanes() == 1)
      << "Store of " << value.dtype() << " with index " << index.dtype();
  if (!predicate.defined()) predicate = const_true(value.dtype().lanes());
  auto* n = new_stmt<Store>();
  n->buffer_var = std::move(buffer_var);
  n->value = std::move(value);
  n->index = std::move(index);
  n->predicate = std::move(predicate);
  return Stmt(n);
}

Stmt ProducerStore::make(Producer producer, Expr value, std::vector<Expr> indices) {
  KILN_ICHECK(producer.defined() && value.defined()) << "ProducerStore with undefined child";
  auto* n = new_stmt<ProducerStore>();
  n->producer = std::move(producer);
  n->value = std::move(value);
  n->indices = std::move(indices);
  return Stmt(n);
}

Stmt ProducerRealize::make(Producer producer, std::vector<Range> bounds, Expr condition, Stmt body,
                           std::string storage_scope) {
  KILN_ICHECK(producer.defined() && body.defined()) << "ProducerRealize with undefined child";
  auto* n = new_stmt<ProducerRealize>();
  n->producer = std::move(producer);
  n->bounds = std::move(bounds);
  n->condition = condition.defined() ? std::move(condition) : const_true();
  n->body = std::move(body);
  n->storage_scope = std::move(storage_scope);
  return Stmt(n);
}

Stmt Allocate::make(Var buffer_var, DataType dtype, std::vector<Expr> extents, Expr condition,
                    Stmt body, std::string scope) {
  KILN_ICHECK(buffer_var.defined() && body.defined()) << "Allocate with undefined child";
  for (const Expr& e : extents) KILN_ICHECK(e.defined()) << "Allocate with undefined extent";
  auto* n = new_stmt<Allocate>();
  n->buffer_var = std::move(buffer_var);
  n->dtype = dtype;
  n->extents = std::move(extents);
  n->condition = condition.defined() ? std::move(condition) : const_true();
  n->body = std::move(body);
  n->scope = std::move(scope);
  return Stmt(n);
}

int64_t Allocate::constant_size() const {
  int64_t s = 1;
  for (const Expr& e : extents) {
    auto v = as_const_int(e);
    if (!v) return -1;
    s *= *v;
  }
  return s;
}

Stmt For::make(Var loop_var, Expr min, Expr extent, ForKind kind, Stmt body,
               std::string thread_tag) {
  KILN_ICHECK(loop_var.defined() && min.defined() && extent.defined() && body.defined())
      << "For with undefined child";
  KILN_ICHECK(min.dtype() == loop_var.dtype() && extent.dtype() == loop_var.dtype())
      << "For " << loop_var.name() << ": var " << loop_var.dtype() << ", min " << min.dtype()
      << ", extent " << extent.dtype();
  auto* n = new_stmt<For>();
  n->loop_var = std::move(loop_var);
  n->min = std::move(min);
  n->extent = std::move(extent);
  n->for_kind = kind;
  n->body = std::move(body);
  n->thread_tag = std::move(thread_tag);
  return Stmt(n);
}

Stmt IfThenElse::make(Expr condition, Stmt then_case, Stmt else_case) {
  KILN_ICHECK(condition.defined() && then_case.defined()) << "IfThenElse with undefined child";
  KILN_ICHECK(condition.dtype() == DataType::Bool())
      << "IfThenElse condition of type " << condition.dtype();
  auto* n = new_stmt<IfThenElse>();
  n->condition = std::move(condition);
  n->then_case = std::move(then_case);
  n->else_case = std::move(else_case);
  return Stmt(n);
}

Stmt SeqStmt::make(std::vector<Stmt> seq) {
  std::vector<Stmt> flat;
  for (Stmt& s : seq) {
    if (!s.defined()) continue;
    if (const SeqStmt* inner = s.as<SeqStmt>()) {
      flat.insert(flat.end(), inner->seq.begin(), inner->seq.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  auto* n = new_stmt<SeqStmt>();
  n->seq = std::move(flat);
  return Stmt(n);
}

Stmt Evaluate::make(Expr value) {
  KILN_ICHECK(value.defined()) << "Evaluate of undefined value";
  auto* n = new_stmt<Evaluate>();
  n->value = std::move(value);
  return Stmt(n);
}

Expr BufferNode::flat_index(const std::vector<Expr>& indices) const {
  KILN_ICHECK(indices.size() == shape.size())
      << "buffer " << name << " has " << shape.size() << " dims, indexed with " << indices.size();
  if (indices.empty()) return make_zero(DataType::Int(32));
  Expr idx;
  if (!strides.empty()) {
    for (size_t i = 0; i < indices.size(); ++i) {
      Expr t = indices[i] * strides[i];
      idx = idx.defined() ? idx + t : t;
    }
    return idx;
  }
  idx = indices[0];
  for (size_t i = 1; i < indices.size(); ++i) idx = idx * shape[i] + indices[i];
  return idx;
}

Buffer Buffer::make(std::string name, DataType dtype, std::vector<Expr> shape,
                    std::vector<Expr> strides, std::string scope) {
  auto* n = new BufferNode();
  n->data = Var(name, DataType::Handle());
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->strides = std::move(strides);
  n->name = std::move(name);
  n->scope = std::move(scope);
  return Buffer(n);
}

Expr Buffer::load(const std::vector<Expr>& indices) const {
  return Load::make(get()->dtype, get()->data, get()->flat_index(indices));
}

Stmt Buffer::store(const std::vector<Expr>& indices, Expr value) const {
  return Store::make(get()->data, std::move(value), get()->flat_index(indices));
}

}  // namespace kiln::ir
