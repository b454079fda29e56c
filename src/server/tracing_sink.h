// TracingSink: a SessionSink decorator that adds a request's engine-side
// spans (queue wait, prefill, decode) and its GenAI semantic-convention
// attributes to the request's trace, forwards every event unchanged to the
// transport's sink, and hands the trace to the Tracer when the session ends
// (completed, failed, or destroyed after admission without either: the
// client went away).
//
// Span times come from the engine's RequestTimings, which are measured from
// the request's arrival; `arrival_unix_ns` anchors them on the wall clock.
// The prefill span has one child per prefill chunk (forward pass), with the
// chunk's tokens and the pass's batch size; the decode span carries the
// slot and the batch sizes of the request's steps. A `respond` span runs
// from the first text handed to the transport to the end: for a stream, the
// time it was being written.
//
// Threading and ownership: as the wrapped sink (the session's thread); owns
// the inner sink, shares the trace with the request's other stages, borrows
// the Tracer (it must outlive the session).
#ifndef REDLINE_SERVER_TRACING_SINK_H_
#define REDLINE_SERVER_TRACING_SINK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/session.h"
#include "telemetry/request_trace.h"
#include "telemetry/tracer.h"

namespace redline::server {

class TracingSink : public SessionSink {
 public:
  TracingSink(std::unique_ptr<SessionSink> inner,
              std::shared_ptr<telemetry::RequestTrace> trace,
              telemetry::Tracer* tracer, int64_t arrival_unix_ns);
  ~TracingSink() override;

  void OnAdmitted(const api::ResponseIdentity& id, int choices) override;
  void OnDelta(int index, std::string text,
               std::vector<api::LogprobEntry> logprobs,
               const api::Usage& so_far) override;
  void OnFinish(int index, std::string_view finish_reason,
                const api::Usage& so_far) override;
  void OnComplete(const api::Usage& usage,
                  const api::ServerTimings& timings) override;
  void OnError(const api::ApiError& error) override;
  void OnTick(int64_t now_ns) override { inner_->OnTick(now_ns); }
  void OnEngineTimings(
      std::span<const engine::RequestTimings> per_choice) override;

 private:
  void End(bool error, std::string message);

  std::unique_ptr<SessionSink> inner_;
  std::shared_ptr<telemetry::RequestTrace> trace_;
  telemetry::Tracer* tracer_;
  const int64_t arrival_unix_ns_;
  std::string finish_reasons_;
  // Choice 0's engine record (slot, prefill chunks, batch sizes), and the
  // slots of every choice.
  engine::RequestTimings engine_timings_;
  std::vector<int64_t> slots_;
  int64_t first_delta_unix_ns_ = 0;  // the first text handed to the transport
  bool admitted_ = false;
  bool ended_ = false;
};

// Ends `trace` as an error answered before a session started (a refusal:
// 4xx/5xx with `error`) and hands it to `tracer`.
void FinishRefusedTrace(telemetry::Tracer* tracer,
                        std::shared_ptr<telemetry::RequestTrace> trace,
                        const api::ApiError& error);

}  // namespace redline::server

#endif  // REDLINE_SERVER_TRACING_SINK_H_
