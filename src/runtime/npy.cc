// NDArray <-> .npy: a table maps each supported numpy descr to a Kiln DataType; loading lets
// support::read_npy parse the file and read the elements straight into a freshly allocated
// NDArray, saving writes the array's compact buffer after the descr of its dtype.
#include "kiln/runtime/npy.h"

#include "kiln/support/error.h"
#include "kiln/support/npy.h"

namespace kiln::runtime {
namespace {

struct DescrEntry {
  const char* descr;
  DataType dtype;
};

constexpr DescrEntry kDescrs[] = {
    {"<f2", DataType::Float(16)}, {"<f4", DataType::Float(32)}, {"<f8", DataType::Float(64)},
    {"|i1", DataType::Int(8)},    {"<i2", DataType::Int(16)},   {"<i4", DataType::Int(32)},
    {"<i8", DataType::Int(64)},   {"|u1", DataType::UInt(8)},   {"<u2", DataType::UInt(16)},
    {"<u4", DataType::UInt(32)},  {"<u8", DataType::UInt(64)},  {"|b1", DataType::Bool()},
};

}  // namespace

std::string npy_descr_of(DataType dtype) {
  for (const auto& e : kDescrs) {
    if (e.dtype == dtype) return e.descr;
  }
  return "";
}

NDArray load_npy(const std::string& path) {
  NDArray out;
  support::read_npy(path, [&](const support::NpyHeader& h) -> void* {
    for (const auto& e : kDescrs) {
      if (h.descr == e.descr) {
        out = NDArray::empty(h.shape, e.dtype);
        KILN_ICHECK(out.nbytes() == h.nbytes) << path;
        return out.data();
      }
    }
    KILN_ERROR << "npy file '" << path << "': unsupported dtype '" << h.descr << "'";
  });
  return out;
}

void save_npy(const std::string& path, const NDArray& array) {
  KILN_USER_CHECK(array.defined()) << "npy file '" << path << "': cannot save an undefined array";
  std::string descr = npy_descr_of(array.dtype());
  KILN_USER_CHECK(!descr.empty()) << "npy file '" << path << "': dtype " << array.dtype()
                                  << " has no .npy equivalent";
  KILN_USER_CHECK(array.device() == Device::cpu())
      << "npy file '" << path << "': array is on " << array.device().str() << ", not the CPU";
  support::write_npy(path, descr, array.shape(), array.data(), array.nbytes());
}

}  // namespace kiln::runtime
