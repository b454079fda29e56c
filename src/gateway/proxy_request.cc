#include "gateway/proxy_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "api/response.h"
#include "api/server_timing.h"
#include "base/logging.h"
#include "gateway/sse_splitter.h"
#include "http/sse.h"

namespace redline::gateway {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;
// Events held before the first token: a role chunk and a few comments in
// practice; past either bound the stream commits as it is.
constexpr size_t kMaxHeldBytes = 64 * 1024;
constexpr int kMaxHeldEvents = 64;
// An event larger than this is forwarded without waiting for its end.
constexpr size_t kMaxEventBytes = 1 << 20;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Retry-After in seconds (delta-seconds; an HTTP date counts as 1 s);
// -1 when absent.
int RetryAfterSeconds(const http::ResponseHead& head) {
  for (const http::Header& h : head.headers) {
    if (!EqualsIgnoreCase(h.name, "retry-after")) continue;
    int s = 0;
    const auto [p, ec] =
        std::from_chars(h.value.data(), h.value.data() + h.value.size(), s);
    if (ec != std::errc() || s < 0) return 1;
    return s;
  }
  return -1;
}

api::ApiError UpstreamError(std::string message) {
  api::ApiError e = api::ApiError::Internal(std::move(message));
  e.http_status = 502;
  e.code = "upstream_error";
  return e;
}

bool IsTimeout(Failure f) {
  return f == Failure::kFirstByteTimeout || f == Failure::kIdleTimeout ||
         f == Failure::kDeadline;
}

}  // namespace

class ProxyRequest::Attempt final : public CallSink {
 public:
  Attempt(ProxyRequest* r, Upstream* u, bool h, http::EventLoop& loop)
      : req(r), up(u), hedge(h), first_byte_timer(loop) {}

  void OnCallHeaders(const http::ResponseHead& head, int64_t t_ns) override {
    req->OnHeaders(*this, head, t_ns);
  }
  void OnCallBody(std::string_view data, int64_t t_ns) override {
    req->OnBody(*this, data, t_ns);
  }
  void OnCallComplete(const http::TransportResult& r, int64_t t_ns) override {
    call_live = false;
    req->OnComplete(*this, r, t_ns);
  }

  ProxyRequest* req;
  Upstream* up;
  bool hedge;
  http::Timer first_byte_timer;
  UpstreamTransport::CallId call = 0;
  bool call_live = false;  // the transport may still call us
  bool live = false;       // counted in the upstream's in-flight
  int64_t t_send_ns = 0;
  int64_t t_end_ns = 0;  // when it stopped (for its span)
  int index = 0;         // 0: the first try
  telemetry::SpanId span_id;
  std::string failure;        // why it failed, for its span
  bool cancelled = false;     // another attempt won
  std::string server_timing;  // the upstream's Server-Timing header

  enum class Mode { kWaiting, kSse, kBuffered };
  Mode mode = Mode::kWaiting;
  int status = 0;
  std::string content_type;
  int retry_after_s = -1;
  std::string body;  // kBuffered
  SseSplitter splitter;
  std::string held;  // kSse before the commit
  int held_events = 0;
  // The held start (plan.hold): output events and what they said.
  int held_outputs = 0;
  api::CompletionResponse held_answer;
  bool broken = false;  // failed inside a callback; ignore the rest
  std::optional<api::ApiError> stream_error;
};

ProxyRequest::ProxyRequest(uint64_t id, Pool& pool, GatewayMetrics& metrics,
                           http::EventLoop& loop, ForwardPlan plan,
                           std::shared_ptr<http::ResponseWriter> writer,
                           DoneFn on_done)
    : id_(id),
      pool_(pool),
      metrics_(metrics),
      loop_(loop),
      plan_(std::move(plan)),
      writer_(std::move(writer)),
      on_done_(std::move(on_done)),
      deadline_ns_(plan_.t_received_ns + pool.spec().deadline_ms * kNsPerMs) {}

ProxyRequest::~ProxyRequest() {
  for (auto& a : attempts_) Stop(*a);
}

