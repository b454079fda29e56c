// Generator: runs one sequence from prompt to finish on the calling thread —
// prefill (in batches), then decode steps — and streams text as it goes.
// `redline run` and tests use it directly. The per-token step (sampling,
// detokenizing, stop strings, end-of-generation tokens, max tokens) is
// engine::Sequence, the same code the server's Engine runs per slot, so both
// produce the same tokens and text for the same request.
//
// Ownership: borrows the model, the draft model (if any) and the pool; owns
// its KV cache (model::KvCacheBytes(config, n_ctx, kv_type) bytes), the
// draft model's cache (the same for the draft's config) and the
// transformers' scratch. Thread-safety: not thread-safe; one caller at a time.
#ifndef REDLINE_ENGINE_GENERATOR_H_
#define REDLINE_ENGINE_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/draft_model.h"
#include "engine/prompt_lookup.h"
#include "model/arch/kv_cache.h"
#include "model/arch/model.h"
#include "model/arch/transformer.h"
#include "model/sampling/sampling_params.h"
#include "model/sampling/stop_matcher.h"

namespace redline::engine {

struct GenerationResult {
  std::vector<int32_t>
      tokens;        // generated ids (incl. a final end-of-generation id)
  std::string text;  // streamed text, stop strings removed
  model::FinishReason finish = model::FinishReason::kNone;
  bool cancelled = false;
  int64_t prompt_tokens = 0;
  double prefill_ms = 0;         // prompt forward pass
  double ttft_ms = 0;            // start of Generate to first sampled token
  double decode_ms = 0;          // first sampled token to the end
  SpeculativeStats speculative;  // zeros unless speculation was on
  // Decode steps after the first token / decode_ms.
  double decode_tok_per_s() const;
  double prefill_tok_per_s() const;
};

class Generator {
 public:
  // Checks n_ctx >= 1, batch_tokens >= 1 and that the KV cache fits in the
  // memory available (/proc/meminfo MemAvailable; skipped when unreadable),
  // then builds the generator. With `draft_model` (borrowed; must outlive
  // the generator) it also checks that the draft's vocabulary is the
  // target's (CheckDraftVocabulary) and that both KV caches fit. Errors:
  // InvalidArgument (n_ctx or batch_tokens < 1; the vocabularies differ),
  // ResourceExhausted ("the KV cache for 1 slot x N tokens needs X; this
  // machine has Y available (MemAvailable); lower --ctx", prefixed "draft
  // model: " for the draft's, or the allocation itself failed).
  static Result<std::unique_ptr<Generator>> Create(
      const model::Model& model, ThreadPool& pool, int64_t n_ctx,
      int64_t batch_tokens = 256, model::KvType kv_type = model::KvType::kF16,
      const model::Model* draft_model = nullptr);

  // Without the checks of Create (an allocation failure throws
  // std::bad_alloc). n_ctx: context length (KV cache positions).
  // batch_tokens: prefill chunk. kv_type: KV cache element type (of the
  // draft's cache too). draft_model: drafts for speculative decoding
  // instead of prompt lookup (null: prompt lookup).
  Generator(const model::Model& model, ThreadPool& pool, int64_t n_ctx,
            int64_t batch_tokens = 256,
            model::KvType kv_type = model::KvType::kF16,
            const model::Model* draft_model = nullptr);

  int64_t n_ctx() const { return cache_.n_ctx(); }

  // Generates from `prompt` (token ids). on_text(piece, token) is called with
  // each piece of text that is final (UTF-8 complete, not part of a possible
  // stop string); returning false cancels. Errors (as Engine::Submit, from
  // ResolveRequest in sequence.h): InvalidArgument (bad params, empty prompt,
  // bad ids), OutOfRange ("the prompt is too long: ..." or "max_tokens (K) is
  // too large: ..." — never truncated silently), ResourceExhausted (out of
  // memory in the forward pass).
  //
  // With `speculative.enabled`, decode steps verify drafts — the draft
  // model's when the generator has one (engine/draft_model.h), else
  // prompt-lookup ones (engine/prompt_lookup.h) — in one forward pass of up
  // to k + 1 tokens; each
  // position's token is still sampled from that position's logits by the
  // same Sequence, and a draft is followed only while it matches, so the
  // tokens are those plain decoding samples (greedy and seeded alike, up to
  // the rounding differences of a batched pass, which the tests bound).
  Result<GenerationResult> Generate(
      std::span<const int32_t> prompt, const model::SamplingParams& params,
      const std::function<bool(std::string_view, int32_t)>& on_text,
      const SpeculativeOptions& speculative = {});

 private:
  // Runs `tokens` at positions start_pos.. through the model into the cache;
  // logits: [vocab_size] of the last token.
  Status Forward(std::span<const int32_t> tokens, int64_t start_pos,
                 std::span<float> logits);
  // As Forward, with logits for every token: [tokens, vocab_size].
  Status ForwardAll(std::span<const int32_t> tokens, int64_t start_pos,
                    std::span<float> logits);

  const model::Model& model_;
  model::Transformer transformer_;
  model::KvCache cache_;
  std::unique_ptr<DraftModel> draft_;       // null: prompt lookup
  std::optional<DraftSequence> draft_seq_;  // with draft_
};

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_GENERATOR_H_
