/// \file error.h
/// \brief Test helper: the message of the kiln::Error a callable throws.
///
///   EXPECT_NE(error_of([&] { s[C].split(i, 0); }).find("factor must be positive"), npos);
/// Fails the current test (and returns "") when nothing is thrown.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kiln/support/error.h"

namespace kiln::testing {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no kiln::Error thrown";
  return "";
}

}  // namespace kiln::testing
