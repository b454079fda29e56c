#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

TEST(ThreadPoolTest, RunCallsEveryThreadAndManyJobsInARow) {
  ThreadPool pool(3);
  std::atomic<int> total{0};
  for (int job = 0; job < 2000; ++job) {
    pool.Run([&](int t) { total += t + 1; });
  }
  EXPECT_EQ(total.load(), 2000 * (1 + 2 + 3));
}

TEST(ThreadPoolTest, PhysicalCoresPositive) {
  EXPECT_GE(PhysicalCoreCount(), 1);
}

}  // namespace
}  // namespace redline
