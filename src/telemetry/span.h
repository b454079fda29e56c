// SpanRecord: one finished span as the exporters see it (OTLP JSON,
// trace-event JSON). Plain data; times are Unix nanoseconds.
#ifndef REDLINE_TELEMETRY_SPAN_H_
#define REDLINE_TELEMETRY_SPAN_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "telemetry/trace_context.h"

namespace redline::telemetry {

// The numbers are OTLP's SpanKind values.
enum class SpanKind : uint8_t {
  kInternal = 1,
  kServer = 2,
  kClient = 3,
  kProducer = 4,
  kConsumer = 5,
};

using AttributeValue = std::variant<std::string, int64_t, double, bool>;

struct Attribute {
  std::string key;
  AttributeValue value;
};

struct SpanRecord {
  TraceId trace_id;
  SpanId span_id;
  SpanId parent_span_id;  // invalid (all zero) for a root span
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  std::vector<Attribute> attributes;
  bool error = false;          // OTLP status ERROR; otherwise UNSET
  std::string status_message;  // with error
};

// Wall-clock now, Unix nanoseconds.
int64_t UnixNowNs();

}  // namespace redline::telemetry

#endif  // REDLINE_TELEMETRY_SPAN_H_
