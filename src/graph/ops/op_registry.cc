// The op registry: a map from op name to its checked definition, built once on first use by
// the explicit registration functions of ops_*.cc. Attribute normalization walks the given
// attributes against the schema (unknown, missing, mistyped) and fills defaults. The generic
// type rule builds the op's te compute on placeholders of the input types and reads the
// static shapes and dtypes of the resulting tensors.

#include "kiln/graph/op_registry.h"

#include "kiln/ir/op.h"
#include "kiln/support/error.h"

namespace kiln::graph {

const AttrSpec* OpDef::find_attr(const std::string& n) const {
  for (const AttrSpec& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

Attrs OpDef::normalize_attrs(const Attrs& given, const std::string& where) const {
  Attrs out;
  for (const auto& [k, v] : given.map()) {
    const AttrSpec* spec = find_attr(k);
    if (!spec) {
      std::string known;
      for (const AttrSpec& a : attrs) known += (known.empty() ? "" : ", ") + a.name;
      KILN_ERROR << where << ": op '" << name << "' has no attribute '" << k
                 << "' (its attributes: " << (known.empty() ? "none" : known) << ")";
    }
    AttrKind got = attr_kind(v);
    if (got == spec->kind) {
      out.set(k, v);
    } else if (spec->kind == AttrKind::kFloat && got == AttrKind::kInt) {
      out.set(k, static_cast<double>(std::get<int64_t>(v)));
    } else if (spec->kind == AttrKind::kFloats && got == AttrKind::kInts) {
      const auto& iv = std::get<std::vector<int64_t>>(v);
      out.set(k, std::vector<double>(iv.begin(), iv.end()));
    } else {
      KILN_ERROR << where << ": op '" << name << "': attribute '" << k << "' must be of kind "
                 << attr_kind_name(spec->kind) << ", got " << attr_kind_name(got) << " "
                 << attr_value_str(v);
    }
  }
  for (const AttrSpec& a : attrs) {
    if (out.has(a.name)) continue;
    KILN_USER_CHECK(!a.required()) << where << ": op '" << name << "' requires attribute '"
                                   << a.name << "' (" << attr_kind_name(a.kind) << ")";
    out.set(a.name, *a.default_value);
  }
  return out;
}

void OpDef::check_num_inputs(int n, const std::string& where) const {
  bool ok = n >= min_inputs && (max_inputs < 0 || n <= max_inputs);
  if (ok) return;
  std::string want = max_inputs < 0 ? "at least " + std::to_string(min_inputs)
                     : min_inputs == max_inputs
                         ? std::to_string(min_inputs)
                         : std::to_string(min_inputs) + " to " + std::to_string(max_inputs);
  KILN_ERROR << where << ": op '" << name << "' takes " << want << " input(s), got " << n;
}

std::vector<te::Tensor> placeholders_for(const std::vector<TensorType>& types) {
  std::vector<te::Tensor> r;
  for (size_t i = 0; i < types.size(); ++i) {
    std::vector<ir::Expr> shape;
    for (int64_t d : types[i].shape) {
      shape.push_back(d <= INT32_MAX ? ir::Expr(static_cast<int32_t>(d)) : ir::Expr(d));
    }
    r.push_back(te::placeholder(shape, types[i].dtype, "in" + std::to_string(i)));
  }
  return r;
}

TensorType tensor_type(const te::Tensor& t) {
  TensorType r;
  r.dtype = t->dtype;
  for (const ir::Expr& e : t->shape) {
    auto v = ir::as_const_int(e);
    KILN_ICHECK(v.has_value()) << "tensor " << t.name() << " has a non-constant extent";
    r.shape.push_back(*v);
  }
  return r;
}

std::vector<TensorType> OpDef::infer(const std::vector<TensorType>& inputs, const Attrs& a) const {
  if (infer_rule) return infer_rule(inputs, a);
  std::vector<te::Tensor> outs = compute(placeholders_for(inputs), a, name);
  KILN_ICHECK(static_cast<int>(outs.size()) == num_outputs)
      << "op " << name << ": compute returned " << outs.size() << " tensors, expected "
      << num_outputs;
  std::vector<TensorType> r;
  for (const te::Tensor& t : outs) r.push_back(tensor_type(t));
  return r;
}

// ---------------------------------------------------------------------------------------------

const OpRegistry& OpRegistry::global() {
  static const OpRegistry reg = [] {
    OpRegistry r;
    register_elemwise_ops(r);
    register_nn_ops(r);
    register_transform_ops(r);
    register_layout_ops(r);
    register_extra_ops(r);
    register_ndim_ops(r);
    register_signal_ops(r);
    register_dynamic_ops(r);
    register_rnn_ops(r);
    register_qnn_ops(r);
    return r;
  }();
  return reg;
}

void OpRegistry::register_op(OpDef def) { const_cast<OpRegistry&>(global()).add(std::move(def)); }

void OpRegistry::add(OpDef def) {
  KILN_ICHECK(!def.name.empty()) << "op registry: an op without a name";
  KILN_ICHECK(!ops_.count(def.name)) << "op registry: op '" << def.name << "' registered twice";
  KILN_ICHECK(def.compute) << "op registry: op '" << def.name << "' has no compute";
  KILN_ICHECK(def.min_inputs >= 0 && (def.max_inputs < 0 || def.max_inputs >= def.min_inputs))
      << "op registry: op '" << def.name << "' has a bad input count";
  KILN_ICHECK(def.num_outputs >= 1) << "op registry: op '" << def.name << "' has no outputs";
  for (size_t i = 0; i < def.attrs.size(); ++i) {
    const AttrSpec& a = def.attrs[i];
    KILN_ICHECK(!a.default_value || attr_kind(*a.default_value) == a.kind)
        << "op registry: op '" << def.name << "': default of attribute '" << a.name
        << "' is not of kind " << attr_kind_name(a.kind);
    for (size_t j = 0; j < i; ++j)
      KILN_ICHECK(def.attrs[j].name != a.name)
          << "op registry: op '" << def.name << "' declares attribute '" << a.name << "' twice";
  }
  std::string n = def.name;
  ops_.emplace(n, std::move(def));
}

const OpDef* OpRegistry::find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

const OpDef& OpRegistry::get(const std::string& name, const std::string& where) const {
  const OpDef* d = find(name);
  KILN_USER_CHECK(d) << (where.empty() ? "" : where + ": ") << "unknown op '" << name << "'";
  return *d;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> r;
  for (const auto& [k, v] : ops_) r.push_back(k);
  return r;
}

}  // namespace kiln::graph
