/// \file fuzz_util.h
/// \brief Shared helpers of the libFuzzer targets (fuzz/*.cc): the verdict on an exception and
/// an in-memory file for readers that take a path.
///
/// A fuzz input may be anything, so a target expects the code under test to either accept it or
/// throw a *user* error (kiln::Error without the "[internal compiler error" marker). Everything
/// else is a finding and aborts the run, so libFuzzer saves the input: a crash or sanitizer
/// report, an internal error (a broken invariant reached from input), or an exception that is
/// not a kiln::Error (its message would not name the file or the problem).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "kiln/support/error.h"

namespace kiln::fuzz {

/// Runs `body` on the fuzz input `input`; returns normally when it succeeds or throws a user
/// error, aborts (a finding) on an internal error or on any other exception, printing what was
/// thrown. An internal error is recognised by the marker KILN_ICHECK appends ("[internal
/// compiler error at FILE:LINE]"); a user error may quote the input, so the marker counts only
/// when the input does not hold it itself.
template <typename F>
void expect_user_errors_only(const char* target, const std::string& input, F&& body) {
  static const std::string kMarker = "internal compiler error at ";
  try {
    body();
  } catch (const kiln::Error& e) {
    std::string msg = e.what();
    if (msg.find(kMarker) != std::string::npos && input.find(kMarker) == std::string::npos) {
      std::fprintf(stderr, "%s: internal error on fuzz input: %s\n", target, msg.c_str());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: an exception other than kiln::Error escaped: %s\n", target, e.what());
    std::abort();
  }
}

/// A regular file in memory (memfd) whose path, /proc/self/fd/N, readers that take a path can
/// open. set() replaces its contents. One per target, reused for every input.
class MemFile {
 public:
  explicit MemFile(const char* name) {
    fd_ = memfd_create(name, 0);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  /// Replaces the file's contents with `size` bytes at `data`.
  void set(const void* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    const char* p = static_cast<const char*>(data);
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd_, p + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }
  /// A path that opens the file.
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

/// Splits `bytes` at the first occurrence of `sep`: the part before it goes to `first`, the
/// rest (after it) to `rest`; without `sep`, everything goes to `first`. Returns whether `sep`
/// was found.
inline bool split_at(const std::string& bytes, const std::string& sep, std::string& first,
                     std::string& rest) {
  size_t at = bytes.find(sep);
  if (at == std::string::npos) {
    first = bytes;
    rest.clear();
    return false;
  }
  first = bytes.substr(0, at);
  rest = bytes.substr(at + sep.size());
  return true;
}

}  // namespace kiln::fuzz
