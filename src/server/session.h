// InferenceSession: one completion request from a parsed api request to its
// last event, independent of the transport. It applies the server's policy
// (n against the slots, sampling defaults), renders the chat template,
// tokenizes, submits every choice to the model's engine at once, and turns
// the engine's per-choice events into typed events for a SessionSink: text
// deltas with logprobs, finish reasons, usage, timings, or one error.
// Deadlines travel with the engine requests; Cancel() (the client went away)
// stops every choice within one engine step. Metrics are recorded here, so
// every transport counts the same way.
//
// An HTTP front end pairs it with an SSE or JSON encoder (sse_encoder.h,
// json_encoder.h); a gRPC endpoint or an in-process caller adds only a sink.
//
// Threading: Start, Drain, Cancel and the sink callbacks run on one thread
// (the transport's, e.g. the HTTP event loop). The engine thread only calls
// the `notify` function given to Start, which must hop to that thread and
// call Drain there.
//
// Ownership: borrows the ServedModel (must outlive the session); owns the
// sink.
#ifndef REDLINE_SERVER_SESSION_H_
#define REDLINE_SERVER_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/error.h"
#include "api/request.h"
#include "api/types.h"
#include "engine/request.h"
#include "server/error_class.h"
#include "server/served_model.h"

namespace redline::server {

// Receives a session's events, in order: OnAdmitted once, then per choice any
// number of OnDelta and one OnFinish, then exactly one of OnComplete (every
// choice finished) or OnError (the session failed; no more events).
class SessionSink {
 public:
  virtual ~SessionSink() = default;
  virtual void OnAdmitted(const api::ResponseIdentity& id, int choices) = 0;
  // Text (possibly empty when only logprobs are new) of choice `index`;
  // `so_far` counts the prompt and that choice's tokens so far.
  virtual void OnDelta(int index, std::string text,
                       std::vector<api::LogprobEntry> logprobs,
                       const api::Usage& so_far) = 0;
  virtual void OnFinish(int index, std::string_view finish_reason,
                        const api::Usage& so_far) = 0;
  virtual void OnComplete(const api::Usage& usage,
                          const api::ServerTimings& timings) = 0;
  virtual void OnError(const api::ApiError& error) = 0;
  // Called on the transport's periodic tick (keep-alive pings).
  virtual void OnTick(int64_t /*now_ns*/) {}
  // Just before OnComplete: what each choice went through in the engine
  // (slot, prefill chunks, batch sizes), for tracing. [choices]
  virtual void OnEngineTimings(
      std::span<const engine::RequestTimings> /*per_choice*/) {}
};

struct SessionOptions {
  int max_n = 8;  // further bounded by the model's slots
  SamplingDefaults defaults;
  double request_timeout_s = 0;  // 0: no deadline
};

// The request's sampling fields over the server's defaults (unset fields
// take the default; max_tokens unset stays -1 for chat, 16 for
// completions). Ranges are not checked here: SamplingParams::Validate and
// the engine's admission do that.
model::SamplingParams ResolveSampling(const api::CompletionRequest& request,
                                      const SamplingDefaults& defaults);

// A request checked, rendered and tokenized: what Start submits.
struct PreparedRequest {
  api::ApiKind kind = api::ApiKind::kChat;
  int n = 1;
  model::SamplingParams sampling;
  std::vector<int32_t> prompt;
  bool speculative = true;  // false: the request opted out
};

class InferenceSession {
 public:
  // Applies the policy (n, sampling defaults and ranges), refuses a prompt
  // whose byte length cannot fit the context before any tokenizing, then
  // renders and tokenizes. Thread-safe (reads only the model's immutable
  // parts), so a worker runs it off the event loop; cost grows with the
  // request. False with *refusal set when the request is refused.
  static bool Prepare(const ServedModel& model, api::CompletionRequest request,
                      const SessionOptions& options, PreparedRequest* out,
                      api::ApiError* refusal);

  // Submits every choice to the model's engine at once (all or none). On
  // refusal returns nullptr and sets *refusal (nothing reached the sink).
  // `arrival_ns` is NowNs() when the request was received. Transport thread.
  static std::unique_ptr<InferenceSession> Start(
      ServedModel& model, PreparedRequest request,
      const SessionOptions& options, int64_t arrival_ns,
      std::unique_ptr<SessionSink> sink, std::function<void()> notify,
      api::ApiError* refusal);

  ~InferenceSession();

  // Pops every queued engine event and hands what it produces to the sink.
  void Drain();
  // The client went away: cancel every choice; the session then ends with
  // a cancellation (counted, not sent).
  void Cancel();
  bool done() const { return done_; }
  SessionSink& sink() { return *sink_; }
  ServedModel& model() { return model_; }

 private:
  struct Choice {
    std::shared_ptr<engine::RequestStream> stream;
    bool done = false;
    model::FinishReason finish = model::FinishReason::kNone;
    int64_t completion_tokens = 0;
    int64_t cached_tokens = 0;
    int64_t last_content_ns = 0;
    engine::RequestTimings timings;
  };

  InferenceSession(ServedModel& model, std::unique_ptr<SessionSink> sink);
  void OnEvent(size_t index, engine::RequestEvent& event);
  void Fail(const Status& status);
  void Finish();
  void RecordSuccess(int64_t now_ns);
  api::Usage UsageOf(const Choice& c) const;
  std::vector<api::LogprobEntry> Logprobs(
      const model::SampleLogprobs& lp) const;

  ServedModel& model_;
  std::unique_ptr<SessionSink> sink_;
  std::vector<Choice> choices_;
  bool with_logprobs_ = false;
  StartKind start_ = StartKind::kWarm;
  int64_t arrival_ns_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t first_content_ns_ = 0;
  bool failed_ = false;     // an error was sent, or the client left
  bool cancelled_ = false;  // the client left
  bool done_ = false;
};

}  // namespace redline::server

#endif  // REDLINE_SERVER_SESSION_H_
