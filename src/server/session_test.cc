// InferenceSession without HTTP: a recording sink receives the typed events
// of real requests to a synthetic model.
#include "server/session.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "engine/engine.h"
#include "model/arch/synthetic.h"
#include "telemetry/metrics.h"

namespace redline::server {
namespace {

using namespace std::chrono_literals;

struct Recorded {
  api::ResponseIdentity id;
  int admitted_choices = 0;
  std::vector<std::string> text;  // per choice
  std::vector<std::string> finish;
  int logprob_entries = 0;
  bool complete = false;
  api::Usage usage;
  api::ServerTimings timings;
  std::optional<api::ApiError> error;
};

class RecordingSink : public SessionSink {
 public:
  explicit RecordingSink(Recorded* r) : r_(r) {}
  void OnAdmitted(const api::ResponseIdentity& id, int choices) override {
    r_->id = id;
    r_->admitted_choices = choices;
    r_->text.resize(choices);
    r_->finish.resize(choices);
  }
  void OnDelta(int index, std::string text,
               std::vector<api::LogprobEntry> logprobs,
               const api::Usage&) override {
    r_->text[index] += text;
    r_->logprob_entries += static_cast<int>(logprobs.size());
  }
  void OnFinish(int index, std::string_view reason,
                const api::Usage&) override {
    r_->finish[index] = std::string(reason);
  }
  void OnComplete(const api::Usage& usage,
                  const api::ServerTimings& timings) override {
    r_->complete = true;
    r_->usage = usage;
    r_->timings = timings;
  }
  void OnError(const api::ApiError& error) override { r_->error = error; }

 private:
  Recorded* r_;
};

// A served model over the synthetic "tiny" preset, with its engine.
class SessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path =
        (std::filesystem::temp_directory_path() /
         ("redline_session_test_" + std::to_string(::getpid()) + ".gguf"))
            .string();
    ThreadPool pool(1);
    auto spec = model::SyntheticPreset("tiny");
    ASSERT_TRUE(
        model::WriteSyntheticModel(*spec, kernels::DType::kF32, 5, path, pool)
            .ok());
    auto m = model::Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    std::filesystem::remove(path);
    registry_ = new telemetry::Registry();
    metrics_ = new ServerMetrics(*registry_, "redline_", {"tiny"});
    ModelSpec ms;
    ms.name = "tiny";
    ms.parallel = 2;
    served_ = new ServedModel(ms, metrics_->model(0));
    served_->model = std::move(m).value();
    auto chat = model::chat::ChatPrompt::Create(*served_->model, "", "");
    ASSERT_TRUE(chat.ok()) << chat.status().ToString();
    served_->chat = std::move(chat).value();
    served_->n_ctx = 256;
    served_->max_piece_bytes = 16;
    served_->pool = std::make_unique<ThreadPool>(1);
    engine::EngineOptions eo;
    eo.n_ctx = 256;
    eo.parallel = 2;
    auto engine = engine::Engine::Create(*served_->model, *served_->pool, eo);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    served_->engine = std::move(engine).value();
  }
  static void TearDownTestSuite() {
    served_->engine->Stop();
    delete served_;
    delete metrics_;
    delete registry_;
  }

  // Runs one request to the end, draining on this thread whenever the
  // engine notifies (as a transport's loop would). With cancel_after_admit,
  // *finished_first says whether the request had already finished when
  // it was cancelled (Start drains what the engine produced meanwhile).
  Recorded Run(std::string_view body, api::ApiKind kind, api::ApiError* refusal,
               bool cancel_after_admit = false,
               bool* finished_first = nullptr) {
    Recorded r;
    auto parsed = api::ParseRequest(body, kind);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    std::mutex mu;
    std::condition_variable cv;
    bool ready = false;
    auto notify = [&] {
      std::lock_guard<std::mutex> lock(mu);
      ready = true;
      cv.notify_all();
    };
    SessionOptions o;
    o.defaults.temperature = 0;
    PreparedRequest prepared;
    if (!InferenceSession::Prepare(*served_, std::move(parsed).value(), o,
                                   &prepared, refusal))
      return r;
    auto s = InferenceSession::Start(
        *served_, std::move(prepared), o, http_now(),
        std::make_unique<RecordingSink>(&r), notify, refusal);
    if (s == nullptr) return r;
    if (cancel_after_admit) {
      if (finished_first != nullptr) *finished_first = s->done();
      s->Cancel();
    }
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!s->done() && std::chrono::steady_clock::now() < deadline) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, 50ms, [&] { return ready; });
        ready = false;
      }
      s->Drain();
    }
    EXPECT_TRUE(s->done());
    return r;
  }

  static int64_t http_now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  static telemetry::Registry* registry_;
  static ServerMetrics* metrics_;
  static ServedModel* served_;
};

telemetry::Registry* SessionTest::registry_ = nullptr;
ServerMetrics* SessionTest::metrics_ = nullptr;
ServedModel* SessionTest::served_ = nullptr;

