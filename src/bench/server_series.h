// The curated server-metrics view of a bench report (docs/BENCH.md#server-
// metrics): from the series `--scrape` sampled, the few panels that say how
// the server coped — requests running and waiting, KV-cache usage, prompt
// and generation tokens/s, server-side TTFT and E2E p50/p99 (from histogram
// bucket deltas between scrapes), CPU % and RSS — with the names of
// `redline serve` (redline_ or redline: prefix), vLLM (vllm:), llama.cpp
// (llamacpp:), SGLang (sglang:) and any other prefix ending in '_' or ':'.
// Series that never changed are left out and counted.
//
// Thread-safety: pure functions. Cost: O(samples + scrapes x buckets).
#ifndef REDLINE_BENCH_SERVER_SERIES_H_
#define REDLINE_BENCH_SERVER_SERIES_H_

#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/scrape.h"

namespace redline::bench {

// True when `name` is one a curated panel reads (the scraper keeps these
// whatever --scrape-filter says).
bool IsCuratedSeries(std::string_view name);
// The curated latency histogram family a `_bucket` series belongs to
// ("redline_time_to_first_token_seconds"), "" for any other name.
std::string CuratedHistogramFamily(std::string_view name);

// Prometheus histogram_quantile: `q` in [0, 1] over (upper bound,
// cumulative count) pairs sorted by bound, +inf last. Linear interpolation
// inside the bucket holding rank q x total (from 0 for the first bucket); a
// rank in the +inf bucket gives the highest finite bound. NaN when there is
// no observation or no finite bound.
double HistogramQuantile(double q,
                         const std::vector<std::pair<double, double>>& buckets);

// What a panel's values are, for axis labels.
enum class ServerUnit {
  kCount,     // requests
  kFraction,  // 0..1, shown as %
  kTokensPerSecond,
  kLatencyUs,   // microseconds (server histograms are in seconds)
  kCpuPercent,  // % of one core
  kBytes,
};

struct ServerLine {
  std::string name;    // legend: "running", "p99"
  std::string source;  // the series it came from: "vllm:num_requests_running"
  std::vector<double> t_s, y;
};

struct ServerPanel {
  std::string id;     // stable: requests, kv_cache, tokens, ttft, e2e, cpu, rss
  std::string title;  // "Requests running and waiting"
  ServerUnit unit = ServerUnit::kCount;
  // Which latency thresholds to draw (metric key: "ttft", "e2e"); "" none.
  std::string slo_metric;
  std::vector<ServerLine> lines;
  // Curated lines left out because their series never changed:
  // "waiting = 0".
  std::vector<std::string> constant;
};

// A series that is not curated but changed during the run.
struct OtherSeries {
  const ScrapeSeries* series = nullptr;
  double min = 0, max = 0, last = 0;  // raw values (counters: not rates)
};

struct ServerMetricsView {
  std::vector<ServerPanel> panels;  // in display order, only those with data
  std::vector<OtherSeries> others;  // sorted by name
  // Scraped series (name{labels}) that never changed, curated or not.
  std::vector<std::string> constant;
  // Server-side percentiles over the whole run (last minus first scrape of
  // the histogram), microseconds; NaN without the histogram or samples.
  double ttft_p50_us = std::numeric_limits<double>::quiet_NaN();
  double ttft_p99_us = std::numeric_limits<double>::quiet_NaN();
  double e2e_p50_us = std::numeric_limits<double>::quiet_NaN();
  double e2e_p99_us = std::numeric_limits<double>::quiet_NaN();
  std::string ttft_source, e2e_source;  // histogram family names
  // Curated lines of panels left out entirely because every line was
  // constant ("waiting constant at 0").
  std::vector<std::string> constant_curated;
  // Curated quantities the target does not export: "process RSS".
  std::vector<std::string> missing;
};

// Builds the view. `series` and `histograms` are what Scraper returned; the
// view points into `series` (which must outlive it).
ServerMetricsView CurateServerMetrics(
    const std::vector<ScrapeSeries>& series,
    const std::vector<ScrapeHistogram>& histograms);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_SERVER_SERIES_H_
