// One inference request: validation, admission into the engine, SSE or a
// whole JSON body, keep-alive pings, cancellation, deadlines and metrics.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <random>

#include "base/logging.h"
#include "http/sse.h"
#include "server/server_internal.h"

namespace redline::server {
namespace {

constexpr double kNsToSeconds = 1e-9;

std::string RandomHex(size_t n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(n, '0');
  uint64_t bits = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % 16 == 0) bits = rng();
    out[i] = kHex[bits & 15];
    bits >>= 4;
  }
  return out;
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Endpoint EndpointOf(api::ApiKind kind) {
  return kind == api::ApiKind::kChat ? Endpoint::kChatCompletions
                                     : Endpoint::kCompletions;
}

}  // namespace

// ---------------------------------------------------------------------------
// Admission
// ---------------------------------------------------------------------------

void InferenceServer::Impl::HandleInference(
    api::ApiKind kind, http::ServerRequest& request,
    const std::shared_ptr<http::ResponseWriter>& writer) {
  const Endpoint ep = EndpointOf(kind);
  if (!serving) {
    ReplyError(ep, request, *writer, NotServingError());
    return;
  }
  InferenceRequest ir;
  std::string param;
  if (Status s = ParseInferenceRequest(request.body, kind, &ir, &param);
      !s.ok()) {
    ReplyError(ep, request, *writer,
               ApiError::BadRequest(s.message(), param,
                                    s.code() == StatusCode::kUnimplemented
                                        ? "unsupported_parameter"
                                        : "invalid_value"));
    return;
  }
  if (!ir.model.empty() && ir.model != model_name) {
    ReplyError(ep, request, *writer,
               ApiError::NotFound(
                   fmt::format(
                       "The model '{}' does not exist; this server serves '{}'",
                       ir.model, model_name),
                   "model", "model_not_found"));
    return;
  }
  const int max_n = std::min(config.max_n, config.parallel);
  if (ir.n > max_n) {
    ReplyError(
        ep, request, *writer,
        ApiError::BadRequest(
            fmt::format("n must be at most {} on this server (free slots)",
                        max_n),
            "n"));
    return;
  }
  if (Status s = ir.sampling.Validate(model->config().vocab_size); !s.ok()) {
    ReplyError(ep, request, *writer,
               ApiError::BadRequest(s.message(),
                                    ParamOfValidationMessage(s.message())));
    return;
  }
  // Prompt tokens (on the loop thread: tens of MB/s, so ~1 ms for a 30k-char
  // prompt; see docs/SERVER.md).
  std::vector<int32_t> prompt;
  if (kind == api::ApiKind::kChat) {
    auto ids = chat->ChatTokens(ir.messages, ir.tools);
    if (!ids.ok()) {
      ReplyError(ep, request, *writer,
                 ApiError::BadRequest(ids.status().message(), "messages"));
      return;
    }
    prompt = std::move(ids).value();
  } else if (ir.prompt_is_ids) {
    prompt = std::move(ir.prompt_ids);
  } else {
    prompt = chat->CompletionTokens(ir.prompt_text);
  }
  if (prompt.empty()) {
    ReplyError(ep, request, *writer,
               ApiError::BadRequest("the prompt has no tokens", "prompt"));
    return;
  }

  if (auto refuse = QueueBudgetError(ir.n)) {
    ReplyError(ep, request, *writer, *refuse);
    return;
  }

  const uint64_t id = next_exchange_id++;
  auto ex = std::make_shared<Exchange>(
      *this, id, kind, writer,
      std::string(request.HeaderValue("X-Request-Id")));
  ex->stream = ir.stream;
  ex->include_usage = ir.stream && ir.include_usage;
  ex->continuous_usage = ir.stream && ir.continuous_usage;
  ex->with_logprobs = ir.sampling.logprobs;
  ex->arrival_ns = request.t_received_ns;
  ex->prompt_tokens = static_cast<int64_t>(prompt.size());
  ex->ids.id =
      (kind == api::ApiKind::kChat ? "chatcmpl-" : "cmpl-") + RandomHex(24);
  ex->ids.model = model_name;
  ex->ids.created = UnixSeconds();

  const engine::Clock::time_point arrival{
      std::chrono::nanoseconds(request.t_received_ns)};
  std::optional<engine::Clock::time_point> deadline;
  if (config.request_timeout_s > 0) {
    deadline =
        arrival + std::chrono::duration_cast<engine::Clock::duration>(
                      std::chrono::duration<double>(config.request_timeout_s));
  }
  for (int i = 0; i < ir.n; ++i) {
    engine::EngineRequest er;
    er.prompt = prompt;  // copied per choice; n is small
    er.sampling = ir.sampling;
    // Distinct but reproducible choices: seed + index.
    if (er.sampling.seed && i > 0)
      *er.sampling.seed += static_cast<uint64_t>(i);
    er.deadline = deadline;
    er.arrival = arrival;
    auto submitted = engine->Submit(std::move(er));
    if (!submitted.ok()) {
      ex->CancelAll();  // choices admitted so far leave the queue
      ApiError e =
          ApiErrorFromStatus(submitted.status(), engine->RetryAfterSeconds());
      if (e.http_status == 400 && e.param.empty())
        e.param = ParamOfValidationMessage(e.message);
      ReplyError(ep, request, *writer, e);
      return;
    }
    Exchange::Choice c;
    c.stream = std::move(submitted).value();
    ex->choices.push_back(std::move(c));
  }
  if (next_is_cold) {
    ex->start = StartKind::kCold;
    next_is_cold = false;
  }
  active.emplace(id, ex);
  // The engine thread only sets the flag and posts; everything else runs here.
  http::EventLoop* loop_ptr = &loop;
  std::weak_ptr<Exchange> weak = ex;
  for (auto& c : ex->choices) {
    c.stream->SetNotifier([loop_ptr, weak, wakeup = ex->wakeup] {
      if (wakeup->posted.exchange(true)) return;
      loop_ptr->Post([weak] {
        if (auto e = weak.lock()) e->Drain();
      });
    });
  }
  writer->SetOnPeerClosed([weak] {
    if (auto e = weak.lock()) e->OnPeerClosed();
  });
  if (ir.stream) metrics.CountHttp(ep, 200);
  ex->Begin();
}

