// Scraped load and slow start, without sockets: the load report read from
// redline's, vLLM's and llama.cpp's /metrics text, how the policies count
// scraped requests and KV usage, staleness (a pool fed a fake clock), and
// the slow-start ramp of a returning upstream.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gateway/gateway_metrics.h"
#include "gateway/load_report.h"
#include "gateway/policy.h"
#include "gateway/pool.h"
#include "gateway/upstream_health.h"
#include "http/event_loop.h"

namespace redline::gateway {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

TEST(LoadReportTest, ReadsRedlineNamesSummedOverModels) {
  auto r = ParseLoadReport(
      "# HELP redline_num_requests_running requests in a slot\n"
      "# TYPE redline_num_requests_running gauge\n"
      "redline_num_requests_running{model_name=\"a\"} 3\n"
      "redline_num_requests_running{model_name=\"b\"} 2\n"
      "redline_num_requests_waiting{model_name=\"a\"} 7\n"
      "redline_num_waiting_prompt_tokens{model_name=\"a\"} 900\n"
      "redline_kv_cache_usage_perc{model_name=\"a\"} 0.25\n"
      "redline_kv_cache_usage_perc{model_name=\"b\"} 0.75\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->running, 5);
  EXPECT_DOUBLE_EQ(r->waiting, 7);
  EXPECT_DOUBLE_EQ(r->kv_usage, 0.75);  // the fullest model
  // The vLLM-style prefix of --metrics-prefix redline:.
  auto colon = ParseLoadReport(
      "redline:num_requests_running 1\nredline:num_requests_waiting 4\n");
  ASSERT_TRUE(colon.ok());
  EXPECT_DOUBLE_EQ(colon->running, 1);
  EXPECT_DOUBLE_EQ(colon->waiting, 4);
  EXPECT_DOUBLE_EQ(colon->kv_usage, -1);  // not exported
}

TEST(LoadReportTest, ReadsVllmNames) {
  auto r = ParseLoadReport(
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 12.0\n"
      "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 30.0\n"
      "vllm:num_requests_swapped{model_name=\"m\"} 5.0\n"
      "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\n");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->running, 12);
  EXPECT_DOUBLE_EQ(r->waiting, 30);
  EXPECT_DOUBLE_EQ(r->kv_usage, 0.5);
  // vLLM v1's name.
  auto v1 = ParseLoadReport(
      "vllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.9\n");
  ASSERT_TRUE(v1.ok());
  EXPECT_DOUBLE_EQ(v1->kv_usage, 0.9);
  EXPECT_DOUBLE_EQ(v1->waiting, 0);
}

TEST(LoadReportTest, ReadsLlamaCppNames) {
  auto r = ParseLoadReport(
      "# HELP llamacpp:requests_processing Number of requests processing.\n"
      "# TYPE llamacpp:requests_processing gauge\n"
      "llamacpp:requests_processing 2\n"
      "# TYPE llamacpp:requests_deferred gauge\n"
      "llamacpp:requests_deferred 9\n"
      "llamacpp:kv_cache_usage_ratio 0.125\n"
      "llamacpp:prompt_tokens_total 1000\n");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->running, 2);
  EXPECT_DOUBLE_EQ(r->waiting, 9);
  EXPECT_DOUBLE_EQ(r->kv_usage, 0.125);
}

TEST(LoadReportTest, UnknownOrBadValuesAreRefusedOrIgnored) {
  // Only other servers' names, or a KV gauge alone: no load.
  EXPECT_FALSE(ParseLoadReport("fake_queue_depth 3\nup 1\n").ok());
  EXPECT_FALSE(ParseLoadReport("vllm:kv_cache_usage_perc 0.5\n").ok());
  EXPECT_FALSE(ParseLoadReport("").ok());
  EXPECT_NE(ParseLoadReport("x 1\n").status().message().find(
                "llamacpp:requests_processing"),
            std::string::npos);
  // Near misses of the names are not read.
  EXPECT_FALSE(ParseLoadReport("vllm:gpu_num_requests_running 3\n"
                               "myredline_num_requests_running 3\n")
                   .ok());
  // NaN and negative values are ignored; a percentage is read as such.
  auto r = ParseLoadReport(
      "vllm:num_requests_running NaN\nvllm:num_requests_running 4\n"
      "vllm:num_requests_waiting -3\nvllm:kv_cache_usage_perc 85\n");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->running, 4);
  EXPECT_DOUBLE_EQ(r->waiting, 0);
  EXPECT_DOUBLE_EQ(r->kv_usage, 0.85);
}

