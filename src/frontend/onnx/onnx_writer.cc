// Writing an OnnxModel (onnx_model.h) as an ONNX ModelProto: opset imports, graph inputs and
// outputs (element type and shape when known), initializers as raw little-endian data, nodes
// with their attributes (ints, floats, strings, their lists and tensors). Used by `kiln
// quantize` to write the QDQ model it makes. Graph-valued attributes are not supported.
#include "kiln/frontend/onnx_writer.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "kiln/support/error.h"

namespace kiln::frontend {

namespace {

int onnx_type(DataType t, const std::string& what) {
  if (t == DataType::Float(32)) return onnx::TensorProto::FLOAT;
  if (t == DataType::UInt(8)) return onnx::TensorProto::UINT8;
  if (t == DataType::Int(8)) return onnx::TensorProto::INT8;
  if (t == DataType::Int(16)) return onnx::TensorProto::INT16;
  if (t == DataType::UInt(16)) return onnx::TensorProto::UINT16;
  if (t == DataType::Int(32)) return onnx::TensorProto::INT32;
  if (t == DataType::Int(64)) return onnx::TensorProto::INT64;
  if (t == DataType::Bool()) return onnx::TensorProto::BOOL;
  if (t == DataType::Float(16)) return onnx::TensorProto::FLOAT16;
  if (t == DataType::Float(64)) return onnx::TensorProto::DOUBLE;
  if (t == DataType::UInt(32)) return onnx::TensorProto::UINT32;
  if (t == DataType::UInt(64)) return onnx::TensorProto::UINT64;
  if (t == DataType::BFloat16()) return onnx::TensorProto::BFLOAT16;
  KILN_ERROR << "writing ONNX: " << what << " has the element type " << t
             << ", which ONNX files cannot hold";
}

void put_tensor(const runtime::NDArray& a, const std::string& name, onnx::TensorProto* t) {
  t->set_name(name);
  t->set_data_type(onnx_type(a.dtype(), "tensor '" + name + "'"));
  for (int64_t d : a.shape()) t->add_dims(d);
  t->set_raw_data(std::string(static_cast<const char*>(a.data()), a.nbytes()));
}

void put_value_info(const OnnxValueInfo& v, onnx::ValueInfoProto* p) {
  p->set_name(v.name);
  if (v.dtype.is_void()) return;
  KILN_USER_CHECK(v.kind.empty() && !v.optional)
      << "writing ONNX: value '" << v.name << "' is a " << v.kind << ", not a tensor";
  auto* tt = p->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type(v.dtype, "value '" + v.name + "'"));
  if (!v.has_shape) return;
  auto* shape = tt->mutable_shape();
  for (const OnnxDim& d : v.shape) {
    auto* dim = shape->add_dim();
    if (d.size >= 0) {
      dim->set_dim_value(d.size);
    } else if (!d.param.empty()) {
      dim->set_dim_param(d.param);
    }
  }
}

void put_attr(const std::string& name, const OnnxAttr& a, onnx::AttributeProto* p) {
  p->set_name(name);
  if (const auto* i = std::get_if<int64_t>(&a)) {
    p->set_type(onnx::AttributeProto::INT);
    p->set_i(*i);
  } else if (const auto* f = std::get_if<double>(&a)) {
    p->set_type(onnx::AttributeProto::FLOAT);
    p->set_f(static_cast<float>(*f));
  } else if (const auto* s = std::get_if<std::string>(&a)) {
    p->set_type(onnx::AttributeProto::STRING);
    p->set_s(*s);
  } else if (const auto* is = std::get_if<std::vector<int64_t>>(&a)) {
    p->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : *is) p->add_ints(v);
  } else if (const auto* fs = std::get_if<std::vector<double>>(&a)) {
    p->set_type(onnx::AttributeProto::FLOATS);
    for (double v : *fs) p->add_floats(static_cast<float>(v));
  } else if (const auto* ss = std::get_if<std::vector<std::string>>(&a)) {
    p->set_type(onnx::AttributeProto::STRINGS);
    for (const std::string& v : *ss) p->add_strings(v);
  } else {
    p->set_type(onnx::AttributeProto::TENSOR);
    put_tensor(std::get<runtime::NDArray>(a), "", p->mutable_t());
  }
}

