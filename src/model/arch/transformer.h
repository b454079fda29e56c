// Transformer: the forward pass of llama- and qwen2-style decoders.
//
// Per layer (pre-norm):
//   h  = x + Wo * Attention(RoPE(Wq*RmsNorm(x) + bq), RoPE(Wk*.. + bk), Wv*.. + bv)
//   x' = h + Wdown * (SiLU(Wgate*RmsNorm(h)) * (Wup*RmsNorm(h)))
// then RmsNorm and the output projection (the token embedding when tied).
//
// One call runs a batch of tokens that may belong to different sequences
// (continuous batching): matrix products run once over the whole batch,
// attention per token over its own sequence's KV cache. Prefill of one
// prompt is a batch of consecutive positions of one sequence.
//
// Ownership: borrows config, weights, pool; owns scratch buffers sized for
// max_batch_tokens. Thread-safety: not thread-safe; one owner thread calls
// Forward (it fans out over the pool internally).
#ifndef REDLINE_MODEL_ARCH_TRANSFORMER_H_
#define REDLINE_MODEL_ARCH_TRANSFORMER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "model/arch/forward_profile.h"
#include "model/arch/kv_cache.h"
#include "model/arch/model_config.h"
#include "model/arch/weights.h"

namespace redline::model {

// One token of a forward batch.
struct BatchToken {
  int32_t token = 0;
  int64_t pos = 0;  // position in its sequence
  KvCache* cache =
      nullptr;  // its sequence's cache; positions < pos must be filled
  bool want_logits = false;  // produce a logits row for this token
};

class Transformer {
 public:
  // Cost: allocates ~max_batch_tokens * (4 * n_embd + 2 * n_ff) floats.
  Transformer(const ModelConfig& config, const ModelWeights& weights,
              ThreadPool& pool, int64_t max_batch_tokens = 256);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  int64_t max_batch_tokens() const { return max_batch_; }

  // Runs `batch` (any size; split internally into max_batch_tokens pieces),
  // writing each token's K/V into its cache at its position.
  //   logits: [count(want_logits), vocab_size], rows in batch order.
  // Errors: InvalidArgument (token id out of range, null cache, logits size),
  // OutOfRange (pos >= cache n_ctx). Nothing is written on error.
  Status Forward(std::span<const BatchToken> batch, std::span<float> logits);

  // Convenience: prefill/decode `tokens` at positions start_pos.. of one
  // sequence; logits [vocab_size] of the last token.
  Status ForwardSequence(std::span<const int32_t> tokens, int64_t start_pos,
                         KvCache& cache, std::span<float> last_logits);

  // A KV cache shaped for this model.
  KvCache NewCache(int64_t n_ctx, KvType type = KvType::kF32) const;

  // Attention over f16 caches in ggml's arithmetic (kernels::AttentionHeadF16:
  // a binary16 accumulator, one key at a time, one thread per head) instead
  // of the chunked f32 kernels (kernels::AttentionChunk): logits then equal
  // llama.cpp's to rounding, at several times the attention cost at depth.
  // `redline eval` turns it on so perplexities compare with
  // llama-perplexity's. Off by default; q8_0 caches are unaffected. Set it
  // before NewCache: that arithmetic reads f16 caches laid out in rows,
  // which NewCache then makes (Forward CHECKs the layout).
  void set_ggml_f16_attention(bool on) { ggml_f16_attention_ = on; }

  // Accumulates stage times into `profile` during Forward (null: off).
  // Borrowed; must outlive its use.
  void set_profile(ForwardProfile* profile) { profile_ = profile; }

 private:
  Status ForwardChunk(std::span<const BatchToken> batch, float* logits);
  // Whether attention over a cache of `type` runs chunked (AttentionChunk,
  // whose chunks NewCache lays out as head blocks) rather than one head over
  // every position (rows).
  bool ChunkedCache(KvType type) const;
  void MatMul(const kernels::WeightView& w, const float* x, int64_t n,
              float* y);
  void Attention(std::span<const BatchToken> batch, int64_t layer);
  // Attention over f16 / q8_0 caches: kernels::AttentionChunk per (token,
  // KV head, chunk of kAttentionChunkKeys positions) spread over the pool
  // (consecutive tokens of one sequence share the calls for the chunks they
  // all see whole), then the chunks merged per (token, KV head). The batch
  // runs in passes of consecutive tokens whose partials fit the partials
  // budget; ChunkedAttentionPass runs tokens [begin, end).
  void ChunkedAttention(std::span<const BatchToken> batch, int64_t layer);
  void ChunkedAttentionPass(std::span<const BatchToken> batch, int64_t layer,
                            int64_t begin, int64_t end);
  // Profile bookkeeping: closes the stage that started at *t (when
  // profiling) and starts the next one.
  void Mark(ForwardStage stage, int64_t* t);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  ThreadPool& pool_;
  int64_t max_batch_;
  float theta_scale_ = 1.0f;  // rope_freq_base^(-2 / head_dim)
  std::vector<float>
      cos_sin_;  // RoPE rotation of each batch token [max_batch, head_dim]
  // Scratch, [max_batch, width] each.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_;
  std::vector<float>
      scores_;  // attention scratch [num_threads, scores_stride_]
  int64_t scores_stride_ = 0;
  // Chunked attention scratch: per thread the kernel's work and a token
  // group's queries and partial; the partials of one pass (4 MiB, or one
  // token's when that is more); each pass token's first partial slot
  // (prefix sums, [pass tokens + 1]); the pass's work units (tokens
  // [token, token + n_tokens) of the pass, KV head, chunk).
  struct ChunkUnit {
    int64_t token, n_tokens, kv_head, chunk;
  };
  std::vector<float> chunk_work_;
  std::vector<float> partials_;
  std::vector<int64_t> item_begin_;
  std::vector<ChunkUnit> units_;
  std::vector<std::byte> matmul_scratch_;
  std::vector<int64_t> logit_rows_;
  ForwardProfile* profile_ = nullptr;
  bool ggml_f16_attention_ = false;
  int64_t mark_layer_ = -1;  // the layer Mark attributes events to
};

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_TRANSFORMER_H_
