// GatewayConfig: every setting of `redline gateway`.
//
// Two ways in, as `redline serve` has: flags for the simple case (one pool
// of `--upstream` URLs), or a YAML file (`--config gateway.yaml`) whose
// top-level keys are the long flag names plus a `pools:` list
// (ParseGatewayYaml, config_yaml.h). FinalizeGatewayConfig turns either into
// `pools` with every inherited value filled in and checks it, so the rest of
// the gateway reads one shape. docs/GATEWAY.md documents every key.
//
// VisitGatewayFlags lists each flag once (names, help, kind); the CLI builds
// its options from it, so --help and the config keys never disagree.
//
// Ownership: plain values. Thread-safety: thread-compatible.
#ifndef REDLINE_GATEWAY_GATEWAY_CONFIG_H_
#define REDLINE_GATEWAY_GATEWAY_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gateway/cache_config.h"
#include "gateway/policy.h"
#include "gateway/retry_budget.h"
#include "gateway/upstream_health.h"

namespace redline::gateway {

// One model name clients may send, routed to the pool that lists it.
struct ModelRoute {
  std::string name;                  // listed in /v1/models
  std::vector<std::string> aliases;  // also accepted in "model"
  // The name the upstreams know it by, written into the forwarded body's
  // "model" when it differs from what the client sent. Empty: the
  // client's name is forwarded unchanged.
  std::string upstream_model;
};

struct UpstreamSpec {
  std::string url;   // http(s)://host:port, with or without a trailing /v1
  std::string name;  // metrics label; default host:port
  double weight = 1;
  // Values below 0 (or empty api_key) inherit the pool's.
  int max_in_flight = -1;
  int64_t connect_timeout_ms = -1;
  int64_t first_byte_timeout_ms = -1;
  int64_t idle_timeout_ms = -1;
  std::string api_key;  // sent upstream as Authorization: Bearer
  // Period of its /metrics scrape; 0: not scraped; -1: the pool's.
  int64_t scrape_interval_ms = -1;
  int line = 0;  // where the config file set it (0: a flag)
};

struct ProbeSpec {
  // GET this path on the upstream's root; a 404 switches to /health (what
  // llama.cpp's and vLLM's servers answer). interval 0: no active probes.
  std::string path = "/readyz";
  int64_t interval_ms = 2'000;
  int64_t timeout_ms = 1'000;
};

// Scraping each upstream's Prometheus /metrics for its own view of its
// load (metrics_scraper.h): requests running and waiting, KV-cache usage.
struct ScrapeSpec {
  // GET `path` every interval; 0: off; -1 (before FinalizeGatewayConfig):
  // the --scrape-metrics default.
  int64_t interval_ms = -1;
  // Answer limit; -1: the interval, at most 1 s.
  int64_t timeout_ms = -1;
  // Data older than this many intervals (or none yet) is stale, and a
  // stale upstream counts as busy (policy.h, EffectiveRequests).
  int stale_intervals = 3;
  std::string path = "/metrics";
};

enum class HedgeMode { kOff, kFixed, kP95 };

struct PoolSpec {
  std::string name;
  // Empty: the union of what the upstreams' /v1/models list (polled with
  // the probes). A model named "*" makes the pool take any name no other
  // pool serves.
  std::vector<ModelRoute> models;
  std::vector<UpstreamSpec> upstreams;
  PolicyKind policy = PolicyKind::kLeastOutstanding;
  // Upstream defaults.
  int max_in_flight = 64;
  int64_t connect_timeout_ms = 2'000;
  // Request sent -> first token of a stream, or the response head of a
  // non-streamed request (which arrives with the whole body). An upstream
  // that stays silent this long is abandoned and the request retried.
  int64_t first_byte_timeout_ms = 60'000;
  // Longest silence within a response (no byte from the upstream).
  int64_t idle_timeout_ms = 60'000;
  // From arrival at the gateway to the last byte, retries included; passed
  // to each attempt as its remaining time.
  int64_t deadline_ms = 600'000;
  int retries = 2;  // extra attempts per request, on other upstreams
  RetryBudgetOptions retry_budget;
  HedgeMode hedge = HedgeMode::kOff;
  int64_t hedge_after_ms = 0;  // kFixed: the delay; kP95: its floor
  ProbeSpec probe;
  HealthOptions health;
  int64_t affinity_prefix_bytes = 4096;
  AffinityOptions affinity;
  // Largest upstream answer buffered (non-streamed bodies, error bodies,
  // events held before the first token); beyond it: 502.
  int64_t max_response_bytes = 64 << 20;
  ScrapeSpec scrape;
  // An upstream that becomes routable again (after probes failed or an
  // ejection) ramps its weight linearly from 10 % to full over this long;
  // 0: off; -1 (before FinalizeGatewayConfig): the --slow-start default.
  int64_t slow_start_ms = -1;
  int line = 0;
};

struct GatewayConfig {
  // --- Flags for the simple case: one pool named "default". ---
  std::vector<std::string> upstream_urls;  // --upstream, repeatable
  std::vector<std::string> models;         // --model: names it serves
  std::string policy = "least_outstanding";

  // --- Network ---
  std::string host = "127.0.0.1";
  int port = 8088;
  std::string port_file;
  int64_t max_body_bytes = 8 << 20;
  std::vector<std::string> api_keys;
  std::string api_key_file;
  double shutdown_grace_s = 30;
  // Pool that takes requests without "model" (default: the first).
  std::string default_pool;
  std::string metrics_prefix = "redline_";
  // Defaults of every pool's scrape-metrics interval and slow-start window
  // (durations, or "off"); a pool's own keys win.
  std::string scrape_metrics = "off";
  std::string slow_start = "off";

