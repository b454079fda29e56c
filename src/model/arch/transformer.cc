#include "model/arch/transformer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace redline::model {

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights,
                         ThreadPool& pool, int64_t max_batch_tokens)
    : config_(config),
      weights_(weights),
      pool_(pool),
      max_batch_(std::max<int64_t>(1, max_batch_tokens)) {
  const ModelConfig& c = config_;
  theta_scale_ =
      std::pow(c.rope_freq_base, -2.0f / static_cast<float>(c.head_dim));
  const int64_t b = max_batch_;
  cos_sin_.resize(b * c.head_dim);
  x_.resize(b * c.embedding_length);
  xn_.resize(b * c.embedding_length);
  q_.resize(b * c.q_dim());
  k_.resize(b * c.kv_dim());
  v_.resize(b * c.kv_dim());
  attn_.resize(b * c.q_dim());
  gate_.resize(b * c.feed_forward_length);
  up_.resize(b * c.feed_forward_length);
  size_t scratch = 0;
  auto need = [&](const kernels::WeightView& w) {
    scratch = std::max(scratch, kernels::MatMulScratchBytes(w.type, w.cols, b));
  };
  need(weights_.output);
  for (const LayerWeights& l : weights_.layers) {
    for (const auto* w : l.Matrices()) need(*w);
  }
  matmul_scratch_.resize(scratch);
}

KvCache Transformer::NewCache(int64_t n_ctx, KvType type) const {
  return KvCache(config_.block_count, n_ctx, config_.kv_dim(), type);
}

void Transformer::MatMul(const kernels::WeightView& w, const float* x,
                         int64_t n, float* y) {
  kernels::MatMul(w, x, n, y, matmul_scratch_, pool_);
}

Status Transformer::Forward(std::span<const BatchToken> batch,
                            std::span<float> logits) {
  const int64_t vocab = config_.vocab_size;
  int64_t want = 0;
  for (const BatchToken& t : batch) {
    if (t.cache == nullptr)
      return Status::InvalidArgument("batch token without a KV cache");
    if (t.token < 0 || t.token >= vocab) {
      return Status::InvalidArgument(fmt::format(
          "token id {} is outside the vocabulary [0, {})", t.token, vocab));
    }
    if (t.pos < 0 || t.pos >= t.cache->n_ctx()) {
      return Status::OutOfRange(
          fmt::format("position {} is outside the context of {} tokens", t.pos,
                      t.cache->n_ctx()));
    }
    if (t.cache->n_layer() != config_.block_count ||
        t.cache->kv_dim() != config_.kv_dim()) {
      return Status::InvalidArgument("KV cache shaped for another model");
    }
    want += t.want_logits ? 1 : 0;
  }
  if (static_cast<int64_t>(logits.size()) < want * vocab) {
    return Status::InvalidArgument("logits buffer too small");
  }
  float* out = logits.data();
  for (size_t begin = 0; begin < batch.size(); begin += max_batch_) {
    const size_t n = std::min<size_t>(max_batch_, batch.size() - begin);
    auto chunk = batch.subspan(begin, n);
    RL_RETURN_IF_ERROR(ForwardChunk(chunk, out));
    for (const BatchToken& t : chunk) out += t.want_logits ? vocab : 0;
  }
  return Status::Ok();
}

Status Transformer::ForwardSequence(std::span<const int32_t> tokens,
                                    int64_t start_pos, KvCache& cache,
                                    std::span<float> last_logits) {
  if (tokens.empty()) return Status::InvalidArgument("no tokens to run");
  std::vector<BatchToken> batch(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch[i] = {tokens[i], start_pos + static_cast<int64_t>(i), &cache,
                i + 1 == tokens.size()};
  }
  return Forward(batch, last_logits);
}

