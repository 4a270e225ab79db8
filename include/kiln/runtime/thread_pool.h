/// \file thread_pool.h
/// \brief The runtime's thread pool: the C++ face of `kiln_parallel_for`.
///
/// One process-wide pool runs parallel loops. A call with T = min(num_threads(), extent)
/// participants splits [0, extent) into min(extent, T · chunks_per_thread()) contiguous,
/// near-equal chunks (chunk_range()); the calling thread and T − 1 workers take chunks from a
/// shared counter until none is left (a thread slowed down by another process on its core
/// takes fewer), and once all are taken the caller withdraws the offer from workers that have
/// not woken up yet instead of waiting for them. Idle workers spin for a while (KILN_SPIN_US),
/// then sleep on a futex, so an idle pool costs no CPU. A call made from inside a
/// running chunk (a nested loop) runs inline and serially on the calling thread. Calls from
/// several threads at once are serialized. The pool is started lazily on the first parallel
/// call, is re-created in a child after fork(), and its workers are stopped at process exit.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>

#include "kiln/runtime/c_runtime_api.h"

namespace kiln::runtime {

/// A half-open range of loop iterations [begin, end).
struct Range {
  int64_t begin = 0;  ///< first iteration
  int64_t end = 0;    ///< one past the last iteration
};

/// The `i`-th of `num_chunks` contiguous chunks of [0, extent). The first extent % num_chunks
/// chunks hold one iteration more than the others. Requires 0 <= i < num_chunks.
Range chunk_range(int64_t extent, int64_t num_chunks, int64_t i);

/// Chunks per participating thread of a parallel loop: KILN_CHUNKS_PER_THREAD (1 to 1024; 1 is
/// a static split, one chunk per thread) if set, else 4.
int64_t chunks_per_thread();

/// Number of threads parallel loops use (the caller included): KILN_NUM_THREADS if it is set
/// to a positive integer, otherwise the number of cores this process may run on.
int32_t num_threads();

/// Sets the number of threads parallel loops use; values below 1 mean 1. Takes effect at the
/// next parallel loop (workers are re-created then). Safe to call from any thread.
void set_num_threads(int32_t n);

/// Runs `fn(begin, end, closure)` over the chunks of [0, extent) on the pool and waits for all
/// of them. Returns 0, or the first non-zero code a chunk returned; in that case the calling
/// thread's last error (kiln_get_last_error) holds the message that chunk set, even when the
/// chunk ran on a worker thread. extent <= 0 runs nothing and returns 0.
int32_t parallel_for(int64_t extent, KilnParallelLambda fn, void* closure);

/// True while the calling thread runs a chunk of a parallel loop (or is a pool worker).
bool in_parallel_region();

namespace detail {
/// Closure of the C++ parallel_for below: the body and the first exception it threw.
template <typename F>
struct ParallelBody {
  F* body;
  std::atomic<bool> failed{false};
  std::exception_ptr error;

  static int32_t run(int64_t begin, int64_t end, void* self) {
    auto* p = static_cast<ParallelBody*>(self);
    try {
      (*p->body)(begin, end);
      return 0;
    } catch (...) {
      if (!p->failed.exchange(true)) p->error = std::current_exception();
      return -1;
    }
  }
};
}  // namespace detail

/// Runs `body(begin, end)` over the chunks of [0, extent) on the pool. If a chunk throws, the
/// other chunks still finish and the first exception is rethrown on the calling thread.
template <typename F, typename = std::enable_if_t<std::is_invocable_v<F&, int64_t, int64_t>>>
void parallel_for(int64_t extent, F&& body) {
  using Body = std::remove_reference_t<F>;
  detail::ParallelBody<Body> closure{&body};
  parallel_for(extent, &detail::ParallelBody<Body>::run, &closure);
  if (closure.error) std::rethrow_exception(closure.error);
}

}  // namespace kiln::runtime
