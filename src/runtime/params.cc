// The params format: a magic, an entry count, then per entry its name, dtype, shape and raw
// bytes, every integer little-endian (written byte by byte, so the format does not depend on
// the host's byte order). Loading walks the bytes with a bounds-checked cursor: every read
// first checks that enough bytes remain, so a truncated or corrupt file gives an error naming
// the file, the entry (index and, once known, name) and the field, never a crash or a huge
// allocation. Entries are checked for sane ndim, non-negative extents, a valid dtype, an nbytes
// that matches the shape, and duplicate names; trailing bytes after the last entry are refused.
// A file is opened only when it is a regular file (support::InputFile: no FIFO, no link to
// /dev/zero) and is read whole only after its magic has been checked.
#include "kiln/runtime/params.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <sstream>

#include "kiln/support/error.h"
#include "kiln/support/file.h"

namespace kiln::runtime {
namespace {

constexpr char kMagic[] = "KILNPRM1";
constexpr size_t kMagicLen = 8;
constexpr uint32_t kMaxNdim = 64;

template <typename T>
void put_le(std::string& out, T v) {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(v);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

/// A bounds-checked little-endian reader over the file's bytes.
class Cursor {
 public:
  Cursor(const std::string& bytes, const std::string& source) : b_(bytes), source_(source) {}

  /// Sets how errors name the current position ("entry 3 ('w')").
  void set_context(std::string ctx) { ctx_ = std::move(ctx); }
  size_t remaining() const { return b_.size() - pos_; }

  template <typename T>
  T read(const char* field) {
    need(sizeof(T), field);
    using U = std::make_unsigned_t<T>;
    U u = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      u |= static_cast<U>(static_cast<unsigned char>(b_[pos_ + i])) << (8 * i);
    }
    pos_ += sizeof(T);
    return static_cast<T>(u);
  }
  const char* take(size_t n, const char* field) {
    need(n, field);
    const char* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }
  [[noreturn]] void fail(const std::string& what) const {
    KILN_ERROR << "params file '" << source_ << "': " << (ctx_.empty() ? "" : ctx_ + ": ") << what;
  }

 private:
  void need(size_t n, const char* field) const {
    if (remaining() < n) {
      fail(std::string("truncated ") + field + " (needs " + std::to_string(n) +
           " bytes, the file has " + std::to_string(remaining()) + " left)");
    }
  }

  const std::string& b_;
  const std::string& source_;
  std::string ctx_;
  size_t pos_ = 0;
};

}  // namespace

namespace {

/// Writes the format through `sink(data, size)`: small header pieces, and each array's bytes
/// straight from the array (a 700 MB module is not copied into one string first).
template <typename Sink>
void write_params(const std::map<std::string, NDArray>& params, Sink&& sink) {
  for (const auto& [name, arr] : params) {
    KILN_USER_CHECK(!name.empty()) << "save_params: a parameter has an empty name";
    KILN_USER_CHECK(arr.defined()) << "save_params: parameter '" << name << "' is undefined";
  }
  std::string head(kMagic, kMagicLen);
  put_le<uint64_t>(head, params.size());
  sink(head.data(), head.size());
  for (const auto& [name, arr] : params) {
    std::string meta;
    put_le<uint32_t>(meta, static_cast<uint32_t>(name.size()));
    meta += name;
    DataType t = arr.dtype();
    put_le<uint8_t>(meta, static_cast<uint8_t>(t.code()));
    put_le<uint8_t>(meta, static_cast<uint8_t>(t.bits()));
    put_le<uint16_t>(meta, static_cast<uint16_t>(t.lanes()));
    put_le<uint32_t>(meta, static_cast<uint32_t>(arr.ndim()));
    for (int64_t e : arr.shape()) put_le<int64_t>(meta, e);
    put_le<uint64_t>(meta, arr.nbytes());
    sink(meta.data(), meta.size());
    sink(static_cast<const char*>(arr.data()), arr.nbytes());
  }
}

}  // namespace

std::string save_params_to_bytes(const std::map<std::string, NDArray>& params) {
  std::string out;
  write_params(params, [&](const char* p, size_t n) { out.append(p, n); });
  return out;
}

void save_params(const std::string& path, const std::map<std::string, NDArray>& params) {
  std::ofstream out;
  try {
    // Opened at the first write, after write_params has checked the map: an invalid map
    // leaves no file behind (nor truncates an existing one).
    write_params(params, [&](const char* p, size_t n) {
      if (!out.is_open()) {
        out.open(path, std::ios::binary | std::ios::trunc);
        KILN_USER_CHECK(out.good()) << "cannot open for writing: " << std::strerror(errno);
      }
      out.write(p, static_cast<std::streamsize>(n));
      KILN_USER_CHECK(!out.fail()) << "write failed: " << std::strerror(errno);
    });
  } catch (const Error& e) {
    KILN_ERROR << "params file '" << path << "': " << e.what();
  }
  out.close();
  KILN_USER_CHECK(!out.fail()) << "params file '" << path << "': write failed";
}

std::map<std::string, NDArray> load_params_from_bytes(const std::string& bytes,
                                                      const std::string& source) {
  Cursor c(bytes, source);
  const char* magic = c.take(kMagicLen, "magic");
  if (std::memcmp(magic, kMagic, kMagicLen) != 0) {
    c.fail("bad magic (expected \"KILNPRM1\"; not a Kiln params file)");
  }
  uint64_t count = c.read<uint64_t>("entry count");
  // Every entry takes at least 4 + 1 + 4 + 4 + 8 bytes: a count beyond that is corrupt.
  if (count > c.remaining() / 21) {
    c.fail("corrupt entry count " + std::to_string(count) + " (the file has only " +
           std::to_string(c.remaining()) + " bytes left)");
  }
  std::map<std::string, NDArray> params;
  for (uint64_t i = 0; i < count; ++i) {
    std::string ctx = "entry " + std::to_string(i);
    c.set_context(ctx);
    uint32_t name_len = c.read<uint32_t>("name length");
    std::string name(c.take(name_len, "name"), name_len);
    if (name.empty()) c.fail("empty name");
    ctx += " ('" + name + "')";
    c.set_context(ctx);
    if (params.count(name)) c.fail("duplicate name");
    uint8_t code = c.read<uint8_t>("dtype");
    uint8_t bits = c.read<uint8_t>("dtype");
    uint16_t lanes = c.read<uint16_t>("dtype");
    DataType dtype(static_cast<DataType::Code>(code), bits, lanes);
    if (code > DataType::kBFloat || bits == 0 || lanes == 0 || code == DataType::kHandle) {
      c.fail("corrupt dtype (code " + std::to_string(code) + ", bits " + std::to_string(bits) +
             ", lanes " + std::to_string(lanes) + ")");
    }
    uint32_t ndim = c.read<uint32_t>("ndim");
    if (ndim > kMaxNdim) c.fail("corrupt ndim " + std::to_string(ndim));
    std::vector<int64_t> shape(ndim);
    uint64_t numel = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < ndim; ++d) {
      shape[d] = c.read<int64_t>("shape");
      if (shape[d] < 0) c.fail("negative extent " + std::to_string(shape[d]) + " in the shape");
      uint64_t e = static_cast<uint64_t>(shape[d]);
      if (e != 0 && numel > std::numeric_limits<uint64_t>::max() / e) overflow = true;
      numel *= e;
    }
    uint64_t nbytes = c.read<uint64_t>("nbytes");
    uint64_t item = static_cast<uint64_t>(dtype.bytes());
    if (overflow || (item != 0 && numel > std::numeric_limits<uint64_t>::max() / item) ||
        numel * item != nbytes) {
      c.fail("corrupt nbytes " + std::to_string(nbytes) + " for " + dtype.str() + " " +
             shape_str(shape));
    }
    const char* data = c.take(nbytes, "data");
    NDArray arr;
    try {
      arr = NDArray::empty(shape, dtype);
    } catch (const Error& e) {
      c.fail(e.what());
    } catch (const std::bad_alloc&) {
      c.fail("out of memory allocating " + std::to_string(nbytes) + " bytes");
    }
    arr.copy_from(data, nbytes);
    params.emplace(std::move(name), std::move(arr));
  }
  c.set_context("");
  if (c.remaining() != 0) {
    c.fail(std::to_string(c.remaining()) + " unexpected bytes after the last of " +
           std::to_string(count) + " entries");
  }
  return params;
}

std::map<std::string, NDArray> load_params(const std::string& path) {
  support::InputFile in(path, "params file '" + path + "'", support::kMaxDataFileBytes);
  // The magic first: a file that is not a params file is not read whole.
  std::string bytes(std::min<uint64_t>(kMagicLen, in.size()), '\0');
  bytes.resize(in.read_some(bytes.data(), bytes.size()));
  if (bytes.size() == kMagicLen && std::memcmp(bytes.data(), kMagic, kMagicLen) == 0) {
    bytes += in.read_rest();
  }
  return load_params_from_bytes(bytes, path);
}

}  // namespace kiln::runtime
