// Fuzzes what `redline bench --scrape` and the gateway's scrape-metrics
// read from a server's /metrics, which any server (or anything at that
// URL) controls: the Prometheus text parser (telemetry/prometheus_text.h),
// the label splitter, histogram_quantile over buckets built from the
// parsed samples (bench/server_series.h), and the gateway's load report
// (gateway/load_report.h). Checks: no crash; every sample's name is
// non-empty; a quantile is NaN or within the finite bucket bounds it was
// given; a load report has no NaN or negative counts and its KV usage is
// -1 or within 0..1.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/server_series.h"
#include "gateway/load_report.h"
#include "telemetry/prometheus_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  int malformed = 0;
  const std::vector<redline::telemetry::PromSample> samples =
      redline::telemetry::ParsePrometheusText(in, &malformed);
  if (malformed < 0) std::abort();
  std::vector<std::pair<double, double>> buckets;
  for (const redline::telemetry::PromSample& s : samples) {
    if (s.name.empty()) std::abort();
    for (const auto& [k, v] : redline::telemetry::ParseLabels(s.labels)) {
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
  if (auto load = redline::gateway::ParseLoadReport(in); load.ok()) {
    if (!(load->running >= 0) || !(load->waiting >= 0)) std::abort();
    if (load->kv_usage != -1 && !(load->kv_usage >= 0 && load->kv_usage <= 1))
      std::abort();
  }
  return 0;
}
