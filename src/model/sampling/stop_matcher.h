// When generation ends, and what text may be streamed before it does.
//
//  - StopMatcher: streaming stop-string detection on generated text. Text
//    arrives in pieces (one per token); it emits what is safe now and holds
//    back any tail that could still become a stop string, or that is an
//    incomplete UTF-8 sequence, so a client never sees text that is later
//    taken back and never gets a character split across two chunks.
//  - EndOfGenerationSet: the model's end-of-generation token ids.
//  - FinishChecker: combines both with max_tokens and ignore_eos into the
//    per-token decision the engine needs, and reports FinishReason.
//
// Ownership: each class owns copies of what it is given. Thread-safety:
// thread-compatible (one per sequence).
#ifndef REDLINE_MODEL_SAMPLING_STOP_MATCHER_H_
#define REDLINE_MODEL_SAMPLING_STOP_MATCHER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/sampling/sampling_params.h"

namespace redline::model {

// Why a sequence stopped, as OpenAI's finish_reason names it.
enum class FinishReason {
  kNone,    // still running
  kStop,    // end-of-generation token or stop string
  kLength,  // max_tokens reached (the engine also uses it for a full context)
};

// "stop", "length"; "" for kNone (serialize as JSON null).
std::string_view FinishReasonName(FinishReason reason);

// Number of bytes at the end of `text` that form an incomplete but so far
// valid-looking UTF-8 sequence (a lead byte followed by fewer continuation
// bytes than it announces): 0..3. Bytes that can never become valid UTF-8 are
// not held (they would be held forever).
size_t IncompleteUtf8Suffix(std::string_view text);

class StopMatcher {
 public:
  // Copies `stops`; empty strings are ignored. No stops: only UTF-8 holding.
  explicit StopMatcher(std::span<const std::string> stops);

  // Appends `piece` to the text seen so far and appends to *out the text that
  // is now safe to emit. Returns true when a stop string has completed: *out
  // then ends exactly before that stop string, the stop string and anything
  // after it are dropped, and every later call returns true and emits
  // nothing.
  //
  // Which stop wins: the one that completes first in the text (earliest
  // end), and among those ending at the same byte the longest. This makes the
  // result independent of how the text is cut into pieces.
  //
  // Held back: the longest tail that is a proper prefix of some stop string,
  // and any incomplete UTF-8 sequence at the end. Cost: O(held + |piece|)
  // per stop string for the search, plus O(L^2) per stop string for the
  // hold-back check (L = stop length, <= kMaxStopStringBytes).
  bool Feed(std::string_view piece, std::string* out);

  // The stream ended without a stop (EOG token, max_tokens, context full):
  // appends everything still held back to *out, even an incomplete UTF-8
  // tail (the caller may replace it with U+FFFD). No-op after a stop.
  void Flush(std::string* out);

  bool stopped() const { return stopped_; }
  // Index, in the constructor's list, of the stop string that matched; -1
  // before a stop. (vLLM reports it as stop_reason.)
  int matched_stop() const { return matched_stop_; }
  // Bytes currently held back.
  size_t held_bytes() const { return held_.size(); }

 private:
  // Length of the longest tail of held_ that is a proper prefix of a stop.
  size_t StopPrefixSuffix() const;

  std::vector<std::string> stops_;
  // stops_[i] is the constructor's stops[stop_index_[i]].
  std::vector<int> stop_index_;
  std::string held_;
  bool stopped_ = false;
  int matched_stop_ = -1;
};

// The model's end-of-generation token ids (EOS, EOT, <|im_end|>, ...). Small:
// a sorted vector.
class EndOfGenerationSet {
 public:
  EndOfGenerationSet() = default;
  // Sorts and removes duplicates.
  explicit EndOfGenerationSet(std::vector<int32_t> tokens);

  bool Contains(int32_t token) const;
  // Sorted, distinct.
  std::span<const int32_t> tokens() const { return tokens_; }

 private:
  std::vector<int32_t> tokens_;
};

// Per-sequence finish logic. Call Accept() once per generated token, in
// order, with the detokenized text piece of that token.
//
// Rules, in order, for the n-th generated token (n counts EOG tokens too):
//  1. An end-of-generation token ends with kStop unless params.ignore_eos;
//     its own text is not emitted, held-back text is flushed. (Before
//     min_tokens the Sampler never picks one.)
//  2. Its text goes through the StopMatcher; a completed stop string ends
//     with kStop (a stop string beats max_tokens on the same token).
//  3. n == params.max_tokens ends with kLength; held-back text is flushed.
class FinishChecker {
 public:
  FinishChecker(const SamplingParams& params, EndOfGenerationSet eog);

  // Appends the text that may be streamed now to *out and returns kNone to
  // continue or the reason generation has ended. Calling it after the end is
  // a bug (RL_CHECK).
  FinishReason Accept(int32_t token, std::string_view piece, std::string* out);

  // Ends the sequence for an outside reason (context full, cancel): flushes
  // held-back text into *out and records `reason`. No-op once finished.
  void Finish(FinishReason reason, std::string* out);

  FinishReason finish_reason() const { return finish_; }
  int64_t num_generated() const { return num_generated_; }
  const StopMatcher& stop_matcher() const { return matcher_; }

 private:
  StopMatcher matcher_;
  EndOfGenerationSet eog_;
  int32_t max_tokens_;
  bool ignore_eos_;
  int64_t num_generated_ = 0;
  FinishReason finish_ = FinishReason::kNone;
};

}  // namespace redline::model

#endif  // REDLINE_MODEL_SAMPLING_STOP_MATCHER_H_
