// Prometheus text-format scraping during a run (--scrape URL): samples the
// target's /metrics at each progress tick and keeps the series that describe
// the server's state (CPU, memory, queue, KV cache) for the report, plus the
// buckets of the latency histograms the report turns into server-side
// percentiles (server_series.h).
//
// Thread-safety: Scraper lives on the run's loop thread.
#ifndef REDLINE_BENCH_SCRAPE_H_
#define REDLINE_BENCH_SCRAPE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "http/client.h"
#include "telemetry/prometheus_text.h"

namespace redline::bench {

// The parser lives in telemetry (the gateway reads /metrics too).
using telemetry::ParseLabels;
using telemetry::ParsePrometheusText;
using telemetry::PromSample;

// One histogram family's `_bucket` series, summed over every label set but
// `le` (Prometheus `sum by (le)`), one cumulative map per scrape.
struct ScrapeHistogram {
  std::string name;  // family name, without `_bucket`
  // Seconds since the load timeline start, one per scrape that had it.
  std::vector<double> t_s;
  // Per scrape: upper bound (`le`, +inf last) -> cumulative count.
  std::vector<std::map<double, double>> buckets;
};

struct ScrapeSeries {
  std::string name;
  std::string labels;
  // Name ends in _total / _count / _sum / _seconds_total.
  bool counter = false;
  // Seconds since the load timeline start (see Scraper::Series).
  std::vector<double> t_s;
  std::vector<double> value;
};

class Scraper {
 public:
  // `filter`: substrings a series name must contain to be kept; empty means
  // the default set (cpu, memory, resident, queue, waiting, running, kv,
  // cache, batch, tokens, requests). At most `max_series` series, plus at
  // most as many of the curated ones (IsCuratedSeries), which are kept
  // whatever the filter, so the report's server section is always complete.
  Scraper(std::string url, std::vector<std::string> filter = {},
          size_t max_series = 64);
  ~Scraper();

  // Starts one scrape (skipped while the previous one is still running).
  void Sample(http::Client& client, int64_t now_ns);

  // The series with times relative to `t0_ns` (the load timeline start).
  std::vector<ScrapeSeries> Series(int64_t t0_ns) const;
  // The curated latency histograms (server_series.h), same times.
  std::vector<ScrapeHistogram> Histograms(int64_t t0_ns) const;
  const std::string& url() const { return url_; }
  int failures() const { return failures_; }
  int samples() const { return samples_; }

 private:
  class Handler;
  void Ingest(std::string_view body, int64_t t_ns);
  bool Keep(std::string_view name) const;

  std::string url_;
  http::Origin origin_;
  std::string target_;
  bool url_ok_ = false;
  std::vector<std::string> filter_;
  size_t max_series_;
  std::map<std::string, ScrapeSeries> series_;  // key: name{labels}
  size_t curated_series_ = 0;                   // of series_, bound apart
  std::map<std::string, ScrapeHistogram> histograms_;
  std::unique_ptr<Handler> handler_;
  bool busy_ = false;
  int failures_ = 0;
  int samples_ = 0;
};

}  // namespace redline::bench

#endif  // REDLINE_BENCH_SCRAPE_H_