TEST_F(SessionTest, ChatRequestYieldsDeltasFinishAndUsage) {
  api::ApiError refusal;
  Recorded r = Run(
      R"({"messages":[{"role":"user","content":"hello"}],"max_tokens":6,
          "ignore_eos":true,"n":2,"logprobs":true,"top_logprobs":2})",
      api::ApiKind::kChat, &refusal);
  ASSERT_FALSE(r.error.has_value()) << r.error->message;
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.admitted_choices, 2);
  EXPECT_EQ(r.id.model, "tiny");
  EXPECT_TRUE(r.id.id.starts_with("chatcmpl-"));
  EXPECT_EQ(r.finish[0], "length");
  EXPECT_EQ(r.finish[1], "length");
  // Greedy (the session's default temperature here is 0): both choices agree.
  EXPECT_EQ(r.text[0], r.text[1]);
  EXPECT_EQ(r.usage.completion_tokens, 12);
  EXPECT_GT(r.usage.prompt_tokens, 0);
  EXPECT_EQ(r.logprob_entries, 12);
  EXPECT_GT(r.timings.e2e_ms, 0);
}

TEST_F(SessionTest, ToolConversationWithNullAssistantContentRenders) {
  api::ApiError refusal;
  Recorded r = Run(
      R"({"messages":[{"role":"user","content":"weather?"},
          {"role":"assistant","content":null,"tool_calls":[{"id":"c1",
           "type":"function","function":{"name":"get","arguments":"{}"}}]},
          {"role":"tool","tool_call_id":"c1","content":"sunny"}],
          "max_tokens":2})",
      api::ApiKind::kChat, &refusal);
  EXPECT_TRUE(r.complete) << refusal.message;
}

TEST_F(SessionTest, CompletionsDefaultTo16Tokens) {
  api::ApiError refusal;
  Recorded r = Run(R"({"prompt":"Once","ignore_eos":true})",
                   api::ApiKind::kCompletions, &refusal);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.usage.completion_tokens, api::kCompletionsDefaultMaxTokens);
}

TEST_F(SessionTest, PolicyAndAdmissionRefusalsNameTheField) {
  api::ApiError refusal;
  Recorded r = Run(R"({"messages":[{"role":"user","content":"x"}],"n":3})",
                   api::ApiKind::kChat, &refusal);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(refusal.http_status, 400);
  EXPECT_EQ(refusal.param, "n");

  Run(R"({"messages":[{"role":"user","content":"x"}],"top_p":5})",
      api::ApiKind::kChat, &refusal);
  EXPECT_EQ(refusal.http_status, 400);
  EXPECT_EQ(refusal.param, "top_p");

  // The prompt alone is longer than the context: the error is about the
  // prompt, not max_tokens.
  std::string long_prompt;
  for (int i = 0; i < 400; ++i) long_prompt += "word ";
  Run(R"({"prompt":")" + long_prompt + R"("})", api::ApiKind::kCompletions,
      &refusal);
  EXPECT_EQ(refusal.http_status, 400);
  EXPECT_EQ(refusal.param, "prompt") << refusal.message;

  // Far more text than the context could hold: refused from its length,
  // before tokenizing.
  Run(R"({"prompt":")" + std::string(256 * 16 + 1, 'a') + R"("})",
      api::ApiKind::kCompletions, &refusal);
  EXPECT_EQ(refusal.http_status, 400);
  EXPECT_EQ(refusal.param, "prompt");
  EXPECT_NE(refusal.message.find("bytes of text"), std::string::npos)
      << refusal.message;

  // min_tokens beyond the context with no max_tokens: refused, no crash.
  Run(R"({"messages":[{"role":"user","content":"x"}],"min_tokens":100000})",
      api::ApiKind::kChat, &refusal);
  EXPECT_EQ(refusal.http_status, 400) << refusal.message;
}

TEST_F(SessionTest, CancelEndsTheSessionWithoutAnAnswer) {
  // The tiny model can finish 200 tokens before Start returns on a loaded
  // machine (then there is nothing left to cancel); such runs are
  // repeated, a bounded number of times.
  int cancelled_runs = 0;
  for (int attempt = 0; attempt < 20 && cancelled_runs < 3; ++attempt) {
    api::ApiError refusal;
    bool finished_first = false;
    Recorded r = Run(
        R"({"messages":[{"role":"user","content":"x"}],"max_tokens":200,"ignore_eos":true})",
        api::ApiKind::kChat, &refusal, /*cancel_after_admit=*/true,
        &finished_first);
    EXPECT_FALSE(r.error.has_value());
    if (finished_first) {
      EXPECT_TRUE(r.complete);
      continue;
    }
    ++cancelled_runs;
    EXPECT_FALSE(r.complete);
  }
  EXPECT_EQ(cancelled_runs, 3) << "every run finished before its cancel";
}

}  // namespace
}  // namespace redline::server
