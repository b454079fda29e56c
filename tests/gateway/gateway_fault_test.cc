// The gateway in front of fake OpenAI servers with injected latency,
// errors, drops and stalls (bench/testing/fake_openai_server.h): routing,
// retries before the first byte, in-stream errors after it, ejection,
// back-off, admission, hedging, cancellation and the wire format of
// errors. Loopback, port 0, every wait bounded.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/error.h"
#include "api/response.h"
#include "bench/testing/fake_openai_server.h"
#include "gateway/gateway.h"
#include "gateway/gateway_config.h"
#include "gateway_test_util.h"
#include "http/server.h"
#include "http/sse.h"
#include "test_http_client.h"

namespace redline::gateway {
namespace {

using bench::testing::FakeOpenAiServer;
using bench::testing::FakePlan;
using bench::testing::FakeServerOptions;
using redline::testing::Http;
using redline::testing::HttpResponse;
using redline::testing::TestConnection;
using namespace testing;
using Headers = std::vector<std::pair<std::string, std::string>>;

class GatewayFaultTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (gw_) {
      gw_->Shutdown();
      gw_->Wait();
      gw_.reset();
    }
    for (auto& f : fakes_) f->Stop();
  }

  // Starts a fake upstream with `plan`; returns its URL.
  std::string AddFake(FakePlan plan = Quick()) {
    FakeServerOptions o;
    o.default_plan = plan;
    fakes_.push_back(std::make_unique<FakeOpenAiServer>(o));
    auto port = fakes_.back()->Start();
    EXPECT_TRUE(port.ok());
    return "http://127.0.0.1:" + std::to_string(*port);
  }

  static FakePlan Quick() {
    FakePlan p;
    p.ttft_us = 1000;
    p.gap_us = 500;
    p.tokens = 4;
    return p;
  }

  PoolSpec Pool(const std::vector<std::string>& urls) {
    PoolSpec p;
    p.name = "p";
    p.models = {{"fake", {"alias"}, {}}};
    for (size_t i = 0; i < urls.size(); ++i) {
      UpstreamSpec u;
      u.url = urls[i];
      u.name = "u" + std::to_string(i);
      p.upstreams.push_back(u);
    }
    p.probe.interval_ms = 100;
    p.probe.timeout_ms = 500;
    p.health.unhealthy_threshold = 1;
    p.health.base_ejection_ms = 500;
    p.connect_timeout_ms = 500;
    p.first_byte_timeout_ms = 5000;
    p.retry_budget.min_per_s = 20;
    return p;
  }

  uint16_t Start(PoolSpec pool, std::vector<std::string> keys = {}) {
    GatewayConfig c;
    c.port = 0;
    c.api_keys = std::move(keys);
    c.shutdown_grace_s = 2;
    c.pools.push_back(std::move(pool));
    Status s = FinalizeGatewayConfig(&c);
    EXPECT_TRUE(s.ok()) << s.message();
    const size_t n = c.pools[0].upstreams.size();
    gw_ = std::make_unique<Gateway>(std::move(c));
    auto port = gw_->Start();
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    // Every upstream that listens has passed a probe.
    Eventually([&] {
      return MetricValue(
                 Metrics(),
                 "redline_gateway_pool_routable_upstreams{pool=\"p\"}") >=
             static_cast<double>(n - dead_);
    });
    return port_;
  }

  HttpResponse Chat(bool stream, const Headers& h = {},
                    const std::string& model = "fake") {
    return Http(port_, "POST", "/v1/chat/completions",
                ChatBody(model, {"hello"}, stream), h);
  }
  std::string Metrics() { return Http(port_, "GET", "/metrics").body; }
  double Metric(const std::string& series) {
    return MetricValue(Metrics(), "redline_gateway_" + series);
  }

  std::vector<std::unique_ptr<FakeOpenAiServer>> fakes_;
  std::unique_ptr<Gateway> gw_;
  uint16_t port_ = 0;
  size_t dead_ = 0;  // upstreams expected down at start
};

