// The numpy .npy format, read and written without numpy. Reading checks the 6-byte magic, the
// version (1.0: 2-byte header length; 2.0 and 3.0: 4-byte), then parses the header, a Python
// dict literal, with a small recursive-descent parser that accepts exactly the three keys numpy
// writes ('descr' a string, 'fortran_order' a bool, 'shape' a tuple of integers) in any order
// and any spacing. The descr is normalised (one-byte types take '|'), checked against the
// supported list, and the element bytes are read straight into the caller's buffer. Writing
// builds the same dict, pads it with spaces and a newline so the data starts at a multiple of
// 64 bytes, and uses version 1.0 unless the header exceeds 65535 bytes (then 2.0). Every error
// names the file and what was wrong. The file is opened with support::InputFile (regular files
// only), and every size the file claims (header length, the shape's bytes) is compared with
// what the file holds before anything is allocated for it: a small file whose header claims
// gigabytes is refused as truncated.
#include "kiln/support/npy.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <sstream>

#include "kiln/support/error.h"
#include "kiln/support/file.h"

namespace kiln::support {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

/// Parses the header dict; `fail` throws with the file's name.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  /// Parses the dict into descr / fortran / shape; checks that all three keys are present.
  void parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        skip_ws();
        if (peek() == '[') fail("unsupported dtype: structured arrays are not supported");
        *descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        *fortran = parse_bool();
        have_fortran = true;
      } else if (key == "shape") {
        *shape = parse_shape();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "' in the header");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') break;
      fail("malformed header: expected ',' or '}' at offset " + std::to_string(pos_));
    }
    ++pos_;
    if (!have_descr) fail("malformed header: no 'descr' key");
    if (!have_fortran) fail("malformed header: no 'fortran_order' key");
    if (!have_shape) fail("malformed header: no 'shape' key");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    KILN_ERROR << "npy file '" << path_ << "': " << what;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) {
      fail(std::string("malformed header: expected '") + c + "' at offset " + std::to_string(pos_) +
           " of \"" + s_ + "\"");
    }
    ++pos_;
  }
  std::string parse_string() {
    skip_ws();
    char q = peek();
    if (q != '\'' && q != '"')
      fail("malformed header: expected a string at offset " + std::to_string(pos_));
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string::npos) fail("malformed header: unterminated string");
    std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return out;
  }
  bool parse_bool() {
    skip_ws();
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail("malformed header: 'fortran_order' is not True or False");
  }
  std::vector<int64_t> parse_shape() {
    std::vector<int64_t> shape;
    skip_ws();
    char close = peek() == '(' ? ')' : peek() == '[' ? ']' : '\0';
    if (!close) fail("malformed header: 'shape' is not a tuple");
    ++pos_;
    while (true) {
      skip_ws();
      if (peek() == close) break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) {
        fail("malformed header: bad extent in 'shape' at offset " + std::to_string(pos_));
      }
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) {
          fail("malformed header: extent in 'shape' too large");
        }
        v = v * 10 + (s_[pos_++] - '0');
      }
      if (peek() == 'L') ++pos_;  // Python 2 longs
      shape.push_back(v);
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != close) fail("malformed header: expected ',' in 'shape'");
    }
    ++pos_;
    return shape;
  }

  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) s += ",";
    if (i + 1 < shape.size()) s += " ";
  }
  return s + ")";
}

/// product(shape) * item, or fails on overflow.
size_t byte_size(const std::vector<int64_t>& shape, size_t item, const std::string& path) {
  size_t n = item;
  for (int64_t e : shape) {
    if (e < 0) KILN_ERROR << "npy file '" << path << "': negative extent " << e;
    if (e != 0 && n > std::numeric_limits<size_t>::max() / static_cast<size_t>(e)) {
      KILN_ERROR << "npy file '" << path << "': shape " << shape_text(shape) << " is too large";
    }
    n *= static_cast<size_t>(e);
  }
  return n;
}

}  // namespace

size_t npy_item_bytes(std::string& descr) {
  if (descr.size() < 3) return 0;
  char order = descr[0], kind = descr[1];
  std::string size = descr.substr(2);
  size_t bytes = 0;
  if (kind == 'f' && (size == "2" || size == "4" || size == "8")) bytes = std::stoul(size);
  if ((kind == 'i' || kind == 'u') && (size == "1" || size == "2" || size == "4" || size == "8")) {
    bytes = std::stoul(size);
  }
  if (kind == 'b' && size == "1") bytes = 1;
  if (bytes == 0) return 0;
  if (bytes == 1) {
    if (order != '|' && order != '<' && order != '>' && order != '=') return 0;
    descr[0] = '|';
  } else if (order != '<') {
    return 0;
  }
  return bytes;
}

