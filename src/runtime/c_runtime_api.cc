// The plain-C functions of c_runtime_api.h that are not the thread pool: the per-thread last
// error message (a thread_local std::string, so a message set by one thread never shows up in
// another) and the workspace allocator for generated code (64-byte aligned blocks from
// posix_memalign; the size is rounded up to a multiple of 64 so vector loops may read a whole
// last line). The thread-pool entry points live in thread_pool.cc.
#include "kiln/runtime/c_runtime_api.h"

#include <cstdlib>
#include <string>

namespace {

/// Alignment of every workspace block, in bytes (one cache line, one AVX-512 register).
constexpr uint64_t kWorkspaceAlignment = 64;

std::string& last_error() {
  thread_local std::string message;
  return message;
}

}  // namespace

extern "C" {

KILN_DLL void kiln_set_last_error(const char* msg) { last_error() = msg ? msg : ""; }

KILN_DLL const char* kiln_get_last_error(void) { return last_error().c_str(); }

KILN_DLL void* kiln_workspace_alloc(uint64_t nbytes) {
  if (nbytes > UINT64_MAX - kWorkspaceAlignment) {
    kiln_set_last_error("kiln_workspace_alloc: requested size is too large");
    return nullptr;
  }
  uint64_t size = (nbytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
  if (size == 0) size = kWorkspaceAlignment;
  void* ptr = nullptr;
  if (posix_memalign(&ptr, kWorkspaceAlignment, size) != 0) {
    last_error() =
        "kiln_workspace_alloc: out of memory allocating " + std::to_string(nbytes) + " bytes";
    return nullptr;
  }
  return ptr;
}

KILN_DLL void kiln_workspace_free(void* ptr) { std::free(ptr); }

}  // extern "C"
