#include "gateway/gateway_metrics.h"

#include <utility>

namespace redline::gateway {
namespace {

// Seconds: TTFT and E2E of LLM requests span milliseconds to minutes.
std::vector<double> LatencyBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1,  1.5, 2,
          2.5,   3,    4,     5,    7.5, 10,   20,  30,   60, 120};
}

// Seconds: the gateway's own time is microseconds.
std::vector<double> OverheadBuckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
          0.001,   0.0025,   0.005,   0.01,   0.025,   0.1};
}

}  // namespace

GatewayMetrics::GatewayMetrics(std::string prefix)
    : prefix_(std::move(prefix)) {
  const std::string p = prefix_ + "gateway_";
  auto& r = registry_;
  responses_ = &r.AddCounter(p + "requests_total",
                             "Responses sent to clients, by pool and HTTP "
                             "status (a stream that broke later still "
                             "counts as its 200; see stream_errors_total)",
                             {"pool", "code"});
  upstream_requests_ = &r.AddCounter(
      p + "upstream_requests_total",
      "Attempts sent to an upstream (retries and hedges included)",
      {"pool", "upstream"});
  upstream_errors_ = &r.AddCounter(p + "upstream_errors_total",
                                   "Failed attempts, by failure class",
                                   {"pool", "upstream", "class"});
  stream_errors_ =
      &r.AddCounter(p + "stream_errors_total",
                    "Streams that failed after their first byte reached the "
                    "client (ended with an in-stream error event)",
                    {"pool", "upstream"});
  ejections_ = &r.AddCounter(p + "upstream_ejections_total",
                             "Passive outlier ejections", {"pool", "upstream"});
  backoffs_ = &r.AddCounter(p + "upstream_backoffs_total",
                            "429/503 answers with Retry-After honoured",
                            {"pool", "upstream"});
  in_flight_ = &r.AddGauge(p + "upstream_in_flight", "Attempts in progress",
                           {"pool", "upstream"});
  healthy_ = &r.AddGauge(p + "upstream_healthy",
                         "1 when the upstream may take requests (probes "
                         "pass, not ejected or backed off)",
                         {"pool", "upstream"});
  ttft_ = &r.AddHistogram(p + "upstream_ttft_seconds",
                          "Attempt sent to first token forwarded (streams)",
                          {"pool", "upstream"}, LatencyBuckets());
  e2e_ = &r.AddHistogram(p + "upstream_e2e_seconds",
                         "Attempt sent to last byte, successful attempts",
                         {"pool", "upstream"}, LatencyBuckets());
  scraped_running_ = &r.AddGauge(
      p + "upstream_scraped_running",
      "Requests the upstream's /metrics reports running (scrape-metrics)",
      {"pool", "upstream"});
  scraped_waiting_ = &r.AddGauge(
      p + "upstream_scraped_waiting",
      "Requests the upstream's /metrics reports waiting (scrape-metrics)",
      {"pool", "upstream"});
  scraped_kv_ = &r.AddGauge(
      p + "upstream_scraped_kv_usage",
      "KV-cache usage (0..1) the upstream's /metrics reports; -1: none",
      {"pool", "upstream"});
  scrape_age_ = &r.AddGauge(p + "upstream_scrape_age_seconds",
                            "Seconds since the last good scrape of the "
                            "upstream's /metrics; -1: none yet",
                            {"pool", "upstream"});
  scrape_errors_ = &r.AddCounter(
      p + "upstream_scrape_errors_total",
      "Scrapes of the upstream's /metrics that gave no load, by reason",
      {"pool", "upstream", "reason"});
  slow_start_weight_ = &r.AddGauge(
      p + "upstream_slow_start_weight",
      "Share of its weight the upstream gets now (below 1 in slow start)",
      {"pool", "upstream"});
  slow_starts_ = &r.AddCounter(p + "upstream_slow_starts_total",
                               "Slow starts begun (the upstream came back)",
                               {"pool", "upstream"});
  retries_ = &r.AddCounter(p + "retries_total",
                           "Retries sent, by the failure that caused them",
                           {"pool", "class"});
  retries_denied_ = &r.AddCounter(
      p + "retries_denied_total",
      "Retries or hedges not sent because the retry budget was spent",
      {"pool"});
  hedges_ = &r.AddCounter(p + "hedges_total", "Hedged attempts sent", {"pool"});
  hedges_won_ = &r.AddCounter(p + "hedges_won_total",
                              "Hedged attempts that answered first", {"pool"});
  refused_ = &r.AddCounter(
      p + "admission_refused_total",
      "Requests refused at once: every upstream "
      "busy: saturated or backed off (429), or none available (503)",
      {"pool", "reason"});
  cancelled_ = &r.AddCounter(p + "client_cancelled_total",
                             "Requests whose client went away first", {"pool"});
  routable_ =
      &r.AddGauge(p + "pool_routable_upstreams",
                  "Upstreams of the pool that may take requests", {"pool"});
  overhead_ = &r.AddHistogram(
      p + "overhead_seconds",
      "Time spent in the gateway per request, excluding waiting on the "
      "upstream: arrival to attempt sent, plus upstream bytes read to "
      "forwarded",
      {"pool"}, OverheadBuckets());
}

