// SamplingParams: everything one request says about how to pick its next
// tokens and when to stop, in the units of the OpenAI API (plus the common
// extensions top_k, min_p, repetition_penalty, min_tokens, ignore_eos).
//
// The api layer fills it from a request and calls Validate() at admission, so
// bad ranges become a 400 before any work is queued. The engine then calls
// Resolve() with the prompt length and its context, which fills the context-
// dependent defaults (max_tokens) and checks what needs them (min_tokens).
// Sampler and FinishChecker take resolved params only: a Sampler built from
// params that fail Validate() is a bug (RL_CHECK), so every request input
// must go through Resolve() first.
//
// Ownership: a plain value type. Thread-safety: thread-compatible.
// Cost: Validate() and Resolve() are O(logit_bias.size() + total stop-string
// bytes).
#ifndef REDLINE_MODEL_SAMPLING_SAMPLING_PARAMS_H_
#define REDLINE_MODEL_SAMPLING_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace redline::model {

// Below this temperature sampling is greedy (argmax). vLLM uses 1e-2; we keep
// the threshold tiny so that small but deliberate temperatures still sample.
inline constexpr float kGreedyTemperature = 1e-5f;

// Range limits enforced by Validate(). OpenAI documents temperature 0..2; we
// accept up to 100 because some clients flatten distributions on purpose.
inline constexpr float kMaxTemperature = 100.0f;
// OpenAI's documented range for presence_penalty and frequency_penalty.
inline constexpr float kMaxAbsPresenceFrequencyPenalty = 2.0f;
// OpenAI's documented range for one logit_bias value.
inline constexpr float kMaxAbsLogitBias = 100.0f;
// OpenAI chat allows top_logprobs 0..20.
inline constexpr int32_t kMaxTopLogprobs = 20;
// Stop strings are held back while streaming, so their number and length
// bound both the per-token matching cost and the text held back. OpenAI allows
// 4; vLLM has no cap; 16 x 256 bytes leaves room without inviting abuse.
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;

// Resolve()'s error for a prompt that leaves no room to generate starts with
// this (OutOfRange), so a server can blame the prompt (or messages) rather
// than max_tokens; see IsPromptTooLong().
inline constexpr std::string_view kPromptTooLongPrefix =
    "the prompt is too long";

struct SamplingParams {
  // --- Distribution shaping (see sampler.h for the order of operations). ---

  // Logits are divided by this before softmax. < kGreedyTemperature (including
  // 0) means greedy: argmax, ties to the lowest token id, no randomness used.
  // Valid range [0, kMaxTemperature].
  float temperature = 1.0f;
  // Keep only the k most likely tokens. <= 0 is off (0 is llama.cpp's and
  // OpenAI-compatible servers' "off"; -1 is vLLM's). Valid: >= -1.
  int32_t top_k = 0;
  // Nucleus sampling: keep the smallest most-likely prefix whose probability
  // mass is >= top_p. 1 is off. Valid range (0, 1].
  float top_p = 1.0f;
  // Keep tokens whose probability is >= min_p * (probability of the most
  // likely token). 0 is off. Valid range [0, 1].
  float min_p = 0.0f;

  // --- Penalties (see sampler.h for which tokens each one counts). ---

  // llama.cpp style: each distinct token among the last `penalty_last_n`
  // tokens of prompt + generated text has a positive logit divided by this and
  // a negative one multiplied by it. 1 is off. Valid: > 0.
  float repetition_penalty = 1.0f;
  // Window of repetition_penalty: -1 = the whole context, 0 = disabled,
  // n > 0 = the last n tokens (llama.cpp repeat_last_n, default 64).
  int32_t penalty_last_n = 64;
  // OpenAI style, over all generated tokens (not the prompt):
  //   logit -= presence_penalty * [count > 0] + frequency_penalty * count.
  // Valid range [-2, 2] each; 0 is off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;

  // Token id -> additive bias, applied before everything else. OpenAI range
  // [-100, 100]; -100 practically bans a token. Ids must be < vocab_size.
  // A repeated id adds up.
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Seed of the sampler's PRNG. Unset: drawn from std::random_device (the
  // Sampler reports the seed it used). Same seed + same params + same logits
  // give the same tokens on every platform.
  std::optional<uint64_t> seed;

  // --- Length and stopping. ---

  // Most tokens to generate; -1 = no limit other than the context (the engine
  // enforces that). Valid: -1 or >= 1.
  int32_t max_tokens = -1;
  // End-of-generation tokens are banned (logit -inf) until this many tokens
  // have been generated (vLLM's min_tokens). Stop strings still apply.
  // Valid: >= 0 and <= max_tokens when max_tokens is set.
  int32_t min_tokens = 0;
  // When true, end-of-generation tokens do not end generation (they are
  // sampled and emitted like any other token). Load testers use this to pin
  // the output length.
  bool ignore_eos = false;
  // Generation ends, with finish reason "stop", at the first occurrence of any
  // of these in the generated text; the stop string is not part of the output.
  // Empty strings are ignored. At most kMaxStopStrings, each at most
  // kMaxStopStringBytes bytes.
  std::vector<std::string> stop;

  // --- Logprobs (see ComputeLogprobs in sampling_ops.h). ---

  // Report the log-probability of each chosen token.
  bool logprobs = false;
  // Also report this many most likely alternatives per position, 0..20.
  // > 0 requires logprobs (as OpenAI requires).
  int32_t top_logprobs = 0;

  // True when sampling is argmax and never touches the PRNG.
  bool IsGreedy() const { return !(temperature >= kGreedyTemperature); }

  // OK, or InvalidArgument naming the first bad field and its valid range,
  // e.g. "top_p must be in (0, 1], got 1.5". NaN is out of every range.
  // min_tokens <= max_tokens is only checked when max_tokens is set; use
  // Resolve() to check it against the context too.
  Status Validate(int64_t vocab_size) const;

  // A copy with the context-dependent defaults filled in, for a prompt of
  // `prompt_tokens` tokens (>= 1; the caller checks emptiness) in a context
  // of `n_ctx` positions (prompt + generated): max_tokens -1 becomes
  // min(n_ctx - prompt_tokens, INT32_MAX). The result passes Validate().
  // Errors, in this order (each message starts with the field a server
  // should name):
  //  - InvalidArgument: Validate(vocab_size) failed;
  //  - OutOfRange "the prompt is too long: it has N tokens and the context
  //    holds M, which must leave room for at least one generated token"
  //    (prompt_tokens >= n_ctx; IsPromptTooLong() is true for it);
  //  - OutOfRange "max_tokens (K) is too large: the prompt's N tokens + K
  //    exceed the context of M tokens" (max_tokens set, N + K > M);
  //  - InvalidArgument "min_tokens (m) must not exceed the R tokens the
  //    context of M leaves after the prompt's N" (max_tokens unset,
  //    m > R = M - N); "min_tokens (m) must not exceed max_tokens (K)" when
  //    set (from Validate).
  Result<SamplingParams> Resolve(int64_t vocab_size, int64_t n_ctx,
                                 int64_t prompt_tokens) const;
};

// True for the OutOfRange error Resolve() returns when the prompt alone fills
// the context (message starts with kPromptTooLongPrefix).
bool IsPromptTooLong(const Status& status);

}  // namespace redline::model

#endif  // REDLINE_MODEL_SAMPLING_SAMPLING_PARAMS_H_
