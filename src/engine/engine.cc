#include "engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <utility>

#include "base/logging.h"
#include "engine/kv_memory.h"

namespace redline::engine {
namespace {

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

EngineOptions Clamped(EngineOptions o) {
  o.parallel = std::max(1, o.parallel);
  o.max_batch_tokens = std::max<int64_t>(o.max_batch_tokens, o.parallel);
  return o;
}

Status CheckOptions(const EngineOptions& o) {
  if (o.n_ctx < 1)
    return Status::InvalidArgument(
        fmt::format("n_ctx must be >= 1, got {}", o.n_ctx));
  if (o.parallel < 1)
    return Status::InvalidArgument(
        fmt::format("parallel must be >= 1, got {}", o.parallel));
  if (o.max_batch_tokens < 1)
    return Status::InvalidArgument(fmt::format(
        "max_batch_tokens must be >= 1, got {}", o.max_batch_tokens));
  if (o.max_waiting_requests < 0)
    return Status::InvalidArgument(fmt::format(
        "max_waiting_requests must be >= 0, got {}", o.max_waiting_requests));
  if (o.max_waiting_prompt_tokens < 0)
    return Status::InvalidArgument(
        fmt::format("max_waiting_prompt_tokens must be >= 0, got {}",
                    o.max_waiting_prompt_tokens));
  if (!(o.queue_budget_s >= 0) || !std::isfinite(o.queue_budget_s))
    return Status::InvalidArgument(fmt::format(
        "queue_budget_s must be finite and >= 0, got {}", o.queue_budget_s));
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Create(const model::Model& model,
                                               ThreadPool& pool,
                                               const EngineOptions& options) {
  RL_RETURN_IF_ERROR(CheckOptions(options));
  std::optional<int64_t> available = ReadMemAvailableBytes();
  RL_RETURN_IF_ERROR(CheckKvCacheFits(model.config(), options.n_ctx,
                                      options.parallel, options.kv_type,
                                      available));
  if (options.draft_model != nullptr) {
    RL_RETURN_IF_ERROR(CheckDraftVocabulary(model, *options.draft_model));
    if (available) {
      *available -=
          options.parallel *
          model::KvCacheBytes(model.config(), options.n_ctx, options.kv_type);
    }
    RL_RETURN_IF_ERROR(CheckKvCacheFits(options.draft_model->config(),
                                        options.n_ctx, options.parallel,
                                        options.kv_type, available)
                           .WithContext("draft model"));
  }
  try {
    return std::make_unique<Engine>(model, pool, options);
  } catch (const std::bad_alloc&) {
    const int64_t bytes =
        model::KvCacheBytes(model.config(), options.n_ctx, options.kv_type);
    return Status::ResourceExhausted(fmt::format(
        "allocating the KV cache for {} slots x {} tokens ({} each) failed: "
        "out of memory; lower --ctx or --parallel",
        options.parallel, options.n_ctx, FormatBytes(bytes)));
  }
}

Engine::Engine(const model::Model& model, ThreadPool& pool,
               const EngineOptions& options)
    : model_(model),
      pool_(pool),
      options_(Clamped(options)),
      limits_{options_.queue_budget_s, options_.max_waiting_requests,
              options_.max_waiting_prompt_tokens},
      scheduler_(SchedulerOptions{options_.parallel, options_.max_batch_tokens,
                                  options_.prefix_cache}) {
  transformer_ = std::make_unique<model::Transformer>(
      model.config(), model.weights(), pool, options_.max_batch_tokens);
  if (options_.stage_timers) transformer_->set_profile(&profile_);
  if (options_.draft_model != nullptr) {
    draft_ = std::make_unique<DraftModel>(*options_.draft_model, pool,
                                          model.config().vocab_size,
                                          options_.max_batch_tokens);
  }
  for (int i = 0; i < options_.parallel; ++i) {
    slots_.push_back(std::make_unique<Slot>(
        transformer_->NewCache(options_.n_ctx, options_.kv_type)));
    if (draft_ != nullptr)
      slots_.back()->draft.emplace(
          draft_->NewSequence(options_.n_ctx, options_.kv_type));
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

Result<std::shared_ptr<RequestStream>> Engine::Submit(EngineRequest request,
                                                      int* retry_after_s) {
  std::vector<EngineRequest> group;
  group.push_back(std::move(request));
  auto streams = SubmitGroup(std::move(group), retry_after_s);
  if (!streams.ok()) return streams.status();
  return std::move(streams->front());
}

Result<std::vector<std::shared_ptr<RequestStream>>> Engine::SubmitGroup(
    std::vector<EngineRequest> requests, int* retry_after_s) {
  if (requests.empty())
    return Status::InvalidArgument(
        "a request group needs at least one request");
  std::vector<int64_t> prompt_tokens;
  prompt_tokens.reserve(requests.size());
  for (EngineRequest& r : requests) {
    RL_ASSIGN_OR_RETURN(
        r.sampling,
        ResolveRequest(model_.config(), options_.n_ctx, r.prompt, r.sampling));
    prompt_tokens.push_back(static_cast<int64_t>(r.prompt.size()));
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  streams.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i)
    streams.push_back(std::make_shared<RequestStream>());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      if (retry_after_s != nullptr) *retry_after_s = 1;
      return Status::Unavailable("the engine is shutting down");
    }
    AdmissionDecision d =
        DecideAdmission(AdmissionStateLocked(), limits_, prompt_tokens);
    if (!d.ok()) {
      if (retry_after_s != nullptr) *retry_after_s = d.retry_after_s;
      return d.status;
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      ++queued_requests_;
      ++in_flight_;
      queued_prompt_tokens_ += prompt_tokens[i];
      incoming_.push_back({std::move(requests[i]), streams[i]});
    }
  }
  cv_.notify_one();
  return streams;
}

AdmissionState Engine::AdmissionStateLocked() const {
  AdmissionState s;
  s.parallel = options_.parallel;
  s.in_flight = in_flight_;
  s.queued_requests = queued_requests_;
  s.queued_prompt_tokens = queued_prompt_tokens_;
  s.service_s = service_ema_s_;
  s.prefill_tok_per_s = stats_.prefill_tok_per_s;
  return s;
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = stats_;
  s.waiting = queued_requests_;
  s.waiting_prompt_tokens = queued_prompt_tokens_;
  s.in_flight = in_flight_;
  s.service_s = service_ema_s_;
  return s;
}

int Engine::RetryAfterSeconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  const AdmissionState state = AdmissionStateLocked();
  const int64_t one_token[] = {1};
  const AdmissionDecision d = DecideAdmission(state, limits_, one_token);
  if (!d.ok()) return d.retry_after_s;
  return RetryAfterForFinishes(
      state, std::max(1, state.in_flight + 1 - state.parallel));
}

void Engine::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const bool idle = waiting_.empty() && scheduler_.running() == 0;
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
  for (int i = 0; i < scheduler_.num_slots(); ++i) {
    if (slots_[i]->active()) FinishSlot(i, bye);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!incoming_.empty()) {
      waiting_.push_back(std::move(incoming_.front()));
      incoming_.pop_front();
    }
  }
  const auto now = Clock::now();
  for (Pending& p : waiting_) FailPending(p, bye, now);
  waiting_.clear();
}

