// Engine: continuous batching of many requests over one model.
//
// One owner thread holds the transformer, the KV caches (one per slot), the
// scheduler and the sequences. Requests arrive through Submit/SubmitGroup
// (any thread), which checks them (ResolveRequest in sequence.h) and decides
// admission at once (admission.h); admitted requests wait on a queue and
// results leave on each request's RequestStream. Every step the loop:
//   1. takes new requests, drops cancelled or expired ones (freeing slots),
//   2. asks the Scheduler (scheduler.h) where each waiting request goes: the
//      free slot whose cached tokens share the longest prefix with the
//      prompt (prefix cache), else the least recently used one,
//   3. asks it for the batch: one token per decoding sequence, then prompt
//      chunks of prefilling sequences up to max_batch_tokens — so a long
//      prompt is prefilled over several steps while other streams keep
//      decoding,
//   4. runs the forward pass once for the whole batch, then each sequence's
//      Sequence::Accept (sample, detokenize, stop checks; the same code as
//      Generator) and pushes the events.
// Cancellation and deadlines are checked every step, queued or running.
//
// Ownership: borrows the model and the pool (both must outlive the engine);
// owns the transformer's scratch, parallel KV caches of n_ctx positions each
// (model::KvCacheBytes each), with a draft model as many draft caches (of
// the draft's shape) and the draft transformer's scratch, and the owner
// thread.
// Thread-safety: Submit, SubmitGroup, Stats, RetryAfterSeconds, options and
// Stop are thread-safe; everything else runs on the owner thread.
// Cost: Submit is O(prompt) plus a short critical section; a step costs one
// forward pass over at most max_batch_tokens tokens plus one sample per
// sequence with logits.
#ifndef REDLINE_ENGINE_ENGINE_H_
#define REDLINE_ENGINE_ENGINE_H_

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/admission.h"
#include "engine/draft_model.h"
#include "engine/prompt_lookup.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "model/arch/forward_profile.h"
#include "model/arch/model.h"
#include "model/arch/transformer.h"

