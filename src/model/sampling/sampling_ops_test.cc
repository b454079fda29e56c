#include "model/sampling/sampling_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model/sampling/sampling_rng.h"

namespace redline::model {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<int32_t> Tokens(const CandidateList& list) {
  std::vector<int32_t> out;
  for (const Candidate& c : list.items) out.push_back(c.token);
  return out;
}

// A list with the given probabilities (token i has probs[i]); logits are
// log(prob) so canonical order matches prob order.
CandidateList WithProbs(const std::vector<float>& probs) {
  CandidateList list;
  for (size_t i = 0; i < probs.size(); ++i) {
    list.items.push_back(
        {static_cast<int32_t>(i), std::log(probs[i]), probs[i]});
  }
  return list;
}

TEST(PortableExpTest, MatchesLibmClosely) {
  EXPECT_EQ(PortableExp(0.0), 1.0);
  EXPECT_EQ(PortableExp(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_EQ(PortableExp(-800.0), 0.0);
  EXPECT_TRUE(std::isinf(PortableExp(710.0)));
  EXPECT_TRUE(std::isnan(PortableExp(std::nan(""))));
  for (double x = -708.0; x <= 709.0; x += 0.037) {
    const double want = std::exp(x);
    EXPECT_NEAR(PortableExp(x) / want, 1.0, 3e-10) << x;
  }
  // Subnormal results: still close in absolute terms.
  EXPECT_NEAR(PortableExp(-740.0), std::exp(-740.0), 1e-323);
}

TEST(ArgmaxTest, PicksLargestTiesToLowestIdSkipsNaN) {
  const std::vector<float> a = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(Argmax(a), 1);
  const std::vector<float> b = {kNaN, -kInf, 3.0f, kNaN, 3.0f};
  EXPECT_EQ(Argmax(b), 2);
  const std::vector<float> c = {kNaN, kNaN};
  EXPECT_EQ(Argmax(c), 0);
  const std::vector<float> d = {-kInf, -kInf, -kInf};
  EXPECT_EQ(Argmax(d), 0);
}

TEST(LogitBiasTest, AddsAndAccumulatesRepeatedIds) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const std::vector<std::pair<int32_t, float>> bias = {
      {0, 5.0f}, {2, -100.0f}, {0, 0.5f}};
  ApplyLogitBias(logits, bias);
  EXPECT_EQ(logits, (std::vector<float>{6.5f, 2.0f, -97.0f}));
}

TEST(BanTokensTest, SetsMinusInfinity) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const std::vector<int32_t> ban = {2, 0};
  BanTokens(logits, ban);
  EXPECT_EQ(logits, (std::vector<float>{-kInf, 2.0f, -kInf}));
}

TEST(RepetitionPenaltyTest,
     DividesPositiveMultipliesNegativeOncePerDistinctToken) {
  std::vector<float> logits = {4.0f, -4.0f, 2.0f, 0.0f, 8.0f};
  // Token 0 appears three times: still penalized once.
  const std::vector<int32_t> window = {0, 1, 0, 3, 0};
  ApplyRepetitionPenalty(logits, window, 2.0f);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -8.0f, 2.0f, 0.0f, 8.0f}));
}

TEST(RepetitionPenaltyTest, OnlyTokensInsideTheWindow) {
  const std::vector<int32_t> history = {4, 3, 2, 1};
  EXPECT_EQ(RepetitionWindow(history, -1).size(), 4u);
  EXPECT_TRUE(RepetitionWindow(history, 0).empty());
  EXPECT_EQ(RepetitionWindow(history, 10).size(), 4u);
  ASSERT_EQ(RepetitionWindow(history, 2).size(), 2u);
  EXPECT_EQ(RepetitionWindow(history, 2)[0], 2);

  SamplingParams params;
  params.repetition_penalty = 2.0f;
  params.penalty_last_n = 2;
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  ApplyPenalties(logits, history, /*num_prompt_tokens=*/4, params);
  // Only tokens 2 and 1 (the last two) are in the window.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 0.5f, 0.5f, 1.0f, 1.0f}));
}

