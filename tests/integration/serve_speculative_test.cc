// `redline serve --speculative`: answers equal those of a server without it
// (greedy, concurrent requests batched together), a request can opt out
// with "speculative": false, and /metrics counts drafted and accepted
// tokens. Loopback, port 0, bounded waits.
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

std::string Body(int i, bool opt_out) {
  // Repetitive prompts: drafts from the prompt are accepted.
  std::string prompt;
  for (int r = 0; r < 4; ++r)
    prompt += "the cat " + std::to_string(i) + " sat on the mat. ";
  return R"({"model":"tiny","prompt":")" + prompt +
         R"(","max_tokens":32,"temperature":0,"ignore_eos":true)" +
         (opt_out ? R"(,"speculative":false})" : "}");
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
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  static std::unique_ptr<InferenceServer> Serve(bool speculative,
                                                uint16_t* port) {
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

}  // namespace
}  // namespace redline::server
