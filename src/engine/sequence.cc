#include "engine/sequence.h"

#include <fmt/format.h>

#include <utility>

#include "base/check.h"

namespace redline::engine {
namespace {

std::vector<int32_t> EogIds(const model::Model& model) {
  const model::Tokenizer* tok = model.tokenizer();
  return tok != nullptr ? tok->eog_ids() : std::vector<int32_t>{};
}

}  // namespace

Result<model::SamplingParams> ResolveRequest(
    const model::ModelConfig& config, int64_t n_ctx,
    std::span<const int32_t> prompt, const model::SamplingParams& params) {
  if (prompt.empty()) {
    return Status::InvalidArgument("the prompt has no tokens");
  }
  for (int32_t id : prompt) {
    if (id < 0 || id >= config.vocab_size) {
      return Status::InvalidArgument(
          fmt::format("prompt token id {} is outside the vocabulary [0, {})",
                      id, config.vocab_size));
    }
  }
  return params.Resolve(config.vocab_size, n_ctx,
                        static_cast<int64_t>(prompt.size()));
}

Sequence::Sequence(const model::Model& model, std::span<const int32_t> prompt,
                   const model::SamplingParams& params, int64_t n_ctx,
                   Clock::time_point started_at)
    : n_ctx_(n_ctx),
      prompt_tokens_(static_cast<int64_t>(prompt.size())),
      history_(prompt.begin(), prompt.end()),
      sampler_(params, model.config().vocab_size, EogIds(model)),
      finish_(params, model::EndOfGenerationSet(EogIds(model))),
      started_at_(started_at) {
  RL_CHECK(params.max_tokens >= 1) << "unresolved SamplingParams";
  if (const model::Tokenizer* tok = model.tokenizer()) {
    detok_.emplace(*tok, /*skip_special=*/true);
  }
}

StepResult Sequence::Accept(std::span<float> logits) {
  RL_CHECK(!finished()) << "Accept() after the sequence finished";
  StepResult r;
  if (sampler_.params().logprobs) r.logprobs.emplace();
  r.token =
      sampler_.Sample(logits, history_, static_cast<size_t>(prompt_tokens_),
                      r.logprobs ? &*r.logprobs : nullptr);
  if (first_token_at_ == Clock::time_point{}) first_token_at_ = Clock::now();
  history_.push_back(r.token);
  ++generated_tokens_;
  const std::string piece = detok_ ? detok_->Push(r.token) : std::string();
  r.finish = finish_.Accept(r.token, piece, &r.text);
  if (r.finish == model::FinishReason::kNone &&
      static_cast<int64_t>(history_.size()) >= n_ctx_) {
    // Unreachable with resolved params (max_tokens fits the context), kept
    // so a full context can never be written past.
    finish_.Finish(model::FinishReason::kLength, &r.text);
    r.finish = model::FinishReason::kLength;
  }
  if (r.finish != model::FinishReason::kNone && detok_) {
    // An incomplete UTF-8 character still held by the detokenizer ends
    // here: emitted when the text was cut by length (the caller may show
    // U+FFFD), dropped when it ended with a stop string or an
    // end-of-generation token.
    std::string tail = detok_->Flush();
    if (r.finish == model::FinishReason::kLength) r.text += tail;
  }
  return r;
}

}  // namespace redline::engine