  // Tracing (docs/OBSERVABILITY.md), as redline serve's flags; the
  // OTEL_* environment variables apply when these are unset.
  std::string otlp_endpoint;
  std::string trace_file;
  double trace_sample = -1;  // -1: OTEL_TRACES_SAMPLER_ARG, else 1
  double trace_slow_ms = -1;

  // Response cache and light/full routing (the `cache:` and `routing:`
  // sections of the YAML file; the flags below set their common keys).
  CacheConfig cache;
  RoutingConfig routing;

  // From the YAML file, or built from the flags by FinalizeGatewayConfig.
  std::vector<PoolSpec> pools;
  std::string config_path;  // for messages

  // --- Not flags: for tests ---
  uint64_t seed = 0x5eed;
};

enum class GatewayFlagKind { kOption, kSecret };

template <typename Visitor>
void VisitGatewayFlags(GatewayConfig& c, Visitor&& v) {
  v(c.upstream_urls, "--upstream",
    "OpenAI-compatible server to forward to (http://host:port); repeat for "
    "several. They form one pool named \"default\"; a YAML --config with "
    "pools: replaces this",
    GatewayFlagKind::kOption);
  v(c.models, "--model",
    "Model name the --upstream pool serves; repeatable (default: what the "
    "upstreams' /v1/models list)",
    GatewayFlagKind::kOption);
  v(c.policy, "--policy",
    "Routing policy of the --upstream pool: round_robin, least_outstanding, "
    "least_tokens, latency, prefix_affinity",
    GatewayFlagKind::kOption);
  v(c.host, "--host",
    "Address to listen on (127.0.0.1: this machine only; 0.0.0.0: every "
    "interface)",
    GatewayFlagKind::kOption);
  v(c.port, "--port", "TCP port (0: any free port; see --port-file)",
    GatewayFlagKind::kOption);
  v(c.port_file, "--port-file",
    "Write the bound port to this file once listening",
    GatewayFlagKind::kOption);
  v(c.max_body_bytes, "--max-body-bytes",
    "Largest request body accepted; larger ones get 413",
    GatewayFlagKind::kOption);
  v(c.api_keys, "--api-key",
    "API key clients must send (Authorization: Bearer KEY or X-Api-Key: KEY); "
    "repeatable. Upstream keys are set per upstream in the config file",
    GatewayFlagKind::kSecret);
  v(c.api_key_file, "--api-key-file",
    "File with one API key per line (added to --api-key)",
    GatewayFlagKind::kOption);
  v(c.shutdown_grace_s, "--shutdown-grace",
    "Seconds in-flight requests may finish after SIGTERM before they are "
    "cancelled",
    GatewayFlagKind::kOption);
  v(c.default_pool, "--default-pool",
    "Pool that takes requests without \"model\" (default: the first)",
    GatewayFlagKind::kOption);
  v(c.metrics_prefix, "--metrics-prefix",
    "Prefix of metric names: \"redline_\" (default) or \"redline:\"",
    GatewayFlagKind::kOption);
  v(c.scrape_metrics, "--scrape-metrics",
    "Scrape each upstream's /metrics this often (e.g. 1s; off) and route by "
    "the requests it reports running and waiting and its KV-cache usage; "
    "the default of every pool (a pool's scrape-metrics key wins)",
    GatewayFlagKind::kOption);
  v(c.slow_start, "--slow-start",
    "Ramp an upstream that comes back (after failed probes or an ejection) "
    "from 10% of its weight to full over this long (e.g. 30s; off); the "
    "default of every pool (a pool's slow-start key wins)",
    GatewayFlagKind::kOption);
  v(c.otlp_endpoint, "--otlp-endpoint",
    "Export request traces over OTLP/HTTP JSON to this URL (.../v1/traces; "
    "default: OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces when set)",
    GatewayFlagKind::kOption);
  v(c.trace_file, "--trace-file",
    "Write request traces as Chrome/Perfetto trace-event JSON to this file",
    GatewayFlagKind::kOption);
  v(c.trace_sample, "--trace-sample",
    "Share of new traces kept, 0..1 (default: OTEL_TRACES_SAMPLER_ARG, else "
    "1); failed and --trace-slow-ms requests are always kept",
    GatewayFlagKind::kOption);
  v(c.trace_slow_ms, "--trace-slow-ms",
    "Always keep the traces of requests at least this slow (-1: off)",
    GatewayFlagKind::kOption);
  v(c.cache.enabled, "--cache",
    "Answer repeated deterministic requests from the response cache (TTL "
    "classes, rules and more in the config's cache: section)",
    GatewayFlagKind::kOption);
  v(c.cache.redis_url, "--redis",
    "Share the cache through Redis (redis://host:port or unix:/path); "
    "implies --cache",
    GatewayFlagKind::kOption);
  v(c.cache.name_space, "--cache-namespace",
    "Prefix of every cache key (local and Redis)", GatewayFlagKind::kOption);
  v(c.cache.warm_file, "--warm",
    "JSONL file of {request, response} pairs (stored) or {request} lines "
    "(sent upstream) that fill the cache before /readyz turns 200; implies "
    "--cache",
    GatewayFlagKind::kOption);
}

// Builds the default pool from --upstream/--model/--policy when no pools
// were configured, fills inherited per-upstream values, reads
// --api-key-file, and checks everything (URLs, ranges, names unique, every
// model served once, default-pool exists). Errors name the key, and the
// config file's line where one set it.
Status FinalizeGatewayConfig(GatewayConfig* config);

// The effective configuration, one line per setting (keys masked).
std::string DescribeGatewayConfig(const GatewayConfig& config);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_GATEWAY_CONFIG_H_
