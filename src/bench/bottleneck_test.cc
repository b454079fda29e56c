// The bottleneck finder's rules on stated inputs, the knees of a search and
// the rank correlation.
#include "bench/bottleneck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bench/capacity.h"
#include "bench/report.h"

namespace redline::bench {
namespace {

// A run with server timing whose median and p99 requests split as given
// (fractions in Part order: client, network, gateway, queue, prefill,
// decode).
BottleneckInput WithShares(PartArray p50, PartArray p99) {
  BottleneckInput in;
  in.ok_requests = 200;
  in.e2e_p50_ms = 500;
  in.e2e_p99_ms = 2000;
  in.timing_coverage = 1;
  in.share_p50 = p50;
  in.share_p99 = p99;
  return in;
}

// A capacity step judged on one percentile SLO.
CapacityPoint E2eStep(double rate, StepVerdict e2e) {
  CapacityPoint p;
  p.offered_rps = rate;
  PercentileCheck a;
  a.threshold = "e2e: p(99)<1s";
  a.verdict = e2e;
  p.checks = {a};
  return p;
}

TEST(BottleneckTest, QueueShareGrowingIntoTheTailIsQueueing) {
  BottleneckInput in =
      WithShares({0, 0.02, 0, 0.1, 0.2, 0.68}, {0, 0.01, 0, 0.7, 0.05, 0.24});
  BottleneckReport b = FindBottleneck(in);
  EXPECT_EQ(b.primary.cause, Cause::kQueueing);
  EXPECT_FALSE(b.primary.evidence.empty());
  EXPECT_FALSE(b.primary.action.empty());
  // Decode (0.24) is under its 30 % threshold: not listed.
  for (const Finding& f : b.others) EXPECT_NE(f.cause, Cause::kDecode);
  // Without --scrape the finder says what it did not use.
  EXPECT_FALSE(b.missing.empty());
}

TEST(BottleneckTest, ScrapedWaitingAtTheSlotLimitConfirmsQueueing) {
  BottleneckInput in =
      WithShares({0, 0, 0, 0.3, 0.2, 0.5}, {0, 0, 0, 0.45, 0.1, 0.45});
  // Tied with decode on the share; the scrape breaks the tie.
  in.scraped = true;
  in.waiting_at_limit = 0.8;
  in.waiting_max = 12;
  in.running_max = in.slot_limit = 4;
  BottleneckReport b = FindBottleneck(in);
  EXPECT_EQ(b.primary.cause, Cause::kQueueing);
  EXPECT_GT(b.primary.score, 0.45);
  ASSERT_FALSE(b.others.empty());
  EXPECT_EQ(b.others[0].cause, Cause::kDecode);
}

TEST(BottleneckTest, WithoutServerTimingTheScrapeAloneNamesQueueing) {
  BottleneckInput in;
  in.ok_requests = 50;
  in.scraped = true;
  in.waiting_at_limit = 0.5;
  in.slot_limit = 2;
  BottleneckReport b = FindBottleneck(in);
  EXPECT_EQ(b.primary.cause, Cause::kQueueing);
  ASSERT_FALSE(b.missing.empty());
  EXPECT_NE(b.missing[0].find("server timing"), std::string::npos);
}

TEST(BottleneckTest, PrefillShareAndTtftGrowingWithPromptLength) {
  BottleneckInput in =
      WithShares({0, 0.01, 0, 0, 0.8, 0.19}, {0, 0.01, 0, 0, 0.9, 0.09});
  in.ttft_prompt_corr = 0.95;
  in.prompt_spread = 10;
  BottleneckReport b = FindBottleneck(in);
  EXPECT_EQ(b.primary.cause, Cause::kPrefill);
  EXPECT_NEAR(b.primary.score, 1.0, 1e-9);  // 0.9 + confirmation, capped
  EXPECT_EQ(b.primary.evidence.size(), 2u);
}

TEST(BottleneckTest, DecodeShareAndItlGrowingWithConcurrency) {
  BottleneckInput in =
      WithShares({0, 0, 0, 0, 0.05, 0.95}, {0, 0, 0, 0, 0.04, 0.96});
  in.itl_concurrency_corr = 0.8;
  in.itl_growth = 2.5;
  BottleneckReport b = FindBottleneck(in);
  EXPECT_EQ(b.primary.cause, Cause::kDecode);
  EXPECT_EQ(b.primary.evidence.size(), 2u);
}

TEST(BottleneckTest, DispatchDelayIsTheClient) {
  BottleneckInput in =
      WithShares({0.6, 0, 0, 0, 0.1, 0.3}, {0.85, 0, 0, 0, 0.03, 0.12});
  in.dispatch_p99_ms = 900;
  in.max_connections = 1;
  BottleneckReport b = FindBottleneck(in);
  EXPECT_EQ(b.primary.cause, Cause::kClient);
  EXPECT_EQ(b.primary.evidence.size(), 2u);  // share + the connection cap
}

TEST(BottleneckTest, ClientCpuNearOneCoreIsTheClientEvenWithoutDelay) {
  BottleneckInput in =
      WithShares({0, 0, 0, 0, 0.3, 0.7}, {0.01, 0, 0, 0, 0.3, 0.69});
  in.client_cpu = 0.97;
  BottleneckReport b = FindBottleneck(in);
  // Decode's 0.69 share outranks the CPU's fixed 0.6, but the client is
  // listed.
  EXPECT_EQ(b.primary.cause, Cause::kDecode);
  bool client = false;
  for (const Finding& f : b.others) client |= f.cause == Cause::kClient;
  EXPECT_TRUE(client);
}

TEST(BottleneckTest, NetworkGapBetweenClientAndServer) {
  BottleneckInput in =
      WithShares({0, 0.5, 0, 0, 0.1, 0.4}, {0, 0.6, 0, 0, 0.05, 0.35});
  EXPECT_EQ(FindBottleneck(in).primary.cause, Cause::kNetwork);
}

TEST(BottleneckTest, GatewayShare) {
  BottleneckInput in =
      WithShares({0, 0, 0.5, 0, 0.1, 0.4}, {0, 0, 0.55, 0, 0.05, 0.4});
  EXPECT_EQ(FindBottleneck(in).primary.cause, Cause::kGateway);
}

TEST(BottleneckTest, FullKvCacheWithPreemptionsOutranksTheQueueItCauses) {
  BottleneckInput in =
      WithShares({0, 0, 0, 0.3, 0.2, 0.5}, {0, 0, 0, 0.8, 0.05, 0.15});
  in.scraped = true;
  in.kv_usage_max = 0.99;
  in.preemptions = 14;
  BottleneckReport b = FindBottleneck(in);
  EXPECT_EQ(b.primary.cause, Cause::kKvCache);
  EXPECT_NEAR(b.primary.score, 1.0, 1e-9);
  ASSERT_FALSE(b.others.empty());
  EXPECT_EQ(b.others[0].cause, Cause::kQueueing);
}

TEST(BottleneckTest, HighKvUsageAloneNeedsRefusalsToCount) {
  BottleneckInput in =
      WithShares({0, 0, 0, 0, 0.2, 0.8}, {0, 0, 0, 0, 0.2, 0.8});
  in.scraped = true;
  in.kv_usage_max = 0.85;
  EXPECT_EQ(FindBottleneck(in).primary.cause, Cause::kDecode);
  in.http_429 = 3;
  in.share_p99 = {0, 0, 0, 0, 0.2, 0.7};
  EXPECT_EQ(FindBottleneck(in).primary.cause, Cause::kKvCache);
}

TEST(BottleneckTest, MemoryPressureComesFirst) {
  BottleneckInput in =
      WithShares({0, 0, 0, 0.5, 0.2, 0.3}, {0, 0, 0, 0.9, 0.05, 0.05});
  in.scraped = true;
  in.swap_in_pages_per_s = 250;
  EXPECT_EQ(FindBottleneck(in).primary.cause, Cause::kMemory);
  in.swap_in_pages_per_s = 0;
  in.memory_used_fraction = 0.97;
  EXPECT_EQ(FindBottleneck(in).primary.cause, Cause::kMemory);
  in.memory_used_fraction = 0.5;
  EXPECT_EQ(FindBottleneck(in).primary.cause, Cause::kQueueing);
}

TEST(BottleneckTest, CpuSaturationWhenNoPartDominates) {
  BottleneckInput in = WithShares({0.1, 0.15, 0, 0.15, 0.25, 0.35},
                                  {0.1, 0.15, 0, 0.15, 0.25, 0.35});
  in.scraped = true;
  in.system_cpu = 0.93;
  BottleneckReport b = FindBottleneck(in);
  EXPECT_EQ(b.primary.cause, Cause::kCpu);
  in.system_cpu = 0.5;
  EXPECT_EQ(FindBottleneck(in).primary.cause, Cause::kDecode);
}

TEST(BottleneckTest, NothingCrossesAThreshold) {
  BottleneckInput in = WithShares({0.1, 0.15, 0.1, 0.15, 0.25, 0.25},
                                  {0.1, 0.15, 0.1, 0.15, 0.25, 0.25});
  BottleneckReport b = FindBottleneck(in);
  EXPECT_EQ(b.primary.cause, Cause::kNone);
  EXPECT_TRUE(b.others.empty());
  EXPECT_FALSE(b.primary.evidence.empty());
  BottleneckInput empty;
  EXPECT_EQ(FindBottleneck(empty).primary.cause, Cause::kNone);
}

TEST(BottleneckTest, KneesPerThreshold) {
  CapacityResult c;
  auto point = [](double rate, StepVerdict e2e, StepVerdict ttft) {
    CapacityPoint p;
    p.offered_rps = rate;
    PercentileCheck a, b;
    a.threshold = "e2e: p(99)<1s";
    a.verdict = e2e;
    b.threshold = "ttft: p(99)<200ms";
    b.verdict = ttft;
    p.checks = {a, b};
    return p;
  };
  using V = StepVerdict;
  c.curve = {point(10, V::kFail, V::kFail), point(5, V::kPass, V::kFail),
             point(2.5, V::kPass, V::kPass), point(7.5, V::kFail, V::kFail),
             point(6, V::kPass, V::kInconclusive)};
  const std::vector<Knee> knees = FindKnees(c);
  ASSERT_EQ(knees.size(), 2u);
  EXPECT_EQ(knees[0].threshold, "e2e: p(99)<1s");
  EXPECT_EQ(knees[0].holds_rps, 6);
  EXPECT_EQ(knees[0].breaks_rps, 7.5);
  EXPECT_EQ(knees[1].holds_rps, 2.5);
  EXPECT_EQ(knees[1].breaks_rps, 5);
}

TEST(BottleneckTest, AFailureBelowARateThatHeldIsNotTheKnee) {
  // A stall of the host fails the step at 3 req/s; 6 held, 8 failed.
  CapacityResult c;
  using V = StepVerdict;
  c.curve = {E2eStep(10, V::kFail), E2eStep(5, V::kPass),
             E2eStep(3, V::kFail),  E2eStep(8, V::kFail),
             E2eStep(6, V::kPass),  E2eStep(7, V::kInconclusive)};
  std::vector<Knee> knees = FindKnees(c);
  ASSERT_EQ(knees.size(), 1u);
  EXPECT_EQ(knees[0].holds_rps, 6);
  EXPECT_EQ(knees[0].breaks_rps, 8);
  // Every failure below a pass: it never broke where it was measured.
  c.curve = {E2eStep(5, V::kPass), E2eStep(3, V::kFail), E2eStep(6, V::kPass)};
  knees = FindKnees(c);
  ASSERT_EQ(knees.size(), 1u);
  EXPECT_EQ(knees[0].holds_rps, 6);
  EXPECT_EQ(knees[0].breaks_rps, 0);
}

TEST(BottleneckTest, KneeRateIsTheLowestFailureAboveEveryPass) {
  const std::vector<double> none;
  EXPECT_EQ(KneeRate(none, none), 0);
  EXPECT_EQ(KneeRate(none, std::vector<double>{9, 4, 7}), 4);
  EXPECT_EQ(KneeRate(std::vector<double>{5}, std::vector<double>{9, 4, 7}), 7);
  // A rate that both passed and failed (a re-measurement) is not the knee.
  EXPECT_EQ(KneeRate(std::vector<double>{7}, std::vector<double>{9, 7}), 9);
  EXPECT_EQ(KneeRate(std::vector<double>{9}, std::vector<double>{4, 7}), 0);
}

TEST(BottleneckTest, KneesOfThresholdsJudgedOnThePoint) {
  // An error-rate SLO that breaks before the latency one, and a rate SLO
  // that never breaks.
  CapacityResult c;
  auto point = [](double rate, StepVerdict e2e, StepVerdict errors) {
    CapacityPoint p = E2eStep(rate, e2e);
    p.point_checks = {{"errors: rate<1%", 0, "", errors},
                      {"requests: rate>0.5", rate, "", StepVerdict::kPass}};
    return p;
  };
  using V = StepVerdict;
  c.curve = {point(10, V::kFail, V::kFail),  point(5, V::kPass, V::kFail),
             point(2.5, V::kPass, V::kPass), point(7.5, V::kPass, V::kFail),
             point(4, V::kPass, V::kPass),   point(4.5, V::kPass, V::kPass),
             point(12, V::kPass, V::kPass)};
  // Invalid steps (the client fell behind) count for nothing.
  c.curve[5].valid = false;
  c.curve[6].valid = false;
  const std::vector<Knee> knees = FindKnees(c);
  ASSERT_EQ(knees.size(), 3u);
  EXPECT_EQ(knees[0].threshold, "e2e: p(99)<1s");
  EXPECT_EQ(knees[0].holds_rps, 7.5);
  EXPECT_EQ(knees[0].breaks_rps, 10);
  EXPECT_EQ(knees[1].threshold, "errors: rate<1%");
  EXPECT_EQ(knees[1].holds_rps, 4);
  EXPECT_EQ(knees[1].breaks_rps, 5);
  EXPECT_EQ(knees[2].threshold, "requests: rate>0.5");
  EXPECT_EQ(knees[2].holds_rps, 10);
  EXPECT_EQ(knees[2].breaks_rps, 0);
}

TEST(BottleneckTest, SpearmanCorrelation) {
  std::vector<double> x, up, down, flat;
  for (int i = 0; i < 20; ++i) {
    x.push_back(i);
    up.push_back(i * i);  // monotone, not linear
    down.push_back(-i);
    flat.push_back(3);
  }
  EXPECT_NEAR(SpearmanCorrelation(x, up), 1, 1e-12);
  EXPECT_NEAR(SpearmanCorrelation(x, down), -1, 1e-12);
  EXPECT_TRUE(std::isnan(SpearmanCorrelation(x, flat)));
  std::vector<double> few = {1, 2, 3};
  EXPECT_TRUE(std::isnan(SpearmanCorrelation(few, few)));
}

}  // namespace
}  // namespace redline::bench