void read_npy(const std::string& path, const std::function<void*(const NpyHeader&)>& sink) {
  InputFile in(path, "npy file '" + path + "'", kMaxDataFileBytes);
  auto fail = [&](const std::string& what) { in.fail(what); };
  char pre[kMagicLen + 2];
  size_t got = in.read_some(pre, sizeof(pre));
  if (got < kMagicLen || std::memcmp(pre, kMagic, kMagicLen) != 0) {
    fail("bad magic (not a .npy file)");
  }
  if (got < sizeof(pre)) fail("truncated header");
  int major = static_cast<unsigned char>(pre[kMagicLen]);
  int minor = static_cast<unsigned char>(pre[kMagicLen + 1]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    fail("unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
         " (1.0, 2.0 and 3.0 are supported)");
  }
  size_t len_bytes = major == 1 ? 2 : 4;
  unsigned char len_buf[4] = {0, 0, 0, 0};
  if (in.read_some(len_buf, len_bytes) < len_bytes) fail("truncated header");
  size_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) header_len |= static_cast<size_t>(len_buf[i]) << (8 * i);
  // Every size the file claims is checked against what it holds before anything is allocated.
  if (header_len > in.remaining()) {
    fail("truncated header (expected " + std::to_string(header_len) + " bytes, got " +
         std::to_string(in.remaining()) + ")");
  }
  std::string text(header_len, '\0');
  in.read_exact(text.data(), header_len, "header");
  NpyHeader h;
  bool fortran = false;
  HeaderParser(text, path).parse(&h.descr, &fortran, &h.shape);
  std::string raw_descr = h.descr;
  h.item_bytes = npy_item_bytes(h.descr);
  if (h.item_bytes == 0) {
    fail("unsupported dtype '" + raw_descr +
         "' (supported: little-endian f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)");
  }
  if (fortran) fail("fortran_order is True; only C-order arrays are supported");
  h.nbytes = byte_size(h.shape, h.item_bytes, path);
  if (h.nbytes > in.remaining()) {
    std::string size = std::to_string(h.nbytes) + " bytes";
    if (h.nbytes >= 1024) size += " (" + bytes_text(h.nbytes) + ")";
    fail("truncated data (expected " + size + " for shape " + shape_text(h.shape) + " of '" +
         h.descr + "', the file has " + std::to_string(in.remaining()) + " after its header)");
  }
  void* dst = nullptr;
  try {
    dst = sink(h);
  } catch (const std::bad_alloc&) {
    fail("out of memory allocating " + std::to_string(h.nbytes) + " bytes (" +
         bytes_text(h.nbytes) + ") for shape " + shape_text(h.shape) + " of '" + h.descr + "'");
  }
  KILN_ICHECK(dst != nullptr || h.nbytes == 0) << "read_npy: sink returned no buffer";
  in.read_exact(dst, h.nbytes, "data");
}

void write_npy(const std::string& path, const std::string& descr_in,
               const std::vector<int64_t>& shape, const void* data, size_t nbytes) {
  std::string descr = descr_in;
  size_t item = npy_item_bytes(descr);
  KILN_USER_CHECK(item != 0) << "npy file '" << path << "': cannot write unsupported dtype '"
                             << descr_in << "'";
  size_t expected = byte_size(shape, item, path);
  KILN_USER_CHECK(expected == nbytes)
      << "npy file '" << path << "': shape " << shape_text(shape) << " of '" << descr << "' needs "
      << expected << " bytes, got " << nbytes;
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // Data starts at a multiple of 64: magic + version + length + dict + padding + '\n'.
  int major = 1;
  size_t prefix = kMagicLen + 2 + 2;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  if (total - prefix > 65535) {
    major = 2;
    prefix = kMagicLen + 2 + 4;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  }
  size_t header_len = total - prefix;
  dict.append(header_len - dict.size() - 1, ' ');
  dict.push_back('\n');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  KILN_USER_CHECK(out.good()) << "npy file '" << path
                              << "': cannot open for writing: " << std::strerror(errno);
  out.write(kMagic, kMagicLen);
  char version[2] = {static_cast<char>(major), 0};
  out.write(version, 2);
  size_t len_bytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < len_bytes; ++i) out.put(static_cast<char>((header_len >> (8 * i)) & 0xff));
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(nbytes));
  out.close();
  KILN_USER_CHECK(!out.fail()) << "npy file '" << path << "': write failed";
}

}  // namespace kiln::support
