// Reading ONNX files with Debian's libonnx protobuf classes into Kiln's OnnxModel description:
// value infos, attributes, and tensors (raw_data or typed fields, little-endian) copied into
// runtime::NDArrays; sub-graphs (If/Loop/Scan bodies) read recursively, their nodes allowed to
// use names of enclosing graphs. Sequence and optional values are recognised, not computed: a
// value info records its kind, and a SequenceProto/OptionalProto test-data file (which also
// parses as a nonsensical TensorProto) is refused by name by load_onnx_tensor and read by
// load_onnx_sequence. A sequence value info describes its elements' type and shape. Tensors
// whose data lives in external files (models over protobuf's 2 GiB, `onnx.save(...,
// save_as_external_data=True)`) are read from files named relative to the model's folder, each
// mapped once. Every structural problem becomes a kiln::Error that names the file and, where
// there is one, the node or tensor.
#include "kiln/frontend/onnx_model.h"

#include <onnx/onnx-data_pb.h>  // SequenceProto; includes onnx_pb.h

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "kiln/support/error.h"
#include "kiln/support/file.h"

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

/// How many values a tensor stores (in raw_data or the typed field of its element type), and
/// in which field.
int64_t stored_values(const onnx::TensorProto& t, size_t elem, const char** field = nullptr) {
  auto in = [&](const char* f, int64_t k) {
    if (field) *field = f;
    return k;
  };
  if (t.has_raw_data()) return in("raw_data", static_cast<int64_t>(t.raw_data().size() / elem));
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      return in("float_data", t.float_data_size());
    case onnx::TensorProto::DOUBLE:
      return in("double_data", t.double_data_size());
    case onnx::TensorProto::INT64:
      return in("int64_data", t.int64_data_size());
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
      return in("uint64_data", t.uint64_data_size());
    default:
      return in("int32_data", t.int32_data_size());
  }
}

/// The data files of a model's external tensors: named by a path relative to the model's
/// folder (`dir`; none for a model parsed from bytes, whose external tensors are refused), each
/// mapped once however many tensors it holds.
class ExternalFiles {
 public:
  explicit ExternalFiles(std::optional<std::string> dir) : dir_(std::move(dir)) {}

  /// The `nbytes` bytes of external tensor `t` (`name`, in `where`): its entries `location`
  /// (required), `offset` and `length` (decimal; default 0 and the rest of the file).
  std::string_view bytes(const onnx::TensorProto& t, const std::string& name,
                         const std::string& where, uint64_t nbytes) {
    const std::string what = where + ": tensor '" + name + "'";
    std::string location;
    std::optional<uint64_t> offset, length;
    for (const auto& e : t.external_data()) {
      if (e.key() == "location") location = e.value();
      if (e.key() == "offset") offset = number(e.value(), "offset", what);
      if (e.key() == "length") length = number(e.value(), "length", what);
    }
    KILN_USER_CHECK(!location.empty())
        << what << " keeps its data in an external file but names none (no 'location' entry)";
    KILN_USER_CHECK(dir_) << what << " keeps its data in the external file '" << location
                          << "', which is found next to the model file: load the model from "
                             "its file, not from bytes";
    namespace fs = std::filesystem;
    const fs::path rel(location);
    bool escapes = rel.is_absolute() || rel.has_root_name();
    for (const fs::path& part : rel) escapes |= part == "..";
    KILN_USER_CHECK(!escapes) << what << " names its external data file '" << location
                              << "': the location must be a path inside the model's folder "
                                 "(relative, without '..')";
    const std::string path = (fs::path(*dir_) / rel).string();
    std::unique_ptr<support::MappedFile>& file = files_[path];
    if (!file)
      file = std::make_unique<support::MappedFile>(
          path, what + ": its external data file '" + path + "'");
    const uint64_t size = file->size(), start = offset.value_or(0);
    KILN_USER_CHECK(start <= size) << what << " starts at offset " << start << " of '" << path
                                   << "', which has only " << size << " bytes";
    const uint64_t count = length.value_or(size - start);
    KILN_USER_CHECK(count <= size - start)
        << what << " has " << count << " bytes at offset " << start << " of '" << path
        << "', which has only " << size << " bytes";
    KILN_USER_CHECK(count == nbytes) << what << " has " << count << " bytes in '" << path
                                     << "', expected " << nbytes << " for its shape";
    return {file->data() + start, static_cast<size_t>(count)};
  }

 private:
  static uint64_t number(const std::string& s, const char* key, const std::string& what) {
    uint64_t v = 0;
    bool ok = !s.empty() && s.size() <= 19;
    for (char c : s) ok &= c >= '0' && c <= '9';
    if (ok) v = std::stoull(s);
    KILN_USER_CHECK(ok) << what << " has the external data entry " << key << " = '" << s
                        << "', which is not a byte count";
    return v;
  }