void Engine::Step() {
  DropCancelledAndExpired(Clock::now());
  AdmitWaiting();
  const BatchPlan plan = scheduler_.Plan();
  if (plan.empty()) {
    // Nothing to run (e.g. the last request was just cancelled): keep the
    // running/KV snapshot current anyway, or /metrics would show the
    // cancelled request as running until the next busy step.
    PublishStats(/*ran=*/false, 0, 0, 0);
    return;
  }
  RunBatch(plan);
}

void Engine::FailPending(Pending& p, Status why, Clock::time_point now) {
  const int64_t n_prompt = static_cast<int64_t>(p.request.prompt.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    --queued_requests_;
    --in_flight_;
    queued_prompt_tokens_ -= n_prompt;
  }
  RequestEvent e;
  e.type = RequestEvent::Type::kError;
  e.status = std::move(why);
  e.prompt_tokens = n_prompt;
  e.timings.queue_ms = e.timings.e2e_ms = MsBetween(p.request.arrival, now);
  p.stream->Push(std::move(e));
}

void Engine::DropCancelledAndExpired(Clock::time_point now) {
  auto expired = [&](const EngineRequest& r) {
    return r.deadline && now >= *r.deadline;
  };
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Status why;
    if (it->stream->cancelled()) why = Status::Cancelled("request cancelled");
    if (why.ok() && expired(it->request))
      why = Status::DeadlineExceeded("request timed out while waiting");
    if (why.ok()) {
      ++it;
      continue;
    }
    FailPending(*it, std::move(why), now);
    it = waiting_.erase(it);
  }
  for (int i = 0; i < scheduler_.num_slots(); ++i) {
    Slot& slot = *slots_[i];
    if (!slot.active()) continue;
    if (slot.stream->cancelled()) {
      FinishSlot(i, Status::Cancelled("request cancelled"));
    } else if (expired(slot.request)) {
      FinishSlot(i, Status::DeadlineExceeded("request timed out"));
    }
  }
}

