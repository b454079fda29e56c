// `redline serve --speculative` and `--draft-model`: answers equal those of
// a server without them (greedy and seeded, concurrent requests batched
// together), a request can opt out with "speculative": false, /metrics
// counts drafted and accepted tokens, and a draft model whose vocabulary
// differs stops the server with a clear error. Loopback, port 0, bounded
// waits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "base/thread_pool.h"
#include "model/arch/synthetic.h"
#include "server/server.h"
#include "test_http_client.h"

namespace redline::server {
namespace {

namespace json = boost::json;
using testing::Http;
using namespace std::chrono_literals;

std::string Body(int i, bool opt_out, bool seeded = false) {
  // Repetitive prompts: drafts from the prompt are accepted.
  std::string prompt;
  for (int r = 0; r < 4; ++r)
    prompt += "the cat " + std::to_string(i) + " sat on the mat. ";
  const std::string sampling =
      seeded ? R"("temperature":0.8,"seed":)" + std::to_string(100 + i)
             : R"("temperature":0)";
  return R"({"model":"tiny","prompt":")" + prompt + R"(","max_tokens":32,)" +
         sampling + R"(,"ignore_eos":true)" +
         (opt_out ? R"(,"speculative":false})" : "}");
}

// The value of the first sample of `name` in a Prometheus text page; -1
// when absent.
double Metric(const std::string& page, const std::string& name) {
  const size_t at = page.find(name + "{");
  if (at == std::string::npos) return -1;
  const size_t sp = page.find("} ", at);
  return std::stod(page.substr(sp + 2));
}

class ServeSpeculativeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() /
           ("redline_serve_spec_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    ThreadPool pool(2);
    model_ = (dir_ / "tiny.gguf").string();
    auto tiny = model::SyntheticPreset("tiny");
    ASSERT_TRUE(tiny.ok());
    ASSERT_TRUE(model::WriteSyntheticModel(*tiny, kernels::DType::kQ8_0, 3,
                                           model_, pool)
                    .ok());
    // A smaller model with the same vocabulary, and one with another.
    auto small = *tiny;
    small.block_count = 1;
    small.embedding_length = 32;
    small.feed_forward_length = 96;
    draft_ = (dir_ / "draft.gguf").string();
    ASSERT_TRUE(model::WriteSyntheticModel(small, kernels::DType::kQ8_0, 4,
                                           draft_, pool)
                    .ok());
    small.vocab_size = 1024;
    other_vocab_ = (dir_ / "other_vocab.gguf").string();
    ASSERT_TRUE(model::WriteSyntheticModel(small, kernels::DType::kQ8_0, 4,
                                           other_vocab_, pool)
                    .ok());
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  static std::unique_ptr<InferenceServer> Serve(
      bool speculative, uint16_t* port, const std::string& draft_model = "") {
    ServerConfig c;
    c.model_paths = {model_};
    c.model_aliases = {"tiny"};
    c.port = 0;
    c.threads = 2;
    c.parallel = 3;
    c.ctx_tokens = 512;
    c.queue_budget_s = 0;
    c.shutdown_grace_s = 2;
    c.speculative = speculative;
    c.draft_model = draft_model;
    EXPECT_TRUE(FinalizeConfig(&c).ok());
    auto s = std::make_unique<InferenceServer>(std::move(c));
    auto p = s->Start();
    EXPECT_TRUE(p.ok());
    *port = p.ok() ? *p : 0;
    const auto end = std::chrono::steady_clock::now() + 60s;
    while (Http(*port, "GET", "/readyz").status != 200 &&
           std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(20ms);
    return s;
  }

  static std::string Text(const std::string& body) {
    return std::string(
        json::parse(body).at("choices").at(0).at("text").as_string());
  }

  static inline std::filesystem::path dir_;
  static inline std::string model_;
  static inline std::string draft_;
  static inline std::string other_vocab_;
};

TEST_F(ServeSpeculativeTest, AnswersEqualPlainServingAndAreCounted) {
  std::vector<std::string> expected;
  {
    uint16_t port = 0;
    auto plain = Serve(false, &port);
    for (int i = 0; i < 6; ++i) {
      auto r = Http(port, "POST", "/v1/completions", Body(i, false));
      ASSERT_EQ(r.status, 200) << r.body;
      expected.push_back(Text(r.body));
    }
    plain->Shutdown();
    plain->Wait();
  }
  uint16_t port = 0;
  auto spec = Serve(true, &port);
  // Concurrently, so drafts are verified in batches with other decodes.
  std::vector<std::future<testing::HttpResponse>> answers;
  for (int i = 0; i < 6; ++i)
    answers.push_back(std::async(std::launch::async, [port, i] {
      return Http(port, "POST", "/v1/completions", Body(i, i == 4));
    }));
  for (int i = 0; i < 6; ++i) {
    auto r = answers[i].get();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Text(r.body), expected[i]) << "request " << i;
  }
  const std::string metrics = Http(port, "GET", "/metrics").body;
  const size_t at = metrics.find("redline_spec_decode_accepted_tokens_total{");
  ASSERT_NE(at, std::string::npos);
  const size_t sp = metrics.find("} ", at);
  EXPECT_GT(std::stod(metrics.substr(sp + 2)), 0) << metrics.substr(at, 120);
  // A bad value for the field is a clear 400.
  auto bad = Http(port, "POST", "/v1/completions",
                  R"({"model":"tiny","prompt":"x","speculative":"yes"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("speculative"), std::string::npos);
  spec->Shutdown();
  spec->Wait();
}

// A draft model (a smaller one, and the model itself) through the OpenAI
// completions codec: greedy and seeded answers equal plain serving, with
// concurrent requests (one opting out) batched together, and the
// speculative metrics move.
TEST_F(ServeSpeculativeTest, DraftModelAnswersEqualPlainServing) {
  std::vector<std::string> expected;
  {
    uint16_t port = 0;
    auto plain = Serve(false, &port);
    for (int i = 0; i < 6; ++i) {
      auto r = Http(port, "POST", "/v1/completions", Body(i, false, i >= 3));
      ASSERT_EQ(r.status, 200) << r.body;
      expected.push_back(Text(r.body));
    }
    plain->Shutdown();
    plain->Wait();
  }
  for (const std::string& draft : {draft_, model_}) {
    SCOPED_TRACE(draft);
    uint16_t port = 0;
    auto spec = Serve(false, &port, draft);
    std::vector<std::future<testing::HttpResponse>> answers;
    for (int i = 0; i < 6; ++i)
      answers.push_back(std::async(std::launch::async, [port, i] {
        return Http(port, "POST", "/v1/completions", Body(i, i == 1, i >= 3));
      }));
    for (int i = 0; i < 6; ++i) {
      auto r = answers[i].get();
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(Text(r.body), expected[i]) << "request " << i;
    }
    const std::string metrics = Http(port, "GET", "/metrics").body;
    const double drafted =
        Metric(metrics, "redline_spec_decode_draft_tokens_total");
    const double accepted =
        Metric(metrics, "redline_spec_decode_accepted_tokens_total");
    const double drafts = Metric(metrics, "redline_spec_decode_drafts_total");
    const double rate = Metric(metrics, "redline_spec_decode_acceptance_rate");
    const double per_pass =
        Metric(metrics, "redline_spec_decode_tokens_per_pass");
    EXPECT_GT(drafted, 0);
    EXPECT_GT(drafts, 0);
    EXPECT_LE(accepted, drafted);
    EXPECT_NEAR(rate, drafted > 0 ? accepted / drafted : 0, 1e-6);
    EXPECT_NEAR(per_pass, drafts > 0 ? 1 + accepted / drafts : 0, 1e-6);
    // The model drafting for itself: its greedy proposals are accepted.
    if (draft == model_) {
      EXPECT_GT(accepted, 0);
    }
    spec->Shutdown();
    spec->Wait();
  }
}

TEST_F(ServeSpeculativeTest, DraftModelWithAnotherVocabularyStopsTheServer) {
  ServerConfig c;
  c.model_paths = {model_};
  c.model_aliases = {"tiny"};
  c.port = 0;
  c.threads = 2;
  c.parallel = 1;
  c.ctx_tokens = 256;
  c.draft_model = other_vocab_;
  ASSERT_TRUE(FinalizeConfig(&c).ok());
  InferenceServer s(std::move(c));
  auto p = s.Start();
  if (p.ok()) {
    // The loader refuses the pair; the server exits with status 1.
    EXPECT_EQ(s.Wait(), 1);
    const auto h = Http(*p, "GET", "/readyz");
    EXPECT_NE(h.status, 200);
  } else {
    EXPECT_NE(p.status().message().find("vocabulary"), std::string::npos)
        << p.status().ToString();
  }
}

}  // namespace
}  // namespace redline::server