  std::optional<std::string> dir_;
  std::map<std::string, std::unique_ptr<support::MappedFile>> files_;
};

/// Tensor `t` as an NDArray; `ext` reads external data (null: refused).
runtime::NDArray tensor_to_ndarray(const onnx::TensorProto& t, const std::string& where,
                                   ExternalFiles* ext = nullptr) {
  const std::string name = t.name().empty() ? "<unnamed>" : t.name();
  KILN_USER_CHECK(t.data_location() != onnx::TensorProto::EXTERNAL || ext)
      << where << ": tensor '" << name
      << "' keeps its data in an external file, which is read only for a model's own tensors";
  DataType dt = onnx_dtype(t.data_type());
  KILN_USER_CHECK(!dt.is_void()) << where << ": tensor '" << name << "' has element type "
                                 << onnx_dtype_name(t.data_type())
                                 << ", which Kiln does not support";
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  for (int64_t d : shape) {
    KILN_USER_CHECK(d >= 0) << where << ": tensor '" << name << "' has a negative dimension " << d;
    KILN_USER_CHECK(d == 0 || n <= std::numeric_limits<int64_t>::max() / d)
        << where << ": tensor '" << name << "' has more elements than fit in 64 bits";
    n *= d;
  }
  const size_t elem = static_cast<size_t>(dt.bytes());
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    KILN_USER_CHECK(!t.has_raw_data() && stored_values(t, elem) == 0)
        << where << ": tensor '" << name
        << "' keeps its data in an external file and also in the model";
    KILN_USER_CHECK(static_cast<uint64_t>(n) <= std::numeric_limits<uint64_t>::max() / elem)
        << where << ": tensor '" << name << "' has more bytes than fit in 64 bits";
    std::string_view bytes = ext->bytes(t, name, where, static_cast<uint64_t>(n) * elem);
    runtime::NDArray a = runtime::NDArray::empty(shape, dt);
    if (n > 0) std::memcpy(a.data(), bytes.data(), bytes.size());
    return a;
  }
  auto count_check = [&](int64_t have, const char* field) {
    KILN_USER_CHECK(have == n) << where << ": tensor '" << name << "' has shape with " << n
                               << " elements but " << have << " values in " << field;
  };
  // The element count is checked against the data before anything is allocated.
  const char* field = "";
  int64_t have = stored_values(t, elem, &field);
  count_check(have, field);
  runtime::NDArray a = runtime::NDArray::empty(shape, dt);
  if (t.has_raw_data()) {
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

/// What a non-tensor type is, in words ("" for a tensor or an undeclared type).
std::string value_kind(const onnx::TypeProto& t) {
  switch (t.value_case()) {
    case onnx::TypeProto::kSequenceType:
      return "sequence";
    case onnx::TypeProto::kOptionalType:
      return "optional";
    case onnx::TypeProto::kMapType:
      return "map";
    case onnx::TypeProto::kSparseTensorType:
      return "sparse tensor";
    default:
      return "";
  }
}

OnnxValueInfo value_info(const onnx::ValueInfoProto& v, const std::string& where) {
  OnnxValueInfo out;
  out.name = v.name();
  // A sequence of tensors: its elements' type and shape are described.
  const onnx::TypeProto* tp = v.has_type() ? &v.type() : nullptr;
  // An optional tensor or sequence: described by its contained type.
  if (tp && tp->has_optional_type() && tp->optional_type().has_elem_type() &&
      (tp->optional_type().elem_type().has_tensor_type() ||
       tp->optional_type().elem_type().has_sequence_type())) {
    out.optional = true;
    tp = &tp->optional_type().elem_type();
  }
  if (tp && tp->has_sequence_type() && tp->sequence_type().has_elem_type()) {
    out.kind = "sequence";
    tp = &tp->sequence_type().elem_type();
  }
  if (!tp || !tp->has_tensor_type()) {
    out.dtype = DataType::Void();
    if (tp && out.kind.empty()) out.kind = value_kind(*tp);
    return out;
  }
  const auto& tt = tp->tensor_type();
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

OnnxAttr attribute(const onnx::AttributeProto& a, const std::string& where, ExternalFiles* ext) {
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT:
      return static_cast<double>(a.f());
    case onnx::AttributeProto::INT:
      return a.i();
    case onnx::AttributeProto::STRING:
      return a.s();
    case onnx::AttributeProto::TENSOR:
      return tensor_to_ndarray(a.t(), where, ext);
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
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  KILN_USER_CHECK(f.good()) << "cannot read " << what << " '" << path
                            << "': " << std::strerror(errno);
  // Sized once and read in place: through a stringstream a 528 MB model (VGG-16) was copied
  // three times, each into freshly faulted pages (a quarter of its import).
  const std::streamoff size = f.tellg();
  KILN_USER_CHECK(size >= 0) << "cannot read " << what << " '" << path << "': not a regular file";
  std::string bytes(static_cast<size_t>(size), '\0');
  f.seekg(0);
  f.read(bytes.data(), size);
  KILN_USER_CHECK(f.gcount() == size) << "cannot read " << what << " '" << path << "': read "
                                      << f.gcount() << " of " << size << " bytes";
  return bytes;
}

/// Where parse_graph puts what it reads (an OnnxModel's graph or an OnnxGraph).
struct GraphParts {
  std::vector<OnnxValueInfo>& inputs;
  std::vector<OnnxValueInfo>& outputs;
  std::map<std::string, runtime::NDArray>& initializers;
  std::vector<OnnxNode>& nodes;
};

/// Reads graph `g`; `outer` holds the names defined by enclosing graphs (a sub-graph's nodes may
/// use them).
void parse_graph(onnx::GraphProto& g, const std::string& what, std::set<std::string> outer,
                 GraphParts out, ExternalFiles* ext) {
  std::set<std::string>& defined = outer;
  for (onnx::TensorProto& t : *g.mutable_initializer()) {
    KILN_USER_CHECK(!t.name().empty()) << "'" << what << "': an initializer has no name";
    KILN_USER_CHECK(!out.initializers.count(t.name()))
        << "'" << what << "': initializer '" << t.name()
        << "' is defined twice (initializer names must be unique)";
    out.initializers[t.name()] = tensor_to_ndarray(t, "'" + what + "'", ext);
    // The bytes are in the array now: freed, so that the next arrays reuse their pages
    // (support/allocator.h) instead of faulting in fresh ones (VGG-16: 528 MB of weights).
    std::string().swap(*t.mutable_raw_data());
    defined.insert(t.name());
  }
  KILN_USER_CHECK(g.sparse_initializer_size() == 0)
      << "'" << what << "': sparse initializers are not supported";
  for (const auto& v : g.input()) {
    if (out.initializers.count(v.name())) continue;
    out.inputs.push_back(value_info(v, "'" + what + "'"));
    defined.insert(v.name());
  }
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto& np = *g.mutable_node(i);
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
    for (onnx::AttributeProto& a : *np.mutable_attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH) {
        n.has_subgraph = true;
        auto sub = std::make_shared<OnnxGraph>();
        sub->name = a.g().name().empty() ? a.name() : a.g().name();
        parse_graph(*a.mutable_g(), what + "', sub-graph '" + n.name + "." + a.name(), defined,
                    {sub->inputs, sub->outputs, sub->initializers, sub->nodes}, ext);
        n.subgraphs[a.name()] = std::move(sub);
        continue;
      }
      // A type (Optional's): no converted operator reads one; the operator is refused.
      if (a.type() == onnx::AttributeProto::TYPE_PROTO ||
          a.type() == onnx::AttributeProto::TYPE_PROTOS)
        continue;
      if (a.type() == onnx::AttributeProto::GRAPHS) {
        n.has_subgraph = true;
        continue;
      }
      n.attrs[a.name()] = attribute(a, where, ext);
    }
    for (const std::string& o : np.output()) {
      n.outputs.push_back(o);
      if (!o.empty()) defined.insert(o);
    }
    out.nodes.push_back(std::move(n));
  }
  for (const auto& v : g.output()) {
    KILN_USER_CHECK(defined.count(v.name()))
        << "'" << what << "': graph output '" << v.name() << "' is not produced by any node";
    out.outputs.push_back(value_info(v, "'" + what + "'"));
  }
}

}  // namespace

