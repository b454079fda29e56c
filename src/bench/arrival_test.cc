#include "bench/arrival.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bench/units.h"

namespace redline::bench {
namespace {

constexpr int64_t kSec = 1'000'000'000;

std::vector<int64_t> All(ArrivalPlan& p) {
  std::vector<int64_t> v;
  while (auto t = p.Next()) v.push_back(*t);
  return v;
}

TEST(ArrivalTest, ConstantIsAnExactAbsoluteSchedule) {
  ArrivalPlan p(ArrivalKind::kConstant, 1, {{10 * kSec, 100, 100}}, 1);
  auto v = All(p);
  ASSERT_EQ(v.size(), 1000u);
  for (size_t i = 0; i < v.size(); ++i)
    ASSERT_EQ(v[i], static_cast<int64_t>(i) * 10'000'000);
}

TEST(ArrivalTest, PoissonAndGammaKeepTheMeanRate) {
  for (ArrivalKind kind : {ArrivalKind::kPoisson, ArrivalKind::kGamma}) {
    ArrivalPlan p(kind, 0.5, {{100 * kSec, 200, 200}}, 42);
    auto v = All(p);
    // 20,000 expected; Poisson sd ~141, gamma(0.5) ~200: 5 % is > 5 sigma.
    EXPECT_NEAR(static_cast<double>(v.size()), 20000, 1000)
        << ArrivalKindName(kind);
    for (size_t i = 1; i < v.size(); ++i) ASSERT_GE(v[i], v[i - 1]);
  }
}

TEST(ArrivalTest, GammaBurstinessRaisesGapVariance) {
  auto cv = [](double k) {
    ArrivalPlan p(ArrivalKind::kGamma, k, {{200 * kSec, 100, 100}}, 3);
    auto v = All(p);
    double sum = 0, sq = 0;
    for (size_t i = 1; i < v.size(); ++i) {
      double g = static_cast<double>(v[i] - v[i - 1]);
      sum += g;
      sq += g * g;
    }
    double n = static_cast<double>(v.size() - 1);
    double mean = sum / n;
    return std::sqrt(sq / n - mean * mean) / mean;
  };
  // Gamma(k) gaps have coefficient of variation 1/sqrt(k).
  EXPECT_NEAR(cv(1.0), 1.0, 0.05);
  EXPECT_NEAR(cv(0.25), 2.0, 0.15);
  EXPECT_NEAR(cv(4.0), 0.5, 0.05);
}

TEST(ArrivalTest, StagesAndRampsIntegrateTheRate) {
  auto stages = ParseStages("10s:5rps,10s:20rps,10s:0-10rps");
  ASSERT_TRUE(stages.ok()) << stages.status().ToString();
  ASSERT_EQ(stages->size(), 3u);
  EXPECT_DOUBLE_EQ((*stages)[2].start_rps, 0);
  EXPECT_DOUBLE_EQ((*stages)[2].end_rps, 10);
  ArrivalPlan p(ArrivalKind::kConstant, 1, *stages, 1);
  auto v = All(p);
  // 50 + 200 + 50 arrivals.
  EXPECT_EQ(v.size(), 300u);
  int first = 0, second = 0, third = 0;
  for (int64_t t : v)
    (t < 10 * kSec ? first : t < 20 * kSec ? second : third)++;
  EXPECT_EQ(first, 50);
  EXPECT_EQ(second, 200);
  EXPECT_EQ(third, 50);
  EXPECT_DOUBLE_EQ(p.RateAt(25 * kSec), 5);
  EXPECT_FALSE(ParseStages("10s").ok());
  EXPECT_FALSE(ParseStages("10:5rps").ok());
}

TEST(ArrivalTest, RequestCountWithoutDuration) {
  ArrivalPlan p(ArrivalKind::kConstant, 1, {{0, 50, 50}}, 1, 7);
  auto v = All(p);
  ASSERT_EQ(v.size(), 7u);
  EXPECT_EQ(v.back(), 6 * kSec / 50);
}

TEST(ThinkTimeTest, ParsesLocustStyleForms) {
  auto b = ThinkTime::Parse("0.5s..2s");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->kind, ThinkTime::Kind::kBetween);
  EXPECT_EQ(b->a_ns, kSec / 2);
  EXPECT_EQ(b->b_ns, 2 * kSec);
  auto b2 = ThinkTime::Parse("between(1, 3)");
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(b2->b_ns, 3 * kSec);
  auto c = ThinkTime::Parse("250ms");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, ThinkTime::Kind::kConstant);
  auto e = ThinkTime::Parse("exponential(1s)");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->kind, ThinkTime::Kind::kExponential);
  EXPECT_EQ(ThinkTime::Parse("0")->kind, ThinkTime::Kind::kNone);
  EXPECT_FALSE(ThinkTime::Parse("2s..1s").ok());

  std::mt19937_64 rng(1);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    int64_t x = b->SampleNs(rng);
    ASSERT_GE(x, kSec / 2);
    ASSERT_LT(x, 2 * kSec);
    sum += static_cast<double>(x);
  }
  EXPECT_NEAR(sum / 10000 / 1e9, 1.25, 0.02);
}

TEST(UnitsTest, DurationsRatesAndPercent) {
  EXPECT_EQ(*ParseDurationNs("250us"), 250'000);
  EXPECT_EQ(*ParseDurationNs("1.5s"), 1'500'000'000);
  EXPECT_EQ(*ParseDurationNs("2m"), 120 * kSec);
  EXPECT_FALSE(ParseDurationNs("5").ok());
  EXPECT_EQ(*ParseDurationNs("5", kSec), 5 * kSec);
  EXPECT_DOUBLE_EQ(*ParseRate("20rps"), 20);
  EXPECT_DOUBLE_EQ(*ParseRate("120/m"), 2);
  EXPECT_DOUBLE_EQ(*ParsePercentOrFraction("0.1%"), 0.001);
  EXPECT_EQ(FormatUs(1500), "1.50ms");
  EXPECT_EQ(FormatUs(2'500'000), "2.500s");
}

}  // namespace
}  // namespace redline::bench