TEST_F(GatewayFaultTest, ForwardsStreamsAndBodiesAndSpreadsLoad) {
  Start(Pool({AddFake(), AddFake(), AddFake()}));
  std::map<std::string, int> per_upstream;
  for (int i = 0; i < 12; ++i) {
    HttpResponse r =
        Chat(i % 2 == 0, {{"X-Request-Id", "rid-" + std::to_string(i)}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Header("X-Request-Id"), "rid-" + std::to_string(i));
    per_upstream[r.Header("X-Gateway-Upstream")]++;
    if (i % 2 == 0) {
      StreamRead s = ReadStream(r);
      EXPECT_EQ(r.Header("Content-Type"), "text/event-stream");
      EXPECT_TRUE(s.done && s.clean_end);
      EXPECT_EQ(s.text, " w0 w1 w2 w3");
    } else {
      EXPECT_NE(r.body.find("\" w0 w1 w2 w3\""), std::string::npos) << r.body;
    }
  }
  EXPECT_EQ(per_upstream.size(), 3u);
  EXPECT_EQ(Http(port_, "GET", "/readyz").status, 200);
  EXPECT_EQ(Http(port_, "GET", "/livez").status, 200);
  EXPECT_NE(Http(port_, "GET", "/v1/models").body.find("\"alias\""),
            std::string::npos);
  EXPECT_EQ(Http(port_, "GET", "/v1/models/alias").status, 200);
  EXPECT_EQ(Chat(false, {}, "alias").status, 200);
  const std::string m = Metrics();
  EXPECT_EQ(
      MetricValue(m, "redline_gateway_requests_total{pool=\"p\",code=\"200\"}"),
      13);
  EXPECT_EQ(MetricSum(m, "redline_gateway_upstream_requests_total"), 13);
  EXPECT_GT(
      MetricValue(m, "redline_gateway_overhead_seconds_count{pool=\"p\"}"), 0);
  EXPECT_GT(MetricSum(m, "redline_gateway_upstream_ttft_seconds_count"), 0);
}

TEST_F(GatewayFaultTest, BadRequestsGetServesErrorBodies) {
  Start(Pool({AddFake()}), {"key1"});
  const Headers auth = {{"Authorization", "Bearer key1"}};
  HttpResponse r =
      Http(port_, "POST", "/v1/chat/completions", "{not json", auth);
  EXPECT_EQ(r.status, 400);
  auto e = api::ParseErrorBody(r.body);
  ASSERT_TRUE(e.has_value()) << r.body;
  EXPECT_EQ(e->type, "invalid_request_error");

  r = Http(
      port_, "POST", "/v1/chat/completions",
      R"({"model":"fake","messages":[{"role":"user","content":"x"}],"temperature":"hot"})",
      auth);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(api::ParseErrorBody(r.body)->param, "temperature");

  r = Chat(false, auth, "gpt-9");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(api::ParseErrorBody(r.body)->code, "model_not_found");
  EXPECT_NE(r.body.find("'fake'"), std::string::npos) << r.body;

  r = Chat(false);  // no key
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.Header("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(Http(port_, "GET", "/v1/chat/completions", "", auth).status, 405);
  EXPECT_EQ(Http(port_, "GET", "/nope").status, 404);
  EXPECT_EQ(Http(port_, "GET", "/readyz").status, 200);  // probes need no key
  EXPECT_EQ(fakes_[0]->requests(), 0u) << "nothing bad went upstream";
}

TEST_F(GatewayFaultTest, DeadUpstreamIsRetriedAroundAndEjected) {
  dead_ = 1;
  PoolSpec p = Pool({"http://127.0.0.1:" + std::to_string(ClosedPort()),
                     AddFake(), AddFake()});
  p.probe.interval_ms = 0;  // passive ejection alone
  p.policy = PolicyKind::kRoundRobin;
  Start(p);
  for (int i = 0; i < 20; ++i) {
    HttpResponse r = Chat(i % 2 == 0);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.Header("X-Gateway-Upstream"), "u0");
  }
  const std::string m = Metrics();
  EXPECT_GE(MetricValue(m,
                        "redline_gateway_upstream_ejections_total{pool=\"p\","
                        "upstream=\"u0\"}"),
            1);
  EXPECT_GE(
      MetricValue(
          m, "redline_gateway_retries_total{pool=\"p\",class=\"connect\"}"),
      3);
  EXPECT_EQ(
      MetricValue(
          m, "redline_gateway_upstream_healthy{pool=\"p\",upstream=\"u0\"}"),
      0);
  EXPECT_EQ(
      MetricValue(m, "redline_gateway_requests_total{pool=\"p\",code=\"200\"}"),
      20);
}

TEST_F(GatewayFaultTest, ServerErrorsAndDropsBeforeTheFirstTokenAreRetried) {
  FakePlan bad = Quick();
  bad.status = 500;
  FakePlan drop = Quick();
  drop.drop_before_headers = true;
  FakePlan early_error = Quick();
  early_error.error_after = 0;  // an error event before any token
  PoolSpec p =
      Pool({AddFake(bad), AddFake(drop), AddFake(early_error), AddFake()});
  p.retries = 3;
  p.health.consecutive_failures = 0;  // keep them all in rotation
  p.policy = PolicyKind::kRoundRobin;
  Start(p);
  for (int i = 0; i < 16; ++i) {
    HttpResponse r = Chat(true);
    ASSERT_EQ(r.status, 200) << r.body;
    StreamRead s = ReadStream(r);
    EXPECT_EQ(r.Header("X-Gateway-Upstream"), "u3");
    EXPECT_TRUE(s.done && !s.error_event) << r.body;
  }
  const std::string m = Metrics();
  EXPECT_GT(MetricValue(m,
                        "redline_gateway_upstream_errors_total{pool=\"p\","
                        "upstream=\"u0\",class=\"http_5xx\"}"),
            0);
  EXPECT_GT(MetricValue(m,
                        "redline_gateway_upstream_errors_total{pool=\"p\","
                        "upstream=\"u1\",class=\"reset\"}"),
            0);
  EXPECT_GT(MetricValue(m,
                        "redline_gateway_upstream_errors_total{pool=\"p\","
                        "upstream=\"u2\",class=\"stream_error\"}"),
            0);
  EXPECT_EQ(MetricSum(m, "redline_gateway_stream_errors_total"), 0);
}

TEST_F(GatewayFaultTest, LastAnswerIsPassedThroughWhenEveryTryFails) {
  FakePlan bad = Quick();
  bad.status = 500;
  PoolSpec p = Pool({AddFake(bad), AddFake(bad)});
  p.health.consecutive_failures = 0;
  Start(p);
  HttpResponse r = Chat(false);
  EXPECT_EQ(r.status, 500);
  EXPECT_TRUE(api::ParseErrorBody(r.body).has_value()) << r.body;
  EXPECT_EQ(Metric("retries_total{pool=\"p\",class=\"http_5xx\"}"), 1);
}

TEST_F(GatewayFaultTest, MidStreamFailureEndsWithAnErrorEventNeverARetry) {
  FakePlan cut = Quick();
  cut.tokens = 8;
  cut.disconnect_after = 3;
  PoolSpec p = Pool({AddFake(cut), AddFake(cut)});
  Start(p);
  HttpResponse r = Chat(true);
  ASSERT_EQ(r.status, 200);
  StreamRead s = ReadStream(r);
  EXPECT_TRUE(s.clean_end) << r.error;
  EXPECT_TRUE(s.error_event) << r.body;
  EXPECT_FALSE(s.done);
  EXPECT_EQ(s.text, " w0 w1 w2");  // what arrived, once
  EXPECT_NE(s.data.back().find("failed mid-stream"), std::string::npos);
  const std::string m = Metrics();
  EXPECT_EQ(MetricSum(m, "redline_gateway_stream_errors_total"), 1);
  EXPECT_EQ(MetricSum(m, "redline_gateway_retries_total"), 0);
  EXPECT_EQ(fakes_[0]->requests() + fakes_[1]->requests(), 1u);
}

TEST_F(GatewayFaultTest, StalledUpstreamHitsFirstByteTimeoutAndIsRetried) {
  FakePlan stall = Quick();
  stall.ttft_us = 30'000'000;  // never answers in time
  PoolSpec p = Pool({AddFake(stall), AddFake()});
  p.first_byte_timeout_ms = 200;
  p.policy = PolicyKind::kRoundRobin;
  p.health.consecutive_failures = 1;
  Start(p);
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    HttpResponse r = Chat(i % 2 == 0);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Header("X-Gateway-Upstream"), "u1");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  }
  EXPECT_GE(Metric("upstream_errors_total{pool=\"p\",upstream=\"u0\",class="
                   "\"first_byte_timeout\"}"),
            1);
  EXPECT_GE(Metric("upstream_ejections_total{pool=\"p\",upstream=\"u0\"}"), 1);
}

