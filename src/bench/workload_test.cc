#include "bench/workload.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>

#include "bench/scrape.h"

namespace redline::bench {
namespace {

namespace json = boost::json;

class WorkloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/redline_workload_" +
           std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(WorkloadTest, ScenarioYamlWithWeightedTasks) {
  Write("p.jsonl",
        "{\"prompt\": \"alpha\", \"max_tokens\": 7}\n{\"messages\": "
        "[{\"role\": \"user\", \"content\": \"beta\"}]}\n");
  std::string path = Write("s.yaml", R"(
tasks:
  - name: chat-short
    weight: 3
    messages:
      - {role: system, content: "Be brief."}
      - {role: user, content: "Summarize: {{prompt}}"}
    input_tokens: 10
    max_tokens: 32
    temperature: 0.7
    stop: ["\n\n"]
    extra: {logprobs: false, top_logprobs: 0}
    headers: {X-Tenant: a}
  - name: docs
    weight: 1
    api: completions
    source: jsonl
    file: p.jsonl
    stream: false
)");
  auto tasks = Workload::LoadScenario(path);
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[0].weight, 3);
  EXPECT_EQ((*tasks)[1].source, TaskSpec::Source::kJsonl);
  EXPECT_EQ((*tasks)[1].file, dir_ + "/p.jsonl");  // relative to the scenario
  auto w = Workload::Create(*tasks, "m", "/v1", 1);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  UserState u;
  u.rng.seed(5);
  int chat = 0, docs = 0;
  for (int i = 0; i < 400; ++i) {
    PreparedRequest p = (*w)->Prepare(u);
    json::value body = json::parse(p.http.body);
    if (p.task == 0) {
      chat++;
      EXPECT_EQ(p.http.target, "/v1/chat/completions");
      const std::string user = std::string(
          body.at("messages").as_array()[1].at("content").as_string());
      EXPECT_EQ(user.rfind("Summarize: ", 0), 0u);
      EXPECT_EQ(user.find("{{prompt}}"), std::string::npos);
      EXPECT_EQ(body.at("max_tokens").as_int64(), 32);
      EXPECT_EQ(body.at("logprobs").as_bool(), false);
      EXPECT_TRUE(body.at("stream_options").at("include_usage").as_bool());
      bool tenant = false;
      for (const auto& h : p.http.headers)
        tenant |= h.name == "X-Tenant" && h.value == "a";
      EXPECT_TRUE(tenant);
    } else {
      docs++;
      EXPECT_EQ(p.http.target, "/v1/completions");
      EXPECT_FALSE(body.at("stream").as_bool());
    }
    (*w)->OnResponse(u, true, "ok");
  }
  EXPECT_NEAR(static_cast<double>(chat) / 400, 0.75,
              0.07);  // @task(3) vs @task(1)
  EXPECT_GT(docs, 0);
}

TEST_F(WorkloadTest, ScenarioErrorsAreReported) {
  EXPECT_FALSE(Workload::LoadScenario(Write("a.yaml", "tasks: []\n")).ok());
  EXPECT_FALSE(
      Workload::LoadScenario(Write("b.yaml", "tasks:\n  - source: jsonl\n"))
          .ok());
  EXPECT_FALSE(
      Workload::LoadScenario(Write("c.yaml", "tasks:\n  - api: grpc\n")).ok());
  EXPECT_FALSE(Workload::LoadScenario(dir_ + "/missing.yaml").ok());
}

TEST_F(WorkloadTest, ShareGptTurnsBecomeSessions) {
  std::string path = Write("sg.json", R"([
    {"id": "1", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"},
                                  {"from": "human", "value": "how are you"}, {"from": "gpt", "value": "fine"}]},
    {"id": "2", "conversations": [{"from": "human", "value": "solo"}]}
  ])");
  TaskSpec t;
  t.source = TaskSpec::Source::kShareGpt;
  t.file = path;
  auto w = Workload::Create({t}, "m", "/v1", 1);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  UserState u;
  PreparedRequest a = (*w)->Prepare(u);
  (*w)->OnResponse(u, true, "reply one");
  PreparedRequest b = (*w)->Prepare(u);
  (*w)->OnResponse(u, true, "reply two");
  PreparedRequest c = (*w)->Prepare(u);
  json::value bb = json::parse(b.http.body);
  ASSERT_EQ(bb.at("messages").as_array().size(), 3u);
  EXPECT_EQ(bb.at("messages").as_array()[1].at("content").as_string(),
            "reply one");
  EXPECT_EQ(bb.at("messages").as_array()[2].at("content").as_string(),
            "how are you");
  EXPECT_EQ(a.session, b.session);
  EXPECT_EQ(b.turn, 1);
  json::value cb = json::parse(c.http.body);
  EXPECT_EQ(cb.at("messages").as_array().size(), 1u);  // next conversation
  EXPECT_EQ(cb.at("messages").as_array()[0].at("content").as_string(), "solo");
}

TEST_F(WorkloadTest, SyntheticLengthsAndSharedPrefixes) {
  auto d = LengthDist::Parse("normal(200,20)");
  ASSERT_TRUE(d.ok());
  std::mt19937_64 rng(1);
  double sum = 0;
  for (int i = 0; i < 2000; ++i) sum += static_cast<double>(d->Sample(rng));
  EXPECT_NEAR(sum / 2000, 200, 3);
  auto u = LengthDist::Parse("10..20");
  ASSERT_TRUE(u.ok());
  for (int i = 0; i < 100; ++i) {
    int64_t x = u->Sample(rng);
    ASSERT_GE(x, 10);
    ASSERT_LE(x, 20);
  }
  EXPECT_FALSE(LengthDist::Parse("20..10").ok());
  EXPECT_EQ(Workload::SyntheticText(5, rng).size() > 5, true);
  auto words = [](const std::string& s) {
    return static_cast<int64_t>(std::count(s.begin(), s.end(), ' ') + 1);
  };
  EXPECT_EQ(words(Workload::SyntheticText(37, rng)), 37);

  TaskSpec t;
  t.source = TaskSpec::Source::kSynthetic;
  t.input_tokens = *LengthDist::Parse("16");
  t.output_tokens = *LengthDist::Parse("8..8");
  t.pin_output_length = true;
  t.shared_prefix_tokens = 50;
  t.prefix_groups = 2;
  auto w = Workload::Create({t}, "m", "/v1", 1);
  ASSERT_TRUE(w.ok());
  UserState us;
  std::set<std::string> prefixes;
  for (int i = 0; i < 40; ++i) {
    PreparedRequest p = (*w)->Prepare(us);
    json::value b = json::parse(p.http.body);
    const std::string content(
        b.at("messages").as_array()[0].at("content").as_string());
    prefixes.insert(content.substr(0, content.find("\n\n")));
    EXPECT_EQ(b.at("max_tokens").as_int64(), 8);
    EXPECT_EQ(b.at("min_tokens").as_int64(), 8);
    EXPECT_TRUE(b.at("ignore_eos").as_bool());
    EXPECT_EQ(p.input_tokens_planned, 66);
  }
  EXPECT_EQ(prefixes.size(), 2u);
}

}  // namespace
}  // namespace redline::bench
