#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace redline::engine {
namespace {

std::vector<int32_t> Range(int32_t first, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Runs steps (plan + commit, as after a successful forward pass) until
// `slot` has prefilled its prompt.
void PrefillAll(Scheduler& s, int slot) {
  for (int guard = 0; s.prefilling(slot) && guard < 1000; ++guard)
    s.Commit(s.Plan());
  ASSERT_FALSE(s.prefilling(slot));
}

// Leaves `tokens` cached in `slot`, as a finished request would.
void Fill(Scheduler& s, int slot, std::vector<int32_t> tokens) {
  s.Admit(slot, std::move(tokens));
  PrefillAll(s, slot);
  s.Release(slot);
}

TEST(SchedulerTest, ChoosesTheFreeSlotWithTheLongestCachedPrefix) {
  Scheduler s({.num_slots = 3, .max_batch_tokens = 64, .prefix_cache = true});
  Fill(s, 0, {1, 2, 9, 9});
  Fill(s, 1, {1, 2, 3, 4, 9});
  Fill(s, 2, {7, 7, 7});
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{1, 2, 3, 4, 5, 6}), 1);
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{1, 2, 9, 9, 9}), 0);
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{7, 7}), 2);
  // A busy slot is never chosen, however well it matches.
  s.Admit(1, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{1, 2, 3, 4, 5, 6}), 0);
  s.Admit(0, {5});
  s.Admit(2, {5});
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{1}), -1);
}

TEST(SchedulerTest, WithoutASharedPrefixTheLeastRecentlyUsedSlotWins) {
  Scheduler s({.num_slots = 3, .max_batch_tokens = 64, .prefix_cache = true});
  // Never-used slots first, lowest index first.
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{5}), 0);
  Fill(s, 0, {10, 11});
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{5}), 1);
  Fill(s, 1, {20, 21});
  Fill(s, 2, {30, 31});
  // Released in the order 0, 1, 2: 0 is the least recently used.
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{5}), 0);
  Fill(s, 0, {40});
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{5}), 1);
  // Equal prefixes: least recently used among them.
  Fill(s, 1, {8, 1});
  Fill(s, 2, {8, 2});
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{8, 3}), 1);
}

TEST(SchedulerTest, PrefixCacheOffIgnoresCachedTokens) {
  Scheduler s({.num_slots = 2, .max_batch_tokens = 64, .prefix_cache = false});
  Fill(s, 0, {1, 2, 3});
  Fill(s, 1, {4, 5, 6});
  EXPECT_EQ(s.ChooseSlot(std::vector<int32_t>{4, 5, 6, 7}), 0);  // LRU
  EXPECT_EQ(s.Admit(1, {4, 5, 6, 7}), 0);
  EXPECT_EQ(s.prompt_done(1), 0);
  EXPECT_TRUE(s.cached(1).empty());
}

TEST(SchedulerTest, AdmitKeepsTheSharedPrefixButNeverTheLastPromptToken) {
  Scheduler s({.num_slots = 1, .max_batch_tokens = 64, .prefix_cache = true});
  Fill(s, 0, {1, 2, 3, 4, 5});
  // A longer prompt reuses all five cached tokens.
  EXPECT_EQ(s.Admit(0, {1, 2, 3, 4, 5, 6, 7}), 5);
  BatchPlan plan = s.Plan();
  ASSERT_EQ(plan.tokens.size(), 2u);
  EXPECT_EQ(plan.tokens[0].pos, 5);
  EXPECT_EQ(plan.tokens[0].token, 6);
  EXPECT_FALSE(plan.tokens[0].want_logits);
  EXPECT_TRUE(plan.tokens[1].want_logits);
  s.Commit(plan);
  s.Release(0);
  // The same prompt again: the last token runs again for its logits.
  EXPECT_EQ(s.Admit(0, {1, 2, 3, 4, 5, 6, 7}), 6);
  plan = s.Plan();
  ASSERT_EQ(plan.tokens.size(), 1u);
  EXPECT_EQ(plan.tokens[0].pos, 6);
  EXPECT_EQ(plan.tokens[0].token, 7);
  EXPECT_TRUE(plan.tokens[0].want_logits);
  EXPECT_EQ(plan.logit_slots, std::vector<int>{0});
  s.Commit(plan);
  s.Release(0);
  // A diverging prompt keeps only the common part; the rest is dropped.
  EXPECT_EQ(s.Admit(0, {1, 2, 9}), 2);
  EXPECT_EQ(s.cached(0).size(), 2u);
}

