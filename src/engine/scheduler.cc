#include "engine/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace redline::engine {
namespace {

// Length of the common prefix of a and b.
int64_t SharedPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t limit = std::min(a.size(), b.size());
  size_t n = 0;
  while (n < limit && a[n] == b[n]) ++n;
  return static_cast<int64_t>(n);
}

}  // namespace

Scheduler::Scheduler(const SchedulerOptions& options) : options_(options) {
  options_.num_slots = std::max(1, options_.num_slots);
  options_.max_batch_tokens =
      std::max<int64_t>(options_.max_batch_tokens, options_.num_slots);
  slots_.resize(static_cast<size_t>(options_.num_slots));
}

size_t Scheduler::Index(int slot) const {
  RL_CHECK(slot >= 0 && slot < num_slots()) << "slot " << slot;
  return static_cast<size_t>(slot);
}

int Scheduler::ChooseSlot(std::span<const int32_t> prompt) const {
  int best = -1;
  int64_t best_prefix = -1;
  for (int i = 0; i < num_slots(); ++i) {
    const Slot& s = slots_[static_cast<size_t>(i)];
    if (s.active) continue;
    const int64_t prefix =
        options_.prefix_cache ? SharedPrefix(s.cached, prompt) : 0;
    if (prefix > best_prefix ||
        (prefix == best_prefix &&
         s.last_used < slots_[static_cast<size_t>(best)].last_used)) {
      best = i;
      best_prefix = prefix;
    }
  }
  return best;
}

int64_t Scheduler::Admit(int slot, std::vector<int32_t> prompt) {
  Slot& s = slots_[Index(slot)];
  RL_CHECK(!s.active) << "slot " << slot << " is busy";
  RL_CHECK(!prompt.empty());
  // Always run at least the last prompt token: its logits give the first
  // generated token.
  int64_t keep = 0;
  if (options_.prefix_cache) {
    keep = std::min<int64_t>(SharedPrefix(s.cached, prompt),
                             static_cast<int64_t>(prompt.size()) - 1);
  }
  s.cached.resize(static_cast<size_t>(keep));
  s.active = true;
  s.prompt = std::move(prompt);
  s.prompt_done = keep;
  s.pending = -1;
  s.draft.clear();
  s.last_used = ++clock_;
  s.admitted = clock_;
  return keep;
}

void Scheduler::Release(int slot) {
  Slot& s = slots_[Index(slot)];
  s.active = false;
  s.prompt.clear();
  s.prompt.shrink_to_fit();
  s.prompt_done = 0;
  s.pending = -1;
  s.draft.clear();
  s.last_used = ++clock_;
}

bool Scheduler::prefilling(int slot) const {
  const Slot& s = slots_[Index(slot)];
  return s.active && s.prompt_done < static_cast<int64_t>(s.prompt.size());
}

int Scheduler::running() const {
  return static_cast<int>(std::count_if(
      slots_.begin(), slots_.end(), [](const Slot& s) { return s.active; }));
}

int64_t Scheduler::running_tokens() const {
  int64_t n = 0;
  for (const Slot& s : slots_) {
    if (s.active) n += static_cast<int64_t>(s.cached.size());
  }
  return n;
}

BatchPlan Scheduler::Plan() const {
  BatchPlan plan;
  int64_t budget = options_.max_batch_tokens;
  // 1. One token per decoding sequence (budget >= num_slots: always fits),
  //    then its draft while the budget lasts.
  int decoding = 0;
  for (int i = 0; i < num_slots(); ++i) {
    const Slot& s = slots_[static_cast<size_t>(i)];
    if (s.active && !prefilling(i) && s.pending >= 0) ++decoding;
  }
  budget -= decoding;
  for (int i = 0; i < num_slots(); ++i) {
    const Slot& s = slots_[static_cast<size_t>(i)];
    if (!s.active || prefilling(i) || s.pending < 0) continue;
    const int64_t pos = static_cast<int64_t>(s.cached.size());
    plan.tokens.push_back({i, s.pending, pos, true});
    plan.logit_slots.push_back(i);
    plan.logit_draft_index.push_back(-1);
    ++plan.decode_tokens;
    const int64_t n = std::min<int64_t>(budget, s.draft.size());
    for (int64_t k = 0; k < n; ++k) {
      plan.tokens.push_back({i, s.draft[static_cast<size_t>(k)], pos + 1 + k,
                             true, static_cast<int>(k)});
      plan.logit_slots.push_back(i);
      plan.logit_draft_index.push_back(static_cast<int>(k));
    }
    budget -= n;
    plan.draft_tokens += n;
  }
  // 2. Prompt chunks, oldest admission first.
  std::vector<int> order;
  for (int i = 0; i < num_slots(); ++i) {
    if (prefilling(i)) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return slots_[static_cast<size_t>(a)].admitted <
           slots_[static_cast<size_t>(b)].admitted;
  });
  for (int i : order) {
    if (budget <= 0) break;
    const Slot& s = slots_[static_cast<size_t>(i)];
    const int64_t size = static_cast<int64_t>(s.prompt.size());
    const int64_t n = std::min<int64_t>(budget, size - s.prompt_done);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t pos = s.prompt_done + k;
      const bool last = pos + 1 == size;
      plan.tokens.push_back({i, s.prompt[static_cast<size_t>(pos)], pos, last});
      if (last) {
        plan.logit_slots.push_back(i);
        plan.logit_draft_index.push_back(-1);
      }
    }
    plan.prefill_chunks.push_back({i, n});
    budget -= n;
    plan.prefill_tokens += n;
  }
  return plan;
}

void Scheduler::Commit(const BatchPlan& plan) {
  for (Slot& s : slots_) s.draft.clear();
  for (const PlannedToken& t : plan.tokens) {
    if (t.draft_index >= 0) continue;  // cached only once accepted
    Slot& s = slots_[Index(t.slot)];
    RL_CHECK(static_cast<int64_t>(s.cached.size()) == t.pos)
        << "slot " << t.slot << " caches " << s.cached.size()
        << " tokens; planned position " << t.pos;
    s.cached.push_back(t.token);
    if (s.active && prefilling(t.slot)) {
      ++s.prompt_done;
    } else {
      s.pending = -1;  // the decode token has run
    }
  }
}

void Scheduler::AcceptDrafts(int slot, std::span<const int32_t> tokens) {
  Slot& s = slots_[Index(slot)];
  RL_CHECK(s.active && !prefilling(slot));
  s.cached.insert(s.cached.end(), tokens.begin(), tokens.end());
}

void Scheduler::SetDraft(int slot, std::vector<int32_t> draft) {
  Slot& s = slots_[Index(slot)];
  RL_CHECK(s.active && !prefilling(slot) && s.pending >= 0);
  s.draft = std::move(draft);
}

void Scheduler::SetPending(int slot, int32_t token) {
  Slot& s = slots_[Index(slot)];
  RL_CHECK(s.active && !prefilling(slot));
  s.pending = token;
}

}  // namespace redline::engine
