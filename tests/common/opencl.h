/// \file opencl.h
/// \brief The OpenCL device in tests (PoCL on this CPU): a fresh kernel cache per process.
#pragma once

#include <stdlib.h>

#include <string>

#include "common/temp_dir.h"
#include "kiln/runtime/device_api.h"

namespace kiln::testing {

/// OpenCL device 0, or false with the reason in `why`. The first call points PoCL's kernel
/// cache (POCL_CACHE_DIR) at a new empty directory, before the runtime loads the driver: a
/// test must not pass on a developer's warm cache and crash on a cold one (PoCL's compiler and
/// Kiln's LLVM 16 in one process; the runtime's preload is what makes the cold path work).
inline bool opencl_device(std::string* why) {
  static const bool fresh_cache = [] {
    setenv("POCL_CACHE_DIR", test_temp_dir("pocl_cache").c_str(), 1);
    return true;
  }();
  (void)fresh_cache;
  return runtime::device_available(runtime::Device{kKilnOpenCL, 0}, why);
}

}  // namespace kiln::testing