TEST(PresenceFrequencyPenaltyTest, ExactValues) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> tokens = {1, 2, 1, 1};
  ApplyPresenceFrequencyPenalty(logits, tokens, /*presence=*/0.5f,
                                /*frequency=*/0.25f);
  // token 1: 1 - (3 * 0.25 + 0.5) = -0.25; token 2: 1 - (0.25 + 0.5) = 0.25.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -0.25f, 0.25f, 1.0f}));

  std::vector<float> negative = {0.0f, 0.0f};
  const std::vector<int32_t> once = {0};
  ApplyPresenceFrequencyPenalty(negative, once, -1.0f, -0.5f);
  EXPECT_EQ(negative, (std::vector<float>{1.5f, 0.0f}));
}

TEST(PenaltiesTest, PresenceAndFrequencyCountGeneratedTokensOnly) {
  SamplingParams params;
  params.presence_penalty = 1.0f;
  params.frequency_penalty = 0.5f;
  params.repetition_penalty = 1.0f;
  std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  // Prompt {0, 1, 1}; generated {1, 2, 2}.
  const std::vector<int32_t> history = {0, 1, 1, 1, 2, 2};
  std::vector<int32_t> scratch;
  ApplyPenalties(logits, history, /*num_prompt_tokens=*/3, params, &scratch);
  EXPECT_EQ(logits, (std::vector<float>{0.0f, -1.5f, -2.0f, 0.0f}));
}

TEST(PenaltiesTest, RepetitionCoversPromptAndComposesWithFrequency) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  params.penalty_last_n = -1;
  params.frequency_penalty = 1.0f;
  std::vector<float> logits = {3.0f, 3.0f, 3.0f};
  const std::vector<int32_t> history = {0, 1};  // prompt {0}, generated {1}
  ApplyPenalties(logits, history, 1, params);
  // Repetition first (3 / 2), then frequency (- 1) on the generated token.
  EXPECT_EQ(logits, (std::vector<float>{1.5f, 0.5f, 3.0f}));
}

TEST(CandidatesTest, FillDropsNaNAndMinusInf) {
  const std::vector<float> logits = {1.0f, kNaN, -kInf, kInf, -3.0f};
  CandidateList list;
  FillCandidates(logits, &list);
  EXPECT_EQ(Tokens(list), (std::vector<int32_t>{0, 3, 4}));
  EXPECT_FALSE(list.sorted);
}

TEST(TopKTest, KeepsExactlyKTiesAtBoundaryToLowestIds) {
  // Sorted: 5 (t1), 4 (t4), then a three-way tie at 3 (t0, t2, t5), 1 (t3).
  const std::vector<float> logits = {3.0f, 5.0f, 3.0f, 1.0f, 4.0f, 3.0f};
  CandidateList list;
  FillCandidates(logits, &list);
  ApplyTopK(&list, 3);
  EXPECT_EQ(Tokens(list), (std::vector<int32_t>{1, 4, 0}));
  EXPECT_TRUE(list.sorted);

  FillCandidates(logits, &list);
  ApplyTopK(&list, 4);
  EXPECT_EQ(Tokens(list), (std::vector<int32_t>{1, 4, 0, 2}));

  // k = 0 and k >= size keep everything, in place.
  FillCandidates(logits, &list);
  ApplyTopK(&list, 0);
  EXPECT_EQ(list.items.size(), 6u);
  ApplyTopK(&list, 6);
  EXPECT_EQ(Tokens(list), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(list.sorted);
}

TEST(TopKTest, SelectTopKMatchesFillPlusApplyTopK) {
  SamplingRng rng(7);
  std::vector<float> logits(5000);
  // Coarse values so that ties are common.
  for (float& l : logits) l = static_cast<float>(rng.Next() % 64) * 0.25f;
  logits[10] = kNaN;
  logits[11] = -kInf;
  for (int32_t k : {1, 2, 40, 100, 4999, 5000, 6000}) {
    CandidateList a;
    FillCandidates(logits, &a);
    ApplyTopK(&a, k);
    if (!a.sorted) std::sort(a.items.begin(), a.items.end(), CandidateBefore);
    CandidateList b;
    SelectTopK(logits, k, &b);
    EXPECT_EQ(Tokens(a), Tokens(b)) << "k=" << k;
    EXPECT_TRUE(b.sorted);
  }
}

TEST(TemperatureTest, DividesLogits) {
  CandidateList list = WithProbs({0.5f, 0.5f});
  list.items[0].logit = 2.0f;
  list.items[1].logit = -1.0f;
  ApplyTemperature(&list, 0.5f);
  EXPECT_EQ(list.items[0].logit, 4.0f);
  EXPECT_EQ(list.items[1].logit, -2.0f);
}

TEST(SoftmaxTest, ProbabilitiesOfHandMadeLogits) {
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f),
                                     std::log(0.3f), std::log(0.4f)};
  CandidateList list;
  FillCandidates(logits, &list);
  Softmax(&list);
  EXPECT_NEAR(list.items[0].prob, 0.1f, 1e-7);
  EXPECT_NEAR(list.items[1].prob, 0.2f, 1e-7);
  EXPECT_NEAR(list.items[2].prob, 0.3f, 1e-7);
  EXPECT_NEAR(list.items[3].prob, 0.4f, 1e-7);

  // Equal logits: exactly uniform.
  const std::vector<float> flat = {7.0f, 7.0f, 7.0f, 7.0f};
  FillCandidates(flat, &list);
  Softmax(&list);
  for (const Candidate& c : list.items) EXPECT_EQ(c.prob, 0.25f);

  // +inf takes all the mass, shared equally.
  const std::vector<float> inf = {kInf, 1.0f, kInf};
  FillCandidates(inf, &list);
  Softmax(&list);
  EXPECT_EQ(list.items[0].prob, 0.5f);
  EXPECT_EQ(list.items[1].prob, 0.0f);
  EXPECT_EQ(list.items[2].prob, 0.5f);
}