namespace redline::engine {

struct EngineOptions {
  int64_t n_ctx = 4096;  // context per slot (prompt + generated), >= 1
  int parallel = 4;      // slots: sequences decoded together, >= 1
  // Tokens per forward step (decode tokens + prefill chunks), >= 1; raised
  // to `parallel` if smaller.
  int64_t max_batch_tokens = 256;
  // Admission bounds on the waiting queue; beyond them Submit returns
  // ResourceExhausted (a server answers 429 with Retry-After).
  int max_waiting_requests = 64;
  int64_t max_waiting_prompt_tokens = 32768;
  // Admission by expected wait (admission.h rule 1): a request whose
  // estimated wait for a slot exceeds this many seconds is refused at once
  // with ResourceExhausted. 0 = off (the queue bounds still apply).
  double queue_budget_s = 0;
  bool prefix_cache = true;
  // KV cache element type of every slot (f16: half the memory, llama.cpp's
  // default arithmetic; f32: exact).
  model::KvType kv_type = model::KvType::kF16;
  // Speculative decoding for requests that do not opt out
  // (EngineRequest::speculative): drafts verified together with the other
  // sequences' decode tokens in the same step. Drafts come from
  // `draft_model` when set, else from prompt lookup (prompt_lookup.h).
  SpeculativeOptions speculative;
  // Per-stage timers in every forward pass (model/arch/forward_profile.h),
  // summed into EngineStats::stage_seconds for /metrics. Two clock reads
  // per stage per layer: well under 1 % of a step (`redline profile`
  // measures it).
  bool stage_timers = true;
  // A small model with the target's vocabulary (draft_model.h), borrowed:
  // it must outlive the engine. Run on the owner thread, with one draft KV
  // cache of n_ctx positions per slot. Used only with speculative.enabled.
  const model::Model* draft_model = nullptr;
};

struct EngineStats {
  int running = 0;    // sequences in slots (snapshot after each step)
  int waiting = 0;    // admitted, waiting for a slot (exact)
  int in_flight = 0;  // admitted and not finished: waiting + running (exact)
  int64_t waiting_prompt_tokens = 0;
  int64_t kv_capacity_tokens = 0;
  int64_t kv_used_tokens = 0;  // positions held by running sequences
  double kv_usage() const {
    return kv_capacity_tokens ? double(kv_used_tokens) / kv_capacity_tokens
                              : 0.0;
  }
  uint64_t prefix_cache_queries_tokens = 0;  // prompt tokens looked up
  uint64_t prefix_cache_hits_tokens = 0;     // of those, served from cache
  uint64_t steps = 0;
  // Speculative decoding: draft tokens verified, and of those kept; drafts
  // verified (one per sequence per step that had one): tokens per target
  // pass of a drafting sequence = 1 + accepted / drafts.
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  uint64_t spec_drafts = 0;
  // Exponentially averaged throughput of recent steps (tokens/s).
  double prefill_tok_per_s = 0;
  double decode_tok_per_s = 0;
  // Exponentially averaged admission-to-finish time of recently finished
  // requests (seconds; 0 until one finished): the admission estimate.
  double service_s = 0;
  // Wall time of every forward pass so far (the owner thread busy with the
  // model; its rate is the engine's busy ratio), and its split by stage
  // when stage timers are on (EngineOptions::stage_timers).
  double busy_seconds = 0;
  std::array<double, model::kNumForwardStages> stage_seconds{};
};

class Engine {
 public:
  // Checks `options` and that parallel KV caches of n_ctx positions (and
  // as many of the draft model's) fit in the memory available
  // (/proc/meminfo MemAvailable; skipped when unreadable), and that a draft
  // model's vocabulary is the target's (CheckDraftVocabulary), then builds
  // the engine and starts its owner thread.
  // Errors: InvalidArgument (an option out of range, naming it; the
  // vocabularies differ),
  // ResourceExhausted ("the KV cache for 4 slots x 100000000 tokens needs
  // 1.4 TiB; this machine has 22 GiB available (MemAvailable); lower --ctx
  // or --parallel", or the allocation itself failed).
  static Result<std::unique_ptr<Engine>> Create(const model::Model& model,
                                                ThreadPool& pool,
                                                const EngineOptions& options);