void ProxyRequest::Start() {
  const int64_t now = http::NowNs();
  pool_.budget().RecordRequest(now);
  const Pool::Pick pick = pool_.Choose(plan_.route, tried_, now);
  if (pick.upstream == nullptr) {
    api::ApiError e;
    if (pick.refusal == Pool::Refusal::kSaturated) {
      pool_.metrics().refused_saturated->Increment();
      e = api::ApiError::Overloaded(
          fmt::format("every upstream of pool '{}' is busy (at its "
                      "max-in-flight or asked to back off); retry later",
                      pool_.name()),
          pick.retry_after_s);
    } else {
      pool_.metrics().refused_unavailable->Increment();
      e = api::ApiError::Unavailable(
          fmt::format("no upstream of pool '{}' is available (down or "
                      "ejected)",
                      pool_.name()),
          pick.retry_after_s);
    }
    if (HandOverOnError()) return;
    RespondError(e);
    return;
  }
  Launch(*pick.upstream, false);
  const PoolSpec& spec = pool_.spec();
  int64_t hedge_ms = 0;
  if (spec.hedge == HedgeMode::kFixed) {
    hedge_ms = spec.hedge_after_ms;
  } else if (spec.hedge == HedgeMode::kP95) {
    const double p95 = pool_.ttft_window().Quantile(0.95);
    hedge_ms =
        p95 > 0 ? std::max<int64_t>(static_cast<int64_t>(p95),
                                    std::max<int64_t>(spec.hedge_after_ms, 1))
                : 0;
  }
  if (hedge_ms > 0 && !done_ && pool_.upstreams().size() > 1) {
    hedge_timer_ = std::make_unique<http::Timer>(loop_);
    hedge_timer_->ExpireAfter(hedge_ms * kNsPerMs, [this] { OnHedgeTimer(); });
  }
}

void ProxyRequest::Launch(Upstream& u, bool hedge) {
  const int64_t now = http::NowNs();
  attempts_.push_back(std::make_unique<Attempt>(this, &u, hedge, loop_));
  Attempt& a = *attempts_.back();
  a.index = static_cast<int>(attempts_.size()) - 1;
  tried_.push_back(&u);
  pool_.BeginAttempt(u, plan_.route.token_estimate);
  a.live = true;

  http::ClientRequest cr;
  cr.method = "POST";
  cr.target = u.root + "/v1/" + std::string(api::ApiPath(plan_.kind));
  if (plan_.trace) {
    a.span_id = plan_.trace->NewSpanId();
    cr.headers = plan_.trace->WithTraceparent(plan_.headers, a.span_id);
  } else {
    cr.headers = plan_.headers;
  }
  if (!u.spec.api_key.empty())
    cr.headers.push_back({"Authorization", "Bearer " + u.spec.api_key});
  cr.body = plan_.body;
  cr.total_timeout_ms = std::max<int64_t>((deadline_ns_ - now) / kNsPerMs, 1);
  cr.idle_timeout_ms = u.spec.idle_timeout_ms;
  if (u.spec.first_byte_timeout_ms > 0) {
    a.first_byte_timer.ExpireAfter(u.spec.first_byte_timeout_ms * kNsPerMs,
                                   [this, &a] { OnFirstByteTimeout(a); });
  }
  a.t_send_ns = http::NowNs();
  if (overhead_pre_ns_ < 0 && a.index == 0) {
    overhead_pre_ns_ = a.t_send_ns - plan_.t_received_ns;
    gateway_pre_ns_ = overhead_pre_ns_;
  }
  a.call_live = true;
  a.call = u.transport->Start(std::move(cr), &a);
}

void ProxyRequest::OnHeaders(Attempt& a, const http::ResponseHead& head,
                             int64_t t_ns) {
  if (a.broken || done_) return;
  a.status = head.status;
  a.content_type = head.content_type;
  a.retry_after_s = RetryAfterSeconds(head);
  for (const http::Header& h : head.headers) {
    if (EqualsIgnoreCase(h.name, "server-timing") && h.value.size() <= 1024) {
      a.server_timing = h.value;
      break;
    }
  }
  const bool ok = head.status >= 200 && head.status < 300;
  if (ok && plan_.stream &&
      head.content_type.starts_with("text/event-stream")) {
    a.mode = Attempt::Mode::kSse;
    return;
  }
  a.mode = Attempt::Mode::kBuffered;
  // A whole answer is on its way: the upstream is not stalled.
  a.first_byte_timer.Cancel();
  if (ok) {
    pool_.RecordFirstByte(*a.up, static_cast<double>(t_ns - a.t_send_ns) / 1e6,
                          t_ns);
  }
}