TEST(SchedulerTest, LongPromptsArePrefilledInChunksOfTheBatchBudget) {
  Scheduler s({.num_slots = 1, .max_batch_tokens = 4, .prefix_cache = true});
  s.Admit(0, Range(100, 10));
  std::vector<int64_t> chunks;
  int64_t next_pos = 0;
  while (s.prefilling(0)) {
    BatchPlan plan = s.Plan();
    chunks.push_back(plan.prefill_tokens);
    EXPECT_EQ(plan.decode_tokens, 0);
    for (const PlannedToken& t : plan.tokens) {
      EXPECT_EQ(t.slot, 0);
      EXPECT_EQ(t.pos, next_pos);
      EXPECT_EQ(t.token, 100 + next_pos);
      EXPECT_EQ(t.want_logits, next_pos == 9);
      ++next_pos;
    }
    EXPECT_EQ(plan.logit_slots.size(), next_pos == 10 ? 1u : 0u);
    s.Commit(plan);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(s.prompt_done(0), 10);
  // Then decode: one token per step at the next position.
  s.SetPending(0, 7);
  BatchPlan plan = s.Plan();
  ASSERT_EQ(plan.tokens.size(), 1u);
  EXPECT_EQ(plan.tokens[0].token, 7);
  EXPECT_EQ(plan.tokens[0].pos, 10);
  EXPECT_TRUE(plan.tokens[0].want_logits);
  EXPECT_EQ(plan.decode_tokens, 1);
  s.Commit(plan);
  EXPECT_EQ(s.cached(0).size(), 11u);
  EXPECT_EQ(s.cached(0).back(), 7);
  // No pending token: nothing to run until the next sample.
  EXPECT_TRUE(s.Plan().empty());
}

TEST(SchedulerTest, DecodingStreamsAdvanceEveryStepWhileALongPromptPrefills) {
  Scheduler s({.num_slots = 3, .max_batch_tokens = 8, .prefix_cache = true});
  s.Admit(0, {1, 2});
  s.Admit(1, {3, 4});
  PrefillAll(s, 0);
  PrefillAll(s, 1);
  s.SetPending(0, 50);
  s.SetPending(1, 60);
  s.Admit(2, Range(1000, 100));  // long prompt
  int steps = 0;
  while (s.prefilling(2)) {
    BatchPlan plan = s.Plan();
    // Decode tokens first, in slot order, then the prompt chunk with the
    // rest of the budget.
    ASSERT_GE(plan.tokens.size(), 3u);
    EXPECT_EQ(plan.tokens[0].slot, 0);
    EXPECT_EQ(plan.tokens[1].slot, 1);
    EXPECT_EQ(plan.decode_tokens, 2);
    EXPECT_LE(plan.prefill_tokens, 6);
    EXPECT_EQ(plan.logit_slots[0], 0);
    EXPECT_EQ(plan.logit_slots[1], 1);
    s.Commit(plan);
    s.SetPending(0, 50 + steps);
    s.SetPending(1, 60 + steps);
    ++steps;
  }
  EXPECT_EQ(steps, 17);  // ceil(100 / 6)
  EXPECT_EQ(s.cached(0).size(), 2u + 17u);
  EXPECT_EQ(s.cached(1).size(), 2u + 17u);
  EXPECT_EQ(s.running(), 3);
  EXPECT_EQ(s.running_tokens(), 19 + 19 + 100);
}

TEST(SchedulerTest, PromptsArePrefilledInAdmissionOrder) {
  Scheduler s({.num_slots = 3, .max_batch_tokens = 4, .prefix_cache = true});
  // Admitted into slots 2, 0, 1 in that order.
  s.Admit(2, Range(200, 6));
  s.Admit(0, Range(0, 3));
  s.Admit(1, Range(100, 2));
  BatchPlan p1 = s.Plan();
  ASSERT_EQ(p1.prefill_chunks.size(), 1u);
  EXPECT_EQ(p1.prefill_chunks[0], (std::pair<int, int64_t>{2, 4}));
  s.Commit(p1);
  // The oldest finishes its prompt; the next one gets what is left.
  BatchPlan p2 = s.Plan();
  ASSERT_EQ(p2.prefill_chunks.size(), 2u);
  EXPECT_EQ(p2.prefill_chunks[0], (std::pair<int, int64_t>{2, 2}));
  EXPECT_EQ(p2.prefill_chunks[1], (std::pair<int, int64_t>{0, 2}));
  EXPECT_EQ(p2.logit_slots, std::vector<int>{2});
  s.Commit(p2);
  BatchPlan p3 = s.Plan();
  ASSERT_EQ(p3.prefill_chunks.size(), 2u);
  EXPECT_EQ(p3.prefill_chunks[0], (std::pair<int, int64_t>{0, 1}));
  EXPECT_EQ(p3.prefill_chunks[1], (std::pair<int, int64_t>{1, 2}));
  EXPECT_EQ(p3.logit_slots, (std::vector<int>{0, 1}));
}

TEST(SchedulerTest, TheBatchBudgetAlwaysHoldsEveryDecodingSequence) {
  Scheduler s({.num_slots = 3, .max_batch_tokens = 1, .prefix_cache = true});
  EXPECT_EQ(s.options().max_batch_tokens, 3);
  for (int i = 0; i < 3; ++i) s.Admit(i, {i + 1});
  for (int i = 0; i < 3; ++i) PrefillAll(s, i);
  for (int i = 0; i < 3; ++i) s.SetPending(i, 9);
  EXPECT_EQ(s.Plan().decode_tokens, 3);
}

TEST(SchedulerDeathTest, AdmittingIntoABusySlotIsABug) {
  Scheduler s({.num_slots = 1, .max_batch_tokens = 4, .prefix_cache = true});
  s.Admit(0, {1});
  EXPECT_DEATH(s.Admit(0, {2}), "busy");
}

}  // namespace
}  // namespace redline::engine
