// The thread pool behind kiln_parallel_for: sums against a reference for several extents and
// thread counts, exact coverage of the range by near-equal chunks, nested loops, error codes
// and messages from worker threads, the C++ wrapper's exception, the thread-count setting, and
// the per-thread last error.
#include "kiln/runtime/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime/c_runtime_api.h"

namespace kiln::runtime {
namespace {

/// Restores the thread count a test changed.
class ThreadPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = kiln_get_num_threads(); }
  void TearDown() override { kiln_set_num_threads(saved_); }
  int32_t saved_ = 1;
};

struct SumClosure {
  std::atomic<int64_t> sum{0};
  std::atomic<int32_t> calls{0};
};

int32_t sum_body(int64_t begin, int64_t end, void* p) {
  auto* c = static_cast<SumClosure*>(p);
  int64_t s = 0;
  for (int64_t i = begin; i < end; ++i) s += i + 1;
  c->sum += s;
  c->calls++;
  return 0;
}

TEST_F(ThreadPoolTest, SumMatchesReference) {
  for (int32_t threads : {1, 2, 4}) {
    kiln_set_num_threads(threads);
    ASSERT_EQ(kiln_get_num_threads(), threads);
    for (int64_t extent : {0, 1, 7, 1000}) {
      for (int rep = 0; rep < 20; ++rep) {
        SumClosure c;
        ASSERT_EQ(kiln_parallel_for(extent, sum_body, &c), 0);
        ASSERT_EQ(c.sum.load(), extent * (extent + 1) / 2) << threads << " " << extent;
        const int64_t participants = std::min<int64_t>(threads, extent);
        const int64_t chunks = participants <= 1
                                   ? participants
                                   : std::min<int64_t>(extent, participants * chunks_per_thread());
        ASSERT_EQ(c.calls.load(), chunks) << threads << " " << extent;
      }
    }
  }
}

struct CoverClosure {
  std::vector<std::atomic<int32_t>> hits;
  std::atomic<int64_t> min_len{INT64_MAX}, max_len{0};
  explicit CoverClosure(int64_t n) : hits(n) {}
};

int32_t cover_body(int64_t begin, int64_t end, void* p) {
  auto* c = static_cast<CoverClosure*>(p);
  for (int64_t i = begin; i < end; ++i) c->hits[i]++;
  int64_t len = end - begin;
  for (int64_t m = c->min_len; len < m && !c->min_len.compare_exchange_weak(m, len);) {
  }
  for (int64_t m = c->max_len; len > m && !c->max_len.compare_exchange_weak(m, len);) {
  }
  return 0;
}

TEST_F(ThreadPoolTest, ChunksCoverRangeOnce) {
  for (int32_t threads : {1, 2, 3, 4, 8}) {
    kiln_set_num_threads(threads);
    for (int64_t extent : {1, 2, 7, 8, 9, 1000, 1001}) {
      CoverClosure c(extent);
      ASSERT_EQ(kiln_parallel_for(extent, cover_body, &c), 0);
      for (int64_t i = 0; i < extent; ++i) ASSERT_EQ(c.hits[i].load(), 1) << i;
      EXPECT_LE(c.max_len - c.min_len, 1) << threads << " " << extent;  // near-equal
    }
  }
}

TEST(ChunkRange, Split) {
  // 10 over 4: 3, 3, 2, 2.
  EXPECT_EQ(chunk_range(10, 4, 0).begin, 0);
  EXPECT_EQ(chunk_range(10, 4, 0).end, 3);
  EXPECT_EQ(chunk_range(10, 4, 1).end, 6);
  EXPECT_EQ(chunk_range(10, 4, 2).end, 8);
  EXPECT_EQ(chunk_range(10, 4, 3).begin, 8);
  EXPECT_EQ(chunk_range(10, 4, 3).end, 10);
}

TEST_F(ThreadPoolTest, NestedLoopsRunInline) {
  kiln_set_num_threads(4);
  std::vector<std::atomic<int64_t>> rows(16);
  std::atomic<bool> nested_was_inline{true};
  parallel_for(16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      std::thread::id me = std::this_thread::get_id();
      parallel_for(100, [&](int64_t b2, int64_t e2) {
        if (std::this_thread::get_id() != me || b2 != 0 || e2 != 100) nested_was_inline = false;
        for (int64_t i = b2; i < e2; ++i) rows[r] += r * i;
      });
    }
  });
  for (int64_t r = 0; r < 16; ++r) EXPECT_EQ(rows[r].load(), r * 4950);
  EXPECT_TRUE(nested_was_inline.load());
}

int32_t fail_body(int64_t begin, int64_t end, void*) {
  // Fails only in the chunk holding iteration 900: with 4 threads a worker runs it.
  if (begin <= 900 && 900 < end) {
    kiln_set_last_error("chunk with iteration 900 failed");
    return 7;
  }
  return 0;
}

