// The steps of sampling as plain functions, so each can be tested exactly on
// hand-made logits. Sampler (sampler.h) chains them in its documented order;
// nothing here holds state or randomness.
//
// Two representations:
//  - Dense logits: std::span<float> over the whole vocabulary
//    ([vocab_size], indexed by token id). Bias, bans and penalties edit it in
//    place and cost O(number of tokens touched), never O(vocab_size).
//  - CandidateList: the (token, logit, prob) triples still in the running.
//    Temperature, top-k, softmax, top-p, min-p and the draw work on it, so that
//    after top-k only k entries are touched.
//
// Canonical order: logit descending, then token id ascending. Every tie
// (greedy, top-k boundary, top-p boundary, top logprobs) is broken towards the
// lowest token id. Functions that sort use this total order, never an
// implementation-defined one (std::nth_element leaves the rest unordered, so
// each use of it is followed by a sort of what is kept); results are therefore
// identical across standard libraries.
//
// Probabilities are computed with PortableExp (below) and summed in double in
// a fixed order, so a given list gives bit-identical probabilities on every
// IEEE-754 platform. The .cc files are built with -ffp-contract=off so no
// compiler fuses multiply-adds differently.
//
// Non-finite logits: NaN and -inf mean "impossible". FillCandidates and
// SelectTopK drop them; Argmax and ComputeLogprobs skip NaN. +inf is kept and
// dominates: Softmax gives the +inf tokens all of the mass, equally.
//
// Thread-safety: all functions are reentrant; they touch only their arguments.
#ifndef REDLINE_MODEL_SAMPLING_SAMPLING_OPS_H_
#define REDLINE_MODEL_SAMPLING_SAMPLING_OPS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "model/sampling/sampling_params.h"