void ProxyRequest::OnBody(Attempt& a, std::string_view data, int64_t t_ns) {
  if (a.broken || done_) return;
  const int64_t max_bytes = pool_.spec().max_response_bytes;
  if (a.mode == Attempt::Mode::kBuffered || a.mode == Attempt::Mode::kWaiting) {
    if (static_cast<int64_t>(a.body.size() + data.size()) > max_bytes) {
      a.broken = true;
      Stop(a);
      Failed(
          a, Failure::kTooLarge,
          fmt::format("answer larger than max-response-bytes ({})", max_bytes));
      return;
    }
    a.body.append(data.data(), data.size());
    return;
  }
  if (a.call_live && committed_) {
    // Pass-through: whole events as they arrive.
    std::string out = a.splitter.TakeComplete(data);
    if (a.splitter.pending_bytes() > kMaxEventBytes)
      out += a.splitter.TakeRest();
    if (out.find("\"timings\"") != std::string::npos) {
      // The final chunk is among them: cut again to add the gateway's
      // share to it (once per request).
      std::string relayed;
      SseSplitter again;
      again.Feed(out,
                 [&](std::string_view raw) { AppendRelayed(raw, &relayed); });
      relayed += again.TakeRest();
      out = std::move(relayed);
    }
    if (!out.empty()) {
      writer_->Write(std::move(out));
      RecordOverhead(t_ns);
    }
    return;
  }
  // Before the commit: look at each event. After a commit inside this
  // loop, the remaining events are passed through in one write.
  std::string after_commit;
  a.splitter.Feed(data, [&](std::string_view raw) {
    if (a.broken || done_) return;
    if (committed_) {
      AppendRelayed(raw, &after_commit);
      return;
    }
    HoldEvent(a, raw, t_ns);
  });
  if (a.broken || done_) return;
  if (!committed_ && (a.held.size() > kMaxHeldBytes ||
                      a.splitter.pending_bytes() > kMaxEventBytes)) {
    if (holding()) {
      if (!Judge(a, t_ns)) return;
    } else {
      Commit(a, t_ns);
    }
  }
  if (committed_ && !after_commit.empty())
    writer_->Write(std::move(after_commit));
}

void ProxyRequest::HoldEvent(Attempt& a, std::string_view raw, int64_t t_ns) {
  // Decode the event's data lines (only events before the first token are
  // decoded; a handful per request).
  bool comment_only = true;
  std::string data;
  http::SseParser parser;
  auto take = [&](const http::SseEvent& e) {
    if (e.kind == http::SseEvent::Kind::kData) {
      comment_only = false;
      data.assign(e.data.data(), e.data.size());
    }
  };
  parser.Feed(raw, take);
  parser.Finish(take);
  if (comment_only) return;  // keep-alive pings are not forwarded early
  if (data == "[DONE]") {
    a.held.append(raw.data(), raw.size());
    if (holding()) {
      Judge(a, t_ns);
    } else {
      Commit(a, t_ns);
    }
    return;
  }
  api::StreamChunk chunk;
  const Status parsed = api::ParseStreamChunk(data, &chunk);
  if (parsed.ok() && chunk.error) {
    // The upstream gave up before producing anything: as good as a 5xx,
    // and retried like one.
    a.stream_error = chunk.error;
    a.broken = true;
    Stop(a);
    Failed(a, Failure::kStreamError,
           "error event before the first token: " + chunk.error->message);
    return;
  }
  AppendRelayed(raw, &a.held);
  ++a.held_events;
  const bool output = !parsed.ok() || !chunk.content.empty() ||
                      !chunk.reasoning.empty() || chunk.has_finish;
  if (!holding()) {
    if (output || a.held_events >= kMaxHeldEvents) Commit(a, t_ns);
    return;
  }
  if (output && a.held_outputs++ == 0) {
    // Tokens are coming: the upstream is not stalled, and a hedge would
    // only repeat this answer.
    a.first_byte_timer.Cancel();
    if (hedge_timer_) hedge_timer_->Cancel();
  }
  api::CompletionResponse& answer = a.held_answer;
  if (parsed.ok()) {
    answer.content += chunk.content;
    answer.token_logprobs.insert(answer.token_logprobs.end(),
                                 chunk.token_logprobs.begin(),
                                 chunk.token_logprobs.end());
    if (chunk.has_finish && answer.finish_reason.empty())
      answer.finish_reason = chunk.finish_reason;
  }
  if (!parsed.ok() || chunk.has_finish || a.held_outputs >= plan_.hold.tokens ||
      a.held.size() >= std::min(plan_.hold.max_bytes, kMaxHeldBytes) ||
      a.held_events >= kMaxHeldEvents + plan_.hold.tokens)
    Judge(a, t_ns);
}