TEST_F(GatewayFaultTest, TotalOutageAnswersAtOnceAndRetriesStayInBudget) {
  PoolSpec p = Pool({AddFake(), AddFake()});
  p.retry_budget.min_per_s = 1;
  p.retry_budget.ratio = 0.2;
  p.retry_budget.window_ms = 10'000;
  Start(p);
  ASSERT_EQ(Chat(false).status, 200);
  for (auto& f : fakes_) f->Stop();
  // Until probes notice: fast 502s (connection refused); then 503 at once.
  int answered = 0;
  for (int i = 0; i < 40; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    HttpResponse r = Chat(i % 2 == 0);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
    EXPECT_TRUE(r.status == 502 || r.status == 503) << r.status << r.body;
    if (r.status == 503) {
      EXPECT_GE(std::atoi(r.Header("Retry-After").c_str()), 1);
      EXPECT_EQ(api::ParseErrorBody(r.body)->type, "unavailable_error");
    }
    answered += r.status != 0;
  }
  EXPECT_EQ(answered, 40);
  int more = 0;
  EXPECT_TRUE(Eventually(
      [&] {
        ++more;
        return Chat(false).status == 503;
      },
      3s));
  EXPECT_EQ(Http(port_, "GET", "/readyz").status, 503);
  const std::string m = Metrics();
  // The floor of 1/s over 10 s plus 20 % of the requests.
  const int requests = 41 + more;
  EXPECT_LE(MetricSum(m, "redline_gateway_retries_total"),
            10 + requests * 0.2 + 1);
  EXPECT_GT(MetricValue(m,
                        "redline_gateway_admission_refused_total{pool=\"p\","
                        "reason=\"unavailable\"}"),
            0);
  // Every answer counted once.
  EXPECT_EQ(MetricSum(m, "redline_gateway_requests_total", {"pool=\"p\""}),
            requests);
}

