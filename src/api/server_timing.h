// The per-request time breakdown on the wire: the W3C Server-Timing header
// (https://www.w3.org/TR/server-timing/) that `redline serve` and the gateway
// put on non-streaming responses, and its parser for clients (the bench).
//
//   Server-Timing: queue;dur=1.2, prefill;dur=35.0, decode;dur=410.3,
//                  ttft;dur=36.5, e2e;dur=447.0
//
// The same numbers travel in the JSON body and the last streaming chunk as
// the "timings" object (response.h). Metric names are documented in
// docs/OBSERVABILITY.md; durations are milliseconds.
//
// Thread-safety: pure functions.
#ifndef REDLINE_API_SERVER_TIMING_H_
#define REDLINE_API_SERVER_TIMING_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/types.h"

namespace redline::api {

struct TimingEntry {
  std::string name;
  double dur_ms = -1;  // -1 when the entry had no dur
};

// "queue;dur=…, prefill;dur=…, decode;dur=…, ttft;dur=…, e2e;dur=…"
// (three decimals).
std::string FormatServerTiming(const ServerTimings& timings);
// `entry` appended to an existing header value (a gateway adds its own
// share to what the upstream sent): "<existing>, name;dur=…".
std::string AppendServerTiming(std::string_view existing, std::string_view name,
                               double dur_ms);

// Parses a Server-Timing value; tolerant as the specification asks (unknown
// parameters skipped, malformed entries dropped, at most 64 entries kept).
std::vector<TimingEntry> ParseServerTiming(std::string_view value);

// The first entry named `name`, or -1.
double TimingOf(const std::vector<TimingEntry>& entries, std::string_view name);

}  // namespace redline::api

#endif  // REDLINE_API_SERVER_TIMING_H_