int64_t OnnxModel::default_opset() const {
  auto it = opsets.find("");
  return it == opsets.end() ? 0 : it->second;
}

namespace {
/// `dir`: the folder that external data locations are relative to (none: refused).
OnnxModel parse_onnx_model(const char* data, size_t size, const std::string& what,
                           std::optional<std::string> dir) {
  KILN_USER_CHECK(size <= static_cast<size_t>(std::numeric_limits<int>::max()))
      << "'" << what << "' is " << support::bytes_text(size)
      << ": ONNX models (protobuf messages) are limited to 2 GiB; larger models keep their "
         "weights in external data files";
  onnx::ModelProto proto;
  KILN_USER_CHECK(proto.ParseFromArray(data, static_cast<int>(size)))
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
  GraphParts top{m.inputs, m.outputs, m.initializers, m.nodes};
  ExternalFiles ext(std::move(dir));
  parse_graph(*proto.mutable_graph(), what, {}, top, &ext);
  return m;
}
}  // namespace

OnnxModel parse_onnx_model(const std::string& bytes, const std::string& what) {
  return parse_onnx_model(bytes.data(), bytes.size(), what, std::nullopt);
}

OnnxModel load_onnx_model(const std::string& path) {
  support::MappedFile f(path, "ONNX model '" + path + "'");
  return parse_onnx_model(f.data(), f.size(), path,
                          std::filesystem::path(path).parent_path().string());
}