void Engine::AdmitWaiting() {
  while (!waiting_.empty()) {
    const int slot = scheduler_.ChooseSlot(waiting_.front().request.prompt);
    if (slot < 0) break;
    Admit(std::move(waiting_.front()), slot);
    waiting_.pop_front();
  }
}

void Engine::Admit(Pending p, int index) {
  const auto now = Clock::now();
  Slot& slot = *slots_[index];
  const int64_t n_prompt = static_cast<int64_t>(p.request.prompt.size());
  slot.seq.emplace(model_, p.request.prompt, p.request.sampling, options_.n_ctx,
                   now);
  slot.cached_tokens = scheduler_.Admit(index, std::move(p.request.prompt));
  slot.prompt_tokens = n_prompt;
  slot.request = std::move(p.request);
  slot.stream = std::move(p.stream);
  slot.draft_control = DraftController(options_.speculative.max_draft_tokens,
                                       /*shadow=*/draft_ == nullptr,
                                       options_.speculative.pace_by_cost);
  slot.shadow_token = -1;
  slot.steps = RequestTimings{};
  slot.steps.slot = index;
  std::lock_guard<std::mutex> lock(mu_);
  --queued_requests_;
  queued_prompt_tokens_ -= n_prompt;
  stats_.prefix_cache_queries_tokens += static_cast<uint64_t>(n_prompt);
  stats_.prefix_cache_hits_tokens += static_cast<uint64_t>(slot.cached_tokens);
}

void Engine::FinishSlot(int index, Status error) {
  const auto now = Clock::now();
  Slot& slot = *slots_[index];
  const bool success = error.ok();
  RequestEvent e;
  if (!success) {
    e.type = RequestEvent::Type::kError;
    e.status = std::move(error);
  } else {
    e.type = RequestEvent::Type::kDone;
  }
  const Sequence& seq = *slot.seq;
  e.finish_reason = seq.finish_reason();
  e.prompt_tokens = slot.prompt_tokens;
  e.completion_tokens = seq.generated_tokens();
  e.cached_tokens = slot.cached_tokens;
  e.timings = std::move(slot.steps);
  const auto arrival = slot.request.arrival;
  e.timings.queue_ms = MsBetween(arrival, seq.started_at());
  if (seq.prefill_done_at() != Clock::time_point{})
    e.timings.prefill_ms = MsBetween(seq.started_at(), seq.prefill_done_at());
  if (seq.first_token_at() != Clock::time_point{}) {
    e.timings.ttft_ms = MsBetween(arrival, seq.first_token_at());
    e.timings.decode_ms = MsBetween(seq.first_token_at(), now);
  }
  e.timings.e2e_ms = MsBetween(arrival, now);
  const double service_s = SecondsBetween(seq.started_at(), now);
  const bool feeds_estimate = success && !slot.request.warmup;
  auto stream = std::move(slot.stream);
  slot.stream = nullptr;
  slot.seq.reset();
  scheduler_.Release(index);
  {
    // Counted out before the final event is visible, so a client that sees
    // it and submits again finds the slot counted free.
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    if (feeds_estimate) service_ema_s_ = UpdateEma(service_ema_s_, service_s);
  }
  stream->Push(std::move(e));
}

