// The process-wide thread pool behind kiln_parallel_for. A dispatcher (the calling thread,
// holding the pool mutex) publishes one job (fn, closure, extent, chunk count), then bumps the
// private futex word of each worker it needs. The job is cut into a few chunks per thread
// (KILN_CHUNKS_PER_THREAD, default 4) and every participant, the caller included, takes the
// next chunk from a shared counter until none is left, so a thread that runs slower (its core
// shared with another process, a cache-missing chunk) takes fewer chunks instead of holding
// everyone up. The caller then waits for a shared countdown of busy workers; the worker that
// brings it to zero wakes the caller. Every wait (worker for work, caller for completion)
// spins (1 ms by default, KILN_SPIN_US) and then sleeps in futex(FUTEX_WAIT); a sleeper
// announces itself with a flag set before it re-checks the word (Dekker-style, all seq_cst), so
// the waker makes a futex(FUTEX_WAKE) system call only when someone actually sleeps. A chunk
// error records the first non-zero code and that chunk thread's last-error message, which the
// caller adopts.
// Nested calls (from inside a chunk) run inline. The pool object is never freed, so a late call
// during static destruction is safe; an exit-time hook stops and joins the workers, after which
// calls run serially. pthread_atfork re-creates the workers in a child process.
#include "kiln/runtime/thread_pool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/support/error.h"

namespace kiln::runtime {
namespace {

/// How long a waiting thread spins before it sleeps in the kernel: KILN_SPIN_US, else the
/// default. A model runs one parallel kernel after another with short serial gaps between them;
/// a worker that has gone to sleep costs a futex wake-up (tens of microseconds) per kernel.
/// Measured at 2 threads (kiln bench, three interleaved rounds): 1000 µs against 10 µs took
/// MobileNet-v2 from 6.5–7.0 to 4.7–5.2 ms (median) and ResNet-18 from 18.7–20.4 to 18.0–18.7.
constexpr int64_t kDefaultSpinUs = 1000;
std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds t = [] {
    if (const char* env = std::getenv("KILN_SPIN_US"); env && *env) {
      char* end = nullptr;
      long long us = std::strtoll(env, &end, 10);  // NOLINT(runtime/int)
      if (*end == '\0' && us >= 0 && us <= 1000000) return std::chrono::microseconds(us);
      std::fprintf(stderr,
                   "kiln: ignoring KILN_SPIN_US='%s' (expected 0 to 1000000 microseconds)\n", env);
    }
    return std::chrono::microseconds(kDefaultSpinUs);
  }();
  return t;
}
/// Chunks per thread of a parallel loop: KILN_CHUNKS_PER_THREAD (1 = one contiguous chunk per
/// thread, a static split), else the default. More chunks balance the load when a core is
/// busy with something else; each costs one atomic increment.
constexpr int64_t kDefaultChunksPerThread = 4;
int64_t chunks_per_thread_setting() {
  static const int64_t n = [] {
    if (const char* env = std::getenv("KILN_CHUNKS_PER_THREAD"); env && *env) {
      char* end = nullptr;
      long long v = std::strtoll(env, &end, 10);  // NOLINT(runtime/int)
      if (*end == '\0' && v >= 1 && v <= 1024) return static_cast<int64_t>(v);
      std::fprintf(stderr, "kiln: ignoring KILN_CHUNKS_PER_THREAD='%s' (expected 1 to 1024)\n",
                   env);
    }
    return kDefaultChunksPerThread;
  }();
  return n;
}

/// Upper bound on the thread count (guards against KILN_NUM_THREADS=1000000).
constexpr int32_t kMaxThreads = 1024;

thread_local bool tl_in_parallel = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

inline void futex_wake(std::atomic<uint32_t>* word, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr,
          0);
}

/// Waits until `word` differs from `old` and returns its new value: spin first, then sleep.
/// `sleeping` tells the waker that a futex wake is needed.
uint32_t wait_while_equal(std::atomic<uint32_t>& word, uint32_t old,
                          std::atomic<uint32_t>& sleeping) {
  uint32_t v = word.load(std::memory_order_acquire);
  if (v != old) return v;
  auto start = std::chrono::steady_clock::now();
  const auto spin = spin_time();
  for (int i = 1;; ++i) {
    cpu_relax();
    v = word.load(std::memory_order_acquire);
    if (v != old) return v;
    if ((i & 63) == 0 && std::chrono::steady_clock::now() - start > spin) break;
  }
  for (;;) {
    sleeping.store(1, std::memory_order_seq_cst);
    v = word.load(std::memory_order_seq_cst);
    if (v == old) futex_wait(&word, old);
    sleeping.store(0, std::memory_order_relaxed);
    v = word.load(std::memory_order_acquire);
    if (v != old) return v;
  }
}

/// Bumps `word` and wakes its sleeper, if any.
void signal(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleeping) {
  word.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping.load(std::memory_order_seq_cst)) futex_wake(&word, INT_MAX);
}

