// Engine: continuous batching of many requests over one model.
//
// One owner thread holds the transformer, the KV caches (one per slot) and
// the scheduler. Requests arrive through Submit (any thread) on a queue;
// results leave on each request's RequestStream. Every step the loop:
//   1. takes new requests, drops cancelled or expired ones (freeing slots),
//   2. admits waiting requests into free slots, reusing the KV of the idle
//      slot whose cached tokens share the longest prefix with the prompt
//      (prefix cache; least recently used slot otherwise),
//   3. builds one batch: one token per decoding sequence, then prompt chunks
//      of prefilling sequences up to max_batch_tokens — so a long prompt is
//      prefilled over several steps while other streams keep decoding,
//   4. runs the forward pass, samples, detokenizes, checks stop conditions
//      and pushes events.
// Cancellation and deadlines are checked every step.
//
// Thread-safety: Submit, Stats and Stop are thread-safe.
#ifndef REDLINE_ENGINE_ENGINE_H_
#define REDLINE_ENGINE_ENGINE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/request.h"
#include "model/arch/model.h"
#include "model/arch/transformer.h"

namespace redline::engine {

struct EngineOptions {
  int64_t n_ctx = 4096;  // context per slot (prompt + generated)
  int parallel = 4;      // slots: sequences decoded together
  int64_t max_batch_tokens =
      256;  // tokens per forward step (decode + prefill chunks)
  // Admission bounds on the waiting queue; beyond them Submit returns
  // ResourceExhausted (the server answers 429 with Retry-After).
  int max_waiting_requests = 64;
  int64_t max_waiting_prompt_tokens = 32768;
  bool prefix_cache = true;
  // KV cache element type of every slot (f16: half the memory, llama.cpp's
  // default arithmetic; f32: exact).
  model::KvType kv_type = model::KvType::kF16;
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
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
  // Exponentially averaged throughput of recent steps (tokens/s), for
  // Retry-After estimates.
  double prefill_tok_per_s = 0;
  double decode_tok_per_s = 0;
};

class Engine {
 public:
  // Starts the owner thread. The model and pool must outlive the engine; the
  // pool is used only by the owner thread.
  Engine(const model::Model& model, ThreadPool& pool,
         const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Errors: InvalidArgument (bad sampling params, empty
  // prompt, bad ids), OutOfRange (prompt + max_tokens beyond n_ctx; never
  // truncated), ResourceExhausted (queue full by count or tokens),
  // Unavailable (stopping).
  Result<std::shared_ptr<RequestStream>> Submit(EngineRequest request);

  EngineStats Stats() const;
  const EngineOptions& options() const { return options_; }

  // Seconds until the waiting queue would drain at the recent rate (>= 1).
  int RetryAfterSeconds() const;

  // Stops admitting, cancels everything in flight (kError kCancelled with
  // "server shutting down") and joins the owner thread. Idempotent.
  void Stop();

 private:
  struct Slot;
  struct Pending {
    EngineRequest request;
    std::shared_ptr<RequestStream> stream;
    Clock::time_point queued_at;
  };

  void Loop();
  void Admit(Pending pending, Slot& slot);
  void FinishSlot(Slot& slot, Status error);
  void Step();

  const model::Model& model_;
  ThreadPool& pool_;
  EngineOptions options_;
  std::unique_ptr<model::Transformer> transformer_;  // owner thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> incoming_;      // guarded by mu_
  bool stopping_ = false;             // guarded by mu_
  int64_t queued_prompt_tokens_ = 0;  // guarded by mu_ (incoming + waiting)
  int queued_requests_ = 0;           // guarded by mu_
  EngineStats stats_;                 // guarded by mu_ (snapshot)

  // Owner-thread state.
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<float> logits_;  // [rows with logits in a step, vocab], reused
  std::deque<Pending> waiting_;
  std::thread thread_;
};

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_ENGINE_H_
