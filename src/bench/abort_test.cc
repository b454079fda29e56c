#include "bench/abort.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/record.h"
#include "bench/threshold.h"

namespace redline::bench {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;

Threshold One(const char* expression) {
  auto ts = ParseThresholds(expression);
  EXPECT_TRUE(ts.ok()) << ts.status().ToString();
  EXPECT_EQ(ts->size(), 1u);
  return ts->front();
}

// A finished measured request: ok with the given E2E (one chunk), or failed.
RequestRecord Req(int64_t e2e_ms, ErrorClass error = ErrorClass::kNone) {
  RequestRecord r;
  r.phase = Phase::kMeasure;
  r.t_sched_ns = 10 * kSec;
  r.t_send_ns = 10 * kSec;
  r.error = error;
  if (error == ErrorClass::kNone) {
    r.t_first_ns = r.t_last_ns = r.t_send_ns + e2e_ms * kMs;
    r.chunk_ns = {r.t_first_ns};
    r.output_tokens = 1;
  }
  r.t_end_ns = r.t_send_ns + e2e_ms * kMs;
  return r;
}

TEST(AbortParseTest, SuffixAndDelay) {
  auto ts =
      ParseThresholds("e2e: p(99)<3s abort(30s), p(50)<1s, max<10s abort");
  ASSERT_TRUE(ts.ok()) << ts.status().ToString();
  ASSERT_EQ(ts->size(), 3u);
  EXPECT_TRUE((*ts)[0].abort_on_fail);
  EXPECT_EQ((*ts)[0].abort_delay_ns, 30 * kSec);
  EXPECT_DOUBLE_EQ((*ts)[0].value, 3e6);
  EXPECT_FALSE((*ts)[1].abort_on_fail);
  EXPECT_TRUE((*ts)[2].abort_on_fail);
  EXPECT_EQ((*ts)[2].abort_delay_ns, kDefaultAbortDelayNs);
  EXPECT_EQ((*ts)[2].aggregation, Aggregation::kMax);

  // "abort" is also an error-class key: only a trailing word is the option.
  Threshold a = One("abort: rate<1%");
  EXPECT_FALSE(a.abort_on_fail);
  EXPECT_EQ(a.metric_key, "abort");
  a = One("abort: count<3 abort(0s)");
  EXPECT_TRUE(a.abort_on_fail);
  EXPECT_EQ(a.abort_delay_ns, 0);

  EXPECT_FALSE(ParseThresholds("good_fraction: value>=99% abort")
                   .ok());  // scalars cannot abort
  EXPECT_FALSE(ParseThresholds("ttft{phase:cold}: max<5s abort")
                   .ok());  // only the measurement phase
  // Delay needs a unit.
  EXPECT_FALSE(ParseThresholds("errors: rate<1% abort(10)").ok());
  EXPECT_FALSE(ParseThresholds("errors: rate<1% abort 10s").ok());
}

TEST(AbortDecisionTest, FailingValueWaitsForTheDelay) {
  const Threshold t = One("errors: rate<10% abort(5s)");
  AbortMonitor m({t}, /*planned_total=*/-1);
  ASSERT_FALSE(m.empty());
  EXPECT_FALSE(m.Check(60 * kSec));  // nothing finished: no decision
  m.Add(Req(0, ErrorClass::kHttp5xx));
  m.Add(Req(100));
  EXPECT_FALSE(m.Check(1 * kSec));  // failing (50 %), but within the delay
  auto d = m.Check(5 * kSec);
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->certain);
  EXPECT_EQ(d->threshold, "errors: rate<10% abort(5s)");
  EXPECT_DOUBLE_EQ(d->observed, 0.5);
  EXPECT_NE(d->reason.find("is failing"), std::string::npos);
  // Recovered below the bound: no abort, even after the delay.
  for (int i = 0; i < 18; ++i) m.Add(Req(100));
  EXPECT_FALSE(m.Check(6 * kSec));
}

TEST(AbortDecisionTest, PassingAndUnwatchedThresholdsNeverAbort) {
  AbortMonitor none({One("e2e: p(99)<1ms")}, -1);  // no abort suffix
  EXPECT_TRUE(none.empty());
  AbortMonitor m({One("e2e: p(99)<1s abort(0s)")}, -1);
  for (int i = 0; i < 50; ++i) m.Add(Req(200));
  EXPECT_FALSE(m.Check(100 * kSec));
}

TEST(AbortDecisionTest, MonotoneAggregationsFailForGoodAtOnce) {
  // Count only grows.
  AbortMonitor count({One("http_5xx: count<2 abort(1h)")}, -1);
  count.Add(Req(0, ErrorClass::kHttp5xx));
  EXPECT_FALSE(count.Check(0));
  count.Add(Req(0, ErrorClass::kHttp5xx));
  auto d = count.Check(0);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->certain);
  EXPECT_NE(d->reason.find("can no longer pass"), std::string::npos);

  // Max only grows.
  AbortMonitor max({One("e2e: max<2s abort(1h)")}, -1);
  max.Add(Req(500));
  EXPECT_FALSE(max.Check(0));
  max.Add(Req(2500));
  ASSERT_TRUE(max.Check(0));
  EXPECT_TRUE(max.Check(0)->certain);

  // Error-adjusted mean: one failure makes it +inf for good.
  AbortMonitor avg({One("ttft: avg<1s abort(1h)")}, -1);
  avg.Add(Req(100));
  avg.Add(Req(0, ErrorClass::kTimeout));
  ASSERT_TRUE(avg.Check(0));
  EXPECT_TRUE(avg.Check(0)->certain);

  // A failing percentile with an unknown total is only "failing": it waits.
  AbortMonitor p99({One("e2e: p(99)<1s abort(1h)")}, -1);
  for (int i = 0; i < 10; ++i) p99.Add(Req(1500));
  EXPECT_FALSE(p99.Check(0));
  EXPECT_TRUE(p99.Check(3600 * kSec));
}

TEST(AbortDecisionTest, KnownTotalMakesRatesAndPercentilesCertain) {
  // 100 requests planned, errors rate < 5 %: five errors already decide it.
  AbortMonitor rate({One("errors: rate<5% abort(1h)")}, 100);
  for (int i = 0; i < 4; ++i) rate.Add(Req(0, ErrorClass::kConnect));
  // 4 of 4 failing, but 4 % of 100 could still pass.
  EXPECT_FALSE(rate.Check(0));
  rate.Add(Req(0, ErrorClass::kConnect));
  auto d = rate.Check(0);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->certain);

  // p(90) < 1s over 100 requests: rank 90, so 11 slow (or failed) requests
  // decide it; 10 do not.
  AbortMonitor p90({One("e2e: p(90)<1s abort(1h)")}, 100);
  for (int i = 0; i < 9; ++i) p90.Add(Req(1500));
  p90.Add(Req(0, ErrorClass::kHttp5xx));  // +inf in the error-adjusted view
  EXPECT_FALSE(p90.Check(0));
  p90.Add(Req(1200));
  ASSERT_TRUE(p90.Check(0));
  EXPECT_TRUE(p90.Check(0)->certain);
}

TEST(AbortDecisionTest, OtherPhasesAreIgnored) {
  AbortMonitor m({One("errors: count<1 abort(0s)")}, -1);
  RequestRecord warm = Req(0, ErrorClass::kHttp5xx);
  warm.phase = Phase::kWarmup;
  m.Add(warm);
  EXPECT_FALSE(m.Check(10 * kSec));
}

}  // namespace
}  // namespace redline::bench
