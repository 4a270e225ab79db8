// The tools' tuning log (tuning/log.h): a bad log path is a user error naming the path and what
// is wrong before any work is done; records appended to a log load back unchanged, after the
// records already there.
#include "kiln/tuning/log.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "common/measured.h"
#include "kiln/autotune/task.h"
#include "kiln/graph/tuning.h"

namespace kiln::tuning {
namespace {

using ::kiln::testing::measured;

namespace fs = std::filesystem;

TEST(TuningLog, BadPathsAreUserErrorsNamingThePath) {
  EXPECT_EQ(kiln::testing::error_of([] { check_log_path(""); }), "--log: empty path");
  const std::string missing = (fs::temp_directory_path() / "kiln_no_such_dir" / "t.jsonl").string();
  EXPECT_EQ(kiln::testing::error_of([&] { check_log_path(missing, "--tuning-log"); }),
            "--tuning-log '" + missing + "': directory '" +
                (fs::temp_directory_path() / "kiln_no_such_dir").string() + "' does not exist");
  const std::string dir = fs::temp_directory_path().string();
  EXPECT_EQ(kiln::testing::error_of([&] { check_log_path(dir); }),
            "--log '" + dir + "' exists and is not a regular file");
}

TEST(TuningLog, AppendedRecordsLoadBack) {
  const std::string log = (fs::temp_directory_path() / "kiln_tuning_log_test.jsonl").string();
  fs::remove(log);
  check_log_path(log);  // creates the file
  EXPECT_TRUE(fs::is_regular_file(log));
  const autotune::Task task = graph::dense_task({4, 32, 16}, Target::host());
  auto record = [&](uint64_t index, double s) {
    return autotune::Record::make(task, task.space.get(index % task.space.size()), measured(s));
  };
  append_records(log, {record(0, 2e-3)});
  append_records(log, {record(1, 1e-3), record(2, 3e-3)});
  std::vector<autotune::Record> back = autotune::load_records(log).records;
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].task, task.key()) << i;
    EXPECT_EQ(back[i].config, task.space.get(i % task.space.size()).to_json()) << i;
  }
  EXPECT_DOUBLE_EQ(back[0].result.mean_s, 2e-3);
  EXPECT_DOUBLE_EQ(back[2].result.mean_s, 3e-3);
  fs::remove(log);
}

}  // namespace
}  // namespace kiln::tuning
