// Traces through the gateway: the gateway's spans (root, attempts, route,
// cache lookup) as an OTLP receiver gets them, the traceparent each attempt
// sends upstream, one trace id from a client through the gateway into a
// real `redline serve` (the built binary) with its prefill-chunk spans, the
// Server-Timing header's gateway share, pass-through of traceparent when
// tracing is off, and a collector that is down costing no request.
// Loopback, port 0, every wait bounded.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/response.h"
#include "api/server_timing.h"
#include "base/thread_pool.h"
#include "bench/testing/fake_openai_server.h"
#include "gateway/gateway.h"
#include "gateway/gateway_config.h"
#include "gateway_test_util.h"
#include "http/sse.h"
#include "model/arch/synthetic.h"
#include "telemetry/testing/otlp_receiver.h"
#include "test_http_client.h"

namespace redline::gateway {
namespace {

using bench::testing::FakeOpenAiServer;
using bench::testing::FakePlan;
using bench::testing::FakeServerOptions;
using redline::testing::Http;
using redline::testing::HttpResponse;
using telemetry::testing::OtlpReceiver;
using telemetry::testing::ReceivedSpan;
using namespace testing;
using Headers = std::vector<std::pair<std::string, std::string>>;

constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kCallerSpan[] = "00f067aa0ba902b7";

std::string CallerTraceparent() {
  return std::string("00-") + kTraceId + "-" + kCallerSpan + "-01";
}

// The span id a traceparent names as its parent ("" when malformed).
std::string ParentOf(const std::string& traceparent) {
  if (traceparent.size() != 55) return "";
  return traceparent.substr(36, 16);
}

std::vector<ReceivedSpan> SpansOf(const OtlpReceiver& r,
                                  const std::string& service,
                                  const std::string& trace_id) {
  std::vector<ReceivedSpan> out;
  for (const ReceivedSpan& s : r.spans())
    if (s.service_name == service && s.trace_id == trace_id) out.push_back(s);
  return out;
}

const ReceivedSpan* Named(const std::vector<ReceivedSpan>& spans,
                          std::string_view prefix) {
  for (const ReceivedSpan& s : spans)
    if (s.name.starts_with(prefix)) return &s;
  return nullptr;
}

std::string Attr(const ReceivedSpan& s, const std::string& key) {
  auto it = s.attributes.find(key);
  return it == s.attributes.end() ? "" : it->second;
}

// Fake upstreams that remember the traceparent of every request.
class FakeUpstreams {
 public:
  std::string Add(FakePlan plan) {
    FakeServerOptions o;
    o.default_plan = plan;
    const size_t index = fakes_.size();
    o.plan_fn = [this, index](uint64_t, const http::ServerRequest& request,
                              const FakePlan& base) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_[index].emplace_back(request.HeaderValue("traceparent"));
      return base;
    };
    fakes_.push_back(std::make_unique<FakeOpenAiServer>(o));
    auto port = fakes_.back()->Start();
    EXPECT_TRUE(port.ok());
    return "http://127.0.0.1:" + std::to_string(*port);
  }
  std::vector<std::string> Seen(size_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_[index];
  }
  void Stop() {
    for (auto& f : fakes_) f->Stop();
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<std::string>> seen_;
  std::vector<std::unique_ptr<FakeOpenAiServer>> fakes_;
};

FakePlan Quick(int status = 200) {
  FakePlan p;
  p.ttft_us = 1000;
  p.gap_us = 200;
  p.tokens = 3;
  p.status = status;
  return p;
}

PoolSpec FakePool(const std::vector<std::string>& urls, PolicyKind policy) {
  PoolSpec p;
  p.name = "p";
  p.models = {{"fake", {}, {}}};
  p.policy = policy;
  for (size_t i = 0; i < urls.size(); ++i) {
    UpstreamSpec u;
    u.url = urls[i];
    u.name = "u" + std::to_string(i);
    p.upstreams.push_back(u);
  }
  p.probe.interval_ms = 100;
  p.probe.timeout_ms = 500;
  p.connect_timeout_ms = 500;
  p.first_byte_timeout_ms = 5000;
  p.retry_budget.min_per_s = 20;
  return p;
}

class GatewayTracingTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (gw_) {
      gw_->Shutdown();
      gw_->Wait();
      gw_.reset();
    }
    fakes_.Stop();
  }

