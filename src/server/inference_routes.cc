// Completion requests over HTTP: parse with the api codec, pick the model,
// start an InferenceSession with the SSE or JSON encoder, and drain it on
// the event loop whenever its engine posts.
#include <fmt/format.h>

#include "api/request.h"
#include "base/logging.h"
#include "server/http_encoders.h"
#include "server/server_internal.h"

namespace redline::server {
namespace {

Endpoint EndpointOf(api::ApiKind kind) {
  return kind == api::ApiKind::kChat ? Endpoint::kChatCompletions
                                     : Endpoint::kCompletions;
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
  auto req = std::make_shared<http::ServerRequest>(std::move(request));
  ++preparing;
  const bool queued = prep->TrySubmit([this, kind, req, writer] {
    std::string param;
    auto parsed = api::ParseRequest(req->body, kind, &param);
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
      if (!InferenceSession::Prepare(*m, std::move(parsed).value(),
                                     session_options, prepared.get(), &refusal))
        m = nullptr;
    }
    loop.Post([this, kind, req, writer, m, prepared, refusal, stream,
               include_usage, continuous_usage, logprobs] {
      --preparing;
      if (m == nullptr) {
        ReplyError(EndpointOf(kind), *req, *writer, refusal);
      } else {
        StartSession(kind, *req, writer, *m, std::move(*prepared), stream,
                     include_usage, continuous_usage, logprobs);
      }
      if (draining) CheckDrain();
    });
  });
  if (!queued) {
    --preparing;
    ReplyError(
        ep, *req, *writer,
        api::ApiError::Unavailable(
            "the server is busy preparing other requests; retry later", 1));
  }
}

void InferenceServer::Impl::StartSession(
    api::ApiKind kind, const http::ServerRequest& request,
    const std::shared_ptr<http::ResponseWriter>& writer, ServedModel& m,
    PreparedRequest prepared, bool stream, bool include_usage,
    bool continuous_usage, bool logprobs) {
  const Endpoint ep = EndpointOf(kind);
  if (writer->peer_closed()) return;  // gone while the request was prepared
  if (!serving) {
    ReplyError(ep, request, *writer, NotServingError());
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
