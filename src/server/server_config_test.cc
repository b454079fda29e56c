#include "server/server_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "server/startup.h"

namespace redline::server {
namespace {

TEST(ServerConfigTest, DefaultsAreSafe) {
  ServerConfig c;
  c.model_paths = {"/models/smollm2-135m-q8_0.gguf"};
  ASSERT_TRUE(FinalizeConfig(&c).ok());
  EXPECT_EQ(c.host, "127.0.0.1");
  ASSERT_EQ(c.models.size(), 1u);
  EXPECT_EQ(c.models[0].name, "smollm2-135m-q8_0");
  EXPECT_EQ(c.models[0].parallel, c.parallel);
  EXPECT_GE(c.models[0].threads, 1);
  ServerConfig a;
  a.model_paths = {"/models/smollm2-135m-q8_0.gguf"};
  a.model_aliases = {"smol"};
  ASSERT_TRUE(FinalizeConfig(&a).ok());
  EXPECT_EQ(a.models[0].name, "smol");
}

TEST(ServerConfigTest, SeveralModelsShareTheThreadBudget) {
  ServerConfig c;
  c.model_paths = {"a.gguf", "b.gguf", "c.gguf"};
  c.threads = 8;
  ASSERT_TRUE(FinalizeConfig(&c).ok());
  ASSERT_EQ(c.models.size(), 3u);
  for (const ModelSpec& m : c.models) EXPECT_EQ(m.threads, 2);
  ServerConfig own;
  own.threads = 8;
  own.models = {ModelSpec{}, ModelSpec{}};
  own.models[0].path = "a.gguf";
  own.models[0].threads = 6;
  own.models[1].path = "b.gguf";
  ASSERT_TRUE(FinalizeConfig(&own).ok());
  EXPECT_EQ(own.models[0].threads, 6);
  EXPECT_EQ(own.models[1].threads, 2);
  ServerConfig tight;
  tight.model_paths = {"a.gguf", "b.gguf", "c.gguf"};
  tight.threads = 2;
  ASSERT_TRUE(FinalizeConfig(&tight).ok());
  for (const ModelSpec& m : tight.models) EXPECT_EQ(m.threads, 1);
}

TEST(ServerConfigTest, RangesAreChecked) {
  auto bad = [](auto mutate) {
    ServerConfig c;
    c.model_paths = {"m.gguf"};
    mutate(c);
    return FinalizeConfig(&c);
  };
  EXPECT_FALSE(bad([](ServerConfig& c) { c.model_paths.clear(); }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.sampling.top_p = 0; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.sampling.temperature = -1; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.port = 70000; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.parallel = 0; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.sse_ping_interval_s = 0; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.metrics_prefix = "vllm:"; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.kv_type = "q4_0"; }).ok());
  EXPECT_TRUE(bad([](ServerConfig& c) { c.kv_type = "q8_0"; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.api_keys = {""}; }).ok());
  EXPECT_FALSE(
      bad([](ServerConfig& c) { c.api_key_file = "/nonexistent/keys"; }).ok());
}

TEST(ServerConfigTest, KeyFileAddsKeysAndDescribeMasksThem) {
  const std::string path = ::testing::TempDir() + "/keys.txt";
  std::ofstream(path) << "# comment\nsecret-one\n\n  secret-two  \n";
  ServerConfig c;
  c.model_paths = {"m.gguf"};
  c.api_keys = {"secret-zero"};
  c.api_key_file = path;
  ASSERT_TRUE(FinalizeConfig(&c).ok());
  EXPECT_EQ(c.api_keys, (std::vector<std::string>{"secret-zero", "secret-one",
                                                  "secret-two"}));
  const std::string text = DescribeConfig(c);
  EXPECT_EQ(text.find("secret"), std::string::npos) << text;
  EXPECT_NE(text.find("api-key = [3 key(s)]"), std::string::npos) << text;
  EXPECT_NE(text.find("port = 8080"), std::string::npos) << text;
  std::remove(path.c_str());
}

TEST(ServerConfigTest, EveryFlagHasALongNameAndHelp) {
  ServerConfig c;
  int n = 0;
  VisitServerFlags(
      c, [&](auto&, std::string_view names, std::string_view help, FlagKind) {
        EXPECT_NE(names.find("--"), std::string_view::npos) << names;
        EXPECT_FALSE(help.empty()) << names;
        ++n;
      });
  EXPECT_GT(n, 20);
}

TEST(StartupTrackerTest, ProgressCoversLoadThenWarmup) {
  StartupTracker t;
  EXPECT_EQ(t.Snapshot().phase, Phase::kStarting);
  t.SetPhase(Phase::kLoading);
  t.SetLoadProgress(0.5);
  t.SetLoadProgress(0.4);  // never goes back
  EXPECT_DOUBLE_EQ(t.Snapshot().progress, 0.5 * StartupTracker::kLoadShare);
  EXPECT_GE(t.EstimatedSecondsToReady(), 1);
  t.SetPhase(Phase::kWarming);
  EXPECT_DOUBLE_EQ(t.Snapshot().progress, StartupTracker::kLoadShare);
  t.SetPhase(Phase::kReady);
  StartupSnapshot s = t.Snapshot();
  EXPECT_EQ(s.progress, 1);
  EXPECT_GE(s.startup_s, 0);
  t.Fail("disk on fire");
  EXPECT_EQ(t.Snapshot().error, "disk on fire");
  EXPECT_EQ(PhaseName(t.phase()), "failed");
}

}  // namespace
}  // namespace redline::server
