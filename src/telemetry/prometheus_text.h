// Reading the Prometheus text exposition format (version 0.0.4), the other
// direction of metrics.h: what `redline bench --scrape` and the gateway's
// upstream load scraping (gateway/load_report.h) parse from a server's
// /metrics. Any server (or anything at that URL) controls the input, so
// the parser never fails: malformed lines are skipped and counted.
//
// Thread-safety: pure functions. Cost: one pass over the text; one string
// allocation per sample (name, labels).
#ifndef REDLINE_TELEMETRY_PROMETHEUS_TEXT_H_
#define REDLINE_TELEMETRY_PROMETHEUS_TEXT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redline::telemetry {

struct PromSample {
  std::string name;
  std::string labels;  // as written between the braces, "" when none
  double value = 0;
};

// Parses the Prometheus text exposition format (comments and TYPE lines
// skipped; timestamps ignored; NaN, +Inf and -Inf read as such). Malformed
// lines are skipped and counted in `malformed`.
std::vector<PromSample> ParsePrometheusText(std::string_view text,
                                            int* malformed = nullptr);

// Splits `a="x",b="y,z"` into (name, unescaped value) pairs; malformed
// input (an empty name, a missing quote) yields the pairs parsed before it.
std::vector<std::pair<std::string, std::string>> ParseLabels(
    std::string_view labels);

}  // namespace redline::telemetry

#endif  // REDLINE_TELEMETRY_PROMETHEUS_TEXT_H_
