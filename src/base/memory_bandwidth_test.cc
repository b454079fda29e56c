#include "base/memory_bandwidth.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>

#include "base/thread_pool.h"

namespace redline {
namespace {

TEST(MemoryBandwidthTest, ArraysAreFourTimesTheLastLevelCache) {
  const int64_t bytes = StreamArrayBytes();
  EXPECT_GE(bytes, int64_t{256} << 20);
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) {
    EXPECT_GE(bytes, 4 * static_cast<int64_t>(l3));
  }
}

TEST(MemoryBandwidthTest, EveryKernelReportsARate) {
  ThreadPool pool(2);
  // Small arrays keep the test quick; the rates are not checked beyond
  // being measured (a timed test would be noise on a shared machine).
  const BandwidthResult r = MeasureMemoryBandwidth(pool, int64_t{4} << 20, 1);
  EXPECT_GT(r.read_gbps, 0);
  EXPECT_GT(r.copy_gbps, 0);
  EXPECT_GT(r.triad_gbps, 0);
  EXPECT_GE(r.best_gbps(), r.read_gbps);
  EXPECT_GE(r.best_gbps(), r.copy_gbps);
  EXPECT_GE(r.best_gbps(), r.triad_gbps);
}

}  // namespace
}  // namespace redline