UpstreamMetrics GatewayMetrics::ForUpstream(const std::string& pool,
                                            const std::string& upstream) {
  UpstreamMetrics m;
  m.requests = &upstream_requests_->Labels({pool, upstream});
  for (int i = 0; i < kNumFailures; ++i)
    m.errors[i] = &upstream_errors_->Labels(
        {pool, upstream, FailureName(static_cast<Failure>(i))});
  m.stream_errors = &stream_errors_->Labels({pool, upstream});
  m.ejections = &ejections_->Labels({pool, upstream});
  m.backoffs = &backoffs_->Labels({pool, upstream});
  m.in_flight = &in_flight_->Labels({pool, upstream});
  m.healthy = &healthy_->Labels({pool, upstream});
  m.ttft = &ttft_->Labels({pool, upstream});
  m.e2e = &e2e_->Labels({pool, upstream});
  return m;
}

std::string_view ScrapeErrorName(ScrapeError e) {
  switch (e) {
    case ScrapeError::kTransport:
      return "transport";
    case ScrapeError::kStatus:
      return "status";
    case ScrapeError::kTooLarge:
      return "too_large";
    case ScrapeError::kNoLoadSeries:
      return "no_load_series";
  }
  return "unknown";
}

void GatewayMetrics::AddScrapeMetrics(const std::string& pool,
                                      const std::string& upstream,
                                      UpstreamMetrics* m) {
  m->scraped_running = &scraped_running_->Labels({pool, upstream});
  m->scraped_waiting = &scraped_waiting_->Labels({pool, upstream});
  m->scraped_kv = &scraped_kv_->Labels({pool, upstream});
  m->scraped_kv->Set(-1);
  m->scrape_age = &scrape_age_->Labels({pool, upstream});
  m->scrape_age->Set(-1);
  for (size_t i = 0; i < m->scrape_errors.size(); ++i)
    m->scrape_errors[i] = &scrape_errors_->Labels(
        {pool, upstream,
         std::string(ScrapeErrorName(static_cast<ScrapeError>(i)))});
}

void GatewayMetrics::AddSlowStartMetrics(const std::string& pool,
                                         const std::string& upstream,
                                         UpstreamMetrics* m) {
  m->slow_start_weight = &slow_start_weight_->Labels({pool, upstream});
  m->slow_start_weight->Set(1);
  m->slow_starts = &slow_starts_->Labels({pool, upstream});
}

PoolMetrics GatewayMetrics::ForPool(const std::string& pool) {
  PoolMetrics m;
  for (int i = 0; i < kNumFailures; ++i)
    m.retries[i] =
        &retries_->Labels({pool, FailureName(static_cast<Failure>(i))});
  m.retries_denied = &retries_denied_->Labels({pool});
  m.hedges = &hedges_->Labels({pool});
  m.hedges_won = &hedges_won_->Labels({pool});
  m.refused_saturated = &refused_->Labels({pool, "busy"});
  m.refused_unavailable = &refused_->Labels({pool, "unavailable"});
  m.cancelled = &cancelled_->Labels({pool});
  m.routable = &routable_->Labels({pool});
  m.overhead = &overhead_->Labels({pool});
  return m;
}

void GatewayMetrics::CountResponse(const std::string& pool, int status) {
  auto key = std::make_pair(pool, status);
  auto it = response_cache_.find(key);
  if (it == response_cache_.end()) {
    it = response_cache_
             .emplace(key, &responses_->Labels({pool, std::to_string(status)}))
             .first;
  }
  it->second->Increment();
}

}  // namespace redline::gateway
