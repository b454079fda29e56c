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
  return KvCache(config_.block_count, n_ctx, config_.kv_dim(), type,
                 ChunkedCache(type) ? KvLayout::kHeadBlocks : KvLayout::kRows,
                 config_.head_count_kv);
}

bool Transformer::ChunkedCache(KvType type) const {
  return type == KvType::kQ8_0 ||
         (type == KvType::kF16 && !ggml_f16_attention_);
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

namespace {

// Partials one pass may hold: 4 MiB, whatever the batch and depth (a
// 512-token prefill chunk at depth 8k would otherwise need hundreds of MiB).
constexpr int64_t kMaxPartialFloats = int64_t{1} << 20;

int64_t ChunkCount(int64_t n_kv) {
  return (n_kv + kernels::kAttentionChunkKeys - 1) /
         kernels::kAttentionChunkKeys;
}

// Tokens at most in one group unit of ChunkedAttentionPass (bounds the
// per-thread copies of their queries and partials).
constexpr int64_t kMaxGroupTokens = 16;

// Per-thread scratch floats of ChunkedAttentionPass: the kernel's work, then
// a group's queries [kMaxGroupTokens * group, head_dim] and its partial.
int64_t ChunkThreadFloats(int64_t group, int64_t head_dim) {
  return kernels::AttentionChunkWorkFloats(head_dim) +
         kMaxGroupTokens * group * head_dim +
         kernels::AttentionPartialFloats(kMaxGroupTokens * group, head_dim);
}

}  // namespace

void Transformer::Attention(std::span<const BatchToken> batch, int64_t layer) {
  const ModelConfig& c = config_;
  const KvType type = batch.front().cache->type();
  if (ChunkedCache(type)) {
    ChunkedAttention(batch, layer);
    return;
  }
  // These kernels step one stride over every position: rows only. NewCache
  // gives rows wherever ChunkedCache is false; a cache made before
  // set_ggml_f16_attention(true) is a caller's bug.
  for (const BatchToken& t : batch)
    RL_CHECK(t.cache->layout() == KvLayout::kRows);
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

void Transformer::ChunkedAttention(std::span<const BatchToken> batch,
                                   int64_t layer) {
  const ModelConfig& c = config_;
  const int64_t group = c.head_count / c.head_count_kv;
  const int64_t per_chunk = kernels::AttentionPartialFloats(group, c.head_dim);
  const size_t work = static_cast<size_t>(pool_.num_threads() *
                                          ChunkThreadFloats(group, c.head_dim));
  if (chunk_work_.size() < work) chunk_work_.resize(work);
  // Passes of consecutive tokens whose partials fit kMaxPartialFloats, at
  // least one token each (one token alone may need more: its partials grow
  // with its context, about 4 * q_dim bytes per kAttentionChunkKeys).
  const int64_t n = static_cast<int64_t>(batch.size());
  int64_t begin = 0, floats = 0;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t need =
        c.head_count_kv * ChunkCount(batch[t].pos + 1) * per_chunk;
    if (t > begin && floats + need > kMaxPartialFloats) {
      ChunkedAttentionPass(batch, layer, begin, t);
      begin = t;
      floats = 0;
    }
    floats += need;
  }
  ChunkedAttentionPass(batch, layer, begin, n);
}

void Transformer::ChunkedAttentionPass(std::span<const BatchToken> batch,
                                       int64_t layer, int64_t begin,
                                       int64_t end) {
  const ModelConfig& c = config_;
  const int64_t head_dim = c.head_dim;
  const int64_t n_kv_heads = c.head_count_kv;
  const int64_t group = c.head_count / n_kv_heads;
  const int64_t per_chunk = kernels::AttentionPartialFloats(group, head_dim);
  const int64_t thread_floats = ChunkThreadFloats(group, head_dim);
  const int64_t work_floats = kernels::AttentionChunkWorkFloats(head_dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t m = end - begin;
  // Partial slots: one per (token, KV head, chunk), in that order.
  item_begin_.assign(1, 0);
  bool any_split = false;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t chunks = ChunkCount(batch[t].pos + 1);
    any_split = any_split || chunks > 1;
    item_begin_.push_back(item_begin_.back() + n_kv_heads * chunks);
  }
  if (partials_.size() < static_cast<size_t>(item_begin_.back() * per_chunk)) {
    partials_.resize(item_begin_.back() * per_chunk);
  }
  // Work units. Consecutive tokens of one sequence at consecutive positions
  // (a prompt chunk, a verification pass) all see the chunks that end at or
  // before the first one's position whole: one unit per such chunk and KV
  // head serves up to kMaxGroupTokens of them, so the chunk's keys and
  // values are read and widened once. Every other chunk is a unit per
  // token. The kernel treats each query head alone, so grouping does not
  // change any result.
  units_.clear();
  for (int64_t j0 = 0; j0 < m;) {
    const BatchToken& first = batch[begin + j0];
    int64_t j1 = j0 + 1;
    while (j1 < m && j1 - j0 < kMaxGroupTokens &&
           batch[begin + j1].cache == first.cache &&
           batch[begin + j1].pos == first.pos + (j1 - j0)) {
      ++j1;
    }
    const int64_t shared =
        j1 - j0 > 1 ? (first.pos + 1) / kernels::kAttentionChunkKeys : 0;
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      for (int64_t ch = 0; ch < shared; ++ch)
        units_.push_back({j0, j1 - j0, g, ch});
    }
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t chunks = ChunkCount(batch[begin + j].pos + 1);
      for (int64_t g = 0; g < n_kv_heads; ++g) {
        for (int64_t ch = shared; ch < chunks; ++ch)
          units_.push_back({j, 1, g, ch});
      }
    }
    j0 = j1;
  }
  const auto slot = [&](int64_t j, int64_t g, int64_t chunk) {
    return partials_.data() +
           (item_begin_[j] + g * ChunkCount(batch[begin + j].pos + 1) + chunk) *
               per_chunk;
  };
  const auto n_units = static_cast<int64_t>(units_.size());
  pool_.ParallelFor(n_units, 1, [&](int64_t ub, int64_t ue, int thread) {
    float* work = chunk_work_.data() + thread * thread_floats;
    float* group_q = work + work_floats;
    float* group_partial = group_q + kMaxGroupTokens * group * head_dim;
    for (int64_t u = ub; u < ue; ++u) {
      const ChunkUnit& unit = units_[u];
      const BatchToken& bt = batch[begin + unit.token];
      const KvCache& cache = *bt.cache;
      RL_DCHECK(cache.type() != KvType::kF32);
      const int64_t stride = cache.PositionStrideBytes();
      const int64_t first = unit.chunk * kernels::kAttentionChunkKeys;
      const int64_t n_kv =
          std::min(kernels::kAttentionChunkKeys, bt.pos + 1 - first);
      const kernels::KvElement element = cache.type() == KvType::kQ8_0
                                             ? kernels::KvElement::kQ8_0
                                             : kernels::KvElement::kF16;
      const int64_t g = unit.kv_head;
      const int64_t heads = group * head_dim;  // floats of a token's group
      const auto q_of = [&](int64_t j) {
        return q_.data() + (begin + j) * c.q_dim() + g * heads;
      };
      if (unit.n_tokens == 1) {
        kernels::AttentionChunk(
            element, q_of(unit.token), group, cache.KHead(layer, first, g),
            cache.VHead(layer, first, g), n_kv, head_dim, stride, scale, work,
            slot(unit.token, g, unit.chunk));
      } else {
        const int64_t n_q = unit.n_tokens * group;
        for (int64_t i = 0; i < unit.n_tokens; ++i)
          std::copy_n(q_of(unit.token + i), heads, group_q + i * heads);
        kernels::AttentionChunk(element, group_q, n_q,
                                cache.KHead(layer, first, g),
                                cache.VHead(layer, first, g), n_kv, head_dim,
                                stride, scale, work, group_partial);
        // Each token's share into its own slot: acc rows, max, sum.
        const float* max = group_partial + n_q * head_dim;
        const float* sum = max + n_q;
        for (int64_t i = 0; i < unit.n_tokens; ++i) {
          float* dst = slot(unit.token + i, g, unit.chunk);
          std::copy_n(group_partial + i * heads, heads, dst);
          std::copy_n(max + i * group, group, dst + heads);
          std::copy_n(sum + i * group, group, dst + heads + group);
        }
      }
      for (int64_t i = 0; i < unit.n_tokens; ++i) {
        const int64_t j = unit.token + i;
        if (ChunkCount(batch[begin + j].pos + 1) == 1) {
          kernels::MergeAttention(
              slot(j, g, 0), 1, group, head_dim,
              attn_.data() + (begin + j) * c.q_dim() + g * heads);
        }
      }
    }
  });
  if (!any_split) return;
  // Merge the chunks of every (token, KV head) that has several.
  const int64_t n_pairs = m * n_kv_heads;
  pool_.ParallelFor(n_pairs, 1, [&](int64_t pb, int64_t pe, int) {
    for (int64_t pair = pb; pair < pe; ++pair) {
      const int64_t j = pair / n_kv_heads;
      const int64_t g = pair % n_kv_heads;
      const int64_t chunks = ChunkCount(batch[begin + j].pos + 1);
      if (chunks == 1) continue;
      kernels::MergeAttention(
          slot(j, g, 0), chunks, group, head_dim,
          attn_.data() + (begin + j) * c.q_dim() + g * group * head_dim);
    }
  });
}

namespace {

// Tokens per work unit of the per-token stages (bias, rope, KV store,
// activation) that a step splits over the pool: a unit is several
// microseconds of work, so a decode step of one to three tokens stays on
// the calling thread (ParallelFor runs a single unit inline). Why split at
// all: in a prefill these stages were 4-7 % of the step on one thread while
// the other threads waited (qwen2.5-0.5b Q8_0, 512 tokens, `redline
// profile`).
constexpr int64_t kTokensPerUnit = 4;

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
    // Tokens are independent here, and every (cache, position) a batch
    // writes is distinct, so threads may store side by side.
    pool_.ParallelFor(n, kTokensPerUnit, [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) {
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
    });
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
    pool_.ParallelFor(n, kTokensPerUnit, [&](int64_t t0, int64_t t1, int) {
      kernels::SiluMul(gate_.data() + t0 * n_ff, up_.data() + t0 * n_ff,
                       (t1 - t0) * n_ff, gate_.data() + t0 * n_ff);
    });
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
