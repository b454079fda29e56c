#include "engine/sequence.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine_test_model.h"

namespace redline::engine {
namespace {

using testing::TinyTestModel;

constexpr int64_t kCtx = 64;
constexpr int32_t kEos = 2;  // the synthetic vocabulary's EOS

// Logits that make `token` the argmax, `second` the runner-up.
std::vector<float> Favour(int32_t token, int32_t second = -1) {
  std::vector<float> logits(
      static_cast<size_t>(TinyTestModel().config().vocab_size), 0.0f);
  logits[static_cast<size_t>(token)] = 10.0f;
  if (second >= 0) logits[static_cast<size_t>(second)] = 9.0f;
  return logits;
}

model::SamplingParams Resolved(model::SamplingParams p,
                               const std::vector<int32_t>& prompt) {
  auto r = ResolveRequest(TinyTestModel().config(), kCtx, prompt, p);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

model::SamplingParams Greedy() {
  model::SamplingParams p;
  p.temperature = 0;
  return p;
}

const std::vector<int32_t> kPrompt = {1, 300, 301};

TEST(SequenceTest, EndOfGenerationStopsWithoutText) {
  const model::Model& m = TinyTestModel();
  Sequence seq(m, kPrompt, Resolved(Greedy(), kPrompt), kCtx);
  EXPECT_EQ(seq.prompt_tokens(), 3);
  std::vector<float> l = Favour(300);
  StepResult a = seq.Accept(l);
  EXPECT_EQ(a.token, 300);
  EXPECT_EQ(a.finish, model::FinishReason::kNone);
  EXPECT_FALSE(a.logprobs.has_value());
  EXPECT_NE(seq.first_token_at(), Clock::time_point{});
  l = Favour(kEos);
  StepResult b = seq.Accept(l);
  EXPECT_EQ(b.token, kEos);
  EXPECT_EQ(b.finish, model::FinishReason::kStop);
  EXPECT_TRUE(b.text.empty());
  EXPECT_TRUE(seq.finished());
  EXPECT_EQ(seq.generated_tokens(), 2);
  EXPECT_EQ(seq.history(), (std::vector<int32_t>{1, 300, 301, 300, kEos}));
}

TEST(SequenceTest, MinTokensBansEndOfGenerationFirst) {
  model::SamplingParams p = Greedy();
  p.min_tokens = 2;
  Sequence seq(TinyTestModel(), kPrompt, Resolved(p, kPrompt), kCtx);
  for (int i = 0; i < 2; ++i) {
    std::vector<float> l = Favour(kEos, 310);
    StepResult r = seq.Accept(l);
    EXPECT_EQ(r.token, 310);
    EXPECT_EQ(r.finish, model::FinishReason::kNone);
  }
  std::vector<float> l = Favour(kEos, 310);
  EXPECT_EQ(seq.Accept(l).finish, model::FinishReason::kStop);
}

TEST(SequenceTest, TextIsTheDetokenizedStreamAndEndsAtMaxTokens) {
  const model::Model& m = TinyTestModel();
  model::SamplingParams p = Greedy();
  p.max_tokens = 5;
  Sequence seq(m, kPrompt, Resolved(p, kPrompt), kCtx);
  const std::vector<int32_t> want = {300, 420, 301, 465, 434};
  std::string text;
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<float> l = Favour(want[i]);
    StepResult r = seq.Accept(l);
    EXPECT_EQ(r.token, want[i]);
    text += r.text;
    EXPECT_EQ(r.finish, i + 1 == want.size() ? model::FinishReason::kLength
                                             : model::FinishReason::kNone);
  }
  EXPECT_EQ(text, m.tokenizer()->Decode(want, /*skip_special=*/true));
}

TEST(SequenceTest, StopStringEndsAndIsNotEmitted) {
  const model::Model& m = TinyTestModel();
  const model::Tokenizer& tok = *m.tokenizer();
  // Two ASCII tokens; the last character of the second's text, which the
  // first's does not contain, is the stop string.
  int32_t first_id = 300, second_id = -1;
  std::string full, first, stop;
  for (int32_t id = 260; id < 500 && second_id < 0; ++id) {
    full = tok.Decode(std::vector<int32_t>{first_id, id}, true);
    first = tok.Decode(std::vector<int32_t>{first_id}, true);
    if (full.size() <= first.size() ||
        static_cast<unsigned char>(full.back()) >= 0x80)
      continue;
    stop = full.substr(full.size() - 1);
    if (first.find(stop) == std::string::npos) second_id = id;
  }
  ASSERT_GE(second_id, 0);
  model::SamplingParams p = Greedy();
  p.stop = {stop};
  Sequence seq(m, kPrompt, Resolved(p, kPrompt), kCtx);
  std::string text;
  std::vector<float> l = Favour(first_id);
  StepResult a = seq.Accept(l);
  EXPECT_EQ(a.finish, model::FinishReason::kNone);
  text += a.text;
  l = Favour(second_id);
  StepResult b = seq.Accept(l);
  text += b.text;
  EXPECT_EQ(b.finish, model::FinishReason::kStop);
  EXPECT_EQ(text, full.substr(0, full.size() - 1));
}

TEST(SequenceTest, LogprobsWhenAskedFor) {
  model::SamplingParams p = Greedy();
  p.logprobs = true;
  p.top_logprobs = 2;
  Sequence seq(TinyTestModel(), kPrompt, Resolved(p, kPrompt), kCtx);
  std::vector<float> l = Favour(300, 301);
  StepResult r = seq.Accept(l);
  ASSERT_TRUE(r.logprobs.has_value());
  EXPECT_EQ(r.logprobs->chosen.token, 300);
  ASSERT_EQ(r.logprobs->top.size(), 2u);
  EXPECT_EQ(r.logprobs->top[1].token, 301);
}

TEST(SequenceTest, UnsetMaxTokensEndsAtTheEndOfTheContext) {
  model::SamplingParams p = Greedy();
  p.ignore_eos = true;
  Sequence seq(TinyTestModel(), kPrompt, Resolved(p, kPrompt), kCtx);
  EXPECT_EQ(seq.params().max_tokens, kCtx - 3);
  model::FinishReason f = model::FinishReason::kNone;
  while (f == model::FinishReason::kNone) {
    std::vector<float> l = Favour(kEos);
    f = seq.Accept(l).finish;
  }
  EXPECT_EQ(f, model::FinishReason::kLength);
  EXPECT_EQ(static_cast<int64_t>(seq.history().size()), kCtx);
}

TEST(SequenceDeathTest, AcceptAfterTheEndIsABug) {
  model::SamplingParams p = Greedy();
  p.max_tokens = 1;
  Sequence seq(TinyTestModel(), kPrompt, Resolved(p, kPrompt), kCtx);
  std::vector<float> l = Favour(300);
  EXPECT_EQ(seq.Accept(l).finish, model::FinishReason::kLength);
  EXPECT_DEATH(seq.Accept(l), "after the sequence finished");
}

}  // namespace
}  // namespace redline::engine
