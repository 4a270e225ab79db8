// storage_flatten: multi-dimensional producers -> flat buffers. A top-down mutator keeps a map
// from producer to its flat layout (data var, realize mins, strides). Realize scope and storage
// alignment attributes about a producer are collected on the way down and consumed by its
// ProducerRealize, which becomes an Allocate of stride_0 * extent_0 elements; strides are
// row-major over the realize extents, a stride being padded up to `offset` modulo `factor` for
// an aligned dimension. Loads and stores subtract the realize mins and dot with the strides;
// argument tensors use their Buffer's flat_index on the buffer's data var. A tensorized region
// (te/tensor_intrin.h: a buffer_bind_scope attribute) binds an intrinsic operand's view to the
// tensor's storage: its data variable becomes the tensor's, its elem_offset the flat offset of
// the region's first element, its stride variables the tensor's strides in the trailing
// dimensions; a stride the intrinsic declared as a constant must equal the tensor's.
#include <map>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/ir/printer.h"
#include "kiln/te/tensor_intrin.h"
#include "kiln/tir/transform.h"

namespace kiln::tir {
namespace {

struct FlatLayout {
  Var data;
  DataType dtype;
  std::vector<Expr> mins;
  std::vector<Expr> strides;
};

class StorageFlattener : public IRMutator {
 public:
  explicit StorageFlattener(const ExternBufferMap& ext) : extern_(ext) {}

 protected:
  using IRMutator::visit;

  Stmt visit(const AttrStmt* op) override {
    const auto* prod = dynamic_cast<const ProducerNode*>(op->node.get());
    if (prod && op->key == attr::kRealizeScope) {
      const StringImm* s = op->value.as<StringImm>();
      KILN_ICHECK(s) << "storage_flatten: realize_scope of " << prod->producer_name()
                     << " is not a string";
      scope_[prod] = s->value;
      return mutate(op->body);
    }
    if (prod && op->key == attr::kStorageAlign) {
      const Call* c = op->value.as<Call>();
      KILN_ICHECK(c && c->args.size() == 3)
          << "storage_flatten: storage_align of " << prod->producer_name()
          << " must be a call (dim, factor, offset)";
      auto dim = as_const_int(c->args[0]), factor = as_const_int(c->args[1]),
           offset = as_const_int(c->args[2]);
      KILN_ICHECK(dim && factor && offset && *factor > 0)
          << "storage_flatten: storage_align of " << prod->producer_name()
          << " needs constant dim, positive factor and offset";
      align_[prod][*dim] = {*factor, *offset};
      return mutate(op->body);
    }
    if (prod && op->key == te::kBufferBindScope) return bind_buffer(prod, op);
    return IRMutator::visit(op);
  }

  /// tuple(what, data, elem_offset, rank, strides..., steps..., mins...) over the tensor `p`:
  /// the view's stride along dimension j is steps[j] times the tensor's.
  Stmt bind_buffer(const ProducerNode* p, const AttrStmt* op) {
    const Call* c = op->value.as<Call>();
    KILN_ICHECK(c && c->args.size() >= 4 && c->args[0].as<StringImm>())
        << "storage_flatten: malformed buffer_bind_scope of " << p->producer_name();
    const std::string what = c->args[0].as<StringImm>()->value;
    Var data(c->args[1].as<Variable>()), offset(c->args[2].as<Variable>());
    const auto rank = static_cast<size_t>(*as_const_int(c->args[3]));
    KILN_ICHECK(c->args.size() >= 4 + 2 * rank) << "storage_flatten: buffer_bind_scope of " << what;
    std::vector<Expr> mins;
    for (size_t i = 4 + 2 * rank; i < c->args.size(); ++i) mins.push_back(mutate(c->args[i]));
    const size_t m = mins.size();
    KILN_ICHECK(rank <= m) << "storage_flatten: " << what << " binds rank " << rank << " to "
                           << p->producer_name() << " of rank " << m;
    Var base;
    Expr flat = flatten(p, mins, &base);
    std::vector<Expr> strides = strides_of(p);
    VarMap<Expr> sub;
    sub[data] = base;
    sub[offset] = flat;
    for (size_t j = 0; j < rank; ++j) {
      Expr declared = c->args[4 + j];
      Expr actual = strides[m - rank + j];
      const Expr& step = c->args[4 + rank + j];
      if (!is_one(step)) actual = ana_.simplify(actual * cast(actual.dtype(), step));
      if (const Variable* v = declared.as<Variable>()) {
        sub[Var(v)] = actual;
        continue;
      }
      auto want = as_const_int(declared);
      auto got = as_const_int(ana_.simplify(actual));
      KILN_USER_CHECK(want && got && *want == *got)
          << what << ": dimension " << j << " needs stride " << declared << ", but tensor '"
          << p->producer_name() << "' has stride " << actual << " there (dimension "
          << (m - rank + j) << ")";
    }
    return substitute(mutate(op->body), sub);
  }