void ProxyRequest::AppendRelayed(std::string_view raw, std::string* out) const {
  // Only the final chunk carries timings; every other event is copied
  // without decoding.
  if (raw.find("\"timings\"") != std::string_view::npos) {
    std::string data;
    bool only_data = true;
    http::SseParser parser;
    auto take = [&](const http::SseEvent& e) {
      if (e.kind != http::SseEvent::Kind::kData || !e.event_type.empty() ||
          !data.empty()) {
        only_data = false;
        return;
      }
      data.assign(e.data.data(), e.data.size());
    };
    parser.Feed(raw, take);
    parser.Finish(take);
    if (only_data && !data.empty()) {
      if (std::optional<std::string> with = api::AddGatewayTiming(
              data, static_cast<double>(gateway_pre_ns_) / 1e6)) {
        out->append(http::SseData(*with));
        return;
      }
    }
  }
  out->append(raw.data(), raw.size());
}

bool ProxyRequest::Judge(Attempt& a, int64_t t_ns) {
  const std::string reason =
      plan_.hold.judge ? plan_.hold.judge(a.held_answer) : std::string();
  if (reason.empty()) {
    Commit(a, t_ns);
    return true;
  }
  // Nothing reached the client: the attempt is dropped (the upstream did
  // nothing wrong) and the request is handed over.
  a.broken = true;
  pool_.RecordSuccess(*a.up);
  for (auto& x : attempts_) {
    if (x->live) x->cancelled = true;
    Stop(*x);
  }
  final_error_ = "escalated: " + reason;
  if (plan_.hold.on_escalate) plan_.hold.on_escalate(reason);
  Finish();
  return false;
}

void ProxyRequest::Commit(Attempt& a, int64_t t_event_ns) {
  committed_ = true;
  a.first_byte_timer.Cancel();
  if (hedge_timer_) hedge_timer_->Cancel();
  CancelOthers(a);
  if (a.hedge) pool_.metrics().hedges_won->Increment();
  const double ttft_ms = static_cast<double>(t_event_ns - a.t_send_ns) / 1e6;
  pool_.RecordFirstByte(*a.up, ttft_ms, t_event_ns);
  a.up->metrics.ttft->Observe(ttft_ms / 1e3);
  std::vector<http::Header> headers = ResponseHeaders(&a);
  headers.push_back({"Cache-Control", "no-cache"});
  headers.push_back({"X-Accel-Buffering", "no"});
  metrics_.CountResponse(pool_.name(), a.status);
  final_status_ = a.status;
  writer_->BeginStream(a.status, std::move(headers));
  if (!a.held.empty()) {
    writer_->Write(std::move(a.held));
    a.held.clear();
  }
  RecordOverhead(t_event_ns);
}

