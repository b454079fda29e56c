// Scraped load over real HTTP on loopback: the gateway in front of fake
// OpenAI servers (bench/testing/fake_openai_server.h) whose /metrics report
// vLLM's series, one of them a deep queue the gateway did not fill. With
// scrape-metrics on, least_outstanding sends that one far fewer requests;
// with it off, the two share; an upstream whose /metrics is too large,
// has no load series or never answers goes stale and counts as busy; an
// upstream that comes back is slow-started. Port 0, every wait bounded.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/testing/fake_openai_server.h"
#include "gateway/gateway.h"
#include "gateway/gateway_config.h"
#include "gateway_test_util.h"
#include "test_http_client.h"

namespace redline::gateway {
namespace {

using bench::testing::FakeOpenAiServer;
using bench::testing::FakePlan;
using bench::testing::FakeServerOptions;
using redline::testing::Http;
using redline::testing::HttpResponse;
using namespace testing;

class GatewayLoadTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (gw_) {
      gw_->Shutdown();
      gw_->Wait();
      gw_.reset();
    }
    for (auto& f : fakes_) f->Stop();
  }

  // A fake upstream exporting vLLM's series (its real running and waiting
  // requests) plus `extra` lines appended to its /metrics.
  std::string AddFake(std::string prefix, std::string extra) {
    FakeServerOptions o;
    o.default_plan.ttft_us = 2000;
    o.default_plan.gap_us = 1000;
    o.default_plan.tokens = 4;
    o.metrics_prefix = std::move(prefix);
    o.extra_metrics = [extra] { return extra; };
    fakes_.push_back(std::make_unique<FakeOpenAiServer>(o));
    auto port = fakes_.back()->Start();
    EXPECT_TRUE(port.ok());
    return "http://127.0.0.1:" + std::to_string(*port);
  }

  void Start(const std::vector<std::string>& urls, int64_t scrape_ms,
             int64_t slow_start_ms = 0, int64_t probe_ms = 100) {
    GatewayConfig c;
    c.port = 0;
    c.shutdown_grace_s = 2;
    PoolSpec p;
    p.name = "p";
    p.models = {{"fake", {}, {}}};
    p.policy = PolicyKind::kLeastOutstanding;
    for (size_t i = 0; i < urls.size(); ++i) {
      UpstreamSpec u;
      u.url = urls[i];
      u.name = "u" + std::to_string(i);
      p.upstreams.push_back(u);
    }
    p.probe.interval_ms = probe_ms;
    p.probe.timeout_ms = 500;
    p.first_byte_timeout_ms = 2000;
    p.health.unhealthy_threshold = 1;
    p.scrape.interval_ms = scrape_ms;
    p.slow_start_ms = slow_start_ms;
    c.pools.push_back(std::move(p));
    Status s = FinalizeGatewayConfig(&c);
    ASSERT_TRUE(s.ok()) << s.message();
    const size_t n = urls.size();
    gw_ = std::make_unique<Gateway>(std::move(c));
    auto port = gw_->Start();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    ASSERT_TRUE(Eventually([&] {
      return MetricValue(
                 Metrics(),
                 "redline_gateway_pool_routable_upstreams{pool=\"p\"}") >=
             static_cast<double>(n);
    }));
  }

  std::string Metrics() { return Http(port_, "GET", "/metrics").body; }
  double Metric(const std::string& series) {
    return MetricValue(Metrics(), "redline_gateway_" + series);
  }

  // `total` chat requests from `clients` threads at once; requests per
  // upstream name.
  std::map<std::string, int> Send(int total, int clients) {
    std::atomic<int> next{0};
    std::vector<std::map<std::string, int>> per(clients);
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        while (next.fetch_add(1) < total) {
          HttpResponse r = Http(port_, "POST", "/v1/chat/completions",
                                ChatBody("fake", {"hello"}, false));
          per[c][r.status == 200 ? r.Header("X-Gateway-Upstream")
                                 : "status " + std::to_string(r.status)]++;
        }
      });
    }
    for (auto& t : threads) t.join();
    std::map<std::string, int> all;
    for (const auto& m : per)
      for (const auto& [k, v] : m) all[k] += v;
    return all;
  }

  std::vector<std::unique_ptr<FakeOpenAiServer>> fakes_;
  std::unique_ptr<Gateway> gw_;
  uint16_t port_ = 0;
};

constexpr const char* kDeepQueue =
    "vllm:num_requests_waiting{model_name=\"other-clients\"} 40\n";

TEST_F(GatewayLoadTest, DeepScrapedQueueGetsFarFewerRequests) {
  Start({AddFake("vllm:", ""), AddFake("vllm:", kDeepQueue)}, 100);
  // Both scraped, and the deep queue seen.
  ASSERT_TRUE(Eventually([&] {
    const std::string m = Metrics();
    return MetricValue(m,
                       "redline_gateway_upstream_scraped_waiting{pool=\"p\","
                       "upstream=\"u1\"}") >= 40 &&
           MetricValue(m,
                       "redline_gateway_upstream_scrape_age_seconds{pool=\"p\","
                       "upstream=\"u0\"}") >= 0;
  }));
  const std::map<std::string, int> got = Send(60, 4);
  const int deep = got.count("u1") ? got.at("u1") : 0;
  EXPECT_EQ((got.count("u0") ? got.at("u0") : 0) + deep, 60);  // all 200
  EXPECT_LE(deep, 3) << "the upstream with 40 waiting got " << deep << " of 60";
  const std::string m = Metrics();
  EXPECT_DOUBLE_EQ(
      MetricValue(m,
                  "redline_gateway_upstream_scraped_kv_usage{pool=\"p\","
                  "upstream=\"u1\"}"),
      0);
  EXPECT_EQ(MetricSum(m, "redline_gateway_upstream_scrape_errors_total"), 0);
}

