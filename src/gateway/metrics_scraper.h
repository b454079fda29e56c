// MetricsScraper: reads each scraped upstream's Prometheus /metrics on its
// interval (scrape-metrics) and stores the load it reports (load_report.h)
// in the Upstream, where Pool::Choose hands it to the routing policy.
//
// Each scrape is one GET through the upstream's own UpstreamTransport (a
// keep-alive lane, the upstream's connect timeout) on the event loop; the
// loop never waits for it. At most one scrape per upstream is in flight
// (a tick that finds the last one still running skips); each has the
// pool's scrape timeout as its limit once connected (a new connection
// also has the upstream's connect timeout), and an answer over
// kMaxScrapeBytes is cancelled at once. A failed scrape (transport error,
// non-200, too large, no known load series) keeps the last good data,
// which ages until it is stale (Pool::ScrapeStale) and counts as busy; it
// is counted in upstream_scrape_errors_total and logged when an upstream's
// scrapes start or stop failing.
//
// Threading: loop thread only (construct anywhere; Start, and destroy
// before the pools, on the loop thread or after the loop stopped).
// Ownership: borrows the pools and their upstreams.
#ifndef REDLINE_GATEWAY_METRICS_SCRAPER_H_
#define REDLINE_GATEWAY_METRICS_SCRAPER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "gateway/pool.h"
#include "http/event_loop.h"

namespace redline::gateway {

inline constexpr size_t kMaxScrapeBytes = 1 << 20;

class MetricsScraper {
 public:
  MetricsScraper(http::EventLoop& loop, std::vector<Pool*> pools);
  // Cancels the scrapes in flight.
  ~MetricsScraper();
  MetricsScraper(const MetricsScraper&) = delete;
  MetricsScraper& operator=(const MetricsScraper&) = delete;

  // Scrapes every scraped upstream now, then on its interval.
  void Start();
  // Upstreams with scraping on.
  size_t targets() const { return targets_.size(); }

 private:
  class Target;
  http::EventLoop& loop_;
  std::vector<std::unique_ptr<Target>> targets_;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_METRICS_SCRAPER_H_