void ProxyRequest::OnComplete(Attempt& a, const http::TransportResult& r,
                              int64_t t_ns) {
  if (!a.live || done_) {
    Stop(a);
    return;
  }
  Failure f;
  if (FailureOfTransport(r.error, &f)) {
    Stop(a);
    if (committed_ && a.mode == Attempt::Mode::kSse) {
      StreamBroken(a, f, r.detail);
    } else {
      Failed(a, f, fmt::format("{}: {}", FailureName(f), r.detail));
    }
    return;
  }
  if (r.error == http::TransportError::kCancelled) {
    Stop(a);
    if (!committed_) Failed(a, Failure::kReset, "cancelled");
    return;
  }
  const int64_t e2e_ns = t_ns - a.t_send_ns;
  if (a.mode == Attempt::Mode::kSse) {
    Stop(a);
    if (!committed_) {
      if (a.broken) return;
      // Ended before any output (e.g. only a role chunk) or inside the
      // held start: forward it as is, or hand it over.
      a.held += a.splitter.TakeRest();
      if (holding()) {
        if (!Judge(a, t_ns)) return;
      } else {
        Commit(a, t_ns);
      }
    } else {
      std::string rest = a.splitter.TakeRest();
      if (!rest.empty()) writer_->Write(std::move(rest));
    }
    pool_.RecordSuccess(*a.up);
    a.up->metrics.e2e->Observe(static_cast<double>(e2e_ns) / 1e9);
    writer_->End();
    Finish();
    return;
  }
  Stop(a);
  const int s = a.status;
  if (s == 429 || (s == 503 && a.retry_after_s >= 0)) {
    const int64_t ms =
        std::min<int64_t>(std::max(a.retry_after_s, 1) * int64_t{1000},
                          pool_.spec().health.max_ejection_ms);
    pool_.RecordBackoff(*a.up, ms, t_ns);
    Failed(a, Failure::kBusy, fmt::format("answered {}", s));
    return;
  }
  if (s >= 500) {
    Failed(a, Failure::kHttp5xx, fmt::format("answered {}", s));
    return;
  }
  // 2xx, or the client's own error (4xx): the answer stands.
  pool_.RecordSuccess(*a.up);
  if (s >= 200 && s < 300)
    a.up->metrics.e2e->Observe(static_cast<double>(e2e_ns) / 1e9);
  RespondBuffered(a);
  RecordOverhead(t_ns);
  Finish();
}

void ProxyRequest::OnFirstByteTimeout(Attempt& a) {
  if (!a.live || done_ || committed_) return;
  a.broken = true;
  Stop(a);
  Failed(a, Failure::kFirstByteTimeout,
         fmt::format("no first byte within {} ms",
                     a.up->spec.first_byte_timeout_ms));
}

void ProxyRequest::OnHedgeTimer() {
  if (done_ || committed_ || hedged_ || LiveAttempts() != 1) return;
  const int64_t now = http::NowNs();
  if (now >= deadline_ns_) return;
  const Pool::Pick pick = pool_.Choose(plan_.route, tried_, now);
  if (pick.upstream == nullptr) return;
  if (!pool_.budget().TryAcquire(now)) {
    pool_.metrics().retries_denied->Increment();
    return;
  }
  hedged_ = true;
  pool_.metrics().hedges->Increment();
  Launch(*pick.upstream, true);
}

void ProxyRequest::Stop(Attempt& a) {
  a.first_byte_timer.Cancel();
  if (a.t_end_ns == 0) a.t_end_ns = http::NowNs();
  if (a.call_live) {
    a.call_live = false;
    a.up->transport->Cancel(a.call);
  }
  if (a.live) {
    a.live = false;
    pool_.EndAttempt(*a.up, plan_.route.token_estimate);
  }
}

void ProxyRequest::Failed(Attempt& a, Failure f, std::string detail) {
  const int64_t now = http::NowNs();
  pool_.RecordFailure(*a.up, f, now);
  a.failure = detail;
  last_failure_ = f;
  last_detail_ = std::move(detail);
  last_upstream_ = a.up->spec.name;
  if (a.mode == Attempt::Mode::kBuffered && a.status > 0 &&
      (f == Failure::kHttp5xx || f == Failure::kBusy)) {
    last_status_ = a.status;
    last_body_ = std::move(a.body);
    last_content_type_ = a.content_type;
    last_retry_after_s_ = a.retry_after_s;
  } else {
    last_status_ = 0;
  }
  if (done_ || committed_) return;
  if (LiveAttempts() > 0) return;  // a hedge is still running
  if (Retryable(f) && retries_ < pool_.spec().retries && now < deadline_ns_) {
    const Pool::Pick pick = pool_.Choose(plan_.route, tried_, now);
    if (pick.upstream != nullptr) {
      if (pool_.budget().TryAcquire(now)) {
        ++retries_;
        pool_.metrics().retries[static_cast<int>(f)]->Increment();
        Launch(*pick.upstream, false);
        return;
      }
      pool_.metrics().retries_denied->Increment();
    }
  }
  RespondFinalError();
}

