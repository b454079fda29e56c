#include "bench/threshold.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bench/record.h"

namespace redline::bench {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(ClassifyTest, FirstMatchOrder) {
  AttemptFacts f;
  f.status = 200;
  f.streaming = true;
  f.done_seen = f.finish_seen = true;
  EXPECT_EQ(Classify(f), ErrorClass::kNone);

  AttemptFacts c = f;
  c.connect_failed = true;
  c.timeout = TimeoutKind::kTotal;  // connect wins over timeout
  EXPECT_EQ(Classify(c), ErrorClass::kConnect);

  AttemptFacts t;
  t.timeout = TimeoutKind::kIdle;
  t.status = 503;  // timeout wins over 5xx
  EXPECT_EQ(Classify(t), ErrorClass::kTimeout);

  AttemptFacts r;
  r.status = 429;
  EXPECT_EQ(Classify(r), ErrorClass::kHttp429);
  r.status = 404;
  EXPECT_EQ(Classify(r), ErrorClass::kHttp4xx);
  r.status = 503;
  EXPECT_EQ(Classify(r), ErrorClass::kHttp5xx);

  AttemptFacts a = f;
  a.done_seen = false;  // stream ended without [DONE]
  EXPECT_EQ(Classify(a), ErrorClass::kAbort);
  a = f;
  a.error_event = true;
  EXPECT_EQ(Classify(a), ErrorClass::kAbort);
  a = f;
  a.closed_early = true;
  a.parse_error = true;  // abort wins over parse
  EXPECT_EQ(Classify(a), ErrorClass::kAbort);

  AttemptFacts p = f;
  p.parse_error = true;
  EXPECT_EQ(Classify(p), ErrorClass::kParse);
  p = f;
  p.finish_seen = false;  // [DONE] but no finish_reason
  EXPECT_EQ(Classify(p), ErrorClass::kParse);

  AttemptFacts nonstream;
  nonstream.status = 200;
  EXPECT_EQ(Classify(nonstream), ErrorClass::kNone);
  nonstream.parse_error = true;
  EXPECT_EQ(Classify(nonstream), ErrorClass::kParse);

  AttemptFacts nothing;  // written, closed before any status
  EXPECT_EQ(Classify(nothing), ErrorClass::kAbort);
}

TEST(ThresholdParseTest, ParsesK6StyleExpressions) {
  auto ts = ParseThresholds("e2e: p(50)<1s, p(95)<2s, p(99.9)<=3000ms");
  ASSERT_TRUE(ts.ok()) << ts.status().ToString();
  ASSERT_EQ(ts->size(), 3u);
  EXPECT_EQ((*ts)[0].metric_key, "e2e");
  EXPECT_EQ((*ts)[0].aggregation, Aggregation::kPercentile);
  EXPECT_DOUBLE_EQ((*ts)[0].percentile, 50);
  EXPECT_DOUBLE_EQ((*ts)[0].value, 1'000'000);  // microseconds
  EXPECT_EQ((*ts)[2].op, CompareOp::kLe);
  EXPECT_DOUBLE_EQ((*ts)[2].percentile, 99.9);

  auto e = ParseThresholds("errors:rate<0.1%");
  ASSERT_TRUE(e.ok());
  EXPECT_DOUBLE_EQ((*e)[0].value, 0.001);
  auto t = ParseThresholds("timeouts: rate<0.01");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].metric_key, "timeout");
  auto cold = ParseThresholds("ttft{phase:cold}: max<5s");
  ASSERT_TRUE(cold.ok());
  EXPECT_EQ((*cold)[0].phase, Phase::kCold);
  EXPECT_EQ((*cold)[0].aggregation, Aggregation::kMax);
  auto g = ParseThresholds("good_fraction: value>=99%");
  ASSERT_TRUE(g.ok());
  EXPECT_DOUBLE_EQ((*g)[0].value, 0.99);
  auto c = ParseThresholds("http_5xx: count==0");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[0].op, CompareOp::kEq);
}

TEST(ThresholdParseTest, RejectsBadSyntax) {
  for (const char* bad :
       {"e2e p(99)<3s", "e2e: p(99)<3", "nope: p(99)<3s", "e2e: rate<1%",
        "errors: p(99)<1s", "e2e: p(101)<1s", "e2e: q(9)<1s", "e2e: p(99)~1s",
        "ttft{region:eu}: max<1s", "goodput: p(50)<1", "e2e:"}) {
    EXPECT_FALSE(ParseThresholds(bad).ok()) << bad;
  }
}

TEST(ThresholdParseTest, ThreeSecondProfile) {
  auto ts = ProfileThresholds("three-second");
  ASSERT_TRUE(ts.ok());
  ASSERT_EQ(ts->size(), 5u);
  EXPECT_EQ((*ts)[2].source, "e2e: p(99)<3s");
  EXPECT_EQ((*ts)[3].metric_key, "http_5xx");
  EXPECT_DOUBLE_EQ((*ts)[3].value, 0.001);
  EXPECT_EQ((*ts)[4].metric_key, "timeout");
  EXPECT_FALSE(ProfileThresholds("four-second").ok());
  GoodputSlo slo = GoodputFromThresholds(*ts);
  EXPECT_EQ(slo.e2e_us, 3'000'000);
  EXPECT_EQ(slo.ttft_us, 0);
}

RequestRecord Ok(int64_t e2e_ms) {
  RequestRecord r;
  r.streamed = false;
  r.t_sched_ns = r.t_send_ns = kMs;
  r.t_end_ns = kMs + e2e_ms * kMs;
  r.http_status = 200;
  r.output_tokens = 1;
  return r;
}

TEST(ThresholdEvalTest, ErrorAdjustedVerdictCannotPassByDroppingRequests) {
  std::vector<RequestRecord> rs;
  for (int i = 0; i < 98; ++i) rs.push_back(Ok(500));
  RequestRecord bad;
  bad.t_sched_ns = bad.t_send_ns = kMs;
  bad.t_end_ns = 2 * kMs;
  bad.http_status = 500;
  bad.error = ErrorClass::kHttp5xx;
  rs.push_back(bad);
  rs.push_back(bad);
  PhaseStats s = ComputePhaseStats(rs, Phase::kMeasure, {});
  PhaseStatsSet set;
  set.measure = &s;
  auto ts = ParseThresholds("e2e: p(50)<1s, p(99)<3s");
  ASSERT_TRUE(ts.ok());
  auto results = EvaluateThresholds(*ts, set);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].pass);
  EXPECT_FALSE(results[1].pass);  // 2 % failed: adjusted p99 = +inf
  EXPECT_TRUE(std::isinf(results[1].observed));
  EXPECT_NEAR(*results[1].success_only, 500'000, 500);
  auto rate = EvaluateThresholds(*ParseThresholds("http_5xx: rate<1%"), set);
  EXPECT_FALSE(rate[0].pass);
  EXPECT_DOUBLE_EQ(rate[0].observed, 0.02);
  auto ok_rate = EvaluateThresholds(*ParseThresholds("timeout: rate<1%"), set);
  EXPECT_TRUE(ok_rate[0].pass);
  // No cold phase: a cold threshold fails with a note instead of passing.
  auto cold =
      EvaluateThresholds(*ParseThresholds("e2e{phase:cold}: max<5s"), set);
  EXPECT_FALSE(cold[0].pass);
  EXPECT_FALSE(cold[0].note.empty());
}

}  // namespace
}  // namespace redline::bench
