#include "server/server_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "server/startup.h"

namespace redline::server {
namespace {

TEST(ServerConfigTest, DefaultsAreSafe) {
  ServerConfig c;
  c.model_path = "/models/smollm2-135m-q8_0.gguf";
  ASSERT_TRUE(FinalizeConfig(&c).ok());
  EXPECT_EQ(c.host, "127.0.0.1");
  EXPECT_EQ(ServedModelName(c), "smollm2-135m-q8_0");
  c.model_alias = "smol";
  EXPECT_EQ(ServedModelName(c), "smol");
}

TEST(ServerConfigTest, RangesAreChecked) {
  auto bad = [](auto mutate) {
    ServerConfig c;
    c.model_path = "m.gguf";
    mutate(c);
    return FinalizeConfig(&c);
  };
  EXPECT_FALSE(bad([](ServerConfig& c) { c.model_path.clear(); }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.port = 70000; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.parallel = 0; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.sse_ping_interval_s = 0; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.metrics_prefix = "vllm:"; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.kv_type = "q8_0"; }).ok());
  EXPECT_FALSE(bad([](ServerConfig& c) { c.api_keys = {""}; }).ok());
  EXPECT_FALSE(
      bad([](ServerConfig& c) { c.api_key_file = "/nonexistent/keys"; }).ok());
}

TEST(ServerConfigTest, KeyFileAddsKeysAndDescribeMasksThem) {
  const std::string path = ::testing::TempDir() + "/keys.txt";
  std::ofstream(path) << "# comment\nsecret-one\n\n  secret-two  \n";
  ServerConfig c;
  c.model_path = "m.gguf";
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
