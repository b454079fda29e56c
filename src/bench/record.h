// RequestRecord: everything bench keeps about one attempted request, and the
// error classification of docs/METRICS.md#error-classes.
//
// Times are absolute nanoseconds on the monotonic clock (http::NowNs() in a
// real run, a FakeClock in tests); 0 means "did not happen". The per-request
// results file writes every field, so any metric can be recomputed later
// (docs/METRICS.md#timestamps).
//
// Thread-safety: plain values; thread-compatible.
#ifndef REDLINE_BENCH_RECORD_H_
#define REDLINE_BENCH_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redline::bench {

// Phase of a request, decided by its t_sched (docs/METRICS.md#phases).
enum class Phase : uint8_t { kCold, kWarmup, kMeasure, kCooldown };
inline constexpr int kNumPhases = 4;
std::string_view PhaseName(Phase phase);

// Error classes in first-match order (docs/METRICS.md#error-classes). kNone
// means ok.
enum class ErrorClass : uint8_t {
  kNone,
  kConnect,
  kTimeout,
  kHttp429,
  kHttp4xx,
  kHttp5xx,
  kAbort,
  kParse
};
inline constexpr int kNumErrorClasses = 8;
// "connect", "timeout", "http_429", "http_4xx", "http_5xx", "abort", "parse"
// ("ok" for kNone): the metric keys thresholds use.
std::string_view ErrorClassKey(ErrorClass error);

// Where a request's output token count came from
// (docs/METRICS.md#token-counts).
enum class TokenSource : uint8_t { kNone, kUsage, kTokenizer, kChunks };
std::string_view TokenSourceName(TokenSource source);

enum class TimeoutKind : uint8_t { kNone, kTotal, kIdle };

// What the client observed about one attempt; the input of Classify().
struct AttemptFacts {
  // DNS, TCP or TLS failure, connect timeout, or reset/closed before the
  // request was fully written.
  bool connect_failed = false;
  TimeoutKind timeout = TimeoutKind::kNone;  // a client deadline expired
  int status = 0;                            // HTTP status, 0 when none arrived
  bool streaming = false;                    // the request asked for SSE
  bool closed_early = false;  // connection closed before the response completed
  bool error_event = false;   // an in-stream error object arrived
  bool done_seen = false;     // data: [DONE]
  bool finish_seen = false;   // a chunk carried finish_reason
  bool parse_error = false;   // bad JSON/SSE or missing required fields
};

// Applies the first-match order of docs/METRICS.md#error-classes:
// connect > timeout > http_429 > http_4xx > http_5xx > abort > parse.
// Two cases the order alone leaves open are settled here (and listed in that
// table): a connection closed after the request was written but before any
// status arrived is `abort`; a status outside 2xx/4xx/5xx (1xx, 3xx) is
// `parse` (not a valid OpenAI response).
ErrorClass Classify(const AttemptFacts& facts);

struct RequestRecord {
  // 0-based attempt number in the run.
  uint64_t id = 0;
  // Index of the workload task.
  int32_t task = 0;
  // Turn within a multi-turn session (0 = first).
  int32_t turn = 0;
  // Session id for multi-turn workloads.
  int64_t session = -1;
  Phase phase = Phase::kMeasure;
  bool streamed = true;

  // Intended send time.
  int64_t t_sched_ns = 0;
  // First request byte written.
  int64_t t_send_ns = 0;
  // c_first: first content or reasoning chunk.
  int64_t t_first_ns = 0;
  // First non-empty content/text chunk (TTFO).
  int64_t t_first_output_ns = 0;
  // c_last: last content or reasoning chunk.
  int64_t t_last_ns = 0;
  // [DONE], connection close, last body byte or error time.
  int64_t t_end_ns = 0;

  int http_status = 0;
  ErrorClass error = ErrorClass::kNone;
  TimeoutKind timeout = TimeoutKind::kNone;
  // Transport/parser message or the server's error message.
  std::string error_detail;

  // N, reasoning included; -1 unknown.
  int64_t output_tokens = -1;
  TokenSource token_source = TokenSource::kNone;
  int64_t usage_completion_tokens = -1;
  // From usage when present.
  int64_t prompt_tokens = -1;
  int64_t cached_tokens = -1;
  // What the workload aimed for.
  int64_t input_tokens_planned = -1;

  // Arrival time c_j of each content/reasoning chunk, j = 1..K.
  std::vector<int64_t> chunk_ns;
  // The route that answered (the response's x-redline-route header, from a
  // routing gateway); empty when absent.
  std::string route;
  bool done_seen = false;
  bool finish_seen = false;

  // The W3C trace id bench sent in `traceparent` (32 lowercase hex digits),
  // empty when none was sent (docs/OBSERVABILITY.md#bench).
  std::string trace_id;
  // The server's own breakdown in ms (docs/OBSERVABILITY.md), -1 when not
  // sent: from the Server-Timing header (non-streaming) or the `timings` of
  // the final chunk (streaming); gateway_ms is the gateway's own share
  // (`gateway;dur`).
  double server_queue_ms = -1;
  double server_prefill_ms = -1;
  double server_decode_ms = -1;
  double server_e2e_ms = -1;
  double gateway_ms = -1;
  // True when the server sent at least its prefill and decode parts.
  bool has_server_timing() const {
    return server_prefill_ms >= 0 && server_decode_ms >= 0;
  }

  bool ok() const { return error == ErrorClass::kNone; }
  bool sent() const { return t_send_ns != 0; }

  // "<status> - <reason>" grouping label for failures
  // (docs/METRICS.md#error-classes),
  // e.g. "503 - Service Unavailable", "000 - connect: Connection refused".
  std::string FailureLabel() const;
};

// The first failed request of one error class, with the start of what the
// server sent: "200 - parse" says little, the body usually says why (an HTML
// page, a proxy's error, a different API).
struct ErrorSample {
  ErrorClass error = ErrorClass::kNone;
  uint64_t request_id = 0;
  int http_status = 0;
  std::string label;   // FailureLabel()
  std::string detail;  // error_detail
  std::string body;    // first bytes of the response body (at most 2 KiB)
};

// One request/response exchange as sent and received, for --debug-requests.
struct DebugExchange {
  uint64_t request_id = 0;
  std::string method;
  std::string target;
  std::string request_body;
  int http_status = 0;
  std::string error_class;  // ErrorClassKey
  std::string detail;
  std::string response_body;  // first bytes (at most 64 KiB)
};

}  // namespace redline::bench

#endif  // REDLINE_BENCH_RECORD_H_
