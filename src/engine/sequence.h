// Sequence: the per-token step of one request, shared by Engine (one per
// busy slot) and Generator (`redline run`), so that serving and the command
// line cannot drift apart.
//
// After each forward pass that produced logits for the sequence's next
// position, Accept() does, in this order:
//   1. sample (model::Sampler: bias, min_tokens ban, penalties, top-k,
//      temperature, top-p, min-p, draw), with logprobs when asked for;
//   2. append the token to the history, count it, stamp the first token;
//   3. detokenize it (model::StreamingDetokenizer, never half a UTF-8
//      character);
//   4. decide whether generation ends (model::FinishChecker: end-of-
//      generation token, stop strings held back until they can no longer
//      match, max_tokens; plus a full context), flushing held text when it
//      ends by length;
//   5. return the token, the text that is final now, the logprobs and the
//      finish reason.
// The caller runs the returned token through the model (unless finished)
// and calls Accept() again with the next logits.
//
// Requests enter through ResolveRequest(), which turns every bad input into
// a Status, so nothing a client sends can reach an RL_CHECK in the sampler or
// the finish checker.
//
// Ownership: borrows the model (its tokenizer must outlive the sequence);
// owns the history, sampler, finish checker, detokenizer, counters and
// timestamps. Thread-safety: thread-compatible; one thread (the engine's
// owner thread, or the Generator's caller) uses a sequence at a time.
// Cost: Accept() is one Sampler::Sample (O(vocab), see sampler.h) plus
// O(piece + held-back text) for detokenizing and stop matching; the history
// grows by one int32 per token.
#ifndef REDLINE_ENGINE_SEQUENCE_H_
#define REDLINE_ENGINE_SEQUENCE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/request.h"
#include "model/arch/model.h"
#include "model/sampling/sampler.h"
#include "model/sampling/sampling_ops.h"
#include "model/sampling/sampling_params.h"
#include "model/sampling/stop_matcher.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::engine {

// Checks one request against the model and a context of n_ctx positions
// (prompt + generated) and returns its sampling params with the context-
// dependent defaults filled in (SamplingParams::Resolve). Errors:
//   InvalidArgument "the prompt has no tokens";
//   InvalidArgument "prompt token id X is outside the vocabulary [0, V)";
//   InvalidArgument from SamplingParams::Validate / Resolve (the message
//     starts with the field, e.g. "min_tokens (100) must not exceed ...");
//   OutOfRange "the prompt is too long: ..." (model::IsPromptTooLong);
//   OutOfRange "max_tokens (K) is too large: ...".
// Cost: O(prompt + params).
Result<model::SamplingParams> ResolveRequest(
    const model::ModelConfig& config, int64_t n_ctx,
    std::span<const int32_t> prompt, const model::SamplingParams& params);

// What one Accept() produced.
struct StepResult {
  int32_t token = -1;  // the sampled token
  // Text that is final now (complete UTF-8, not part of a possible stop
  // string); may be empty while text is held back. The concatenation over a
  // sequence is the generated text without the stop string.
  std::string text;
  // The chosen token's logprob and the top alternatives of the raw
  // distribution; set only when params.logprobs.
  std::optional<model::SampleLogprobs> logprobs;
  // kNone: keep going (run `token` through the model and Accept again);
  // otherwise the sequence has ended and Accept must not be called again.
  model::FinishReason finish = model::FinishReason::kNone;
};

class Sequence {
 public:
  // `params` must come from ResolveRequest for this prompt and n_ctx
  // (max_tokens >= 1; RL_CHECK in the Sampler otherwise). Copies the prompt
  // into the history. An unset params.seed is drawn here (seed()).
  // `started_at`: when the sequence got its slot (queue time ends).
  Sequence(const model::Model& model, std::span<const int32_t> prompt,
           const model::SamplingParams& params, int64_t n_ctx,
           Clock::time_point started_at = Clock::now());

  Sequence(Sequence&&) = default;
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  // Samples the next token from `logits` ([vocab_size], the raw logits of
  // the position after the history; modified in place by the sampler) and
  // advances the sequence (steps 1-5 above). Calling it after the sequence
  // finished is a bug (RL_CHECK).
  StepResult Accept(std::span<float> logits);

  // Records when the prompt's last chunk went through the model.
  void MarkPrefillDone(Clock::time_point at) { prefill_done_at_ = at; }

  // prompt + generated tokens, prompt first.
  const std::vector<int32_t>& history() const { return history_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t generated_tokens() const { return generated_tokens_; }
  model::FinishReason finish_reason() const { return finish_.finish_reason(); }
  bool finished() const {
    return finish_.finish_reason() != model::FinishReason::kNone;
  }
  const model::SamplingParams& params() const { return sampler_.params(); }
  // The sampler that will sample the next position (a draft model's sampler
  // follows it: engine/draft_model.h).
  const model::Sampler& sampler() const { return sampler_; }
  uint64_t seed() const { return sampler_.seed(); }

  // Timestamps; a default-constructed time_point means "not yet".
  Clock::time_point started_at() const { return started_at_; }
  Clock::time_point prefill_done_at() const { return prefill_done_at_; }
  Clock::time_point first_token_at() const { return first_token_at_; }

 private:
  int64_t n_ctx_;
  int64_t prompt_tokens_;
  int64_t generated_tokens_ = 0;
  std::vector<int32_t> history_;  // [prompt_tokens + generated_tokens]
  model::Sampler sampler_;
  model::FinishChecker finish_;
  std::optional<model::StreamingDetokenizer> detok_;  // none: no tokenizer
  Clock::time_point started_at_;
  Clock::time_point prefill_done_at_{};
  Clock::time_point first_token_at_{};
};

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_SEQUENCE_H_
