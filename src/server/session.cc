#include "server/session.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <random>

#include "api/request.h"
#include "base/logging.h"
#include "http/event_loop.h"
#include "model/tokenizer/tokenizer.h"

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

}  // namespace

model::SamplingParams ResolveSampling(const api::CompletionRequest& r,
                                      const SamplingDefaults& d) {
  const api::SamplingParams& in = r.sampling;
  model::SamplingParams out;
  auto to_f = [](double v) { return static_cast<float>(v); };
  out.temperature = to_f(in.temperature.value_or(d.temperature));
  out.top_k = static_cast<int32_t>(
      std::clamp<int64_t>(in.top_k.value_or(d.top_k), -1, INT32_MAX));
  out.top_p = to_f(in.top_p.value_or(d.top_p));
  out.min_p = to_f(in.min_p.value_or(d.min_p));
  out.repetition_penalty =
      to_f(in.repetition_penalty.value_or(d.repetition_penalty));
  out.presence_penalty = to_f(in.presence_penalty.value_or(0));
  out.frequency_penalty = to_f(in.frequency_penalty.value_or(0));
  for (const auto& [id, bias] : in.logit_bias)
    out.logit_bias.emplace_back(id, to_f(bias));
  if (in.seed) {
    out.seed = static_cast<uint64_t>(*in.seed);
  } else if (d.seed >= 0) {
    out.seed = static_cast<uint64_t>(d.seed);
  }
  if (in.max_tokens) {
    out.max_tokens = static_cast<int32_t>(*in.max_tokens);
  } else if (r.kind == api::ApiKind::kCompletions) {
    out.max_tokens = static_cast<int32_t>(api::kCompletionsDefaultMaxTokens);
  }
  out.min_tokens = static_cast<int32_t>(in.min_tokens.value_or(0));
  out.ignore_eos = in.ignore_eos.value_or(false);
  out.stop = in.stop;
  out.logprobs = in.logprobs;
  out.top_logprobs = static_cast<int32_t>(in.top_logprobs);
  return out;
}

namespace {

// The request field a validation or admission message is about, for the
// error's `param`: the model layer names fields in its messages.
std::string ParamOf(std::string_view message) {
  static constexpr std::string_view kFields[] = {"temperature",
                                                 "top_k",
                                                 "top_p",
                                                 "min_p",
                                                 "repetition_penalty",
                                                 "presence_penalty",
                                                 "frequency_penalty",
                                                 "logit_bias",
                                                 "max_tokens",
                                                 "min_tokens",
                                                 "top_logprobs",
                                                 "stop"};
  for (std::string_view f : kFields) {
    if (message.starts_with(f)) return std::string(f);
  }
  if (message.find("max_tokens") != std::string_view::npos) return "max_tokens";
  if (message.find("stop string") != std::string_view::npos) return "stop";
  return {};
}

}  // namespace

InferenceSession::InferenceSession(ServedModel& model,
                                   std::unique_ptr<SessionSink> sink)
    : model_(model), sink_(std::move(sink)) {}

InferenceSession::~InferenceSession() {
  for (Choice& c : choices_) {
    if (c.stream) {
      c.stream->SetNotifier(nullptr);
      if (!c.done) c.stream->Cancel();
    }
  }
}

bool InferenceSession::Prepare(const ServedModel& m,
                               api::CompletionRequest request,
                               const SessionOptions& options,
                               PreparedRequest* out, api::ApiError* refusal) {
  const api::ApiKind kind = request.kind;
  const char* prompt_param =
      kind == api::ApiKind::kChat ? "messages" : "prompt";
  const int max_n = std::min(options.max_n, m.spec.parallel);
  if (request.n > max_n) {
    *refusal = api::ApiError::BadRequest(
        fmt::format("n must be at most {} on this server (free slots)", max_n),
        "n");
    return false;
  }
  out->kind = kind;
  out->n = request.n;
  out->speculative = request.sampling.speculative.value_or(true);
  out->sampling = ResolveSampling(request, options.defaults);
  if (Status s = out->sampling.Validate(m.model->config().vocab_size);
      !s.ok()) {
    *refusal = api::ApiError::BadRequest(s.message(), ParamOf(s.message()));
    return false;
  }
  // A token covers at most max_piece_bytes of text, so a prompt longer than
  // n_ctx x that cannot fit whatever it tokenizes to: refuse it before
  // spending time on it.
  size_t text_bytes = request.prompt.size();
  for (const api::ChatMessage& msg : request.messages)
    text_bytes += msg.content.size();
  const int64_t max_bytes = m.n_ctx * std::max<int64_t>(1, m.max_piece_bytes);
  if (static_cast<int64_t>(text_bytes) > max_bytes) {
    *refusal = api::ApiError::BadRequest(
        fmt::format("the prompt is too long: {} bytes of text cannot fit in "
                    "the context of {} tokens",
                    text_bytes, m.n_ctx),
        prompt_param, "context_length_exceeded");
    return false;
  }
  if (kind == api::ApiKind::kChat) {
    auto ids = m.chat->ChatTokens(api::MessagesToJson(request.messages),
                                  request.tools);
    if (!ids.ok()) {
      *refusal = api::ApiError::BadRequest(ids.status().message(), "messages");
      return false;
    }
    out->prompt = std::move(ids).value();
  } else if (request.prompt_is_ids()) {
    out->prompt = std::move(request.prompt_ids);
  } else {
    out->prompt = m.chat->CompletionTokens(request.prompt);
  }
  if (out->prompt.empty()) {
    *refusal =
        api::ApiError::BadRequest("the prompt has no tokens", prompt_param);
    return false;
  }
  return true;
}