std::optional<ApiError> InferenceServer::Impl::QueueBudgetError(
    int slots) const {
  if (config.queue_budget_s <= 0) return std::nullopt;
  // Sequences in the engine (running or waiting), counted here rather than
  // from Engine::Stats, whose running count is a snapshot taken after each
  // step and misses what the step in progress just admitted. A choice
  // whose final event is still in flight to the loop counts (conservative).
  int in_engine = 0;
  for (const auto& [id, ex] : active) {
    for (const Exchange::Choice& c : ex->choices) in_engine += c.done ? 0 : 1;
  }
  // Requests that must finish before this one gets its slots.
  const int ahead = in_engine + slots - config.parallel;
  if (ahead <= 0) return std::nullopt;
  if (service_ema_s <= 0) {
    // No request has finished yet, so the wait cannot be estimated: admit
    // only into free slots (a burst right after start must not queue blind).
    return ApiError::Overloaded(
        "the server is at capacity (every slot is busy); retry later", 1);
  }
  // Each "round" of `parallel` requests ahead takes up to one service time
  // (worst case: the running ones just started), so the budget bounds the
  // wait rather than its average.
  const int rounds = (ahead + config.parallel - 1) / config.parallel;
  const double wait_s = service_ema_s * rounds;
  if (wait_s <= config.queue_budget_s) return std::nullopt;
  return ApiError::Overloaded(
      fmt::format("the server is at capacity: the estimated wait for a slot is "
                  "{:.1f} s, over the queue budget "
                  "of {:.1f} s; retry later",
                  wait_s, config.queue_budget_s),
      static_cast<int>(std::ceil(wait_s - config.queue_budget_s)));
}

void InferenceServer::Impl::ExchangeDone(uint64_t id) {
  active.erase(id);
  if (draining) CheckDrain();
}

// ---------------------------------------------------------------------------
// Exchange
// ---------------------------------------------------------------------------

Exchange::Exchange(InferenceServer::Impl& s, uint64_t exchange_id,
                   api::ApiKind k, std::shared_ptr<http::ResponseWriter> w,
                   std::string rid)
    : server(s),
      id(exchange_id),
      kind(k),
      writer(std::move(w)),
      request_id(std::move(rid)) {
  if (request_id.size() > 256) request_id.clear();
}