UpstreamLoad Scraped(double requests, double kv = -1, int64_t own = 0) {
  UpstreamLoad u;
  u.eligible = u.routable = true;
  u.scraped = true;
  u.scraped_requests = requests;
  u.kv_usage = kv;
  u.in_flight = own;
  u.max_in_flight = 64;
  return u;
}

TEST(ScrapedLoadTest, EffectiveRequestsAndKvFactor) {
  UpstreamLoad plain;
  plain.in_flight = 3;
  EXPECT_DOUBLE_EQ(EffectiveRequests(plain), 3);  // not scraped
  EXPECT_DOUBLE_EQ(EffectiveRequests(Scraped(10, -1, 3)), 10);
  EXPECT_DOUBLE_EQ(EffectiveRequests(Scraped(1, -1, 3)), 3);  // own wins
  UpstreamLoad stale = Scraped(0, 0.99, 3);
  stale.scrape_stale = true;
  EXPECT_DOUBLE_EQ(EffectiveRequests(stale), 3 + 64);
  EXPECT_DOUBLE_EQ(KvFactor(stale), 1);
  EXPECT_DOUBLE_EQ(KvFactor(Scraped(0, -1)), 1);
  EXPECT_DOUBLE_EQ(KvFactor(Scraped(0, 0.8)), 1);
  EXPECT_DOUBLE_EQ(KvFactor(Scraped(0, 0.9)), 2);
  EXPECT_DOUBLE_EQ(KvFactor(Scraped(0, 1.0)), 3);
}

// Picks `n` requests that each stay in flight (own in_flight grows) and
// returns how many each upstream got.
std::vector<int> Spread(RoutingPolicy& p, std::vector<UpstreamLoad> loads,
                        int n, int64_t tokens = 100) {
  std::vector<int> got(loads.size(), 0);
  RouteRequest r;
  r.token_estimate = tokens;
  for (int i = 0; i < n; ++i) {
    auto pick = p.Pick(loads, r, 0);
    EXPECT_TRUE(pick.has_value());
    got[*pick]++;
    loads[*pick].in_flight++;
    loads[*pick].tokens_in_flight += tokens;
  }
  return got;
}

TEST(ScrapedLoadTest, DeepScrapedQueueGetsFewerRequests) {
  const std::vector<std::string> names = {"deep", "idle"};
  for (PolicyKind kind :
       {PolicyKind::kLeastOutstanding, PolicyKind::kLeastTokens,
        PolicyKind::kLatency, PolicyKind::kPrefixAffinity}) {
    SCOPED_TRACE(std::string(PolicyName(kind)));
    auto p = MakePolicy(kind, names, {1, 1}, {}, 7);
    std::vector<UpstreamLoad> loads = {Scraped(20), Scraped(0)};
    // The latency policy needs TTFTs to compare loads.
    for (auto& l : loads) l.ewma_ttft_ms = 100;
    const std::vector<int> got = Spread(*p, loads, 30);
    // "idle" takes the first 20 until its own requests match the deep
    // queue; only then does "deep" get any.
    EXPECT_LE(got[0], 10) << got[0] << " vs " << got[1];
    EXPECT_GE(got[1], 20);
    // Without scraping the two are equal and share evenly.
    auto q = MakePolicy(kind, names, {1, 1}, {}, 7);
    std::vector<UpstreamLoad> blind = loads;
    for (auto& l : blind) l.scraped = false;
    const std::vector<int> even = Spread(*q, blind, 30);
    EXPECT_GE(even[0], 12);
  }
}

TEST(ScrapedLoadTest, FullKvCacheCountsAsBusier) {
  auto p = MakePolicy(PolicyKind::kLeastOutstanding, {"full", "roomy"}, {1, 1},
                      {}, 1);
  // Same requests; one cache 95 % full (factor 2.5).
  const std::vector<int> got =
      Spread(*p, {Scraped(4, 0.95), Scraped(4, 0.3)}, 35);
  EXPECT_LT(got[0], got[1] / 2) << got[0] << " vs " << got[1];
}

