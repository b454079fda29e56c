#include "server/http_encoders.h"

#include "api/server_timing.h"
#include "http/event_loop.h"
#include "http/sse.h"

namespace redline::server {

std::vector<http::Header> ErrorHeaders(const api::ApiError& error,
                                       const std::string& request_id) {
  std::vector<http::Header> h{{"Content-Type", "application/json"}};
  if (!request_id.empty()) h.push_back({"X-Request-Id", request_id});
  if (error.retry_after_s > 0)
    h.push_back({"Retry-After", std::to_string(error.retry_after_s)});
  if (error.http_status == 401) h.push_back({"WWW-Authenticate", "Bearer"});
  return h;
}

SseEncoder::SseEncoder(std::shared_ptr<http::ResponseWriter> writer,
                       EncoderOptions o)
    : writer_(std::move(writer)), o_(std::move(o)) {}

void SseEncoder::Send(std::string data) {
  if (ended_ || data.empty()) return;
  writer_->Write(std::move(data));
  last_write_ns_ = http::NowNs();
}

void SseEncoder::OnAdmitted(const api::ResponseIdentity& id, int choices) {
  id_ = id;
  std::vector<http::Header> h{{"Content-Type", "text/event-stream"},
                              {"Cache-Control", "no-cache"},
                              {"X-Accel-Buffering", "no"}};
  if (!o_.request_id.empty()) h.push_back({"X-Request-Id", o_.request_id});
  writer_->BeginStream(200, std::move(h));
  if (o_.count_status) o_.count_status(200);
  last_write_ns_ = http::NowNs();
  if (o_.kind != api::ApiKind::kChat) return;
  std::vector<api::ChunkChoice> roles(static_cast<size_t>(choices));
  for (int i = 0; i < choices; ++i) {
    roles[i].index = i;
    roles[i].role = true;
  }
  Send(http::SseData(api::BuildChunk(o_.kind, id_, roles)));
}

void SseEncoder::OnDelta(int index, std::string text,
                         std::vector<api::LogprobEntry> logprobs,
                         const api::Usage& so_far) {
  FlushFinish(nullptr);
  api::ChunkChoice c;
  c.index = index;
  c.text = std::move(text);
  c.logprobs = std::move(logprobs);
  Send(http::SseData(api::BuildChunk(o_.kind, id_, {c},
                                     o_.continuous_usage ? &so_far : nullptr)));
}

void SseEncoder::OnFinish(int index, std::string_view finish_reason,
                          const api::Usage& so_far) {
  FlushFinish(nullptr);
  // Held until the next event: when it is the last choice's, it goes out in
  // OnComplete carrying the timings.
  api::ChunkChoice c;
  c.index = index;
  if (o_.kind == api::ApiKind::kCompletions) c.text = std::string();
  c.finish_reason = std::string(finish_reason);
  pending_finish_ = std::move(c);
  pending_usage_ = so_far;
}

void SseEncoder::FlushFinish(const api::ServerTimings* timings) {
  if (!pending_finish_) return;
  api::ChunkChoice c = std::move(*pending_finish_);
  pending_finish_.reset();
  Send(http::SseData(api::BuildChunk(
      o_.kind, id_, {c}, o_.continuous_usage ? &pending_usage_ : nullptr,
      timings)));
}

void SseEncoder::OnComplete(const api::Usage& usage,
                            const api::ServerTimings& timings) {
  // The last finish chunk carries the server's time breakdown (as
  // llama.cpp's server sends "timings"), so clients that read every chunk's
  // choices[0] see nothing unusual.
  FlushFinish(&timings);
  std::string out;
  if (o_.include_usage)
    out += http::SseData(api::BuildChunk(o_.kind, id_, {}, &usage));
  out += http::SseData("[DONE]");
  Send(std::move(out));
  ended_ = true;
  writer_->End();
}

void SseEncoder::OnError(const api::ApiError& error) {
  FlushFinish(nullptr);
  Send(http::SseData(api::BuildErrorBody(error)));
  ended_ = true;
  writer_->End();
}

void SseEncoder::OnTick(int64_t now_ns) {
  if (ended_ || now_ns - last_write_ns_ < o_.ping_interval_ns) return;
  Send(http::SseComment("ping"));
}

JsonEncoder::JsonEncoder(std::shared_ptr<http::ResponseWriter> writer,
                         EncoderOptions o)
    : writer_(std::move(writer)), o_(std::move(o)) {}

void JsonEncoder::OnAdmitted(const api::ResponseIdentity& id, int choices) {
  id_ = id;
  choices_.resize(static_cast<size_t>(choices));
  for (api::FinalChoice& c : choices_) c.with_logprobs = with_logprobs_;
}

void JsonEncoder::OnDelta(int index, std::string text,
                          std::vector<api::LogprobEntry> logprobs,
                          const api::Usage&) {
  api::FinalChoice& c = choices_[static_cast<size_t>(index)];
  c.text += text;
  for (api::LogprobEntry& e : logprobs) c.logprobs.push_back(std::move(e));
}

void JsonEncoder::OnFinish(int index, std::string_view finish_reason,
                           const api::Usage&) {
  choices_[static_cast<size_t>(index)].finish_reason =
      std::string(finish_reason);
}

void JsonEncoder::OnComplete(const api::Usage& usage,
                             const api::ServerTimings& timings) {
  if (answered_) return;
  answered_ = true;
  std::vector<http::Header> h{
      {"Content-Type", "application/json"},
      {"Server-Timing", api::FormatServerTiming(timings)}};
  if (!o_.request_id.empty()) h.push_back({"X-Request-Id", o_.request_id});
  if (o_.count_status) o_.count_status(200);
  writer_->Respond(200, std::move(h),
                   api::BuildResponse(o_.kind, id_, choices_, usage, &timings));
}

void JsonEncoder::OnError(const api::ApiError& error) {
  if (answered_) return;
  answered_ = true;
  if (o_.count_status) o_.count_status(error.http_status);
  writer_->Respond(error.http_status, ErrorHeaders(error, o_.request_id),
                   api::BuildErrorBody(error));
}

}  // namespace redline::server
