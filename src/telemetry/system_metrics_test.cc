#include "telemetry/system_metrics.h"

#include <gtest/gtest.h>

namespace redline::telemetry {
namespace {

TEST(SystemMetricsTest, ParsesProcFiles) {
  auto cpu = ParseProcStat(
      "cpu  100 5 50 800 20 1 2 3 0 0\ncpu0 50 2 25 400 10 0 1 1 0 0\n");
  ASSERT_TRUE(cpu.has_value());
  EXPECT_EQ(cpu->total, 981u);
  EXPECT_EQ(cpu->idle, 820u);
  EXPECT_FALSE(ParseProcStat("intr 1 2 3").has_value());

  EXPECT_EQ(ParseSwapIn("pgpgin 5\npswpin 42\npswpout 7\n"), 42);
  EXPECT_FALSE(ParseSwapIn("pgpgin 5\n").has_value());

  auto mem = ParseMemInfo(
      "MemTotal:       24000000 kB\nMemFree: 100 kB\n"
      "MemAvailable:   20000000 kB\n");
  ASSERT_TRUE(mem.has_value());
  EXPECT_EQ(mem->total_bytes, int64_t{24000000} * 1024);
  EXPECT_EQ(mem->available_bytes, int64_t{20000000} * 1024);

  EXPECT_EQ(ParseCgroupBytes("1073741824\n"), 1073741824);
  EXPECT_FALSE(ParseCgroupBytes("max\n").has_value());
  EXPECT_FALSE(ParseCgroupBytes("9223372036854771712\n").has_value());

  EXPECT_EQ(ParsePressureTotalUs(
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=123456\n"
                "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
            123456);
}

TEST(SystemMetricsTest, SamplerGivesUtilisationsAfterTheFirstSample) {
  SystemSampler s;
  SystemSample first = s.Sample();
  EXPECT_LT(first.system_cpu_utilization, 0);  // no interval yet
  volatile double x = 0;
  for (int i = 0; i < 20'000'000; ++i) x = x + 1e-9 * i;  // burn some CPU
  SystemSample second = s.Sample();
  EXPECT_GE(second.process_cpu_utilization, 0);
  EXPECT_LE(second.process_cpu_utilization, 1);
  EXPECT_GT(second.memory_limit_bytes, 0);
  EXPECT_GT(second.memory_used_bytes, 0);
}

TEST(SystemMetricsTest, RegistersTheSeries) {
  Registry r;
  RegisterSystemMetrics(r, "redline_");
  const std::string text = r.RenderText();
  for (const char* name :
       {"redline_system_cpu_utilization", "redline_process_cpu_utilization",
        "redline_memory_used_bytes", "redline_memory_limit_bytes",
        "redline_swap_in_pages_total"})
    EXPECT_NE(text.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace redline::telemetry
