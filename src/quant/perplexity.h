// Perplexity and KL divergence of a model on a text, computed the way
// llama.cpp's llama-perplexity does, so the numbers are comparable:
//   - the whole text is tokenised once, BOS first when the vocabulary adds
//     one (Tokenizer::Encode with add_special, no special-token parsing);
//   - it is cut into floor(tokens / n_ctx) chunks of n_ctx tokens (the tail
//     is dropped); each chunk is evaluated from an empty context with its
//     first token replaced by BOS;
//   - only the second half is scored: logits at positions n_ctx/2 ..
//     n_ctx - 2 predict the next token; NLL = -log softmax(logits)[next],
//     the softmax's sum of exp accumulated in double as llama.cpp does;
//   - PPL = exp(mean NLL), and its error exp(mean) * sqrt(var / (N - 1))
//     ("PPL = x +/- y").
// With a reference model: per scored position KL(P_ref || P) over the full
// vocabulary (mean, median, p99), the share of positions where both
// argmaxes agree, and both perplexities.
//
// Thread-safety: EvaluatePerplexity may run concurrently on different
// models. Cost: one forward pass per chunk per model (n_ctx tokens each),
// plus 3 x `decode_tokens` single-token steps to time decoding; memory is one
// chunk's logits per model (n_ctx x vocab floats).
#ifndef REDLINE_QUANT_PERPLEXITY_H_
#define REDLINE_QUANT_PERPLEXITY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/arch/kv_cache.h"
#include "model/arch/model.h"

namespace redline::quant {

struct EvalOptions {
  int64_t n_ctx = 128;  // tokens per chunk (llama-perplexity -c)
  int threads = 0;      // <= 0: physical cores
  // Evaluate at most this many chunks (0: all), like llama-perplexity
  // --chunks.
  int64_t max_chunks = 0;
  // Single-token decode steps timed for decode tok/s (0: skip; at most
  // n_ctx), median of 3 runs.
  int64_t decode_tokens = 128;
  // KV cache of the evaluated model (the reference's is always f16). f16 is
  // attended in ggml's arithmetic, as llama-perplexity does; q8_0 and f32 in
  // Redline's serving kernels, so `--ref` of the same file gives the cache
  // type's KL divergence.
  model::KvType kv_type = model::KvType::kF16;
  // Called after each chunk with (chunks done, chunk count, running PPL).
  std::function<void(int64_t, int64_t, double)> on_chunk;
};

struct KlStats {
  double mean = 0;
  double median = 0;
  double p99 = 0;
  double same_top1_pct = 0;  // positions whose argmax agrees, in %
  double ref_ppl = 0;
};

struct EvalResult {
  double ppl = 0;
  double ppl_stderr =
      0;  // as llama-perplexity prints it: PPL * sd(NLL)/sqrt(N-1)
  int64_t chunks = 0;
  int64_t scored_tokens = 0;
  int64_t text_tokens = 0;
  std::vector<double> chunk_ppl;  // running PPL after each chunk
  double prefill_tok_per_s = 0;   // chunk forward passes (all logits)
  double decode_tok_per_s = 0;    // single-token steps
  std::optional<KlStats> kl;      // with a reference model
};

// Errors: InvalidArgument when the model has no tokenizer, the text is too
// short for one chunk, n_ctx < 4 or beyond the model's limits, or the
// reference has another vocabulary size; the forward pass's errors.
Result<EvalResult> EvaluatePerplexity(const model::Model& model,
                                      const std::string& text,
                                      const EvalOptions& options,
                                      const model::Model* reference = nullptr);

// The exact log-softmax probability of `token` under `logits`, computed as
// llama-perplexity does (float max, double sum of expf).
double LogSoftmaxAt(const float* logits, int64_t n_vocab, int32_t token);

}  // namespace redline::quant

#endif  // REDLINE_QUANT_PERPLEXITY_H_