TEST_F(GatewayFaultTest, SaturatedPoolRefusesWith429AtOnce) {
  FakePlan slow = Quick();
  slow.ttft_us = 800'000;
  PoolSpec p = Pool({AddFake(slow), AddFake(slow)});
  p.max_in_flight = 1;
  Start(p);
  std::vector<std::thread> busy;
  for (int i = 0; i < 2; ++i)
    busy.emplace_back([&] { EXPECT_EQ(Chat(false).status, 200); });
  ASSERT_TRUE(Eventually([&] {
    return MetricSum(Metrics(), "redline_gateway_upstream_in_flight") == 2;
  }));
  const auto t0 = std::chrono::steady_clock::now();
  HttpResponse r = Chat(true);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 300ms);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.Header("Retry-After"), "1");
  EXPECT_EQ(api::ParseErrorBody(r.body)->type, "rate_limit_error");
  for (auto& t : busy) t.join();
  EXPECT_EQ(Metric("admission_refused_total{pool=\"p\",reason=\"busy\"}"), 1);
}

// An upstream that always answers 429 with Retry-After: 2.
class BusyUpstream {
 public:
  BusyUpstream() {
    http::ServerOptions o;
    server_ = std::make_unique<http::Server>(
        loop_, o,
        [this](http::ServerRequest&& r,
               std::shared_ptr<http::ResponseWriter> w) {
          if (r.method == "GET") {
            w->Respond(200, {}, "{}");
            return;
          }
          ++hits;
          w->Respond(
              429, {{"Retry-After", "2"}, {"Content-Type", "application/json"}},
              api::BuildErrorBody(api::ApiError::Overloaded("busy", 2)));
        });
    port = *server_->Start();
    thread_ = std::thread([this] { loop_.Run(); });
  }
  ~BusyUpstream() {
    loop_.Post([this] { server_->Stop(); });
    loop_.Stop();
    thread_.join();
  }
  std::atomic<int> hits{0};
  uint16_t port = 0;