void Exchange::Begin() {
  if (stream) {
    // Headers go out as soon as the request is admitted (serving.md §3), so
    // clients and proxies see a live stream during queueing and prefill.
    std::vector<http::Header> h{{"Content-Type", "text/event-stream"},
                                {"Cache-Control", "no-cache"},
                                {"X-Accel-Buffering", "no"}};
    if (!request_id.empty()) h.push_back({"X-Request-Id", request_id});
    writer->BeginStream(200, std::move(h));
    headers_sent_ = true;
    if (kind == api::ApiKind::kChat) {
      std::vector<ChunkChoice> roles;
      for (size_t i = 0; i < choices.size(); ++i) {
        ChunkChoice c;
        c.index = static_cast<int>(i);
        c.role = true;
        roles.push_back(std::move(c));
      }
      writer->Write(SseChunk(kind, ids, roles, nullptr, nullptr));
    }
    last_write_ns_ = http::NowNs();
  }
  Drain();  // events pushed before the notifier was set
}

void Exchange::CancelAll() {
  for (auto& c : choices) {
    if (!c.done && c.stream) c.stream->Cancel();
  }
}

void Exchange::OnPeerClosed() {
  if (completed_ || peer_gone_) return;
  peer_gone_ = true;
  if (!failed_) {
    failed_ = true;
    error_class_ = ErrorClass::kCancelled;
  }
  CancelAll();
}

void Exchange::MaybePing(int64_t now_ns, int64_t interval_ns) {
  if (!stream || !headers_sent_ || failed_ || completed_) return;
  if (now_ns - last_write_ns_ < interval_ns) return;
  writer->Write(http::SseComment("ping"));
  last_write_ns_ = now_ns;
}

void Exchange::Drain() {
  wakeup->posted.store(false);
  if (completed_) return;
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    Choice& c = choices[i];
    engine::RequestEvent e;
    while (!c.done && c.stream->TryPop(&e)) OnEvent(i, e, &out);
  }
  if (!out.empty() && !peer_gone_) {
    writer->Write(std::move(out));
    last_write_ns_ = http::NowNs();
  }
  bool all_done = true;
  for (const Choice& c : choices) all_done = all_done && c.done;
  if (all_done) Complete();
}

void Exchange::OnEvent(size_t index, engine::RequestEvent& e,
                       std::string* out) {
  Choice& c = choices[index];
  const int64_t now = http::NowNs();
  ServerMetrics& m = server.metrics;
  switch (e.type) {
    case engine::RequestEvent::Type::kToken: {
      if (c.completion_tokens == 0 && index == 0)
        m.prompt_tokens->Increment(static_cast<double>(prompt_tokens));
      ++c.completion_tokens;
      m.generation_tokens->Increment();
      if (failed_) return;
      const bool has_text = !e.text.empty();
      if (has_text) {
        if (first_content_ns_ == 0) first_content_ns_ = now;
        if (c.last_content_ns != 0)
          m.itl->Observe(static_cast<double>(now - c.last_content_ns) *
                         kNsToSeconds);
        c.last_content_ns = now;
      }
      if (!stream) {
        c.text += e.text;
        if (with_logprobs && e.logprobs)
          c.logprobs.push_back(std::move(*e.logprobs));
        return;
      }
      const bool has_logprobs = with_logprobs && e.logprobs.has_value();
      if (!has_text && !has_logprobs)
        return;  // held back (stop-string prefix, partial UTF-8)
      ChunkChoice ch;
      ch.index = static_cast<int>(index);
      ch.text = std::move(e.text);
      ch.with_logprobs = has_logprobs;
      if (has_logprobs) ch.logprobs.push_back(std::move(*e.logprobs));
      UsageCounts usage{prompt_tokens, c.completion_tokens, 0};
      *out += SseChunk(kind, ids, {ch}, continuous_usage ? &usage : nullptr,
                       server.model->tokenizer());
      return;
    }
    case engine::RequestEvent::Type::kDone: {
      c.done = true;
      c.finish = e.finish_reason;
      c.prompt_tokens = e.prompt_tokens;
      c.cached_tokens = e.cached_tokens;
      c.timings = e.timings;
      if (failed_ || !stream) return;
      ChunkChoice ch;
      ch.index = static_cast<int>(index);
      if (kind == api::ApiKind::kCompletions) ch.text = std::string();
      ch.finish_reason = std::string(model::FinishReasonName(e.finish_reason));
      UsageCounts usage{prompt_tokens, c.completion_tokens, c.cached_tokens};
      *out += SseChunk(kind, ids, {ch}, continuous_usage ? &usage : nullptr,
                       nullptr);
      return;
    }
    case engine::RequestEvent::Type::kError:
      c.done = true;
      c.timings = e.timings;
      OnError(index, e.status, out);
      return;
  }
}

