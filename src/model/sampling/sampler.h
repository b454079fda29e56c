// Sampler: picks the next token of one sequence from the model's logits.
//
// Order of operations in Sample() (each step is a function in
// sampling_ops.h; "dense" steps edit the caller's logits in place):
//   1. logit_bias                                   (dense, O(|bias|))
//   2. ban end-of-generation tokens while fewer than min_tokens tokens have
//      been generated                               (dense, O(|eog|))
//   3. repetition_penalty over the last penalty_last_n tokens of prompt +
//      generated; then presence/frequency penalties over all generated
//      tokens                                       (dense, O(history))
//   4. greedy (temperature < kGreedyTemperature)? return argmax, ties to the
//      lowest token id. The PRNG is not used.
//   5. top-k (selected in one pass over the vocabulary; done before
//      temperature, which is order-preserving, so the kept set is the same)
//   6. temperature
//   7. softmax over the remaining candidates
//   8. top-p (smallest most-likely prefix with mass >= top_p)
//   9. min-p (prob >= min_p * max prob)
//  10. draw one token by inverse CDF with u = rng.NextDouble() against the
//      kept mass (u * sum of kept probs), which renormalizes without another
//      pass over the list
//
// Determinism: every non-greedy Sample() consumes exactly one 64-bit PRNG
// draw; greedy consumes none. The PRNG (sampling_rng.h), the exp used by the
// softmax and the summation order are all platform-independent, so the same
// seed, params, logits and history give the same tokens on every platform,
// whether the sequence runs alone or in a batch.
//
// Cost per call with V = vocab_size: top_k > 0: one O(V) scan plus work on k
// candidates. top_k off: O(V) to build candidates and softmax (an exp per
// token), and top-p is O(V) plus a sort of one small bucket (see ApplyTopP).
// Penalties: O(h log h) over the tokens they look at. Logprobs: an O(V) copy
// of the raw logits plus an O(V) log-softmax. CPU time per call on the
// 2-core dev VM, -O2, V = 151936, flat logits, 2000-token history: greedy
// 0.12 ms; top_k 40 + top_p + min_p 0.16 ms; temperature only 1.2 ms; top_p
// 0.9 without top_k 2.1 ms (3.2 ms with penalties and logprobs). Besides
// small per-call buffers in top-p and logprobs, no allocation once the
// scratch buffers have grown (they are kept between calls).
//
// Following (speculative decoding): a draft model's Sampler can Follow the
// target sequence's Sampler: it takes the target's params, seed and PRNG
// state, so its next draws are the very numbers the target's next Sample()
// calls will use. Sampling draft logits with them gives the token the target
// will sample whenever the two distributions put that number on the same
// token (always, where they are equal), so a sampled draft is accepted more
// often than a greedy one (docs/SERVER.md has measurements), while the
// target's own draws, and so its tokens, stay exactly those of plain
// decoding (engine/draft_model.h).
//
// Ownership: owns a copy of the params and its scratch buffers (up to
// ~12 bytes x V for the candidates). Thread-safety: thread-compatible; one
// Sampler per sequence, used by one thread at a time (the engine thread).
// Movable, not copyable.
#ifndef REDLINE_MODEL_SAMPLING_SAMPLER_H_
#define REDLINE_MODEL_SAMPLING_SAMPLER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/sampling/sampling_ops.h"
#include "model/sampling/sampling_params.h"
#include "model/sampling/sampling_rng.h"

namespace redline::model {

class Sampler {
 public:
  // `params` must be valid for `vocab_size` (RL_CHECK on params.Validate();
  // validate at admission to turn bad input into a 400 instead). `eog_tokens`
  // are the model's end-of-generation ids, banned until min_tokens tokens
  // exist; each must be < vocab_size. An unset params.seed draws one from
  // std::random_device; seed() reports it either way.
  Sampler(const SamplingParams& params, int64_t vocab_size,
          std::span<const int32_t> eog_tokens = {});

  Sampler(Sampler&&) noexcept = default;
  Sampler& operator=(Sampler&&) noexcept = default;
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Returns the next token. Size mismatches are bugs (RL_CHECK).
  //   logits: [vocab_size] raw model logits for the next position; modified
  //     in place by steps 1-3 (bias, bans, penalties), so the caller must not
  //     reuse them as raw logits afterwards.
  //   history: [num_prompt_tokens + num_generated] the sequence so far,
  //     prompt first; every id < vocab_size.
  //   num_prompt_tokens: how much of `history` is prompt (<= history.size()).
  //     Presence/frequency penalties and min_tokens count only the rest.
  //   logprobs: when non-null, receives the chosen token's logprob and the
  //     params.top_logprobs most likely tokens of the RAW distribution (before
  //     bias, penalties and temperature; see ComputeLogprobs). Pass it when
  //     params.logprobs is set.
  int32_t Sample(std::span<float> logits, std::span<const int32_t> history,
                 size_t num_prompt_tokens, SampleLogprobs* logprobs = nullptr);

  // A sampler over a vocabulary of `vocab_size` ids (a draft model's) that
  // draws what `target` will draw next (Follow); nullopt when target's
  // params do not fit that vocabulary (a logit_bias or end-of-generation id
  // beyond it). It never computes logprobs. Cost: a copy of the params.
  static std::optional<Sampler> FollowerOf(const Sampler& target,
                                           int64_t vocab_size);
  // Takes target's params, end-of-generation ids, seed and PRNG state,
  // keeping this sampler's vocabulary and scratch; false (nothing changed)
  // when they do not fit this vocabulary, as FollowerOf. Cost: a copy of the
  // params, no allocation once the vectors have grown.
  bool Follow(const Sampler& target);

  // The seed in use (the given one, or the one drawn at construction). The
  // api layer may echo it so a random run can be replayed.
  uint64_t seed() const { return seed_; }
  const SamplingParams& params() const { return params_; }

 private:
  // Whether target's params and end-of-generation ids fit `vocab_size`.
  static bool Fits(const Sampler& target, int64_t vocab_size);

  SamplingParams params_;
  int64_t vocab_size_;
  std::vector<int32_t> eog_tokens_;
  uint64_t seed_;
  SamplingRng rng_;

  // Scratch kept between calls to avoid allocating per token.
  CandidateList candidates_;              // up to [vocab_size]
  std::vector<int32_t> penalty_scratch_;  // [history window]
  std::vector<float> raw_logits_;  // [vocab_size], only when logprobs wanted
};

}  // namespace redline::model

#endif  // REDLINE_MODEL_SAMPLING_SAMPLER_H_
