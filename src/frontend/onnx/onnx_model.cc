// Reading ONNX files with Debian's libonnx protobuf classes into Kiln's OnnxModel description:
// value infos, attributes, and tensors (raw_data or typed fields, little-endian) copied into
// runtime::NDArrays. Every structural problem becomes a kiln::Error that names the file and,
// where there is one, the node or tensor.
#include "kiln/frontend/onnx_model.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "kiln/support/error.h"

namespace kiln::frontend {

namespace {

/// ONNX TensorProto.DataType -> Kiln DataType; Void() for types Kiln does not hold.
DataType onnx_dtype(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT:
      return DataType::Float(32);
    case onnx::TensorProto::UINT8:
      return DataType::UInt(8);
    case onnx::TensorProto::INT8:
      return DataType::Int(8);
    case onnx::TensorProto::UINT16:
      return DataType::UInt(16);
    case onnx::TensorProto::INT16:
      return DataType::Int(16);
    case onnx::TensorProto::INT32:
      return DataType::Int(32);
    case onnx::TensorProto::INT64:
      return DataType::Int(64);
    case onnx::TensorProto::BOOL:
      return DataType::Bool();
    case onnx::TensorProto::FLOAT16:
      return DataType::Float(16);
    case onnx::TensorProto::DOUBLE:
      return DataType::Float(64);
    case onnx::TensorProto::UINT32:
      return DataType::UInt(32);
    case onnx::TensorProto::UINT64:
      return DataType::UInt(64);
    case onnx::TensorProto::BFLOAT16:
      return DataType::BFloat16();
    default:
      return DataType::Void();
  }
}

std::string onnx_dtype_name(int t) {
  return onnx::TensorProto::DataType_IsValid(t)
             ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t))
             : "type " + std::to_string(t);
}

/// Copies `n` values of a repeated field into dst, converting to the element type T.
template <typename T, typename Field>
void copy_field(const Field& f, int64_t n, void* dst) {
  T* out = static_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(f.Get(static_cast<int>(i)));
}

runtime::NDArray tensor_to_ndarray(const onnx::TensorProto& t, const std::string& where) {
  const std::string name = t.name().empty() ? "<unnamed>" : t.name();
  KILN_USER_CHECK(t.data_location() != onnx::TensorProto::EXTERNAL)
      << where << ": tensor '" << name
      << "' keeps its data in an external file, which Kiln does not read yet";
  DataType dt = onnx_dtype(t.data_type());
  KILN_USER_CHECK(!dt.is_void()) << where << ": tensor '" << name << "' has element type "
                                 << onnx_dtype_name(t.data_type())
                                 << ", which Kiln does not support";
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  for (int64_t d : shape) {
    KILN_USER_CHECK(d >= 0) << where << ": tensor '" << name << "' has a negative dimension " << d;
    n *= d;
  }
  runtime::NDArray a = runtime::NDArray::empty(shape, dt);
  const size_t elem = static_cast<size_t>(dt.bytes());
  auto count_check = [&](int64_t have, const char* field) {
    KILN_USER_CHECK(have == n) << where << ": tensor '" << name << "' has shape with " << n
                               << " elements but " << have << " values in " << field;
  };
  if (t.has_raw_data()) {
    count_check(static_cast<int64_t>(t.raw_data().size() / elem), "raw_data");
    KILN_USER_CHECK(t.raw_data().size() == n * elem)
        << where << ": tensor '" << name << "' raw_data has " << t.raw_data().size()
        << " bytes, expected " << n * elem;
    if (n > 0) std::memcpy(a.data(), t.raw_data().data(), n * elem);
    return a;
  }
  void* dst = a.data();
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      count_check(t.float_data_size(), "float_data");
      copy_field<float>(t.float_data(), n, dst);
      break;
    case onnx::TensorProto::DOUBLE:
      count_check(t.double_data_size(), "double_data");
      copy_field<double>(t.double_data(), n, dst);
      break;
    case onnx::TensorProto::INT64:
      count_check(t.int64_data_size(), "int64_data");
      copy_field<int64_t>(t.int64_data(), n, dst);
      break;
    case onnx::TensorProto::UINT32:
      count_check(t.uint64_data_size(), "uint64_data");
      copy_field<uint32_t>(t.uint64_data(), n, dst);
      break;
    case onnx::TensorProto::UINT64:
      count_check(t.uint64_data_size(), "uint64_data");
      copy_field<uint64_t>(t.uint64_data(), n, dst);
      break;
    case onnx::TensorProto::INT32:
      count_check(t.int32_data_size(), "int32_data");
      copy_field<int32_t>(t.int32_data(), n, dst);
      break;
    case onnx::TensorProto::INT16:
      count_check(t.int32_data_size(), "int32_data");
      copy_field<int16_t>(t.int32_data(), n, dst);
      break;
    case onnx::TensorProto::INT8:
      count_check(t.int32_data_size(), "int32_data");
      copy_field<int8_t>(t.int32_data(), n, dst);
      break;
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:  // 16-bit patterns held in int32_data
      count_check(t.int32_data_size(), "int32_data");
      copy_field<uint16_t>(t.int32_data(), n, dst);
      break;
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      count_check(t.int32_data_size(), "int32_data");
      copy_field<uint8_t>(t.int32_data(), n, dst);
      break;
    default:
      KILN_ERROR << where << ": tensor '" << name << "' has no data for element type "
                 << onnx_dtype_name(t.data_type());
  }
  return a;
}