/// The thread count from KILN_NUM_THREADS, else the number of usable cores.
int32_t default_num_threads() {
  if (const char* env = std::getenv("KILN_NUM_THREADS"); env && *env) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);  // NOLINT(runtime/int)
    if (*end == '\0' && n >= 1) return static_cast<int32_t>(std::min<long>(n, kMaxThreads));
    std::fprintf(stderr,
                 "kiln: ignoring KILN_NUM_THREADS='%s' (expected a positive integer); using the "
                 "number of cores\n",
                 env);
  }
  int32_t n = static_cast<int32_t>(std::thread::hardware_concurrency());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int32_t allowed = CPU_COUNT(&set);
    if (allowed > 0 && (n <= 0 || allowed < n)) n = allowed;
  }
  return std::clamp(n, 1, kMaxThreads);
}

/// One worker's private wake-up word, on its own cache line.
struct alignas(64) WorkerSlot {
  std::atomic<uint32_t> gen{0};
  std::atomic<uint32_t> sleeping{0};
  /// Who owns the posted job: kIdle, kPosted (the dispatcher's offer), kRunning (the worker
  /// took it), kRevoked (the dispatcher took it back before the worker woke up).
  std::atomic<uint32_t> claim{0};
};
constexpr uint32_t kIdle = 0, kPosted = 1, kRunning = 2, kRevoked = 3;

class ThreadPool {
 public:
  ThreadPool() : requested_(default_num_threads()) {}

  /// The pool; created on first use and never freed.
  static ThreadPool& global() {
    static ThreadPool* pool = [] {
      auto* p = new ThreadPool();
      pthread_atfork([] { global().before_fork(); }, [] { global().after_fork_parent(); },
                     [] { global().after_fork_child(); });
      std::atexit([] { global().shutdown(); });
      return p;
    }();
    return *pool;
  }

  int32_t num_threads() const { return requested_.load(std::memory_order_relaxed); }
  void set_num_threads(int32_t n) {
    requested_.store(std::clamp(n, 1, kMaxThreads), std::memory_order_relaxed);
  }

  int32_t run(int64_t extent, KilnParallelLambda fn, void* closure) {
    if (extent <= 0) return 0;
    if (tl_in_parallel) return fn(0, extent, closure);
    std::lock_guard<std::mutex> lock(mu_);
    int32_t threads = shut_down_ ? 1 : ensure_workers();
    int64_t participants = std::min<int64_t>(threads, extent);
    if (participants <= 1) return run_inline(0, extent, fn, closure);

    fn_ = fn;
    closure_ = closure;
    extent_ = extent;
    nchunks_ = std::min<int64_t>(extent, participants * chunks_per_thread_setting());
    next_chunk_.store(0, std::memory_order_relaxed);
    first_error_.store(0, std::memory_order_relaxed);
    error_from_worker_ = false;
    pending_.store(static_cast<uint32_t>(participants - 1), std::memory_order_relaxed);
    for (int64_t i = 1; i < participants; ++i) {
      slots_[i - 1].claim.store(kPosted, std::memory_order_seq_cst);
      signal(slots_[i - 1].gen, slots_[i - 1].sleeping);
    }

    tl_in_parallel = true;
    try {
      run_chunks(/*from_worker=*/false);
    } catch (...) {
      // A C++ body threw on the caller: the workers still use the closure, so wait for them.
      tl_in_parallel = false;
      revoke_unstarted(participants - 1);
      wait_for_workers();
      throw;
    }
    tl_in_parallel = false;
    revoke_unstarted(participants - 1);
    wait_for_workers();
    int32_t rc = first_error_.load(std::memory_order_acquire);
    if (rc != 0 && error_from_worker_) kiln_set_last_error(error_message_.c_str());
    return rc;
  }

 private:
  static int32_t run_inline(int64_t begin, int64_t end, KilnParallelLambda fn, void* closure) {
    tl_in_parallel = true;
    int32_t rc = fn(begin, end, closure);
    tl_in_parallel = false;
    return rc;
  }

  /// Runs chunks of the current job until the shared counter passes the last one. A failing
  /// chunk records its code; the others still run.
  void run_chunks(bool from_worker) {
    for (;;) {
      int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
      if (c >= nchunks_) return;
      Range r = chunk_range(extent_, nchunks_, c);
      int32_t rc = fn_(r.begin, r.end, closure_);
      if (rc != 0) record_error(rc, from_worker);
    }
  }

