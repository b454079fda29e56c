#include "server/tracing_sink.h"

#include <utility>

namespace redline::server {
namespace {

int64_t Ms(double ms) { return static_cast<int64_t>(ms * 1e6); }

}  // namespace

TracingSink::TracingSink(std::unique_ptr<SessionSink> inner,
                         std::shared_ptr<telemetry::RequestTrace> trace,
                         telemetry::Tracer* tracer, int64_t arrival_unix_ns)
    : inner_(std::move(inner)),
      trace_(std::move(trace)),
      tracer_(tracer),
      arrival_unix_ns_(arrival_unix_ns) {}

TracingSink::~TracingSink() {
  // Admitted but neither completed nor failed: the client went away and the
  // session was cancelled. (A refusal at Start never admits; the server
  // finishes that trace with the refusal.)
  if (admitted_ && !ended_) End(true, "cancelled: the client went away");
}

void TracingSink::OnAdmitted(const api::ResponseIdentity& id, int choices) {
  trace_->SetAttribute("gen_ai.response.id", id.id);
  trace_->SetAttribute("gen_ai.response.model", id.model);
  trace_->SetAttribute("gen_ai.request.choice.count",
                       static_cast<int64_t>(choices));
  admitted_ = true;
  inner_->OnAdmitted(id, choices);
}

void TracingSink::OnDelta(int index, std::string text,
                          std::vector<api::LogprobEntry> logprobs,
                          const api::Usage& so_far) {
  if (first_delta_unix_ns_ == 0) first_delta_unix_ns_ = telemetry::UnixNowNs();
  inner_->OnDelta(index, std::move(text), std::move(logprobs), so_far);
}

void TracingSink::OnFinish(int index, std::string_view finish_reason,
                           const api::Usage& so_far) {
  if (!finish_reasons_.empty()) finish_reasons_ += ',';
  finish_reasons_ += finish_reason;
  inner_->OnFinish(index, finish_reason, so_far);
}

void TracingSink::OnEngineTimings(
    std::span<const engine::RequestTimings> per_choice) {
  slots_.clear();
  for (const engine::RequestTimings& t : per_choice) slots_.push_back(t.slot);
  if (!per_choice.empty()) engine_timings_ = per_choice[0];
  inner_->OnEngineTimings(per_choice);
}

void TracingSink::OnComplete(const api::Usage& usage,
                             const api::ServerTimings& t) {
  inner_->OnComplete(usage, t);
  const telemetry::SpanId root = trace_->root_span_id();
  const int64_t a = arrival_unix_ns_;
  const engine::RequestTimings& et = engine_timings_;
  trace_->AddSpan("queue", root, a, a + Ms(t.queue_ms));
  std::vector<telemetry::Attribute> prefill_attrs{
      {"gen_ai.usage.input_tokens", usage.prompt_tokens},
      {"redline.prefill.chunks",
       static_cast<int64_t>(et.prefill_chunks.size())}};
  if (usage.cached_tokens >= 0)
    prefill_attrs.push_back(
        {"redline.prefix_cache.reused_tokens", usage.cached_tokens});
  const telemetry::SpanId prefill = trace_->AddSpan(
      "prefill", root, a + Ms(t.queue_ms), a + Ms(t.queue_ms + t.prefill_ms),
      std::move(prefill_attrs));
  for (size_t i = 0; i < et.prefill_chunks.size() && prefill.valid(); ++i) {
    const engine::PrefillChunkTiming& c = et.prefill_chunks[i];
    trace_->AddSpan(
        "prefill chunk", prefill, a + Ms(c.start_ms), a + Ms(c.end_ms),
        {{"redline.prefill.chunk", static_cast<int64_t>(i)},
         {"redline.prefill.chunk_tokens", static_cast<int64_t>(c.tokens)},
         {"redline.batch.tokens", static_cast<int64_t>(c.batch_tokens)}});
  }
  std::vector<telemetry::Attribute> decode_attrs{
      {"gen_ai.usage.output_tokens", usage.completion_tokens},
      {"redline.steps", et.steps},
      {"redline.batch.tokens_max", static_cast<int64_t>(et.batch_tokens_max)},
      {"redline.batch.sequences_max",
       static_cast<int64_t>(et.batch_sequences_max)}};
  if (et.steps > 0)
    decode_attrs.push_back(
        {"redline.batch.tokens_mean", static_cast<double>(et.batch_tokens_sum) /
                                          static_cast<double>(et.steps)});
  trace_->AddSpan("decode", root, a + Ms(t.ttft_ms),
                  a + Ms(t.ttft_ms + t.decode_ms), std::move(decode_attrs));
  if (first_delta_unix_ns_ > 0)
    trace_->AddSpan("respond", root, first_delta_unix_ns_,
                    telemetry::UnixNowNs());
  if (!slots_.empty()) {
    std::string slots;
    for (int64_t s : slots_) {
      if (!slots.empty()) slots += ',';
      slots += std::to_string(s);
    }
    trace_->SetAttribute("redline.slot",
                         slots_.size() == 1
                             ? telemetry::AttributeValue(slots_[0])
                             : telemetry::AttributeValue(slots));
  }
  trace_->SetAttribute("gen_ai.usage.input_tokens", usage.prompt_tokens);
  trace_->SetAttribute("gen_ai.usage.output_tokens", usage.completion_tokens);
  if (usage.cached_tokens >= 0)
    trace_->SetAttribute("redline.prefix_cache.reused_tokens",
                         usage.cached_tokens);
  trace_->SetAttribute("gen_ai.response.finish_reasons", finish_reasons_);
  trace_->SetAttribute("gen_ai.server.time_to_first_token", t.ttft_ms / 1e3);
  trace_->SetAttribute("redline.queue_ms", t.queue_ms);
  trace_->SetAttribute("redline.prefill_ms", t.prefill_ms);
  trace_->SetAttribute("redline.decode_ms", t.decode_ms);
  trace_->SetAttribute("http.response.status_code", int64_t{200});
  End(false, "");
}

void TracingSink::OnError(const api::ApiError& error) {
  inner_->OnError(error);
  trace_->SetAttribute("http.response.status_code",
                       static_cast<int64_t>(error.http_status));
  trace_->SetAttribute("error.type", error.type);
  End(true, error.message);
}

void TracingSink::End(bool error, std::string message) {
  ended_ = true;
  trace_->End(telemetry::UnixNowNs(), error, std::move(message));
  tracer_->Finish(std::move(*trace_));
}

void FinishRefusedTrace(telemetry::Tracer* tracer,
                        std::shared_ptr<telemetry::RequestTrace> trace,
                        const api::ApiError& error) {
  if (tracer == nullptr || trace == nullptr || trace->ended()) return;
  trace->SetAttribute("http.response.status_code",
                      static_cast<int64_t>(error.http_status));
  trace->SetAttribute("error.type", error.type);
  trace->End(telemetry::UnixNowNs(), true, error.message);
  tracer->Finish(std::move(*trace));
}

}  // namespace redline::server
