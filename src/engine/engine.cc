#include "engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/logging.h"
#include "model/sampling/sampler.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::engine {
namespace {

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

// One sequence's place in the engine: its KV cache and, while a request
// runs in it, that request's state. After the request ends the cache keeps
// its tokens for prefix reuse.
struct Engine::Slot {
  explicit Slot(model::KvCache c) : cache(std::move(c)) {}
  model::KvCache cache;
  std::vector<int32_t> cached;  // tokens whose K/V are in `cache`, in order
  Clock::time_point last_used{};

  // Active request (stream != nullptr).
  std::shared_ptr<RequestStream> stream;
  EngineRequest request;
  std::vector<int32_t> history;  // prompt + generated
  int64_t prompt_done = 0;       // prompt tokens whose K/V are in the cache
  int64_t cached_tokens = 0;     // prompt tokens reused from the prefix cache
  int32_t pending = -1;          // sampled, not yet run through the model
  std::optional<model::Sampler> sampler;
  std::optional<model::FinishChecker> finish;
  std::optional<model::StreamingDetokenizer> detok;
  Clock::time_point admitted_at{}, prefill_done_at{}, first_token_at{};
  int64_t generated = 0;

  bool active() const { return stream != nullptr; }
  bool prefilling() const {
    return active() &&
           prompt_done < static_cast<int64_t>(request.prompt.size());
  }
};

Engine::Engine(const model::Model& model, ThreadPool& pool,
               const EngineOptions& options)
    : model_(model), pool_(pool), options_(options) {
  options_.parallel = std::max(1, options_.parallel);
  options_.max_batch_tokens =
      std::max<int64_t>(options_.max_batch_tokens, options_.parallel);
  transformer_ = std::make_unique<model::Transformer>(
      model.config(), model.weights(), pool, options_.max_batch_tokens);
  for (int i = 0; i < options_.parallel; ++i) {
    slots_.push_back(std::make_unique<Slot>(
        transformer_->NewCache(options_.n_ctx, options_.kv_type)));
  }
  stats_.kv_capacity_tokens = options_.n_ctx * options_.parallel;
  thread_ = std::thread([this] { Loop(); });
}

Engine::~Engine() { Stop(); }

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::shared_ptr<RequestStream>> Engine::Submit(EngineRequest request) {
  const model::ModelConfig& c = model_.config();
  RL_RETURN_IF_ERROR(request.sampling.Validate(c.vocab_size));
  if (request.prompt.empty())
    return Status::InvalidArgument("the prompt has no tokens");
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= c.vocab_size) {
      return Status::InvalidArgument(
          fmt::format("prompt token id {} is outside the vocabulary [0, {})",
                      id, c.vocab_size));
    }
  }
  const int64_t n_prompt = static_cast<int64_t>(request.prompt.size());
  if (n_prompt >= options_.n_ctx) {
    return Status::OutOfRange(
        fmt::format("the prompt has {} tokens; the context holds {}", n_prompt,
                    options_.n_ctx));
  }
  if (request.sampling.max_tokens < 0) {
    request.sampling.max_tokens =
        static_cast<int32_t>(options_.n_ctx - n_prompt);
  } else if (n_prompt + request.sampling.max_tokens > options_.n_ctx) {
    return Status::OutOfRange(fmt::format(
        "prompt ({} tokens) + max_tokens ({}) exceeds the context of {} tokens",
        n_prompt, request.sampling.max_tokens, options_.n_ctx));
  }
  auto stream = std::make_shared<RequestStream>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::Unavailable("the engine is shutting down");
    if (queued_requests_ >= options_.max_waiting_requests) {
      return Status::ResourceExhausted(
          fmt::format("the waiting queue is full ({} requests)",
                      options_.max_waiting_requests));
    }
    if (queued_requests_ > 0 &&
        queued_prompt_tokens_ + n_prompt > options_.max_waiting_prompt_tokens) {
      return Status::ResourceExhausted(fmt::format(
          "the waiting queue holds {} prompt tokens; {} more would exceed its "
          "bound of {}",
          queued_prompt_tokens_, n_prompt, options_.max_waiting_prompt_tokens));
    }
    ++queued_requests_;
    queued_prompt_tokens_ += n_prompt;
    incoming_.push_back({std::move(request), stream, Clock::now()});
  }
  cv_.notify_one();
  return stream;
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = stats_;
  s.waiting = queued_requests_;
  s.waiting_prompt_tokens = queued_prompt_tokens_;
  return s;
}

