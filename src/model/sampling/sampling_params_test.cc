#include "model/sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

namespace redline::model {
namespace {

constexpr int64_t kVocab = 1000;

// Validates a default SamplingParams after `edit`; returns the message.
std::string ErrorOf(const std::function<void(SamplingParams&)>& edit) {
  SamplingParams params;
  edit(params);
  const Status status = params.Validate(kVocab);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  return status.message();
}

TEST(SamplingParamsTest, DefaultsAreValidAndNotGreedy) {
  SamplingParams params;
  EXPECT_TRUE(params.Validate(kVocab).ok());
  EXPECT_FALSE(params.IsGreedy());
  params.temperature = 0.0f;
  EXPECT_TRUE(params.IsGreedy());
  params.temperature = 1e-6f;
  EXPECT_TRUE(params.IsGreedy());
  params.temperature = 1e-5f;
  EXPECT_FALSE(params.IsGreedy());
}

TEST(SamplingParamsTest, EdgesOfEveryRangeAreValid) {
  SamplingParams params;
  params.temperature = 100.0f;
  params.top_k = -1;
  params.top_p = 1e-6f;
  params.min_p = 1.0f;
  params.repetition_penalty = 0.01f;
  params.penalty_last_n = -1;
  params.presence_penalty = -2.0f;
  params.frequency_penalty = 2.0f;
  params.logit_bias = {{0, -100.0f}, {999, 100.0f}};
  params.max_tokens = 1;
  params.min_tokens = 1;
  params.stop = std::vector<std::string>(16, std::string(256, 'x'));
  params.logprobs = true;
  params.top_logprobs = 20;
  const Status status = params.Validate(kVocab);
  EXPECT_TRUE(status.ok()) << status.ToString();
}

TEST(SamplingParamsTest, ClearMessagesForBadRanges) {
  const float nan = std::nanf("");
  EXPECT_EQ(ErrorOf([](auto& p) { p.temperature = -0.5f; }),
            "temperature must be in [0, 100], got -0.5");
  EXPECT_EQ(ErrorOf([](auto& p) { p.temperature = 101.0f; }),
            "temperature must be in [0, 100], got 101");
  EXPECT_EQ(ErrorOf([&](auto& p) { p.temperature = nan; }),
            "temperature must be in [0, 100], got nan");
  EXPECT_EQ(ErrorOf([](auto& p) { p.top_k = -2; }),
            "top_k must be >= 0 (or -1 for off), got -2");
  EXPECT_EQ(ErrorOf([](auto& p) { p.top_p = 0.0f; }),
            "top_p must be in (0, 1], got 0");
  EXPECT_EQ(ErrorOf([](auto& p) { p.top_p = 1.5f; }),
            "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(ErrorOf([](auto& p) { p.min_p = -0.1f; }),
            "min_p must be in [0, 1], got -0.1");
  EXPECT_EQ(ErrorOf([](auto& p) { p.repetition_penalty = 0.0f; }),
            "repetition_penalty must be finite and > 0, got 0");
  EXPECT_EQ(ErrorOf([](auto& p) { p.penalty_last_n = -2; }),
            "penalty_last_n must be >= -1 (-1 = whole context), got -2");
  EXPECT_EQ(ErrorOf([](auto& p) { p.presence_penalty = 2.5f; }),
            "presence_penalty must be in [-2, 2], got 2.5");
  EXPECT_EQ(ErrorOf([](auto& p) { p.frequency_penalty = -3.0f; }),
            "frequency_penalty must be in [-2, 2], got -3");
  EXPECT_EQ(ErrorOf([](auto& p) {
              p.logit_bias = {{1000, 1.0f}};
            }),
            "logit_bias token id 1000 is outside the vocabulary [0, 1000)");
  EXPECT_EQ(ErrorOf([](auto& p) {
              p.logit_bias = {{-1, 1.0f}};
            }),
            "logit_bias token id -1 is outside the vocabulary [0, 1000)");
  EXPECT_EQ(ErrorOf([](auto& p) {
              p.logit_bias = {{5, 101.0f}};
            }),
            "logit_bias for token 5 must be in [-100, 100], got 101");
  EXPECT_EQ(ErrorOf([](auto& p) { p.max_tokens = 0; }),
            "max_tokens must be >= 1 (or unset), got 0");
  EXPECT_EQ(ErrorOf([](auto& p) { p.min_tokens = -1; }),
            "min_tokens must be >= 0, got -1");
  EXPECT_EQ(ErrorOf([](auto& p) {
              p.max_tokens = 4;
              p.min_tokens = 5;
            }),
            "min_tokens (5) must not exceed max_tokens (4)");
  EXPECT_EQ(
      ErrorOf([](auto& p) { p.stop = std::vector<std::string>(17, "x"); }),
      "the number of stop strings must be at most 16, got 17");
  EXPECT_EQ(ErrorOf([](auto& p) { p.stop = {std::string(257, 'x')}; }),
            "each stop string must be at most 256 bytes, got 257");
  EXPECT_EQ(ErrorOf([](auto& p) {
              p.logprobs = true;
              p.top_logprobs = 21;
            }),
            "top_logprobs must be in [0, 20], got 21");
  EXPECT_EQ(ErrorOf([](auto& p) { p.top_logprobs = 3; }),
            "top_logprobs requires logprobs to be true");
}

TEST(SamplingParamsTest, ResolveFillsMaxTokensFromTheContext) {
  SamplingParams params;
  auto r = params.Resolve(kVocab, /*n_ctx=*/64, /*prompt_tokens=*/5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->max_tokens, 59);
  EXPECT_TRUE(r->Validate(kVocab).ok());
  params.max_tokens = 59;  // exactly fills the context
  r = params.Resolve(kVocab, 64, 5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->max_tokens, 59);
  // A context beyond INT32_MAX positions clamps instead of wrapping.
  params.max_tokens = -1;
  r = params.Resolve(kVocab, int64_t{1} << 40, 5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_tokens, std::numeric_limits<int32_t>::max());
}

TEST(SamplingParamsTest, ResolveRefusesMinTokensBeyondTheContext) {
  // The crash this guards against: min_tokens > the room left, max_tokens
  // unset, used to reach the Sampler's RL_CHECK once max_tokens was filled.
  SamplingParams params;
  params.min_tokens = 100;
  auto r = params.Resolve(kVocab, 64, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "min_tokens (100) must not exceed the 59 tokens the context of 64 "
            "leaves after the prompt's 5");
  params.min_tokens = 59;
  EXPECT_TRUE(params.Resolve(kVocab, 64, 5).ok());
  params.max_tokens = 10;
  r = params.Resolve(kVocab, 64, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "min_tokens (59) must not exceed max_tokens (10)");
}

TEST(SamplingParamsTest, ResolveTellsPromptTooLongFromMaxTokensTooLarge) {
  SamplingParams params;
  auto r = params.Resolve(kVocab, 64, 64);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(IsPromptTooLong(r.status()));
  EXPECT_EQ(r.status().message(),
            "the prompt is too long: it has 64 tokens and the context holds "
            "64, which must leave room for at least one generated token");
  EXPECT_TRUE(IsPromptTooLong(params.Resolve(kVocab, 64, 1000).status()));

  params.max_tokens = std::numeric_limits<int32_t>::max();
  r = params.Resolve(kVocab, 64, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_FALSE(IsPromptTooLong(r.status()));
  EXPECT_EQ(r.status().message(),
            "max_tokens (2147483647) is too large: the prompt's 5 tokens + "
            "2147483647 exceed the context of 64 tokens");
  EXPECT_FALSE(IsPromptTooLong(Status::OutOfRange("other")));
  EXPECT_FALSE(IsPromptTooLong(Status::InvalidArgument(kPromptTooLongPrefix)));
}

TEST(SamplingParamsTest, ResolveValidatesFirst) {
  SamplingParams params;
  params.top_p = 2.0f;
  auto r = params.Resolve(kVocab, 64, 100);  // also too long: range wins
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "top_p must be in (0, 1], got 2");
}

}  // namespace
}  // namespace redline::model
