// Scheduler: the engine's decisions as pure data, testable without a model.
//
// It knows, per slot, the tokens whose K/V the slot's cache holds and, while
// a request runs in the slot, that request's prompt, how much of it has been
// run and the sampled token still to run. From that it decides:
//   - admission: which free slot a prompt goes to (ChooseSlot): the one
//     whose cached tokens share the longest prefix with the prompt (prefix
//     cache), ties and no match going to the least recently used slot;
//     Admit keeps that shared prefix (never the last prompt token, whose
//     logits are needed), so only the rest is prefilled;
//   - each step's batch (Plan): first one token per decoding sequence (in
//     slot order) with its speculative draft tokens when it has some
//     (budget permitting), then prompt chunks of prefilling sequences,
//     oldest admission first, until max_batch_tokens. Decoding streams therefore
//     advance every step however long the prompts being prefilled are, and
//     a long prompt is prefilled over several steps; prompts finish prefill
//     in admission order.
// The engine owns the KV caches and the sequences and applies the plan:
// runs the forward pass, then Commit() (the planned tokens are now cached)
// and SetPending() with each sampled token.
//
// Ownership: owns copies of the prompts and the cached-token lists
// ([n_ctx] int32 per slot at most). Thread-safety: thread-compatible; the
// engine's owner thread alone uses it. Cost: ChooseSlot is O(slots x shared
// prefix), Plan O(slots log slots + batch), Commit O(batch).
#ifndef REDLINE_ENGINE_SCHEDULER_H_
#define REDLINE_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace redline::engine {

struct SchedulerOptions {
  int num_slots = 1;               // >= 1 (smaller is raised to 1)
  int64_t max_batch_tokens = 256;  // raised to num_slots if smaller, so every
                                   // decoding sequence fits in every step
  bool prefix_cache = true;        // off: every admission prefills from 0
};

// One token of a planned forward batch.
struct PlannedToken {
  int slot = -1;
  int32_t token = 0;
  int64_t pos = 0;           // position in the slot's sequence
  bool want_logits = false;  // a decode token, or a prompt's last token
  // A speculative draft token (SetDraft): verified by the pass, cached only
  // when AcceptDrafts says so; its index in the slot's draft, else -1.
  int draft_index = -1;
};

struct BatchPlan {
  // [n_tokens]: decode tokens first (slot order), then prompt chunks (oldest
  // admission first), each chunk's positions consecutive.
  std::vector<PlannedToken> tokens;
  // [n_logit_rows]: the slot of each logits row the forward pass writes, in
  // row (= batch) order, and the draft index of the token whose logits it
  // is (-1: the decode token or a prompt's last token). A slot's draft rows
  // follow its decode row.
  std::vector<int> logit_slots;
  std::vector<int> logit_draft_index;
  // (slot, tokens) of each prompt chunk, in batch order.
  std::vector<std::pair<int, int64_t>> prefill_chunks;
  int64_t decode_tokens = 0;
  int64_t prefill_tokens = 0;
  int64_t draft_tokens = 0;

  bool empty() const { return tokens.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerOptions& options);

  const SchedulerOptions& options() const { return options_; }
  int num_slots() const { return static_cast<int>(slots_.size()); }

  // The free slot for `prompt`, or -1 when every slot is busy. With the
  // prefix cache: the longest prefix shared with the slot's cached tokens;
  // equal prefixes (and no prefix cache) go to the least recently used slot
  // (the lowest index among never-used ones).
  int ChooseSlot(std::span<const int32_t> prompt) const;

  // Starts a request with `prompt` (non-empty) in free `slot` (RL_CHECK).
  // Keeps the slot's cached tokens that equal the prompt's first ones, at
  // most prompt.size() - 1 (none without the prefix cache), and returns how
  // many it kept: the prompt tokens served from the prefix cache.
  int64_t Admit(int slot, std::vector<int32_t> prompt);

  // Ends the request in `slot` (finished, cancelled, failed). Its cached
  // tokens stay for prefix reuse; the slot becomes the most recently used.
  void Release(int slot);

  // The batch for this step (see the file comment); empty when nothing runs.
  BatchPlan Plan() const;

  // The plan's forward pass succeeded: its tokens are now cached (decode
  // tokens appended, prompt chunks appended and counted as prefilled).
  // Draft tokens are not: see AcceptDrafts. Clears every slot's draft.
  void Commit(const BatchPlan& plan);

  // The first `n` draft tokens `slot` verified in the committed plan
  // matched what was sampled: their K/V (written by that pass, from a
  // correct prefix) are now cached too.
  void AcceptDrafts(int slot, std::span<const int32_t> tokens);

  // The token sampled for `slot`'s next position; the next Plan() runs it.
  void SetPending(int slot, int32_t token);
  // Tokens to verify after `slot`'s pending token in the next Plan() (at the
  // next positions), each with logits; fewer when the batch budget is short
  // (every decoding slot's pending token comes first). Empty: none.
  void SetDraft(int slot, std::vector<int32_t> draft);

  bool active(int slot) const { return slots_[Index(slot)].active; }
  // Active and some prompt tokens still to run.
  bool prefilling(int slot) const;
  // Tokens whose K/V the slot's cache holds, in position order.
  std::span<const int32_t> cached(int slot) const {
    return slots_[Index(slot)].cached;
  }
  // Prompt tokens of the slot's request already run (or reused).
  int64_t prompt_done(int slot) const {
    return slots_[Index(slot)].prompt_done;
  }
  int running() const;             // active slots
  int64_t running_tokens() const;  // cached tokens of active slots
  int64_t prompt_tokens(int slot) const {
    return static_cast<int64_t>(slots_[Index(slot)].prompt.size());
  }

 private:
  struct Slot {
    bool active = false;
    std::vector<int32_t> cached;  // [<= n_ctx] tokens with K/V in the cache
    uint64_t last_used = 0;       // logical clock; 0 = never used
    uint64_t admitted = 0;        // admission order of the active request
    std::vector<int32_t> prompt;  // active request's prompt
    int64_t prompt_done = 0;      // of it, tokens whose K/V are cached
    int32_t pending = -1;         // sampled, not yet run; -1 = none
    std::vector<int32_t> draft;   // to verify after `pending`
  };

  size_t Index(int slot) const;

  SchedulerOptions options_;
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;  // ticks on every Admit and Release
};

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_SCHEDULER_H_
