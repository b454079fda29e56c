// Element-wise and row-wise operations of the transformer layers. All are
// plain functions over caller-owned buffers; none allocates.
#ifndef REDLINE_KERNELS_OPS_H_
#define REDLINE_KERNELS_OPS_H_

#include <cstdint>

namespace redline::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], i < n. out may alias x.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// In place: x = exp(x - max) / sum(exp(x - max)).
void Softmax(float* x, int64_t n);

// out[i] = gate[i] * sigmoid(gate[i]) * up[i]. out may alias gate or up.
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

// y[i] += x[i].
void Add(const float* x, int64_t n, float* y);

// How pairs of dimensions are rotated.
enum class RopeStyle {
  kNorm,  // pairs (2i, 2i+1): llama-family GGUF files (q/k permuted by the converter)
  kNeox,  // pairs (i, i + head_dim/2): qwen2
};

// Rotates x [n_heads, head_dim] in place for position `pos`. Pair i uses the
// angle pos * inv_freq[i], inv_freq [head_dim / 2] (base frequencies already
// divided by any rope_freqs factors).
void Rope(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, const float* inv_freq,
          RopeStyle style);

// Attention of one query head over n_kv cached positions:
//   q:   [head_dim]
//   k,v: n_kv rows of head_dim floats, row i at k + i * kv_stride
//   scores: scratch [n_kv]
//   out: [head_dim] = sum_i softmax(scale * q.k_i)_i * v_i
void AttentionHead(const float* q, const float* k, const float* v, int64_t n_kv,
                   int64_t head_dim, int64_t kv_stride, float scale, float* scores, float* out);

}  // namespace redline::kernels

#endif  // REDLINE_KERNELS_OPS_H_