void ProxyRequest::StreamBroken(Attempt& a, Failure f,
                                const std::string& detail) {
  pool_.RecordFailure(*a.up, f, http::NowNs());
  a.up->metrics.stream_errors->Increment();
  api::ApiError e =
      f == Failure::kDeadline
          ? api::ApiError::Timeout("the request's deadline passed mid-stream")
          : UpstreamError(fmt::format(
                "upstream '{}' failed mid-stream ({}: {}); the output so far "
                "is incomplete",
                a.up->spec.name, FailureName(f), detail));
  a.failure = e.message;
  final_error_ = e.message;
  // The partial event (if any) is dropped: the client's parser sees whole
  // events, then the error, then the end.
  a.splitter.TakeRest();
  writer_->Write(http::SseData(api::BuildErrorBody(e)));
  writer_->End();
  Finish();
}

void ProxyRequest::RespondBuffered(Attempt& a) {
  CancelOthers(a);
  if (a.hedge) pool_.metrics().hedges_won->Increment();
  std::vector<http::Header> headers = ResponseHeaders(&a);
  if (a.retry_after_s >= 0 && (a.status == 429 || a.status == 503))
    headers.push_back({"Retry-After", std::to_string(a.retry_after_s)});
  metrics_.CountResponse(pool_.name(), a.status);
  final_status_ = a.status;
  writer_->Respond(a.status, std::move(headers), std::move(a.body));
}

bool ProxyRequest::HandOverOnError() {
  if (!holding() || committed_ || done_ || !plan_.hold.on_escalate)
    return false;
  for (auto& a : attempts_) Stop(*a);
  final_error_ = "escalated: error";
  plan_.hold.on_escalate("error");
  Finish();
  return true;
}

void ProxyRequest::RespondFinalError() {
  if (HandOverOnError()) return;
  if (last_status_ > 0) {
    // The upstream's own answer (its 5xx or 429 body) says more than ours.
    std::vector<http::Header> headers = ResponseHeaders(nullptr);
    headers.push_back({"Content-Type", last_content_type_.empty()
                                           ? std::string("application/json")
                                           : last_content_type_});
    headers.push_back({"X-Gateway-Upstream", last_upstream_});
    if (last_retry_after_s_ >= 0)
      headers.push_back({"Retry-After", std::to_string(last_retry_after_s_)});
    metrics_.CountResponse(pool_.name(), last_status_);
    final_status_ = last_status_;
    final_error_ =
        fmt::format("upstream '{}' answered {}", last_upstream_, last_status_);
    writer_->Respond(last_status_, std::move(headers), std::move(last_body_));
    Finish();
    return;
  }
  const Failure f = last_failure_.value_or(Failure::kConnect);
  const std::string tries =
      retries_ > 0 ? fmt::format(" after {} retries", retries_) : "";
  if (IsTimeout(f)) {
    RespondError(api::ApiError::Timeout(fmt::format(
        "upstream '{}' timed out{}: {}", last_upstream_, tries, last_detail_)));
  } else {
    RespondError(UpstreamError(fmt::format(
        "upstream '{}' failed{}: {}", last_upstream_, tries, last_detail_)));
  }
}

void ProxyRequest::RespondError(const api::ApiError& e) {
  std::vector<http::Header> headers = ResponseHeaders(nullptr);
  headers.push_back({"Content-Type", "application/json"});
  if (e.retry_after_s > 0)
    headers.push_back({"Retry-After", std::to_string(e.retry_after_s)});
  metrics_.CountResponse(pool_.name(), e.http_status);
  final_status_ = e.http_status;
  if (e.http_status >= 500) final_error_ = e.message;
  writer_->Respond(e.http_status, std::move(headers), api::BuildErrorBody(e));
  Finish();
}

