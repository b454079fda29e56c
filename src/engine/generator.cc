#include "engine/generator.h"

#include <fmt/format.h>

#include <chrono>
#include <new>
#include <utility>

#include "engine/kv_memory.h"
#include "engine/sequence.h"

namespace redline::engine {
namespace {

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
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

Result<std::unique_ptr<Generator>> Generator::Create(const model::Model& model,
                                                     ThreadPool& pool,
                                                     int64_t n_ctx,
                                                     int64_t batch_tokens,
                                                     model::KvType kv_type) {
  if (n_ctx < 1) {
    return Status::InvalidArgument(
        fmt::format("the context must hold at least 1 token, got {}", n_ctx));
  }
  if (batch_tokens < 1) {
    return Status::InvalidArgument(fmt::format(
        "the batch must hold at least 1 token, got {}", batch_tokens));
  }
  RL_RETURN_IF_ERROR(CheckKvCacheFits(model.config(), n_ctx, 1, kv_type,
                                      ReadMemAvailableBytes()));
  try {
    return std::make_unique<Generator>(model, pool, n_ctx, batch_tokens,
                                       kv_type);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(fmt::format(
        "allocating the KV cache for {} tokens ({}) failed: out of memory; "
        "lower --ctx",
        n_ctx,
        FormatBytes(model::KvCacheBytes(model.config(), n_ctx, kv_type))));
  }
}

Generator::Generator(const model::Model& model, ThreadPool& pool, int64_t n_ctx,
                     int64_t batch_tokens, model::KvType kv_type)
    : model_(model),
      transformer_(model.config(), model.weights(), pool, batch_tokens),
      cache_(transformer_.NewCache(n_ctx, kv_type)) {}

Status Generator::Forward(std::span<const int32_t> tokens, int64_t start_pos,
                          std::span<float> logits) {
  try {
    RL_RETURN_IF_ERROR(
        transformer_.ForwardSequence(tokens, start_pos, cache_, logits));
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory in the forward pass");
  }
  cache_.set_n_used(start_pos + static_cast<int64_t>(tokens.size()));
  return Status::Ok();
}

Result<GenerationResult> Generator::Generate(
    std::span<const int32_t> prompt, const model::SamplingParams& params,
    const std::function<bool(std::string_view, int32_t)>& on_text) {
  RL_ASSIGN_OR_RETURN(const model::SamplingParams resolved,
                      ResolveRequest(model_.config(), n_ctx(), prompt, params));
  const auto start = Clock::now();
  Sequence seq(model_, prompt, resolved, n_ctx(), start);
  GenerationResult r;
  r.prompt_tokens = seq.prompt_tokens();
  std::vector<float> logits(model_.config().vocab_size);  // [vocab]
  RL_RETURN_IF_ERROR(Forward(prompt, 0, logits));
  seq.MarkPrefillDone(Clock::now());
  r.prefill_ms = MsBetween(start, seq.prefill_done_at());
  for (;;) {
    StepResult step = seq.Accept(logits);
    if (r.tokens.empty()) r.ttft_ms = MsBetween(start, seq.first_token_at());
    r.tokens.push_back(step.token);
    if (!step.text.empty()) {
      r.text += step.text;
      if (!on_text(step.text, step.token)) {
        r.cancelled = true;
        break;
      }
    }
    if (step.finish != model::FinishReason::kNone) break;
    const int64_t pos = static_cast<int64_t>(seq.history().size()) - 1;
    RL_RETURN_IF_ERROR(
        Forward(std::span(&seq.history().back(), 1), pos, logits));
  }
  r.finish = r.cancelled ? model::FinishReason::kStop : seq.finish_reason();
  r.decode_ms = MsBetween(seq.first_token_at(), Clock::now());
  return r;
}

}  // namespace redline::engine