  // Starts the owner thread without the checks of Create (options are
  // clamped; an allocation failure throws std::bad_alloc). The model and
  // pool must outlive the engine; the pool is used only by the owner thread.
  Engine(const model::Model& model, ThreadPool& pool,
         const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a group of requests (the n choices of one API request) all or
  // none: either every one is queued and gets its stream (in the order
  // given), or none is. Each is checked as by ResolveRequest (its max_tokens
  // is filled from the context when unset), then the group is admitted or
  // refused by the policy of admission.h. Errors:
  //   InvalidArgument: empty group, empty prompt, ids outside the
  //     vocabulary, bad sampling params (the message starts with the field);
  //   OutOfRange: "the prompt is too long: ..." (model::IsPromptTooLong) or
  //     "max_tokens (K) is too large: ..." — never truncated;
  //   ResourceExhausted: refused by admission (queue budget, queue count or
  //     queue tokens); *retry_after_s (when given) receives the Retry-After
  //     seconds (>= 1) of that very decision;
  //   Unavailable: the engine is stopping (*retry_after_s = 1).
  Result<std::vector<std::shared_ptr<RequestStream>>> SubmitGroup(
      std::vector<EngineRequest> requests, int* retry_after_s = nullptr);

  // SubmitGroup of one request.
  Result<std::shared_ptr<RequestStream>> Submit(EngineRequest request,
                                                int* retry_after_s = nullptr);

  EngineStats Stats() const;
  const EngineOptions& options() const { return options_; }

  // The Retry-After (seconds, >= 1) by the admission estimate for a
  // one-token request arriving now: that of its refusal if it would be
  // refused, else the time until one more sequence finishes. A caller that
  // was just refused should prefer the exact *retry_after_s of SubmitGroup
  // (this one is recomputed and may see a later state).
  int RetryAfterSeconds() const;

  // Stops admitting, cancels everything in flight (kError kCancelled with
  // "server shutting down") and joins the owner thread. Idempotent.
  void Stop();

 private:
  // One KV cache and, while a request runs in it, that request's state
  // beyond what the scheduler tracks.
  struct Slot {
    explicit Slot(model::KvCache c) : cache(std::move(c)) {}
    model::KvCache cache;
    std::shared_ptr<RequestStream> stream;  // null: free
    EngineRequest request;  // arrival, deadline, flags (prompt moved out)
    int64_t prompt_tokens = 0;
    int64_t cached_tokens = 0;  // prompt tokens reused from the prefix cache
    std::optional<Sequence> seq;
    DraftController draft_control{1};  // reset at admission
    // A one-token draft not verified, for the token this step gives
    // (prompt_lookup.h); -1: none.
    int32_t shadow_token = -1;
    RequestTimings steps;  // slot, prefill chunks, batch sizes so far
    // The draft model's cache of this slot (with a draft model); kept
    // across requests, so shared prompt prefixes are reused.
    std::optional<DraftSequence> draft;
    bool active() const { return stream != nullptr; }
  };
  struct Pending {
    EngineRequest request;
    std::shared_ptr<RequestStream> stream;
  };

  void Loop();
  void Step();
  void DropCancelledAndExpired(Clock::time_point now);
  void AdmitWaiting();
  void Admit(Pending pending, int slot);
  void RunBatch(const BatchPlan& plan);
  // Ends the request in `slot` with kDone (error OK) or kError.
  void FinishSlot(int slot, Status error);
  // Gives the decoding slots `indices` their next speculative drafts, if
  // any (the draft model's passes batched over them).
  void PlanDrafts(std::span<const int> indices);
  // Adds the pass [t0, t1] to its slots' step records (batch sizes, prefill
  // chunks) for their traces.
  void RecordStep(const BatchPlan& plan, Clock::time_point t0,
                  Clock::time_point t1);
  // Ends a request that never got a slot with kError.
  void FailPending(Pending& pending, Status why, Clock::time_point now);
  void PublishStats(bool ran, double step_s, int64_t prefill_tokens,
                    int64_t decode_tokens);
  AdmissionState AdmissionStateLocked() const;  // requires mu_

  const model::Model& model_;
  ThreadPool& pool_;
  EngineOptions options_;
  AdmissionLimits limits_;
  std::unique_ptr<model::Transformer> transformer_;  // owner thread only
  std::unique_ptr<DraftModel> draft_;  // owner thread only; null: lookup

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> incoming_;      // guarded by mu_
  bool stopping_ = false;             // guarded by mu_
  int64_t queued_prompt_tokens_ = 0;  // guarded by mu_ (incoming + waiting)
  int queued_requests_ = 0;           // guarded by mu_ (incoming + waiting)
  int in_flight_ = 0;                 // guarded by mu_ (queued + in slots)
  double service_ema_s_ = 0;          // guarded by mu_
  EngineStats stats_;                 // guarded by mu_ (snapshot)

  // Owner-thread state.
  Scheduler scheduler_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<model::BatchToken> batch_;  // [n_tokens], reused every step
  std::vector<float> logits_;  // [rows with logits in a step, vocab], reused
  // Per-slot draft tokens verified in a step and how many were kept; reused.
  std::vector<std::vector<int32_t>> step_drafts_;
  std::vector<int> step_accepted_;
  std::vector<bool> step_seen_;  // RecordStep: slots in the pass
  // Stage timers of every forward pass (owner thread; copied into stats_).
  model::ForwardProfile profile_;
  std::deque<Pending> waiting_;
  std::thread thread_;
};

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_ENGINE_H_
