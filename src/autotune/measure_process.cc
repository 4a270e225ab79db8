// Measurement's process plumbing (autotune/measure.h: run_in_child, ChildOutcome): a child is
// forked with a pipe back to the parent, runs its body with core dumps off and any escaping
// exception reported as JSON, and exits with _exit; the parent reads the pipe until EOF or a
// deadline on the real clock (then kills the child), reaps it and records how it ended. The
// Measurer's candidate children (measure.cc) use the same pieces.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "measure_internal.h"

namespace kiln::autotune {

using nlohmann::json;

namespace detail {

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

/// The time `s` seconds from now.
Clock::time_point after(double s) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Now, in seconds, on the measurement clock (MeasureOptions::clock).
double measure_now(const MeasureOptions& opt) {
  if (opt.clock) return opt.clock();
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

/// Reads the child's pipe `fd` into out.payload until EOF or `deadline` (then kills the child),
/// closes fd, reaps `pid` and records how it ended.
void collect(pid_t pid, int fd, Clock::time_point deadline, ChildOutcome& out) {
  bool timed_out = false;
  char buf[65536];
  for (;;) {
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::ceil(left * 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // the loop re-checks the deadline
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed its end (exited)
    out.payload.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    out.status = ChildOutcome::kTimedOut;
  } else if (WIFSIGNALED(status)) {
    out.status = ChildOutcome::kSignaled;
    out.code = WTERMSIG(status);
  } else {
    out.status = ChildOutcome::kExited;
    out.code = WEXITSTATUS(status);
  }
}

/// In a child: runs `body(fd)`, reporting an escaping exception as {"error": "other"}, and
/// returns the exit code.
int run_body(const std::function<void(int fd)>& body, int fd) {
  try {
    body(fd);
  } catch (const std::exception& e) {
    std::string msg = json({{"error", "other"}, {"message", e.what()}}).dump();
    write_all(fd, msg.data(), msg.size());
    return 3;
  } catch (...) {
    return 4;
  }
  return 0;
}

void no_core_dumps() {
  struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
}

}  // namespace detail

std::string ChildOutcome::describe() const {
  std::ostringstream os;
  switch (status) {
    case kExited:
      os << "exited with code " << code;
      break;
    case kSignaled:
      os << "killed by signal " << code << " (" << strsignal(code) << ")";
      break;
    case kTimedOut:
      os << "timed out and was killed";
      break;
    case kForkFailed:
      os << "could not be started (fork failed: " << std::strerror(code) << ")";
      break;
  }
  return os.str();
}

ChildOutcome run_in_child(const std::function<void(int fd)>& body, double timeout_s) {
  ChildOutcome out;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    out.status = ChildOutcome::kForkFailed;
    out.code = errno;
    return out;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    out.status = ChildOutcome::kForkFailed;
    out.code = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return out;
  }
  if (pid == 0) {
    ::close(fds[0]);
    detail::no_core_dumps();
    int code = detail::run_body(body, fds[1]);
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  detail::collect(pid, fds[0], detail::after(timeout_s), out);
  return out;
}

}  // namespace kiln::autotune