std::unique_ptr<InferenceSession> InferenceSession::Start(
    ServedModel& m, PreparedRequest request, const SessionOptions& options,
    int64_t arrival_ns, std::unique_ptr<SessionSink> sink,
    std::function<void()> notify, api::ApiError* refusal) {
  const api::ApiKind kind = request.kind;
  const engine::Clock::time_point arrival{std::chrono::nanoseconds(arrival_ns)};
  std::optional<engine::Clock::time_point> deadline;
  if (options.request_timeout_s > 0) {
    deadline =
        arrival + std::chrono::duration_cast<engine::Clock::duration>(
                      std::chrono::duration<double>(options.request_timeout_s));
  }
  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  std::vector<engine::EngineRequest> requests;
  for (int i = 0; i < request.n; ++i) {
    engine::EngineRequest er;
    // Copied per choice (n is small); the last takes it.
    er.prompt = i + 1 == request.n ? std::move(request.prompt) : request.prompt;
    er.sampling = request.sampling;
    // Distinct but reproducible choices: seed + index.
    if (er.sampling.seed && i > 0)
      *er.sampling.seed += static_cast<uint64_t>(i);
    er.deadline = deadline;
    er.speculative = request.speculative;
    er.arrival = arrival;
    requests.push_back(std::move(er));
  }
  int retry_after_s = 0;
  auto submitted = m.engine->SubmitGroup(std::move(requests), &retry_after_s);
  if (!submitted.ok()) {
    *refusal = api::ApiErrorFromStatus(submitted.status(), retry_after_s);
    if (model::IsPromptTooLong(submitted.status())) {
      refusal->param = kind == api::ApiKind::kChat ? "messages" : "prompt";
    } else if (refusal->http_status == 400 && refusal->param.empty()) {
      refusal->param = ParamOf(refusal->message);
    }
    return nullptr;
  }

  std::unique_ptr<InferenceSession> s(new InferenceSession(m, std::move(sink)));
  s->with_logprobs_ = request.sampling.logprobs;
  s->arrival_ns_ = arrival_ns;
  s->prompt_tokens_ = prompt_tokens;
  if (m.next_is_cold) {
    s->start_ = StartKind::kCold;
    m.next_is_cold = false;
  }
  for (auto& stream : *submitted) {
    Choice c;
    c.stream = std::move(stream);
    c.stream->SetNotifier(notify);
    s->choices_.push_back(std::move(c));
  }
  api::ResponseIdentity id;
  id.id = (kind == api::ApiKind::kChat ? "chatcmpl-" : "cmpl-") + RandomHex(24);
  id.model = m.spec.name;
  id.created = UnixSeconds();
  s->sink_->OnAdmitted(id, request.n);
  s->Drain();  // events pushed before the notifier was set
  return s;
}

void InferenceSession::Cancel() {
  if (done_) return;
  if (!failed_) {
    failed_ = true;
    cancelled_ = true;
  }
  for (Choice& c : choices_) {
    if (!c.done && c.stream) c.stream->Cancel();
  }
}

void InferenceSession::Drain() {
  if (done_) return;
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    engine::RequestEvent e;
    while (!c.done && c.stream->TryPop(&e)) OnEvent(i, e);
  }
  bool all_done = true;
  for (const Choice& c : choices_) all_done = all_done && c.done;
  if (all_done) Finish();
}

api::Usage InferenceSession::UsageOf(const Choice& c) const {
  api::Usage u;
  u.prompt_tokens = prompt_tokens_;
  u.completion_tokens = c.completion_tokens;
  u.cached_tokens = c.cached_tokens;
  return u;
}

std::vector<api::LogprobEntry> InferenceSession::Logprobs(
    const model::SampleLogprobs& lp) const {
  const model::Tokenizer* tok = model_.model->tokenizer();
  auto piece = [tok](int32_t id) {
    return tok != nullptr ? tok->TokenToPiece(id) : std::string();
  };
  api::LogprobEntry e;
  e.chosen = {piece(lp.chosen.token), lp.chosen.logprob};
  for (const model::TokenLogprob& t : lp.top)
    e.top.push_back({piece(t.token), t.logprob});
  return {std::move(e)};
}

