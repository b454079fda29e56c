#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "telemetry/request_trace.h"
#include "telemetry/span_json.h"
#include "telemetry/testing/otlp_receiver.h"
#include "telemetry/trace_context.h"
#include "telemetry/tracer.h"

namespace redline::telemetry {
namespace {

constexpr char kValid[] =
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceparentTest, ParsesTheSpecificationExample) {
  auto ctx = ParseTraceparent(kValid, "rojo=00f067aa0ba902b7");
  ASSERT_TRUE(ctx.has_value());
  EXPECT_EQ(ctx->trace_id.Hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(ctx->parent_span_id.Hex(), "00f067aa0ba902b7");
  EXPECT_TRUE(ctx->sampled);
  EXPECT_EQ(ctx->tracestate, "rojo=00f067aa0ba902b7");
  EXPECT_EQ(FormatTraceparent(ctx->trace_id, ctx->parent_span_id, true),
            kValid);
}

TEST(TraceparentTest, MalformedHeadersAreIgnored) {
  const char* bad[] = {
      "",
      "garbage",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero span
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // 00 + more
      "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
  };
  for (const char* h : bad) EXPECT_FALSE(ParseTraceparent(h).has_value()) << h;
}

TEST(TraceparentTest, LaterVersionsMayAppendFields) {
  auto ctx = ParseTraceparent(
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra");
  ASSERT_TRUE(ctx.has_value());
  EXPECT_FALSE(ctx->sampled);
}

TEST(TraceparentTest, OversizedTracestateIsDropped) {
  auto ctx = ParseTraceparent(kValid, std::string(600, 'a'));
  ASSERT_TRUE(ctx.has_value());
  EXPECT_TRUE(ctx->tracestate.empty());
}

TEST(TraceIdTest, NewIdsAreValidAndDistinct) {
  std::map<std::string, int> seen;
  for (int i = 0; i < 1000; ++i) {
    TraceId t = NewTraceId();
    ASSERT_TRUE(t.valid());
    ++seen[t.Hex()];
    ASSERT_TRUE(NewSpanId().valid());
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(SamplingTest, RatioIsHonouredWithinStatisticalBounds) {
  // Binomial(20000, 0.1): sigma = 42.4; 5 sigma = 212.
  const int n = 20000;
  int kept = 0;
  for (int i = 0; i < n; ++i) kept += SampledByRatio(NewTraceId(), 0.1);
  EXPECT_NEAR(kept, 2000, 212);
  EXPECT_FALSE(SampledByRatio(NewTraceId(), 0.0));
  EXPECT_TRUE(SampledByRatio(NewTraceId(), 1.0));
}

TEST(RequestTraceTest, JoinsTheCallersTraceAndFollowsItsFlag) {
  auto parent = ParseTraceparent(
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  RequestTrace t(parent, "chat", SpanKind::kServer, 1000, /*ratio=*/1.0);
  EXPECT_EQ(t.trace_id().Hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_FALSE(t.sampled());  // the caller said not sampled
  SpanId child = t.AddSpan("parse", t.root_span_id(), 1000, 2000);
  EXPECT_TRUE(child.valid());
  std::string tp = t.TraceparentFor(child);
  auto back = ParseTraceparent(tp);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->trace_id, t.trace_id());
  EXPECT_EQ(back->parent_span_id, child);
  t.End(5000, false, "");
  std::vector<SpanRecord> spans = t.TakeSpans();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].parent_span_id.Hex(), "00f067aa0ba902b7");
  EXPECT_EQ(spans[1].parent_span_id, spans[0].span_id);
}

TEST(RequestTraceTest, SpanCountIsBounded) {
  RequestTrace t(std::nullopt, "r", SpanKind::kServer, 0, 1.0);
  for (size_t i = 0; i < kMaxSpansPerTrace + 10; ++i)
    t.AddSpan("s", t.root_span_id(), 0, 1);
  t.End(2, false, "");
  EXPECT_EQ(t.span_count(), kMaxSpansPerTrace);
  std::vector<SpanRecord> spans = t.TakeSpans();
  bool found = false;
  for (const Attribute& a : spans[0].attributes)
    if (a.key == "redline.spans_dropped") found = true;
  EXPECT_TRUE(found);
}

std::vector<SpanRecord> SampleSpans() {
  RequestTrace t(std::nullopt, "chat \"q\"", SpanKind::kServer, 1'000'000'000,
                 1.0);
  t.SetAttribute("gen_ai.request.model", std::string("smollm2"));
  t.SetAttribute("gen_ai.request.max_tokens", int64_t{64});
  t.SetAttribute("gen_ai.request.temperature", 0.5);
  t.SetAttribute("redline.stream", true);
  t.AddSpan("queue", t.root_span_id(), 1'000'000'000, 1'000'500'000,
            {{"redline.slot", int64_t{-3}}});
  t.End(1'002'000'000, true, "deadline");
  return t.TakeSpans();
}

TEST(OtlpJsonTest, MatchesTheSpecificationFieldByField) {
  ResourceInfo res;
  res.service_name = "redline-serve";
  res.service_version = "1.2";
  std::vector<SpanRecord> spans = SampleSpans();
  const std::string body = EncodeOtlpJson(res, spans);
  std::vector<testing::ReceivedSpan> got;
  std::vector<std::string> errors;
  testing::ValidateOtlpJson(body, &got, &errors);
  EXPECT_TRUE(errors.empty()) << errors.front();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].service_name, "redline-serve");
  EXPECT_EQ(got[0].name, "chat \"q\"");
  EXPECT_EQ(got[0].kind, 2);
  EXPECT_EQ(got[0].start_unix_ns, 1'000'000'000);
  EXPECT_EQ(got[0].end_unix_ns, 1'002'000'000);
  EXPECT_EQ(got[0].attributes["gen_ai.request.model"], "smollm2");
  EXPECT_EQ(got[0].attributes["gen_ai.request.max_tokens"], "64");
  EXPECT_EQ(got[0].attributes["gen_ai.request.temperature"], "0.5");
  EXPECT_EQ(got[0].attributes["redline.stream"], "true");
  EXPECT_EQ(got[0].status_code, 2);
  EXPECT_TRUE(got[0].parent_span_id.empty());
  EXPECT_EQ(got[1].parent_span_id, got[0].span_id);
  EXPECT_EQ(got[1].trace_id, got[0].trace_id);
  EXPECT_EQ(got[1].attributes["redline.slot"], "-3");
  // Raw shape details a receiver relies on.
  boost::json::value v = boost::json::parse(body);
  const auto& span0 =
      v.at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans").at(0);
  EXPECT_TRUE(span0.at("startTimeUnixNano").is_string());
  EXPECT_EQ(span0.at("status").at("message").as_string(), "deadline");
  EXPECT_EQ(v.at("resourceSpans")
                .at(0)
                .at("scopeSpans")
                .at(0)
                .at("scope")
                .at("name")
                .as_string(),
            "redline");
}

TEST(OtlpJsonTest, ValidatorCatchesMistakes) {
  std::vector<testing::ReceivedSpan> got;
  std::vector<std::string> errors;
  testing::ValidateOtlpJson(
      R"({"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"spans":[
      {"traceId":"ABC","spanId":"00f067aa0ba902b7","name":"x","kind":9,
       "startTimeUnixNano":5,"endTimeUnixNano":"4"}]}]}]})",
      &got, &errors);
  EXPECT_GE(errors.size(), 4u);  // service.name, traceId, kind, times
}

