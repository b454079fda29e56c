// Pool: a set of upstreams that serve the same models, with its routing
// policy, health state, retry budget and TTFT window. The pool decides
// which upstream an attempt goes to (or why none can take it) and folds
// every attempt's outcome back into health and load.
//
// Threading: loop thread only. Ownership: the pool owns its upstreams (and
// their transports); Upstream pointers stay valid for the pool's life.
#ifndef REDLINE_GATEWAY_POOL_H_
#define REDLINE_GATEWAY_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gateway/failure.h"
#include "gateway/gateway_config.h"
#include "gateway/gateway_metrics.h"
#include "gateway/latency_window.h"
#include "gateway/load_report.h"
#include "gateway/policy.h"
#include "gateway/retry_budget.h"
#include "gateway/routing_key.h"
#include "gateway/upstream_health.h"
#include "gateway/upstream_transport.h"
#include "http/event_loop.h"
#include "http/url.h"

namespace redline::gateway {

struct Upstream {
  Upstream(UpstreamSpec s, const HealthOptions& h, bool probed)
      : spec(std::move(s)), health(h, probed) {}

  UpstreamSpec spec;
  http::Origin origin;
  // Path before "/v1" ("" for a root URL): requests go to root + "/v1/...",
  // probes to root + "/readyz".
  std::string root;
  UpstreamHealth health;
  std::unique_ptr<UpstreamTransport> transport;
  UpstreamMetrics metrics;

  int64_t in_flight = 0;
  int64_t tokens_in_flight = 0;
  double ewma_ttft_ms = 0;
  int64_t ewma_sample_ns = 0;

  // Scrape state (metrics_scraper.h): the upstream's own report of its
  // load, and when it was read (0: not yet).
  int64_t scrape_interval_ms = 0;  // 0: not scraped
  LoadReport scraped;
  int64_t scraped_ns = 0;
  // In a slow-start ramp at the last UpdateGauges (for its log lines).
  bool slow_start_active = false;

  // Probe state (prober.h).
  std::string probe_path;
  bool probe_in_progress = false;
  bool models_in_progress = false;
  int64_t models_fetched_ns = 0;
  std::vector<std::string> models;  // from its /v1/models
};

class Pool {
 public:
  Pool(const PoolSpec& spec, http::EventLoop& loop, GatewayMetrics& metrics,
       uint64_t seed);

  // kSaturated: the upstreams are alive but busy (max-in-flight or
  // backed off): 429. kUnavailable: all down or ejected: 503.
  enum class Refusal { kNone, kSaturated, kUnavailable };
  struct Pick {
    Upstream* upstream = nullptr;
    Refusal refusal = Refusal::kNone;
    int retry_after_s = 0;  // for a refusal
  };
  // An upstream for the next attempt of a request, skipping `tried`.
  Pick Choose(const RouteRequest& request,
              const std::vector<const Upstream*>& tried, int64_t now_ns);

  // Attempt bookkeeping: Begin when sent, End exactly once when it ended
  // (success, failure or cancel).
  void BeginAttempt(Upstream& u, int64_t tokens);
  void EndAttempt(Upstream& u, int64_t tokens);
  void RecordSuccess(Upstream& u);
  // A failure of `f`'s class; may eject (never the last routable one).
  void RecordFailure(Upstream& u, Failure f, int64_t now_ns);
  void RecordBackoff(Upstream& u, int64_t retry_after_ms, int64_t now_ns);
  // Request sent -> first token (stream) or response head.
  void RecordFirstByte(Upstream& u, double ms, int64_t now_ns);

  // At least one upstream may take requests.
  bool Ready(int64_t now_ns) const;
  int RoutableCount(int64_t now_ns) const;
  // Refreshes the healthy/routable, scrape-age and slow-start gauges, and
  // logs slow starts beginning and ending.
  void UpdateGauges(int64_t now_ns);
  // Scraped data of `u` is missing or older than stale-intervals x its
  // scrape interval.
  bool ScrapeStale(const Upstream& u, int64_t now_ns) const;
  // `u`'s weight at `now_ns`: configured x slow-start factor.
  double EffectiveWeight(const Upstream& u, int64_t now_ns) const;

  const PoolSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  std::vector<std::unique_ptr<Upstream>>& upstreams() { return upstreams_; }
  RetryBudget& budget() { return budget_; }
  LatencyWindow& ttft_window() { return ttft_window_; }
  PoolMetrics& metrics() { return metrics_; }
  // Models its upstreams reported (sorted, unique).
  std::vector<std::string> DiscoveredModels() const;

 private:
  PoolSpec spec_;
  std::vector<std::unique_ptr<Upstream>> upstreams_;
  std::unique_ptr<RoutingPolicy> policy_;
  RetryBudget budget_;
  LatencyWindow ttft_window_;
  PoolMetrics metrics_;
  std::vector<UpstreamLoad> loads_;  // scratch for Choose
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_POOL_H_
