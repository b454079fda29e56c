// RequestTrace: the spans of one request, collected where the request is
// handled and handed to a Tracer when it ends (Tracer::Finish), which keeps
// or drops the whole trace (head sampling, plus errors and slow requests).
//
//   RequestTrace trace(incoming_context, "chat", SpanKind::kServer, t0_ns);
//   SpanId parse = trace.AddSpan("parse", trace.root_span_id(), t0, t1);
//   trace.SetAttribute("gen_ai.request.model", std::string("smollm2"));
//   trace.End(t_end_ns, /*error=*/false, "");
//   tracer->Finish(std::move(trace));
//
// The trace joins the caller's trace when a valid `traceparent` came in
// (the root span's parent is the caller's span; the sampled flag follows
// the caller), and starts a new one otherwise.
//
// Bounds: at most kMaxSpansPerTrace spans (later ones are counted in the
// root's `redline.spans_dropped` attribute) and kMaxAttributesPerSpan
// attributes per span.
//
// Thread-safety: none; one owner at a time (the request's thread).
// Cost: one small allocation per span.
#ifndef REDLINE_TELEMETRY_REQUEST_TRACE_H_
#define REDLINE_TELEMETRY_REQUEST_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/span.h"
#include "telemetry/trace_context.h"

namespace redline::telemetry {

inline constexpr size_t kMaxSpansPerTrace = 512;
inline constexpr size_t kMaxAttributesPerSpan = 64;

class RequestTrace {
 public:
  // `parent`: the incoming context, or nullopt for a new trace, whose head
  // sampling decision is SampledByRatio(new id, sample_ratio).
  RequestTrace(const std::optional<TraceContext>& parent, std::string name,
               SpanKind kind, int64_t start_unix_ns, double sample_ratio);

  const TraceId& trace_id() const { return spans_[0].trace_id; }
  const SpanId& root_span_id() const { return spans_[0].span_id; }
  // The head decision: the caller's flag, or ours for a new trace.
  bool sampled() const { return sampled_; }
  const std::string& tracestate() const { return tracestate_; }
  int64_t start_unix_ns() const { return spans_[0].start_unix_ns; }

  // Adds a finished child of `parent`; returns its id (an invalid id when the
  // span bound was reached and the span was dropped).
  SpanId AddSpan(std::string name, const SpanId& parent, int64_t start_unix_ns,
                 int64_t end_unix_ns, std::vector<Attribute> attributes = {},
                 SpanKind kind = SpanKind::kInternal);
  // Reserves an id for a span whose start is known before its children
  // (e.g. an upstream attempt whose traceparent goes out first); add it
  // with AddSpanWithId when it ends.
  SpanId NewSpanId();
  void AddSpanWithId(const SpanId& id, std::string name, const SpanId& parent,
                     int64_t start_unix_ns, int64_t end_unix_ns,
                     std::vector<Attribute> attributes = {},
                     SpanKind kind = SpanKind::kInternal, bool error = false,
                     std::string status_message = "");
  // Renames the root span (e.g. "chat smollm2" once the model is known).
  void SetName(std::string name) { spans_[0].name = std::move(name); }
  // Attributes of the root span.
  void SetAttribute(std::string key, AttributeValue value);
  // The `traceparent` to send downstream from span `from` (e.g. an upstream
  // attempt's client span).
  std::string TraceparentFor(const SpanId& from) const;

  // Ends the root span.
  void End(int64_t end_unix_ns, bool error, std::string status_message);
  bool ended() const { return ended_; }
  bool error() const { return spans_[0].error; }
  double duration_ms() const {
    return static_cast<double>(spans_[0].end_unix_ns -
                               spans_[0].start_unix_ns) /
           1e6;
  }

  std::vector<SpanRecord> TakeSpans() { return std::move(spans_); }
  size_t span_count() const { return spans_.size(); }

 private:
  std::vector<SpanRecord> spans_;  // [0] is the root
  bool sampled_ = false;
  bool ended_ = false;
  int64_t dropped_ = 0;
  std::string tracestate_;
};

}  // namespace redline::telemetry

#endif  // REDLINE_TELEMETRY_REQUEST_TRACE_H_