TEST(TraceEventsTest, FileIsValidTraceEventJson) {
  const std::string path =
      ::testing::TempDir() + "/redline_trace_events_test.json";
  {
    TracerOptions o;
    o.trace_file = path;
    auto tracer = Tracer::Create(o);
    ASSERT_TRUE(tracer.ok()) << tracer.status().ToString();
    for (int i = 0; i < 3; ++i) {
      RequestTrace t = (*tracer)->StartTrace(std::nullopt, "chat",
                                             SpanKind::kServer, 1'000'000);
      t.AddSpan("prefill", t.root_span_id(), 1'000'000, 2'000'000,
                {{"gen_ai.usage.input_tokens", int64_t{12}}});
      t.End(3'000'000, false, "");
      EXPECT_TRUE((*tracer)->Finish(std::move(t)));
    }
  }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(ss.str(), ec);
  ASSERT_FALSE(ec) << ss.str();
  ASSERT_TRUE(v.is_array());
  int complete = 0;
  std::map<int64_t, int> per_lane;
  for (const auto& e : v.as_array()) {
    if (e.at("ph").as_string() != "X") continue;
    ++complete;
    EXPECT_TRUE(e.at("ts").is_number());
    EXPECT_TRUE(e.at("dur").is_number());
    ++per_lane[e.at("tid").to_number<int64_t>()];
  }
  EXPECT_EQ(complete, 6);
  EXPECT_EQ(per_lane.size(), 3u);  // one lane per trace
  std::remove(path.c_str());
}

TEST(TracerTest, ExportsToAReceiver) {
  testing::OtlpReceiver receiver;
  TracerOptions o;
  o.resource.service_name = "test-svc";
  o.otlp_endpoint = receiver.endpoint();
  o.flush_interval_ms = 20;
  auto tracer = Tracer::Create(o);
  ASSERT_TRUE(tracer.ok());
  for (int i = 0; i < 10; ++i) {
    RequestTrace t =
        (*tracer)->StartTrace(std::nullopt, "chat", SpanKind::kServer);
    t.AddSpan("decode", t.root_span_id(), UnixNowNs(), UnixNowNs());
    t.End(UnixNowNs(), false, "");
    (*tracer)->Finish(std::move(t));
  }
  (*tracer)->Flush(5000);
  ASSERT_TRUE(receiver.WaitForSpans(20, 5000));
  EXPECT_TRUE(receiver.errors().empty()) << receiver.errors().front();
  EXPECT_EQ(receiver.spans()[0].service_name, "test-svc");
  EXPECT_EQ((*tracer)->stats().spans_exported, 20);
}