 private:
  http::EventLoop loop_;
  std::unique_ptr<http::Server> server_;
  std::thread thread_;
};

TEST_F(GatewayFaultTest, RetryAfterBacksOffWithoutEjecting) {
  BusyUpstream busy;
  PoolSpec p =
      Pool({"http://127.0.0.1:" + std::to_string(busy.port), AddFake()});
  p.policy = PolicyKind::kRoundRobin;
  Start(p);
  for (int i = 0; i < 6; ++i) ASSERT_EQ(Chat(false).status, 200);
  EXPECT_EQ(busy.hits.load(), 1) << "backed off for 2 s after the first 429";
  const std::string m = Metrics();
  EXPECT_EQ(MetricValue(m,
                        "redline_gateway_upstream_backoffs_total{pool=\"p\","
                        "upstream=\"u0\"}"),
            1);
  EXPECT_EQ(MetricValue(m,
                        "redline_gateway_upstream_ejections_total{pool=\"p\","
                        "upstream=\"u0\"}"),
            0);
  EXPECT_EQ(MetricValue(m,
                        "redline_gateway_upstream_errors_total{pool=\"p\","
                        "upstream=\"u0\",class=\"busy\"}"),
            1);
  EXPECT_EQ(
      MetricValue(
          m, "redline_gateway_upstream_healthy{pool=\"p\",upstream=\"u0\"}"),
      0);
  // Back in rotation once Retry-After has passed.
  EXPECT_TRUE(Eventually(
      [&] {
        Chat(false);
        return busy.hits.load() >= 2;
      },
      5s));
}

// Answers as llama.cpp's server does where it differs: no /readyz (404),
// /health, its /v1/models list, JSON and SSE completions.
class LlamaCppLikeUpstream {
 public:
  LlamaCppLikeUpstream() {
    http::ServerOptions o;
    server_ = std::make_unique<http::Server>(
        loop_, o,
        [this](http::ServerRequest&& r,
               std::shared_ptr<http::ResponseWriter> w) {
          const std::vector<http::Header> json = {
              {"Content-Type", "application/json; charset=utf-8"}};
          const std::string_view path = r.Path();
          if (path == "/health") {
            w->Respond(200, json, R"({"status":"ok"})");
          } else if (path == "/v1/models") {
            w->Respond(200, json,
                       R"({"object":"list","data":[{"id":"llama-model.gguf",)"
                       R"("object":"model","created":1,"owned_by":"llamacpp",)"
                       R"("meta":{"n_vocab":32000}}]})");
          } else if (r.method == "POST") {
            ++completions;
            const api::ResponseIdentity id{"chatcmpl-x", "llama-model.gguf", 1};
            if (r.body.find("\"stream\":true") != std::string::npos) {
              w->BeginStream(200, {{"Content-Type", "text/event-stream"}});
              api::ChunkChoice c;
              c.text = "from llama";
              w->Write(
                  http::SseData(api::BuildChunk(api::ApiKind::kChat, id, {c})));
              api::ChunkChoice f;
              f.finish_reason = "stop";
              w->Write(
                  http::SseData(api::BuildChunk(api::ApiKind::kChat, id, {f})));
              w->Write(http::SseData("[DONE]"));
              w->End();
            } else {
              api::FinalChoice c{"from llama", "stop", {}, false};
              w->Respond(200, json,
                         api::BuildResponse(api::ApiKind::kChat, id, {c}, {}));
            }
          } else {
            w->Respond(
                404, json,
                R"({"error":{"code":404,"message":"File Not Found","type":"not_found_error"}})");
          }
        });
    port = *server_->Start();
    thread_ = std::thread([this] { loop_.Run(); });
  }
  ~LlamaCppLikeUpstream() {
    loop_.Post([this] { server_->Stop(); });
    loop_.Stop();
    thread_.join();
  }
  std::atomic<int> completions{0};
  uint16_t port = 0;

