// .npy files: round trips of every supported dtype and rank (0-d and empty included) against
// the original bytes; files in exactly the bytes numpy writes (built by hand here, so no Python
// is needed), read and compared with the writer's output byte for byte; versions 2.0 and 3.0;
// the 2.0 fallback for huge headers; and the message of every error.
#include "kiln/runtime/npy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "kiln/support/error.h"
#include "kiln/support/npy.h"

namespace kiln::runtime {
namespace {

using ::kiln::testing::error_of;

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kiln_npy_test_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path(name), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::string dir_;
};

/// A header in numpy's layout: the dict padded with spaces and '\n' to a multiple of 64.
std::string numpy_header(const std::string& dict, int major = 1) {
  size_t prefix = major == 1 ? 10 : 12;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  std::string h = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  size_t len = total - prefix;
  for (size_t i = 0; i < prefix - 8; ++i) h.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  return h + dict + std::string(len - dict.size() - 1, ' ') + "\n";
}

TEST_F(NpyTest, RoundTripEveryDtype) {
  std::mt19937 rng(7);
  const std::vector<DataType> dtypes = {
      DataType::Float(16), DataType::Float(32), DataType::Float(64), DataType::Int(8),
      DataType::Int(16),   DataType::Int(32),   DataType::Int(64),   DataType::UInt(8),
      DataType::UInt(16),  DataType::UInt(32),  DataType::UInt(64),  DataType::Bool()};
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {5}, {2, 3, 4}, {3, 0, 2}, {1, 1, 7}};
  for (DataType t : dtypes) {
    for (const auto& shape : shapes) {
      NDArray a = NDArray::empty(shape, t);
      auto* bytes = static_cast<uint8_t*>(a.data());
      for (size_t i = 0; i < a.nbytes(); ++i) {
        bytes[i] = t.is_bool() ? static_cast<uint8_t>(rng() & 1) : static_cast<uint8_t>(rng());
      }
      std::string p = path("a.npy");
      save_npy(p, a);
      EXPECT_EQ(read("a.npy").size() % 64, a.nbytes() % 64) << "data starts at a 64-byte boundary";
      NDArray b = load_npy(p);
      ASSERT_EQ(b.dtype(), t) << t;
      ASSERT_EQ(b.shape(), shape) << t << " " << shape_str(shape);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << t << " " << shape_str(shape);
    }
  }
}

TEST_F(NpyTest, ReadsNumpyBytesAndWritesTheSame) {
  // np.save(f, np.arange(6, dtype=np.float32).reshape(2, 3))
  std::string file = numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  ASSERT_EQ(file.size(), 128u);
  EXPECT_EQ(file.substr(8, 2), std::string("\x76\x00", 2));  // header length 118
  for (int i = 0; i < 6; ++i) {
    float f = static_cast<float>(i);
    file.append(reinterpret_cast<const char*>(&f), 4);
  }
  write("f.npy", file);
  NDArray a = load_npy(path("f.npy"));
  EXPECT_EQ(a.str(), "NDArray(float32, [2, 3], cpu:0)");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a.data_as<float>()[i], static_cast<float>(i));
  save_npy(path("g.npy"), a);
  EXPECT_EQ(read("g.npy"), file);

  // np.save(f, np.array([True, False, True]))
  file = numpy_header("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }") +
         std::string("\x01\x00\x01", 3);
  write("b.npy", file);
  NDArray b = load_npy(path("b.npy"));
  EXPECT_EQ(b.str(), "NDArray(bool, [3], cpu:0)");
  EXPECT_EQ(b.data_as<uint8_t>()[0], 1);
  EXPECT_EQ(b.data_as<uint8_t>()[1], 0);
  save_npy(path("b2.npy"), b);
  EXPECT_EQ(read("b2.npy"), file);

  // np.save(f, np.int64(-7)): a 0-d array.
  int64_t v = -7;
  file = numpy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (), }") +
         std::string(reinterpret_cast<const char*>(&v), 8);
  write("s.npy", file);
  NDArray s = load_npy(path("s.npy"));
  EXPECT_EQ(s.str(), "NDArray(int64, [], cpu:0)");
  EXPECT_EQ(s.data_as<int64_t>()[0], -7);
  save_npy(path("s2.npy"), s);
  EXPECT_EQ(read("s2.npy"), file);

  // int8 as numpy writes it ('|i1'), and also '<i1', with other spacing and key order.
  file = numpy_header("{\"shape\":(2L,),'fortran_order':False,'descr':'<i1'}") +
         std::string("\xff\x05", 2);
  write("i.npy", file);
  NDArray i8 = load_npy(path("i.npy"));
  EXPECT_EQ(i8.str(), "NDArray(int8, [2], cpu:0)");
  EXPECT_EQ(i8.data_as<int8_t>()[0], -1);
  EXPECT_EQ(i8.data_as<int8_t>()[1], 5);
}

