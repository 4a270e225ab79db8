// Registration of the element-wise and broadcasting ops. Unary ops keep their input's type
// (dtype checks happen in topi's compute, reached through the generic rule only for ops whose
// dtype can change); binary ops broadcast with topi::broadcast_shape and require equal dtypes.

#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"
#include "kiln/topi/broadcast.h"
#include "kiln/topi/elemwise.h"

namespace kiln::graph {

namespace {

using UnaryFn = te::Tensor (*)(const te::Tensor&, const std::string&);
using BinaryFn = te::Tensor (*)(const te::Tensor&, const te::Tensor&, const std::string&);

OpDef unary(const std::string& name, UnaryFn f) {
  OpDef d;
  d.name = name;
  d.pattern = topi::OpPattern::kElemWise;
  d.compute = [f](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    return std::vector<te::Tensor>{f(in[0], n)};
  };
  return d;
}

OpDef binary(const std::string& name, BinaryFn f, bool bool_out = false) {
  OpDef d;
  d.name = name;
  d.min_inputs = d.max_inputs = 2;
  d.pattern = topi::OpPattern::kBroadcast;
  d.compute = [f](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    return std::vector<te::Tensor>{f(in[0], in[1], n)};
  };
  d.infer_rule = [name, bool_out](const std::vector<TensorType>& in, const Attrs&) {
    KILN_USER_CHECK(in[0].dtype == in[1].dtype)
        << name << ": dtype mismatch: " << in[0].str() << " and " << in[1].str();
    TensorType t{topi::broadcast_shape(in[0].shape, in[1].shape, name), in[0].dtype};
    if (bool_out) t.dtype = DataType::Bool();
    return std::vector<TensorType>{t};
  };
  return d;
}

}  // namespace

void register_elemwise_ops(OpRegistry& r) {
  struct U {
    const char* name;
    UnaryFn f;
  };
  const U unaries[] = {
      {"relu", topi::relu},
      {"sigmoid", topi::sigmoid},
      {"tanh", topi::tanh},
      {"exp", topi::exp},
      {"log", topi::log},
      {"sqrt", topi::sqrt},
      {"rsqrt", topi::rsqrt},
      {"erf", topi::erf},
      {"gelu", topi::gelu},
      {"abs", topi::abs},
      {"negative", topi::negative},
      {"floor", topi::floor},
      {"ceil", topi::ceil},
      {"round", topi::round},
      {"sign", topi::sign},
      {"reciprocal", topi::reciprocal},
      {"softplus", topi::softplus},
      {"identity", topi::identity},
      {"logical_not", topi::logical_not},
      {"sin", topi::sin},
      {"cos", topi::cos},
      {"tan", topi::tan},
      {"asin", topi::asin},
      {"acos", topi::acos},
      {"atan", topi::atan},
      {"sinh", topi::sinh},
      {"cosh", topi::cosh},
      {"asinh", topi::asinh},
      {"acosh", topi::acosh},
      {"atanh", topi::atanh},
      {"round_even", topi::round_even},
      {"isnan", topi::isnan},
  };
  for (const U& u : unaries) r.add(unary(u.name, u.f));

  // dropout at inference is the identity; `rate` is kept for the record.
  OpDef dropout = unary("dropout", topi::identity);
  dropout.attrs = {{"rate", AttrKind::kFloat, 0.5}};
  r.add(dropout);

  OpDef clip;
  clip.name = "clip";
  clip.pattern = topi::OpPattern::kElemWise;
  clip.attrs = {{"a_min", AttrKind::kFloat, std::nullopt},
                {"a_max", AttrKind::kFloat, std::nullopt}};
  clip.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return std::vector<te::Tensor>{
        topi::clip(in[0], a.get_float("a_min"), a.get_float("a_max"), n)};
  };
  r.add(clip);

  OpDef leaky;
  leaky.name = "leaky_relu";
  leaky.pattern = topi::OpPattern::kElemWise;
  leaky.attrs = {{"alpha", AttrKind::kFloat, 0.01}};
  leaky.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return std::vector<te::Tensor>{topi::leaky_relu(in[0], a.get_float("alpha"), n)};
  };
  r.add(leaky);

  OpDef cast;
  cast.name = "cast";
  cast.pattern = topi::OpPattern::kElemWise;
  cast.attrs = {{"dtype", AttrKind::kString, std::nullopt}};
  cast.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return std::vector<te::Tensor>{topi::cast(in[0], DataType::parse(a.get_string("dtype")), n)};
  };
  r.add(cast);

  struct B {
    const char* name;
    BinaryFn f;
    bool bool_out;
  };
  const B binaries[] = {
      {"add", topi::add, false},
      {"subtract", topi::subtract, false},
      {"multiply", topi::multiply, false},
      {"divide", topi::divide, false},
      {"power", topi::power, false},
      {"maximum", topi::maximum, false},
      {"minimum", topi::minimum, false},
      {"equal", topi::equal, true},
      {"not_equal", topi::not_equal, true},
      {"less", topi::less, true},
      {"less_equal", topi::less_equal, true},
      {"greater", topi::greater, true},
      {"greater_equal", topi::greater_equal, true},
  };
  for (const B& b : binaries) r.add(binary(b.name, b.f, b.bool_out));

  OpDef where;
  where.name = "where";
  where.min_inputs = where.max_inputs = 3;
  where.pattern = topi::OpPattern::kBroadcast;
  where.compute = [](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    return std::vector<te::Tensor>{topi::where(in[0], in[1], in[2], n)};
  };
  r.add(where);
}

}  // namespace kiln::graph
