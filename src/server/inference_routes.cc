// Completion requests over HTTP: parse with the api codec, pick the model,
// start an InferenceSession with the SSE or JSON encoder, and drain it on
// the event loop whenever its engine posts.
#include <fmt/format.h>

#include "api/request.h"
#include "base/logging.h"
#include "server/http_encoders.h"
#include "server/server_internal.h"
#include "server/tracing_sink.h"
#include "telemetry/trace_context.h"

namespace redline::server {
namespace {

Endpoint EndpointOf(api::ApiKind kind) {
  return kind == api::ApiKind::kChat ? Endpoint::kChatCompletions
                                     : Endpoint::kCompletions;
}

const char* OperationOf(api::ApiKind kind) {
  return kind == api::ApiKind::kChat ? "chat" : "text_completion";
}

// The root span of a request, joined to the caller's trace when it sent a
// valid traceparent (a malformed one starts a new trace, never an error).
std::shared_ptr<telemetry::RequestTrace> StartTrace(
    const telemetry::Tracer& tracer, api::ApiKind kind,
    const http::ServerRequest& request) {
  auto ctx = telemetry::ParseTraceparent(request.HeaderValue("traceparent"),
                                         request.HeaderValue("tracestate"));
  // The request arrived before it was parsed: anchor the root at arrival.
  const int64_t arrival_unix_ns =
      telemetry::UnixNowNs() - (http::NowNs() - request.t_received_ns);
  auto trace = std::make_shared<telemetry::RequestTrace>(tracer.StartTrace(
      ctx, OperationOf(kind), telemetry::SpanKind::kServer, arrival_unix_ns));
  trace->SetAttribute("gen_ai.operation.name", std::string(OperationOf(kind)));
  trace->SetAttribute("http.request.method", std::string("POST"));
  trace->SetAttribute("url.path", std::string(request.Path()));
  return trace;
}

void AddRequestAttributes(telemetry::RequestTrace& t,
                          const api::CompletionRequest& r,
                          const std::string& served_name) {
  // GenAI convention: "{operation} {model}".
  t.SetName(std::string(OperationOf(r.kind)) + " " + served_name);
  t.SetAttribute("gen_ai.request.model", served_name);
  if (r.sampling.max_tokens)
    t.SetAttribute("gen_ai.request.max_tokens", *r.sampling.max_tokens);
  if (r.sampling.temperature)
    t.SetAttribute("gen_ai.request.temperature", *r.sampling.temperature);
  if (r.sampling.top_p)
    t.SetAttribute("gen_ai.request.top_p", *r.sampling.top_p);
  if (r.sampling.seed) t.SetAttribute("gen_ai.request.seed", *r.sampling.seed);
  t.SetAttribute("redline.stream", r.stream);
}

}  // namespace

void InferenceServer::Impl::HandleInference(
    api::ApiKind kind, http::ServerRequest& request,
    const std::shared_ptr<http::ResponseWriter>& writer) {
  const Endpoint ep = EndpointOf(kind);
  if (!serving) {
    ReplyError(ep, request, *writer, NotServingError());
    return;
  }
  // Parsing, rendering and tokenizing grow with the request: a worker does
  // them and posts the prepared request back to the loop.
  std::shared_ptr<telemetry::RequestTrace> trace;
  if (tracer) trace = StartTrace(*tracer, kind, request);
  auto req = std::make_shared<http::ServerRequest>(std::move(request));
  ++preparing;
  const bool queued = prep->TrySubmit([this, kind, req, writer, trace] {
    const int64_t t_parse = trace ? telemetry::UnixNowNs() : 0;
    std::string param;
    auto parsed = api::ParseRequest(req->body, kind, &param);
    if (trace) {
      trace->AddSpan("parse", trace->root_span_id(), t_parse,
                     telemetry::UnixNowNs(),
                     {{"redline.request.body_bytes",
                       static_cast<int64_t>(req->body.size())}});
    }
    api::ApiError refusal;
    ServedModel* m = nullptr;
    auto prepared = std::make_shared<PreparedRequest>();
    bool stream = false, include_usage = false, continuous_usage = false,
         logprobs = false;
    if (!parsed.ok()) {
      refusal = api::ApiErrorFromStatus(parsed.status());
      refusal.param = param;
    } else if ((m = FindModel(parsed->model, &refusal)) != nullptr) {
      stream = parsed->stream;
      include_usage = stream && parsed->include_usage;
      continuous_usage = stream && parsed->continuous_usage;
      logprobs = parsed->sampling.logprobs;
      if (trace) AddRequestAttributes(*trace, *parsed, m->spec.name);
      const int64_t t_prepare = trace ? telemetry::UnixNowNs() : 0;
      const bool ok =
          InferenceSession::Prepare(*m, std::move(parsed).value(),
                                    session_options, prepared.get(), &refusal);
      if (trace) {
        // Rendering the chat template and tokenizing (one call).
        trace->AddSpan("chat_template+tokenize", trace->root_span_id(),
                       t_prepare, telemetry::UnixNowNs(),
                       {{"gen_ai.usage.input_tokens",
                         static_cast<int64_t>(prepared->prompt.size())}});
      }
      if (!ok) m = nullptr;
    }
    loop.Post([this, kind, req, writer, m, prepared, refusal, stream,
               include_usage, continuous_usage, logprobs, trace] {
      --preparing;
      if (m == nullptr) {
        ReplyError(EndpointOf(kind), *req, *writer, refusal);
        FinishRefusedTrace(tracer.get(), trace, refusal);
      } else {
        StartSession(kind, *req, writer, *m, std::move(*prepared), stream,
                     include_usage, continuous_usage, logprobs, trace);
      }
      if (draining) CheckDrain();
    });
  });
  if (!queued) {
    --preparing;
    const api::ApiError busy = api::ApiError::Unavailable(
        "the server is busy preparing other requests; retry later", 1);
    ReplyError(ep, *req, *writer, busy);
    FinishRefusedTrace(tracer.get(), trace, busy);
  }
}

void InferenceServer::Impl::StartSession(
    api::ApiKind kind, const http::ServerRequest& request,
    const std::shared_ptr<http::ResponseWriter>& writer, ServedModel& m,
    PreparedRequest prepared, bool stream, bool include_usage,
    bool continuous_usage, bool logprobs,
    std::shared_ptr<telemetry::RequestTrace> trace) {
  const Endpoint ep = EndpointOf(kind);
  if (writer->peer_closed()) {  // gone while the request was prepared
    api::ApiError gone;
    gone.http_status = 499;  // nginx's "client closed request"
    gone.type = "cancelled";
    gone.message = "the client went away while the request was prepared";
    FinishRefusedTrace(tracer.get(), trace, gone);
    return;
  }
  if (!serving) {
    ReplyError(ep, request, *writer, NotServingError());
    FinishRefusedTrace(tracer.get(), trace, NotServingError());
    return;
  }
  EncoderOptions eo;
  eo.kind = kind;
  if (std::string_view rid = request.HeaderValue("X-Request-Id");
      rid.size() <= 256)
    eo.request_id = std::string(rid);
  eo.include_usage = include_usage;
  eo.continuous_usage = continuous_usage;
  eo.ping_interval_ns = ping_interval_ns;
  ModelMetrics* mm = &m.metrics;
  eo.count_status = [mm, ep](int status) { mm->CountHttp(ep, status); };
  std::unique_ptr<SessionSink> sink;
  if (stream) {
    sink = std::make_unique<SseEncoder>(writer, std::move(eo));
  } else {
    auto json = std::make_unique<JsonEncoder>(writer, std::move(eo));
    json->set_with_logprobs(logprobs);
    sink = std::move(json);
  }
  if (trace) {
    sink = std::make_unique<TracingSink>(std::move(sink), trace, tracer.get(),
                                         trace->start_unix_ns());
  }

  const uint64_t id = next_session_id++;
  // The engine thread only sets the flag and posts; a burst of tokens costs
  // one post, and everything else runs on the loop.
  auto posted = std::make_shared<std::atomic<bool>>(false);
  auto notify = [this, posted, id] {
    if (posted->exchange(true)) return;
    loop.Post([this, posted, id] {
      posted->store(false);
      DrainSession(id);
    });
  };
  api::ApiError refusal;
  std::unique_ptr<InferenceSession> session = InferenceSession::Start(
      m, std::move(prepared), session_options, request.t_received_ns,
      std::move(sink), std::move(notify), &refusal);
  if (session == nullptr) {
    ReplyError(ep, request, *writer, refusal, mm);
    FinishRefusedTrace(tracer.get(), trace, refusal);
    return;
  }
  if (session->done()) {
    if (draining) CheckDrain();
    return;
  }
  writer->SetOnPeerClosed([this, id] {
    auto it = active.find(id);
    if (it != active.end()) it->second->Cancel();
  });
  active.emplace(id, std::move(session));
}

void InferenceServer::Impl::DrainSession(uint64_t id) {
  auto it = active.find(id);
  if (it == active.end()) return;
  it->second->Drain();
  if (!it->second->done()) return;
  active.erase(it);
  if (draining) CheckDrain();
}

}  // namespace redline::server
