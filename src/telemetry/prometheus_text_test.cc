// The Prometheus text reader (moved here from the bench with its tests).
#include "telemetry/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace redline::telemetry {
namespace {

TEST(PrometheusTextTest, ParsesSamplesAndCountsMalformedLines) {
  int bad = 0;
  auto samples = ParsePrometheusText(
      "# HELP x help\n# TYPE x gauge\nx "
      "1.5\nqueue_depth{model=\"a,b}\",gpu=\"0\"} 3 1700000000\n"
      "process_cpu_seconds_total 12.25\nbroken{ 1\nnan_metric NaN\n",
      &bad);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].name, "x");
  EXPECT_DOUBLE_EQ(samples[0].value, 1.5);
  EXPECT_EQ(samples[1].labels, "model=\"a,b}\",gpu=\"0\"");
  EXPECT_DOUBLE_EQ(samples[1].value, 3);
  EXPECT_TRUE(std::isnan(samples[3].value));
  EXPECT_EQ(bad, 1);
}

TEST(PrometheusTextTest, ParsesLabelsWithQuotesAndEscapes) {
  auto l = ParseLabels("model_name=\"a,b\",handle=\"x\\\"y\",le=\"+Inf\"");
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].second, "a,b");
  EXPECT_EQ(l[1].first, "handle");
  EXPECT_EQ(l[1].second, "x\"y");
  EXPECT_EQ(l[2].first, "le");
  EXPECT_EQ(l[2].second, "+Inf");
  // Malformed: what came before it is kept.
  EXPECT_EQ(ParseLabels("a=\"1\",=\"2\",b=\"3\"").size(), 1u);
  EXPECT_EQ(ParseLabels("a=\"1\",b=\"unterminated").size(), 1u);
}

TEST(PrometheusTextTest, ReadsInfinitiesAndSkipsNamelessLines) {
  int bad = 0;
  auto samples =
      ParsePrometheusText("a +Inf\nb -Inf\n{x=\"1\"} 2\nc notanumber\n", &bad);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_TRUE(std::isinf(samples[0].value) && samples[0].value > 0);
  EXPECT_TRUE(std::isinf(samples[1].value) && samples[1].value < 0);
  EXPECT_EQ(bad, 2);
}

}  // namespace
}  // namespace redline::telemetry
