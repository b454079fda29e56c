// `redline serve` with two models of different shapes in one process: each
// request is answered by the model it names, concurrently, with the greedy
// output a one-model server gives; /v1/models, /v1/models/{id}, probes and
// metrics cover both. Loopback, port 0, bounded polls.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
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
using namespace std::chrono_literals;

json::value J(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  EXPECT_FALSE(ec) << "not JSON: " << text;
  return v;
}

std::string Body(std::string_view model, std::string_view user,
                 bool stream = false) {
  json::object o;
  if (!model.empty()) o["model"] = model;
  o["messages"] =
      json::array{json::object{{"role", "user"}, {"content", user}}};
  o["max_tokens"] = 12;
  o["temperature"] = 0;
  o["ignore_eos"] = true;
  o["stream"] = stream;
  return json::serialize(o);
}

std::string Content(const HttpResponse& r) {
  json::value v = J(r.body);
  return std::string(
      v.at("choices").at(0).at("message").at("content").as_string());
}

template <typename F>
bool Eventually(F fn, std::chrono::milliseconds limit = 60s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (fn()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return fn();
}

class MultiModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() /
           ("redline_multi_model_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    ThreadPool pool(2);
    light_ = (dir_ / "light.gguf").string();
    full_ = (dir_ / "full.gguf").string();
    auto tiny = model::SyntheticPreset("tiny");
    auto qwen = model::SyntheticPreset("tiny-qwen2");
    ASSERT_TRUE(tiny.ok() && qwen.ok());
    ASSERT_TRUE(model::WriteSyntheticModel(*tiny, kernels::DType::kQ8_0, 7,
                                           light_, pool)
                    .ok());
    ASSERT_TRUE(
        model::WriteSyntheticModel(*qwen, kernels::DType::kF16, 9, full_, pool)
            .ok());
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  struct Running {
    std::unique_ptr<InferenceServer> server;
    uint16_t port = 0;
    ~Running() {
      if (server) {
        server->Shutdown();
        server->Wait();
      }
    }
  };

  static std::unique_ptr<Running> Serve(std::vector<std::string> paths,
                                        std::vector<std::string> aliases) {
    ServerConfig c;
    c.model_paths = std::move(paths);
    c.model_aliases = std::move(aliases);
    c.port = 0;
    c.threads = 2;
    c.parallel = 2;
    c.ctx_tokens = 512;
    c.shutdown_grace_s = 2;
    // Concurrent requests queue for slots instead of being refused before
    // the first one finished (the admission rule is tested elsewhere).
    c.queue_budget_s = 0;
    Status s = FinalizeConfig(&c);
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto r = std::make_unique<Running>();
    r->server = std::make_unique<InferenceServer>(std::move(c));
    auto port = r->server->Start();
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    r->port = port.ok() ? *port : 0;
    EXPECT_TRUE(Eventually(
        [&] { return Http(r->port, "GET", "/readyz").status == 200; }));
    return r;
  }

  static inline std::filesystem::path dir_;
  static inline std::string light_, full_;
};

TEST_F(MultiModelTest, EachModelAnswersAsItsOneModelServerWould) {
  const std::vector<std::string> prompts = {"Once upon a time", "The cat",
                                            "Hello there"};
  std::map<std::string, std::vector<std::string>> expected;
  for (const auto& [name, path] :
       {std::pair<std::string, std::string>{"light", light_},
        {"full", full_}}) {
    auto one = Serve({path}, {name});
    for (const std::string& p : prompts) {
      HttpResponse r =
          Http(one->port, "POST", "/v1/chat/completions", Body(name, p));
      ASSERT_EQ(r.status, 200) << r.body;
      expected[name].push_back(Content(r));
    }
  }
  // The two shapes must actually differ, or the routing check means little.
  EXPECT_NE(expected["light"], expected["full"]);

  auto both = Serve({light_, full_}, {"light", "full"});
  // Concurrent requests to both models, several rounds.
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::string> failures;
  for (int round = 0; round < 2; ++round) {
    for (const std::string name : {"light", "full"}) {
      for (size_t i = 0; i < prompts.size(); ++i) {
        threads.emplace_back([&, name, i] {
          HttpResponse r = Http(both->port, "POST", "/v1/chat/completions",
                                Body(name, prompts[i]));
          std::lock_guard<std::mutex> lock(mu);
          if (r.status != 200) {
            failures.push_back(name + ": " + r.body);
            return;
          }
          json::value v = J(r.body);
          if (v.at("model").as_string() != name)
            failures.push_back("answered as " +
                               std::string(v.at("model").as_string()));
          if (Content(r) != expected[name][i])
            failures.push_back(name + " #" + std::to_string(i) + ": '" +
                               Content(r) + "' != '" + expected[name][i] + "'");
        });
      }
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(failures.empty()) << failures.front();

  // Streaming goes to the right model too.
  HttpResponse s = Http(both->port, "POST", "/v1/chat/completions",
                        Body("full", prompts[0], /*stream=*/true));
  ASSERT_EQ(s.status, 200);
  std::string streamed;
  for (const std::string& d : testing::ParseSse(s.body).data) {
    if (d == "[DONE]") continue;
    json::value v = J(d);
    EXPECT_EQ(v.at("model").as_string(), "full");
    for (const json::value& c : v.at("choices").as_array()) {
      if (const json::value* t =
              c.at("delta").as_object().if_contains("content");
          t && t->is_string())
        streamed += t->as_string();
    }
  }
  EXPECT_EQ(streamed, expected["full"][0]);

  // No "model": the first configured one.
  HttpResponse d =
      Http(both->port, "POST", "/v1/chat/completions", Body("", prompts[1]));
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(Content(d), expected["light"][1]);
}

TEST_F(MultiModelTest, ModelsProbesAndMetricsCoverBoth) {
  auto both = Serve({light_, full_}, {"light", "full"});
  json::value list = J(Http(both->port, "GET", "/v1/models").body);
  ASSERT_EQ(list.at("data").as_array().size(), 2u);
  EXPECT_EQ(list.at("data").at(0).at("id").as_string(), "light");
  EXPECT_EQ(list.at("data").at(1).at("id").as_string(), "full");
  EXPECT_EQ(list.at("data").at(1).at("meta").at("architecture").as_string(),
            "qwen2");

  HttpResponse one = Http(both->port, "GET", "/v1/models/full");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(J(one.body).at("id").as_string(), "full");
  EXPECT_EQ(Http(both->port, "GET", "/v1/models/nope").status, 404);

  HttpResponse unknown =
      Http(both->port, "POST", "/v1/chat/completions", Body("nope", "x"));
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("'light', 'full'"), std::string::npos)
      << unknown.body;
  EXPECT_EQ(J(unknown.body).at("error").at("param").as_string(), "model");

  const std::string startup_text = Http(both->port, "GET", "/startupz").body;
  // Plain decimals, not 1E0.
  EXPECT_NE(startup_text.find("\"progress\":1.0000"), std::string::npos)
      << startup_text;
  json::value startup = J(startup_text);
  ASSERT_EQ(startup.at("models").as_array().size(), 2u);
  for (const json::value& m : startup.at("models").as_array())
    EXPECT_EQ(m.at("phase").as_string(), "ready");

  ASSERT_EQ(Http(both->port, "POST", "/v1/chat/completions", Body("full", "x"))
                .status,
            200);
  ASSERT_EQ(Http(both->port, "POST", "/v1/chat/completions", Body("light", "x"))
                .status,
            200);
  const std::string metrics = Http(both->port, "GET", "/metrics").body;
  for (const char* name : {"light", "full"}) {
    const std::string series =
        std::string("redline_request_success_total{model_name=\"") + name +
        "\",finished_reason=\"length\"} 1";
    EXPECT_NE(metrics.find(series), std::string::npos) << series;
    EXPECT_NE(metrics.find(std::string("redline_startup_phase{model_name=\"") +
                           name + "\",phase=\"ready\"} 1"),
              std::string::npos);
  }
}

TEST_F(MultiModelTest, ConfigErrorsAreRefusedBeforeListening) {
  ServerConfig dup;
  dup.model_paths = {light_, light_};
  EXPECT_FALSE(FinalizeConfig(&dup).ok());  // both would be "light"
  ServerConfig aliases;
  aliases.model_paths = {light_};
  aliases.model_aliases = {"a", "b"};
  EXPECT_FALSE(FinalizeConfig(&aliases).ok());

  // A context whose KV cache cannot fit: refused by Start with the bytes,
  // before the port is bound.
  ServerConfig huge;
  huge.model_paths = {light_};
  huge.ctx_tokens = 100000000;
  huge.port = 0;
  ASSERT_TRUE(FinalizeConfig(&huge).ok());
  InferenceServer server(std::move(huge));
  auto port = server.Start();
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(port.status().message().find("KV cache"), std::string::npos)
      << port.status().ToString();
}

TEST_F(MultiModelTest, YamlConfigListsModelsWithTheirOwnSettings) {
  const std::string path = (dir_ / "serve.yaml").string();
  {
    std::ofstream out(path);
    out << "port: 0\nparallel: 3\nmodels:\n"
        << "  - path: " << light_ << "\n    name: light\n    ctx: 256\n"
        << "  - path: " << full_
        << "\n    name: full\n    aliases: [big]\n    parallel: 1\n"
        << "    draft-model: " << light_ << "\n";
  }
  std::vector<ModelSpec> models;
  std::vector<std::pair<std::string, std::vector<std::string>>> flags;
  ASSERT_TRUE(ParseConfigYaml(path, &models, &flags).ok());
  ASSERT_EQ(models.size(), 2u);
  ASSERT_EQ(flags.size(), 2u);
  ServerConfig c;
  c.parallel = 3;
  c.models = models;
  ASSERT_TRUE(FinalizeConfig(&c).ok());
  EXPECT_EQ(c.models[0].ctx_tokens, 256);
  EXPECT_EQ(c.models[0].parallel, 3);  // inherited
  EXPECT_EQ(c.models[1].parallel, 1);
  EXPECT_EQ(c.models[1].aliases, std::vector<std::string>{"big"});
  // A draft model of its own; the other inherits --draft-model (none).
  EXPECT_EQ(c.models[1].draft_model, light_);
  EXPECT_TRUE(c.models[0].draft_model.empty());
  ServerConfig global;
  global.draft_model = "d.gguf";
  global.models = models;
  ASSERT_TRUE(FinalizeConfig(&global).ok());
  EXPECT_EQ(global.models[0].draft_model, "d.gguf");
  EXPECT_EQ(global.models[1].draft_model, light_);

  {
    std::ofstream out(path);
    out << "models:\n  - path: x.gguf\n    colour: red\n";
  }
  models.clear();
  Status bad = ParseConfigYaml(path, &models, &flags);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("colour"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find(":3"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace redline::server
