// End-to-end tests of `redline serve` over loopback HTTP: the server runs
// in-process on port 0 with a synthetic model written at start-up; the
// client is the raw-socket TestConnection. These check behaviour (status
// codes, bodies, SSE framing, cancellation, admission, metrics), never
// timing: every wait is a bounded poll.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/thread_pool.h"
#include "model/arch/synthetic.h"
#include "server/server.h"
#include "test_http_client.h"

namespace redline::server {
namespace {

namespace json = boost::json;
using testing::Http;
using testing::HttpResponse;
using testing::ParseSse;
using testing::TestConnection;
using Headers = std::vector<std::pair<std::string, std::string>>;
using namespace std::chrono_literals;

constexpr const char* kModelName = "tiny";

json::value J(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  EXPECT_FALSE(ec) << "not JSON: " << text;
  return v;
}

std::string ChatBody(std::string_view user, int max_tokens,
                     std::string_view extra = "") {
  json::object o;
  json::array messages;
  json::object m;
  m["role"] = "user";
  m["content"] = user;
  messages.push_back(m);
  o["model"] = kModelName;
  o["messages"] = messages;
  o["max_tokens"] = max_tokens;
  o["temperature"] = 0;
  std::string body = json::serialize(o);
  if (!extra.empty()) {
    body.pop_back();
    body += ",";
    body += extra;
    body += "}";
  }
  return body;
}

// Value of one exact series ("name{labels}") in Prometheus text; -1 if absent.
double MetricValue(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n')
      return std::strtod(text.c_str() + pos + series.size() + 1, nullptr);
    pos += series.size();
  }
  return -1;
}

std::string Series(std::string_view name, std::string_view labels = "") {
  std::string s =
      "redline_" + std::string(name) + "{model_name=\"" + kModelName + "\"";
  if (!labels.empty()) s += "," + std::string(labels);
  return s + "}";
}

// Polls `fn` until it returns true or `limit` passes.
template <typename F>
bool Eventually(F fn, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (fn()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return fn();
}

// Content of a streamed chat/completions body; checks the framing on the way.
struct StreamResult {
  std::string text;
  std::vector<json::value> chunks;  // parsed data events except [DONE]
  bool done = false;                // ended with [DONE]
  int comments = 0;
};

StreamResult ReadStream(const HttpResponse& r, bool chat) {
  StreamResult s;
  const testing::SseStream sse = ParseSse(r.body);
  s.comments = sse.comments;
  for (size_t i = 0; i < sse.data.size(); ++i) {
    if (sse.data[i] == "[DONE]") {
      EXPECT_EQ(i + 1, sse.data.size()) << "[DONE] must be last";
      s.done = true;
      continue;
    }
    json::value v = J(sse.data[i]);
    if (v.is_object() && v.as_object().contains("choices")) {
      for (const json::value& c : v.at("choices").as_array()) {
        if (chat) {
          const json::object& delta = c.at("delta").as_object();
          if (const json::value* content = delta.if_contains("content");
              content && content->is_string()) {
            s.text += content->as_string();
          }
        } else {
          s.text += c.at("text").as_string();
        }
      }
    }
    s.chunks.push_back(std::move(v));
  }
  return s;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() /
           ("redline_server_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    model_path_ = (dir_ / "tiny.gguf").string();
    auto spec = model::SyntheticPreset("tiny");
    ASSERT_TRUE(spec.ok());
    ThreadPool pool(2);
    ASSERT_TRUE(model::WriteSyntheticModel(*spec, kernels::DType::kQ8_0, 42,
                                           model_path_, pool)
                    .ok());
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  void TearDown() override {
    if (server_) {
      server_->Shutdown();
      server_->Wait();
      server_.reset();
    }
  }

  ServerConfig BaseConfig() {
    ServerConfig c;
    c.model_paths = {model_path_};
    c.port = 0;
    c.threads = 2;
    c.parallel = 4;
    c.shutdown_grace_s = 5;
    // Room for long generations: the tiny model decodes a token in ~0.1 ms
    // on a quiet machine, so tests that need a request still running
    // (disconnect, timeout, shutdown) ask for thousands of tokens.
    c.ctx_tokens = 20000;
    return c;
  }

  uint16_t Start(ServerConfig c, bool wait_ready = true) {
    EXPECT_TRUE(FinalizeConfig(&c).ok());
    server_ = std::make_unique<InferenceServer>(std::move(c));
    auto port = server_->Start();
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    port_ = port.ok() ? *port : 0;
    if (wait_ready) {
      EXPECT_TRUE(Eventually(
          [&] { return Http(port_, "GET", "/readyz").status == 200; }, 60s));
    }
    return port_;
  }

  HttpResponse Post(std::string_view path, std::string_view body,
                    const Headers& h = {}) {
    return Http(port_, "POST", path, body, h);
  }
  std::string Metrics() { return Http(port_, "GET", "/metrics").body; }

  static inline std::filesystem::path dir_;
  static inline std::string model_path_;
  std::unique_ptr<InferenceServer> server_;
  uint16_t port_ = 0;
};

TEST_F(ServerTest, ChatNonStreaming) {
  Start(BaseConfig());
  HttpResponse r = Post("/v1/chat/completions", ChatBody("Hello there", 8),
                        {{"X-Request-Id", "abc-1"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("Content-Type"), "application/json");
  EXPECT_EQ(r.Header("X-Request-Id"), "abc-1");
  json::value v = J(r.body);
  EXPECT_EQ(v.at("object").as_string(), "chat.completion");
  EXPECT_EQ(v.at("model").as_string(), kModelName);
  EXPECT_TRUE(v.at("id").as_string().starts_with("chatcmpl-"));
  const json::value& c = v.at("choices").at(0);
  EXPECT_EQ(c.at("message").at("role").as_string(), "assistant");
  EXPECT_FALSE(c.at("message").at("content").as_string().empty());
  EXPECT_EQ(c.at("finish_reason").as_string(), "length");
  EXPECT_EQ(v.at("usage").at("completion_tokens").as_int64(), 8);
  EXPECT_GT(v.at("usage").at("prompt_tokens").as_int64(), 3);
  EXPECT_EQ(v.at("usage").at("total_tokens").as_int64(),
            v.at("usage").at("prompt_tokens").as_int64() +
                v.at("usage").at("completion_tokens").as_int64());
}

TEST_F(ServerTest, EngineBusyAndStageTimesAreOnMetrics) {
  Start(BaseConfig());
  ASSERT_EQ(Post("/v1/chat/completions", ChatBody("Hello there", 8)).status,
            200);
  const std::string m = Metrics();
  const double busy = MetricValue(
      m, std::string("redline_engine_busy_seconds_total{model_name=\"") +
             kModelName + "\"}");
  EXPECT_GT(busy, 0) << m;
  // The stages sum to (about) the forward time: the timers cover the pass.
  double stages = 0;
  for (const char* stage :
       {"embedding", "norm", "qkv", "rope", "attention", "attn_output",
        "residual", "gate_up", "activation", "down", "output_head"}) {
    const double v = MetricValue(
        m, std::string("redline_engine_stage_seconds_total{model_name=\"") +
               kModelName + "\",stage=\"" + stage + "\"}");
    EXPECT_GE(v, 0) << stage << "\n" << m;
    stages += std::max(v, 0.0);
  }
  EXPECT_GT(stages, 0.5 * busy);
  EXPECT_LE(stages, busy * 1.05 + 1e-4);
  const std::string model = std::string("{model_name=\"") + kModelName + "\"}";
  const double threads = MetricValue(m, "redline_thread_pool_threads" + model);
  EXPECT_GE(threads, 1);
  const double pool_busy =
      MetricValue(m, "redline_thread_pool_busy_seconds_total" + model);
  EXPECT_GT(pool_busy, 0);
}

TEST_F(ServerTest, ChatStreamingFramingMatchesNonStreaming) {
  Start(BaseConfig());
  const std::string plain =
      J(Post("/v1/chat/completions", ChatBody("Tell me a story", 12)).body)
          .at("choices")
          .at(0)
          .at("message")
          .at("content")
          .as_string()
          .c_str();
  HttpResponse r = Post(
      "/v1/chat/completions",
      ChatBody("Tell me a story", 12,
               R"("stream":true,"stream_options":{"include_usage":true})"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("Content-Type"), "text/event-stream");
  EXPECT_EQ(r.Header("Cache-Control"), "no-cache");
  EXPECT_EQ(r.Header("X-Accel-Buffering"), "no");
  StreamResult s = ReadStream(r, /*chat=*/true);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.text, plain);
  ASSERT_GE(s.chunks.size(), 4u);
  // Role chunk first, then content, then the finish chunk, then usage.
  const json::value& first = s.chunks.front();
  EXPECT_EQ(first.at("choices").at(0).at("delta").at("role").as_string(),
            "assistant");
  const json::value& finish = s.chunks[s.chunks.size() - 2];
  EXPECT_EQ(finish.at("choices").at(0).at("finish_reason").as_string(),
            "length");
  EXPECT_TRUE(finish.at("choices").at(0).at("delta").as_object().empty());
  const json::value& usage = s.chunks.back();
  EXPECT_TRUE(usage.at("choices").as_array().empty());
  EXPECT_EQ(usage.at("usage").at("completion_tokens").as_int64(), 12);
  for (const json::value& c : s.chunks) {
    EXPECT_EQ(c.at("id"), first.at("id"));
    EXPECT_EQ(c.at("object").as_string(), "chat.completion.chunk");
    EXPECT_EQ(c.at("created"), first.at("created"));
  }
}

TEST_F(ServerTest, CompletionsWithTokenIdsLogprobsAndN) {
  Start(BaseConfig());
  HttpResponse r = Post(
      "/v1/completions",
      R"({"model":"tiny","prompt":[1,17,42,99],"max_tokens":4,"temperature":0,"logprobs":2,"n":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  json::value v = J(r.body);
  EXPECT_EQ(v.at("object").as_string(), "text_completion");
  ASSERT_EQ(v.at("choices").as_array().size(), 2u);
  const json::value& lp = v.at("choices").at(0).at("logprobs");
  EXPECT_EQ(lp.at("tokens").as_array().size(), 4u);
  EXPECT_EQ(lp.at("token_logprobs").as_array().size(), 4u);
  EXPECT_EQ(lp.at("top_logprobs").at(0).as_object().size(), 2u);
  EXPECT_EQ(v.at("usage").at("prompt_tokens").as_int64(), 4);
  // Greedy: both choices agree.
  EXPECT_EQ(v.at("choices").at(0).at("text"), v.at("choices").at(1).at("text"));

  HttpResponse chat =
      Post("/v1/chat/completions",
           ChatBody("hi", 3, R"("logprobs":true,"top_logprobs":3)"));
  ASSERT_EQ(chat.status, 200) << chat.body;
  const json::value chat_v = J(chat.body);
  const json::value& content =
      chat_v.at("choices").at(0).at("logprobs").at("content");
  ASSERT_EQ(content.as_array().size(), 3u);
  EXPECT_EQ(content.at(0).at("top_logprobs").as_array().size(), 3u);
  EXPECT_TRUE(content.at(0).at("bytes").is_array());
}

TEST_F(ServerTest, StopStringEndsWithFinishReasonStop) {
  Start(BaseConfig());
  const std::string full =
      J(Post("/v1/completions",
             R"({"prompt":"Once upon a time","max_tokens":24,"temperature":0})")
            .body)
          .at("choices")
          .at(0)
          .at("text")
          .as_string()
          .c_str();
  ASSERT_GE(full.size(), 12u);
  const std::string stop = full.substr(6, 3);
  const size_t first = full.find(stop);
  json::object body;
  body["prompt"] = "Once upon a time";
  body["max_tokens"] = 24;
  body["temperature"] = 0;
  body["stop"] = stop;
  for (bool stream : {false, true}) {
    body["stream"] = stream;
    HttpResponse r = Post("/v1/completions", json::serialize(body));
    ASSERT_EQ(r.status, 200) << r.body;
    std::string text, finish;
    if (stream) {
      StreamResult s = ReadStream(r, false);
      text = s.text;
      for (const json::value& c : s.chunks) {
        const json::value& f = c.at("choices").at(0).at("finish_reason");
        if (f.is_string()) finish = f.as_string().c_str();
      }
    } else {
      json::value v = J(r.body);
      text = v.at("choices").at(0).at("text").as_string().c_str();
      finish = v.at("choices").at(0).at("finish_reason").as_string().c_str();
    }
    EXPECT_EQ(text, full.substr(0, first)) << "stream=" << stream;
    EXPECT_EQ(finish, "stop");
  }
}

TEST_F(ServerTest, SameSeedSameTokens) {
  Start(BaseConfig());
  const std::string body =
      R"({"prompt":"seeded","max_tokens":16,"temperature":1.0,"seed":1234})";
  HttpResponse a = Post("/v1/completions", body);
  HttpResponse b = Post("/v1/completions", body);
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(J(a.body).at("choices").at(0).at("text"),
            J(b.body).at("choices").at(0).at("text"));
}

// Greedy outputs of 8 concurrent streams (one batch) equal those of the
// same 8 requests sent one after another.
void CheckConcurrentEqualsSequential(uint16_t port, bool prefix_cache) {
  constexpr int kStreams = 8;
  auto body = [](int i) {
    return ChatBody("Story number " + std::to_string(i) +
                        ": the river and the " + std::string(i, 'x'),
                    24, R"("stream":true)");
  };
  std::vector<std::string> sequential(kStreams), concurrent(kStreams);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kStreams; ++i) {
    HttpResponse r = Http(port, "POST", "/v1/chat/completions", body(i));
    ASSERT_EQ(r.status, 200);
    sequential[i] = ReadStream(r, true).text;
  }
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  std::barrier sync(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      sync.arrive_and_wait();
      HttpResponse r = Http(port, "POST", "/v1/chat/completions", body(i));
      if (r.status == 200) concurrent[i] = ReadStream(r, true).text;
    });
  }
  for (auto& t : threads) t.join();
  const auto t2 = std::chrono::steady_clock::now();
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_FALSE(sequential[i].empty());
    EXPECT_EQ(concurrent[i], sequential[i])
        << "stream " << i << (prefix_cache ? " (prefix cache on)" : "");
  }
  std::printf("8 streams x 24 tokens: sequential %.0f ms, concurrent %.0f ms\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(t2 - t1).count());
}

// Batching alone: the prefix cache is off, so every prompt is prefilled the
// same way in both runs.
TEST_F(ServerTest, EightConcurrentGreedyStreamsEqualSequential) {
  ServerConfig c = BaseConfig();
  c.parallel = 8;
  c.no_prefix_cache = true;
  Start(c);
  CheckConcurrentEqualsSequential(port_, /*prefix_cache=*/false);
}

// Same with the prefix cache on: a prompt whose prefix KV was computed in
// another request's step must still decode to the same tokens. (It failed
// while the AMX matmul path was on by default: a token's logits then
// depended on the rows sharing its step.)
TEST_F(ServerTest, EightConcurrentGreedyStreamsEqualSequentialWithPrefixCache) {
  ServerConfig c = BaseConfig();
  c.parallel = 8;
  Start(c);
  CheckConcurrentEqualsSequential(port_, /*prefix_cache=*/true);
}

TEST_F(ServerTest, OverloadAnswers429WithRetryAfterWhileAdmittedSucceed) {
  ServerConfig c = BaseConfig();
  c.parallel = 1;
  c.max_queued_requests = 2;
  c.queue_budget_s = 0;  // exercise the engine's queue bound alone
  Start(c);
  constexpr int kRequests = 10;
  constexpr int kTokens = 200;
  std::vector<HttpResponse> results(kRequests);
  std::vector<std::thread> threads;
  std::barrier sync(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      sync.arrive_and_wait();
      results[i] = Post(
          "/v1/completions",
          R"({"prompt":"load","max_tokens":200,"temperature":0,"ignore_eos":true})");
    });
  }
  for (auto& t : threads) t.join();
  int ok = 0, refused = 0;
  for (const HttpResponse& r : results) {
    if (r.status == 200) {
      ++ok;
      EXPECT_EQ(J(r.body).at("usage").at("completion_tokens").as_int64(),
                kTokens);
    } else {
      ASSERT_EQ(r.status, 429) << r.body;
      ++refused;
      EXPECT_GE(std::atoi(r.Header("Retry-After").c_str()), 1);
      json::value v = J(r.body);
      EXPECT_EQ(v.at("error").at("type").as_string(), "rate_limit_error");
      EXPECT_FALSE(v.at("error").at("message").as_string().empty());
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(refused, 1);
  EXPECT_EQ(ok + refused, kRequests);
  EXPECT_EQ(MetricValue(Metrics(),
                        Series("request_errors_total", "class=\"overloaded\"")),
            refused);
  // Still serving.
  EXPECT_EQ(Post("/v1/chat/completions", ChatBody("after", 2)).status, 200);
}

TEST_F(ServerTest, QueueBudgetRefusesRequestsThatWouldWaitTooLong) {
  ServerConfig c = BaseConfig();
  c.parallel = 1;
  c.queue_budget_s = 1e-6;  // any wait is too long
  Start(c);
  // Teach the server its service time, then occupy the only slot.
  ASSERT_EQ(Post("/v1/completions",
                 R"({"prompt":"a","max_tokens":100,"ignore_eos":true})")
                .status,
            200);
  TestConnection hog;
  ASSERT_TRUE(hog.Connect(port_));
  ASSERT_TRUE(hog.SendRequest(
      "POST", "/v1/completions",
      R"({"prompt":"hog","max_tokens":16000,"ignore_eos":true,"stream":true})"));
  int chunks = 0;
  hog.ReadResponse([&](std::string_view) {
    return ++chunks < 3;
  });  // running now; keep the connection
  HttpResponse r =
      Post("/v1/completions", R"({"prompt":"late","max_tokens":4})");
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_GE(std::atoi(r.Header("Retry-After").c_str()), 1);
  EXPECT_NE(
      J(r.body).at("error").at("message").as_string().find("queue budget"),
      std::string::npos);
  // With the slot free again (the hog's client leaves) the request is admitted.
  hog.Close();
  ASSERT_TRUE(Eventually(
      [&] { return MetricValue(Metrics(), Series("num_streams_open")) == 0; }));
  EXPECT_EQ(
      Post("/v1/completions", R"({"prompt":"late","max_tokens":4})").status,
      200);
}

TEST_F(ServerTest, DisconnectCancelsStreamingAndNonStreaming) {
  Start(BaseConfig());
  const std::string cancelled =
      Series("request_errors_total", "class=\"cancelled\"");
  const std::string running = Series("num_requests_running");
  {
    TestConnection conn;
    ASSERT_TRUE(conn.Connect(port_));
    ASSERT_TRUE(conn.SendRequest(
        "POST", "/v1/completions",
        R"({"prompt":"go","max_tokens":16000,"ignore_eos":true,"stream":true})"));
    int chunks = 0;
    HttpResponse r =
        conn.ReadResponse([&](std::string_view) { return ++chunks < 4; });
    EXPECT_EQ(r.status, 200);
    conn.Close();  // mid-stream
  }
  EXPECT_TRUE(Eventually([&] {
    const std::string m = Metrics();
    return MetricValue(m, cancelled) == 1 && MetricValue(m, running) == 0;
  })) << Metrics();
  {
    TestConnection conn;
    ASSERT_TRUE(conn.Connect(port_));
    ASSERT_TRUE(conn.SendRequest(
        "POST", "/v1/completions",
        R"({"prompt":"go on","max_tokens":16000,"ignore_eos":true})"));
    ASSERT_TRUE(
        Eventually([&] { return MetricValue(Metrics(), running) == 1; }));
    conn.Close();  // before the response
  }
  EXPECT_TRUE(Eventually([&] {
    const std::string m = Metrics();
    return MetricValue(m, cancelled) == 2 && MetricValue(m, running) == 0;
  })) << Metrics();
  // Neither ran to 16000 tokens: generation stopped within a step of the close.
  const std::string m = Metrics();
  EXPECT_LT(MetricValue(m, Series("generation_tokens_total")), 2 * 16000) << m;
  EXPECT_EQ(MetricValue(m, Series("request_success_total",
                                  "finished_reason=\"length\"")),
            0)
      << m;
  EXPECT_EQ(Post("/v1/chat/completions", ChatBody("after", 2)).status, 200);
}

TEST_F(ServerTest, BadInputsGetTheRightStatusAndErrorBody) {
  ServerConfig c = BaseConfig();
  c.api_keys = {"key-one", "key-two"};
  c.max_body_bytes = 64 * 1024;
  Start(c);
  const Headers auth{{"Authorization", "Bearer key-one"}};
  struct Case {
    std::string name;
    std::string method;
    std::string path;
    std::string body;
    Headers headers;
    int status;
    std::string type;
    std::string param;  // "" = null or unchecked
  };
  const std::string user = R"({"role":"user","content":"x"})";
  const std::vector<Case> cases = {
      {"malformed JSON", "POST", "/v1/chat/completions", "{\"messages\": [",
       auth, 400, "invalid_request_error", ""},
      {"not an object", "POST", "/v1/chat/completions", "42", auth, 400,
       "invalid_request_error", ""},
      {"messages wrong type", "POST", "/v1/chat/completions",
       R"({"messages":"hi"})", auth, 400, "invalid_request_error", "messages"},
      {"temperature wrong type", "POST", "/v1/chat/completions",
       "{\"messages\":[" + user + "],\"temperature\":\"warm\"}", auth, 400,
       "invalid_request_error", "temperature"},
      {"max_tokens wrong type", "POST", "/v1/chat/completions",
       "{\"messages\":[" + user + "],\"max_tokens\":\"9\"}", auth, 400,
       "invalid_request_error", "max_tokens"},
      {"stream wrong type", "POST", "/v1/chat/completions",
       "{\"messages\":[" + user + "],\"stream\":1}", auth, 400,
       "invalid_request_error", "stream"},
      {"top_p out of range", "POST", "/v1/chat/completions",
       "{\"messages\":[" + user + "],\"top_p\":3}", auth, 400,
       "invalid_request_error", "top_p"},
      {"prompt wrong type", "POST", "/v1/completions", R"({"prompt":{"a":1}})",
       auth, 400, "invalid_request_error", "prompt"},
      {"unknown model", "POST", "/v1/chat/completions",
       "{\"model\":\"gpt-9\",\"messages\":[" + user + "]}", auth, 404,
       "not_found_error", "model"},
      {"empty messages", "POST", "/v1/chat/completions", R"({"messages":[]})",
       auth, 400, "invalid_request_error", "messages"},
      {"missing messages", "POST", "/v1/chat/completions",
       R"({"model":"tiny"})", auth, 400, "invalid_request_error", "messages"},
      {"max_tokens beyond context", "POST", "/v1/chat/completions",
       "{\"messages\":[" + user + "],\"max_tokens\":100000}", auth, 400,
       "invalid_request_error", "max_tokens"},
      {"n beyond slots", "POST", "/v1/chat/completions",
       "{\"messages\":[" + user + "],\"n\":64}", auth, 400,
       "invalid_request_error", "n"},
      {"oversize body", "POST", "/v1/completions",
       "{\"prompt\":\"" + std::string(100 * 1024, 'a') + "\"}", auth, 413,
       "invalid_request_error", ""},
      {"no API key",
       "POST",
       "/v1/chat/completions",
       "{\"messages\":[" + user + "]}",
       {},
       401,
       "authentication_error",
       ""},
      {"wrong API key",
       "POST",
       "/v1/chat/completions",
       "{\"messages\":[" + user + "]}",
       {{"Authorization", "Bearer nope"}},
       401,
       "authentication_error",
       ""},
      {"models without key",
       "GET",
       "/v1/models",
       "",
       {},
       401,
       "authentication_error",
       ""},
      {"unknown route", "GET", "/v2/everything", "", auth, 404,
       "not_found_error", ""},
      {"wrong method", "GET", "/v1/chat/completions", "", auth, 405,
       "invalid_request_error", ""},
  };
  for (const Case& k : cases) {
    HttpResponse r = Http(port_, k.method, k.path, k.body, k.headers);
    EXPECT_EQ(r.status, k.status) << k.name << ": " << r.body << r.error;
    json::value v = J(r.body);
    ASSERT_TRUE(v.is_object()) << k.name;
    const json::value* err = v.as_object().if_contains("error");
    ASSERT_NE(err, nullptr) << k.name << ": " << r.body;
    EXPECT_EQ(err->at("type").as_string(), k.type) << k.name;
    EXPECT_FALSE(err->at("message").as_string().empty()) << k.name;
    EXPECT_TRUE(err->as_object().contains("param")) << k.name;
    EXPECT_TRUE(err->as_object().contains("code")) << k.name;
    if (!k.param.empty()) {
      ASSERT_TRUE(err->at("param").is_string()) << k.name << ": " << r.body;
      EXPECT_EQ(err->at("param").as_string(), k.param) << k.name;
    }
    if (k.status == 401) {
      EXPECT_EQ(r.Header("WWW-Authenticate"), "Bearer") << k.name;
    }
    // The server keeps serving after every bad request.
    HttpResponse ok =
        Post("/v1/chat/completions", ChatBody("still there?", 2), auth);
    EXPECT_EQ(ok.status, 200) << "after " << k.name << ": " << ok.body;
  }
  // Both keys, both header styles; probes need no key.
  EXPECT_EQ(Post("/v1/chat/completions", ChatBody("k2", 2),
                 {{"X-Api-Key", "key-two"}})
                .status,
            200);
  EXPECT_EQ(Post("/v1/chat/completions", ChatBody("k2", 2),
                 {{"Authorization", "Bearer key-two"}})
                .status,
            200);
  EXPECT_EQ(Http(port_, "GET", "/health").status, 200);
  EXPECT_EQ(Http(port_, "GET", "/livez").status, 200);
  const std::string m = Metrics();
  EXPECT_GE(
      MetricValue(m, Series("request_errors_total", "class=\"bad_request\"")),
      10)
      << m;
  EXPECT_EQ(
      MetricValue(m, Series("request_errors_total", "class=\"unauthorized\"")),
      3)
      << m;
  EXPECT_EQ(
      MetricValue(m, Series("request_errors_total", "class=\"too_large\"")), 1)
      << m;
}

TEST_F(ServerTest, RequestTimeoutIs504OrAnErrorEvent) {
  ServerConfig c = BaseConfig();
  c.request_timeout_s = 0.25;
  Start(c);
  HttpResponse r =
      Post("/v1/completions",
           R"({"prompt":"slow","max_tokens":16000,"ignore_eos":true})");
  ASSERT_EQ(r.status, 504) << r.body;
  EXPECT_EQ(J(r.body).at("error").at("type").as_string(), "timeout_error");
  HttpResponse s = Post(
      "/v1/completions",
      R"({"prompt":"slow","max_tokens":16000,"ignore_eos":true,"stream":true})");
  ASSERT_EQ(s.status, 200);
  StreamResult sr = ReadStream(s, false);
  EXPECT_FALSE(sr.done);
  ASSERT_FALSE(sr.chunks.empty());
  EXPECT_EQ(sr.chunks.back().at("error").at("type").as_string(),
            "timeout_error");
  EXPECT_EQ(MetricValue(Metrics(),
                        Series("request_errors_total", "class=\"timeout\"")),
            2);
}

TEST_F(ServerTest, KeepAlivePingsWhileQueued) {
  ServerConfig c = BaseConfig();
  c.parallel = 1;
  c.sse_ping_interval_s = 0.05;
  c.queue_budget_s = 0;  // let the second request queue behind the first
  Start(c);
  // The hog holds the only slot until its client leaves.
  TestConnection hog;
  ASSERT_TRUE(hog.Connect(port_));
  ASSERT_TRUE(hog.SendRequest(
      "POST", "/v1/completions",
      R"({"prompt":"hog","max_tokens":16000,"ignore_eos":true,"stream":true})"));
  int hog_chunks = 0;
  hog.ReadResponse([&](std::string_view) { return ++hog_chunks < 3; });
  std::atomic<bool> pinged{false};
  HttpResponse r;
  std::thread queued([&] {
    TestConnection conn;
    ASSERT_TRUE(conn.Connect(port_));
    ASSERT_TRUE(conn.SendRequest("POST", "/v1/chat/completions",
                                 ChatBody("queued", 4, R"("stream":true)")));
    r = conn.ReadResponse([&](std::string_view piece) {
      if (piece.find(": ping") != std::string_view::npos) pinged = true;
      return true;
    });
  });
  const bool saw_ping = Eventually([&] { return pinged.load(); });
  hog.Close();  // frees the slot
  queued.join();
  ASSERT_TRUE(saw_ping) << "no ': ping' while waiting for the slot";
  ASSERT_EQ(r.status, 200);
  StreamResult s = ReadStream(r, true);
  EXPECT_TRUE(s.done);
  EXPECT_GE(s.comments, 1);
  // Pings come before any content.
  const size_t ping = r.body.find("\n: ping");
  const size_t content = r.body.find("\"delta\":{\"content\":\"");
  EXPECT_LT(ping, content);
}

TEST_F(ServerTest, ReadyzGoes503To200WhileStartupProgressRises) {
  ServerConfig c = BaseConfig();
  c.load_step_delay_ms_for_test = 15;
  Start(c, /*wait_ready=*/false);
  std::vector<double> progress;
  bool saw_not_ready = false, saw_health_503 = false, saw_inference_503 = false;
  const bool ready = Eventually(
      [&] {
        HttpResponse s = Http(port_, "GET", "/startupz");
        if (s.status == 0) return false;
        json::value v = J(s.body);
        const std::string phase = v.at("phase").as_string().c_str();
        const double p = v.at("progress").to_number<double>();
        if (progress.empty() || p != progress.back()) progress.push_back(p);
        HttpResponse r = Http(port_, "GET", "/readyz");
        if (r.status == 200) return true;
        EXPECT_EQ(r.status, 503);
        saw_not_ready = true;
        if (phase == "loading" && !saw_health_503) {
          HttpResponse h = Http(port_, "GET", "/health");
          if (h.status == 503) {
            saw_health_503 = true;
            json::value e = J(h.body);
            EXPECT_EQ(e.at("error").at("code").as_int64(), 503);
            EXPECT_EQ(e.at("error").at("type").as_string(),
                      "unavailable_error");
            EXPECT_EQ(e.at("error").at("message").as_string(), "Loading model");
          }
          HttpResponse i =
              Post("/v1/chat/completions", ChatBody("too early", 2));
          if (i.status == 503) {
            saw_inference_503 = true;
            EXPECT_EQ(J(i.body).at("error").at("type").as_string(),
                      "unavailable_error");
            EXPECT_GE(std::atoi(i.Header("Retry-After").c_str()), 1);
          }
        }
        EXPECT_EQ(Http(port_, "GET", "/livez").status, 200);
        return false;
      },
      60s);
  ASSERT_TRUE(ready);
  // /startupz was read just before /readyz turned 200: read the final value.
  {
    const double p = J(Http(port_, "GET", "/startupz").body)
                         .at("progress")
                         .to_number<double>();
    if (p != progress.back()) progress.push_back(p);
  }
  EXPECT_TRUE(saw_not_ready);
  EXPECT_TRUE(saw_health_503);
  EXPECT_TRUE(saw_inference_503);
  ASSERT_GE(progress.size(), 4u);
  for (size_t i = 1; i < progress.size(); ++i)
    EXPECT_GT(progress[i], progress[i - 1]);
  EXPECT_EQ(progress.back(), 1.0);
  json::value s = J(Http(port_, "GET", "/startupz").body);
  EXPECT_EQ(s.at("phase").as_string(), "ready");
  EXPECT_GE(s.at("load_s").to_number<double>(), 0);
  EXPECT_EQ(Http(port_, "GET", "/health").body, R"({"status":"ok"})");
  const std::string m = Metrics();
  EXPECT_EQ(MetricValue(m, Series("load_progress")), 1);
  EXPECT_EQ(MetricValue(m, Series("startup_phase", "phase=\"ready\"")), 1);
  EXPECT_GT(MetricValue(m, Series("engine_load_weights_time_seconds")), 0);
}

TEST_F(ServerTest, GracefulShutdownFinishesInFlightStreams) {
  ServerConfig c = BaseConfig();
  // Generous: the stream must finish, even on a busy machine.
  c.shutdown_grace_s = 120;
  Start(c);
  TestConnection conn;
  ASSERT_TRUE(conn.Connect(port_));
  ASSERT_TRUE(conn.SendRequest(
      "POST", "/v1/completions",
      R"({"prompt":"finish me","max_tokens":2000,"ignore_eos":true,"stream":true})"));
  std::atomic<bool> first{false};
  HttpResponse r;
  std::thread reader([&] {
    r = conn.ReadResponse([&](std::string_view) {
      first = true;
      return true;
    });
  });
  ASSERT_TRUE(Eventually([&] { return first.load(); }));
  server_->Shutdown();
  HttpResponse ready = Http(port_, "GET", "/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(J(ready.body).at("phase").as_string(), "draining");
  HttpResponse refused = Post("/v1/completions", R"({"prompt":"new"})");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(J(refused.body).at("error").at("type").as_string(),
            "unavailable_error");
  reader.join();
  StreamResult s = ReadStream(r, false);
  EXPECT_TRUE(s.done)
      << "the in-flight stream must finish within the grace period";
  EXPECT_EQ(server_->Wait(), 0);
  server_.reset();
}

TEST_F(ServerTest, ShutdownAfterGraceCancelsWithAnErrorEvent) {
  ServerConfig c = BaseConfig();
  c.shutdown_grace_s = 0.1;
  Start(c);
  TestConnection conn;
  ASSERT_TRUE(conn.Connect(port_));
  ASSERT_TRUE(conn.SendRequest(
      "POST", "/v1/completions",
      R"({"prompt":"too long","max_tokens":16000,"ignore_eos":true,"stream":true})"));
  std::atomic<bool> first{false};
  HttpResponse r;
  std::thread reader([&] {
    r = conn.ReadResponse([&](std::string_view) {
      first = true;
      return true;
    });
  });
  ASSERT_TRUE(Eventually([&] { return first.load(); }));
  server_->Shutdown();
  reader.join();
  StreamResult s = ReadStream(r, false);
  EXPECT_FALSE(s.done);
  ASSERT_FALSE(s.chunks.empty());
  EXPECT_TRUE(s.chunks.back().as_object().contains("error"))
      << r.body.substr(r.body.size() - 300);
  EXPECT_EQ(server_->Wait(), 0);
  server_.reset();
}

TEST_F(ServerTest, TokenizeDetokenizeModelsRoundTrip) {
  Start(BaseConfig());
  HttpResponse t = Post("/tokenize", R"({"content":"hello world"})");
  ASSERT_EQ(t.status, 200) << t.body;
  json::value tv = J(t.body);
  EXPECT_GT(tv.at("count").as_int64(), 0);
  HttpResponse d =
      Post("/detokenize",
           json::serialize(json::object{{"tokens", tv.at("tokens")}}));
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(J(d.body).at("content").as_string(), "hello world");
  HttpResponse m = Http(port_, "GET", "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(J(m.body).at("data").at(0).at("id").as_string(), kModelName);
  EXPECT_EQ(Post("/detokenize", R"({"tokens":[-1]})").status, 400);
}

// A stray GET / (a browser, a probe) finds the list of endpoints, not a 404
// counted as a request error.
TEST_F(ServerTest, RootListsTheApi) {
  Start(BaseConfig());
  HttpResponse r = Http(port_, "GET", "/");
  ASSERT_EQ(r.status, 200) << r.body;
  const json::value v = J(r.body);
  EXPECT_EQ(v.at("service").as_string(), "redline");
  bool chat = false;
  for (const json::value& e : v.at("endpoints").as_array())
    chat = chat || e.at("route").as_string() == "POST /v1/chat/completions";
  EXPECT_TRUE(chat) << r.body;
  EXPECT_EQ(Http(port_, "POST", "/").status, 405);
  const std::string m = Metrics();
  EXPECT_NE(m.find("endpoint=\"index\",code=\"200\""), std::string::npos);
}

// `promtool check metrics` on a scrape after traffic. With the default
// "redline_" prefix it must pass outright; with the opt-in vLLM-style
// "redline:" its only complaint may be the ':' lint (docs/METRICS.md).
TEST_F(ServerTest, PromtoolAcceptsTheMetrics) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool not installed";
  for (const char* prefix : {"redline_", "redline:"}) {
    ServerConfig c = BaseConfig();
    c.metrics_prefix = prefix;
    Start(c);
    ASSERT_EQ(
        Post("/v1/chat/completions", ChatBody("metrics", 4, R"("stream":true)"))
            .status,
        200);
    ASSERT_EQ(
        Post("/v1/completions", R"({"prompt":"m","max_tokens":3})").status,
        200);
    ASSERT_EQ(Post("/v1/chat/completions", "{").status, 400);
    const std::string text = Metrics();
    // Histograms have a bucket at every SLO line.
    for (const char* le : {"0.1", "1", "2", "3"}) {
      EXPECT_NE(text.find(std::string(prefix) +
                          "time_to_first_token_seconds_bucket{model_name="
                          "\"tiny\",start=\"warm\","
                          "le=\"" +
                          le + "\"}"),
                std::string::npos)
          << le;
    }
    const std::string file = (dir_ / "metrics.txt").string();
    std::ofstream(file) << text;
    const std::string out_file = (dir_ / "promtool.txt").string();
    const int rc = std::system(
        ("promtool check metrics < " + file + " > " + out_file + " 2>&1")
            .c_str());
    std::ifstream in(out_file);
    std::string line, unexpected;
    int colon_lints = 0;
    while (std::getline(in, line)) {
      if (line.find("metric names should not contain ':'") !=
          std::string::npos) {
        ++colon_lints;
      } else if (!line.empty()) {
        unexpected += line + "\n";
      }
    }
    EXPECT_EQ(unexpected, "") << "prefix " << prefix;
    if (std::string(prefix) == "redline_") {
      EXPECT_EQ(rc, 0);
      EXPECT_EQ(colon_lints, 0);
    } else {
      EXPECT_GT(colon_lints, 10);
    }
    server_->Shutdown();
    server_->Wait();
    server_.reset();
  }
}

}  // namespace
}  // namespace redline::server
