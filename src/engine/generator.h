// Generator: runs one sequence from prompt to finish on the calling thread —
// prefill (in batches), then decode steps with sampling, stop strings,
// end-of-generation tokens and max tokens — and streams text as it goes.
// `redline run` and tests use it directly; the server's engine loop batches
// many sequences with the same parts.
//
// Ownership: borrows the model and the pool; owns its KV cache.
// Thread-safety: not thread-safe; one caller at a time.
#ifndef REDLINE_ENGINE_GENERATOR_H_
#define REDLINE_ENGINE_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "model/arch/kv_cache.h"
#include "model/arch/model.h"
#include "model/arch/transformer.h"
#include "model/sampling/sampling_params.h"
#include "model/sampling/stop_matcher.h"

namespace redline::engine {

struct GenerationResult {
  std::vector<int32_t>
      tokens;        // generated ids (incl. a final end-of-generation id)
  std::string text;  // streamed text, stop strings removed
  model::FinishReason finish = model::FinishReason::kNone;
  bool cancelled = false;
  int64_t prompt_tokens = 0;
  double prefill_ms = 0;  // prompt forward pass
  double ttft_ms = 0;     // start of Generate to first sampled token
  double decode_ms = 0;   // first sampled token to the end
  // Decode steps after the first token / decode_ms.
  double decode_tok_per_s() const;
  double prefill_tok_per_s() const;
};

class Generator {
 public:
  // n_ctx: context length (KV cache positions). batch_tokens: prefill chunk.
  // kv_type: KV cache element type (see model::KvType).
  Generator(const model::Model& model, ThreadPool& pool, int64_t n_ctx,
            int64_t batch_tokens = 256,
            model::KvType kv_type = model::KvType::kF16);

  int64_t n_ctx() const { return cache_.n_ctx(); }

  // Generates from `prompt` (token ids). on_text(piece, token) is called with
  // each piece of text that is final (UTF-8 complete, not part of a possible
  // stop string); returning false cancels. Errors: InvalidArgument (bad
  // params, empty prompt, bad ids), OutOfRange (prompt + max_tokens beyond
  // n_ctx — never truncated silently).
  Result<GenerationResult> Generate(
      std::span<const int32_t> prompt, const model::SamplingParams& params,
      const std::function<bool(std::string_view, int32_t)>& on_text);

 private:
  const model::Model& model_;
  model::Transformer transformer_;
  model::KvCache cache_;
};

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_GENERATOR_H_
