/// \file file.h
/// \brief Reading files that may be hostile: only regular files, every read bounded.
///
/// A module directory, an .npy input or a params file comes from the user, and may be anything:
/// a FIFO named graph.json (reading it blocks forever), a symbolic link to /dev/zero (reading it
/// never ends), a truncated file, a header that claims gigabytes. `InputFile` opens a path only
/// when it is a regular file after following symbolic links (checked with stat before opening
/// and with fstat on the open descriptor, so a FIFO is never waited on), knows the file's size,
/// and refuses a file larger than a limit before anything is read. Callers compare every size a
/// header claims with `remaining()` before allocating for it. Errors start with the caller's
/// `what` ("npy file 'x.npy'") and say what was wrong:
///
///     npy file 'x.npy': not a regular file (a FIFO)
///     graph 'm/graph.json': not a regular file ('/dev/zero', a character device)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::support {

/// The default limit of read_file: 1 GiB (a graph.json, a tuning log).
constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;
/// The limit for files of tensor data (params.bin, .npy): 1 TiB, far beyond the memory of any
/// machine that runs Kiln; the file's own size is the bound that matters.
constexpr uint64_t kMaxDataFileBytes = uint64_t{1} << 40;

/// A regular file open for reading, with its size; closed on destruction.
class InputFile {
 public:
  /// Opens `path`. `what` starts every error message ("params file 'p.bin'"). Throws
  /// kiln::Error "WHAT: cannot open: <reason>" when it cannot be opened, "WHAT: not a regular
  /// file (...)" for a directory, FIFO, device or socket (naming the target of a symbolic
  /// link), and "WHAT: the file is N bytes, more than the limit of M" above `max_bytes`.
  InputFile(const std::string& path, std::string what, uint64_t max_bytes = kMaxDataFileBytes);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  /// The file's size in bytes (when it was opened).
  uint64_t size() const { return size_; }
  /// Bytes read so far.
  uint64_t position() const { return pos_; }
  /// size() - position(): what a header's claims are checked against before allocating.
  uint64_t remaining() const { return size_ > pos_ ? size_ - pos_ : 0; }
  /// What errors start with.
  const std::string& what() const { return what_; }
  /// The open descriptor (for pread of headers at known offsets).
  int fd() const { return fd_; }

  /// Reads up to `n` bytes into `dst`; returns how many were read (fewer only at the end of
  /// the file). Throws "WHAT: read failed: <reason>" on an I/O error.
  size_t read_some(void* dst, size_t n);
  /// Reads exactly `n` bytes; throws "WHAT: truncated FIELD (needs N bytes, the file has M
  /// left)" first when fewer remain.
  void read_exact(void* dst, size_t n, const char* field);
  /// The rest of the file (at most remaining() bytes; a file that shrank gives fewer). An
  /// allocation failure is a kiln::Error naming the file and the size.
  std::string read_rest();
  /// Throws kiln::Error "WHAT: <message>".
  [[noreturn]] void fail(const std::string& message) const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0, pos_ = 0;
  std::string what_;
};

/// A regular file (checked as InputFile does) mapped read-only into memory: a parser reads it
/// in place, without first copying it into freshly allocated pages (for a 528 MB ONNX model,
/// a third of its import). Unmapped on destruction.
class MappedFile {
 public:
  /// Errors as InputFile's; "WHAT: cannot map: <reason>" when mmap fails.
  MappedFile(const std::string& path, std::string what, uint64_t max_bytes = kMaxDataFileBytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return static_cast<const char*>(data_); }
  uint64_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  uint64_t size_ = 0;
};

/// The whole file at `path` (a regular file of at most `max_bytes`; see InputFile).
std::string read_file(const std::string& path, const std::string& what,
                      uint64_t max_bytes = kMaxTextFileBytes);

/// "1.5 GiB", "512 B": a byte count for messages (binary units, one decimal).
std::string bytes_text(uint64_t bytes);

}  // namespace kiln::support