TEST_F(GatewayLoadTest, WithoutScrapingTheDeepQueueIsInvisible) {
  Start({AddFake("vllm:", ""), AddFake("vllm:", kDeepQueue)}, 0);
  const std::map<std::string, int> got = Send(60, 4);
  const int deep = got.count("u1") ? got.at("u1") : 0;
  EXPECT_GE(deep, 18) << "ties rotate: the two share";
  EXPECT_EQ(Metrics().find("upstream_scraped_waiting{"), std::string::npos);
}

TEST_F(GatewayLoadTest, UnreadableMetricsGoStaleAndCountAsBusy) {
  // u1: a /metrics of 1.5 MiB; u2: no load series (the fake's own names).
  std::string huge;
  while (huge.size() < (3u << 19)) huge += "# padding padding padding\n";
  Start({AddFake("vllm:", ""), AddFake("vllm:", huge), AddFake("", "")}, 100);
  ASSERT_TRUE(Eventually([&] {
    const std::string m = Metrics();
    return MetricValue(
               m,
               "redline_gateway_upstream_scrape_errors_total{pool=\"p\","
               "upstream=\"u1\",reason=\"too_large\"}") >= 1 &&
           MetricValue(
               m,
               "redline_gateway_upstream_scrape_errors_total{pool=\"p\","
               "upstream=\"u2\",reason=\"no_load_series\"}") >= 1 &&
           MetricValue(m,
                       "redline_gateway_upstream_scrape_age_seconds{pool=\"p\","
                       "upstream=\"u0\"}") >= 0;
  }));
  const std::string m = Metrics();
  EXPECT_EQ(MetricValue(m,
                        "redline_gateway_upstream_scrape_age_seconds{pool="
                        "\"p\",upstream=\"u1\"}"),
            -1);
  const std::map<std::string, int> got = Send(30, 3);
  EXPECT_EQ(got.count("u0") ? got.at("u0") : 0, 30)
      << "u1 " << (got.count("u1") ? got.at("u1") : 0) << ", u2 "
      << (got.count("u2") ? got.at("u2") : 0);
}

TEST_F(GatewayLoadTest, StalledMetricsTimeOutAndCountAsBusy) {
  // u1 listens but never answers (the kernel completes the handshakes; no
  // one accepts): without probes it starts routable, its scrapes time out.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 64), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string silent =
      "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  Start({AddFake("vllm:", ""), silent}, 100, 0, /*probe_ms=*/0);
  ASSERT_TRUE(Eventually([&] {
    return Metric(
               "upstream_scrape_errors_total{pool=\"p\",upstream=\"u1\","
               "reason=\"transport\"}") >= 2;
  }));
  // The loop was never blocked: /metrics answered meanwhile, and every
  // request goes to the upstream with fresh data.
  const std::map<std::string, int> got = Send(20, 2);
  EXPECT_EQ(got.count("u0") ? got.at("u0") : 0, 20);
  EXPECT_EQ(Metric("upstream_scrape_age_seconds{pool=\"p\",upstream=\"u1\"}"),
            -1);
  close(fd);
}

TEST_F(GatewayLoadTest, ReturningUpstreamIsSlowStarted) {
  Start({AddFake("", ""), AddFake("", "")}, 0, 30'000);
  const std::string weight =
      "upstream_slow_start_weight{pool=\"p\",upstream=\"u1\"}";
  const std::string starts =
      "upstream_slow_starts_total{pool=\"p\",upstream=\"u1\"}";
  EXPECT_EQ(Metric(weight), 1);  // coming up at start is not a return
  EXPECT_EQ(Metric(starts), 0);
  // u1 goes down (its probes fail), then a new process on its port.
  const uint16_t port = fakes_[1]->port();
  fakes_[1]->Stop();
  ASSERT_TRUE(Eventually([&] {
    return Metric("upstream_healthy{pool=\"p\",upstream=\"u1\"}") == 0;
  }));
  FakeServerOptions o;
  o.default_plan.ttft_us = 2000;
  o.default_plan.tokens = 4;
  fakes_.push_back(std::make_unique<FakeOpenAiServer>(o));
  ASSERT_TRUE(fakes_.back()->Start(port).ok());
  ASSERT_TRUE(Eventually([&] { return Metric(starts) == 1; }));
  EXPECT_GT(Metric(weight), 0.09);
  EXPECT_LT(Metric(weight), 0.5);
  // One request at a time: least_outstanding divides by the ramped weight,
  // so u1 (weight ~0.1-0.2) loses every tie to u0.
  const std::map<std::string, int> got = Send(20, 1);
  EXPECT_EQ(got.count("u0") ? got.at("u0") : 0, 20);
}

}  // namespace
}  // namespace redline::gateway