 private:
  http::EventLoop loop_;
  std::unique_ptr<http::Server> server_;
  std::thread thread_;
};

TEST_F(GatewayFaultTest, LlamaCppServerWorksNextToOtherUpstreams) {
  LlamaCppLikeUpstream llama;
  PoolSpec p =
      Pool({"http://127.0.0.1:" + std::to_string(llama.port), AddFake()});
  p.policy = PolicyKind::kRoundRobin;
  Start(p);  // waits until both are routable: llama via /health
  std::map<std::string, int> seen;
  for (int i = 0; i < 8; ++i) {
    HttpResponse r = Chat(i % 4 < 2);
    ASSERT_EQ(r.status, 200) << r.body;
    seen[r.Header("X-Gateway-Upstream")]++;
    if (r.Header("X-Gateway-Upstream") == "u0") {
      EXPECT_NE(r.body.find("from llama"), std::string::npos) << r.body;
    }
  }
  EXPECT_EQ(seen["u0"], 4);
  EXPECT_EQ(seen["u1"], 4);
  // Discovery reads llama.cpp's /v1/models.
  gw_->Shutdown();
  gw_->Wait();
  gw_.reset();
  PoolSpec d = Pool({"http://127.0.0.1:" + std::to_string(llama.port)});
  d.models.clear();
  Start(d);
  EXPECT_TRUE(Eventually([&] {
    return Http(port_, "GET", "/v1/models").body.find("llama-model.gguf") !=
           std::string::npos;
  }));
  EXPECT_EQ(Chat(false, {}, "llama-model.gguf").status, 200);
}

TEST_F(GatewayFaultTest, ClientDisconnectCancelsTheUpstreamAtOnce) {
  FakePlan longer = Quick();
  longer.tokens = 2000;
  longer.gap_us = 5000;
  Start(Pool({AddFake(longer)}));
  TestConnection c;
  ASSERT_TRUE(c.Connect(port_));
  ASSERT_TRUE(c.SendRequest("POST", "/v1/chat/completions",
                            ChatBody("fake", {"x"}, true)));
  int pieces = 0;
  c.ReadResponse([&](std::string_view) { return ++pieces < 3; });
  c.Close();
  EXPECT_TRUE(Eventually(
      [&] {
        return MetricSum(Metrics(), "redline_gateway_upstream_in_flight") == 0;
      },
      2s));
  std::this_thread::sleep_for(100ms);
  const size_t chunks = fakes_[0]->Truths().at(0).chunk_write_ns.size();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(fakes_[0]->Truths().at(0).chunk_write_ns.size(), chunks)
      << "the upstream stream kept going";
  EXPECT_LT(chunks, 200u);
  EXPECT_EQ(Metric("client_cancelled_total{pool=\"p\"}"), 1);
}

