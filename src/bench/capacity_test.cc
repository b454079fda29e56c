// Step judgement and the capacity range on hand-made runs (no server).
#include "bench/capacity.h"

#include <gtest/gtest.h>

#include <vector>

namespace redline::bench {
namespace {

constexpr int64_t kMs = 1'000'000;

RequestRecord Ok(int64_t sched, int64_t e2e) {
  RequestRecord r;
  r.streamed = true;
  r.phase = Phase::kMeasure;
  r.t_sched_ns = sched;
  r.t_send_ns = sched;
  r.chunk_ns = {sched + e2e / 2, sched + e2e};
  r.t_first_ns = r.t_first_output_ns = r.chunk_ns.front();
  r.t_last_ns = r.chunk_ns.back();
  r.t_end_ns = r.t_last_ns;
  r.output_tokens = 2;
  r.token_source = TokenSource::kChunks;
  r.http_status = 200;
  r.done_seen = r.finish_seen = true;
  return r;
}

// `n` requests at `rate_rps`, each taking `e2e_ms`.
RunResult Steady(int n, double rate_rps, int64_t e2e_ms) {
  RunResult run;
  run.open_loop = true;
  run.planned_measure = n;
  const auto gap = static_cast<int64_t>(1e9 / rate_rps);
  for (int i = 0; i < n; ++i)
    run.records.push_back(Ok(1'000 * kMs + i * gap, e2e_ms * kMs));
  run.start_ns = 1'000 * kMs;
  run.end_ns = run.records.back().t_end_ns;
  return run;
}

std::vector<Threshold> Slo(const char* text) {
  auto t = ParseThresholds(text);
  EXPECT_TRUE(t.ok());
  return *t;
}

ValidityOptions LooseValidity() {
  ValidityOptions v;
  v.dispatch_bound_us = 1'000'000;
  v.send_rate_tolerance = 0.5;
  return v;
}

TEST(CapacityStepTest, NoPercentileVerdictOnTooFewSamples) {
  CapacityOptions o;
  o.min_samples = 100;
  const auto slo = Slo("e2e: p(99)<1s");
  // 50 fast requests: fewer than --min-samples, neither pass nor fail.
  CapacityPoint p = JudgeStep(Steady(50, 10, 20), slo, LooseValidity(), 10, o);
  EXPECT_EQ(p.verdict, StepVerdict::kInsufficient) << p.reason;
  ASSERT_EQ(p.checks.size(), 1u);
  EXPECT_EQ(p.checks[0].verdict, StepVerdict::kInsufficient);
  // 50 very slow requests: still no fail on 50 samples.
  p = JudgeStep(Steady(50, 10, 2'000), slo, LooseValidity(), 10, o);
  EXPECT_NE(p.verdict, StepVerdict::kFail) << p.reason;
  // 200 fast ones: enough to judge, but a p99 pass needs 368 at 95 %.
  p = JudgeStep(Steady(200, 10, 20), slo, LooseValidity(), 10, o);
  EXPECT_EQ(p.verdict, StepVerdict::kInsufficient) << p.reason;
  EXPECT_EQ(p.checks[0].needed_samples, 368);
  // 200 slow ones fail for sure: the interval's lower end is above 1 s.
  p = JudgeStep(Steady(200, 10, 2'000), slo, LooseValidity(), 10, o);
  EXPECT_EQ(p.verdict, StepVerdict::kFail) << p.reason;
  // 400 fast ones pass.
  p = JudgeStep(Steady(400, 10, 20), slo, LooseValidity(), 10, o);
  EXPECT_EQ(p.verdict, StepVerdict::kPass) << p.reason;
  EXPECT_EQ(StepSamplesNeeded(slo, o), 368);
}

TEST(CapacityStepTest, ThresholdsBesideThePercentilesAreJudgedOnThePoint) {
  CapacityOptions o;
  o.min_samples = 100;
  std::vector<Threshold> slo = Slo("e2e: p(50)<1s");
  for (const char* t : {"errors: rate<1%", "itl: avg<100ms"}) {
    const auto more = Slo(t);
    slo.insert(slo.end(), more.begin(), more.end());
  }
  // 200 requests of 20 ms, 10 of them failed (5 %): the error rate breaks,
  // the mean inter-token latency (10 ms, not error-adjusted) holds.
  RunResult run = Steady(200, 10, 20);
  for (int i = 0; i < 10; ++i) {
    run.records[i * 20].http_status = 500;
    run.records[i * 20].error = ErrorClass::kHttp5xx;
  }
  const CapacityPoint p = JudgeStep(run, slo, LooseValidity(), 10, o);
  EXPECT_EQ(p.verdict, StepVerdict::kFail);
  EXPECT_NE(p.reason.find("errors: rate<1%"), std::string::npos) << p.reason;
  ASSERT_EQ(p.point_checks.size(), 2u);
  EXPECT_EQ(p.point_checks[0].threshold, "errors: rate<1%");
  EXPECT_EQ(p.point_checks[0].verdict, StepVerdict::kFail);
  EXPECT_NEAR(p.point_checks[0].observed, 0.05, 1e-9);
  EXPECT_EQ(p.point_checks[0].shown, "5%");
  EXPECT_EQ(p.point_checks[1].threshold, "itl: avg<100ms");
  EXPECT_EQ(p.point_checks[1].verdict, StepVerdict::kPass);
}

TEST(CapacityStepTest, ThresholdInsideTheIntervalIsInconclusive) {
  CapacityOptions o;
  o.min_samples = 100;
  // 1000 requests whose top 1.5 % take 2 s: the p99 interval spans 1 s.
  RunResult run = Steady(1000, 100, 20);
  for (int i = 0; i < 15; ++i) {
    RequestRecord& r = run.records[static_cast<size_t>(i * 60)];
    r = Ok(r.t_sched_ns, 2'000 * kMs);
  }
  run.records[999] = Ok(run.records[999].t_sched_ns, 20 * kMs);
  CapacityPoint p =
      JudgeStep(run, Slo("e2e: p(99)<1s"), LooseValidity(), 100, o);
  EXPECT_EQ(p.verdict, StepVerdict::kInconclusive) << p.reason;
  EXPECT_LT(p.checks[0].estimate.lower, 1e6);
  EXPECT_GT(p.checks[0].estimate.upper, 1e6);
}

TEST(CapacityStepTest, CompletedNeverExceedsSent) {
  CapacityOptions o;
  o.min_samples = 10;
  // Requests that finish long after the window (a slow tail) and a sample
  // with more arrivals than the nominal rate would give.
  for (int64_t e2e_ms : {1, 50, 5'000}) {
    RunResult run = Steady(120, 12, e2e_ms);
    CapacityPoint p =
        JudgeStep(run, Slo("e2e: p(50)<10s"), LooseValidity(), 10, o);
    EXPECT_LE(p.completed, p.sent);
    EXPECT_LE(p.completed_rps, p.sent_rps + 1e-9) << e2e_ms;
    EXPECT_GT(p.sent_rps, 10);  // the sample ran hot; sent/s shows it
    EXPECT_NEAR(p.tail_s, static_cast<double>(e2e_ms) / 1e3, 1e-6);
  }
}

TEST(CapacityStepTest, GrowingBacklogIsAFail) {
  CapacityOptions o;
  o.min_samples = 10;
  // Arrivals at 100/s served at 50/s: request i finishes at 20 ms x i.
  RunResult run;
  run.open_loop = true;
  run.planned_measure = 300;
  for (int i = 0; i < 300; ++i) {
    const int64_t sched = 1'000 * kMs + i * 10 * kMs;
    run.records.push_back(
        Ok(sched, (1'000 * kMs + (i + 1) * 20 * kMs) - sched));
  }
  CapacityPoint p =
      JudgeStep(run, Slo("e2e: p(50)<100s"), LooseValidity(), 100, o);
  EXPECT_FALSE(p.kept_up);
  EXPECT_EQ(p.verdict, StepVerdict::kFail);
  EXPECT_LE(p.completed_rps, p.sent_rps);
  EXPECT_NEAR(p.completed_rps, 50, 1);
}

CapacityPoint Step(double rate, StepVerdict v) {
  CapacityPoint p;
  p.offered_rps = rate;
  p.verdict = v;
  return p;
}

TEST(CapacityRangeTest, HighestPassBelowLowestFail) {
  const std::vector<CapacityPoint> steps = {
      Step(100, StepVerdict::kFail),        Step(50, StepVerdict::kPass),
      Step(75, StepVerdict::kInconclusive), Step(62.5, StepVerdict::kPass),
      Step(68.75, StepVerdict::kFail),      Step(62.5, StepVerdict::kPass),
      Step(68.75, StepVerdict::kFail)};
  CapacitySearch cs = RangeFromSteps(steps, 100);
  EXPECT_DOUBLE_EQ(cs.low_rps, 62.5);
  EXPECT_DOUBLE_EQ(cs.high_rps, 68.75);
  EXPECT_TRUE(cs.confirmed);
}

TEST(CapacityRangeTest, AReMeasurementThatDisagreesWidensTheRange) {
  const std::vector<CapacityPoint> steps = {
      Step(100, StepVerdict::kFail),        Step(50, StepVerdict::kPass),
      Step(75, StepVerdict::kPass),         Step(87.5, StepVerdict::kFail),
      Step(75, StepVerdict::kInconclusive), Step(87.5, StepVerdict::kFail)};
  CapacitySearch cs = RangeFromSteps(steps, 100);
  EXPECT_DOUBLE_EQ(cs.low_rps, 50);  // 75 did not pass twice
  EXPECT_DOUBLE_EQ(cs.high_rps, 87.5);
  EXPECT_FALSE(cs.confirmed);
}

TEST(CapacityRangeTest, NoConclusiveFailLeavesTheTopOpen) {
  const std::vector<CapacityPoint> steps = {
      Step(100, StepVerdict::kInsufficient), Step(50, StepVerdict::kPass),
      Step(75, StepVerdict::kInsufficient)};
  CapacitySearch cs = RangeFromSteps(steps, 100);
  EXPECT_DOUBLE_EQ(cs.low_rps, 50);
  EXPECT_EQ(cs.high_rps, 0);
}

TEST(CapacityDrainTest, LoadGauges) {
  EXPECT_TRUE(IsLoadGauge("redline:num_requests_waiting"));
  EXPECT_TRUE(IsLoadGauge("vllm:num_requests_running"));
  EXPECT_TRUE(IsLoadGauge("llamacpp:requests_processing"));
  EXPECT_FALSE(IsLoadGauge("fake_queue_depth"));
  EXPECT_FALSE(IsLoadGauge("redline:num_requests_waiting_total"));
}

}  // namespace
}  // namespace redline::bench