/// The model as a ModelProto; initializers of at least `external_min_bytes` are appended to
/// `external` (when given) and referenced from the model as `external_name`.
onnx::ModelProto model_proto(const OnnxModel& m, std::string* external,
                             const std::string& external_name, uint64_t external_min_bytes) {
  onnx::ModelProto proto;
  proto.set_ir_version(m.ir_version > 0 ? m.ir_version : 8);
  proto.set_producer_name(m.producer.empty() ? "kiln" : m.producer);
  for (const auto& [domain, version] : m.opsets) {
    auto* o = proto.add_opset_import();
    o->set_domain(domain);
    o->set_version(version);
  }
  auto* g = proto.mutable_graph();
  g->set_name("kiln");
  for (const OnnxValueInfo& v : m.inputs) put_value_info(v, g->add_input());
  for (const OnnxValueInfo& v : m.outputs) put_value_info(v, g->add_output());
  for (const auto& [name, a] : m.initializers) {
    onnx::TensorProto* t = g->add_initializer();
    put_tensor(a, name, t);
    if (!external || a.nbytes() < external_min_bytes) continue;
    // Each tensor at a 64-byte boundary of the data file, as little-endian raw bytes.
    external->resize((external->size() + 63) / 64 * 64, '\0');
    auto entry = [&](const char* key, const std::string& value) {
      onnx::StringStringEntryProto* e = t->add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    entry("location", external_name);
    entry("offset", std::to_string(external->size()));
    entry("length", std::to_string(t->raw_data().size()));
    external->append(t->raw_data());
    t->clear_raw_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
  }
  for (const OnnxNode& n : m.nodes) {
    KILN_USER_CHECK(!n.has_subgraph)
        << "writing ONNX: node '" << n.name << "' (" << n.op_type
        << ") has a graph attribute, which the writer does not support";
    auto* p = g->add_node();
    p->set_op_type(n.op_type);
    p->set_domain(n.domain);
    p->set_name(n.name);
    for (const std::string& s : n.inputs) p->add_input(s);
    for (const std::string& s : n.outputs) p->add_output(s);
    for (const auto& [k, a] : n.attrs) put_attr(k, a, p->add_attribute());
  }
  return proto;
}

std::string serialized(const onnx::ModelProto& proto) {
  std::string bytes;
  KILN_ICHECK(proto.SerializeToString(&bytes)) << "writing ONNX: protobuf serialization failed";
  return bytes;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  KILN_USER_CHECK(f.good()) << "cannot open '" << path << "' for writing";
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  KILN_USER_CHECK(f.good()) << "error writing '" << path << "'";
}

}  // namespace

std::string serialize_onnx_model(const OnnxModel& m) {
  onnx::ModelProto proto = model_proto(m, nullptr, "", 0);
  KILN_USER_CHECK(proto.ByteSizeLong() <= static_cast<size_t>(std::numeric_limits<int>::max()))
      << "writing ONNX: the model needs " << proto.ByteSizeLong()
      << " bytes, over protobuf's 2 GiB: save it with external data";
  return serialized(proto);
}

void save_onnx_model(const OnnxModel& m, const std::string& path, const OnnxSaveOptions& opt) {
  std::string name = opt.external_data;
  uint64_t total = 0;
  for (const auto& [_, a] : m.initializers) total += a.nbytes();
  // Past 1.5 GiB of weights the model would near protobuf's limit: they go beside it.
  if (name.empty() && total > (uint64_t{3} << 29))
    name = std::filesystem::path(path).filename().string() + ".data";
  if (name.empty()) return write_file(path, serialize_onnx_model(m));
  KILN_USER_CHECK(std::filesystem::path(name).filename() == name && name != "." && name != "..")
      << "writing ONNX: the external data file '" << name
      << "' must be a file name (it is written next to the model)";
  std::string external;
  const std::string bytes = serialized(model_proto(m, &external, name, opt.external_min_bytes));
  write_file((std::filesystem::path(path).parent_path() / name).string(), external);
  write_file(path, bytes);
}

}  // namespace kiln::frontend
