#include "bench/quantile_ci.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace redline::bench {
namespace {

TEST(QuantileCiTest, RanksOfAKnownCase) {
  // n = 100, median: the classic 95 % interval is [X_(40), X_(61)].
  const RankInterval r = QuantileRankInterval(100, 0.5, 0.95);
  EXPECT_EQ(r.lower, 40);
  EXPECT_EQ(r.upper, 61);
}

TEST(QuantileCiTest, TailQuantilesNeedEnoughSamplesForAnUpperBound) {
  EXPECT_EQ(SamplesForUpperBound(0.99, 0.95), 368);  // 0.99^368 < 0.025
  EXPECT_EQ(SamplesForUpperBound(0.95, 0.95), 72);
  EXPECT_EQ(QuantileRankInterval(367, 0.99, 0.95).upper, 368);  // none
  EXPECT_LE(QuantileRankInterval(368, 0.99, 0.95).upper, 368);
  EXPECT_EQ(QuantileRankInterval(368, 0.99, 0.95).upper, 368);
  // With 1000 samples the p99 interval is bounded on both sides.
  const RankInterval r = QuantileRankInterval(1000, 0.99, 0.95);
  EXPECT_GT(r.lower, 970);
  EXPECT_LT(r.lower, 990);
  EXPECT_GT(r.upper, 990);
  EXPECT_LE(r.upper, 1000);
}

TEST(QuantileCiTest, LargeSamplesMatchTheNormalApproximation) {
  // n = 10^6 (ITL has one sample per chunk): only the window around the
  // mean is summed; the ranks are n q -/+ 1.96 sqrt(n q (1 - q)).
  const RankInterval r = QuantileRankInterval(1'000'000, 0.5, 0.95);
  EXPECT_NEAR(static_cast<double>(r.lower), 500'000 - 980, 3);
  EXPECT_NEAR(static_cast<double>(r.upper), 500'000 + 981, 3);
  const RankInterval t = QuantileRankInterval(1'000'000, 0.999, 0.95);
  EXPECT_NEAR(static_cast<double>(t.lower), 999'000 - 62, 3);
  EXPECT_NEAR(static_cast<double>(t.upper), 999'000 + 63, 3);
}

TEST(QuantileCiTest, EmptyAndTinySamples) {
  const RankInterval r0 = QuantileRankInterval(0, 0.5, 0.95);
  EXPECT_EQ(r0.lower, 0);
  EXPECT_EQ(r0.upper, 1);
  const std::vector<double> one = {5};
  const QuantileEstimate e = EstimateQuantile(one, 0.99, 0.95);
  EXPECT_EQ(e.point, 5);
  EXPECT_TRUE(std::isinf(e.upper));
  const std::vector<double> none;
  EXPECT_TRUE(std::isnan(EstimateQuantile(none, 0.5, 0.95).point));
}

TEST(QuantileCiTest, HistogramAndSortedValuesAgree) {
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> d(1.0 / 1000);
  Histogram h;
  std::vector<double> v;
  for (int i = 0; i < 800; ++i) {
    const auto x = static_cast<int64_t>(d(rng));
    h.Record(x);
    v.push_back(static_cast<double>(x));
  }
  // Two failed requests ranked above everything (error-adjusted view).
  v.push_back(INFINITY);
  v.push_back(INFINITY);
  std::sort(v.begin(), v.end());
  for (double q : {0.5, 0.9, 0.99}) {
    const QuantileEstimate a = EstimateQuantile(v, q, 0.95);
    const QuantileEstimate b = EstimateQuantile(h, 2, q, 0.95);
    EXPECT_EQ(a.n, b.n);
    // Histogram buckets keep >= 3 significant digits.
    EXPECT_NEAR(a.point, b.point, 0.002 * a.point + 1) << q;
    EXPECT_NEAR(a.lower, b.lower, 0.002 * a.lower + 1) << q;
    if (std::isinf(a.upper)) {
      EXPECT_TRUE(std::isinf(b.upper));
    } else {
      EXPECT_NEAR(a.upper, b.upper, 0.002 * a.upper + 1) << q;
    }
  }
}

// Coverage by simulation: the 95 % interval contains the true quantile of
// the sampled distribution in about 95 % of repeats (the exact binomial
// method is conservative, so somewhat more, never clearly less).
void ExpectCoverage(int n, double q, double confidence) {
  std::mt19937_64 rng(12345 + static_cast<uint64_t>(n));
  std::exponential_distribution<double> d(1.0);
  const double truth = -std::log(1 - q);
  constexpr int kRepeats = 2000;
  int covered = 0;
  std::vector<double> v(static_cast<size_t>(n));
  for (int rep = 0; rep < kRepeats; ++rep) {
    for (double& x : v) x = d(rng);
    std::sort(v.begin(), v.end());
    const QuantileEstimate e = EstimateQuantile(v, q, confidence);
    covered += e.lower <= truth && truth <= e.upper;
  }
  const double coverage = static_cast<double>(covered) / kRepeats;
  // 2000 repeats: binomial sd of the coverage is about 0.5 %.
  EXPECT_GE(coverage, confidence - 0.015) << "n=" << n << " q=" << q;
  EXPECT_LE(coverage, std::min(1.0, confidence + 0.035))
      << "n=" << n << " q=" << q;
}

TEST(QuantileCiTest, CoverageOfTheMedian) { ExpectCoverage(200, 0.5, 0.95); }
TEST(QuantileCiTest, CoverageOfP99) { ExpectCoverage(1000, 0.99, 0.95); }
TEST(QuantileCiTest, CoverageOfP90At90Percent) {
  ExpectCoverage(300, 0.9, 0.90);
}

// Response times of an M/D/c queue near saturation, in arrival order: the
// correlated samples a capacity step sees (a slow period makes a run of
// slow requests).
std::vector<double> MdcResponseTimes(std::mt19937_64& rng, int n, double rate,
                                     int c, double service, int warmup) {
  std::exponential_distribution<double> gap(rate);
  std::vector<double> free(static_cast<size_t>(c), 0.0);
  std::vector<double> out;
  double now = 0;
  for (int i = 0; i < warmup + n; ++i) {
    now += gap(rng);
    auto it = std::min_element(free.begin(), free.end());
    const double start = std::max(now, *it);
    *it = start + service;
    if (i >= warmup) out.push_back(start + service - now);
  }
  return out;
}

// Each window is a fresh, independent stretch of the process, so the
// fraction of windows whose interval holds the stationary quantile is the
// interval's coverage.
double MdcCoverage(bool widen, double* tau_seen) {
  constexpr int kSlots = 8;
  constexpr double kService = 1.0, kRate = 7.2;  // 90 % utilisation
  constexpr double kQ = 0.95;
  std::mt19937_64 rng(777);
  std::vector<double> all =
      MdcResponseTimes(rng, 2'000'000, kRate, kSlots, kService, 100'000);
  std::nth_element(all.begin(), all.begin() + static_cast<long>(kQ * 2e6),
                   all.end());
  const double truth = all[static_cast<size_t>(kQ * 2e6)];
  constexpr int kRepeats = 300;
  int covered = 0;
  for (int rep = 0; rep < kRepeats; ++rep) {
    const std::vector<double> w =
        MdcResponseTimes(rng, 2000, kRate, kSlots, kService, 5000);
    std::vector<double> sorted = w;
    std::sort(sorted.begin(), sorted.end());
    QuantileEstimate e = EstimateQuantile(sorted, kQ, 0.95);
    if (widen) {
      const CorrelatedEstimate c = WidenForCorrelation(e, w, kQ, 0.95);
      *tau_seen = c.tau;
      e = c.estimate;
    }
    covered += e.lower <= truth && truth <= e.upper;
  }
  return static_cast<double>(covered) / kRepeats;
}

TEST(QuantileCiTest, EffectiveSamplesRestoreCoverageForCorrelatedLatencies) {
  double tau = 0;
  const double plain = MdcCoverage(false, &tau);
  const double widened = MdcCoverage(true, &tau);
  EXPECT_GT(tau, 5);
  // The order-statistic interval assumes independence and misses the
  // quantile of a queue near saturation far more often than 5 %.
  EXPECT_LT(plain, 0.85);
  // Widened to its effective sample size it holds it in most windows
  // (about 80 % here: tau is itself estimated from one window of a few
  // relaxation times, and short windows read it low).
  EXPECT_GE(widened, 0.72) << "plain " << plain;
  EXPECT_GT(widened, plain + 0.5);
}

TEST(QuantileCiTest, EffectiveSamplesLeaveIndependentSamplesNearlyAlone) {
  std::mt19937_64 rng(99);
  std::exponential_distribution<double> d(1.0);
  std::vector<double> v(2000);
  for (double& x : v) x = d(rng);
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const QuantileEstimate e = EstimateQuantile(sorted, 0.95, 0.95);
  const CorrelatedEstimate c = WidenForCorrelation(e, v, 0.95, 0.95);
  EXPECT_LT(c.tau, 1.3);
  EXPECT_LE(c.estimate.lower, e.lower);
  EXPECT_GE(c.estimate.upper, e.upper);
  // Never narrower, and for independent samples not much wider.
  EXPECT_LT(c.estimate.upper - c.estimate.lower, 1.5 * (e.upper - e.lower));
}

TEST(QuantileCiTest, StronglyCorrelatedSamplesLoseTheirUpperBound) {
  // Two long runs (a calm half, then a slow half): about two independent
  // observations, so the p95 cannot be bounded above.
  std::vector<double> v(1000, 1.0);
  for (size_t i = 500; i < 1000; ++i)
    v[i] = 2.0 + static_cast<double>(i) * 1e-3;
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const QuantileEstimate e = EstimateQuantile(sorted, 0.95, 0.95);
  EXPECT_TRUE(std::isfinite(e.upper));
  const CorrelatedEstimate c = WidenForCorrelation(e, v, 0.95, 0.95);
  EXPECT_GT(c.tau, 30);
  EXPECT_TRUE(std::isinf(c.estimate.upper));
}

}  // namespace
}  // namespace redline::bench
