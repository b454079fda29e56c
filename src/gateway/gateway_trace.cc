#include "gateway/gateway_trace.h"

#include <utility>

#include "http/event_loop.h"
#include "telemetry/trace_context.h"

namespace redline::gateway {
namespace {

bool IsTraceHeader(std::string_view name) {
  auto eq = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      char x = a[i];
      if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
      if (x != b[i]) return false;
    }
    return true;
  };
  return eq(name, "traceparent") || eq(name, "tracestate");
}

std::string_view OperationOf(api::ApiKind kind) {
  return kind == api::ApiKind::kChat ? "chat" : "text_completion";
}

}  // namespace

GatewayTrace::GatewayTrace(telemetry::Tracer& tracer,
                           const http::ServerRequest& request,
                           api::ApiKind kind)
    : tracer_(tracer),
      trace_(tracer.StartTrace(
          telemetry::ParseTraceparent(request.HeaderValue("traceparent"),
                                      request.HeaderValue("tracestate")),
          std::string(OperationOf(kind)), telemetry::SpanKind::kServer,
          telemetry::UnixNowNs() - (http::NowNs() - request.t_received_ns))),
      unix_offset_ns_(telemetry::UnixNowNs() - http::NowNs()) {
  trace_.SetAttribute("gen_ai.operation.name", std::string(OperationOf(kind)));
  trace_.SetAttribute("http.request.method", std::string("POST"));
  trace_.SetAttribute("url.path", std::string(request.Path()));
}

GatewayTrace::~GatewayTrace() {
  const int64_t end = end_ns_ >= 0 ? end_ns_ : http::NowNs();
  if (status_ > 0) {
    trace_.SetAttribute("http.response.status_code",
                        static_cast<int64_t>(status_));
  }
  const bool failed = status_ == 0 || status_ >= 500 || !error_.empty();
  if (status_ == 0 && error_.empty())
    error_ = "cancelled: the client went away";
  trace_.End(ToUnix(end), failed, error_);
  tracer_.Finish(std::move(trace_));
}

void GatewayTrace::SetRequest(const api::CompletionRequest& r,
                              std::string_view model) {
  trace_.SetName(std::string(OperationOf(r.kind)) + " " + std::string(model));
  trace_.SetAttribute("gen_ai.request.model", std::string(model));
  if (r.sampling.max_tokens)
    trace_.SetAttribute("gen_ai.request.max_tokens", *r.sampling.max_tokens);
  if (r.sampling.temperature)
    trace_.SetAttribute("gen_ai.request.temperature", *r.sampling.temperature);
  if (r.sampling.top_p)
    trace_.SetAttribute("gen_ai.request.top_p", *r.sampling.top_p);
  if (r.sampling.seed)
    trace_.SetAttribute("gen_ai.request.seed", *r.sampling.seed);
  trace_.SetAttribute("redline.stream", r.stream);
}

void GatewayTrace::SetAttribute(std::string key,
                                telemetry::AttributeValue value) {
  trace_.SetAttribute(std::move(key), std::move(value));
}

void GatewayTrace::AddSpan(std::string name, int64_t start_ns, int64_t end_ns,
                           std::vector<telemetry::Attribute> attributes,
                           bool error, std::string status_message) {
  trace_.AddSpanWithId(trace_.NewSpanId(), std::move(name),
                       trace_.root_span_id(), ToUnix(start_ns), ToUnix(end_ns),
                       std::move(attributes), telemetry::SpanKind::kInternal,
                       error, std::move(status_message));
}

void GatewayTrace::AddAttemptSpan(const telemetry::SpanId& id, std::string name,
                                  int64_t start_ns, int64_t end_ns,
                                  std::vector<telemetry::Attribute> attributes,
                                  bool error, std::string status_message) {
  trace_.AddSpanWithId(id, std::move(name), trace_.root_span_id(),
                       ToUnix(start_ns), ToUnix(end_ns), std::move(attributes),
                       telemetry::SpanKind::kClient, error,
                       std::move(status_message));
}

std::vector<http::Header> GatewayTrace::WithTraceparent(
    std::vector<http::Header> headers, const telemetry::SpanId& from) const {
  std::erase_if(headers,
                [](const http::Header& h) { return IsTraceHeader(h.name); });
  headers.push_back({"traceparent", trace_.TraceparentFor(from)});
  if (!trace_.tracestate().empty())
    headers.push_back({"tracestate", trace_.tracestate()});
  return headers;
}

void GatewayTrace::MarkEnd(int64_t t_ns, int status, std::string error) {
  end_ns_ = t_ns;
  status_ = status;
  error_ = std::move(error);
}

}  // namespace redline::gateway
