// GatewayTrace: the trace of one request through the gateway — its server
// span (the root), the route decision, the cache lookup, and one client
// span per upstream attempt (first try, retries, hedges), each attempt
// sending its own `traceparent` so the upstream's spans hang under it.
//
//   auto t = std::make_shared<GatewayTrace>(*tracer, request, kind, model);
//   t->AddSpan("route", t0_ns, t1_ns, {{"redline.route.class", "light"}});
//   telemetry::SpanId a = t->NewSpanId();          // an attempt starts
//   headers = t->WithTraceparent(headers, a);      // ... goes upstream
//   t->AddAttemptSpan(a, "upstream r1", t_send, t_end, attrs, error, why);
//   t->MarkEnd(t_ns, 200, "");                     // the client got its answer
//   // the last owner to let go exports the trace
//
// The trace is shared by everything that handles the request (the job, the
// forward plans of a light and an escalated attempt, the proxy requests)
// and is handed to the Tracer when the last of them lets go — after the
// answer, or when the client went away. The root's end is the last
// MarkEnd, or that moment when none came.
//
// Times: the gateway measures with http::NowNs() (monotonic); spans need
// Unix time. The offset between the two clocks is taken once, when the
// trace starts.
//
// Threading: the gateway's loop thread only. Cost: a few small
// allocations per span; nothing when tracing is off (no GatewayTrace).
#ifndef REDLINE_GATEWAY_GATEWAY_TRACE_H_
#define REDLINE_GATEWAY_GATEWAY_TRACE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/request.h"
#include "api/types.h"
#include "http/client.h"
#include "http/server.h"
#include "telemetry/request_trace.h"
#include "telemetry/tracer.h"

namespace redline::gateway {

class GatewayTrace {
 public:
  // Joins the caller's trace when `request` carries a valid traceparent
  // (a malformed one starts a new trace). The root starts at the request's
  // arrival (request.t_received_ns).
  GatewayTrace(telemetry::Tracer& tracer, const http::ServerRequest& request,
               api::ApiKind kind);
  ~GatewayTrace();
  GatewayTrace(const GatewayTrace&) = delete;
  GatewayTrace& operator=(const GatewayTrace&) = delete;

  // The GenAI request attributes and the root's name ("chat MODEL").
  void SetRequest(const api::CompletionRequest& request,
                  std::string_view model);
  void SetAttribute(std::string key, telemetry::AttributeValue value);

  // A child of the root, times in http::NowNs() nanoseconds.
  void AddSpan(std::string name, int64_t start_ns, int64_t end_ns,
               std::vector<telemetry::Attribute> attributes = {},
               bool error = false, std::string status_message = "");

  // An upstream attempt: reserve its id when it starts (its traceparent
  // goes out first), add it when it ended.
  telemetry::SpanId NewSpanId() { return trace_.NewSpanId(); }
  void AddAttemptSpan(const telemetry::SpanId& id, std::string name,
                      int64_t start_ns, int64_t end_ns,
                      std::vector<telemetry::Attribute> attributes, bool error,
                      std::string status_message);
  // `headers` with any incoming traceparent/tracestate replaced by the
  // context of span `from` (the attempt's client span).
  std::vector<http::Header> WithTraceparent(
      std::vector<http::Header> headers, const telemetry::SpanId& from) const;

  // The answer went out at `t_ns` with `status` (0 when the client went
  // away); `error` is a description for failed requests ("" otherwise).
  void MarkEnd(int64_t t_ns, int status, std::string error);

  const telemetry::TraceId& trace_id() const { return trace_.trace_id(); }

 private:
  int64_t ToUnix(int64_t t_ns) const { return t_ns + unix_offset_ns_; }

  telemetry::Tracer& tracer_;
  telemetry::RequestTrace trace_;
  int64_t unix_offset_ns_;
  int64_t end_ns_ = -1;
  int status_ = 0;
  std::string error_;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_GATEWAY_TRACE_H_