void Transformer::Attention(std::span<const BatchToken> batch, int64_t layer) {
  const ModelConfig& c = config_;
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t head_dim = c.head_dim;
  const int64_t group = c.head_count / c.head_count_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  // Per-thread scratch: scores [n_kv] for f32 caches, [2 * head_dim] for f16.
  int64_t stride = 2 * head_dim;
  for (const BatchToken& t : batch) stride = std::max(stride, t.pos + 1);
  if (scores_stride_ < stride ||
      scores_.size() < static_cast<size_t>(pool_.num_threads() * stride)) {
    scores_stride_ = stride;
    scores_.resize(pool_.num_threads() * scores_stride_);
  }
  pool_.ParallelFor(
      n * c.head_count, 1, [&](int64_t begin, int64_t end, int thread) {
        float* scratch = scores_.data() + thread * scores_stride_;
        for (int64_t i = begin; i < end; ++i) {
          const int64_t t = i / c.head_count;
          const int64_t h = i % c.head_count;
          const BatchToken& bt = batch[t];
          const int64_t g = h / group;
          const float* q = q_.data() + t * c.q_dim() + h * head_dim;
          float* out = attn_.data() + t * c.q_dim() + h * head_dim;
          const KvCache& cache = *bt.cache;
          if (cache.type() == KvType::kF16) {
            kernels::AttentionHeadF16(q, cache.KHalf(layer, 0) + g * head_dim,
                                      cache.VHalf(layer, 0) + g * head_dim,
                                      bt.pos + 1, head_dim, c.kv_dim(), scale,
                                      scratch, out);
          } else {
            kernels::AttentionHead(q, cache.K(layer, 0) + g * head_dim,
                                   cache.V(layer, 0) + g * head_dim, bt.pos + 1,
                                   head_dim, c.kv_dim(), scale, scratch, out);
          }
        }
      });
}

namespace {

int64_t MatrixBytes(const kernels::WeightView& w) {
  return w.rows * kernels::RowBytes(w.type, w.cols);
}

}  // namespace

void Transformer::Mark(ForwardStage stage, int64_t* t) {
  if (profile_ == nullptr) return;
  RecordStage(*profile_, stage, static_cast<int32_t>(mark_layer_), t);
}

