// Where each request's time went (docs/OBSERVABILITY.md#bench): the
// client's schedule-relative E2E of one request split into
//
//   client   t_sched -> t_send (dispatch delay: the client's own lateness)
//   network  E2E - gateway - queue - prefill - decode (wire, parsing, and
//            anything else neither side accounts for)
//   gateway  the gateway's own share (Server-Timing `gateway;dur`)
//   queue, prefill, decode   the server's breakdown (Server-Timing on
//            non-streaming answers, `timings` of the final chunk otherwise)
//
// so the six parts add up to e2e_sched = dispatch delay + E2E exactly (E2E
// as metrics.h defines it: up to the last content chunk when streamed, the
// last body byte otherwise). Only successful requests that carried the
// server's prefill and decode are decomposed.
//
// Also here: the trace ids of the slowest requests and of the requests at
// p50/p95/p99 of E2E, for "open the trace of your p99 request".
//
// Pure functions of the records. Thread-safety: values, thread-compatible.
// Cost: O(n log n) in the measured requests.
#ifndef REDLINE_BENCH_DECOMPOSITION_H_
#define REDLINE_BENCH_DECOMPOSITION_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench/record.h"

namespace redline::bench {

enum class Part : uint8_t {
  kClient,
  kNetwork,
  kGateway,
  kQueue,
  kPrefill,
  kDecode
};
inline constexpr int kNumParts = 6;
inline constexpr std::array<Part, kNumParts> kAllParts = {
    Part::kClient, Part::kNetwork, Part::kGateway,
    Part::kQueue,  Part::kPrefill, Part::kDecode};
// "client", "network", "gateway", "queue", "prefill", "decode".
std::string_view PartKey(Part part);

using PartArray = std::array<double, kNumParts>;

struct RequestDecomposition {
  uint64_t request_id = 0;
  double e2e_ms = 0;    // bench's E2E (from t_send)
  double total_ms = 0;  // dispatch delay + E2E: the sum of the parts
  PartArray part_ms{};  // indexed by Part; network may be slightly negative
};

// nullopt unless `r` succeeded, was sent and carried the server's timing.
std::optional<RequestDecomposition> Decompose(const RequestRecord& r);

// The parts of the requests near one percentile of the decomposed total
// (dispatch delay + E2E, i.e. e2e_sched): ranked by the total, not by E2E
// alone, so that a client that sends late shows in its tail.
struct DecompositionAt {
  double percentile = 0;  // 50, 95, 99
  // The total of the request at that rank (nearest rank): the percentile.
  double rank_total_ms = 0;
  // Means over the requests whose rank is within 0.5 % of n of it (at
  // least that one request): one request alone is noisy, a wide window
  // would mix in the body of the distribution.
  int64_t requests = 0;
  double e2e_ms = 0;
  double total_ms = 0;
  PartArray part_ms{};
  Part dominant = Part::kDecode;  // largest part
  double Share(Part p) const {
    return total_ms > 0 ? part_ms[static_cast<int>(p)] / total_ms : 0;
  }
};

struct DecompositionSeries {
  double bucket_s = 1;
  std::vector<double> t_s;  // bucket starts from the load timeline start
  std::vector<int64_t> requests;
  // Mean of each part over the requests that finished in the bucket (NaN
  // when none did), indexed by Part.
  std::array<std::vector<double>, kNumParts> part_ms;
};

struct Decomposition {
  int64_t ok_requests = 0;   // measured successful requests
  int64_t decomposed = 0;    // of those, with the server's timing
  bool has_gateway = false;  // any request carried gateway;dur
  PartArray mean_ms{};
  double mean_total_ms = 0;
  std::vector<DecompositionAt> at;  // p50, p95, p99 (empty when none)
  DecompositionSeries series;
  // The largest |sum of parts - e2e_sched| over the requests, in ms: 0 up
  // to rounding, kept as a self-check for the report.
  double max_sum_error_ms = 0;
};

// Over the measurement phase. `start_ns` is the load timeline start and
// `bucket_s` the width of the series' buckets (the report's time series).
Decomposition BuildDecomposition(std::span<const RequestRecord> records,
                                 int64_t start_ns, double bucket_s);

// One request worth opening in a trace viewer.
struct TracedRequest {
  std::string label;  // "p99", "slowest 1", ...
  uint64_t request_id = 0;
  std::string trace_id;  // "" when bench sent none
  double e2e_ms = 0;
  double ttft_ms = -1;  // -1 when not streamed
  double t_s = 0;       // send time from the load timeline start
  std::optional<RequestDecomposition> parts;
};

struct TraceIds {
  bool sent = false;                      // any request carried a traceparent
  std::vector<TracedRequest> percentile;  // p50, p95, p99 of E2E
  std::vector<TracedRequest> slowest;     // by E2E, slowest first
};

// Over the measurement phase's successful requests.
TraceIds BuildTraceIds(std::span<const RequestRecord> records, int64_t start_ns,
                       size_t slowest = 10);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_DECOMPOSITION_H_
