#include "engine/generator.h"

#include <fmt/format.h>

#include <chrono>
#include <new>
#include <utility>

#include "engine/kv_memory.h"
#include "engine/prompt_lookup.h"
#include "engine/sequence.h"

namespace redline::engine {
namespace {

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
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

Result<std::unique_ptr<Generator>> Generator::Create(
    const model::Model& model, ThreadPool& pool, int64_t n_ctx,
    int64_t batch_tokens, model::KvType kv_type, const model::Model* draft) {
  if (n_ctx < 1) {
    return Status::InvalidArgument(
        fmt::format("the context must hold at least 1 token, got {}", n_ctx));
  }
  if (batch_tokens < 1) {
    return Status::InvalidArgument(fmt::format(
        "the batch must hold at least 1 token, got {}", batch_tokens));
  }
  std::optional<int64_t> available = ReadMemAvailableBytes();
  RL_RETURN_IF_ERROR(
      CheckKvCacheFits(model.config(), n_ctx, 1, kv_type, available));
  if (draft != nullptr) {
    RL_RETURN_IF_ERROR(CheckDraftVocabulary(model, *draft));
    if (available)
      *available -= model::KvCacheBytes(model.config(), n_ctx, kv_type);
    RL_RETURN_IF_ERROR(
        CheckKvCacheFits(draft->config(), n_ctx, 1, kv_type, available)
            .WithContext("draft model"));
  }
  try {
    return std::make_unique<Generator>(model, pool, n_ctx, batch_tokens,
                                       kv_type, draft);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(fmt::format(
        "allocating the KV cache for {} tokens ({}) failed: out of memory; "
        "lower --ctx",
        n_ctx,
        FormatBytes(model::KvCacheBytes(model.config(), n_ctx, kv_type))));
  }
}

Generator::Generator(const model::Model& model, ThreadPool& pool, int64_t n_ctx,
                     int64_t batch_tokens, model::KvType kv_type,
                     const model::Model* draft)
    : model_(model),
      transformer_(model.config(), model.weights(), pool, batch_tokens),
      cache_(transformer_.NewCache(n_ctx, kv_type)) {
  if (draft != nullptr) {
    draft_ = std::make_unique<DraftModel>(
        *draft, pool, model.config().vocab_size, batch_tokens);
    draft_seq_.emplace(draft_->NewSequence(n_ctx, kv_type));
  }
}

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

Status Generator::ForwardAll(std::span<const int32_t> tokens, int64_t start_pos,
                             std::span<float> logits) {
  std::vector<model::BatchToken> batch(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    batch[i] = {tokens[i], start_pos + static_cast<int64_t>(i), &cache_, true};
  try {
    RL_RETURN_IF_ERROR(transformer_.Forward(batch, logits));
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory in the forward pass");
  }
  cache_.set_n_used(start_pos + static_cast<int64_t>(tokens.size()));
  return Status::Ok();
}

Result<GenerationResult> Generator::Generate(
    std::span<const int32_t> prompt, const model::SamplingParams& params,
    const std::function<bool(std::string_view, int32_t)>& on_text,
    const SpeculativeOptions& spec) {
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
  // Accepts the logits of one position; false when generation ended.
  auto accept = [&](std::span<float> row) {
    StepResult step = seq.Accept(row);
    if (r.tokens.empty()) r.ttft_ms = MsBetween(start, seq.first_token_at());
    r.tokens.push_back(step.token);
    if (!step.text.empty()) {
      r.text += step.text;
      if (!on_text(step.text, step.token)) {
        r.cancelled = true;
        return false;
      }
    }
    return step.finish == model::FinishReason::kNone;
  };
  const int64_t vocab = model_.config().vocab_size;
  DraftController control(spec.max_draft_tokens, /*shadow=*/draft_ == nullptr,
                          spec.pace_by_cost);
  std::vector<float> rows;  // [k + 1, vocab] of a verification pass
  std::vector<int32_t> verify;
  // A one-token draft that is not verified (prompt_lookup.h).
  std::vector<int32_t> shadow;
  bool going = accept(logits);
  while (going) {
    const int64_t pos = static_cast<int64_t>(seq.history().size()) - 1;
    const auto pass_start = Clock::now();
    std::vector<int32_t> draft;
    if (spec.enabled) {
      // Room left: positions pos.. must fit the context, and drafting past
      // max_tokens would only verify tokens that are never emitted.
      const int64_t room =
          std::min<int64_t>(n_ctx() - 1 - pos, seq.params().max_tokens -
                                                   seq.generated_tokens() - 1);
      const int k = static_cast<int>(
          std::min<int64_t>(control.NextLength(), std::max<int64_t>(0, room)));
      if (k > 0 && draft_ != nullptr) {
        DraftModel::Job job{
            &*draft_seq_, seq.history(), &seq.sampler(), seq.prompt_tokens(), k,
            &draft};
        RL_RETURN_IF_ERROR(draft_->Propose(std::span(&job, 1)));
      } else if (k > 0) {
        draft =
            DraftFromHistory(seq.history(), k, spec.ngram_max, spec.ngram_min);
      } else if (control.wants_shadow()) {
        shadow =
            DraftFromHistory(seq.history(), 1, spec.ngram_max, spec.ngram_min);
      }
    }
    ++r.speculative.target_passes;
    if (draft.empty()) {
      RL_RETURN_IF_ERROR(
          Forward(std::span(&seq.history().back(), 1), pos, logits));
      control.RecordPass(1, SecondsSince(pass_start));
      ++r.speculative.tokens_emitted;
      going = accept(logits);
      if (!shadow.empty()) {
        control.RecordShadow(seq.history().back() == shadow[0]);
        shadow.clear();
      }
      continue;
    }
    verify.assign(1, seq.history().back());
    verify.insert(verify.end(), draft.begin(), draft.end());
    rows.resize(verify.size() * static_cast<size_t>(vocab));
    RL_RETURN_IF_ERROR(ForwardAll(verify, pos, rows));
    control.RecordPass(static_cast<int>(verify.size()),
                       SecondsSince(pass_start));
    int accepted = 0;
    for (size_t i = 0; i < verify.size() && going; ++i) {
      going = accept(std::span(rows).subspan(i * vocab, vocab));
      ++r.speculative.tokens_emitted;
      if (i == draft.size() || seq.history().back() != draft[i]) break;
      ++accepted;
    }
    // The cache holds valid entries up to the last token that went through
    // the model and was kept; later drafted positions are overwritten
    // before anything attends to them.
    cache_.set_n_used(static_cast<int64_t>(seq.history().size()) - 1);
    r.speculative.drafted_tokens += static_cast<int64_t>(draft.size());
    r.speculative.accepted_tokens += accepted;
    control.Record(static_cast<int>(draft.size()), accepted);
  }
  r.finish = r.cancelled ? model::FinishReason::kStop : seq.finish_reason();
  r.decode_ms = MsBetween(seq.first_token_at(), Clock::now());
  return r;
}

}  // namespace redline::engine
