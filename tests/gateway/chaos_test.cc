// `redline chaos` pieces: the fault spec, the proxy in front of a fake
// OpenAI server (latency, reset, drop-after, blackhole, refuse, bandwidth),
// the control endpoint, and the gateway's reaction to a slowed and a
// blackholed upstream behind it. Loopback, port 0, bounded waits.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <thread>

#include "bench/testing/fake_openai_server.h"
#include "gateway/chaos_control.h"
#include "gateway/chaos_proxy.h"
#include "gateway/fault_spec.h"
#include "gateway/gateway.h"
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

TEST(FaultSpecTest, ParsesEveryFaultAndSchedules) {
  auto f = ParseFaults(
      "latency=500ms; latency-up=10ms;jitter=20ms;bandwidth=64k;drop-after=1m;"
      "reset;blackhole;refuse");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->latency_down_ms, 500);
  EXPECT_EQ(f->latency_up_ms, 10);
  EXPECT_EQ(f->jitter_ms, 20);
  EXPECT_EQ(f->bandwidth_bytes_per_s, 64 * 1024);
  EXPECT_EQ(f->drop_after_bytes, 1 << 20);
  EXPECT_TRUE(f->reset && f->blackhole && f->refuse);
  EXPECT_EQ(*ParseFaults("latency=1s;clear"), Faults());
  EXPECT_EQ(DescribeFaults(*ParseFaults("latency=500ms;reset")),
            "latency=500ms;reset");
  EXPECT_FALSE(ParseFaults("latency=5").ok());
  EXPECT_FALSE(ParseFaults("melt").ok());

  auto s =
      ParseFaultSchedule("20s:reset,10s:latency=500ms,30s:clear,jitter=1ms");
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ((*s)[0].at_ms, 0);
  EXPECT_EQ((*s)[0].faults.jitter_ms, 1);
  EXPECT_EQ((*s)[1].at_ms, 10000);
  EXPECT_EQ((*s)[2].faults.reset, true);
  EXPECT_EQ((*s)[3].faults, Faults());
  EXPECT_NE(ParseFaultSchedule("soon:reset").status().message().find("soon"),
            std::string::npos);
}

class ChaosTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (gw_) {
      gw_->Shutdown();
      gw_->Wait();
    }
    gw_.reset();
    proxies_.clear();
    for (auto& f : fakes_) f->Stop();
  }

  uint16_t AddFake(FakePlan plan) {
    FakeServerOptions o;
    o.default_plan = plan;
    fakes_.push_back(std::make_unique<FakeOpenAiServer>(o));
    return *fakes_.back()->Start();
  }
  static FakePlan Quick(int tokens = 4) {
    FakePlan p;
    p.ttft_us = 1000;
    p.gap_us = 1000;
    p.tokens = tokens;
    return p;
  }
  ChaosProxy& AddProxy(uint16_t target, Faults faults = {}) {
    ChaosOptions o;
    o.target_port = target;
    proxies_.push_back(std::make_unique<ChaosProxy>(o));
    EXPECT_TRUE(proxies_.back()->Start().ok());
    proxies_.back()->SetFaults(faults);
    return *proxies_.back();
  }
  static HttpResponse Chat(uint16_t port, bool stream) {
    return Http(port, "POST", "/v1/chat/completions",
                ChatBody("fake", {"hi"}, stream));
  }

  std::vector<std::unique_ptr<FakeOpenAiServer>> fakes_;
  std::vector<std::unique_ptr<ChaosProxy>> proxies_;
  std::unique_ptr<Gateway> gw_;
};

TEST_F(ChaosTest, ForwardsAndAddsLatency) {
  ChaosProxy& p = AddProxy(AddFake(Quick()));
  auto t0 = std::chrono::steady_clock::now();
  HttpResponse r = Chat(p.port(), true);
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(ReadStream(r).done);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 250ms);
  p.SetFaults(*ParseFaults("latency=300ms"));
  ASSERT_TRUE(Eventually([&] { return p.faults().latency_down_ms == 300; }));
  t0 = std::chrono::steady_clock::now();
  r = Chat(p.port(), false);
  ASSERT_EQ(r.status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  EXPECT_GT(p.stats().bytes_down, 0u);
}

TEST_F(ChaosTest, ResetDropAfterBlackholeAndRefuse) {
  FakePlan longer = Quick(200);
  longer.gap_us = 5000;
  ChaosProxy& p = AddProxy(AddFake(longer));
  // drop-after: the stream is cut (reset) after 1500 bytes.
  p.SetFaults(*ParseFaults("drop-after=1500"));
  ASSERT_TRUE(Eventually([&] { return p.faults().drop_after_bytes == 1500; }));
  HttpResponse r = Chat(p.port(), true);
  EXPECT_FALSE(r.error.empty()) << "the stream should have been cut";
  EXPECT_LT(r.body.size(), 1500u);
  // reset: a stream in progress dies at once.
  p.SetFaults(Faults());
  std::thread reset([&] {
    std::this_thread::sleep_for(100ms);
    p.SetFaults(*ParseFaults("reset"));
  });
  r = Chat(p.port(), true);
  reset.join();
  EXPECT_FALSE(r.error.empty());
  EXPECT_GE(p.stats().resets, 1u);
  // blackhole: accepted, never answered (the client times out).
  p.SetFaults(*ParseFaults("blackhole"));
  ASSERT_TRUE(Eventually([&] { return p.faults().blackhole; }));
  redline::testing::TestConnection c;
  ASSERT_TRUE(c.Connect(p.port()));
  ASSERT_TRUE(c.SendRequest("POST", "/v1/chat/completions",
                            ChatBody("fake", {"hi"}, false)));
  // refuse: nothing listens.
  p.SetFaults(*ParseFaults("refuse"));
  ASSERT_TRUE(Eventually([&] {
    redline::testing::TestConnection probe;
    return !probe.Connect(p.port());
  }));
  p.SetFaults(Faults());
  EXPECT_TRUE(Eventually([&] { return Chat(p.port(), false).status == 200; }));
}

