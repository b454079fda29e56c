#include "bench/route_stats.h"

#include <gtest/gtest.h>

#include <vector>

namespace redline::bench {
namespace {

constexpr int64_t kMs = 1'000'000;

RequestRecord Answered(const std::string& route, int64_t e2e_ms, bool ok) {
  RequestRecord r;
  r.streamed = false;
  r.route = route;
  r.t_sched_ns = kMs;
  r.t_send_ns = kMs;
  r.t_end_ns = kMs + e2e_ms * kMs;
  r.http_status = ok ? 200 : 503;
  r.error = ok ? ErrorClass::kNone : ErrorClass::kHttp5xx;
  r.output_tokens = 4;
  return r;
}

TEST(RouteStatsTest, GroupsByRouteWithSharesAndSuccessOnlyLatency) {
  std::vector<RequestRecord> rs;
  for (int i = 1; i <= 30; ++i) rs.push_back(Answered("light", i, true));
  for (int i = 1; i <= 9; ++i) rs.push_back(Answered("full", 100 * i, true));
  rs.push_back(Answered("full", 5, false));  // failed: counted, not timed
  rs.push_back(Answered("", 1, true));       // no route: left out
  RequestRecord warm = Answered("light", 1, true);
  warm.phase = Phase::kWarmup;  // another phase: left out
  rs.push_back(warm);

  const std::vector<RouteStats> s = ComputeRouteStats(rs, Phase::kMeasure);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].route, "light");  // most requests first
  EXPECT_EQ(s[0].requests, 30);
  EXPECT_DOUBLE_EQ(s[0].share, 0.75);
  EXPECT_NEAR(s[0].e2e_p50_us, 15'000, 15);  // nearest rank, HDR precision
  EXPECT_NEAR(s[0].e2e_p99_us, 30'000, 30);
  EXPECT_EQ(s[1].route, "full");
  EXPECT_EQ(s[1].requests, 10);
  EXPECT_EQ(s[1].ok, 9);
  EXPECT_NEAR(s[1].e2e_p50_us, 500'000, 500);
  EXPECT_NEAR(s[1].e2e_p99_us, 900'000, 900);

  EXPECT_TRUE(
      ComputeRouteStats(std::vector<RequestRecord>{Answered("", 1, true)},
                        Phase::kMeasure)
          .empty());
}

}  // namespace
}  // namespace redline::bench
