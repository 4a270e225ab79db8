// The tuning-log reader on files that are not logs (issue 26): a FIFO, a link to /dev/zero and
// a directory given as the log are errors naming the path (reading them would block or never
// end), a missing file is an empty log, and a log whose last line was cut short keeps its
// whole records and warns about the partial one, naming its line.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "kiln/autotune/record.h"

namespace kiln::autotune {
namespace {

using ::kiln::testing::error_of;
namespace fs = std::filesystem;

fs::path temp_dir() {
  fs::path d =
      fs::temp_directory_path() / ("kiln-record-file-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(RecordLogFile, NotARegularFileIsAnErrorNamingIt) {
  fs::path d = temp_dir();
  fs::path fifo = d / "log.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { load_records(fifo.string(), false); }),
            "tuning log '" + fifo.string() + "': not a regular file (a FIFO)");
  fs::path zero = d / "zero.jsonl";
  fs::create_symlink("/dev/zero", zero);
  std::string e = error_of([&] { load_records(zero.string(), false); });
  EXPECT_NE(e.find("tuning log '" + zero.string() + "': not a regular file"), std::string::npos)
      << e;
  EXPECT_NE(e.find("/dev/zero"), std::string::npos) << e;
  e = error_of([&] { load_records(d.string(), false); });
  EXPECT_NE(e.find("tuning log '" + d.string() + "': not a regular file"), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(RecordLogFile, MissingIsEmptyAndAPartialLastLineIsSkippedWithAWarning) {
  fs::path d = temp_dir();
  RecordLog none = load_records((d / "missing.jsonl").string(), false);
  EXPECT_TRUE(none.records.empty());
  EXPECT_EQ(none.skipped, 0u);
  std::string line = R"({"kiln_record": 1, "task": "t", "template": "dense.cpu", "version": "1", )"
                     R"("workload": "w", "target": "llvm", "config": {"tile": [1, 2]}, )"
                     R"("costs": {"mean": 1.5e-06, "runs": [1.5e-06]}, "error": null})";
  fs::path log = d / "log.jsonl";
  std::ofstream(log) << line << "\n" << line << "\n" << line.substr(0, 40);
  RecordLog got = load_records(log.string(), false);
  ASSERT_EQ(got.records.size(), 2u);
  EXPECT_EQ(got.records[1].config["tile"][1], 2);
  EXPECT_DOUBLE_EQ(got.records[0].result.mean_s, 1.5e-06);
  ASSERT_EQ(got.skipped, 1u);
  ASSERT_EQ(got.warnings.size(), 1u);
  EXPECT_EQ(got.warnings[0].rfind(log.string() + ":3: skipped a corrupt or partial record", 0), 0u)
      << got.warnings[0];
  fs::remove_all(d);
}

}  // namespace
}  // namespace kiln::autotune
