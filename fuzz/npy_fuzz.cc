// libFuzzer target: the .npy reader (runtime::load_npy over support::read_npy), as `kiln run`
// reads an input tensor. The bytes become a regular file in memory; the reader must load it or
// refuse it with a user error naming the file, whatever the header claims (sizes, dtype,
// version, shape). A loaded array is written back and read again, which must round-trip.
#include <cstring>

#include "fuzz_util.h"
#include "kiln/runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  static kiln::fuzz::MemFile in("npy_fuzz_in");
  static kiln::fuzz::MemFile out("npy_fuzz_out");
  in.set(data, size);
  kiln::fuzz::expect_user_errors_only("npy_fuzz", bytes, [&] {
    kiln::runtime::NDArray a = kiln::runtime::load_npy(in.path());
    kiln::runtime::save_npy(out.path(), a);
    kiln::runtime::NDArray b = kiln::runtime::load_npy(out.path());
    if (a.nbytes() != b.nbytes() || a.shape() != b.shape() || a.dtype() != b.dtype() ||
        (a.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) != 0)) {
      std::fprintf(stderr, "npy_fuzz: save_npy + load_npy did not round-trip\n");
      std::abort();
    }
  });
  return 0;
}
