#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace redline {
namespace {

TEST(ThreadPoolTest, ParallelForCoversRangeExactlyOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1000}) {
      for (int64_t grain : {1, 4, 32}) {
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, grain, [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), 1) << threads << " " << n;
      }
    }
  }
}

TEST(ThreadPoolTest, ChunksPerThreadSetsTheNumberOfContiguousChunks) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (int64_t per_thread : {1, 2, 4}) {
      for (int64_t n : {1, 5, 100, 1001}) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<int64_t> calls{0};
        pool.ParallelFor(
            n, 4,
            [&](int64_t b, int64_t e, int) {
              calls++;
              EXPECT_LT(b, e);
              EXPECT_EQ(b % 4, 0);
              for (int64_t i = b; i < e; ++i) hits[i]++;
            },
            per_thread);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n;
        const int64_t units = (n + 3) / 4;
        EXPECT_EQ(calls.load(), std::min(units, per_thread * threads))
            << threads << " threads, " << per_thread << " per thread, n=" << n;
      }
    }
  }
}

TEST(ThreadPoolTest, RunCallsEveryThreadAndManyJobsInARow) {
  ThreadPool pool(3);
  std::atomic<int> total{0};
  for (int job = 0; job < 2000; ++job) {
    pool.Run([&](int t) { total += t + 1; });
  }
  EXPECT_EQ(total.load(), 2000 * (1 + 2 + 3));
}

TEST(ThreadPoolTest, BusyTimeCountsTheJobsOfEveryThread) {
  using namespace std::chrono;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const int64_t before = pool.busy_ns();
    const auto t0 = steady_clock::now();
    // 8 units of 2 ms of sleep: at least 16 ms of job time in all.
    pool.ParallelFor(8, 1, [](int64_t b, int64_t e, int) {
      std::this_thread::sleep_for(milliseconds(2 * (e - b)));
    });
    pool.Run([](int) { std::this_thread::sleep_for(milliseconds(2)); });
    const int64_t wall =
        duration_cast<nanoseconds>(steady_clock::now() - t0).count();
    const int64_t busy = pool.busy_ns() - before;
    EXPECT_GE(busy, (16 + 2 * threads) * 1'000'000) << threads;
    // No thread is busy for longer than the calls lasted.
    EXPECT_LE(busy, threads * wall + 1'000'000) << threads;
  }
}

TEST(ThreadPoolTest, PhysicalCoresPositive) {
  EXPECT_GE(PhysicalCoreCount(), 1);
}

}  // namespace
}  // namespace redline
