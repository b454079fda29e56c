#include "base/logging.h"

#include <gtest/gtest.h>

namespace redline {
namespace {

TEST(LoggingTest, TimestampIsUtcIso8601WithMilliseconds) {
  // 2026-01-31T12:34:56.789Z
  const auto t = std::chrono::system_clock::time_point(
      std::chrono::milliseconds(1769862896789LL));
  EXPECT_EQ(LogTimestamp(t), "2026-01-31T12:34:56.789Z");
}

TEST(LoggingTest, LinesCarryTheTimestampWhenOn) {
  testing::internal::CaptureStderr();
  SetLogTimestamps(true);
  RL_LOG(kWarning, "hello {}", 1);
  SetLogTimestamps(false);
  RL_LOG(kWarning, "plain");
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_GE(err.size(), 25u);
  EXPECT_EQ(err[4], '-');
  EXPECT_EQ(err.substr(23, 19), "Z [W] hello 1\n[W] p") << err;
}

}  // namespace
}  // namespace redline