Status Transformer::ForwardChunk(std::span<const BatchToken> batch,
                                 float* logits) {
  const ModelConfig& c = config_;
  const ModelWeights& w = weights_;
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t n_embd = c.embedding_length;
  const int64_t q_dim = c.q_dim();
  const int64_t kv_dim = c.kv_dim();
  const int64_t n_ff = c.feed_forward_length;
  using S = ForwardStage;
  int64_t t_mark = profile_ != nullptr ? ProfileNowNs() : 0;
  if (profile_ != nullptr) {
    // The products' weight bytes and flops are known from the shapes.
    ForwardProfile& p = *profile_;
    auto add = [&](S s, const kernels::WeightView& wv, int64_t rows_in) {
      p.weight_bytes[static_cast<int>(s)] += MatrixBytes(wv);
      p.flops[static_cast<int>(s)] += 2.0 * static_cast<double>(wv.rows) *
                                      static_cast<double>(wv.cols) *
                                      static_cast<double>(rows_in);
    };
    for (const LayerWeights& l : w.layers) {
      add(S::kQkv, l.wq, n);
      add(S::kQkv, l.wk, n);
      add(S::kQkv, l.wv, n);
      add(S::kAttnOutput, l.wo, n);
      add(S::kGateUp, l.w_gate, n);
      add(S::kGateUp, l.w_up, n);
      add(S::kDown, l.w_down, n);
    }
    int64_t rows_out = 0;
    for (const BatchToken& bt : batch) rows_out += bt.want_logits ? 1 : 0;
    if (rows_out > 0) add(S::kOutputHead, w.output, rows_out);
    // Attention: q.k and p.v over each token's visible positions.
    double att = 0;
    for (const BatchToken& bt : batch)
      att += 4.0 * static_cast<double>(bt.pos + 1) * q_dim;
    p.flops[static_cast<int>(S::kAttention)] += att * c.block_count;
    ++p.forward_calls;
    p.tokens += n;
  }

  for (int64_t t = 0; t < n; ++t)
    kernels::DequantizeRow(w.token_embd, batch[t].token,
                           x_.data() + t * n_embd);
  const float* freq_factors =
      w.rope_freqs.empty() ? nullptr : w.rope_freqs.data();
  for (int64_t t = 0; t < n; ++t) {
    kernels::RopeCosSin(batch[t].pos, c.head_dim / 2, theta_scale_,
                        freq_factors, cos_sin_.data() + t * c.head_dim);
  }
  mark_layer_ = -1;
  Mark(S::kEmbedding, &t_mark);

  for (int64_t layer = 0; layer < c.block_count; ++layer) {
    const LayerWeights& l = w.layers[layer];
    mark_layer_ = layer;
    for (int64_t t = 0; t < n; ++t) {
      kernels::RmsNorm(x_.data() + t * n_embd, l.attn_norm.data(), n_embd,
                       c.rms_norm_eps, xn_.data() + t * n_embd);
    }
    Mark(S::kNorm, &t_mark);
    {
      const kernels::WeightView ws[] = {l.wq, l.wk, l.wv};
      float* ys[] = {q_.data(), k_.data(), v_.data()};
      kernels::MatMulMany(ws, xn_.data(), n, ys, matmul_scratch_, pool_);
    }
    Mark(S::kQkv, &t_mark);
    for (int64_t t = 0; t < n; ++t) {
      float* q = q_.data() + t * q_dim;
      float* k = k_.data() + t * kv_dim;
      float* v = v_.data() + t * kv_dim;
      if (!l.bq.empty()) {
        kernels::Add(l.bq.data(), q_dim, q);
        kernels::Add(l.bk.data(), kv_dim, k);
        kernels::Add(l.bv.data(), kv_dim, v);
      }
      const float* cos_sin = cos_sin_.data() + t * c.head_dim;
      kernels::Rope(q, c.head_count, c.head_dim, cos_sin, c.rope_style);
      kernels::Rope(k, c.head_count_kv, c.head_dim, cos_sin, c.rope_style);
      batch[t].cache->Store(layer, batch[t].pos, k, v);
    }
    Mark(S::kRope, &t_mark);
    Attention(batch, layer);
    Mark(S::kAttention, &t_mark);
    // xn_ reused as the attention output projection.
    MatMul(l.wo, attn_.data(), n, xn_.data());
    Mark(S::kAttnOutput, &t_mark);
    kernels::Add(xn_.data(), n * n_embd, x_.data());
    Mark(S::kResidual, &t_mark);

    for (int64_t t = 0; t < n; ++t) {
      kernels::RmsNorm(x_.data() + t * n_embd, l.ffn_norm.data(), n_embd,
                       c.rms_norm_eps, xn_.data() + t * n_embd);
    }
    Mark(S::kNorm, &t_mark);
    {
      const kernels::WeightView ws[] = {l.w_gate, l.w_up};
      float* ys[] = {gate_.data(), up_.data()};
      kernels::MatMulMany(ws, xn_.data(), n, ys, matmul_scratch_, pool_);
    }
    Mark(S::kGateUp, &t_mark);
    kernels::SiluMul(gate_.data(), up_.data(), n * n_ff, gate_.data());
    Mark(S::kActivation, &t_mark);
    MatMul(l.w_down, gate_.data(), n, xn_.data());
    Mark(S::kDown, &t_mark);
    kernels::Add(xn_.data(), n * n_embd, x_.data());
    Mark(S::kResidual, &t_mark);
  }
  mark_layer_ = -1;

  // Final norm and output projection for the rows that want logits only
  // (usually the last prompt token), packed into xn_.
  int64_t rows = 0;
  for (int64_t t = 0; t < n; ++t) {
    if (!batch[t].want_logits) continue;
    kernels::RmsNorm(x_.data() + t * n_embd, w.output_norm.data(), n_embd,
                     c.rms_norm_eps, xn_.data() + rows * n_embd);
    ++rows;
  }
  Mark(S::kNorm, &t_mark);
  if (rows > 0) MatMul(w.output, xn_.data(), rows, logits);
  Mark(S::kOutputHead, &t_mark);
  return Status::Ok();
}

}  // namespace redline::model
