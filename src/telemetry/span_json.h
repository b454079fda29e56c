// The two JSON encodings of finished spans:
//  - OTLP/HTTP JSON (an ExportTraceServiceRequest as the OpenTelemetry
//    protocol specification's JSON mapping defines it: hex trace and span
//    ids, enum values as integers, 64-bit integers as decimal strings),
//    the body of POST /v1/traces;
//  - Chrome/Perfetto trace-event JSON ("X" complete events, microsecond
//    times), which chrome://tracing and ui.perfetto.dev open directly.
//
// Thread-safety: pure functions. Cost: linear in the spans' size.
#ifndef REDLINE_TELEMETRY_SPAN_JSON_H_
#define REDLINE_TELEMETRY_SPAN_JSON_H_

#include <span>
#include <string>
#include <string_view>

#include "telemetry/span.h"

namespace redline::telemetry {

struct ResourceInfo {
  std::string service_name = "redline";
  std::string service_version;
  std::string scope_name = "redline";
};

// One resourceSpans entry holding every span (one scope).
std::string EncodeOtlpJson(const ResourceInfo& resource,
                           std::span<const SpanRecord> spans);

// The events of `spans`, each followed by ",\n" (the JSON Array Format of
// trace events, which a file can grow by appending; see TraceFileWriter).
// `lane` is the "tid" of every event: spans of one trace share one lane so
// they nest in the viewer.
std::string EncodeTraceEvents(std::span<const SpanRecord> spans, int64_t lane);

}  // namespace redline::telemetry

#endif  // REDLINE_TELEMETRY_SPAN_JSON_H_
