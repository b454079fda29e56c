#include "model/sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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

}  // namespace
}  // namespace redline::model