// A pool over two upstreams that never opens a socket (Choose is fed the
// clock).
class PoolClockTest : public ::testing::Test {
 protected:
  std::unique_ptr<Pool> MakePool(PolicyKind policy, int64_t scrape_ms,
                                 int64_t slow_start_ms) {
    PoolSpec spec;
    spec.name = "p";
    spec.policy = policy;
    spec.probe.interval_ms = 0;  // no probes: upstreams start up
    spec.scrape.interval_ms = scrape_ms;
    spec.scrape.stale_intervals = 3;
    spec.slow_start_ms = slow_start_ms;
    spec.health.consecutive_failures = 1;
    spec.health.base_ejection_ms = 1000;
    for (const char* name : {"a", "b"}) {
      UpstreamSpec u;
      u.url = "http://127.0.0.1:9";
      u.name = name;
      u.max_in_flight = 1000;  // the tests hold many in flight
      u.scrape_interval_ms = scrape_ms;
      spec.upstreams.push_back(u);
    }
    return std::make_unique<Pool>(spec, loop_, metrics_, 1);
  }
  Upstream& Up(Pool& p, size_t i) { return *p.upstreams()[i]; }
  std::string Pick(Pool& p, int64_t now) {
    Pool::Pick pick = p.Choose({}, {}, now);
    return pick.upstream ? pick.upstream->spec.name : "";
  }
  std::map<std::string, int> Count(Pool& p, int n, int64_t now) {
    std::map<std::string, int> got;
    for (int i = 0; i < n; ++i) got[Pick(p, now)]++;
    return got;
  }

  http::EventLoop loop_;
  GatewayMetrics metrics_{"redline_"};
};

TEST_F(PoolClockTest, StaleOrMissingScrapesCountAsBusy) {
  auto pool = MakePool(PolicyKind::kLeastOutstanding, 1000, 0);
  const int64_t t = 100 * kS;
  Upstream& a = Up(*pool, 0);
  Upstream& b = Up(*pool, 1);
  a.scraped.running = 5;
  a.scraped_ns = t - 100 * kMs;
  // b has never been scraped: busy, so the loaded but known a wins.
  EXPECT_TRUE(pool->ScrapeStale(b, t));
  EXPECT_EQ(Count(*pool, 10, t)["a"], 10);
  // b fresh and idle: b wins.
  b.scraped_ns = t - 2 * kS;
  EXPECT_FALSE(pool->ScrapeStale(b, t));
  EXPECT_EQ(Count(*pool, 10, t)["b"], 10);
  // b's data 3 intervals old is still fresh; past 3 intervals it is stale.
  EXPECT_FALSE(pool->ScrapeStale(b, b.scraped_ns + 3 * kS));
  EXPECT_TRUE(pool->ScrapeStale(b, b.scraped_ns + 3 * kS + 1));
  a.scraped_ns = t + 3 * kS;
  EXPECT_EQ(Count(*pool, 10, t + 3 * kS + 1)["a"], 10);
  // Both stale: ordered by the gateway's own in-flight counts.
  pool->BeginAttempt(a, 0);
  EXPECT_EQ(Count(*pool, 10, t + 60 * kS)["b"], 10);
  pool->EndAttempt(a, 0);
}

