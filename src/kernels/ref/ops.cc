// Scalar reference element-wise and row-wise ops (the oracle for the SIMD
// variants and the portable fallback). Sums run in f64, as ggml's CPU ops
// do for RMSNorm and softmax.
#include <cmath>

#include "kernels/kernel_table.h"

namespace redline::kernels::ref {
namespace {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void Softmax(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void Add(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void Rope(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, const float* inv_freq,
          RopeStyle style) {
  const int64_t half = head_dim / 2;
  // kNorm rotates (2i, 2i+1); kNeox rotates (i, i + half).
  const int64_t stride = style == RopeStyle::kNorm ? 2 : 1;
  const int64_t offset = style == RopeStyle::kNorm ? 1 : half;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    const float c = std::cos(angle);
    const float s = std::sin(angle);
    for (int64_t h = 0; h < n_heads; ++h) {
      float* p = x + h * head_dim + i * stride;
      const float x0 = p[0];
      const float x1 = p[offset];
      p[0] = x0 * c - x1 * s;
      p[offset] = x0 * s + x1 * c;
    }
  }
}

void AttentionHead(const float* q, const float* k, const float* v, int64_t n_kv,
                   int64_t head_dim, int64_t kv_stride, float scale, float* scores,
                   float* out) {
  for (int64_t i = 0; i < n_kv; ++i) {
    double dot = 0.0;
    for (int64_t d = 0; d < head_dim; ++d) {
      dot += static_cast<double>(q[d]) * k[i * kv_stride + d];
    }
    scores[i] = scale * static_cast<float>(dot);
  }
  Softmax(scores, n_kv);
  for (int64_t d = 0; d < head_dim; ++d) {
    double sum = 0.0;
    for (int64_t i = 0; i < n_kv; ++i) sum += static_cast<double>(scores[i]) * v[i * kv_stride + d];
    out[d] = static_cast<float>(sum);
  }
}

}  // namespace

void FillTable(KernelTable* table) {
  table->isa = Isa::kScalar;
  FillMatMulTable(table);
  table->rms_norm = &RmsNorm;
  table->softmax = &Softmax;
  table->silu_mul = &SiluMul;
  table->add = &Add;
  table->rope = &Rope;
  table->attention_head = &AttentionHead;
}

}  // namespace redline::kernels::ref
