// The HTTP encoders of an InferenceSession: SseEncoder streams
// chat.completion.chunk / text_completion events as server-sent events;
// JsonEncoder collects the choices and answers one JSON body. Both only
// frame what the session produces with the api codec; neither knows the
// engine.
//
// Threading: the event-loop thread (as the session). Ownership: each holds
// a shared ResponseWriter, which stays valid (as a no-op) after the client
// is gone.
#ifndef REDLINE_SERVER_HTTP_ENCODERS_H_
#define REDLINE_SERVER_HTTP_ENCODERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/response.h"
#include "http/server.h"
#include "server/server_metrics.h"
#include "server/session.h"

namespace redline::server {

struct EncoderOptions {
  api::ApiKind kind = api::ApiKind::kChat;
  std::string request_id;  // X-Request-Id echo; empty for none
  bool include_usage = false;
  bool continuous_usage = false;
  int64_t ping_interval_ns = 10'000'000'000;
  // Counts the HTTP status of the answer (once).
  std::function<void(int status)> count_status;
};

// Headers go out at admission, so clients and proxies see a live stream
// during queueing and prefill; after them an error can only be an in-stream
// error event followed by the end of the stream.
class SseEncoder : public SessionSink {
 public:
  SseEncoder(std::shared_ptr<http::ResponseWriter> writer, EncoderOptions o);

  void OnAdmitted(const api::ResponseIdentity& id, int choices) override;
  void OnDelta(int index, std::string text,
               std::vector<api::LogprobEntry> logprobs,
               const api::Usage& so_far) override;
  void OnFinish(int index, std::string_view finish_reason,
                const api::Usage& so_far) override;
  void OnComplete(const api::Usage& usage,
                  const api::ServerTimings& timings) override;
  void OnError(const api::ApiError& error) override;
  // Sends an SSE comment when the stream has been silent for the interval.
  void OnTick(int64_t now_ns) override;

 private:
  void Send(std::string data);
  // Sends the held finish chunk, with `timings` when given.
  void FlushFinish(const api::ServerTimings* timings);

  std::shared_ptr<http::ResponseWriter> writer_;
  const EncoderOptions o_;
  api::ResponseIdentity id_;
  std::optional<api::ChunkChoice> pending_finish_;
  api::Usage pending_usage_;
  bool ended_ = false;
  int64_t last_write_ns_ = 0;
};

class JsonEncoder : public SessionSink {
 public:
  JsonEncoder(std::shared_ptr<http::ResponseWriter> writer, EncoderOptions o);

  void OnAdmitted(const api::ResponseIdentity& id, int choices) override;
  void OnDelta(int index, std::string text,
               std::vector<api::LogprobEntry> logprobs,
               const api::Usage& so_far) override;
  void OnFinish(int index, std::string_view finish_reason,
                const api::Usage& so_far) override;
  void OnComplete(const api::Usage& usage,
                  const api::ServerTimings& timings) override;
  void OnError(const api::ApiError& error) override;

  // With logprobs requested, "logprobs" is an object even when empty.
  void set_with_logprobs(bool with) { with_logprobs_ = with; }

 private:
  std::shared_ptr<http::ResponseWriter> writer_;
  const EncoderOptions o_;
  api::ResponseIdentity id_;
  std::vector<api::FinalChoice> choices_;
  bool with_logprobs_ = false;
  bool answered_ = false;
};

// Headers of an error answer: Content-Type, X-Request-Id, Retry-After and
// WWW-Authenticate as the error needs.
std::vector<http::Header> ErrorHeaders(const api::ApiError& error,
                                       const std::string& request_id);

}  // namespace redline::server

#endif  // REDLINE_SERVER_HTTP_ENCODERS_H_
