// Latency per route: requests grouped by the route that answered them, as
// a routing front door names it in the response header x-redline-route
// (`redline gateway`'s light/full routing, docs/GATEWAY.md). The bench
// report shows each route's share and E2E percentiles next to the totals.
//
// Thread-safety: pure functions. Cost: one pass over the records plus one
// HDR histogram per route.
#ifndef REDLINE_BENCH_ROUTE_STATS_H_
#define REDLINE_BENCH_ROUTE_STATS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench/record.h"

namespace redline::bench {

// The response header that names the route.
inline constexpr std::string_view kRouteHeader = "x-redline-route";

struct RouteStats {
  std::string route;
  int64_t requests = 0;  // attempted in the phase, every outcome
  int64_t ok = 0;
  double share = 0;  // requests / all requests with a route
  // E2E of successful requests, microseconds (NaN when none).
  double e2e_p50_us = 0, e2e_p95_us = 0, e2e_p99_us = 0;
};

// One entry per route seen in `phase`, most requests first; empty when no
// response named a route.
std::vector<RouteStats> ComputeRouteStats(
    std::span<const RequestRecord> records, Phase phase);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_ROUTE_STATS_H_