  void StartGateway(PoolSpec pool, const std::string& otlp_endpoint) {
    GatewayConfig c;
    c.port = 0;
    c.shutdown_grace_s = 2;
    c.otlp_endpoint = otlp_endpoint;
    c.pools.push_back(std::move(pool));
    Status s = FinalizeGatewayConfig(&c);
    ASSERT_TRUE(s.ok()) << s.message();
    const size_t n = c.pools[0].upstreams.size();
    gw_ = std::make_unique<Gateway>(std::move(c));
    auto port = gw_->Start();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    ASSERT_TRUE(Eventually([&] {
      return MetricValue(
                 Http(port_, "GET", "/metrics").body,
                 "redline_gateway_pool_routable_upstreams{pool=\"p\"}") ==
             static_cast<double>(n);
    }));
  }

  HttpResponse Chat(const Headers& headers, const std::string& model = "fake",
                    bool stream = false) {
    return Http(port_, "POST", "/v1/chat/completions",
                ChatBody(model, {"hello there"}, stream), headers);
  }

  FakeUpstreams fakes_;
  std::unique_ptr<Gateway> gw_;
  uint16_t port_ = 0;
};

TEST_F(GatewayTracingTest, RootAndAttemptSpansJoinTheCallersTrace) {
  OtlpReceiver receiver;
  const std::string url = fakes_.Add(Quick());
  StartGateway(FakePool({url}, PolicyKind::kRoundRobin), receiver.endpoint());

  HttpResponse r = Chat({{"traceparent", CallerTraceparent()}});
  ASSERT_EQ(r.status, 200) << r.body;
  // The gateway's share is in Server-Timing.
  const auto timing = api::ParseServerTiming(r.Header("Server-Timing"));
  EXPECT_GE(api::TimingOf(timing, "gateway"), 0.0) << r.Header("Server-Timing");

  ASSERT_TRUE(receiver.WaitForSpans(2, 10'000));
  ASSERT_TRUE(Eventually(
      [&] {
        return SpansOf(receiver, "redline-gateway", kTraceId).size() >= 2;
      },
      5s));
  const auto spans = SpansOf(receiver, "redline-gateway", kTraceId);
  const ReceivedSpan* root = Named(spans, "chat");
  const ReceivedSpan* attempt = Named(spans, "upstream u0");
  ASSERT_NE(root, nullptr);
  ASSERT_NE(attempt, nullptr);
  EXPECT_EQ(root->name, "chat fake");
  EXPECT_EQ(root->kind, 2);  // server
  EXPECT_EQ(root->parent_span_id, kCallerSpan);
  EXPECT_EQ(Attr(*root, "gen_ai.operation.name"), "chat");
  EXPECT_EQ(Attr(*root, "gen_ai.request.model"), "fake");
  EXPECT_EQ(Attr(*root, "gen_ai.request.max_tokens"), "8");
  EXPECT_EQ(Attr(*root, "http.response.status_code"), "200");
  EXPECT_EQ(Attr(*root, "redline.pool"), "p");
  EXPECT_EQ(attempt->kind, 3);  // client
  EXPECT_EQ(attempt->parent_span_id, root->span_id);
  EXPECT_EQ(Attr(*attempt, "redline.attempt.kind"), "first");
  EXPECT_EQ(Attr(*attempt, "redline.attempt.outcome"), "answered");
  EXPECT_EQ(Attr(*attempt, "http.response.status_code"), "200");
  EXPECT_GE(attempt->start_unix_ns, root->start_unix_ns);
  EXPECT_LE(attempt->end_unix_ns, root->end_unix_ns);
  // The upstream saw the attempt's context, not the caller's.
  const auto seen = fakes_.Seen(0);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().substr(3, 32), kTraceId);
  EXPECT_EQ(ParentOf(seen.back()), attempt->span_id);
  EXPECT_TRUE(receiver.errors().empty()) << receiver.errors()[0];
}

TEST_F(GatewayTracingTest, EveryRetryIsItsOwnAttemptSpan) {
  OtlpReceiver receiver;
  const std::string failing = fakes_.Add(Quick(500));
  const std::string good = fakes_.Add(Quick());
  PoolSpec pool = FakePool({failing, good}, PolicyKind::kRoundRobin);
  pool.health.unhealthy_threshold = 100;  // keep the failing one routable
  StartGateway(pool, receiver.endpoint());

  // Round robin: one of two requests tries the failing upstream first.
  std::string retried_trace;
  for (int i = 0; i < 4 && retried_trace.empty(); ++i) {
    const std::string tid = fmt::format("{:032x}", 0xabc0 + i);
    HttpResponse r =
        Chat({{"traceparent", "00-" + tid + "-" + kCallerSpan + "-01"}});
    ASSERT_EQ(r.status, 200) << r.body;
    if (r.Header("X-Gateway-Upstream") == "u1" && !fakes_.Seen(0).empty() &&
        fakes_.Seen(0).back().substr(3, 32) == tid)
      retried_trace = tid;
  }
  ASSERT_FALSE(retried_trace.empty());
  ASSERT_TRUE(Eventually(
      [&] {
        return SpansOf(receiver, "redline-gateway", retried_trace).size() >= 3;
      },
      10s));
  const auto spans = SpansOf(receiver, "redline-gateway", retried_trace);
  const ReceivedSpan* first = Named(spans, "upstream u0");
  const ReceivedSpan* retry = Named(spans, "upstream u1");
  const ReceivedSpan* root = Named(spans, "chat");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(retry, nullptr);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(Attr(*first, "redline.attempt.outcome"), "failed");
  EXPECT_EQ(Attr(*first, "http.response.status_code"), "500");
  EXPECT_EQ(first->status_code, 2);  // ERROR
  EXPECT_EQ(Attr(*retry, "redline.attempt.kind"), "retry");
  EXPECT_EQ(Attr(*retry, "redline.attempt.outcome"), "answered");
  EXPECT_NE(first->span_id, retry->span_id);
  EXPECT_LE(first->end_unix_ns, retry->start_unix_ns + 1'000'000);
  EXPECT_EQ(Attr(*root, "redline.retries"), "1");
  EXPECT_NE(root->status_code, 2);  // the client got its answer
  // Each upstream saw its own attempt as the parent.
  EXPECT_EQ(ParentOf(fakes_.Seen(0).back()), first->span_id);
  EXPECT_EQ(ParentOf(fakes_.Seen(1).back()), retry->span_id);
}

TEST_F(GatewayTracingTest, AStreamsFinalChunkCarriesTheGatewaysShare) {
  const std::string url = fakes_.Add(Quick());
  StartGateway(FakePool({url}, PolicyKind::kRoundRobin), "");
  HttpResponse r = Chat({}, "fake", /*stream=*/true);
  ASSERT_EQ(r.status, 200) << r.body;
  const double header_ms = api::TimingOf(
      api::ParseServerTiming(r.Header("Server-Timing")), "gateway");
  ASSERT_GE(header_ms, 0.0) << r.Header("Server-Timing");
  // The upstream's timings object, in the last chunk, gains gateway_ms:
  // the same share as the header (which rounds to microseconds).
  int with_timings = 0;
  bool done = false;
  http::SseParser parser;
  auto take = [&](const http::SseEvent& e) {
    if (e.kind != http::SseEvent::Kind::kData) return;
    if (e.data == "[DONE]") {
      done = true;
      return;
    }
    api::StreamChunk chunk;
    ASSERT_TRUE(api::ParseStreamChunk(e.data, &chunk).ok()) << e.data;
    if (!chunk.timings) return;
    ++with_timings;
    EXPECT_GT(chunk.timings->e2e_ms, 0) << e.data;
    EXPECT_NEAR(chunk.timings->gateway_ms, header_ms, 0.001) << e.data;
  };
  parser.Feed(r.body, take);
  parser.Finish(take);
  EXPECT_EQ(with_timings, 1) << r.body;
  EXPECT_TRUE(done) << r.body;
}

TEST_F(GatewayTracingTest, WithoutTracingTheCallersTraceparentPassesThrough) {
  const std::string url = fakes_.Add(Quick());
  StartGateway(FakePool({url}, PolicyKind::kRoundRobin), "");
  HttpResponse r = Chat({{"traceparent", CallerTraceparent()}});
  ASSERT_EQ(r.status, 200);
  ASSERT_FALSE(fakes_.Seen(0).empty());
  EXPECT_EQ(fakes_.Seen(0).back(), CallerTraceparent());
  EXPECT_GE(api::TimingOf(api::ParseServerTiming(r.Header("Server-Timing")),
                          "gateway"),
            0.0);
}

TEST_F(GatewayTracingTest, ACollectorThatIsDownCostsNoRequest) {
  const std::string url = fakes_.Add(Quick());
  StartGateway(
      FakePool({url}, PolicyKind::kRoundRobin),
      "http://127.0.0.1:" + std::to_string(ClosedPort()) + "/v1/traces");
  for (int i = 0; i < 20; ++i) {
    HttpResponse r = Chat({});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  // The exporter's failures are counted on /metrics (it flushes once a
  // second).
  EXPECT_TRUE(Eventually(
      [&] {
        const std::string m = Http(port_, "GET", "/metrics").body;
        return MetricValue(m, "redline_trace_export_failures_total") >= 1 &&
               MetricValue(m,
                           "redline_trace_spans_dropped_total{reason="
                           "\"export\"}") >= 1;
      },
      15s));
}

TEST_F(GatewayTracingTest, OneTraceFromTheClientThroughTheGatewayIntoServe) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("redline_gateway_tracing_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "tiny.gguf").string();
  {
    auto spec = model::SyntheticPreset("tiny");
    ASSERT_TRUE(spec.ok());
    ThreadPool pool(1);
    ASSERT_TRUE(model::WriteSyntheticModel(*spec, kernels::DType::kQ8_0, 11,
                                           model, pool)
                    .ok());
  }
  OtlpReceiver receiver;
  const uint16_t serve_port = ClosedPort();
  const std::string log = (dir / "serve.log").string();
  // A small batch size, so a longer prompt is prefilled in several chunks.
  Child serve({RL_REDLINE_BIN,
               "serve",
               "-m",
               model,
               "-a",
               "tiny",
               "--port",
               std::to_string(serve_port),
               "--threads",
               "1",
               "--parallel",
               "2",
               "--ctx",
               "2048",
               "--batch-size",
               "16",
               "--otlp-endpoint",
               receiver.endpoint(),
               "--shutdown-grace",
               "1"},
              log);
  ASSERT_TRUE(Eventually(
      [&] { return Http(serve_port, "GET", "/readyz").status == 200; }, 60s))
      << ReadFile(log);
  PoolSpec pool = FakePool({"http://127.0.0.1:" + std::to_string(serve_port)},
                           PolicyKind::kLeastOutstanding);
  pool.models = {{"tiny", {}, {}}};
  pool.first_byte_timeout_ms = 30'000;
  StartGateway(pool, receiver.endpoint());

  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "the quick brown fox jumps ";
  HttpResponse r = Http(port_, "POST", "/v1/chat/completions",
                        ChatBody("tiny", {prompt}, false, 4),
                        {{"traceparent", CallerTraceparent()}});
  ASSERT_EQ(r.status, 200) << r.body;
  // serve's parts and the gateway's share, in one header.
  const auto timing = api::ParseServerTiming(r.Header("Server-Timing"));
  EXPECT_GE(api::TimingOf(timing, "queue"), 0.0) << r.Header("Server-Timing");
  EXPECT_GT(api::TimingOf(timing, "prefill"), 0.0);
  EXPECT_GE(api::TimingOf(timing, "decode"), 0.0);
  EXPECT_GT(api::TimingOf(timing, "e2e"), 0.0);
  EXPECT_GE(api::TimingOf(timing, "gateway"), 0.0);

  ASSERT_TRUE(Eventually(
      [&] {
        return SpansOf(receiver, "redline-gateway", kTraceId).size() >= 2 &&
               SpansOf(receiver, "redline-serve", kTraceId).size() >= 4;
      },
      15s))
      << receiver.spans().size() << " spans";
  const auto gw = SpansOf(receiver, "redline-gateway", kTraceId);
  const auto sv = SpansOf(receiver, "redline-serve", kTraceId);
  const ReceivedSpan* gw_root = Named(gw, "chat");
  const ReceivedSpan* attempt = Named(gw, "upstream");
  const ReceivedSpan* sv_root = Named(sv, "chat");
  const ReceivedSpan* prefill = Named(sv, "prefill");
  const ReceivedSpan* decode = Named(sv, "decode");
  ASSERT_NE(gw_root, nullptr);
  ASSERT_NE(attempt, nullptr);
  ASSERT_NE(sv_root, nullptr);
  ASSERT_NE(prefill, nullptr);
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(gw_root->parent_span_id, kCallerSpan);
  EXPECT_EQ(sv_root->parent_span_id, attempt->span_id);
  EXPECT_EQ(Attr(*sv_root, "gen_ai.request.model"), "tiny");
  EXPECT_FALSE(Attr(*sv_root, "gen_ai.usage.output_tokens").empty());
  EXPECT_FALSE(Attr(*sv_root, "redline.slot").empty());
  // One child per prefill chunk, each within the prefill span.
  int chunks = 0;
  for (const ReceivedSpan& s : sv) {
    if (s.name != "prefill chunk") continue;
    ++chunks;
    EXPECT_EQ(s.parent_span_id, prefill->span_id);
    EXPECT_FALSE(Attr(s, "redline.prefill.chunk_tokens").empty());
    EXPECT_FALSE(Attr(s, "redline.batch.tokens").empty());
  }
  EXPECT_GE(chunks, 2) << "a prompt longer than --batch takes several passes";
  EXPECT_EQ(Attr(*prefill, "redline.prefill.chunks"), std::to_string(chunks));
  EXPECT_FALSE(Attr(*decode, "redline.steps").empty());
  EXPECT_TRUE(receiver.errors().empty()) << receiver.errors()[0];

  // `redline bench` through the gateway: the trace id it reports for its
  // slowest request has the whole path, gateway and serve, in the receiver,
  // and its decomposition has the gateway's share and serve's parts.
  const std::string json_path = (dir / "bench.json").string();
  const std::string bench_log = (dir / "bench.log").string();
  {
    Child bench(
        {RL_REDLINE_BIN, "bench", "--url",
         "http://127.0.0.1:" + std::to_string(port_) + "/v1", "-m", "tiny",
         "--requests", "12", "--users", "2", "-n", "4", "--json", json_path},
        bench_log);
    const int status = bench.Stop(0, std::chrono::seconds(90));
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << status << "\n"
        << ReadFile(bench_log);
  }
  boost::system::error_code ec;
  const boost::json::value report = boost::json::parse(ReadFile(json_path), ec);
  ASSERT_FALSE(ec) << ReadFile(json_path).substr(0, 400);
  const boost::json::value& slowest =
      report.at("traces").at("slowest").as_array().at(0);
  const std::string tid(slowest.at("trace_id").as_string());
  ASSERT_EQ(tid.size(), 32u);
  const boost::json::object& parts = slowest.at("parts_ms").as_object();
  EXPECT_GE(parts.at("gateway").to_number<double>(), 0.0);
  EXPECT_GT(parts.at("prefill").to_number<double>(), 0.0);
  ASSERT_TRUE(Eventually(
      [&] {
        return Named(SpansOf(receiver, "redline-gateway", tid), "upstream") !=
                   nullptr &&
               Named(SpansOf(receiver, "redline-serve", tid), "decode") !=
                   nullptr;
      },
      15s))
      << tid;
  const auto bgw = SpansOf(receiver, "redline-gateway", tid);
  const auto bsv = SpansOf(receiver, "redline-serve", tid);
  EXPECT_EQ(Named(bsv, "chat")->parent_span_id,
            Named(bgw, "upstream")->span_id);
  EXPECT_FALSE(Attr(*Named(bgw, "chat"), "gen_ai.request.model").empty());
  EXPECT_FALSE(Attr(*Named(bsv, "chat"), "gen_ai.usage.output_tokens").empty());
  EXPECT_TRUE(receiver.errors().empty()) << receiver.errors()[0];
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace redline::gateway