  /// Strides of a realized or argument tensor, in elements.
  std::vector<Expr> strides_of(const ProducerNode* p) {
    auto it = layouts_.find(p);
    if (it != layouts_.end()) return it->second.strides;
    auto e = extern_.find(p);
    KILN_ICHECK(e != extern_.end())
        << "storage_flatten: tensor " << p->producer_name() << " is bound outside its realize";
    const Buffer& b = e->second;
    if (!b->strides.empty()) return b->strides;
    std::vector<Expr> s(b->shape.size());
    Expr acc = make_const(DataType::Int(32), int64_t{1});
    for (size_t k = b->shape.size(); k-- > 0;) {
      s[k] = acc;
      acc = acc * cast(acc.dtype(), b->shape[k]);
    }
    return s;
  }

  Stmt visit(const ProducerRealize* op) override {
    const ProducerNode* p = op->producer.get();
    KILN_ICHECK(!layouts_.count(p))
        << "storage_flatten: " << p->producer_name() << " is realized twice in one scope";
    FlatLayout lay;
    lay.data = Var(p->producer_name(), DataType::Handle());
    lay.dtype = p->producer_dtype();
    size_t n = op->bounds.size();
    lay.strides.resize(n);
    Expr stride = make_const(DataType::Int(32), int64_t{1});
    auto al = align_.find(p);
    for (size_t k = n; k-- > 0;) {
      if (al != align_.end()) {
        auto it = al->second.find(static_cast<int64_t>(k));
        if (it != al->second.end()) {
          auto [factor, offset] = it->second;
          // Pad stride up to the next value congruent to offset modulo factor.
          stride = stride + floormod(make_const(stride.dtype(), factor + offset) -
                                         floormod(stride, make_const(stride.dtype(), factor)),
                                     make_const(stride.dtype(), factor));
        }
      }
      lay.strides[k] = stride;
      stride = stride * cast(stride.dtype(), op->bounds[k]->extent);
    }
    for (const Range& r : op->bounds) lay.mins.push_back(r->min);
    std::string scope = op->storage_scope;
    if (scope.empty()) {
      auto it = scope_.find(p);
      scope = it == scope_.end() ? "global" : it->second;
    }
    layouts_[p] = lay;
    Stmt body = mutate(op->body);
    layouts_.erase(p);
    Expr cond = mutate(op->condition);
    return Allocate::make(lay.data, lay.dtype, {stride}, cond, body, scope);
  }

  Stmt visit(const ProducerStore* op) override {
    Expr value = mutate(op->value);
    std::vector<Expr> idx;
    mutate_all(op->indices, &idx);
    Var data;
    Expr flat = flatten(op->producer.get(), idx, &data);
    return Store::make(data, value, flat);
  }

  Expr visit(const ProducerLoad* op) override {
    std::vector<Expr> idx;
    mutate_all(op->indices, &idx);
    Var data;
    Expr flat = flatten(op->producer.get(), idx, &data);
    return Load::make(op->dtype, data, flat);
  }

 private:
  Expr flatten(const ProducerNode* p, const std::vector<Expr>& idx, Var* data) {
    auto it = layouts_.find(p);
    if (it != layouts_.end()) {
      const FlatLayout& lay = it->second;
      KILN_ICHECK(idx.size() == lay.strides.size())
          << "storage_flatten: " << p->producer_name() << " has " << lay.strides.size()
          << " dims, accessed with " << idx.size() << " indices";
      *data = lay.data;
      if (idx.empty()) return make_const(DataType::Int(32), int64_t{0});
      Expr flat;
      for (size_t k = 0; k < idx.size(); ++k) {
        Expr t = (idx[k] - lay.mins[k]) * lay.strides[k];
        flat = flat.defined() ? flat + t : t;
      }
      return flat;
    }
    auto e = extern_.find(p);
    KILN_ICHECK(e != extern_.end())
        << "storage_flatten: tensor " << p->producer_name()
        << " is accessed outside its realize and is not an argument buffer";
    *data = e->second->data;
    return e->second->flat_index(idx);
  }

  const ExternBufferMap& extern_;
  arith::Analyzer ana_;
  std::unordered_map<const ProducerNode*, FlatLayout> layouts_;
  std::unordered_map<const ProducerNode*, std::string> scope_;
  std::unordered_map<const ProducerNode*, std::map<int64_t, std::pair<int64_t, int64_t>>> align_;
};

}  // namespace

PrimFunc storage_flatten(PrimFunc f, const ExternBufferMap& extern_buffers) {
  Stmt body = StorageFlattener(extern_buffers).mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace kiln::tir