  /// Once every chunk is taken, takes back the offers of workers that have not woken up yet
  /// (descheduled, or asleep in the kernel): the caller need not wait for them to wake.
  void revoke_unstarted(int64_t posted) {
    for (int64_t i = 0; i < posted; ++i) {
      uint32_t expected = kPosted;
      if (slots_[i].claim.compare_exchange_strong(expected, kRevoked, std::memory_order_seq_cst))
        pending_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  void wait_for_workers() {
    for (uint32_t p = pending_.load(std::memory_order_acquire); p != 0;) {
      p = wait_while_equal(pending_, p, caller_sleeping_);
    }
  }

  void record_error(int32_t rc, bool from_worker) {
    int32_t expected = 0;
    if (first_error_.compare_exchange_strong(expected, rc, std::memory_order_acq_rel)) {
      if (from_worker) {
        error_message_ = kiln_get_last_error();
        error_from_worker_ = true;
      }
    }
  }

  /// Makes the worker count match the requested thread count; returns the threads usable now.
  /// Requires mu_.
  int32_t ensure_workers() {
    int32_t want = requested_.load(std::memory_order_relaxed) - 1;
    if (want == static_cast<int32_t>(workers_.size())) return want + 1;
    stop_workers();
    slots_ = std::make_unique<WorkerSlot[]>(want);
    stop_ = false;
    for (int32_t i = 0; i < want; ++i) {
      try {
        workers_.emplace_back([this, i] { worker_loop(i); });
      } catch (const std::system_error&) {
        break;  // Out of threads: run with those we have.
      }
    }
    return static_cast<int32_t>(workers_.size()) + 1;
  }

  /// Stops and joins all workers. Requires mu_.
  void stop_workers() {
    stop_ = true;
    for (size_t i = 0; i < workers_.size(); ++i) signal(slots_[i].gen, slots_[i].sleeping);
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  void worker_loop(int32_t id) {
    tl_in_parallel = true;
    WorkerSlot& slot = slots_[id];
    uint32_t seen = 0;  // slots are fresh for each set of workers: a job may already be posted
    for (;;) {
      seen = wait_while_equal(slot.gen, seen, slot.sleeping);
      if (stop_) return;
      // The job's fields are read only once the offer is ours; a revoked (or stale) wake-up
      // goes back to waiting.
      uint32_t expected = kPosted;
      if (!slot.claim.compare_exchange_strong(expected, kRunning, std::memory_order_seq_cst))
        continue;
      run_chunks(/*from_worker=*/true);
      slot.claim.store(kIdle, std::memory_order_relaxed);
      if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
          caller_sleeping_.load(std::memory_order_seq_cst)) {
        futex_wake(&pending_, 1);
      }
    }
  }

  /// At exit: stop the workers unless a loop is running (then the process exit ends them; the
  /// pool's memory stays valid because it is never freed).
  void shutdown() {
    if (tl_in_parallel) return;
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return;
    stop_workers();
    shut_down_ = true;
  }

  void before_fork() {
    locked_for_fork_ = !tl_in_parallel;
    if (locked_for_fork_) mu_.lock();
  }
  void after_fork_parent() {
    if (locked_for_fork_) mu_.unlock();
  }
  /// The child has no workers: forget the parent's (without joining) and start afresh lazily.
  void after_fork_child() {
    new std::vector<std::thread>(std::move(workers_));  // Leaked on purpose: cannot be joined.
    workers_.clear();
    slots_.release();  // The parent's workers' slots; never touched again.
    caller_sleeping_.store(0);
    if (locked_for_fork_) mu_.unlock();
  }

  std::atomic<int32_t> requested_;
  std::mutex mu_;
  bool shut_down_ = false;  // after exit-time shutdown: run serially
  bool locked_for_fork_ = false;
  std::vector<std::thread> workers_;
  std::unique_ptr<WorkerSlot[]> slots_;
  std::atomic<bool> stop_{false};

  // The current job; written by the dispatcher before it signals the workers.
  KilnParallelLambda fn_ = nullptr;
  void* closure_ = nullptr;
  int64_t extent_ = 0;
  int64_t nchunks_ = 0;
  alignas(64) std::atomic<int64_t> next_chunk_{0};  ///< the next chunk to take
  alignas(64) std::atomic<uint32_t> pending_{0};
  std::atomic<uint32_t> caller_sleeping_{0};
  alignas(64) std::atomic<int32_t> first_error_{0};
  bool error_from_worker_ = false;
  std::string error_message_;
};

}  // namespace

Range chunk_range(int64_t extent, int64_t num_chunks, int64_t i) {
  KILN_ICHECK(num_chunks > 0 && i >= 0 && i < num_chunks) << "chunk " << i << " of " << num_chunks;
  int64_t base = extent / num_chunks, rem = extent % num_chunks;
  int64_t begin = i * base + std::min(i, rem);
  return {begin, begin + base + (i < rem ? 1 : 0)};
}

int64_t chunks_per_thread() { return chunks_per_thread_setting(); }
int32_t num_threads() { return ThreadPool::global().num_threads(); }
void set_num_threads(int32_t n) { ThreadPool::global().set_num_threads(n); }
int32_t parallel_for(int64_t extent, KilnParallelLambda fn, void* closure) {
  return ThreadPool::global().run(extent, fn, closure);
}
bool in_parallel_region() { return tl_in_parallel; }

}  // namespace kiln::runtime

extern "C" {

KILN_DLL int32_t kiln_parallel_for(int64_t extent, KilnParallelLambda fn, void* closure) {
  if (fn == nullptr) {
    kiln_set_last_error("kiln_parallel_for: the loop body is NULL");
    return -1;
  }
  return kiln::runtime::parallel_for(extent, fn, closure);
}
KILN_DLL int32_t kiln_get_num_threads(void) { return kiln::runtime::num_threads(); }
KILN_DLL void kiln_set_num_threads(int32_t n) { kiln::runtime::set_num_threads(n); }

}  // extern "C"
