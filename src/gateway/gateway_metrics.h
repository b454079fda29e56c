// The gateway's Prometheus series (docs/GATEWAY.md, "Metrics"), registered
// once at start; per-pool and per-upstream children are looked up once and
// kept, so the request path only does relaxed atomic adds.
//
// Every client-visible outcome is counted once in requests_total (by HTTP
// status), and streams that broke after their first byte also in
// stream_errors_total, so the counters add up to what clients saw.
//
// Ownership: the Registry owns every metric; these structs hold references
// into it and must not outlive it. Thread-safety: as telemetry::Registry
// (updates are atomic).
#ifndef REDLINE_GATEWAY_GATEWAY_METRICS_H_
#define REDLINE_GATEWAY_GATEWAY_METRICS_H_

#include <array>
#include <map>
#include <string>
#include <string_view>

#include "gateway/failure.h"
#include "telemetry/metrics.h"

namespace redline::gateway {

struct UpstreamMetrics {
  telemetry::Counter* requests = nullptr;
  std::array<telemetry::Counter*, kNumFailures> errors{};
  telemetry::Counter* stream_errors = nullptr;
  telemetry::Counter* ejections = nullptr;
  telemetry::Counter* backoffs = nullptr;
  telemetry::Gauge* in_flight = nullptr;
  telemetry::Gauge* healthy = nullptr;
  telemetry::Histogram* ttft = nullptr;
  telemetry::Histogram* e2e = nullptr;
  // Only for scraped upstreams (AddScrapeMetrics), else null.
  telemetry::Gauge* scraped_running = nullptr;
  telemetry::Gauge* scraped_waiting = nullptr;
  telemetry::Gauge* scraped_kv = nullptr;
  telemetry::Gauge* scrape_age = nullptr;
  // By ScrapeError.
  std::array<telemetry::Counter*, 4> scrape_errors{};
  // Only with slow start on (AddSlowStartMetrics), else null.
  telemetry::Gauge* slow_start_weight = nullptr;
  telemetry::Counter* slow_starts = nullptr;
};

// Why a scrape of an upstream's /metrics gave no load.
enum class ScrapeError { kTransport, kStatus, kTooLarge, kNoLoadSeries };
std::string_view ScrapeErrorName(ScrapeError e);

struct PoolMetrics {
  std::array<telemetry::Counter*, kNumFailures> retries{};
  telemetry::Counter* retries_denied = nullptr;
  telemetry::Counter* hedges = nullptr;
  telemetry::Counter* hedges_won = nullptr;
  telemetry::Counter* refused_saturated = nullptr;
  telemetry::Counter* refused_unavailable = nullptr;
  telemetry::Counter* cancelled = nullptr;
  telemetry::Gauge* routable = nullptr;
  telemetry::Histogram* overhead = nullptr;
};

class GatewayMetrics {
 public:
  // `prefix`: "redline_" or "redline:".
  explicit GatewayMetrics(std::string prefix);

  telemetry::Registry& registry() { return registry_; }
  const std::string& prefix() const { return prefix_; }
  UpstreamMetrics ForUpstream(const std::string& pool,
                              const std::string& upstream);
  // The scraped-load series of one upstream, into `m`.
  void AddScrapeMetrics(const std::string& pool, const std::string& upstream,
                        UpstreamMetrics* m);
  void AddSlowStartMetrics(const std::string& pool, const std::string& upstream,
                           UpstreamMetrics* m);
  PoolMetrics ForPool(const std::string& pool);
  // A response to a client ("" pool: refused before a pool was known).
  // Loop thread only (caches children).
  void CountResponse(const std::string& pool, int status);

 private:
  std::string prefix_;
  telemetry::Registry registry_;
  telemetry::CounterFamily* responses_;
  telemetry::CounterFamily* upstream_requests_;
  telemetry::CounterFamily* upstream_errors_;
  telemetry::CounterFamily* stream_errors_;
  telemetry::CounterFamily* ejections_;
  telemetry::CounterFamily* backoffs_;
  telemetry::GaugeFamily* in_flight_;
  telemetry::GaugeFamily* healthy_;
  telemetry::HistogramFamily* ttft_;
  telemetry::HistogramFamily* e2e_;
  telemetry::GaugeFamily* scraped_running_;
  telemetry::GaugeFamily* scraped_waiting_;
  telemetry::GaugeFamily* scraped_kv_;
  telemetry::GaugeFamily* scrape_age_;
  telemetry::CounterFamily* scrape_errors_;
  telemetry::GaugeFamily* slow_start_weight_;
  telemetry::CounterFamily* slow_starts_;
  telemetry::CounterFamily* retries_;
  telemetry::CounterFamily* retries_denied_;
  telemetry::CounterFamily* hedges_;
  telemetry::CounterFamily* hedges_won_;
  telemetry::CounterFamily* refused_;
  telemetry::CounterFamily* cancelled_;
  telemetry::GaugeFamily* routable_;
  telemetry::HistogramFamily* overhead_;
  std::map<std::pair<std::string, int>, telemetry::Counter*> response_cache_;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_GATEWAY_METRICS_H_
