// The params file: round trip of random arrays of several dtypes and ranks, the exact byte
// layout of a small file (the documented format), and errors for a missing file, a bad magic,
// a file truncated at every byte, and corrupt fields, each naming the file and the entry.
#include "kiln/runtime/params.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "common/error.h"
#include "kiln/support/error.h"

namespace kiln::runtime {
namespace {

using ::kiln::testing::error_of;

NDArray random_array(std::vector<int64_t> shape, DataType t, std::mt19937& rng) {
  NDArray a = NDArray::empty(std::move(shape), t);
  auto* b = static_cast<uint8_t*>(a.data());
  for (size_t i = 0; i < a.nbytes(); ++i) b[i] = static_cast<uint8_t>(rng());
  return a;
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "kiln_params_test_" + std::to_string(getpid()) + "_" + name;
}

TEST(Params, RoundTrip) {
  std::mt19937 rng(3);
  std::map<std::string, NDArray> params = {
      {"conv1.weight", random_array({8, 3, 3, 3}, DataType::Float(32), rng)},
      {"conv1.bias", random_array({8}, DataType::Float(32), rng)},
      {"scale", random_array({}, DataType::Float(64), rng)},
      {"empty", random_array({0, 4}, DataType::Int(8), rng)},
      {"idx", random_array({3, 2}, DataType::Int(64), rng)},
      {"packed", random_array({2, 16}, DataType::Float(32, 4), rng)},
      {"mask", random_array({5}, DataType::UInt(8), rng)},
  };
  std::string path = temp_path("rt.bin");
  save_params(path, params);
  auto loaded = load_params(path);
  ASSERT_EQ(loaded.size(), params.size());
  for (const auto& [name, a] : params) {
    ASSERT_TRUE(loaded.count(name)) << name;
    const NDArray& b = loaded.at(name);
    EXPECT_EQ(b.dtype(), a.dtype()) << name;
    EXPECT_EQ(b.shape(), a.shape()) << name;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << name;
  }
  EXPECT_TRUE(load_params_from_bytes(save_params_to_bytes({}), "mem").empty());
  std::filesystem::remove(path);
}

TEST(Params, SavedFileIsTheBytesAndWriteErrorsNameTheFile) {
  std::mt19937 rng(4);
  std::map<std::string, NDArray> params = {{"a", random_array({33}, DataType::Float(32), rng)},
                                           {"b", random_array({2, 5}, DataType::Int(8), rng)}};
  std::string path = temp_path("same.bin");
  save_params(path, params);
  std::ifstream in(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(file, save_params_to_bytes(params));
  std::filesystem::remove(path);
  std::string bad = temp_path("no_such_dir") + "/params.bin";
  EXPECT_EQ(error_of([&] { save_params(bad, params); }),
            "params file '" + bad + "': cannot open for writing: No such file or directory");
  EXPECT_EQ(error_of([&] {
              save_params(path, {{"", params.at("a")}});
            }),
            "params file '" + path + "': save_params: a parameter has an empty name");
  EXPECT_FALSE(std::filesystem::exists(path));  // nothing written for an invalid map
}

TEST(Params, ByteLayout) {
  NDArray a = NDArray::empty({2}, DataType::Int(16));
  a.data_as<int16_t>()[0] = 0x0102;
  a.data_as<int16_t>()[1] = -2;
  std::string bytes = save_params_to_bytes({{"w", a}});
  std::string expected = std::string("KILNPRM1") +               // magic
                         std::string("\x01\0\0\0\0\0\0\0", 8) +  // count
                         std::string("\x01\0\0\0", 4) + "w" +    // name
                         std::string("\x00\x10\x01\x00", 4) +    // int16, lanes 1
                         std::string("\x01\0\0\0", 4) +          // ndim
                         std::string("\x02\0\0\0\0\0\0\0", 8) +  // shape
                         std::string("\x04\0\0\0\0\0\0\0", 8) +  // nbytes
                         std::string("\x02\x01\xfe\xff", 4);     // data
  EXPECT_EQ(bytes, expected);
}

TEST(Params, TruncatedAtEveryByte) {
  std::mt19937 rng(5);
  std::map<std::string, NDArray> params = {{"a", random_array({3}, DataType::Float(32), rng)},
                                           {"b", random_array({2, 2}, DataType::Int(32), rng)}};
  std::string bytes = save_params_to_bytes(params);
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string msg = error_of([&] { load_params_from_bytes(bytes.substr(0, n), "t.bin"); });
    EXPECT_EQ(msg.rfind("params file 't.bin': ", 0), 0u) << n << ": " << msg;
    EXPECT_TRUE(msg.find("truncated") != std::string::npos ||
                msg.find("corrupt entry count") != std::string::npos)
        << n << ": " << msg;
  }
  // Truncated inside the second entry's data: names the entry and the field.
  std::string path = temp_path("trunc.bin");
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 3);
  EXPECT_EQ(error_of([&] { load_params(path); }),
            "params file '" + path +
                "': entry 1 ('b'): truncated data (needs 16 bytes, the file has 13 left)");
  std::filesystem::remove(path);
}

TEST(Params, CorruptFiles) {
  NDArray a = NDArray::empty({2}, DataType::Float(32));
  std::string bytes = save_params_to_bytes({{"w", a}});
  auto msg_for = [](std::string b) {
    return error_of([&] { load_params_from_bytes(b, "c.bin"); });
  };
  EXPECT_EQ(msg_for("KILNPRM2" + bytes.substr(8)),
            "params file 'c.bin': bad magic (expected \"KILNPRM1\"; not a Kiln params file)");
  std::string b = bytes;
  b[8] = 100;  // count
  EXPECT_EQ(msg_for(b),
            "params file 'c.bin': corrupt entry count 100 (the file has only 37 bytes left)");
  b = bytes;
  b[21] = 9;  // dtype code
  EXPECT_EQ(msg_for(b),
            "params file 'c.bin': entry 0 ('w'): corrupt dtype (code 9, bits 32, lanes 1)");
  b = bytes;
  b[25] = 100;  // ndim
  EXPECT_EQ(msg_for(b), "params file 'c.bin': entry 0 ('w'): corrupt ndim 100");
  b = bytes;
  b[37] = 12;  // nbytes
  EXPECT_EQ(msg_for(b), "params file 'c.bin': entry 0 ('w'): corrupt nbytes 12 for float32 [2]");
  b = bytes;
  b[36] = static_cast<char>(0xff);  // shape[0] high byte: negative
  EXPECT_EQ(msg_for(b).find("params file 'c.bin': entry 0 ('w'): negative extent"), 0u);
  EXPECT_EQ(msg_for(bytes + "xx"),
            "params file 'c.bin': 2 unexpected bytes after the last of 1 entries");
  std::string missing = temp_path("missing.bin");
  EXPECT_EQ(error_of([&] { load_params(missing); }),
            "params file '" + missing + "': cannot open: No such file or directory");
  EXPECT_EQ(error_of([&] {
              save_params(temp_path("u.bin"), {{"x", NDArray()}});
            }),
            "params file '" + temp_path("u.bin") + "': save_params: parameter 'x' is undefined");
}

}  // namespace
}  // namespace kiln::runtime
