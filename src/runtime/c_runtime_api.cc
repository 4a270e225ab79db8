// The plain-C functions of c_runtime_api.h that are not the thread pool: the per-thread last
// error message (a thread_local std::string, so a message set by one thread never shows up in
// another) and the workspace allocator for generated code (64-byte aligned blocks from
// posix_memalign; the size is rounded up to a multiple of 64 so vector loops may read a whole
// last line). The thread-pool entry points live in thread_pool.cc.
//
// Workspace blocks are kept for reuse when freed (TVM's WorkspacePool does the same): a kernel
// allocates its intermediate buffers (padding, Winograd transforms) on every call, and glibc
// returns blocks of a few MB to the system on free, so each call would otherwise page-fault its
// buffers in again (a 3 MB Winograd transform cost more than the convolution itself). A request
// takes the smallest kept block of at least its size and at most twice it; at most
// kPoolMaxBytes stay kept (the largest are released first).
#include "kiln/runtime/c_runtime_api.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace {

/// Alignment of every workspace block, in bytes (one cache line, one AVX-512 register).
constexpr uint64_t kWorkspaceAlignment = 64;
/// Most bytes of freed workspace blocks kept for reuse.
constexpr uint64_t kPoolMaxBytes = uint64_t{256} << 20;

/// Freed workspace blocks by size, and the size of every live block.
class WorkspacePool {
 public:
  void* take(uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(size);
    if (it == free_.end() || it->first > 2 * size) return nullptr;
    void* p = it->second;
    live_[p] = it->first;
    kept_ -= it->first;
    free_.erase(it);
    return p;
  }
  void note_live(void* p, uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = size;
  }
  void give_back(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) {  // not ours: free it as the old allocator would have
      std::free(p);
      return;
    }
    free_.emplace(it->second, p);
    kept_ += it->second;
    live_.erase(it);
    while (kept_ > kPoolMaxBytes) {
      auto big = std::prev(free_.end());
      kept_ -= big->first;
      std::free(big->second);
      free_.erase(big);
    }
  }

 private:
  std::mutex mu_;
  std::multimap<uint64_t, void*> free_;
  std::unordered_map<void*, uint64_t> live_;
  uint64_t kept_ = 0;
};

WorkspacePool& pool() {
  static WorkspacePool* p = new WorkspacePool();  // never destroyed: kernels may run at exit
  return *p;
}

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
  if (void* kept = pool().take(size)) return kept;
  void* ptr = nullptr;
  if (posix_memalign(&ptr, kWorkspaceAlignment, size) != 0) {
    last_error() =
        "kiln_workspace_alloc: out of memory allocating " + std::to_string(nbytes) + " bytes";
    return nullptr;
  }
  pool().note_live(ptr, size);
  return ptr;
}

KILN_DLL void kiln_workspace_free(void* ptr) {
  if (ptr) pool().give_back(ptr);
}

}  // extern "C"
