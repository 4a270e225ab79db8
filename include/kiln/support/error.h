/// \file error.h
/// \brief Errors with context.
///
/// Two kinds of error (STYLE.md, item 14): a *user* error names the problem and where it is
/// (stage, axis, argument, shapes); an *internal* error says it is a compiler bug and which
/// invariant broke. Both are `kiln::Error` exceptions inside the compiler; across the C ABI
/// they become error codes with the same message.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

/// The exception thrown for every error inside the compiler.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
/// Collects a message with operator<< and throws when destroyed.
class ErrorBuilder {
 public:
  ErrorBuilder(const char* prefix, const char* file, int line, bool internal)
      : internal_(internal), file_(file), line_(line) {
    if (prefix) os_ << prefix;
  }
  [[noreturn]] ~ErrorBuilder() noexcept(false) {
    if (internal_) os_ << " [internal compiler error at " << file_ << ":" << line_ << "]";
    throw Error(os_.str());
  }
  template <typename T>
  ErrorBuilder& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  bool internal_;
  const char* file_;
  int line_;
  std::ostringstream os_;
};
}  // namespace detail

}  // namespace kiln

/// A user error: `KILN_ERROR << "split: factor must be positive, got " << f;`
#define KILN_ERROR ::kiln::detail::ErrorBuilder(nullptr, __FILE__, __LINE__, false)
/// Checks a user-facing precondition; the streamed message explains it.
#define KILN_USER_CHECK(cond) \
  if (!(cond)) ::kiln::detail::ErrorBuilder(nullptr, __FILE__, __LINE__, false)
/// Checks an internal invariant; failure means a compiler bug.
#define KILN_ICHECK(cond)                                                                       \
  if (!(cond))                                                                                  \
  ::kiln::detail::ErrorBuilder("internal error: check failed: " #cond ": ", __FILE__, __LINE__, \
                               true)