TEST_F(NpyTest, Versions2And3) {
  for (int major : {2, 3}) {
    std::string file =
        numpy_header("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", major) +
        std::string("\x01\x02\x03\x04", 4);
    write("v.npy", file);
    NDArray a = load_npy(path("v.npy"));
    EXPECT_EQ(a.str(), "NDArray(uint16, [2], cpu:0)");
    EXPECT_EQ(a.data_as<uint16_t>()[0], 0x0201);
    EXPECT_EQ(a.data_as<uint16_t>()[1], 0x0403);
  }
}

TEST_F(NpyTest, HugeHeaderUsesVersion2) {
  std::vector<int64_t> shape(30000, 1);
  float x = 3.5f;
  support::write_npy(path("h.npy"), "<f4", shape, &x, 4);
  std::string bytes = read("h.npy");
  EXPECT_EQ(bytes[6], 2);
  EXPECT_EQ((bytes.size() - 4) % 64, 0u);
  NDArray a = load_npy(path("h.npy"));
  EXPECT_EQ(a.shape(), shape);
  EXPECT_EQ(a.data_as<float>()[0], 3.5f);
}

// A 358-byte file whose header claims 4 GiB of data (issue 26): refused from the header, before
// anything is allocated; so is a version 2.0 header that claims a 4 GiB dict.
TEST_F(NpyTest, SizesTheFileDoesNotHoldAreRefusedBeforeAllocating) {
  std::string lying =
      numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824,), }");
  lying += std::string(358 - lying.size(), '\x01');
  ASSERT_EQ(lying.size(), 358u);
  write("lying.npy", lying);
  EXPECT_EQ(error_of([&] { load_npy(path("lying.npy")); }),
            "npy file '" + path("lying.npy") +
                "': truncated data (expected 4294967296 bytes (4.0 GiB) for shape (1073741824,) "
                "of '<f4', the file has 230 after its header)");
  // Shapes whose byte size overflows 64 bits.
  write("huge.npy", numpy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, "
                                 "4294967296), }"));
  EXPECT_EQ(error_of([&] { load_npy(path("huge.npy")); }),
            "npy file '" + path("huge.npy") + "': shape (4294967296, 4294967296) is too large");
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8) + std::string("\xff\xff\xff\xff", 4) + "{";
  write("v2.npy", v2);
  EXPECT_EQ(
      error_of([&] { load_npy(path("v2.npy")); }),
      "npy file '" + path("v2.npy") + "': truncated header (expected 4294967295 bytes, got 1)");
}

// Only regular files are read: a FIFO is not waited on, a link to /dev/zero not read forever.
TEST_F(NpyTest, NonRegularFilesAreRefused) {
  ASSERT_EQ(::mkfifo(path("fifo.npy").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { load_npy(path("fifo.npy")); }),
            "npy file '" + path("fifo.npy") + "': not a regular file (a FIFO)");
  std::filesystem::create_symlink("/dev/zero", path("zero.npy"));
  EXPECT_EQ(error_of([&] { load_npy(path("zero.npy")); }),
            "npy file '" + path("zero.npy") +
                "': not a regular file (a symbolic link to '/dev/zero', a character device)");
  std::filesystem::create_directories(path("dir.npy"));
  EXPECT_EQ(error_of([&] { load_npy(path("dir.npy")); }),
            "npy file '" + path("dir.npy") + "': not a regular file (a directory)");
}

