#include "engine/generator.h"

#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "model/sampling/sampler.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::engine {
namespace {

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t)
      .count();
}

}  // namespace

double GenerationResult::decode_tok_per_s() const {
  const double steps = static_cast<double>(tokens.size()) - 1.0;
  return decode_ms > 0 && steps > 0 ? steps * 1000.0 / decode_ms : 0.0;
}

double GenerationResult::prefill_tok_per_s() const {
  return prefill_ms > 0
             ? static_cast<double>(prompt_tokens) * 1000.0 / prefill_ms
             : 0.0;
}

Generator::Generator(const model::Model& model, ThreadPool& pool, int64_t n_ctx,
                     int64_t batch_tokens, model::KvType kv_type)
    : model_(model),
      transformer_(model.config(), model.weights(), pool, batch_tokens),
      cache_(transformer_.NewCache(n_ctx, kv_type)) {}

Result<GenerationResult> Generator::Generate(
    std::span<const int32_t> prompt, const model::SamplingParams& params,
    const std::function<bool(std::string_view, int32_t)>& on_text) {
  const model::ModelConfig& c = model_.config();
  RL_RETURN_IF_ERROR(params.Validate(c.vocab_size));
  if (prompt.empty())
    return Status::InvalidArgument("the prompt has no tokens");
  for (int32_t id : prompt) {
    if (id < 0 || id >= c.vocab_size) {
      return Status::InvalidArgument(
          fmt::format("prompt token id {} is outside the vocabulary [0, {})",
                      id, c.vocab_size));
    }
  }
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  const int64_t max_new =
      params.max_tokens >= 0 ? params.max_tokens : n_ctx() - n_prompt;
  if (n_prompt + max_new > n_ctx()) {
    return Status::OutOfRange(fmt::format(
        "prompt ({} tokens) + max_tokens ({}) exceeds the context of {} tokens",
        n_prompt, max_new, n_ctx()));
  }
  model::SamplingParams p = params;
  p.max_tokens = static_cast<int32_t>(max_new);

  const model::Tokenizer* tok = model_.tokenizer();
  std::vector<int32_t> eog;
  if (tok != nullptr) eog = tok->eog_ids();
  model::Sampler sampler(p, c.vocab_size, eog);
  model::FinishChecker finish(p, model::EndOfGenerationSet(eog));
  std::optional<model::StreamingDetokenizer> detok;
  if (tok != nullptr) detok.emplace(*tok, /*skip_special=*/true);

  GenerationResult r;
  r.prompt_tokens = n_prompt;
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  std::vector<float> logits(c.vocab_size);
  const auto start = std::chrono::steady_clock::now();
  RL_RETURN_IF_ERROR(transformer_.ForwardSequence(prompt, 0, cache_, logits));
  r.prefill_ms = MsSince(start);
  cache_.set_n_used(n_prompt);

  std::optional<std::chrono::steady_clock::time_point> first_token_at;
  std::string out;
  model::FinishReason reason = model::FinishReason::kNone;
  if (max_new == 0) {
    finish.Finish(model::FinishReason::kLength, &out);
    reason = model::FinishReason::kLength;
  }
  while (reason == model::FinishReason::kNone) {
    const int32_t next = sampler.Sample(logits, history, prompt.size());
    if (!first_token_at) {
      first_token_at = std::chrono::steady_clock::now();
      r.ttft_ms = MsSince(start);
    }
    r.tokens.push_back(next);
    history.push_back(next);
    out.clear();
    std::string piece = detok ? detok->Push(next) : std::string();
    reason = finish.Accept(next, piece, &out);
    if (reason != model::FinishReason::kNone && detok) {
      // Text still held by the detokenizer (an incomplete character) ends here.
      std::string tail = detok->Flush();
      if (!tail.empty() && reason == model::FinishReason::kLength) out += tail;
    }
    if (!out.empty()) {
      r.text += out;
      if (!on_text(out, next)) {
        r.cancelled = true;
        break;
      }
    }
    if (reason != model::FinishReason::kNone) break;
    const int64_t pos = static_cast<int64_t>(history.size()) - 1;
    RL_RETURN_IF_ERROR(transformer_.ForwardSequence(
        std::span(&history.back(), 1), pos, cache_, logits));
    cache_.set_n_used(pos + 1);
  }
  r.finish = r.cancelled ? model::FinishReason::kStop : finish.finish_reason();
  if (first_token_at) {
    r.decode_ms = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - *first_token_at)
                      .count();
  }
  return r;
}

}  // namespace redline::engine