void Engine::RunBatch(const BatchPlan& plan) {
  batch_.clear();
  for (const PlannedToken& t : plan.tokens) {
    batch_.push_back({t.token, t.pos, &slots_[t.slot]->cache, t.want_logits});
  }
  const int64_t vocab = model_.config().vocab_size;
  const size_t rows = plan.logit_slots.size();
  Status s;
  // Reused across steps: zero-filling a fresh [rows, vocab] buffer every
  // decode step would cost megabytes of memory traffic per token.
  const auto t0 = Clock::now();
  try {
    if (logits_.size() < rows * vocab) logits_.resize(rows * vocab);
    s = transformer_->Forward(batch_,
                              std::span<float>(logits_.data(), rows * vocab));
  } catch (const std::bad_alloc&) {
    // Scratch that grows with the context (attention scores) or the logits.
    s = Status::ResourceExhausted("out of memory");
  }
  const auto t1 = Clock::now();
  if (!s.ok()) {
    RL_LOG(kError, "engine step failed: {}", s.ToString());
    for (int i = 0; i < scheduler_.num_slots(); ++i) {
      const bool in_plan =
          std::any_of(plan.tokens.begin(), plan.tokens.end(),
                      [&](const PlannedToken& t) { return t.slot == i; });
      if (in_plan && slots_[i]->active())
        FinishSlot(i, Status::Internal("forward pass failed: " + s.message()));
    }
    return;
  }
  scheduler_.Commit(plan);
  RecordStep(plan, t0, t1);
  for (const auto& [index, n] : plan.prefill_chunks) {
    if (!scheduler_.prefilling(index)) slots_[index]->seq->MarkPrefillDone(t1);
  }
  // Each slot's draft tokens, in draft order, for verification.
  std::vector<std::vector<int32_t>>& drafts = step_drafts_;
  drafts.assign(slots_.size(), {});
  for (const PlannedToken& t : plan.tokens)
    if (t.draft_index >= 0) drafts[t.slot].push_back(t.token);
  // What the pass cost each decoding sequence, for its draft length: the
  // whole step's time (exact for one sequence; with several, each is
  // charged the batch's step, and drafting pays when its tokens add little
  // to that). A step that carries prompt chunks says nothing about it.
  if (options_.speculative.enabled && plan.prefill_chunks.empty()) {
    const double step_s = std::chrono::duration<double>(t1 - t0).count();
    for (size_t row = 0; row < rows; ++row) {
      if (plan.logit_draft_index[row] >= 0) continue;
      const int index = plan.logit_slots[row];
      slots_[index]->draft_control.RecordPass(
          1 + static_cast<int>(drafts[index].size()), step_s);
    }
  }
  std::vector<int>& accepted = step_accepted_;
  accepted.assign(slots_.size(), 0);
  std::vector<bool> matching(slots_.size(), true);
  for (size_t row = 0; row < rows; ++row) {
    const int index = plan.logit_slots[row];
    const int di = plan.logit_draft_index[row];
    Slot& slot = *slots_[index];
    // A draft row counts only while every earlier draft token of its slot
    // was what the sequence sampled (then its logits are those plain
    // decoding would compute); the rest of the draft is discarded.
    if (!slot.active() || (di >= 0 && !matching[index])) continue;
    StepResult r =
        slot.seq->Accept(std::span<float>(logits_.data() + row * vocab, vocab));
    RequestEvent e;
    e.type = RequestEvent::Type::kToken;
    e.token = r.token;
    e.text = std::move(r.text);
    e.logprobs = std::move(r.logprobs);
    const std::vector<int32_t>& d = drafts[index];
    const size_t next = static_cast<size_t>(di + 1);
    if (next < d.size() && r.token == d[next] &&
        r.finish == model::FinishReason::kNone) {
      ++accepted[index];
    } else {
      matching[index] = false;
    }
    if (slot.shadow_token >= 0) {
      slot.draft_control.RecordShadow(r.token == slot.shadow_token);
      slot.shadow_token = -1;
    }
    if (r.finish == model::FinishReason::kNone)
      scheduler_.SetPending(index, r.token);
    slot.stream->Push(std::move(e));
    if (r.finish != model::FinishReason::kNone) FinishSlot(index, Status::Ok());
  }
  int64_t accepted_total = 0;
  uint64_t drafts_verified = 0;
  std::vector<int> to_draft;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = *slots_[i];
    const int index = static_cast<int>(i);
    drafts_verified += drafts[i].empty() ? 0 : 1;
    if (!drafts[i].empty() && slot.active()) {
      scheduler_.AcceptDrafts(
          index, std::span(drafts[i]).first(static_cast<size_t>(accepted[i])));
      slot.draft_control.Record(static_cast<int>(drafts[i].size()),
                                accepted[i]);
    }
    accepted_total += accepted[i];
    if (slot.active() && !scheduler_.prefilling(index))
      to_draft.push_back(index);
  }
  PlanDrafts(to_draft);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.spec_draft_tokens += static_cast<uint64_t>(plan.draft_tokens);
    stats_.spec_accepted_tokens += static_cast<uint64_t>(accepted_total);
    stats_.spec_drafts += drafts_verified;
  }
  PublishStats(/*ran=*/true, std::chrono::duration<double>(t1 - t0).count(),
               plan.prefill_tokens, plan.decode_tokens);
}