void Exchange::OnError(size_t index, const Status& status, std::string* out) {
  if (failed_) return;  // already answered (or the client left)
  failed_ = true;
  CancelAll();  // the other choices cannot be answered any more
  ApiError e = ApiErrorFromStatus(status);
  error_class_ = e.error_class;
  if (e.error_class == ErrorClass::kInternal) {
    RL_LOG(kError, "serve: request {} failed: {}", ids.id, status.ToString());
  }
  if (stream) {
    // After the head only an in-stream error is possible: one data event
    // with the OpenAI error object, then the stream ends (serving.md §3).
    *out += http::SseData(ApiErrorJson(e));
    return;
  }
  std::vector<http::Header> extra{{"Content-Type", "application/json"}};
  if (!request_id.empty()) extra.push_back({"X-Request-Id", request_id});
  if (e.retry_after_s > 0)
    extra.push_back({"Retry-After", std::to_string(e.retry_after_s)});
  server.metrics.CountHttp(EndpointOf(kind), e.http_status);
  if (!peer_gone_)
    writer->Respond(e.http_status, std::move(extra), ApiErrorJson(e));
}

void Exchange::Complete() {
  if (completed_) return;
  completed_ = true;
  const int64_t now = http::NowNs();
  if (failed_) {
    if (stream && !peer_gone_) writer->End();
    server.metrics.RequestError(error_class_).Increment();
  } else {
    UsageCounts usage{prompt_tokens, 0, 0};
    for (const Choice& c : choices) {
      usage.completion_tokens += c.completion_tokens;
      usage.cached_tokens = std::max(usage.cached_tokens, c.cached_tokens);
    }
    if (stream) {
      std::string out;
      if (include_usage) out += SseChunk(kind, ids, {}, &usage, nullptr);
      out += http::SseData("[DONE]");
      writer->Write(std::move(out));
      writer->End();
    } else {
      std::vector<FinalChoice> finals;
      for (Choice& c : choices) {
        FinalChoice f;
        f.text = std::move(c.text);
        f.finish_reason = std::string(model::FinishReasonName(c.finish));
        f.logprobs = std::move(c.logprobs);
        f.with_logprobs = with_logprobs;
        finals.push_back(std::move(f));
      }
      std::vector<http::Header> extra{{"Content-Type", "application/json"}};
      if (!request_id.empty()) extra.push_back({"X-Request-Id", request_id});
      server.metrics.CountHttp(EndpointOf(kind), 200);
      writer->Respond(
          200, std::move(extra),
          CompletionResponse(kind, ids, finals, usage, &choices[0].timings,
                             server.model->tokenizer()));
    }
    RecordSuccess(now);
  }
  for (auto& c : choices) c.stream->SetNotifier(nullptr);
  writer->SetOnPeerClosed(nullptr);
  // Last: this may destroy the exchange.
  server.ExchangeDone(id);
}

void Exchange::RecordSuccess(int64_t now_ns) {
  ServerMetrics& m = server.metrics;
  const Choice& c = choices[0];
  m.RequestSuccess(c.finish).Increment();
  const double e2e_s = static_cast<double>(now_ns - arrival_ns) * kNsToSeconds;
  m.E2e(start).Observe(e2e_s);
  if (first_content_ns_ != 0) {
    const double ttft_s =
        static_cast<double>(first_content_ns_ - arrival_ns) * kNsToSeconds;
    m.Ttft(start).Observe(ttft_s);
    if (c.completion_tokens >= 2)
      m.tpot->Observe((e2e_s - ttft_s) /
                      static_cast<double>(c.completion_tokens - 1));
  }
  const engine::RequestTimings& t = c.timings;
  m.queue_time->Observe(t.queue_ms / 1e3);
  m.prefill_time->Observe(t.prefill_ms / 1e3);
  m.decode_time->Observe(t.decode_ms / 1e3);
  const double service_s = (t.e2e_ms - t.queue_ms) / 1e3;
  m.inference_time->Observe(service_s);
  constexpr double kAlpha = 0.2;  // weight of the newest request
  server.service_ema_s =
      server.service_ema_s == 0
          ? service_s
          : (1 - kAlpha) * server.service_ema_s + kAlpha * service_s;
  m.prompt_tokens_per_request->Observe(static_cast<double>(prompt_tokens));
  for (const Choice& ch : choices)
    m.generation_tokens_per_request->Observe(
        static_cast<double>(ch.completion_tokens));
}

}  // namespace redline::server