OnnxValueInfo value_info(const onnx::ValueInfoProto& v, const std::string& where) {
  OnnxValueInfo out;
  out.name = v.name();
  if (!v.has_type() || !v.type().has_tensor_type()) {
    out.dtype = DataType::Void();
    return out;
  }
  const auto& tt = v.type().tensor_type();
  out.dtype = onnx_dtype(tt.elem_type());
  if (tt.has_shape()) {
    out.has_shape = true;
    for (const auto& d : tt.shape().dim()) {
      OnnxDim dim;
      if (d.has_dim_value())
        dim.size = d.dim_value();
      else
        dim.param = d.dim_param();
      out.shape.push_back(dim);
    }
  }
  return out;
}

OnnxAttr attribute(const onnx::AttributeProto& a, const std::string& where) {
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT:
      return static_cast<double>(a.f());
    case onnx::AttributeProto::INT:
      return a.i();
    case onnx::AttributeProto::STRING:
      return a.s();
    case onnx::AttributeProto::TENSOR:
      return tensor_to_ndarray(a.t(), where);
    case onnx::AttributeProto::FLOATS:
      return std::vector<double>(a.floats().begin(), a.floats().end());
    case onnx::AttributeProto::INTS:
      return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto::STRINGS:
      return std::vector<std::string>(a.strings().begin(), a.strings().end());
    default:
      KILN_ERROR << where << ": attribute '" << a.name() << "' has type "
                 << onnx::AttributeProto::AttributeType_Name(a.type())
                 << ", which Kiln does not read";
  }
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  KILN_USER_CHECK(f.good()) << "cannot read " << what << " '" << path
                            << "': " << std::strerror(errno);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace

int64_t OnnxModel::default_opset() const {
  auto it = opsets.find("");
  return it == opsets.end() ? 0 : it->second;
}

OnnxModel parse_onnx_model(const std::string& bytes, const std::string& what) {
  onnx::ModelProto proto;
  KILN_USER_CHECK(proto.ParseFromString(bytes))
      << "'" << what << "' is not a valid ONNX model: the protobuf data cannot be parsed (is the "
      << "file truncated, or not an ONNX file?)";
  KILN_USER_CHECK(proto.ir_version() > 0 && proto.has_graph())
      << "'" << what
      << "' is not an ONNX model: " << (proto.has_graph() ? "no ir_version" : "it has no graph");
  OnnxModel m;
  m.path = what;
  m.ir_version = proto.ir_version();
  m.producer = proto.producer_name();
  for (const auto& op : proto.opset_import()) {
    std::string dom = op.domain() == "ai.onnx" ? "" : op.domain();
    m.opsets[dom] = op.version();
  }
  const onnx::GraphProto& g = proto.graph();
  std::set<std::string> defined;
  for (const auto& t : g.initializer()) {
    KILN_USER_CHECK(!t.name().empty()) << "'" << what << "': an initializer has no name";
    m.initializers[t.name()] = tensor_to_ndarray(t, "'" + what + "'");
    defined.insert(t.name());
  }
  KILN_USER_CHECK(g.sparse_initializer_size() == 0)
      << "'" << what << "': sparse initializers are not supported";
  for (const auto& v : g.input()) {
    if (m.initializers.count(v.name())) continue;
    m.inputs.push_back(value_info(v, "'" + what + "'"));
    defined.insert(v.name());
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& np = g.node(i);
    OnnxNode n;
    n.op_type = np.op_type();
    n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
    std::string where = "'" + what + "', node '" + n.name + "' (" + n.op_type + ")";
    for (const std::string& in : np.input()) {
      KILN_USER_CHECK(in.empty() || defined.count(in))
          << where << ": input '" << in
          << "' is not a graph input, an initializer or an output of an earlier node";
      n.inputs.push_back(in);
    }
    for (const std::string& out : np.output()) {
      n.outputs.push_back(out);
      if (!out.empty()) defined.insert(out);
    }
    for (const auto& a : np.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS) {
        n.has_subgraph = true;
        continue;
      }
      n.attrs[a.name()] = attribute(a, where);
    }
    m.nodes.push_back(std::move(n));
  }
  for (const auto& v : g.output()) {
    KILN_USER_CHECK(defined.count(v.name()))
        << "'" << what << "': graph output '" << v.name() << "' is not produced by any node";
    m.outputs.push_back(value_info(v, "'" + what + "'"));
  }
  return m;
}

OnnxModel load_onnx_model(const std::string& path) {
  return parse_onnx_model(read_file(path, "ONNX model"), path);
}

runtime::NDArray load_onnx_tensor(const std::string& path) {
  std::string bytes = read_file(path, "ONNX tensor");
  onnx::TensorProto t;
  KILN_USER_CHECK(t.ParseFromString(bytes))
      << "'" << path << "' is not a serialized ONNX TensorProto";
  return tensor_to_ndarray(t, "'" + path + "'");
}

}  // namespace kiln::frontend
