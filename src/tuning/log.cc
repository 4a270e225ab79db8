// The tools' side of the tuning log (tuning/log.h): the up-front check of a log path and the
// appending of records made outside autotune::tune (the in-network check's).

#include "kiln/tuning/log.h"

#include <filesystem>
#include <fstream>

#include "kiln/support/error.h"

namespace kiln::tuning {

void check_log_path(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  KILN_USER_CHECK(!path.empty()) << what << ": empty path";
  fs::path p(path);
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  KILN_USER_CHECK(fs::is_directory(dir, ec))
      << what << " '" << path << "': directory '" << dir.string() << "' does not exist";
  KILN_USER_CHECK(!fs::exists(p, ec) || fs::is_regular_file(p, ec))
      << what << " '" << path << "' exists and is not a regular file";
  std::ofstream f(path, std::ios::app);
  KILN_USER_CHECK(f.good()) << what << " '" << path << "': cannot open for appending";
}

void append_records(const std::string& path, const std::vector<autotune::Record>& records) {
  autotune::RecordWriter w(path);
  for (const autotune::Record& rec : records) w.write(rec);
}

}  // namespace kiln::tuning