int Engine::RetryAfterSeconds() const {
  EngineStats s = Stats();
  const double rate = std::max(1.0, s.prefill_tok_per_s);
  return std::max(1, static_cast<int>(std::ceil(
                         static_cast<double>(s.waiting_prompt_tokens) / rate)));
}

void Engine::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const bool idle = waiting_.empty() &&
                        std::none_of(slots_.begin(), slots_.end(),
                                     [](const auto& s) { return s->active(); });
      if (idle && incoming_.empty() && !stopping_) {
        // Wake at least every 100 ms to honour deadlines of nothing; cheap.
        cv_.wait_for(lock, std::chrono::milliseconds(100));
      }
      while (!incoming_.empty()) {
        waiting_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      if (stopping_) break;
    }
    Step();
  }
  // Shutting down: every request still here ends with an error event.
  const Status bye = Status::Cancelled("server shutting down");
  for (auto& slot : slots_) {
    if (slot->active()) FinishSlot(*slot, bye);
  }
  std::lock_guard<std::mutex> lock(mu_);
  while (!incoming_.empty()) {
    waiting_.push_back(std::move(incoming_.front()));
    incoming_.pop_front();
  }
  for (Pending& p : waiting_) {
    RequestEvent e;
    e.type = RequestEvent::Type::kError;
    e.status = bye;
    p.stream->Push(std::move(e));
  }
  waiting_.clear();
  queued_requests_ = 0;
  queued_prompt_tokens_ = 0;
}

void Engine::Admit(Pending p, Slot& slot) {
  const auto now = Clock::now();
  slot.request = std::move(p.request);
  slot.stream = std::move(p.stream);
  const auto& prompt = slot.request.prompt;
  // Prefix reuse: keep the cached tokens that match the prompt, but always
  // run at least the last prompt token to get its logits.
  int64_t keep = 0;
  if (options_.prefix_cache) {
    const int64_t limit = std::min<int64_t>(
        slot.cached.size(), static_cast<int64_t>(prompt.size()) - 1);
    while (keep < limit && slot.cached[keep] == prompt[keep]) ++keep;
  }
  slot.cached.resize(keep);
  slot.prompt_done = keep;
  slot.cached_tokens = keep;
  slot.history = prompt;
  slot.pending = -1;
  slot.generated = 0;
  const model::Tokenizer* tok = model_.tokenizer();
  std::vector<int32_t> eog;
  if (tok != nullptr) eog = tok->eog_ids();
  slot.sampler.emplace(slot.request.sampling, model_.config().vocab_size, eog);
  slot.finish.emplace(slot.request.sampling, model::EndOfGenerationSet(eog));
  if (tok != nullptr) {
    slot.detok.emplace(*tok, /*skip_special=*/true);
  } else {
    slot.detok.reset();
  }
  slot.admitted_at = now;
  slot.prefill_done_at = {};
  slot.first_token_at = {};
  slot.last_used = now;
  std::lock_guard<std::mutex> lock(mu_);
  --queued_requests_;
  queued_prompt_tokens_ -= static_cast<int64_t>(prompt.size());
  stats_.prefix_cache_queries_tokens += prompt.size();
  stats_.prefix_cache_hits_tokens += keep;
}

void Engine::FinishSlot(Slot& slot, Status error) {
  const auto now = Clock::now();
  RequestEvent e;
  if (!error.ok()) {
    e.type = RequestEvent::Type::kError;
    e.status = std::move(error);
  } else {
    e.type = RequestEvent::Type::kDone;
  }
  e.finish_reason =
      slot.finish ? slot.finish->finish_reason() : model::FinishReason::kNone;
  e.prompt_tokens = static_cast<int64_t>(slot.request.prompt.size());
  e.completion_tokens = slot.generated;
  e.cached_tokens = slot.cached_tokens;
  const auto arrival = slot.request.arrival;
  e.timings.queue_ms = MsBetween(arrival, slot.admitted_at);
  if (slot.prefill_done_at != Clock::time_point{})
    e.timings.prefill_ms = MsBetween(slot.admitted_at, slot.prefill_done_at);
  if (slot.first_token_at != Clock::time_point{}) {
    e.timings.ttft_ms = MsBetween(arrival, slot.first_token_at);
    e.timings.decode_ms = MsBetween(slot.first_token_at, now);
  }
  e.timings.e2e_ms = MsBetween(arrival, now);
  auto stream = std::move(slot.stream);
  slot.stream = nullptr;
  slot.last_used = now;
  slot.sampler.reset();
  slot.finish.reset();
  slot.detok.reset();
  stream->Push(std::move(e));
}

