/// \file log.h
/// \brief The tuning log as the tools write it: a JSON-lines file of autotune::Record, appended
/// to and flushed record by record (autotune/record.h), so a crash loses at most one line.
#pragma once

#include <string>
#include <vector>

#include "kiln/autotune/record.h"

namespace kiln::tuning {

/// Checks, before any slow work, that `path` can be a tuning log: not empty, its directory
/// exists, it is a regular file or missing, and it can be opened for appending (a missing file
/// is created). User errors name the path and start with `what` (the option that gave it, e.g.
/// "--log").
void check_log_path(const std::string& path, const std::string& what = "--log");

/// Appends `records` to the log at `path`, one line each.
void append_records(const std::string& path, const std::vector<autotune::Record>& records);

}  // namespace kiln::tuning
