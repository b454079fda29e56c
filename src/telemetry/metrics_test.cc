#include "telemetry/metrics.h"

#include <gtest/gtest.h>

#include <thread>

#include "telemetry/process_metrics.h"

namespace redline::telemetry {
namespace {

TEST(MetricsTest, CounterAndGaugeRender) {
  Registry r;
  auto& c = r.AddCounter("redline:requests_total", "Requests.",
                         {"model_name", "code"});
  c.Labels({"m", "200"}).Increment();
  c.Labels({"m", "200"}).Increment(2);
  c.Labels({"m", "429"}).Increment();
  c.Labels({"m", "429"}).Increment(-5);  // ignored
  auto& g = r.AddGauge("redline:waiting", "Waiting \"requests\"\nnow.");
  g.Labels({}).Set(3.5);
  const std::string text = r.RenderText();
  EXPECT_NE(text.find("# HELP redline:requests_total Requests.\n# TYPE "
                      "redline:requests_total counter\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("redline:requests_total{model_name=\"m\",code=\"200\"} 3\n"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("redline:requests_total{model_name=\"m\",code=\"429\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("# HELP redline:waiting Waiting \"requests\"\\nnow.\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("redline:waiting 3.5\n"), std::string::npos) << text;
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  Registry r;
  r.AddGauge("g", "G.", {"l"}).Labels({"a\"b\\c\nd"}).Set(1);
  EXPECT_NE(r.RenderText().find("g{l=\"a\\\"b\\\\c\\nd\"} 1\n"),
            std::string::npos)
      << r.RenderText();
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndInclusive) {
  Registry r;
  auto& h = r.AddHistogram("lat_seconds", "Latency.", {"m"}, {0.1, 1, 2})
                .Labels({"x"});
  h.Observe(0.05);
  h.Observe(0.1);  // le is inclusive
  h.Observe(1.5);
  h.Observe(10);
  const std::string text = r.RenderText();
  EXPECT_NE(text.find("lat_seconds_bucket{m=\"x\",le=\"0.1\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lat_seconds_bucket{m=\"x\",le=\"1\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lat_seconds_bucket{m=\"x\",le=\"2\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lat_seconds_bucket{m=\"x\",le=\"+Inf\"} 4\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lat_seconds_sum{m=\"x\"} 11.65\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("lat_seconds_count{m=\"x\"} 4\n"), std::string::npos)
      << text;
}

TEST(MetricsTest, ConcurrentUpdatesAreNotLost) {
  Registry r;
  auto& c = r.AddCounter("c_total", "C.").Labels({});
  auto& h = r.AddHistogram("h", "H.", {}, {1}).Labels({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Increment();
        h.Observe(0.5);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 40000);
  EXPECT_EQ(h.Collect().count, 40000u);
}

TEST(MetricsTest, CollectorsRunBeforeRender) {
  Registry r;
  auto& g = r.AddGauge("g", "G.").Labels({});
  int calls = 0;
  r.AddCollector([&] { g.Set(++calls); });
  EXPECT_NE(r.RenderText().find("g 1\n"), std::string::npos);
  EXPECT_NE(r.RenderText().find("g 2\n"), std::string::npos);
}

TEST(MetricsTest, FormatMetricValue) {
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(2), "2");
  EXPECT_EQ(FormatMetricValue(1.0 / 0.0), "+Inf");
}

TEST(ProcessMetricsTest, ReadsProc) {
  auto s = ReadProcessStats();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_GT(s->resident_bytes, 1 << 20);
  EXPECT_GE(s->cpu_seconds, 0);
  EXPECT_GT(s->open_fds, 2);
  EXPECT_GT(s->start_time_seconds, 1.6e9);
}

TEST(MetricsDeathTest, DuplicateNameIsABug) {
  Registry r;
  r.AddGauge("g", "G.");
  EXPECT_DEATH(r.AddGauge("g", "again"), "registered twice");
}

}  // namespace
}  // namespace redline::telemetry
