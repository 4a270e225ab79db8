/// \file golden.h
/// \brief Golden-text checks for tests (STYLE.md item 11).
///
///   KILN_EXPECT_GOLDEN("vectorize_add", to_string(f));
/// compares the text with `golden/vectorize_add.txt` next to the calling test file. On a
/// mismatch the test fails with a line diff (`-` expected, `+` actual). With the environment
/// variable KILN_UPDATE_GOLDEN=1 the file is (re)written instead and the check passes; a
/// missing file is an error otherwise.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::testing {

inline std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  std::string line;
  while (std::getline(is, line)) out.push_back(line);
  return out;
}

/// A readable line diff (longest common subsequence): "  " same, "- " expected, "+ " actual.
inline std::string line_diff(const std::string& expected, const std::string& actual) {
  std::vector<std::string> a = split_lines(expected), b = split_lines(actual);
  size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::ostringstream os;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      os << "  " << a[i] << "\n";
      ++i, ++j;
    } else if (j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j])) {
      os << "+ " << b[j++] << "\n";
    } else {
      os << "- " << a[i++] << "\n";
    }
  }
  return os.str();
}

/// Compares `actual` with the golden file `<dir of test_file>/golden/<name>.txt`.
inline ::testing::AssertionResult check_golden(const std::string& test_file,
                                               const std::string& name, const std::string& actual) {
  namespace fs = std::filesystem;
  fs::path path = fs::path(test_file).parent_path() / "golden" / (name + ".txt");
  const char* upd = std::getenv("KILN_UPDATE_GOLDEN");
  if (upd && std::string(upd) == "1") {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << actual;
    return ::testing::AssertionSuccess();
  }
  std::ifstream in(path);
  if (!in) {
    return ::testing::AssertionFailure()
           << "golden file " << path << " is missing; run with KILN_UPDATE_GOLDEN=1 to create "
           << "it. Actual text:\n"
           << actual;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str() == actual) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "text differs from golden file " << path
         << " (- expected, + actual; KILN_UPDATE_GOLDEN=1 rewrites it):\n"
         << line_diff(ss.str(), actual);
}

}  // namespace kiln::testing

/// Expects `text` to equal golden/<name>.txt beside the calling test source file.
#define KILN_EXPECT_GOLDEN(name, text) \
  EXPECT_TRUE(::kiln::testing::check_golden(__FILE__, (name), (text)))
