// ProxyRequest: one client request on its way through the gateway — the
// attempts on upstreams (first try, retries, a hedge), and what reaches the
// client.
//
// The rule that keeps retries safe: nothing reaches the client before the
// winning attempt "commits". A stream commits at its first event that
// carries output (text, reasoning, a finish reason) or [DONE]; events
// before it (the role chunk, keep-alive comments) are held (bounded) and
// comments dropped. A non-streamed answer commits when it is complete. So a
// replica that dies after admitting a request but before its first token
// costs the client nothing but time: the request is retried elsewhere.
// After the commit the upstream's bytes are passed through verbatim, cut at
// event boundaries; if the upstream then fails, the client gets one
// in-stream error event (the OpenAI error object, as redline serve sends)
// and the stream ends cleanly. Counted in stream_errors_total.
//
// Held start (streamed escalation, ForwardPlan::hold): the commit waits
// further, until the stream's first `tokens` output events (or
// `max_bytes` of events, or its finish reason, or its end) are held; then
// `judge` reads what was held as an answer and either the held events are
// released (the commit) or nothing is sent and `on_escalate` hands the
// request over (the gateway asks another model). A failure while holding
// is a failure before the commit: retried as usual, and when nothing is
// left to try handed over with the reason "error" instead of answered.
//
// Hedging: when the pool sets hedge_after and no attempt has committed by
// then, a second attempt goes to another upstream; the first to commit wins
// and the other is cancelled at once.
//
// Threading: loop thread only. Ownership: the gateway owns each
// ProxyRequest until done() and then destroys it from a posted task (never
// from inside one of its callbacks). Attempts live as long as the request
// (at most retries + 2 of them), so a callback never outlives its object.
#ifndef REDLINE_GATEWAY_PROXY_REQUEST_H_
#define REDLINE_GATEWAY_PROXY_REQUEST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/error.h"
#include "api/response.h"
#include "api/types.h"
#include "gateway/failure.h"
#include "gateway/gateway_metrics.h"
#include "gateway/gateway_trace.h"
#include "gateway/pool.h"
#include "gateway/routing_key.h"
#include "http/client.h"
#include "http/event_loop.h"
#include "http/server.h"

namespace redline::gateway {

// What the route learned from the request and what to send upstream.
struct ForwardPlan {
  api::ApiKind kind = api::ApiKind::kChat;
  bool stream = false;
  RouteRequest route;
  std::string body;                   // as the upstream gets it
  std::vector<http::Header> headers;  // forwarded end-to-end headers
  std::string request_id;             // echoed as X-Request-Id
  int64_t t_received_ns = 0;
  // The request's trace (null when tracing is off); every attempt adds its
  // client span and sends its own traceparent.
  std::shared_ptr<GatewayTrace> trace;
  // Also receives the request's overhead (the cache's per-verdict
  // histogram); null: only the pool's.
  telemetry::Histogram* extra_overhead = nullptr;
  // Streamed escalation; off when tokens is 0 or the request is not
  // streamed.
  struct Hold {
    int tokens = 0;  // output events held before the judge reads them
    size_t max_bytes = 16 * 1024;  // of held events (at most 64 KiB)
    // "" releases the held events; else the reason to hand over. Reads
    // content, finish_reason and token_logprobs.
    std::function<std::string(const api::CompletionResponse&)> judge;
    // Runs once, synchronously, when the judge said hand over; nothing was
    // sent to the writer and nothing will be. It must not start or end
    // requests before returning (post them).
    std::function<void(const std::string& reason)> on_escalate;
  } hold;
};

class ProxyRequest {
 public:
  using DoneFn = std::function<void(uint64_t id)>;

  // `on_done` runs once when the request is finished (the gateway then
  // schedules its destruction).
  ProxyRequest(uint64_t id, Pool& pool, GatewayMetrics& metrics,
               http::EventLoop& loop, ForwardPlan plan,
               std::shared_ptr<http::ResponseWriter> writer, DoneFn on_done);
  ~ProxyRequest();
  ProxyRequest(const ProxyRequest&) = delete;
  ProxyRequest& operator=(const ProxyRequest&) = delete;

  void Start();
  // The client went away: cancels every attempt now.
  void ClientGone();
  // Shutdown past its grace: ends the request with a 503 (or an in-stream
  // error once committed).
  void Abort(const std::string& why);
  bool done() const { return done_; }

 private:
  class Attempt;
  friend class Attempt;

  // Starts an attempt on `u`.
  void Launch(Upstream& u, bool hedge);
  void OnHeaders(Attempt& a, const http::ResponseHead& head, int64_t t_ns);
  void OnBody(Attempt& a, std::string_view data, int64_t t_ns);
  void OnComplete(Attempt& a, const http::TransportResult& r, int64_t t_ns);
  void OnFirstByteTimeout(Attempt& a);
  void OnHedgeTimer();

  // Classifies one held event of an uncommitted stream; may commit or fail.
  void HoldEvent(Attempt& a, std::string_view raw, int64_t t_ns);
  // Appends one SSE event as the client gets it: a chunk carrying the
  // server's timings gets the gateway's share added ("gateway_ms"), all
  // else verbatim. Cost: a scan of the event; a parse only for that chunk.
  void AppendRelayed(std::string_view raw, std::string* out) const;
  bool holding() const { return plan_.hold.tokens > 0 && plan_.stream; }
  // The held start's decision: commits (true) or hands over (false).
  bool Judge(Attempt& a, int64_t t_ns);
  // A held request that would end with an error (nothing left to try) is
  // handed over instead ("error", as a non-streamed light error answer).
  bool HandOverOnError();
  void Commit(Attempt& a, int64_t t_event_ns);
  // Ends the attempt (bookkeeping, call cancelled when still live).
  void Stop(Attempt& a);
  void Failed(Attempt& a, Failure f, std::string detail);
  void StreamBroken(Attempt& a, Failure f, const std::string& detail);
  void RespondBuffered(Attempt& a);
  void RespondFinalError();
  void RespondError(const api::ApiError& e);
  void CancelOthers(const Attempt& winner);
  int LiveAttempts() const;
  std::vector<http::Header> ResponseHeaders(const Attempt* a) const;
  void RecordOverhead(int64_t t_event_ns);
  // The attempts' client spans and the root's end, once, at Finish.
  void RecordTrace();
  void Finish();

  const uint64_t id_;
  Pool& pool_;
  GatewayMetrics& metrics_;
  http::EventLoop& loop_;
  ForwardPlan plan_;
  std::shared_ptr<http::ResponseWriter> writer_;
  DoneFn on_done_;
  int64_t deadline_ns_;
  std::vector<std::unique_ptr<Attempt>> attempts_;
  std::vector<const Upstream*> tried_;
  std::unique_ptr<http::Timer> hedge_timer_;
  int retries_ = 0;
  bool hedged_ = false;
  bool committed_ = false;
  bool done_ = false;
  int64_t overhead_pre_ns_ = -1;
  // Arrival -> first attempt sent: the gateway's share in Server-Timing.
  int64_t gateway_pre_ns_ = 0;
  // What the client got (0: nothing, it went away) and, for a failure, why.
  int final_status_ = 0;
  std::string final_error_;
  // The last failed attempt: its class, detail and (for HTTP answers) the
  // answer, which is what the client gets when nothing is left to try.
  std::optional<Failure> last_failure_;
  std::string last_detail_;
  std::string last_upstream_;
  int last_status_ = 0;
  std::string last_body_;
  std::string last_content_type_;
  int last_retry_after_s_ = 0;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_PROXY_REQUEST_H_