void Engine::Step() {
  const auto now = Clock::now();
  auto expired = [&](const EngineRequest& r) {
    return r.deadline && now >= *r.deadline;
  };
  // 1. Cancelled or expired requests leave now.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Status why;
    if (it->stream->cancelled()) why = Status::Cancelled("request cancelled");
    if (why.ok() && expired(it->request))
      why = Status::DeadlineExceeded("request timed out while waiting");
    if (why.ok()) {
      ++it;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --queued_requests_;
      queued_prompt_tokens_ -= static_cast<int64_t>(it->request.prompt.size());
    }
    RequestEvent e;
    e.type = RequestEvent::Type::kError;
    e.status = why;
    e.prompt_tokens = static_cast<int64_t>(it->request.prompt.size());
    e.timings.queue_ms = e.timings.e2e_ms = MsBetween(it->request.arrival, now);
    it->stream->Push(std::move(e));
    it = waiting_.erase(it);
  }
  for (auto& slot : slots_) {
    if (!slot->active()) continue;
    if (slot->stream->cancelled()) {
      FinishSlot(*slot, Status::Cancelled("request cancelled"));
    } else if (expired(slot->request)) {
      FinishSlot(*slot, Status::DeadlineExceeded("request timed out"));
    }
  }
  // 2. Admit into free slots: the one with the longest shared prefix, else
  // the least recently used.
  while (!waiting_.empty()) {
    Slot* best = nullptr;
    int64_t best_prefix = -1;
    const auto& prompt = waiting_.front().request.prompt;
    for (auto& slot : slots_) {
      if (slot->active()) continue;
      int64_t prefix = 0;
      if (options_.prefix_cache) {
        const int64_t limit = std::min(slot->cached.size(), prompt.size());
        while (prefix < limit && slot->cached[prefix] == prompt[prefix])
          ++prefix;
      }
      if (prefix > best_prefix ||
          (prefix == best_prefix && slot->last_used < best->last_used)) {
        best = slot.get();
        best_prefix = prefix;
      }
    }
    if (best == nullptr) break;
    Admit(std::move(waiting_.front()), *best);
    waiting_.pop_front();
  }
  // 3. Build the batch: decode tokens first (one per stream), then prompt
  // chunks.
  std::vector<model::BatchToken> batch;
  std::vector<Slot*> logit_owner;  // slot of each logits row
  int64_t budget = options_.max_batch_tokens;
  int64_t decode_tokens = 0, prefill_tokens = 0;
  for (auto& slot : slots_) {
    if (!slot->active() || slot->prefilling() || slot->pending < 0) continue;
    batch.push_back({slot->pending, static_cast<int64_t>(slot->cached.size()),
                     &slot->cache, true});
    logit_owner.push_back(slot.get());
    --budget;
    ++decode_tokens;
  }
  std::vector<Slot*> prefill_order;
  for (auto& slot : slots_) {
    if (slot->prefilling()) prefill_order.push_back(slot.get());
  }
  // Oldest admission first, so prompts finish prefill in arrival order.
  std::sort(prefill_order.begin(), prefill_order.end(),
            [](const Slot* a, const Slot* b) {
              return a->admitted_at < b->admitted_at;
            });
  std::vector<std::pair<Slot*, int64_t>> prefill_taken;
  for (Slot* slot : prefill_order) {
    if (budget <= 0) break;
    const auto& prompt = slot->request.prompt;
    const int64_t n = std::min<int64_t>(
        budget, static_cast<int64_t>(prompt.size()) - slot->prompt_done);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t idx = slot->prompt_done + i;
      const bool last = idx + 1 == static_cast<int64_t>(prompt.size());
      batch.push_back({prompt[idx], idx, &slot->cache, last});
      if (last) logit_owner.push_back(slot);
    }
    prefill_taken.push_back({slot, n});
    budget -= n;
    prefill_tokens += n;
  }
  if (batch.empty()) {
    // Nothing to run (e.g. the last request was just cancelled): keep the
    // running/KV snapshot current anyway, or /metrics would show the
    // cancelled request as running until the next busy step.
    std::lock_guard<std::mutex> lock(mu_);
    int running = 0;
    int64_t used = 0;
    for (auto& slot : slots_) {
      if (!slot->active()) continue;
      ++running;
      used += static_cast<int64_t>(slot->cached.size());
    }
    stats_.running = running;
    stats_.kv_used_tokens = used;
    return;
  }

  // 4. Forward, then sample for every row with logits.
  const int64_t vocab = model_.config().vocab_size;
  // Reused across steps: zero-filling a fresh [rows, vocab] buffer every
  // decode step would cost megabytes of memory traffic per token.
  if (logits_.size() < logit_owner.size() * vocab)
    logits_.resize(logit_owner.size() * vocab);
  std::span<float> logits(logits_.data(), logit_owner.size() * vocab);
  const auto t0 = Clock::now();
  Status s = transformer_->Forward(batch, logits);
  const auto t1 = Clock::now();
  if (!s.ok()) {
    RL_LOG(kError, "engine step failed: {}", s.ToString());
    for (Slot* slot : logit_owner) {
      if (slot->active())
        FinishSlot(*slot,
                   Status::Internal("forward pass failed: " + s.message()));
    }
    for (auto& [slot, n] : prefill_taken) {
      if (slot->active())
        FinishSlot(*slot,
                   Status::Internal("forward pass failed: " + s.message()));
    }
    return;
  }
  for (auto& [slot, n] : prefill_taken) {
    const auto& prompt = slot->request.prompt;
    slot->cached.insert(slot->cached.end(), prompt.begin() + slot->prompt_done,
                        prompt.begin() + slot->prompt_done + n);
    slot->prompt_done += n;
    if (!slot->prefilling()) slot->prefill_done_at = t1;
  }
  for (size_t row = 0; row < logit_owner.size(); ++row) {
    Slot& slot = *logit_owner[row];
    if (!slot.prefilling() && slot.pending >= 0 &&
        slot.cached.size() < slot.history.size()) {
      // This row was a decode token: its K/V are now cached.
      slot.cached.push_back(slot.pending);
    }
    std::span<float> row_logits(logits.data() + row * vocab, vocab);
    std::optional<model::SampleLogprobs> lp;
    if (slot.request.sampling.logprobs) lp.emplace();
    const int32_t next =
        slot.sampler->Sample(row_logits, slot.history,
                             slot.request.prompt.size(), lp ? &*lp : nullptr);
    if (slot.first_token_at == Clock::time_point{})
      slot.first_token_at = Clock::now();
    slot.history.push_back(next);
    ++slot.generated;
    RequestEvent e;
    e.type = RequestEvent::Type::kToken;
    e.token = next;
    e.logprobs = std::move(lp);
    std::string piece = slot.detok ? slot.detok->Push(next) : std::string();
    model::FinishReason reason = slot.finish->Accept(next, piece, &e.text);
    if (reason == model::FinishReason::kNone &&
        static_cast<int64_t>(slot.history.size()) >= options_.n_ctx) {
      slot.finish->Finish(model::FinishReason::kLength, &e.text);
      reason = model::FinishReason::kLength;
    }
    if (reason == model::FinishReason::kLength && slot.detok)
      e.text += slot.detok->Flush();
    slot.pending = next;
    slot.stream->Push(std::move(e));
    if (reason != model::FinishReason::kNone) FinishSlot(slot, Status::Ok());
  }

  // Stats snapshot for /metrics and Retry-After.
  const double secs = std::chrono::duration<double>(t1 - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.steps;
  int running = 0;
  int64_t used = 0;
  for (auto& slot : slots_) {
    if (!slot->active()) continue;
    ++running;
    used += static_cast<int64_t>(slot->cached.size());
  }
  stats_.running = running;
  stats_.kv_used_tokens = used;
  constexpr double kAlpha = 0.2;  // weight of the newest step in the averages
  if (secs > 0 && prefill_tokens > 0) {
    const double rate = prefill_tokens / secs;
    stats_.prefill_tok_per_s =
        stats_.prefill_tok_per_s == 0
            ? rate
            : (1 - kAlpha) * stats_.prefill_tok_per_s + kAlpha * rate;
  }
  if (secs > 0 && decode_tokens > 0 && prefill_tokens == 0) {
    const double rate = decode_tokens / secs;
    stats_.decode_tok_per_s =
        stats_.decode_tok_per_s == 0
            ? rate
            : (1 - kAlpha) * stats_.decode_tok_per_s + kAlpha * rate;
  }
}

}  // namespace redline::engine