namespace redline::model {

// One token still in the running.
struct Candidate {
  int32_t token = 0;
  float logit = 0.0f;  // after bias, penalties and (once applied) temperature
  float prob = 0.0f;   // valid after Softmax; 0 before
};

struct CandidateList {
  std::vector<Candidate> items;
  // True when `items` is in canonical order (logit desc, token asc). Set by
  // SelectTopK and ApplyTopK, and by ApplyTopP when it had to sort; steps that
  // need the order use it to skip sorting.
  bool sorted = false;
};

// The canonical order: true when `a` ranks before `b`.
inline bool CandidateBefore(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

// exp(x) computed with only IEEE-754 double + and * in a fixed order (no
// libm), so it is bit-identical on every platform; libm's exp may differ in
// the last place between implementations. Relative error < 3e-10 for x in
// [-708, 709] (subnormal results lose precision gradually); 0 below -745,
// +inf above 709.7, NaN for NaN. About 20 flops.
double PortableExp(double x);

// ---------------------------------------------------------------------------
// Dense logits: logits is [vocab_size], indexed by token id. Token ids given
// to these functions must be in [0, vocab_size) (RL_DCHECK; skipped in release
// builds). Costs exclude the O(vocab_size) scans only where stated.
// ---------------------------------------------------------------------------

// logits[id] += bias for each (id, bias). A repeated id adds up. O(|bias|).
void ApplyLogitBias(std::span<float> logits,
                    std::span<const std::pair<int32_t, float>> bias);

// logits[id] = -inf for each id (used to hold back end-of-generation tokens
// before min_tokens). O(|tokens|).
void BanTokens(std::span<float> logits, std::span<const int32_t> tokens);

// llama.cpp repetition penalty: each DISTINCT token in `window` (counted once
// however often it occurs) gets logit / penalty if logit > 0, else
// logit * penalty. penalty == 1 or an empty window is a no-op.
// `scratch` (may be null) is reused to avoid allocating. O(w log w).
void ApplyRepetitionPenalty(std::span<float> logits,
                            std::span<const int32_t> window, float penalty,
                            std::vector<int32_t>* scratch = nullptr);

// OpenAI presence/frequency penalties: for each token occurring c > 0 times in
// `tokens`: logit -= c * frequency + presence. Both 0 is a no-op. `scratch` as
// above. O(n log n).
void ApplyPresenceFrequencyPenalty(std::span<float> logits,
                                   std::span<const int32_t> tokens,
                                   float presence, float frequency,
                                   std::vector<int32_t>* scratch = nullptr);

// The window repetition_penalty looks at: the last `penalty_last_n` tokens of
// `history` (all of it for -1, none for 0).
std::span<const int32_t> RepetitionWindow(std::span<const int32_t> history,
                                          int32_t penalty_last_n);

// All penalties of `params`, in this order:
//  1. repetition_penalty over RepetitionWindow(history, penalty_last_n),
//     i.e. prompt and generated tokens alike (llama.cpp);
//  2. presence_penalty and frequency_penalty over the generated tokens only,
//     history[num_prompt_tokens:], all of them, not windowed (OpenAI, vLLM).
// history is prompt + generated so far; num_prompt_tokens <= history.size().
void ApplyPenalties(std::span<float> logits, std::span<const int32_t> history,
                    size_t num_prompt_tokens, const SamplingParams& params,
                    std::vector<int32_t>* scratch = nullptr);

// Index of the largest logit, ties to the lowest id; NaN is skipped. Returns 0
// when every logit is NaN. O(vocab_size).
int32_t Argmax(std::span<const float> logits);

// ---------------------------------------------------------------------------
// Candidate lists.
// ---------------------------------------------------------------------------

// Every token whose logit is not NaN or -inf, in token order; prob = 0,
// sorted = false. Reuses out's capacity. O(vocab_size).
void FillCandidates(std::span<const float> logits, CandidateList* out);

// The same result as FillCandidates + ApplyTopK(k), without materializing the
// whole vocabulary: one pass with a k-entry heap, O(vocab_size + m log k)
// where m (the heap replacements) is small for real logits. Output sorted.
// k <= 0 means FillCandidates (unsorted).
void SelectTopK(std::span<const float> logits, int32_t k, CandidateList* out);

// logit *= 1 / temperature for every candidate (one division, then
// multiplies); temperature == 1 is a no-op. temperature > 0 (RL_DCHECK).
// Order-preserving, so it commutes with top-k and keeps `sorted`.
void ApplyTemperature(CandidateList* list, float temperature);

// Keeps exactly the first min(k, size) candidates in canonical order: the k
// largest logits, and at a tie on the boundary the lowest token ids. Leaves
// the list sorted. k <= 0 or k >= size is a no-op (order unchanged).
// O(n + k log k).
void ApplyTopK(CandidateList* list, int32_t k);

// prob = exp(logit - max) / sum over the list. O(n).
void Softmax(CandidateList* list);

// Nucleus: keeps the smallest set of most likely candidates (a prefix in
// canonical order) whose total probability is >= top_p, so at least one
// token. If rounding keeps the sum below top_p, everything is kept.
// top_p >= 1 is a no-op. Precondition: Softmax ran (probs valid).
// Result order: sorted lists and lists of <= 1024 entries come out sorted
// (sorted = true). Larger unsorted lists are bucketed by logit: the buckets
// above the boundary are kept in their current order and only the boundary
// bucket is sorted, so a flat 150k distribution costs O(n); the list is then
// in a deterministic but not canonical order (sorted = false). The mass is
// summed per bucket there, so the boundary may differ from a fully sorted
// run's only when the cumulative sum is within double rounding of top_p.
void ApplyTopP(CandidateList* list, float top_p);

// Keeps candidates with prob >= min_p * (largest prob), in their current
// order (so the most likely token always stays). min_p <= 0 is a no-op.
// Precondition: Softmax ran. O(n).
void ApplyMinP(CandidateList* list, float min_p);

// Scales probs to sum to 1 (after filtering). O(n).
void Renormalize(CandidateList* list);

// Inverse-CDF draw: walks the list in its current order and returns the first
// token at which the cumulative prob exceeds u * (sum of probs). u in [0, 1).
// The list must be non-empty with a positive sum. O(n).
int32_t SampleCandidate(const CandidateList& list, double u);

// ---------------------------------------------------------------------------
// Logprobs.
// ---------------------------------------------------------------------------

struct TokenLogprob {
  int32_t token = 0;
  // Natural log of the probability; -inf for an impossible token (the api
  // layer must map that to something JSON can carry; vLLM uses -9999).
  float logprob = 0.0f;
};

struct SampleLogprobs {
  TokenLogprob chosen;
  // The top_n most likely tokens, most likely first (canonical order).
  std::vector<TokenLogprob> top;
};

// Log-softmax of `logits` ([vocab_size]) for `chosen` and for the top_n most
// likely tokens. Sampler passes the raw model logits (before bias, penalties
// and temperature): the distribution the model produced, as vLLM reports by
// default, so logprobs do not change with sampling settings. Reuses out->top's
// capacity. O(vocab_size * log(top_n)) typical.
void ComputeLogprobs(std::span<const float> logits, int32_t chosen,
                     int32_t top_n, SampleLogprobs* out);

}  // namespace redline::model

#endif  // REDLINE_MODEL_SAMPLING_SAMPLING_OPS_H_