TEST(TracerTest, KeepsErrorsAndSlowRequestsWhenNotSampled) {
  TracerOptions o;
  o.sample_ratio = 0.0;
  o.keep_slower_than_ms = 100;
  auto tracer = Tracer::Create(o);
  ASSERT_TRUE(tracer.ok());
  auto finish = [&](int64_t dur_ms, bool error) {
    RequestTrace t =
        (*tracer)->StartTrace(std::nullopt, "r", SpanKind::kServer, 0);
    t.End(dur_ms * 1'000'000, error, error ? "boom" : "");
    return (*tracer)->Finish(std::move(t));
  };
  EXPECT_FALSE(finish(5, false));
  EXPECT_TRUE(finish(5, true));
  EXPECT_TRUE(finish(150, false));
  EXPECT_EQ((*tracer)->stats().traces_kept, 2);
}

TEST(TracerTest, ACollectorThatFailsIsCounted) {
  testing::OtlpReceiver receiver(/*status=*/500);
  TracerOptions o;
  o.otlp_endpoint = receiver.endpoint();
  o.flush_interval_ms = 10;
  auto tracer = Tracer::Create(o);
  ASSERT_TRUE(tracer.ok());
  RequestTrace t = (*tracer)->StartTrace(std::nullopt, "r", SpanKind::kServer);
  (*tracer)->Finish(std::move(t));
  (*tracer)->Flush(5000);
  TracerStats s = (*tracer)->stats();
  EXPECT_EQ(s.export_failures, 1);
  EXPECT_EQ(s.spans_dropped_export, 1);
  EXPECT_NE(s.last_export_error.find("500"), std::string::npos);
}

// A listening socket that never accepts: connections complete in the
// kernel's backlog and then hear nothing, as from a blackholed collector.
class Blackhole {
 public:
  Blackhole() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Blackhole() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(TracerTest, ABlackholedCollectorNeverBlocksTheRequestPath) {
  Blackhole hole;
  TracerOptions o;
  o.otlp_endpoint =
      "http://127.0.0.1:" + std::to_string(hole.port()) + "/v1/traces";
  o.export_timeout_ms = 300;
  o.flush_interval_ms = 5;
  o.max_queued_spans = 64;
  o.max_batch_spans = 8;
  auto tracer = Tracer::Create(o);
  ASSERT_TRUE(tracer.ok());
  // The export thread is stuck on the blackhole for 300 ms per batch while
  // the request path keeps finishing traces: each Finish is a queue push.
  int64_t worst_ns = 0;
  for (int i = 0; i < 2000; ++i) {
    RequestTrace t =
        (*tracer)->StartTrace(std::nullopt, "r", SpanKind::kServer);
    t.AddSpan("s", t.root_span_id(), 0, 1);
    const auto t0 = std::chrono::steady_clock::now();
    (*tracer)->Finish(std::move(t));
    worst_ns = std::max<int64_t>(
        worst_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count());
  }
  TracerStats s = (*tracer)->stats();
  EXPECT_GT(s.spans_dropped_queue, 0);
  // Far below one export timeout: Finish never waited on the network.
  EXPECT_LT(worst_ns, 100'000'000);
}

TEST(OtelEnvironmentTest, StandardVariablesAreHonoured) {
  static std::map<std::string, std::string> env;
  env = {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"},
         {"OTEL_SERVICE_NAME", "svc"},
         {"OTEL_TRACES_SAMPLER", "parentbased_traceidratio"},
         {"OTEL_TRACES_SAMPLER_ARG", "0.25"},
         {"OTEL_EXPORTER_OTLP_HEADERS", "x-key = abc, y=2"}};
  auto get = [](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  TracerOptions o;
  EXPECT_TRUE(ApplyOtelEnvironment(&o, get).empty());
  EXPECT_EQ(o.otlp_endpoint, "http://collector:4318/v1/traces");
  EXPECT_EQ(o.resource.service_name, "svc");
  EXPECT_DOUBLE_EQ(o.sample_ratio, 0.25);
  ASSERT_EQ(o.otlp_headers.size(), 2u);
  EXPECT_EQ(o.otlp_headers[0].first, "x-key");
  EXPECT_EQ(o.otlp_headers[0].second, "abc");

  env = {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:1/custom"},
         {"OTEL_TRACES_SAMPLER_ARG", "1.5"}};
  TracerOptions o2;
  EXPECT_EQ(ApplyOtelEnvironment(&o2, get).size(), 1u);  // bad ratio
  EXPECT_EQ(o2.otlp_endpoint, "http://c:1/custom");
  EXPECT_DOUBLE_EQ(o2.sample_ratio, 1.0);
}

}  // namespace
}  // namespace redline::telemetry