namespace {

/// Whether a parsed TensorProto is self-consistent: a known element type, dimensions >= 0 and
/// as many stored values as its shape has elements.
bool tensor_consistent(const onnx::TensorProto& t) {
  DataType dt = onnx_dtype(t.data_type());
  if (dt.is_void()) return false;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<int64_t>::max() / d)) return false;
    n *= d;
  }
  return stored_values(t, static_cast<size_t>(dt.bytes())) == n;
}

}  // namespace

runtime::NDArray load_onnx_tensor(const std::string& path) {
  std::string bytes = read_file(path, "ONNX tensor");
  onnx::TensorProto t;
  bool parsed = t.ParseFromString(bytes);
  // A SequenceProto or OptionalProto (test data of sequence- or optional-typed values) also
  // parses as a TensorProto, as nonsense: its name (field 1, length-delimited) reads as packed
  // dims and its tensors (field 3) as a segment. It is recognised by its leading name field,
  // its element-type code and the data not matching the supposed shape.
  if (!bytes.empty() && bytes[0] == '\n' && (!parsed || t.has_segment() || !tensor_consistent(t))) {
    onnx::SequenceProto s;
    KILN_USER_CHECK(!(s.ParseFromString(bytes) && s.elem_type() >= 0 && s.elem_type() <= 5))
        << "'" << path << "' (value '" << s.name()
        << "') is a sequence (or optional) value, which Kiln does not support yet (only "
        << "tensors; a sequence of tensors is read by load_onnx_sequence)";
  }
  KILN_USER_CHECK(parsed) << "'" << path << "' is not a serialized ONNX TensorProto";
  return tensor_to_ndarray(t, "'" + path + "'");
}

std::vector<runtime::NDArray> load_onnx_sequence(const std::string& path) {
  std::string bytes = read_file(path, "ONNX sequence");
  onnx::SequenceProto s;
  // A TensorProto may parse as a SequenceProto too; then fields a SequenceProto does not have
  // are left over (unknown), or its element type is not TENSOR.
  KILN_USER_CHECK(s.ParseFromString(bytes) && s.unknown_fields().empty())
      << "'" << path << "' is not a serialized ONNX SequenceProto";
  std::string what = "'" + path + "' (sequence '" + s.name() + "')";
  KILN_USER_CHECK(s.elem_type() == onnx::SequenceProto::TENSOR ||
                  (s.elem_type() == onnx::SequenceProto::UNDEFINED && s.tensor_values_size() == 0))
      << what << " holds elements of kind " << s.elem_type()
      << ", not tensors; Kiln reads sequences of tensors only";
  KILN_USER_CHECK(s.sparse_tensor_values_size() == 0 && s.sequence_values_size() == 0 &&
                  s.map_values_size() == 0 && s.optional_values_size() == 0)
      << what << " holds values other than tensors; Kiln reads sequences of tensors only";
  std::vector<runtime::NDArray> out;
  for (int i = 0; i < s.tensor_values_size(); ++i)
    out.push_back(tensor_to_ndarray(s.tensor_values(i), what + ", element " + std::to_string(i)));
  return out;
}

OnnxOptionalValue load_onnx_optional(const std::string& path) {
  std::string bytes = read_file(path, "ONNX optional");
  onnx::OptionalProto o;
  KILN_USER_CHECK(o.ParseFromString(bytes) && o.unknown_fields().empty())
      << "'" << path << "' is not a serialized ONNX OptionalProto";
  std::string what = "'" + path + "' (optional '" + o.name() + "')";
  OnnxOptionalValue v;
  if (o.has_tensor_value()) {
    v.present = true;
    v.tensor = tensor_to_ndarray(o.tensor_value(), what);
  } else if (o.has_sequence_value()) {
    const onnx::SequenceProto& s = o.sequence_value();
    KILN_USER_CHECK(s.sparse_tensor_values_size() == 0 && s.sequence_values_size() == 0 &&
                    s.map_values_size() == 0 && s.optional_values_size() == 0)
        << what << " holds a sequence of values other than tensors";
    v.present = v.is_sequence = true;
    for (int i = 0; i < s.tensor_values_size(); ++i)
      v.items.push_back(
          tensor_to_ndarray(s.tensor_values(i), what + ", element " + std::to_string(i)));
  } else {
    KILN_USER_CHECK(!o.has_sparse_tensor_value() && !o.has_map_value() && !o.has_optional_value())
        << what << " holds a value other than a tensor or a sequence of tensors";
  }
  return v;
}

}  // namespace kiln::frontend