TEST(SlowStartTest, FactorRampsLinearlyAfterAReturnOnly) {
  HealthOptions o;
  o.healthy_threshold = 1;
  o.unhealthy_threshold = 1;
  o.consecutive_failures = 1;
  o.base_ejection_ms = 1000;
  UpstreamHealth h(o, /*probed=*/true);
  // The first time up after start is not a return.
  h.RecordProbe(true, 1 * kS);
  EXPECT_DOUBLE_EQ(h.SlowStartFactor(1 * kS, 30'000), 1);
  // Down, then back at 10 s: 10 % rising to full over 30 s.
  h.RecordProbe(false, 2 * kS);
  h.RecordProbe(true, 10 * kS);
  EXPECT_DOUBLE_EQ(h.SlowStartFactor(10 * kS, 30'000), 0.1);
  EXPECT_NEAR(h.SlowStartFactor(25 * kS, 30'000), 0.55, 1e-9);
  EXPECT_DOUBLE_EQ(h.SlowStartFactor(40 * kS, 30'000), 1);
  EXPECT_DOUBLE_EQ(h.SlowStartFactor(10 * kS, 0), 1);  // off
  // An ejection: the ramp starts when it ends.
  ASSERT_TRUE(h.RecordFailure(100 * kS, true));
  EXPECT_EQ(h.returned_at_ns(), 101 * kS);
  EXPECT_DOUBLE_EQ(h.SlowStartFactor(101 * kS, 10'000), 0.1);
  EXPECT_NEAR(h.SlowStartFactor(106 * kS, 10'000), 0.55, 1e-9);
  // A back-off is not a return.
  UpstreamHealth busy(o, false);
  busy.RecordBackoff(5 * kS, 1000);
  EXPECT_DOUBLE_EQ(busy.SlowStartFactor(6 * kS, 30'000), 1);
}

TEST_F(PoolClockTest, ReturningUpstreamRampsItsShare) {
  for (PolicyKind kind :
       {PolicyKind::kRoundRobin, PolicyKind::kLeastOutstanding}) {
    SCOPED_TRACE(std::string(PolicyName(kind)));
    auto pool = MakePool(kind, 0, 30'000);
    Upstream& a = Up(*pool, 0);
    const double starts_before = a.metrics.slow_starts->value();
    const int64_t t = 100 * kS;
    pool->RecordFailure(a, Failure::kConnect, t);  // ejected for 1 s
    ASSERT_FALSE(a.health.Routable(t));
    const int64_t back = t + 1 * kS;
    // Share of a with the other upstream's requests held in flight for
    // least_outstanding: a's weight 0.1 vs 1 -> about 1 in 11.
    auto share = [&](int64_t now) {
      int got_a = 0;
      std::vector<Upstream*> held;
      for (int i = 0; i < 110; ++i) {
        Pool::Pick pick = pool->Choose({}, {}, now);
        EXPECT_NE(pick.upstream, nullptr);
        if (pick.upstream == &a) ++got_a;
        pool->BeginAttempt(*pick.upstream, 0);
        held.push_back(pick.upstream);
      }
      for (Upstream* u : held) pool->EndAttempt(*u, 0);
      return got_a;
    };
    const int at_return = share(back);
    const int halfway = share(back + 15 * kS);
    const int after = share(back + 30 * kS);
    EXPECT_NEAR(at_return, 10, 2);
    EXPECT_NEAR(halfway, 39, 3);  // 0.55 / 1.55 of 110
    EXPECT_NEAR(after, 55, 2);
    // The gauge and the counter follow the ramp (UpdateGauges on the tick).
    pool->UpdateGauges(back + 1 * kS);
    EXPECT_TRUE(a.slow_start_active);
    EXPECT_NEAR(a.metrics.slow_start_weight->value(), 0.13, 1e-9);
    EXPECT_EQ(a.metrics.slow_starts->value() - starts_before, 1);
    pool->UpdateGauges(back + 31 * kS);
    EXPECT_FALSE(a.slow_start_active);
    EXPECT_DOUBLE_EQ(a.metrics.slow_start_weight->value(), 1);
  }
}

TEST_F(PoolClockTest, AffinityBoundShrinksDuringSlowStart) {
  auto pool = MakePool(PolicyKind::kPrefixAffinity, 0, 30'000);
  Upstream& a = Up(*pool, 0);
  const int64_t t = 100 * kS;
  pool->RecordFailure(a, Failure::kConnect, t);
  const int64_t back = t + 1 * kS;
  // New sessions spread over the ring; with a at 10 % weight its bounded
  // load lets it keep far fewer of them in flight.
  int got_a = 0;
  std::vector<Upstream*> held;
  for (uint64_t k = 0; k < 200; ++k) {
    RouteRequest r;
    r.has_key = true;
    r.key = k * 0x9e3779b97f4a7c15ull;
    Pool::Pick pick = pool->Choose(r, {}, back);
    ASSERT_NE(pick.upstream, nullptr);
    if (pick.upstream == &a) ++got_a;
    pool->BeginAttempt(*pick.upstream, 0);
    held.push_back(pick.upstream);
  }
  for (Upstream* u : held) pool->EndAttempt(*u, 0);
  EXPECT_LT(got_a, 40) << got_a;
}

}  // namespace
}  // namespace redline::gateway
