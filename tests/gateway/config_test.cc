// The gateway's YAML config and its checks: every key reaches its field,
// and each mistake is refused naming the line and the key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gateway/config_yaml.h"
#include "gateway/gateway_config.h"

namespace redline::gateway {
namespace {

constexpr const char* kFull = R"(port: 9000
api-key: [k1, k2]
default-pool: smol
pools:
  - name: smol
    policy: prefix_affinity
    models:
      - name: smollm2
        aliases: [small, default]
        upstream-model: tiny
      - plain
    max-in-flight: 16
    connect-timeout: 500ms
    first-byte-timeout: 5s
    idle-timeout: 30s
    deadline: 2m
    retries: 3
    retry-budget: {ratio: 0.1, min-per-second: 5, window: 20s}
    hedge-after: 300ms
    health: {path: /health, interval: 1s, timeout: 250ms, healthy-threshold: 2, unhealthy-threshold: 3}
    outlier: {consecutive-failures: 4, base-ejection: 2s, max-ejection: 30s}
    affinity: {prefix-bytes: 1024, load-factor: 1.5, virtual-nodes: 50, max-sessions: 1000}
    max-response-bytes: 1048576
    upstreams:
      - url: http://127.0.0.1:8081
        name: a
        weight: 2
        max-in-flight: 4
        first-byte-timeout: 1s
        api-key: secret
      - http://127.0.0.1:8082/v1
  - name: big
    max_in_flight: 8
    hedge_after: p95
    models: ["*"]
    upstreams: [http://10.0.0.1:8080]
)";

Status Load(const std::string& text, GatewayConfig* c) {
  std::vector<FlagItem> flags;
  c->config_path = "gw.yaml";
  RL_RETURN_IF_ERROR(ParseGatewayYamlText(text, "gw.yaml", &c->pools, &flags));
  for (const FlagItem& f : flags) {
    if (f.key == "port") c->port = std::stoi(f.values.at(0));
    if (f.key == "api-key") c->api_keys = f.values;
    if (f.key == "default-pool") c->default_pool = f.values.at(0);
  }
  return FinalizeGatewayConfig(c);
}

std::string Error(const std::string& text) {
  GatewayConfig c;
  Status s = Load(text, &c);
  EXPECT_FALSE(s.ok()) << text;
  return s.message();
}

TEST(GatewayConfigTest, EveryKeyReachesItsField) {
  GatewayConfig c;
  ASSERT_TRUE(Load(kFull, &c).ok()) << Load(kFull, &c).message();
  EXPECT_EQ(c.port, 9000);
  EXPECT_EQ(c.api_keys.size(), 2u);
  ASSERT_EQ(c.pools.size(), 2u);
  const PoolSpec& p = c.pools[0];
  EXPECT_EQ(p.name, "smol");
  EXPECT_EQ(p.policy, PolicyKind::kPrefixAffinity);
  ASSERT_EQ(p.models.size(), 2u);
  EXPECT_EQ(p.models[0].aliases,
            (std::vector<std::string>{"small", "default"}));
  EXPECT_EQ(p.models[0].upstream_model, "tiny");
  EXPECT_EQ(p.models[1].name, "plain");
  EXPECT_EQ(p.max_in_flight, 16);
  EXPECT_EQ(p.connect_timeout_ms, 500);
  EXPECT_EQ(p.first_byte_timeout_ms, 5000);
  EXPECT_EQ(p.idle_timeout_ms, 30000);
  EXPECT_EQ(p.deadline_ms, 120000);
  EXPECT_EQ(p.retries, 3);
  EXPECT_DOUBLE_EQ(p.retry_budget.ratio, 0.1);
  EXPECT_DOUBLE_EQ(p.retry_budget.min_per_s, 5);
  EXPECT_EQ(p.retry_budget.window_ms, 20000);
  EXPECT_EQ(p.hedge, HedgeMode::kFixed);
  EXPECT_EQ(p.hedge_after_ms, 300);
  EXPECT_EQ(p.probe.path, "/health");
  EXPECT_EQ(p.probe.interval_ms, 1000);
  EXPECT_EQ(p.probe.timeout_ms, 250);
  EXPECT_EQ(p.health.healthy_threshold, 2);
  EXPECT_EQ(p.health.unhealthy_threshold, 3);
  EXPECT_EQ(p.health.consecutive_failures, 4);
  EXPECT_EQ(p.health.base_ejection_ms, 2000);
  EXPECT_EQ(p.health.max_ejection_ms, 30000);
  EXPECT_EQ(p.affinity_prefix_bytes, 1024);
  EXPECT_DOUBLE_EQ(p.affinity.load_factor, 1.5);
  EXPECT_EQ(p.affinity.virtual_nodes, 50);
  EXPECT_EQ(p.affinity.max_sessions, 1000);
  EXPECT_EQ(p.max_response_bytes, 1 << 20);
  ASSERT_EQ(p.upstreams.size(), 2u);
  EXPECT_EQ(p.upstreams[0].name, "a");
  EXPECT_DOUBLE_EQ(p.upstreams[0].weight, 2);
  EXPECT_EQ(p.upstreams[0].max_in_flight, 4);
  EXPECT_EQ(p.upstreams[0].first_byte_timeout_ms, 1000);
  EXPECT_EQ(p.upstreams[0].connect_timeout_ms, 500);  // inherited
  EXPECT_EQ(p.upstreams[0].api_key, "secret");
  EXPECT_EQ(p.upstreams[1].name, "127.0.0.1:8082");  // default name
  EXPECT_EQ(p.upstreams[1].max_in_flight, 16);
  const PoolSpec& big = c.pools[1];
  EXPECT_EQ(big.max_in_flight, 8);  // underscores accepted
  EXPECT_EQ(big.hedge, HedgeMode::kP95);
  EXPECT_EQ(big.models[0].name, "*");
  EXPECT_EQ(c.default_pool, "smol");
}

TEST(GatewayConfigTest, FlagsMakeTheDefaultPool) {
  GatewayConfig c;
  c.upstream_urls = {"http://127.0.0.1:1", "http://127.0.0.1:2"};
  c.models = {"m"};
  c.policy = "round_robin";
  ASSERT_TRUE(FinalizeGatewayConfig(&c).ok());
  ASSERT_EQ(c.pools.size(), 1u);
  EXPECT_EQ(c.pools[0].name, "default");
  EXPECT_EQ(c.pools[0].upstreams.size(), 2u);
  EXPECT_EQ(c.pools[0].policy, PolicyKind::kRoundRobin);
  EXPECT_EQ(c.pools[0].models[0].name, "m");
}

TEST(GatewayConfigTest, MistakesNameTheLineAndTheKey) {
  EXPECT_EQ(Error("pools:\n  - name: a\n    upstreams: [http://h:1]\n"
                  "    first-byte-timeout: 30\n"),
            "--config gw.yaml:4: pools[0].first-byte-timeout: bad duration "
            "'30': a unit is required (us, ms, s, m, h) (write e.g. 250ms, "
            "2s, 1m)");
  EXPECT_NE(Error("pools:\n  - name: a\n    upstreams: [http://h:1]\n"
                  "    colour: red\n")
                .find("gw.yaml:4: pools[0].colour: unknown key"),
            std::string::npos);
  EXPECT_NE(Error("pools:\n  - name: a\n    upstreams:\n"
                  "      - url: ftp://h:1\n")
                .find("gw.yaml:4: pools[0].upstreams[0].url: bad URL"),
            std::string::npos);
  EXPECT_NE(Error("default-pool: nope\npools:\n  - name: a\n"
                  "    upstreams: [http://h:1]\n")
                .find("default-pool: 'nope' names no pool (pools: a)"),
            std::string::npos);
  EXPECT_NE(Error("pools:\n  - name: a\n    models: [m]\n    upstreams: "
                  "[http://h:1]\n  - name: b\n    models: [m]\n"
                  "    upstreams: [http://h:2]\n")
                .find("gw.yaml:5: pools[1].models: model 'm' is served by "
                      "two pools"),
            std::string::npos);
  EXPECT_NE(Error("pools:\n  - name: a\n    policy: random\n"
                  "    upstreams: [http://h:1]\n")
                .find("gw.yaml:3: pools[0].policy: unknown policy 'random'"),
            std::string::npos);
  EXPECT_NE(Error("pools:\n  - name: a\n    max-in-flight: lots\n"
                  "    upstreams: [http://h:1]\n")
                .find("gw.yaml:3: pools[0].max-in-flight: 'lots' is not a "
                      "valid integer"),
            std::string::npos);
  EXPECT_NE(Error("pools:\n  - name: a\n")
                .find("gw.yaml:2: pools[0].upstreams: "
                      "a pool needs an upstream"),
            std::string::npos);
  EXPECT_NE(Error("pools: [\n").find("gw.yaml:"), std::string::npos);
  EXPECT_NE(Error("pools:\n  - name: a\n    upstreams: [http://h:1, "
                  "http://h:1]\n")
                .find("appears twice"),
            std::string::npos);
}

TEST(GatewayConfigTest, ScrapeMetricsAndSlowStartKeys) {
  GatewayConfig c;
  ASSERT_TRUE(Load("pools:\n"
                   "  - name: a\n"
                   "    scrape-metrics: 1s\n"
                   "    slow-start: 30s\n"
                   "    upstreams:\n"
                   "      - url: http://h:1\n"
                   "        scrape-metrics: off\n"
                   "      - url: http://h:2\n"
                   "      - {url: 'http://h:3', scrape-metrics: 500ms}\n"
                   "  - name: b\n"
                   "    models: [x]\n"
                   "    scrape-metrics: {interval: 2s, timeout: 300ms, "
                   "stale-intervals: 5, path: /stats}\n"
                   "    upstreams: [http://h:4]\n"
                   "  - name: c\n"
                   "    models: [y]\n"
                   "    upstreams: [http://h:5]\n",
                   &c)
                  .ok());
  const PoolSpec& a = c.pools[0];
  EXPECT_EQ(a.scrape.interval_ms, 1000);
  EXPECT_EQ(a.scrape.timeout_ms, 1000);  // the interval, at most 1 s
  EXPECT_EQ(a.scrape.stale_intervals, 3);
  EXPECT_EQ(a.scrape.path, "/metrics");
  EXPECT_EQ(a.slow_start_ms, 30000);
  EXPECT_EQ(a.upstreams[0].scrape_interval_ms, 0);
  EXPECT_EQ(a.upstreams[1].scrape_interval_ms, 1000);  // inherited
  EXPECT_EQ(a.upstreams[2].scrape_interval_ms, 500);
  const PoolSpec& b = c.pools[1];
  EXPECT_EQ(b.scrape.interval_ms, 2000);
  EXPECT_EQ(b.scrape.timeout_ms, 300);
  EXPECT_EQ(b.scrape.stale_intervals, 5);
  EXPECT_EQ(b.scrape.path, "/stats");
  EXPECT_EQ(b.slow_start_ms, 0);  // off by default
  EXPECT_EQ(c.pools[2].scrape.interval_ms, 0);
  EXPECT_EQ(c.pools[2].upstreams[0].scrape_interval_ms, 0);

  // The flags are every pool's defaults; a pool's own key wins.
  GatewayConfig f;
  f.scrape_metrics = "250ms";
  f.slow_start = "1m";
  ASSERT_TRUE(Load("pools:\n  - name: a\n    upstreams: [http://h:1]\n"
                   "  - name: b\n    models: [x]\n    scrape-metrics: off\n"
                   "    slow-start: 0\n    upstreams: [http://h:2]\n",
                   &f)
                  .ok());
  EXPECT_EQ(f.pools[0].scrape.interval_ms, 250);
  EXPECT_EQ(f.pools[0].scrape.timeout_ms, 250);
  EXPECT_EQ(f.pools[0].upstreams[0].scrape_interval_ms, 250);
  EXPECT_EQ(f.pools[0].slow_start_ms, 60000);
  EXPECT_EQ(f.pools[1].scrape.interval_ms, 0);
  EXPECT_EQ(f.pools[1].slow_start_ms, 0);
}

TEST(GatewayConfigTest, ScrapeAndSlowStartMistakesNameTheKey) {
  EXPECT_EQ(Error("pools:\n  - name: a\n    upstreams: [http://h:1]\n"
                  "    scrape-metrics: 1\n"),
            "--config gw.yaml:4: pools[0].scrape-metrics: bad duration '1': "
            "a unit is required (us, ms, s, m, h) (write e.g. 250ms, 2s, 1m)");
  EXPECT_NE(Error("pools:\n  - name: a\n    upstreams: [http://h:1]\n"
                  "    slow-start: soon\n")
                .find("gw.yaml:4: pools[0].slow-start: bad duration 'soon'"),
            std::string::npos);
  EXPECT_NE(Error("pools:\n  - name: a\n    upstreams: [http://h:1]\n"
                  "    scrape-metrics: {interval: 1s, stale-intervals: 0}\n")
                .find("gw.yaml:4: pools[0].scrape-metrics.stale-intervals: "
                      "must be in 1..1000"),
            std::string::npos);
  EXPECT_NE(Error("pools:\n  - name: a\n    upstreams: [http://h:1]\n"
                  "    scrape-metrics: {every: 1s}\n")
                .find("pools[0].scrape-metrics.every: unknown key"),
            std::string::npos);
  EXPECT_NE(Error("pools:\n  - name: a\n    upstreams:\n"
                  "      - {url: 'http://h:1', scrape-metrics: 10ms}\n")
                .find("gw.yaml:4: pools[0].upstreams[0].scrape-metrics: must "
                      "be at least 100ms"),
            std::string::npos);
  GatewayConfig c;
  c.upstream_urls = {"http://h:1"};
  c.scrape_metrics = "5";
  EXPECT_NE(FinalizeGatewayConfig(&c).message().find(
                "--scrape-metrics: bad duration '5'"),
            std::string::npos);
  GatewayConfig d;
  d.upstream_urls = {"http://h:1"};
  d.slow_start = "-3s";
  EXPECT_NE(FinalizeGatewayConfig(&d).message().find("--slow-start: "),
            std::string::npos);
}

TEST(GatewayConfigTest, FlagsAndPoolsAreExclusive) {
  GatewayConfig c;
  c.upstream_urls = {"http://h:1"};
  std::vector<FlagItem> flags;
  ASSERT_TRUE(ParseGatewayYamlText("pools:\n  - name: a\n    upstreams: "
                                   "[http://h:2]\n",
                                   "x", &c.pools, &flags)
                  .ok());
  EXPECT_FALSE(FinalizeGatewayConfig(&c).ok());
  GatewayConfig none;
  EXPECT_NE(FinalizeGatewayConfig(&none).message().find("--upstream"),
            std::string::npos);
}

}  // namespace
}  // namespace redline::gateway