void Engine::RecordStep(const BatchPlan& plan, Clock::time_point t0,
                        Clock::time_point t1) {
  const int32_t batch_tokens = static_cast<int32_t>(plan.tokens.size());
  std::vector<bool>& seen = step_seen_;
  seen.assign(slots_.size(), false);
  int32_t sequences = 0;
  for (const PlannedToken& t : plan.tokens) {
    if (seen[t.slot]) continue;
    seen[t.slot] = true;
    ++sequences;
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!seen[i] || !slots_[i]->active()) continue;
    RequestTimings& r = slots_[i]->steps;
    ++r.steps;
    r.batch_tokens_sum += batch_tokens;
    r.batch_tokens_max = std::max(r.batch_tokens_max, batch_tokens);
    r.batch_sequences_max = std::max(r.batch_sequences_max, sequences);
  }
  for (const auto& [index, n] : plan.prefill_chunks) {
    Slot& slot = *slots_[index];
    if (!slot.active()) continue;
    std::vector<PrefillChunkTiming>& chunks = slot.steps.prefill_chunks;
    const double start = MsBetween(slot.request.arrival, t0);
    const double end = MsBetween(slot.request.arrival, t1);
    if (chunks.size() < kMaxPrefillChunkTimings) {
      chunks.push_back({start, end, static_cast<int32_t>(n), batch_tokens});
    } else {
      chunks.back().end_ms = end;
      chunks.back().tokens += static_cast<int32_t>(n);
    }
  }
}

void Engine::PlanDrafts(std::span<const int> indices) {
  if (!options_.speculative.enabled) return;
  std::vector<DraftModel::Job> jobs;
  std::vector<std::vector<int32_t>> drafts(indices.size());
  std::vector<int> job_slots;
  for (size_t n = 0; n < indices.size(); ++n) {
    const int index = indices[n];
    Slot& slot = *slots_[index];
    if (!slot.request.speculative) continue;
    const Sequence& seq = *slot.seq;
    // The pending token sits at position cached; drafts follow it and must
    // fit the context, and drafting past max_tokens verifies tokens that
    // are never emitted.
    const int64_t pos = static_cast<int64_t>(scheduler_.cached(index).size());
    const int64_t room =
        std::min<int64_t>(options_.n_ctx - 1 - pos,
                          seq.params().max_tokens - seq.generated_tokens() - 1);
    const int k = static_cast<int>(std::min<int64_t>(
        slot.draft_control.NextLength(), std::max<int64_t>(0, room)));
    if (k <= 0) {
      if (draft_ == nullptr && room > 0 && slot.draft_control.wants_shadow()) {
        const std::vector<int32_t> shadow =
            DraftFromHistory(seq.history(), 1, options_.speculative.ngram_max,
                             options_.speculative.ngram_min);
        if (!shadow.empty()) slot.shadow_token = shadow[0];
      }
      continue;
    }
    if (draft_ != nullptr) {
      // A long prompt reaches the draft's cache a batch per step.
      jobs.push_back({&*slot.draft, seq.history(), &seq.sampler(),
                      seq.prompt_tokens(), k, &drafts[n],
                      options_.max_batch_tokens});
      job_slots.push_back(index);
      continue;
    }
    std::vector<int32_t> draft =
        DraftFromHistory(seq.history(), k, options_.speculative.ngram_max,
                         options_.speculative.ngram_min);
    if (!draft.empty()) scheduler_.SetDraft(index, std::move(draft));
  }
  if (jobs.empty()) return;
  // A failed draft pass costs only the drafts: these sequences decode
  // plainly this step.
  if (Status s = draft_->Propose(jobs); !s.ok()) {
    RL_LOG(kWarning, "draft model pass failed: {}", s.ToString());
    return;
  }
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (!jobs[j].draft->empty())
      scheduler_.SetDraft(job_slots[j], std::move(*jobs[j].draft));
  }
}

void Engine::PublishStats(bool ran, double step_s, int64_t prefill_tokens,
                          int64_t decode_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.running = scheduler_.running();
  stats_.kv_used_tokens = scheduler_.running_tokens();
  if (!ran) return;
  ++stats_.steps;
  stats_.busy_seconds += step_s;
  for (int i = 0; i < model::kNumForwardStages; ++i)
    stats_.stage_seconds[static_cast<size_t>(i)] =
        static_cast<double>(profile_.ns[static_cast<size_t>(i)]) / 1e9;
  if (step_s > 0 && prefill_tokens > 0) {
    stats_.prefill_tok_per_s = UpdateEma(
        stats_.prefill_tok_per_s, static_cast<double>(prefill_tokens) / step_s);
  }
  if (step_s > 0 && decode_tokens > 0 && prefill_tokens == 0) {
    stats_.decode_tok_per_s = UpdateEma(
        stats_.decode_tok_per_s, static_cast<double>(decode_tokens) / step_s);
  }
}

}  // namespace redline::engine