TEST(TopPTest, KeepsSmallestPrefixReachingP) {
  // Token order scrambled; dyadic probabilities make the sums exact.
  //   token: 0      1     2      3
  //   prob:  0.125  0.5   0.125  0.25
  // Canonical order: 1 (0.5), 3 (0.25), 0 (0.125), 2 (0.125; tie -> id 0
  // first).
  const std::vector<float> probs = {0.125f, 0.5f, 0.125f, 0.25f};
  CandidateList list = WithProbs(probs);
  ApplyTopP(&list, 0.75f);  // 0.5 + 0.25 = 0.75 >= 0.75: two tokens
  EXPECT_EQ(Tokens(list), (std::vector<int32_t>{1, 3}));
  EXPECT_TRUE(list.sorted);

  list = WithProbs(probs);
  ApplyTopP(&list, 0.76f);  // needs the third
  EXPECT_EQ(Tokens(list), (std::vector<int32_t>{1, 3, 0}));

  list = WithProbs(probs);
  ApplyTopP(&list, 0.1f);  // the top token alone suffices
  EXPECT_EQ(Tokens(list), (std::vector<int32_t>{1}));

  list = WithProbs(probs);
  ApplyTopP(&list, 1.0f);  // off
  EXPECT_EQ(Tokens(list), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(TopPTest, BucketedSelectionMatchesFullSortOnLargeLists) {
  SamplingRng rng(11);
  for (double spread : {0.5, 4.0, 30.0}) {
    std::vector<float> logits(20000);
    for (float& l : logits) l = static_cast<float>(rng.NextDouble() * spread);
    logits[123] = static_cast<float>(spread) + 3.0f;  // one standout token
    for (float p : {0.01f, 0.3f, 0.9f, 0.999f}) {
      CandidateList bucketed;
      FillCandidates(logits, &bucketed);
      Softmax(&bucketed);
      CandidateList full = bucketed;
      std::sort(full.items.begin(), full.items.end(), CandidateBefore);
      full.sorted = true;
      ApplyTopP(&bucketed, p);
      ApplyTopP(&full, p);
      ASSERT_GT(bucketed.items.size(), 0u);
      // Same set of tokens; the bucketed order is not canonical.
      std::vector<int32_t> a = Tokens(bucketed), b = Tokens(full);
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      EXPECT_EQ(a, b) << "spread=" << spread << " p=" << p;
      // Smallest prefix: without its last token the mass is below p.
      double without_last = 0.0;
      for (size_t i = 0; i + 1 < full.items.size(); ++i)
        without_last += full.items[i].prob;
      EXPECT_LT(without_last, p);
    }
  }
}

TEST(TopPTest, FlatDistributionsKeepTheLowestIds) {
  // 2000 equal logits (range 0: the sort path): top_p = 0.25 keeps exactly
  // the 500 lowest ids.
  const std::vector<float> logits(2000, 1.0f);
  CandidateList list;
  FillCandidates(logits, &list);
  Softmax(&list);
  ApplyTopP(&list, 0.25f);
  ASSERT_EQ(list.items.size(), 500u);
  EXPECT_EQ(list.items.back().token, 499);
}

TEST(MinPTest, KeepsTokensAtLeastMinPTimesMax) {
  // Threshold 0.25 * 0.5 = 0.125: the 0.125 token stays (>=), 0.0625 go.
  const std::vector<float> probs = {0.0625f, 0.5f, 0.125f, 0.25f, 0.0625f};
  CandidateList list = WithProbs(probs);
  ApplyMinP(&list, 0.25f);
  EXPECT_EQ(Tokens(list), (std::vector<int32_t>{1, 2, 3}));  // order kept

  list = WithProbs(probs);
  ApplyMinP(&list, 1.0f);  // only the most likely token
  EXPECT_EQ(Tokens(list), (std::vector<int32_t>{1}));

  list = WithProbs(probs);
  ApplyMinP(&list, 0.0f);  // off
  EXPECT_EQ(list.items.size(), 5u);
}

TEST(RenormalizeTest, SumsToOne) {
  CandidateList list = WithProbs({0.25f, 0.125f, 0.125f});
  Renormalize(&list);
  EXPECT_EQ(list.items[0].prob, 0.5f);
  EXPECT_EQ(list.items[1].prob, 0.25f);
  EXPECT_EQ(list.items[2].prob, 0.25f);
}

TEST(SampleCandidateTest, InverseCdfBoundaries) {
  const CandidateList list = WithProbs({0.25f, 0.5f, 0.25f});
  EXPECT_EQ(SampleCandidate(list, 0.0), 0);
  EXPECT_EQ(SampleCandidate(list, 0.2499), 0);
  EXPECT_EQ(SampleCandidate(list, 0.25), 1);
  EXPECT_EQ(SampleCandidate(list, 0.7499), 1);
  EXPECT_EQ(SampleCandidate(list, 0.75), 2);
  EXPECT_EQ(SampleCandidate(list, std::nextafter(1.0, 0.0)), 2);

  // Zero-probability tail tokens are never drawn.
  CandidateList tail = WithProbs({1.0f, 0.0f});
  EXPECT_EQ(SampleCandidate(tail, std::nextafter(1.0, 0.0)), 0);
}

TEST(LogprobsTest, LogSoftmaxOfChosenAndTopN) {
  // probs 0.125, 0.375, 0.125, 0.375 (tie between 1 and 3 -> 1 first).
  const std::vector<float> logits = {0.0f, std::log(3.0f), 0.0f,
                                     std::log(3.0f)};
  SampleLogprobs out;
  ComputeLogprobs(logits, 2, 3, &out);
  EXPECT_EQ(out.chosen.token, 2);
  EXPECT_NEAR(out.chosen.logprob, std::log(0.125), 1e-6);
  ASSERT_EQ(out.top.size(), 3u);
  EXPECT_EQ(out.top[0].token, 1);
  EXPECT_EQ(out.top[1].token, 3);
  EXPECT_EQ(out.top[2].token, 0);
  EXPECT_NEAR(out.top[0].logprob, std::log(0.375), 1e-6);
  EXPECT_NEAR(out.top[2].logprob, std::log(0.125), 1e-6);

  ComputeLogprobs(logits, 0, 10, &out);  // top_n clamps to the vocabulary
  EXPECT_EQ(out.top.size(), 4u);
  ComputeLogprobs(logits, 0, 0, &out);
  EXPECT_TRUE(out.top.empty());

  const std::vector<float> banned = {-kInf, 0.0f};
  ComputeLogprobs(banned, 0, 2, &out);
  EXPECT_EQ(out.chosen.logprob, -kInf);
  EXPECT_EQ(out.top[0].token, 1);
  EXPECT_EQ(out.top[0].logprob, 0.0f);
}

}  // namespace
}  // namespace redline::model
