#include "telemetry/request_trace.h"

#include <chrono>
#include <utility>

namespace redline::telemetry {

int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

RequestTrace::RequestTrace(const std::optional<TraceContext>& parent,
                           std::string name, SpanKind kind,
                           int64_t start_unix_ns, double sample_ratio) {
  SpanRecord root;
  if (parent.has_value()) {
    root.trace_id = parent->trace_id;
    root.parent_span_id = parent->parent_span_id;
    sampled_ = parent->sampled;
    tracestate_ = parent->tracestate;
  } else {
    root.trace_id = telemetry::NewTraceId();
    sampled_ = SampledByRatio(root.trace_id, sample_ratio);
  }
  root.span_id = telemetry::NewSpanId();
  root.name = std::move(name);
  root.kind = kind;
  root.start_unix_ns = start_unix_ns;
  root.end_unix_ns = start_unix_ns;
  spans_.reserve(8);
  spans_.push_back(std::move(root));
}

SpanId RequestTrace::NewSpanId() { return telemetry::NewSpanId(); }

SpanId RequestTrace::AddSpan(std::string name, const SpanId& parent,
                             int64_t start_unix_ns, int64_t end_unix_ns,
                             std::vector<Attribute> attributes, SpanKind kind) {
  const SpanId id = telemetry::NewSpanId();
  const size_t before = spans_.size();
  AddSpanWithId(id, std::move(name), parent, start_unix_ns, end_unix_ns,
                std::move(attributes), kind);
  return spans_.size() > before ? id : SpanId{};
}

void RequestTrace::AddSpanWithId(const SpanId& id, std::string name,
                                 const SpanId& parent, int64_t start_unix_ns,
                                 int64_t end_unix_ns,
                                 std::vector<Attribute> attributes,
                                 SpanKind kind, bool error,
                                 std::string status_message) {
  if (spans_.size() >= kMaxSpansPerTrace) {
    ++dropped_;
    return;
  }
  if (attributes.size() > kMaxAttributesPerSpan)
    attributes.resize(kMaxAttributesPerSpan);
  SpanRecord s;
  s.trace_id = spans_[0].trace_id;
  s.span_id = id;
  s.parent_span_id = parent;
  s.name = std::move(name);
  s.kind = kind;
  s.start_unix_ns = start_unix_ns;
  s.end_unix_ns = end_unix_ns < start_unix_ns ? start_unix_ns : end_unix_ns;
  s.attributes = std::move(attributes);
  s.error = error;
  s.status_message = std::move(status_message);
  spans_.push_back(std::move(s));
}

void RequestTrace::SetAttribute(std::string key, AttributeValue value) {
  std::vector<Attribute>& attrs = spans_[0].attributes;
  for (Attribute& a : attrs) {
    if (a.key == key) {
      a.value = std::move(value);
      return;
    }
  }
  if (attrs.size() < kMaxAttributesPerSpan)
    attrs.push_back({std::move(key), std::move(value)});
}

std::string RequestTrace::TraceparentFor(const SpanId& from) const {
  return FormatTraceparent(trace_id(), from, sampled_);
}

void RequestTrace::End(int64_t end_unix_ns, bool error,
                       std::string status_message) {
  SpanRecord& root = spans_[0];
  root.end_unix_ns =
      end_unix_ns < root.start_unix_ns ? root.start_unix_ns : end_unix_ns;
  root.error = error;
  root.status_message = std::move(status_message);
  if (dropped_ > 0) SetAttribute("redline.spans_dropped", dropped_);
  ended_ = true;
}

}  // namespace redline::telemetry