TEST_F(ChaosTest, BandwidthLimitSlowsTheDownstream) {
  FakePlan many = Quick(100);
  many.gap_us = 0;
  ChaosProxy& p = AddProxy(AddFake(many));
  p.SetFaults(*ParseFaults("bandwidth=8k"));
  ASSERT_TRUE(Eventually([&] { return p.faults().bandwidth_bytes_per_s > 0; }));
  const auto t0 = std::chrono::steady_clock::now();
  HttpResponse r = Chat(p.port(), true);
  ASSERT_EQ(r.status, 200);
  // ~20 KB of chunks at 8 KiB/s (a 1 KiB burst first).
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1500ms)
      << r.body.size() << " bytes";
}

TEST_F(ChaosTest, ControlEndpointSwitchesFaults) {
  ChaosProxy& p = AddProxy(AddFake(Quick()));
  ChaosControl control(p, "127.0.0.1", 0);
  auto port = control.Start();
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(Http(*port, "PUT", "/faults", "latency=200ms;jitter=10ms").status,
            200);
  EXPECT_TRUE(Eventually([&] {
    return Http(*port, "GET", "/faults").body == "latency=200ms;jitter=10ms\n";
  }));
  EXPECT_EQ(Http(*port, "PUT", "/faults", "melt").status, 400);
  EXPECT_EQ(Http(*port, "DELETE", "/faults").status, 200);
  EXPECT_TRUE(Eventually(
      [&] { return Http(*port, "GET", "/faults").body == "clear\n"; }));
  EXPECT_NE(Http(*port, "GET", "/stats").body.find("\"connections\""),
            std::string::npos);
}

PoolSpec ProxiedPool(const std::vector<uint16_t>& ports, PolicyKind policy) {
  PoolSpec p;
  p.name = "p";
  p.policy = policy;
  p.models = {{"fake", {}, {}}};
  for (size_t i = 0; i < ports.size(); ++i) {
    UpstreamSpec u;
    u.url = "http://127.0.0.1:" + std::to_string(ports[i]);
    u.name = "u" + std::to_string(i);
    p.upstreams.push_back(u);
  }
  p.probe.interval_ms = 0;
  p.retry_budget.min_per_s = 20;
  return p;
}

TEST_F(ChaosTest, GatewayShiftsTrafficOffASlowedReplica) {
  std::vector<uint16_t> ports;
  for (int i = 0; i < 3; ++i)
    ports.push_back(AddProxy(AddFake(Quick())).port());
  proxies_[0]->SetFaults(*ParseFaults("latency=500ms"));
  GatewayConfig c;
  c.port = 0;
  c.pools.push_back(ProxiedPool(ports, PolicyKind::kLatency));
  ASSERT_TRUE(FinalizeGatewayConfig(&c).ok());
  gw_ = std::make_unique<Gateway>(c);
  const uint16_t port = *gw_->Start();
  std::map<std::string, int> share;
  for (int i = 0; i < 40; ++i)
    share[Chat(port, i % 2 == 0).Header("X-Gateway-Upstream")]++;
  EXPECT_LE(share["u0"], 4)
      << "the slowed replica got " << share["u0"] << " of 40";
}

TEST_F(ChaosTest, BlackholedUpstreamIsEjectedAfterItsFirstByteTimeout) {
  std::vector<uint16_t> ports;
  for (int i = 0; i < 2; ++i)
    ports.push_back(AddProxy(AddFake(Quick())).port());
  proxies_[0]->SetFaults(*ParseFaults("blackhole"));
  GatewayConfig c;
  c.port = 0;
  PoolSpec pool = ProxiedPool(ports, PolicyKind::kRoundRobin);
  pool.first_byte_timeout_ms = 300;
  pool.health.consecutive_failures = 1;
  pool.health.base_ejection_ms = 10'000;
  c.pools.push_back(pool);
  ASSERT_TRUE(FinalizeGatewayConfig(&c).ok());
  gw_ = std::make_unique<Gateway>(c);
  const uint16_t port = *gw_->Start();
  for (int i = 0; i < 6; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    HttpResponse r = Chat(port, i % 2 == 0);
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.Header("X-Gateway-Upstream"), "u1");
    // Only the first request pays the timeout; then u0 is out.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, i == 0 ? 1000ms : 200ms);
  }
  const std::string m = Http(port, "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(m,
                        "redline_gateway_upstream_ejections_total{pool=\"p\","
                        "upstream=\"u0\"}"),
            1);
  EXPECT_EQ(MetricValue(m,
                        "redline_gateway_upstream_errors_total{pool=\"p\","
                        "upstream=\"u0\",class=\"first_byte_timeout\"}"),
            1);
}

}  // namespace
}  // namespace redline::gateway
