// NDArray: allocation (alignment, shape, sizes, the KilnArray view), copies with random data,
// and the messages of its errors.
#include "kiln/runtime/ndarray.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "kiln/runtime/device_api.h"
#include "kiln/support/error.h"

namespace kiln::runtime {
namespace {

/// Runs `f`, expects a kiln::Error, and returns its message.
using ::kiln::testing::error_of;

TEST(NDArray, EmptyShapeAndSizes) {
  NDArray a = NDArray::empty({2, 3, 4}, DataType::Float(32));
  ASSERT_TRUE(a.defined());
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(a.dtype(), DataType::Float(32));
  EXPECT_EQ(a.ndim(), 3);
  EXPECT_EQ(a.numel(), 24);
  EXPECT_EQ(a.nbytes(), 96u);
  EXPECT_EQ(a.device(), Device::cpu());
  EXPECT_EQ(a.str(), "NDArray(float32, [2, 3, 4], cpu:0)");

  NDArray v = NDArray::empty({5}, DataType::Float(32, 4));
  EXPECT_EQ(v.nbytes(), 80u);
  NDArray scalar = NDArray::empty({}, DataType::Int(64));
  EXPECT_EQ(scalar.ndim(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.nbytes(), 8u);
  NDArray zero = NDArray::empty({3, 0}, DataType::Int(8));
  EXPECT_EQ(zero.numel(), 0);
  EXPECT_EQ(zero.nbytes(), 0u);
  EXPECT_NE(zero.data(), nullptr);
  EXPECT_FALSE(NDArray().defined());
}

TEST(NDArray, Alignment) {
  for (int64_t n : {1, 3, 17, 1000, 4097}) {
    for (DataType t : {DataType::Int(8), DataType::Float(32), DataType::Float(64)}) {
      NDArray a = NDArray::empty({n}, t);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u) << n << " " << t;
    }
  }
}

TEST(NDArray, RawView) {
  NDArray a = NDArray::empty({4, 5}, DataType::Int(16));
  KilnArray* r = a.raw();
  EXPECT_EQ(r, a.raw());  // stable
  EXPECT_EQ(r->data, a.data());
  EXPECT_EQ(r->ndim, 2);
  EXPECT_EQ(r->shape[0], 4);
  EXPECT_EQ(r->shape[1], 5);
  EXPECT_EQ(r->strides, nullptr);
  EXPECT_EQ(r->byte_offset, 0u);
  EXPECT_EQ(r->device.device_type, kKilnCPU);
  EXPECT_EQ(r->device.device_id, 0);
  EXPECT_EQ(r->dtype.code, DataType::kInt);
  EXPECT_EQ(r->dtype.bits, 16);
  EXPECT_EQ(r->dtype.lanes, 1);
  NDArray b = a;  // a copy of the handle shares the node
  EXPECT_EQ(b.raw(), r);
  EXPECT_EQ(b.data(), a.data());
}

TEST(NDArray, CopyRoundTrip) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-10.f, 10.f);
  std::vector<float> src(7 * 13);
  for (float& x : src) x = dist(rng);
  NDArray a = NDArray::empty({7, 13}, DataType::Float(32));
  a.copy_from(src.data(), src.size() * sizeof(float));
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(a.data_as<float>()[i], src[i]);
  std::vector<float> dst(src.size(), -12345.f);
  a.copy_to(dst.data(), dst.size() * sizeof(float));
  EXPECT_EQ(dst, src);
}

TEST(NDArray, Errors) {
  std::string msg = error_of([] { NDArray::empty({2, -3}, DataType::Float(32)); });
  EXPECT_NE(msg.find("dimension 1 of shape [2, -3] is negative (-3)"), std::string::npos) << msg;

  msg = error_of([] { NDArray::empty({2}, DataType::Float(32), Device{7, 0}); });
  EXPECT_NE(msg.find("cannot allocate on device device_type(7):0: this runtime allocates cpu, "
                     "cuda and opencl memory"),
            std::string::npos)
      << msg;
  // OpenCL: one device (device_api.h), or none here.
  msg = error_of([] { NDArray::empty({2}, DataType::Float(32), Device{kKilnOpenCL, 1}); });
  EXPECT_EQ(msg.rfind("no OpenCL device: ", 0), 0u) << msg;
  // CUDA memory where there is no driver or device (device_api.h).
  if (!device_available(Device{kKilnCUDA, 7})) {
    msg = error_of([] { NDArray::empty({2}, DataType::Float(32), Device{kKilnCUDA, 7}); });
    EXPECT_EQ(msg.rfind("no CUDA device: ", 0), 0u) << msg;
  }

  msg = error_of([] { NDArray::empty({2}, DataType::Void()); });
  EXPECT_NE(msg.find("dtype void has no size"), std::string::npos) << msg;

  msg = error_of([] { NDArray::empty({INT64_MAX, 4}, DataType::Float(32)); });
  EXPECT_NE(msg.find("too large"), std::string::npos) << msg;

  NDArray a = NDArray::empty({2, 3}, DataType::Float(32));
  std::vector<char> buf(100);
  msg = error_of([&] { a.copy_from(buf.data(), 12); });
  EXPECT_NE(msg.find("NDArray::copy_from: the source has 12 bytes but the array (float32, shape "
                     "[2, 3]) holds 24 bytes"),
            std::string::npos)
      << msg;
  msg = error_of([&] { a.copy_to(buf.data(), 100); });
  EXPECT_NE(msg.find("the destination has 100 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("holds 24 bytes"), std::string::npos) << msg;

  msg = error_of([] { NDArray().shape(); });
  EXPECT_NE(msg.find("NDArray::shape: the array is undefined"), std::string::npos) << msg;
}

TEST(Workspace, AlignedAllocAndFree) {
  for (uint64_t n : {0, 1, 63, 64, 65, 100000}) {
    void* p = kiln_workspace_alloc(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << n;
    if (n) static_cast<char*>(p)[n - 1] = 1;
    kiln_workspace_free(p);
  }
  kiln_workspace_free(nullptr);
  EXPECT_EQ(kiln_workspace_alloc(UINT64_MAX), nullptr);
  EXPECT_NE(std::string(kiln_get_last_error()).find("kiln_workspace_alloc"), std::string::npos);
}

}  // namespace
}  // namespace kiln::runtime
