// Draft-model speculative decoding: a small model with the target's
// vocabulary proposes the next k tokens from its own KV cache; the target
// verifies them in one batched pass, exactly as it verifies prompt-lookup
// drafts (prompt_lookup.h, generator.h, engine.h), so the output is still
// the one plain decoding gives.
//
// Drafts are sampled as the target will sample: each job's draft sampler
// follows the sequence's (model::Sampler::Follow), so the draft token at
// each position is drawn from the draft's distribution — after the same
// bias, penalties (over the history and the draft so far), top-k,
// temperature, top-p and min-p — with the very random number the target's
// sampler will use at that position. Greedy requests get the penalised
// argmax. Where the two distributions agree the draw lands on the same
// token, so at temperature > 0 a draft is accepted about as often as the
// models agree, not only when the target happens to draw the draft's most
// likely token (as with greedy drafts); the target's own draws, and so the
// tokens, are unchanged. This is not the accept/reject rule of Leviathan
// et al. (accept with probability min(1, p/q), else resample from the
// residual), which accepts at least as often but draws differently from
// plain decoding: seeded outputs would then depend on the draft lengths,
// which follow measured pass times.
//
// The draft's cache follows the accepted tokens without explicit rollback:
// each DraftSequence remembers the tokens whose K/V its cache holds, and
// Propose keeps only the prefix they share with the sequence's history (the
// accepted tokens), re-running the rest (usually 1-2 tokens: the target's
// last sampled token, and the last draft token when the whole draft was
// accepted). A slot's draft cache therefore also reuses shared prompt
// prefixes across requests, as the target's prefix cache does.
//
// Ownership: DraftModel borrows the draft model and the pool (both must
// outlive it) and owns the draft transformer's scratch; a DraftSequence owns
// one draft KV cache (model::KvCacheBytes(draft config, n_ctx, kv_type)).
// Thread-safety: not thread-safe; the owner thread of the target (the
// engine's, or the Generator's caller) runs the draft too.
// Cost: Propose for n sequences drafting k tokens runs k forward passes of
// the draft model, each batched over the n sequences (the first also
// carrying the catch-up tokens), plus one O(vocab) draw per draft token
// (model::Sampler::Sample's cost; an argmax without a sampler).
#ifndef REDLINE_ENGINE_DRAFT_MODEL_H_
#define REDLINE_ENGINE_DRAFT_MODEL_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "model/arch/kv_cache.h"
#include "model/arch/model.h"
#include "model/arch/transformer.h"
#include "model/sampling/sampler.h"

namespace redline::model {
class Tokenizer;
}  // namespace redline::model

namespace redline::engine {

// Vocabulary sizes may differ by this many ids (models padded to a multiple
// of 64 or 128 rows, as llama.cpp's speculative example allows).
inline constexpr int64_t kMaxDraftVocabDifference = 128;

// Whether `draft` can propose tokens for `target`: both have a tokenizer of
// the same kind, vocabulary sizes within kMaxDraftVocabDifference, the same
// BOS, EOS, EOT and unknown ids and add-BOS setting, and the same text for
// every id both vocabularies have. Errors: InvalidArgument naming the first
// difference, e.g. "the draft model's vocabulary differs from the target's
// at token 300: '▁a' vs '▁b'". Cost: O(vocab) string compares.
Status CheckDraftVocabulary(const model::Model& target,
                            const model::Model& draft);
// The same on the tokenizers (null: none) and the models' vocabulary sizes
// (rows of their embedding matrices).
Status CheckDraftVocabulary(const model::Tokenizer* target,
                            int64_t target_vocab_size,
                            const model::Tokenizer* draft,
                            int64_t draft_vocab_size);

// The draft model's state for one sequence (or one engine slot).
class DraftSequence {
 public:
  explicit DraftSequence(model::KvCache cache) : cache_(std::move(cache)) {}

  // Tokens whose K/V the cache holds, in position order.
  const std::vector<int32_t>& cached() const { return cached_; }

 private:
  friend class DraftModel;
  model::KvCache cache_;
  std::vector<int32_t> cached_;
  // Follows the sequence's sampler while drafting (kept between calls for
  // its scratch); the history plus the draft so far, for its penalties.
  std::optional<model::Sampler> sampler_;
  std::vector<int32_t> drafted_;
};

class DraftModel {
 public:
  // target_vocab_size: ids at or beyond it are never proposed (a draft
  // with a larger vocabulary ends its draft there).
  // max_batch_tokens: the draft transformer's chunk (catch-up after a long
  // prompt runs in chunks of it).
  DraftModel(const model::Model& draft, ThreadPool& pool,
             int64_t target_vocab_size, int64_t max_batch_tokens = 256);

  const model::Model& model() const { return model_; }

  // A draft state with a cache of n_ctx positions (the target's context:
  // drafts never go past it). Throws std::bad_alloc when out of memory.
  DraftSequence NewSequence(int64_t n_ctx, model::KvType kv_type) const;

  // One sequence's request to Propose.
  struct Job {
    DraftSequence* sequence = nullptr;
    std::span<const int32_t> history;  // prompt + accepted tokens (>= 1)
    // The sequence's sampler, which will sample the positions drafted: the
    // draft draws what it will draw (file comment). Null: greedy drafts
    // (the argmax of the draft's raw logits).
    const model::Sampler* sampler = nullptr;
    // How much of `history` is prompt (0 <= prompt_tokens <= history.size()
    // with a sampler: the caller's Sequence says so).
    int64_t prompt_tokens = 0;
    int max_tokens = 0;                     // k; <= 0: none
    std::vector<int32_t>* draft = nullptr;  // out: <= max_tokens tokens
    // At most this many history tokens the cache lacks are run per call
    // (0: all). When more are missing (the first draft after a long
    // prompt), the call only advances the cache and drafts nothing, so the
    // draft's prefill is spread over steps instead of stalling one.
    int64_t max_catch_up_tokens = 0;
  };

  // Drafts for every job at once (see the file comment). A draft
  // stops early after an end-of-generation token or before an id outside
  // the target's vocabulary. The caller keeps history.size() + max_tokens
  // within the cache's n_ctx. Errors: from the forward pass
  // (ResourceExhausted when out of memory); the drafts are then empty and
  // the caches consistent (nothing is lost but the drafts).
  Status Propose(std::span<Job> jobs);

 private:
  Status Run(std::span<Job> jobs, std::span<const size_t> active);

  const model::Model& model_;
  model::Transformer transformer_;
  int64_t target_vocab_;
  std::vector<model::BatchToken> batch_;   // reused
  std::vector<DraftSequence*> batch_seq_;  // [batch_]: each token's owner
  std::vector<float> logits_;              // [rows, draft vocab], reused
};

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_DRAFT_MODEL_H_