TEST_F(NpyTest, Errors) {
  const std::string good =
      numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
  auto msg_for = [&](const std::string& bytes) {
    write("e.npy", bytes);
    return error_of([&] { load_npy(path("e.npy")); });
  };
  const std::string prefix = "npy file '" + path("e.npy") + "': ";
  EXPECT_EQ(msg_for("PK\x03\x04 not numpy"), prefix + "bad magic (not a .npy file)");
  EXPECT_EQ(msg_for(""), prefix + "bad magic (not a .npy file)");
  EXPECT_EQ(msg_for(good.substr(0, 7)), prefix + "truncated header");
  EXPECT_EQ(msg_for(good.substr(0, 9)), prefix + "truncated header");
  EXPECT_EQ(msg_for(good.substr(0, 40)), prefix + "truncated header (expected 118 bytes, got 30)");
  EXPECT_EQ(msg_for(good + std::string(5, '\0')),
            prefix +
                "truncated data (expected 8 bytes for shape (2,) of '<f4', the file has 5 after "
                "its header)");
  std::string v4 = good;
  v4[6] = 4;
  EXPECT_EQ(msg_for(v4),
            prefix + "unsupported format version 4.0 (1.0, 2.0 and 3.0 are supported)");
  EXPECT_EQ(msg_for(numpy_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }")),
            prefix +
                "unsupported dtype '>f4' (supported: little-endian f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 "
                "u8 b1)");
  std::string msg =
      msg_for(numpy_header("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }"));
  EXPECT_NE(msg.find("unsupported dtype '<c8'"), std::string::npos) << msg;
  EXPECT_EQ(msg_for(numpy_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }")),
            prefix + "fortran_order is True; only C-order arrays are supported");
  EXPECT_EQ(msg_for(numpy_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': "
                                 "(2,), }")),
            prefix + "unsupported dtype: structured arrays are not supported");
  EXPECT_EQ(msg_for(numpy_header("{'descr': '<f4', 'shape': (2,), }")),
            prefix + "malformed header: no 'fortran_order' key");
  EXPECT_EQ(msg_for(numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }")),
            prefix + "malformed header: bad extent in 'shape' at offset 54");
  EXPECT_EQ(msg_for(numpy_header("{'descr': '<f4', 'fortran_order': False, 'size': 2}")),
            prefix + "unexpected key 'size' in the header");

  msg = error_of([&] { load_npy(path("missing.npy")); });
  EXPECT_EQ(msg, "npy file '" + path("missing.npy") + "': cannot open: No such file or directory");
  msg = error_of([&] { save_npy(path("x.npy"), NDArray::empty({2}, DataType::BFloat16())); });
  EXPECT_EQ(msg, "npy file '" + path("x.npy") + "': dtype bfloat16 has no .npy equivalent");
  msg = error_of([&] { save_npy(path("x.npy"), NDArray::empty({2}, DataType::Float(32, 4))); });
  EXPECT_EQ(msg, "npy file '" + path("x.npy") + "': dtype float32x4 has no .npy equivalent");
  msg = error_of(
      [&] { save_npy(dir_ + "/no/such/dir/x.npy", NDArray::empty({2}, DataType::Int(32))); });
  EXPECT_NE(msg.find("cannot open for writing"), std::string::npos) << msg;
  float f[2];
  msg = error_of([&] { support::write_npy(path("x.npy"), "<f4", {3}, f, 8); });
  EXPECT_EQ(msg, "npy file '" + path("x.npy") + "': shape (3,) of '<f4' needs 12 bytes, got 8");
}

}  // namespace
}  // namespace kiln::runtime