TEST_F(GatewayFaultTest, HedgeWinsAgainstAStalledUpstream) {
  FakePlan stall = Quick();
  stall.ttft_us = 3'000'000;
  PoolSpec p = Pool({AddFake(stall), AddFake()});
  p.hedge = HedgeMode::kFixed;
  p.hedge_after_ms = 100;
  p.policy = PolicyKind::kRoundRobin;
  p.health.consecutive_failures = 0;
  Start(p);
  for (int i = 0; i < 6; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    HttpResponse r = Chat(i % 2 == 0);
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.Header("X-Gateway-Upstream"), "u1");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
  }
  const std::string m = Metrics();
  EXPECT_GE(MetricValue(m, "redline_gateway_hedges_total{pool=\"p\"}"), 3);
  EXPECT_EQ(MetricValue(m, "redline_gateway_hedges_won_total{pool=\"p\"}"),
            MetricValue(m, "redline_gateway_hedges_total{pool=\"p\"}"));
  EXPECT_TRUE(Eventually(
      [&] {
        return MetricSum(Metrics(), "redline_gateway_upstream_in_flight") == 0;
      },
      1s))
      << "losers are cancelled";
}

TEST_F(GatewayFaultTest, PrefixAffinityKeepsEachSessionOnOneUpstream) {
  PoolSpec p = Pool({AddFake(), AddFake(), AddFake()});
  p.policy = PolicyKind::kPrefixAffinity;
  Start(p);
  std::set<std::string> used;
  for (int session = 0; session < 12; ++session) {
    std::vector<std::string> turns = {"session " + std::to_string(session)};
    std::string home;
    for (int turn = 0; turn < 3; ++turn) {
      HttpResponse r =
          Http(port_, "POST", "/v1/chat/completions",
               ChatBody("fake", turns, turn % 2 == 0, 8, "Be brief."));
      ASSERT_EQ(r.status, 200);
      const std::string up = r.Header("X-Gateway-Upstream");
      if (turn == 0) home = up;
      EXPECT_EQ(up, home) << "session " << session << " turn " << turn;
      turns.push_back("reply " + std::to_string(turn));
      turns.push_back("more " + std::to_string(turn));
    }
    used.insert(home);
  }
  EXPECT_GE(used.size(), 2u) << "sessions spread over the replicas";
}

TEST_F(GatewayFaultTest, LatencyPolicyAvoidsTheSlowUpstream) {
  FakePlan slow = Quick();
  slow.ttft_us = 150'000;
  PoolSpec p = Pool({AddFake(slow), AddFake(), AddFake()});
  p.policy = PolicyKind::kLatency;
  Start(p);
  std::map<std::string, int> share;
  for (int i = 0; i < 60; ++i)
    share[Chat(i % 2 == 0).Header("X-Gateway-Upstream")]++;
  EXPECT_LT(share["u0"], 6) << "u0 got " << share["u0"] << " of 60";
}

TEST_F(GatewayFaultTest, ModelRenamedForTheUpstream) {
  PoolSpec p = Pool({AddFake()});
  p.models = {{"public-name", {}, "fake-internal"}};
  Start(p);
  ASSERT_EQ(Chat(false, {}, "public-name").status, 200);
  const std::string body = fakes_[0]->Truths().at(0).body;
  EXPECT_NE(body.find("\"model\":\"fake-internal\""), std::string::npos)
      << body;
}

TEST_F(GatewayFaultTest, ShutdownDrainsThenRefuses) {
  FakePlan slow = Quick();
  slow.ttft_us = 300'000;
  Start(Pool({AddFake(slow)}));
  std::thread in_flight([&] { EXPECT_EQ(Chat(true).status, 200); });
  ASSERT_TRUE(Eventually([&] {
    return MetricSum(Metrics(), "redline_gateway_upstream_in_flight") == 1;
  }));
  gw_->Shutdown();
  in_flight.join();
  gw_->Wait();
  gw_.reset();
}

}  // namespace
}  // namespace redline::gateway
