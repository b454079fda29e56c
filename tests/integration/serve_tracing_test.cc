// `redline serve` with tracing on: one request's spans reach an OTLP
// receiver (which validates them field by field) under the caller's trace
// id, with the GenAI attributes; Server-Timing and the last streaming
// chunk carry the time breakdown, whose parts add up to the server's E2E;
// the trace-event file is valid JSON; malformed traceparent headers start
// a new trace; failed requests are kept whatever the sampling. Loopback,
// port 0, bounded waits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "api/server_timing.h"
#include "base/thread_pool.h"
#include "model/arch/synthetic.h"
#include "server/server.h"
#include "telemetry/testing/otlp_receiver.h"
#include "test_http_client.h"

namespace redline::server {
namespace {

namespace json = boost::json;
using telemetry::testing::OtlpReceiver;
using telemetry::testing::ReceivedSpan;
using testing::Http;
using testing::HttpResponse;
using namespace std::chrono_literals;

constexpr char kTraceparent[] =
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
constexpr char kChat[] =
    R"({"model":"tiny","messages":[{"role":"user","content":"Hello"}],)"
    R"("max_tokens":8,"temperature":0,"top_p":0.9,"ignore_eos":true})";

class ServeTracingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() /
           ("redline_serve_tracing_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    ThreadPool pool(2);
    model_ = (dir_ / "tiny.gguf").string();
    auto tiny = model::SyntheticPreset("tiny");
    ASSERT_TRUE(tiny.ok());
    ASSERT_TRUE(model::WriteSyntheticModel(*tiny, kernels::DType::kQ8_0, 7,
                                           model_, pool)
                    .ok());
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  void Start(ServerConfig c) {
    c.model_paths = {model_};
    c.model_aliases = {"tiny"};
    c.port = 0;
    c.threads = 2;
    c.parallel = 2;
    c.ctx_tokens = 256;
    c.shutdown_grace_s = 2;
    ASSERT_TRUE(FinalizeConfig(&c).ok());
    server_ = std::make_unique<InferenceServer>(std::move(c));
    auto port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    const auto end = std::chrono::steady_clock::now() + 60s;
    while (Http(port_, "GET", "/readyz").status != 200 &&
           std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(20ms);
  }
  void Stop() {
    if (!server_) return;
    server_->Shutdown();
    server_->Wait();
    server_.reset();
  }
  void TearDown() override { Stop(); }

  static std::map<std::string, ReceivedSpan> ByName(
      const std::vector<ReceivedSpan>& spans, const std::string& trace) {
    std::map<std::string, ReceivedSpan> out;
    for (const ReceivedSpan& s : spans)
      if (s.trace_id == trace) out[s.name] = s;
    return out;
  }

  static inline std::filesystem::path dir_;
  static inline std::string model_;
  std::unique_ptr<InferenceServer> server_;
  uint16_t port_ = 0;
};

TEST_F(ServeTracingTest, OneRequestsSpansReachTheReceiverUnderTheCallersTrace) {
  OtlpReceiver receiver;
  ServerConfig c;
  c.otlp_endpoint = receiver.endpoint();
  Start(c);
  HttpResponse r = Http(port_, "POST", "/v1/chat/completions", kChat,
                        {{"traceparent", kTraceparent}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(receiver.WaitForSpans(6, 10'000));
  Stop();  // flushes
  EXPECT_TRUE(receiver.errors().empty()) << receiver.errors().front();
  auto spans = ByName(receiver.spans(), "0af7651916cd43dd8448eb211c80319c");
  ASSERT_TRUE(spans.contains("chat tiny")) << spans.size();
  const ReceivedSpan& root = spans["chat tiny"];
  EXPECT_EQ(root.parent_span_id, "b7ad6b7169203331");  // the caller's span
  EXPECT_EQ(root.kind, 2);                             // SERVER
  EXPECT_EQ(root.service_name, "redline-serve");
  EXPECT_EQ(root.attributes.at("gen_ai.operation.name"), "chat");
  EXPECT_EQ(root.attributes.at("gen_ai.request.model"), "tiny");
  EXPECT_EQ(root.attributes.at("gen_ai.request.max_tokens"), "8");
  EXPECT_EQ(root.attributes.at("gen_ai.request.temperature"), "0");
  EXPECT_EQ(root.attributes.at("gen_ai.request.top_p"), "0.9");
  EXPECT_EQ(root.attributes.at("gen_ai.response.finish_reasons"), "length");
  EXPECT_EQ(root.attributes.at("gen_ai.usage.output_tokens"), "8");
  EXPECT_GT(std::stoi(root.attributes.at("gen_ai.usage.input_tokens")), 0);
  EXPECT_TRUE(root.attributes.contains("gen_ai.server.time_to_first_token"));
  EXPECT_EQ(root.attributes.at("http.response.status_code"), "200");
  for (const char* stage :
       {"parse", "chat_template+tokenize", "queue", "prefill", "decode"}) {
    ASSERT_TRUE(spans.contains(stage)) << stage;
    EXPECT_EQ(spans[stage].parent_span_id, root.span_id) << stage;
    EXPECT_GE(spans[stage].start_unix_ns, root.start_unix_ns) << stage;
    EXPECT_LE(spans[stage].end_unix_ns, root.end_unix_ns + 1'000'000) << stage;
  }
  // Stages in order: parse, template, queue, prefill, decode.
  EXPECT_LE(spans["parse"].end_unix_ns,
            spans["chat_template+tokenize"].start_unix_ns + 1000);
  EXPECT_LE(spans["queue"].end_unix_ns, spans["prefill"].start_unix_ns + 1000);
  EXPECT_LE(spans["prefill"].start_unix_ns, spans["decode"].start_unix_ns);
}

TEST_F(ServeTracingTest, ServerTimingPartsAddUpToTheServersE2e) {
  Start(ServerConfig{});
  HttpResponse r = Http(port_, "POST", "/v1/chat/completions", kChat);
  ASSERT_EQ(r.status, 200) << r.body;
  auto entries = api::ParseServerTiming(r.Header("Server-Timing"));
  const double queue = api::TimingOf(entries, "queue");
  const double prefill = api::TimingOf(entries, "prefill");
  const double decode = api::TimingOf(entries, "decode");
  const double e2e = api::TimingOf(entries, "e2e");
  ASSERT_GE(queue, 0);
  ASSERT_GE(prefill, 0);
  ASSERT_GE(decode, 0);
  ASSERT_GT(e2e, 0);
  EXPECT_NEAR(queue + prefill + decode, e2e, 1.0);
  // The body's "timings" say the same.
  json::value v = json::parse(r.body);
  EXPECT_NEAR(v.at("timings").at("e2e_ms").to_number<double>(), e2e, 0.001);
}

TEST_F(ServeTracingTest, TheLastStreamingChunkCarriesTimings) {
  Start(ServerConfig{});
  std::string body = kChat;
  body.insert(body.size() - 1, R"(,"stream":true)");
  HttpResponse r = Http(port_, "POST", "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  auto sse = testing::ParseSse(r.body);
  ASSERT_GE(sse.data.size(), 3u);
  ASSERT_EQ(sse.data.back(), "[DONE]");
  json::value last = json::parse(sse.data[sse.data.size() - 2]);
  EXPECT_EQ(last.at("choices").at(0).at("finish_reason").as_string(), "length");
  const json::value& t = last.at("timings");
  EXPECT_NEAR(t.at("queue_ms").to_number<double>() +
                  t.at("prefill_ms").to_number<double>() +
                  t.at("decode_ms").to_number<double>(),
              t.at("e2e_ms").to_number<double>(), 1.0);
  // Every chunk has a choice (no unsolicited empty-choices chunk).
  for (size_t i = 0; i + 1 < sse.data.size(); ++i)
    EXPECT_FALSE(json::parse(sse.data[i]).at("choices").as_array().empty());
}

TEST_F(ServeTracingTest, MalformedTraceparentStartsANewTrace) {
  OtlpReceiver receiver;
  ServerConfig c;
  c.otlp_endpoint = receiver.endpoint();
  Start(c);
  HttpResponse r =
      Http(port_, "POST", "/v1/chat/completions", kChat,
           {{"traceparent", "00-ZZZ-not-a-trace"}, {"tracestate", "x=1"}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(receiver.WaitForSpans(6, 10'000));
  Stop();
  bool root_found = false;
  for (const ReceivedSpan& s : receiver.spans()) {
    if (s.name != "chat tiny") continue;
    root_found = true;
    EXPECT_TRUE(s.parent_span_id.empty());
    EXPECT_EQ(s.trace_id.size(), 32u);
  }
  EXPECT_TRUE(root_found);
}

TEST_F(ServeTracingTest, FailedRequestsAreKeptWhateverTheSampling) {
  OtlpReceiver receiver;
  ServerConfig c;
  c.otlp_endpoint = receiver.endpoint();
  c.trace_sample = 0;
  Start(c);
  ASSERT_EQ(Http(port_, "POST", "/v1/chat/completions", kChat).status, 200);
  HttpResponse bad = Http(port_, "POST", "/v1/chat/completions",
                          R"({"model":"tiny","messages":[],"temperature":-1})");
  ASSERT_EQ(bad.status, 400);
  ASSERT_TRUE(receiver.WaitForSpans(1, 10'000));
  Stop();
  std::vector<ReceivedSpan> spans = receiver.spans();
  int roots = 0;
  for (const ReceivedSpan& s : spans) {
    if (!s.parent_span_id.empty()) continue;
    ++roots;
    EXPECT_EQ(s.status_code, 2);
    EXPECT_EQ(s.attributes.at("http.response.status_code"), "400");
  }
  EXPECT_EQ(roots, 1);  // the sampled-out success is not there
}

TEST_F(ServeTracingTest, TraceFileIsValidTraceEventJson) {
  const std::string path = (dir_ / "trace.json").string();
  ServerConfig c;
  c.trace_file = path;
  Start(c);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(Http(port_, "POST", "/v1/chat/completions", kChat).status, 200);
  Stop();
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  boost::system::error_code ec;
  json::value v = json::parse(ss.str(), ec);
  ASSERT_FALSE(ec) << ss.str().substr(0, 400);
  int complete = 0, chunks = 0, responds = 0;
  for (const json::value& e : v.as_array()) {
    if (e.at("ph").as_string() != "X") continue;
    ++complete;
    chunks += e.at("name").as_string() == "prefill chunk";
    responds += e.at("name").as_string() == "respond";
  }
  // Root, parse, chat_template+tokenize, queue, prefill, decode, respond,
  // and at least one prefill chunk per request.
  EXPECT_GE(chunks, 3);
  EXPECT_EQ(responds, 3);
  EXPECT_EQ(complete, 3 * 7 + chunks);
}

}  // namespace
}  // namespace redline::server
