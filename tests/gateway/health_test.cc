// Health state, retry budget, TTFT window and durations: pure state
// machines driven by a fake clock.
#include <gtest/gtest.h>

#include "gateway/duration.h"
#include "gateway/latency_window.h"
#include "gateway/retry_budget.h"
#include "gateway/upstream_health.h"

namespace redline::gateway {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

HealthOptions Options() {
  HealthOptions o;
  o.healthy_threshold = 2;
  o.unhealthy_threshold = 2;
  o.consecutive_failures = 3;
  o.base_ejection_ms = 1000;
  o.max_ejection_ms = 5000;
  return o;
}

TEST(UpstreamHealthTest, ProbedUpstreamStartsDownUntilProbesPass) {
  UpstreamHealth h(Options(), /*probed=*/true);
  EXPECT_FALSE(h.Routable(0));
  EXPECT_FALSE(h.RecordProbe(true, 0));  // 1 of 2
  EXPECT_TRUE(h.RecordProbe(true, 0));
  EXPECT_TRUE(h.Routable(0));
  EXPECT_FALSE(h.RecordProbe(false, 0));
  EXPECT_TRUE(h.RecordProbe(false, 0));
  EXPECT_FALSE(h.Routable(0));
  EXPECT_TRUE(UpstreamHealth(Options(), false).Routable(0));
}

TEST(UpstreamHealthTest, ConsecutiveFailuresEjectWithDoublingCoolDown) {
  UpstreamHealth h(Options(), false);
  int64_t t = 10 * kS;
  EXPECT_FALSE(h.RecordFailure(t, true));
  h.RecordSuccess();  // resets the streak
  EXPECT_FALSE(h.RecordFailure(t, true));
  EXPECT_FALSE(h.RecordFailure(t, true));
  EXPECT_TRUE(h.RecordFailure(t, true));
  EXPECT_FALSE(h.Routable(t + 999 * kMs));
  EXPECT_TRUE(h.Routable(t + 1000 * kMs));
  // Fails again right after: 2 s, then 4 s, then capped at 5 s.
  int64_t expect_ms[] = {2000, 4000, 5000, 5000};
  for (int64_t ms : expect_ms) {
    t = h.available_at_ns();
    for (int i = 0; i < 3; ++i) h.RecordFailure(t, true);
    EXPECT_TRUE(h.ejected(t));
    EXPECT_EQ(h.available_at_ns() - t, ms * kMs);
  }
}

TEST(UpstreamHealthTest, QuietTimeForgivesEjections) {
  UpstreamHealth h(Options(), false);
  int64_t t = 0;
  for (int round = 0; round < 3; ++round) {
    t = h.available_at_ns();
    for (int i = 0; i < 3; ++i) h.RecordFailure(t, true);
  }
  EXPECT_EQ(h.ejection_level(), 3);
  // Ten base periods without an ejection: back to the first level.
  t = h.available_at_ns() + 10 * kS;
  for (int i = 0; i < 3; ++i) h.RecordFailure(t, true);
  EXPECT_EQ(h.ejection_level(), 1);
  EXPECT_EQ(h.available_at_ns() - t, 1000 * kMs);
}

TEST(UpstreamHealthTest, LastRoutableUpstreamIsNeverEjected) {
  UpstreamHealth h(Options(), false);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(h.RecordFailure(0, false));
  EXPECT_TRUE(h.Routable(0));
}

TEST(UpstreamHealthTest, BackoffIsNotAnEjection) {
  UpstreamHealth h(Options(), false);
  h.RecordFailure(0, true);
  h.RecordBackoff(0, 2000);
  EXPECT_TRUE(h.backed_off(1 * kS));
  EXPECT_FALSE(h.Routable(1 * kS));
  EXPECT_TRUE(h.Routable(2 * kS));
  EXPECT_FALSE(h.ejected(0));
  EXPECT_EQ(h.ejection_level(), 0);
  EXPECT_EQ(h.consecutive_failures(), 1);
}

TEST(UpstreamHealthTest, ComingBackFromProbesClearsTheStreak) {
  UpstreamHealth h(Options(), true);
  h.RecordProbe(true, 0);
  h.RecordProbe(true, 0);
  h.RecordFailure(0, true);
  h.RecordFailure(0, true);
  h.RecordProbe(false, 0);
  h.RecordProbe(false, 0);
  h.RecordProbe(true, 0);
  h.RecordProbe(true, 0);
  EXPECT_EQ(h.consecutive_failures(), 0);
}

TEST(RetryBudgetTest, FloorThenRatioOverTheWindow) {
  RetryBudgetOptions o;
  o.ratio = 0.2;
  o.min_per_s = 1;
  o.window_ms = 10'000;
  RetryBudget b(o);
  int64_t t = 100 * kS;
  // No traffic: the floor (1/s over 10 s) allows 10.
  int allowed = 0;
  for (int i = 0; i < 50; ++i) allowed += b.TryAcquire(t) ? 1 : 0;
  EXPECT_EQ(allowed, 10);
  // 1000 requests: 20 % = 200 in all, 190 more.
  for (int i = 0; i < 1000; ++i) b.RecordRequest(t);
  allowed = 0;
  for (int i = 0; i < 500; ++i) allowed += b.TryAcquire(t) ? 1 : 0;
  EXPECT_EQ(allowed, 190);
  EXPECT_EQ(b.retries(t), 200);
  // After the window the old traffic and retries are gone.
  t += 11 * kS;
  EXPECT_EQ(b.requests(t), 0);
  EXPECT_EQ(b.retries(t), 0);
  EXPECT_TRUE(b.TryAcquire(t));
}

TEST(LatencyWindowTest, NearestRankQuantiles) {
  LatencyWindow w(100, 1);
  EXPECT_EQ(w.Quantile(0.95), 0);  // too few samples
  for (int i = 1; i <= 100; ++i) w.Add(i);
  EXPECT_EQ(w.Quantile(0.95), 95);
  EXPECT_EQ(w.Quantile(0.5), 50);
  EXPECT_EQ(w.Quantile(0), 1);
  EXPECT_EQ(w.Quantile(1), 100);
  for (int i = 0; i < 100; ++i) w.Add(1000);  // the window slides
  EXPECT_EQ(w.Quantile(0.5), 1000);
}

TEST(DurationTest, UnitsAreRequired) {
  EXPECT_EQ(*ParseDurationMs("250ms"), 250);
  EXPECT_EQ(*ParseDurationMs("2s"), 2000);
  EXPECT_EQ(*ParseDurationMs("1.5s"), 1500);
  EXPECT_EQ(*ParseDurationMs("1m"), 60000);
  EXPECT_EQ(*ParseDurationMs("500us"), 1);
  EXPECT_EQ(*ParseDurationMs("0"), 0);
  EXPECT_FALSE(ParseDurationMs("30").ok());
  EXPECT_FALSE(ParseDurationMs("-1s").ok());
  EXPECT_FALSE(ParseDurationMs("2 weeks").ok());
  EXPECT_FALSE(ParseDurationMs("").ok());
  EXPECT_NE(ParseDurationMs("30").status().message().find("unit"),
            std::string::npos);
  EXPECT_EQ(FormatDurationMs(1500), "1.5s");
  EXPECT_EQ(FormatDurationMs(250), "250ms");
  EXPECT_EQ(FormatDurationMs(60000), "60s");
}

}  // namespace
}  // namespace redline::gateway
