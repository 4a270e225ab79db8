// Temporary directories of a test process: fresh, empty, and removed with their contents when
// the process exits normally (a crashed test leaves them for inspection). Repeated `make test`
// runs must not fill /tmp (the aarch64 tests alone left ~90 MB a run).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::testing {

namespace detail {

/// The directories to remove at exit.
class TempDirs {
 public:
  static TempDirs& get() {
    static TempDirs dirs;
    return dirs;
  }
  void add(const std::filesystem::path& d) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(d);
  }
  ~TempDirs() {
    std::error_code ec;
    for (const auto& d : dirs_) std::filesystem::remove_all(d, ec);
  }

 private:
  std::mutex mu_;
  std::vector<std::filesystem::path> dirs_;
};

}  // namespace detail

/// A fresh, empty directory `kiln_<tag>_<pid>[_<name>]` under the system's temporary directory,
/// removed at exit.
inline std::filesystem::path test_temp_dir(const std::string& tag, const std::string& name = "") {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("kiln_" + tag + "_" + std::to_string(::getpid()) +
                                            (name.empty() ? "" : "_" + name));
  fs::remove_all(d);
  fs::create_directories(d);
  detail::TempDirs::get().add(d);
  return d;
}

}  // namespace kiln::testing
