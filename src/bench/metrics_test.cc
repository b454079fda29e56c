// Metric definitions of docs/METRICS.md checked on hand-made records (fake
// clock).
#include "bench/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bench/clock.h"
#include "bench/record.h"

namespace redline::bench {
namespace {

constexpr int64_t kMs = 1'000'000;

// A streamed ok request: scheduled at `sched`, sent `delay` later, first
// chunk after `ttft`, then chunks every `gap`.
RequestRecord Stream(int64_t sched, int64_t delay, int64_t ttft, int64_t gap,
                     int chunks, int64_t tokens = -1) {
  RequestRecord r;
  r.streamed = true;
  r.t_sched_ns = sched;
  r.t_send_ns = sched + delay;
  int64_t t = r.t_send_ns + ttft;
  for (int i = 0; i < chunks; ++i) {
    r.chunk_ns.push_back(t);
    t += gap;
  }
  r.t_first_ns = r.chunk_ns.front();
  r.t_first_output_ns = r.chunk_ns.front();
  r.t_last_ns = r.chunk_ns.back();
  r.t_end_ns = r.t_last_ns + 1 * kMs;  // [DONE] 1 ms after the last chunk
  r.output_tokens = tokens >= 0 ? tokens : chunks;
  r.token_source = tokens >= 0 ? TokenSource::kUsage : TokenSource::kChunks;
  r.http_status = 200;
  r.done_seen = r.finish_seen = true;
  return r;
}

TEST(MetricsTest, PerRequestDefinitions) {
  FakeClock clock;
  RequestRecord r = Stream(clock.NowNs(), 2 * kMs, 100 * kMs, 20 * kMs, 11);
  RequestLatencies lat = ComputeLatencies(r);
  EXPECT_EQ(*lat.dispatch_delay_us, 2000);
  EXPECT_EQ(*lat.ttft_us, 100'000);
  EXPECT_EQ(*lat.ttft_sched_us, 102'000);
  EXPECT_EQ(*lat.e2e_us, 300'000);         // c_last - t_send = 100 + 10*20 ms
  EXPECT_EQ(*lat.e2e_stream_us, 301'000);  // [DONE] 1 ms later
  EXPECT_EQ(*lat.e2e_sched_us, 302'000);
  EXPECT_EQ(*lat.tpot_us, 20'000);  // (300 - 100) / (11 - 1)
  EXPECT_EQ(*lat.ntpot_us, 27273);  // e2e / N (includes TTFT), rounded to us
  EXPECT_EQ(*lat.mean_itl_us, 20'000);
}

TEST(MetricsTest, ReasoningFirstGivesTtftButTtfoWaitsForContent) {
  RequestRecord r = Stream(kMs, 0, 50 * kMs, 10 * kMs, 5);
  r.t_first_output_ns = r.chunk_ns[3];  // content starts at the 4th chunk
  RequestLatencies lat = ComputeLatencies(r);
  EXPECT_EQ(*lat.ttft_us, 50'000);
  EXPECT_EQ(*lat.ttfo_us, 80'000);
}

TEST(MetricsTest, TpotUndefinedForOneToken) {
  RequestRecord r = Stream(kMs, 0, 50 * kMs, 10 * kMs, 1);
  RequestLatencies lat = ComputeLatencies(r);
  EXPECT_FALSE(lat.tpot_us.has_value());
  GoodputSlo slo;
  slo.tpot_us = 1;  // N <= 1 passes the TPOT check
  EXPECT_TRUE(IsGood(r, lat, slo));
}

TEST(MetricsTest, NonStreamingHasOnlyE2e) {
  RequestRecord r;
  r.streamed = false;
  r.t_sched_ns = kMs;
  r.t_send_ns = 2 * kMs;
  r.t_end_ns = 502 * kMs;
  r.output_tokens = 10;
  r.http_status = 200;
  RequestLatencies lat = ComputeLatencies(r);
  EXPECT_EQ(*lat.e2e_us, 500'000);
  EXPECT_FALSE(lat.ttft_us.has_value());
  EXPECT_FALSE(lat.tpot_us.has_value());
  EXPECT_EQ(*lat.ntpot_us, 50'000);
}

TEST(MetricsTest, PhaseStatsItlPooledPerChunkAndRates) {
  std::vector<RequestRecord> rs;
  const int64_t t0 = 10 * 1'000 * kMs;
  // Two requests: one with 3 chunks (2 gaps of 10 ms), one with 101 chunks
  // (100 gaps of 30 ms). ITL pools per chunk, so the long one dominates;
  // TPOT is one value per request.
  rs.push_back(Stream(t0, 0, 100 * kMs, 10 * kMs, 3));
  rs.push_back(Stream(t0 + 1000 * kMs, 0, 100 * kMs, 30 * kMs, 101));
  PhaseStats s = ComputePhaseStats(rs, Phase::kMeasure, {});
  EXPECT_EQ(s.attempted, 2);
  EXPECT_EQ(s.ok, 2);
  EXPECT_EQ(s.Hist(Metric::kItl).count(), 102);
  EXPECT_NEAR(s.Hist(Metric::kItl).mean(),
              (2 * 10'000.0 + 100 * 30'000.0) / 102, 1);
  EXPECT_EQ(s.Hist(Metric::kTpot).count(), 2);
  EXPECT_NEAR(s.Hist(Metric::kTpot).mean(), 20'000, 1);
  // Window: first t_send .. max(c_last, t_end) = 1000 + 100 + 3000 + 1 ms.
  EXPECT_NEAR(s.window_s, 4.101, 1e-6);
  EXPECT_NEAR(s.completed_rps, 2 / 4.101, 1e-9);
  EXPECT_NEAR(s.output_tps, 104 / 4.101, 1e-9);
  EXPECT_EQ(s.output_tokens, 104);
  EXPECT_EQ(s.token_sources[static_cast<int>(TokenSource::kChunks)], 2);
  EXPECT_FALSE(s.MixedTokenSources());
}

TEST(MetricsTest, FailuresGoToErrorAdjustedViewsOnly) {
  std::vector<RequestRecord> rs;
  for (int i = 0; i < 97; ++i)
    rs.push_back(Stream(kMs * (i + 1), 0, 100 * kMs, 10 * kMs, 5));
  RequestRecord timeout;
  timeout.t_sched_ns = timeout.t_send_ns = 50 * kMs;
  timeout.t_end_ns = 5000 * kMs;
  timeout.error = ErrorClass::kTimeout;
  timeout.timeout = TimeoutKind::kIdle;
  rs.push_back(timeout);
  RequestRecord e503;
  e503.t_sched_ns = e503.t_send_ns = 60 * kMs;
  e503.t_end_ns = 61 * kMs;
  e503.http_status = 503;
  e503.error = ErrorClass::kHttp5xx;
  rs.push_back(e503);
  rs.push_back(e503);
  PhaseStats s = ComputePhaseStats(rs, Phase::kMeasure, {});
  EXPECT_EQ(s.attempted, 100);
  EXPECT_EQ(s.failed, 3);
  EXPECT_DOUBLE_EQ(s.ErrorRate(ErrorClass::kHttp5xx), 0.02);
  EXPECT_DOUBLE_EQ(s.ErrorRate(ErrorClass::kTimeout), 0.01);
  EXPECT_DOUBLE_EQ(s.ErrorRate(std::nullopt), 0.03);
  EXPECT_EQ(s.timeouts_idle, 1);
  // Success-only p99 is finite; error-adjusted p99 is +inf (3 % failed).
  EXPECT_NEAR(s.Percentile(Metric::kTtft, 99, false), 100'000,
              100);  // within 0.1 % quantization
  EXPECT_TRUE(std::isinf(s.Percentile(Metric::kTtft, 99, true)));
  EXPECT_NEAR(s.Percentile(Metric::kTtft, 97, true), 100'000, 100);
  EXPECT_TRUE(std::isinf(s.Max(Metric::kE2e, true)));
  // ITL stays success-only.
  EXPECT_EQ(s.Infinite(Metric::kItl), 0);
  ASSERT_FALSE(s.failure_labels.empty());
  EXPECT_EQ(s.failure_labels[0].first, "503 - Service Unavailable");
  EXPECT_EQ(s.failure_labels[0].second, 2);
  EXPECT_NEAR(s.good_fraction, 0.97, 1e-12);
}

TEST(MetricsTest, GoodputUsesEverySloAndCountsAttempted) {
  std::vector<RequestRecord> rs;
  rs.push_back(Stream(kMs, 0, 100 * kMs, 10 * kMs, 5));  // ttft 100 ms, good
  rs.push_back(Stream(kMs, 0, 300 * kMs, 10 * kMs, 5));  // ttft too slow
  rs.push_back(Stream(kMs, 0, 100 * kMs, 90 * kMs, 5));  // tpot 90 ms too slow
  RequestRecord failed;
  failed.t_sched_ns = failed.t_send_ns = kMs;
  failed.t_end_ns = 2 * kMs;
  failed.error = ErrorClass::kConnect;
  rs.push_back(failed);
  GoodputSlo slo;
  slo.ttft_us = 200'000;
  slo.tpot_us = 50'000;
  PhaseStats s = ComputePhaseStats(rs, Phase::kMeasure, slo);
  EXPECT_EQ(s.good, 1);
  EXPECT_DOUBLE_EQ(s.good_fraction, 0.25);
  EXPECT_GT(s.goodput_rps, 0);
}

TEST(MetricsTest, PhasesAreSeparate) {
  std::vector<RequestRecord> rs;
  rs.push_back(Stream(kMs, 0, 900 * kMs, 10 * kMs, 3));
  rs.back().phase = Phase::kCold;
  rs.push_back(Stream(2000 * kMs, 0, 100 * kMs, 10 * kMs, 3));
  rs.back().phase = Phase::kWarmup;
  rs.push_back(Stream(3000 * kMs, 0, 50 * kMs, 10 * kMs, 3));
  PhaseStats cold = ComputePhaseStats(rs, Phase::kCold, {});
  PhaseStats warm = ComputePhaseStats(rs, Phase::kMeasure, {});
  EXPECT_EQ(cold.attempted, 1);
  EXPECT_NEAR(cold.Percentile(Metric::kTtft, 50, true), 900'000, 900);
  EXPECT_EQ(warm.attempted, 1);
  EXPECT_NEAR(warm.Percentile(Metric::kTtft, 50, true), 50'000, 50);
}

TEST(MetricsTest, PeakOutputThroughputUsesBusiestSecond) {
  std::vector<RequestRecord> rs;
  // 10 chunks in the first second, 40 in the second second (usage says 2
  // tokens per chunk), 1 chunk later so the window covers 3 s.
  rs.push_back(Stream(kMs, 0, 0, 100 * kMs, 10, 20));
  rs.push_back(Stream(1001 * kMs, 0, 0, 25 * kMs, 40, 80));
  rs.push_back(Stream(3100 * kMs, 0, 0, 1 * kMs, 1, 1));
  PhaseStats s = ComputePhaseStats(rs, Phase::kMeasure, {});
  EXPECT_NEAR(s.peak_output_tps, 80, 1e-9);
}

}  // namespace
}  // namespace redline::bench
