// W3C Trace Context (https://www.w3.org/TR/trace-context/): trace and span
// ids, the `traceparent` header's parser and printer, and id generation.
//
// A malformed incoming header is never an error: ParseTraceparent returns
// nullopt and the caller starts a new trace.
//
// Thread-safety: NewTraceId/NewSpanId use a per-thread generator; everything
// else is pure. Cost: a few hundred nanoseconds at most.
#ifndef REDLINE_TELEMETRY_TRACE_CONTEXT_H_
#define REDLINE_TELEMETRY_TRACE_CONTEXT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace redline::telemetry {

struct TraceId {
  std::array<uint8_t, 16> bytes{};
  bool valid() const;       // not all zero
  std::string Hex() const;  // 32 lowercase hex digits
  // The low 8 bytes as a big-endian number: the value trace-id-ratio
  // sampling compares against (as OpenTelemetry's TraceIdRatioBased does).
  uint64_t Low64() const;
  bool operator==(const TraceId&) const = default;
};

struct SpanId {
  std::array<uint8_t, 8> bytes{};
  bool valid() const;
  std::string Hex() const;  // 16 lowercase hex digits
  bool operator==(const SpanId&) const = default;
};

// What a request brings in: its caller's trace, the caller's span (the
// parent of ours), the sampled flag and the vendor `tracestate` (kept
// verbatim when at most 512 bytes, as the specification allows dropping).
struct TraceContext {
  TraceId trace_id;
  SpanId parent_span_id;
  bool sampled = false;
  std::string tracestate;
};

inline constexpr size_t kMaxTracestateBytes = 512;

// Parses `traceparent` ("00-<32 hex>-<16 hex>-<2 hex>"). Follows the
// specification's rules: lowercase hex only, version ff invalid, version 00
// exactly 55 characters, later versions may append "-..." fields, all-zero
// ids invalid. nullopt on any violation.
std::optional<TraceContext> ParseTraceparent(std::string_view traceparent,
                                             std::string_view tracestate = {});

// "00-<trace>-<span>-01" (or -00 when not sampled).
std::string FormatTraceparent(const TraceId& trace, const SpanId& span,
                              bool sampled);

// Trace-id-ratio sampling: true for about `ratio` of random trace ids, the
// same answer for the same id everywhere (ratio <= 0: never, >= 1: always).
bool SampledByRatio(const TraceId& id, double ratio);

// Random, never all zero.
TraceId NewTraceId();
SpanId NewSpanId();

}  // namespace redline::telemetry

#endif  // REDLINE_TELEMETRY_TRACE_CONTEXT_H_
