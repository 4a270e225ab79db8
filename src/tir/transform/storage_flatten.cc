// storage_flatten: multi-dimensional producers -> flat buffers. A top-down mutator keeps a map
// from producer to its flat layout (data var, realize mins, strides). Realize scope and storage
// alignment attributes about a producer are collected on the way down and consumed by its
// ProducerRealize, which becomes an Allocate of stride_0 * extent_0 elements; strides are
// row-major over the realize extents, a stride being padded up to `offset` modulo `factor` for
// an aligned dimension. Loads and stores subtract the realize mins and dot with the strides;
// argument tensors use their Buffer's flat_index on the buffer's data var.
#include <map>

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
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
    return IRMutator::visit(op);
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
