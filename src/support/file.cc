// Bounded reading of files that may be hostile (file.h). InputFile stats the path (following
// symbolic links) and refuses anything but a regular file before opening it, then opens it with
// O_NONBLOCK (so that a FIFO swapped in meanwhile cannot block the open) and checks the open
// descriptor again with fstat: only a regular file's size is known and bounded, and only that
// size is trusted afterwards. Reads are plain read(2) calls retried on EINTR; read_rest
// allocates at most the size fstat reported, and an allocation failure becomes a kiln::Error
// naming the file instead of escaping as std::bad_alloc.
#include "kiln/support/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kiln/support/error.h"

namespace kiln::support {
namespace {

/// "a FIFO", "a directory", ... for a file that is not regular.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// "(a FIFO)", or "('/dev/zero', a character device)" when `path` is a symbolic link.
std::string describe_non_regular(const std::string& path, mode_t mode) {
  std::string kind = kind_of(mode);
  struct stat l;
  if (::lstat(path.c_str(), &l) == 0 && S_ISLNK(l.st_mode)) {
    if (char* real = ::realpath(path.c_str(), nullptr)) {
      std::string target = real;
      std::free(real);
      return "(a symbolic link to '" + target + "', " + kind + ")";
    }
  }
  return "(" + kind + ")";
}

}  // namespace

std::string bytes_text(uint64_t bytes) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

InputFile::InputFile(const std::string& path, std::string what, uint64_t max_bytes)
    : what_(std::move(what)) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail(std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("not a regular file " + describe_non_regular(path, st.st_mode));
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  // The destructor does not run when the constructor throws: close first.
  auto close_and_fail = [&](const std::string& message) {
    ::close(fd_);
    fd_ = -1;
    fail(message);
  };
  if (::fstat(fd_, &st) != 0) close_and_fail(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    close_and_fail("not a regular file " + describe_non_regular(path, st.st_mode));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > max_bytes) {
    close_and_fail("the file is " + std::to_string(size_) + " bytes (" + bytes_text(size_) +
                   "), more than the limit of " + bytes_text(max_bytes));
  }
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

MappedFile::MappedFile(const std::string& path, std::string what, uint64_t max_bytes) {
  InputFile f(path, std::move(what), max_bytes);
  size_ = f.size();
  if (size_ == 0) return;
  // Populated up front: the parser reads every byte, and one read-ahead is cheaper than a
  // page fault per 4 KiB.
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, f.fd(), 0);
  if (p == MAP_FAILED) f.fail(std::string("cannot map: ") + std::strerror(errno));
  data_ = p;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

void InputFile::fail(const std::string& message) const { KILN_ERROR << what_ << ": " << message; }

size_t InputFile::read_some(void* dst, size_t n) {
  size_t done = 0;
  auto* p = static_cast<char*>(dst);
  while (done < n) {
    // read(2) moves at most 0x7ffff000 bytes at once on Linux.
    size_t chunk = std::min<size_t>(n - done, size_t{1} << 30);
    ssize_t r = ::read(fd_, p + done, chunk);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(std::string("read failed: ") + std::strerror(errno));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  pos_ += done;
  return done;
}

void InputFile::read_exact(void* dst, size_t n, const char* field) {
  if (n > remaining()) {
    fail(std::string("truncated ") + field + " (needs " + std::to_string(n) +
         " bytes, the file has " + std::to_string(remaining()) + " left)");
  }
  size_t got = read_some(dst, n);
  if (got < n) {
    fail(std::string("truncated ") + field + " (needs " + std::to_string(n) + " bytes, got " +
         std::to_string(got) + "; the file shrank while it was read)");
  }
}

std::string InputFile::read_rest() {
  uint64_t n = remaining();
  std::string out;
  try {
    out.resize(static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    fail("out of memory reading " + std::to_string(n) + " bytes (" + bytes_text(n) + ")");
  } catch (const std::length_error&) {
    fail("out of memory reading " + std::to_string(n) + " bytes (" + bytes_text(n) + ")");
  }
  out.resize(read_some(out.data(), out.size()));
  return out;
}

std::string read_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  InputFile f(path, what, max_bytes);
  return f.read_rest();
}

}  // namespace kiln::support
