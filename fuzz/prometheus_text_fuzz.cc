// Fuzzes what `redline bench --scrape` reads from the target's /metrics,
// which any server (or anything at that URL) controls: the Prometheus text
// parser (bench/scrape.h), the label splitter, and histogram_quantile over
// buckets built from the parsed samples (bench/server_series.h). Checks: no
// crash; every sample's name is non-empty; a quantile is NaN or within the
// finite bucket bounds it was given.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/scrape.h"
#include "bench/server_series.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  int malformed = 0;
  const std::vector<redline::bench::PromSample> samples =
      redline::bench::ParsePrometheusText(in, &malformed);
  if (malformed < 0) std::abort();
  std::vector<std::pair<double, double>> buckets;
  for (const redline::bench::PromSample& s : samples) {
    if (s.name.empty()) std::abort();
    for (const auto& [k, v] : redline::bench::ParseLabels(s.labels)) {
      if (k.empty()) std::abort();
      (void)v;
    }
    if (buckets.size() < 64 && std::isfinite(s.value))
      buckets.emplace_back(static_cast<double>(buckets.size()),
                           std::abs(s.value));
  }
  // Cumulative counts must not fall; make them so, then ask for quantiles.
  double running = 0;
  for (auto& [bound, count] : buckets) {
    running = std::max(running, count);
    count = running;
  }
  for (double q : {0.0, 0.5, 0.99, 1.0}) {
    const double v = redline::bench::HistogramQuantile(q, buckets);
    if (std::isnan(v)) continue;
    if (buckets.empty() || v < -1e-9 ||
        v > static_cast<double>(buckets.size()) + 1e-9)
      std::abort();
  }
  return 0;
}
