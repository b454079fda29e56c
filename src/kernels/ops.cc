#include "kernels/ops.h"

#include <cmath>

#include "base/check.h"
#include "kernels/kernel_table.h"

namespace redline::kernels {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps,
             float* out) {
  RL_DCHECK(n > 0) << "n=" << n;
  ActiveKernels().rms_norm(x, weight, n, eps, out);
}

void Softmax(float* x, int64_t n) {
  RL_DCHECK(n > 0) << "n=" << n;
  ActiveKernels().softmax(x, n);
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  ActiveKernels().silu_mul(gate, up, n, out);
}

void Add(const float* x, int64_t n, float* y) { ActiveKernels().add(x, n, y); }

void ToF16(const float* x, int64_t n, uint16_t* out) {
  if (n > 0) ActiveKernels().to_f16(x, n, out);
}

int64_t Argmax(const float* x, int64_t n) {
  return n <= 0 ? 0 : ActiveKernels().argmax(x, n);
}

void RopeCosSin(int64_t pos, int64_t n_pairs, float theta_scale,
                const float* freq_factors, float* cos_sin) {
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < n_pairs; ++i) {
    const float angle =
        freq_factors == nullptr ? theta : theta / freq_factors[i];
    cos_sin[2 * i] = std::cos(angle);
    cos_sin[2 * i + 1] = std::sin(angle);
    theta *= theta_scale;
  }
}

void Rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin,
          RopeStyle style) {
  RL_DCHECK(head_dim % 2 == 0) << "head_dim=" << head_dim;
  ActiveKernels().rope(x, n_heads, head_dim, cos_sin, style);
}

void AttentionHead(const float* q, const float* k, const float* v, int64_t n_kv,
                   int64_t head_dim, int64_t kv_stride, float scale,
                   float* scores, float* out) {
  RL_DCHECK(n_kv > 0) << "n_kv=" << n_kv;
  RL_DCHECK(kv_stride >= head_dim)
      << "kv_stride=" << kv_stride << " head_dim=" << head_dim;
  ActiveKernels().attention_head(q, k, v, n_kv, head_dim, kv_stride, scale,
                                 scores, out);
}

void AttentionHeadF16(const float* q, const uint16_t* k, const uint16_t* v,
                      int64_t n_kv, int64_t head_dim, int64_t kv_stride,
                      float scale, float* work, float* out) {
  RL_DCHECK(n_kv > 0) << "n_kv=" << n_kv;
  RL_DCHECK(kv_stride >= head_dim)
      << "kv_stride=" << kv_stride << " head_dim=" << head_dim;
  ActiveKernels().attention_head_f16(q, k, v, n_kv, head_dim, kv_stride, scale,
                                     work, out);
}

void AttentionChunk(KvElement type, const float* q, int64_t n_q, const void* k,
                    const void* v, int64_t n_kv, int64_t head_dim,
                    int64_t row_bytes, float scale, float* work,
                    float* partial) {
  RL_DCHECK(n_q > 0 && n_kv > 0 && n_kv <= kAttentionChunkKeys)
      << "n_q=" << n_q << " n_kv=" << n_kv;
  RL_DCHECK(type != KvElement::kQ8_0 || head_dim % 32 == 0)
      << "head_dim=" << head_dim;
  ActiveKernels().attention_chunk(type, q, n_q, k, v, n_kv, head_dim, row_bytes,
                                  scale, work, partial);
}

void MergeAttention(const float* partials, int64_t n_chunks, int64_t n_q,
                    int64_t head_dim, float* out) {
  RL_DCHECK(n_chunks > 0) << "n_chunks=" << n_chunks;
  const int64_t stride = AttentionPartialFloats(n_q, head_dim);
  for (int64_t h = 0; h < n_q; ++h) {
    float max = -INFINITY;
    for (int64_t c = 0; c < n_chunks; ++c) {
      max = std::fmax(max, partials[c * stride + n_q * head_dim + h]);
    }
    float* o = out + h * head_dim;
    float den = 0.0f;
    for (int64_t d = 0; d < head_dim; ++d) o[d] = 0.0f;
    for (int64_t c = 0; c < n_chunks; ++c) {
      const float* p = partials + c * stride;
      const float w = std::exp(p[n_q * head_dim + h] - max);
      den += w * p[n_q * (head_dim + 1) + h];
      const float* acc = p + h * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) o[d] += w * acc[d];
    }
    const float inv = den == 0.0f ? 0.0f : 1.0f / den;
    for (int64_t d = 0; d < head_dim; ++d) o[d] *= inv;
  }
}

}  // namespace redline::kernels