void ProxyRequest::ClientGone() {
  if (done_) return;
  pool_.metrics().cancelled->Increment();
  // Not an answer anyone saw; nginx's 499 keeps the counts adding up.
  if (!committed_) metrics_.CountResponse(pool_.name(), 499);
  final_error_ = "cancelled: the client went away";
  for (auto& a : attempts_) {
    if (a->live) a->cancelled = true;
    Stop(*a);
  }
  Finish();
}

void ProxyRequest::Abort(const std::string& why) {
  if (done_) return;
  for (auto& a : attempts_) Stop(*a);
  if (committed_) {
    final_error_ = why;
    writer_->Write(
        http::SseData(api::BuildErrorBody(api::ApiError::Unavailable(why))));
    writer_->End();
    Finish();
    return;
  }
  RespondError(api::ApiError::Unavailable(why));
}

void ProxyRequest::CancelOthers(const Attempt& winner) {
  for (auto& a : attempts_) {
    if (a.get() == &winner) continue;
    if (a->live) a->cancelled = true;
    Stop(*a);
  }
}

int ProxyRequest::LiveAttempts() const {
  int n = 0;
  for (const auto& a : attempts_) n += a->live ? 1 : 0;
  return n;
}

std::vector<http::Header> ProxyRequest::ResponseHeaders(
    const Attempt* a) const {
  std::vector<http::Header> h;
  if (a != nullptr) {
    h.push_back({"Content-Type", a->content_type.empty()
                                     ? std::string("application/json")
                                     : a->content_type});
    h.push_back({"X-Gateway-Upstream", a->up->spec.name});
  }
  // The gateway's share (arrival -> first attempt sent) after what the
  // upstream measured, so a client can split its E2E.
  h.push_back(
      {"Server-Timing",
       api::AppendServerTiming(a != nullptr ? a->server_timing : "", "gateway",
                               static_cast<double>(gateway_pre_ns_) / 1e6)});
  if (!plan_.request_id.empty())
    h.push_back({"X-Request-Id", plan_.request_id});
  return h;
}

void ProxyRequest::RecordOverhead(int64_t t_event_ns) {
  if (overhead_pre_ns_ < 0) return;
  const int64_t post = std::max<int64_t>(http::NowNs() - t_event_ns, 0);
  const double seconds = static_cast<double>(overhead_pre_ns_ + post) / 1e9;
  pool_.metrics().overhead->Observe(seconds);
  if (plan_.extra_overhead != nullptr) plan_.extra_overhead->Observe(seconds);
  overhead_pre_ns_ = -1;  // once per request
}

void ProxyRequest::RecordTrace() {
  GatewayTrace& t = *plan_.trace;
  for (const auto& a : attempts_) {
    std::vector<telemetry::Attribute> attrs{
        {"redline.upstream", a->up->spec.name},
        {"server.address", a->up->root},
        {"http.request.method", std::string("POST")},
        {"redline.attempt.index", static_cast<int64_t>(a->index)},
        {"redline.attempt.kind", std::string(a->hedge       ? "hedge"
                                             : a->index > 0 ? "retry"
                                                            : "first")},
        {"redline.attempt.outcome", std::string(!a->failure.empty() ? "failed"
                                                : a->cancelled ? "cancelled"
                                                               : "answered")}};
    if (a->status > 0)
      attrs.push_back(
          {"http.response.status_code", static_cast<int64_t>(a->status)});
    if (!a->failure.empty()) attrs.push_back({"error.type", a->failure});
    t.AddAttemptSpan(a->span_id, "upstream " + a->up->spec.name, a->t_send_ns,
                     a->t_end_ns > 0 ? a->t_end_ns : http::NowNs(),
                     std::move(attrs), !a->failure.empty(), a->failure);
  }
  t.SetAttribute("redline.pool", pool_.name());
  t.SetAttribute("redline.retries", static_cast<int64_t>(retries_));
  if (hedged_) t.SetAttribute("redline.hedged", true);
  t.MarkEnd(http::NowNs(), final_status_, final_error_);
}

void ProxyRequest::Finish() {
  if (done_) return;
  done_ = true;
  if (plan_.trace) RecordTrace();
  if (hedge_timer_) hedge_timer_->Cancel();
  for (auto& a : attempts_) a->first_byte_timer.Cancel();
  on_done_(id_);
}

}  // namespace redline::gateway
