#include "model/sampling/sampler.h"

#include <random>

#include "base/check.h"

namespace redline::model {
namespace {

uint64_t SeedOrRandom(const std::optional<uint64_t>& seed) {
  if (seed.has_value()) return *seed;
  std::random_device device;  // 32 bits per call
  return (static_cast<uint64_t>(device()) << 32) | device();
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, int64_t vocab_size,
                 std::span<const int32_t> eog_tokens)
    : params_(params),
      vocab_size_(vocab_size),
      eog_tokens_(eog_tokens.begin(), eog_tokens.end()),
      seed_(SeedOrRandom(params.seed)),
      rng_(seed_) {
  RL_CHECK(vocab_size > 0) << vocab_size;
  const Status valid = params.Validate(vocab_size);
  RL_CHECK(valid.ok()) << "unvalidated SamplingParams: " << valid.ToString();
  for (int32_t token : eog_tokens_) {
    RL_CHECK(token >= 0 && token < vocab_size)
        << "end-of-generation token " << token;
  }
}

bool Sampler::Fits(const Sampler& target, int64_t vocab_size) {
  if (!target.params_.Validate(vocab_size).ok()) return false;
  for (int32_t token : target.eog_tokens_) {
    if (token >= vocab_size) return false;
  }
  return true;
}

std::optional<Sampler> Sampler::FollowerOf(const Sampler& target,
                                           int64_t vocab_size) {
  if (vocab_size <= 0 || !Fits(target, vocab_size)) return std::nullopt;
  SamplingParams params = target.params_;
  params.seed = target.seed_;  // no random_device draw: Follow sets the state
  std::optional<Sampler> s(Sampler(params, vocab_size, target.eog_tokens_));
  s->Follow(target);
  return s;
}

bool Sampler::Follow(const Sampler& target) {
  if (!Fits(target, vocab_size_)) return false;
  params_ = target.params_;
  // Drafts need no logprobs; the target reports them for what it samples.
  params_.logprobs = false;
  params_.top_logprobs = 0;
  eog_tokens_ = target.eog_tokens_;
  seed_ = target.seed_;
  rng_ = target.rng_;
  return true;
}

int32_t Sampler::Sample(std::span<float> logits,
                        std::span<const int32_t> history,
                        size_t num_prompt_tokens, SampleLogprobs* logprobs) {
  RL_CHECK(static_cast<int64_t>(logits.size()) == vocab_size_)
      << logits.size() << " logits for a vocabulary of " << vocab_size_;
  RL_CHECK(num_prompt_tokens <= history.size());
  if (logprobs != nullptr) raw_logits_.assign(logits.begin(), logits.end());

  // 1-3: edits of the dense logits.
  ApplyLogitBias(logits, params_.logit_bias);
  const size_t num_generated = history.size() - num_prompt_tokens;
  if (num_generated < static_cast<size_t>(params_.min_tokens)) {
    BanTokens(logits, eog_tokens_);
  }
  ApplyPenalties(logits, history, num_prompt_tokens, params_,
                 &penalty_scratch_);

  int32_t token = 0;
  if (params_.IsGreedy()) {
    token = Argmax(logits);  // 4
  } else {
    const double u = rng_.NextDouble();  // exactly one draw per sampled token
    SelectTopK(logits, params_.top_k, &candidates_);  // 5
    if (candidates_.items.empty()) {
      token = Argmax(logits);  // every logit NaN or -inf: nothing to draw from
    } else {
      ApplyTemperature(&candidates_, params_.temperature);  // 6
      Softmax(&candidates_);                                // 7
      ApplyTopP(&candidates_, params_.top_p);               // 8
      ApplyMinP(&candidates_, params_.min_p);               // 9
      token = SampleCandidate(candidates_, u);              // 10
    }
  }

  if (logprobs != nullptr) {
    ComputeLogprobs(raw_logits_, token, params_.top_logprobs, logprobs);
  }
  return token;
}

}  // namespace redline::model
