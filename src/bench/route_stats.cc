#include "bench/route_stats.h"

#include <algorithm>
#include <map>

#include "bench/histogram.h"
#include "bench/metrics.h"

namespace redline::bench {

std::vector<RouteStats> ComputeRouteStats(
    std::span<const RequestRecord> records, Phase phase) {
  struct Acc {
    int64_t requests = 0, ok = 0;
    Histogram e2e;
  };
  std::map<std::string, Acc> by_route;
  int64_t total = 0;
  for (const RequestRecord& r : records) {
    if (r.phase != phase || r.route.empty()) continue;
    Acc& a = by_route[r.route];
    ++a.requests;
    ++total;
    if (!r.ok()) continue;
    ++a.ok;
    if (const auto e2e = ComputeLatencies(r).e2e_us) a.e2e.Record(*e2e);
  }
  std::vector<RouteStats> out;
  for (const auto& [route, a] : by_route) {
    RouteStats s;
    s.route = route;
    s.requests = a.requests;
    s.ok = a.ok;
    s.share = total > 0
                  ? static_cast<double>(a.requests) / static_cast<double>(total)
                  : 0;
    s.e2e_p50_us = a.e2e.ValueAtPercentile(50);
    s.e2e_p95_us = a.e2e.ValueAtPercentile(95);
    s.e2e_p99_us = a.e2e.ValueAtPercentile(99);
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const RouteStats& a, const RouteStats& b) {
                     return a.requests > b.requests;
                   });
  return out;
}

}  // namespace redline::bench