void InferenceSession::OnEvent(size_t index, engine::RequestEvent& e) {
  Choice& c = choices_[index];
  const int64_t now = http::NowNs();
  ModelMetrics& m = model_.metrics;
  const int i = static_cast<int>(index);
  switch (e.type) {
    case engine::RequestEvent::Type::kToken: {
      if (c.completion_tokens == 0 && index == 0)
        m.prompt_tokens->Increment(static_cast<double>(prompt_tokens_));
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
      const bool has_logprobs = with_logprobs_ && e.logprobs.has_value();
      // Held back (a stop-string prefix, a partial UTF-8 character).
      if (!has_text && !has_logprobs) return;
      sink_->OnDelta(i, std::move(e.text),
                     has_logprobs ? Logprobs(*e.logprobs)
                                  : std::vector<api::LogprobEntry>{},
                     UsageOf(c));
      return;
    }
    case engine::RequestEvent::Type::kDone:
      c.done = true;
      c.finish = e.finish_reason;
      c.cached_tokens = e.cached_tokens;
      c.timings = e.timings;
      if (!failed_)
        sink_->OnFinish(i, model::FinishReasonName(e.finish_reason),
                        UsageOf(c));
      return;
    case engine::RequestEvent::Type::kError:
      c.done = true;
      c.timings = e.timings;
      Fail(e.status);
      return;
  }
}

void InferenceSession::Fail(const Status& status) {
  if (failed_) return;  // already answered (or the client left)
  failed_ = true;
  for (Choice& c : choices_) {
    if (!c.done && c.stream) c.stream->Cancel();
  }
  const api::ApiError e = api::ApiErrorFromStatus(status);
  if (e.http_status == 500)
    RL_LOG(kError, "serve: a request to '{}' failed: {}", model_.spec.name,
           status.ToString());
  model_.metrics
      .RequestError(status.code() == StatusCode::kCancelled
                        ? ErrorClass::kCancelled
                        : ErrorClassOf(e))
      .Increment();
  sink_->OnError(e);
}

void InferenceSession::Finish() {
  if (done_) return;
  done_ = true;
  for (Choice& c : choices_) c.stream->SetNotifier(nullptr);
  if (cancelled_) {
    model_.metrics.RequestError(ErrorClass::kCancelled).Increment();
    return;
  }
  if (failed_) return;
  api::Usage usage;
  usage.prompt_tokens = prompt_tokens_;
  usage.completion_tokens = 0;
  usage.cached_tokens = 0;
  for (const Choice& c : choices_) {
    usage.completion_tokens += c.completion_tokens;
    usage.cached_tokens = std::max(usage.cached_tokens, c.cached_tokens);
  }
  const engine::RequestTimings& t = choices_[0].timings;
  const api::ServerTimings timings{t.queue_ms, t.prefill_ms, t.ttft_ms,
                                   t.decode_ms, t.e2e_ms};
  RecordSuccess(http::NowNs());
  std::vector<engine::RequestTimings> per_choice;
  per_choice.reserve(choices_.size());
  for (const Choice& c : choices_) per_choice.push_back(c.timings);
  sink_->OnEngineTimings(per_choice);
  sink_->OnComplete(usage, timings);
}

void InferenceSession::RecordSuccess(int64_t now_ns) {
  ModelMetrics& m = model_.metrics;
  const Choice& c = choices_[0];
  m.RequestSuccess(c.finish).Increment();
  const double e2e_s = static_cast<double>(now_ns - arrival_ns_) * kNsToSeconds;
  m.E2e(start_).Observe(e2e_s);
  if (first_content_ns_ != 0) {
    const double ttft_s =
        static_cast<double>(first_content_ns_ - arrival_ns_) * kNsToSeconds;
    m.Ttft(start_).Observe(ttft_s);
    if (c.completion_tokens >= 2)
      m.tpot->Observe((e2e_s - ttft_s) /
                      static_cast<double>(c.completion_tokens - 1));
  }
  const engine::RequestTimings& t = c.timings;
  m.queue_time->Observe(t.queue_ms / 1e3);
  m.prefill_time->Observe(t.prefill_ms / 1e3);
  m.decode_time->Observe(t.decode_ms / 1e3);
  m.inference_time->Observe((t.e2e_ms - t.queue_ms) / 1e3);
  m.prompt_tokens_per_request->Observe(static_cast<double>(prompt_tokens_));
  for (const Choice& ch : choices_)
    m.generation_tokens_per_request->Observe(
        static_cast<double>(ch.completion_tokens));
}

}  // namespace redline::server
