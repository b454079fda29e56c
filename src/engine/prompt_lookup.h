// Prompt-lookup (n-gram) drafting for speculative decoding: the draft for
// the next tokens is what followed the latest earlier occurrence of the
// sequence's last n tokens (n from ngram_max down to ngram_min), in the
// prompt or the output so far. No second model; large wins where the
// output repeats its input (summaries, quotes, code edits, RAG answers).
//
// DraftController adapts the draft length to the running acceptance rate:
// drafts that keep being rejected cost a wider verification pass for
// nothing, so the length grows after fully accepted drafts, shrinks to just
// past the accepted part after partly accepted ones, and drops to 0 (plain
// decoding) after a draft of which nothing was accepted. While it is 0, the
// caller tells it whether a free one-token "shadow" draft, computed before
// each plain step, named the token that step gave; the first hit turns
// drafting back on at the length that was rejected (an edited quote goes
// on being quoted at full length). A shadow draft needs no pass of any
// model, so an output that never repeats its input costs one rejected
// draft and nothing after it, and one that starts quoting later is caught
// at once. Drafts from a draft model are not free, so with `shadow` false
// the controller instead probes with a short draft every kProbeInterval
// steps.
//
// Within that length, what a pass costs decides how much to draft. With
// per-token acceptance a (a recency-weighted rate over verified drafts and
// shadow drafts) a draft of L tokens yields 1 + a + ... + a^L tokens per
// pass, and a pass of L + 1 tokens costs 1 + s * L plain steps, s the
// measured cost of one more token relative to a plain step (RecordPass).
// The controller drafts the L that gives the most tokens per unit of time,
// and none when no L beats a plain step: on a memory-bound model s is a few
// percent and long drafts pay at modest acceptance; on a model whose
// weights fit in cache, s is a third of a step and only well-accepted
// drafts do. Until a wide pass has been timed, the whole length is used.
//
// Verification (the caller's part) is exact for any sampling: the target's
// token at each drafted position is sampled from its own logits as plain
// decoding would, and drafting continues only while it equals the draft, so
// the output is the one plain decoding produces (engine/generator.h).
//
// Thread-safety: thread-compatible. Cost: DraftFromHistory scans at most
// kMaxLookback tokens of history per n (about 5 us for all of them on
// Zen 5, engine_bench).
#ifndef REDLINE_ENGINE_PROMPT_LOOKUP_H_
#define REDLINE_ENGINE_PROMPT_LOOKUP_H_

#include <cstdint>
#include <span>
#include <vector>

namespace redline::engine {

struct SpeculativeOptions {
  bool enabled = false;
  int max_draft_tokens = 8;  // k, the most tokens verified per pass
  int ngram_max = 3;
  int ngram_min = 2;
  // Draft only as much as the measured pass cost pays for (below); off:
  // the whole adapted length, whatever a pass costs (for tests that count
  // accepted tokens, which must not depend on timing).
  bool pace_by_cost = true;
};

// How speculation went for one sequence.
struct SpeculativeStats {
  int64_t drafted_tokens = 0;   // proposed
  int64_t accepted_tokens = 0;  // proposed and kept
  int64_t target_passes = 0;    // decode forward passes of the target
  int64_t tokens_emitted = 0;   // tokens produced by those passes
  double acceptance_rate() const {
    return drafted_tokens > 0
               ? static_cast<double>(accepted_tokens) / drafted_tokens
               : 0;
  }
  double tokens_per_pass() const {
    return target_passes > 0
               ? static_cast<double>(tokens_emitted) / target_passes
               : 0;
  }
};

inline constexpr int64_t kMaxLookback = 8192;

// `max_tokens` tokens that followed the latest earlier match of the
// history's last n tokens (longest n first), continued periodically past
// the end of the history; empty when nothing matches.
std::vector<int32_t> DraftFromHistory(std::span<const int32_t> history,
                                      int max_tokens, int ngram_max,
                                      int ngram_min);

namespace ref {
// The same draft, found by comparing whole n-grams position by position
// and continuing past the end by extending a copy of the history: the
// slow, plain reading of the rule above, for tests and engine_bench.
std::vector<int32_t> DraftFromHistory(std::span<const int32_t> history,
                                      int max_tokens, int ngram_max,
                                      int ngram_min);
}  // namespace ref

class DraftController {
 public:
  static constexpr int kProbeInterval = 16;

  explicit DraftController(int max_draft_tokens, bool shadow = true,
                           bool pace_by_cost = true)
      : max_(max_draft_tokens),
        k_(max_draft_tokens),
        shadow_(shadow),
        pace_by_cost_(pace_by_cost) {}

  // The draft length to use now (0: decode plainly this step).
  int NextLength();
  // Whether the caller should compute a one-token shadow draft before this
  // plain step (the last NextLength was 0) and report it with RecordShadow.
  bool wants_shadow() const { return shadow_ && last_ == 0; }
  // After a verified draft of `drafted` tokens of which `accepted` matched.
  void Record(int drafted, int accepted);
  // After a plain step with a shadow draft: whether it named the token.
  void RecordShadow(bool hit);
  // A target pass of `width` tokens of this sequence (1: plain) took
  // `seconds`, drafting included.
  void RecordPass(int width, double seconds);

  // The per-token acceptance estimate (1 before any evidence).
  double acceptance() const;
  // The cost of one more token in a pass, in plain steps; negative until
  // a plain and a wide pass have been timed.
  double extra_token_cost() const;

 private:
  // The L <= limit with the most expected tokens per unit of time.
  int BestLength(int limit) const;
  void Observe(double hits, double trials);

  int max_;
  int k_;
  bool shadow_;
  bool pace_by_cost_;
  int idle_steps_ = 0;
  int resume_ = 1;  // the length to draft after a shadow hit
  int last_ = -1;   // the last NextLength
  // Recency-weighted counts of accepted draft tokens and of draft tokens
  // tried (accepted ones and the first rejected one of each draft).
  double hits_ = 0;
  double trials_ = 0;
  // Moving averages of plain pass seconds, and of wide passes' seconds
  // and widths (0: none seen).
  double plain_s_ = 0;
  double wide_s_ = 0;
  double wide_width_ = 0;
};

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_PROMPT_LOOKUP_H_