TEST_F(ThreadPoolTest, ErrorCodeAndMessagePropagate) {
  for (int32_t threads : {1, 2, 4}) {
    kiln_set_num_threads(threads);
    kiln_set_last_error("");
    EXPECT_EQ(kiln_parallel_for(1000, fail_body, nullptr), 7) << threads;
    EXPECT_STREQ(kiln_get_last_error(), "chunk with iteration 900 failed") << threads;
  }
  // The pool still works after an error.
  SumClosure c;
  EXPECT_EQ(kiln_parallel_for(100, sum_body, &c), 0);
  EXPECT_EQ(c.sum.load(), 5050);
  EXPECT_EQ(kiln_parallel_for(10, nullptr, nullptr), -1);
  EXPECT_NE(std::string(kiln_get_last_error()).find("NULL"), std::string::npos);
}

TEST_F(ThreadPoolTest, CppWrapperRethrows) {
  kiln_set_num_threads(4);
  std::atomic<int64_t> done{0};
  EXPECT_THROW(parallel_for(1000,
                            [&](int64_t b, int64_t e) {
                              if (b <= 500 && 500 < e) throw std::runtime_error("boom");
                              done += e - b;
                            }),
               std::runtime_error);
  // Every other chunk still ran.
  const int64_t chunks = std::min<int64_t>(1000, 4 * chunks_per_thread());
  int64_t failed_len = 0;
  for (int64_t i = 0; i < chunks; ++i) {
    Range r = chunk_range(1000, chunks, i);
    if (r.begin <= 500 && 500 < r.end) failed_len = r.end - r.begin;
  }
  EXPECT_EQ(done.load(), 1000 - failed_len);
}

TEST_F(ThreadPoolTest, SlowThreadTakesFewerChunks) {
  // One chunk stalls for 300 ms (as if its core were taken by another process): with chunks
  // taken from a shared counter the other thread runs all the rest meanwhile, instead of the
  // half a static split would leave waiting behind the stalled one.
  if (chunks_per_thread() < 2) GTEST_SKIP() << "KILN_CHUNKS_PER_THREAD=1 (static split)";
  kiln_set_num_threads(2);
  const int64_t extent = 2 * chunks_per_thread();  // one iteration per chunk
  std::vector<std::thread::id> ran(static_cast<size_t>(extent));
  parallel_for(extent, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      ran[static_cast<size_t>(i)] = std::this_thread::get_id();
      if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
  int64_t by_staller = 0;
  for (const auto& id : ran) by_staller += id == ran[0];
  EXPECT_EQ(by_staller, 1) << "the thread that stalled on chunk 0 also ran " << by_staller - 1
                           << " of the other " << extent - 1 << " chunks";
}

TEST_F(ThreadPoolTest, ManyShortLoops) {
  // Short loops back to back: the caller often takes every chunk before a worker wakes up and
  // withdraws that worker's offer; a late worker must neither run a chunk twice nor touch the
  // next loop's job.
  kiln_set_num_threads(2);
  for (int rep = 0; rep < 2000; ++rep) {
    SumClosure c;
    ASSERT_EQ(kiln_parallel_for(8, sum_body, &c), 0);
    ASSERT_EQ(c.sum.load(), 36);
  }
}

TEST_F(ThreadPoolTest, SetAndGetNumThreads) {
  EXPECT_GE(kiln_get_num_threads(), 1);
  kiln_set_num_threads(3);
  EXPECT_EQ(kiln_get_num_threads(), 3);
  EXPECT_EQ(num_threads(), 3);
  kiln_set_num_threads(0);
  EXPECT_EQ(kiln_get_num_threads(), 1);
  kiln_set_num_threads(-5);
  EXPECT_EQ(kiln_get_num_threads(), 1);
}

TEST_F(ThreadPoolTest, ConcurrentCallers) {
  kiln_set_num_threads(3);
  std::vector<std::thread> callers;
  std::atomic<int32_t> bad{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) {
        SumClosure c;
        if (kiln_parallel_for(1000, sum_body, &c) != 0 || c.sum != 500500) bad++;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(ThreadPoolTest, WorksInForkedChild) {
  kiln_set_num_threads(4);
  SumClosure warm;
  ASSERT_EQ(kiln_parallel_for(1000, sum_body, &warm), 0);  // the parent's workers exist now
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    SumClosure c;
    int32_t rc = kiln_parallel_for(1000, sum_body, &c);
    _exit(rc == 0 && c.sum == 500500 && c.calls == std::min<int64_t>(1000, 4 * chunks_per_thread())
              ? 0
              : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  SumClosure c;
  EXPECT_EQ(kiln_parallel_for(1000, sum_body, &c), 0);
  EXPECT_EQ(c.sum.load(), 500500);
}

TEST(LastError, IsThreadLocal) {
  kiln_set_last_error("main thread error");
  std::string seen_in_other;
  std::thread t([&] {
    seen_in_other = kiln_get_last_error();
    kiln_set_last_error("other thread error");
  });
  t.join();
  EXPECT_EQ(seen_in_other, "");
  EXPECT_STREQ(kiln_get_last_error(), "main thread error");
  kiln_set_last_error(nullptr);
  EXPECT_STREQ(kiln_get_last_error(), "");
}

}  // namespace
}  // namespace kiln::runtime
