// Scalar reference element-wise and row-wise ops (the oracle for the SIMD
// variants and the portable fallback). Sums run in f64, as ggml's CPU ops
// do for RMSNorm and softmax.
#include <array>
#include <cmath>

#include "base/float16.h"
#include "kernels/blocks.h"
#include "kernels/kernel_table.h"

namespace redline::kernels::ref {
namespace {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps,
             float* out) {
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

// e^x as ops.h describes for SiluMul: n = round(x / ln2) by adding and
// subtracting 1.5 * 2^23, b = x - n ln2 with ln2 in two parts, e^b by a
// degree-5 polynomial evaluated in two halves (b and b^2 terms), times 2^n.
// |n| > 192 is certain overflow (inf) or underflow (0).
float SiluExp(float x) {
  constexpr float kShift = 0x1.8p23f;
  const float n = std::fma(x, 0x1.715476p+0f, kShift) - kShift;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const float b2 = b * b;
  const float high = std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), b2,
                              std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
  const float poly = std::fma(high, b2, std::fma(0x1.ffffecp-1f, b, 1.0f));
  if (std::fabs(n) > 192.0f) return n > 0.0f ? INFINITY : 0.0f;
  return std::ldexp(poly, static_cast<int>(n));
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + SiluExp(0.0f - g)) * up[i];
  }
}

void Add(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void Rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin,
          RopeStyle style) {
  const int64_t half = head_dim / 2;
  // kNorm rotates (2i, 2i+1); kNeox rotates (i, i + half).
  const int64_t stride = style == RopeStyle::kNorm ? 2 : 1;
  const int64_t offset = style == RopeStyle::kNorm ? 1 : half;
  for (int64_t i = 0; i < half; ++i) {
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    for (int64_t h = 0; h < n_heads; ++h) {
      float* p = x + h * head_dim + i * stride;
      const float x0 = p[0];
      const float x1 = p[offset];
      p[0] = std::fma(x0, c, -(x1 * s));
      p[offset] = std::fma(x0, s, x1 * c);
    }
  }
}

void AttentionHead(const float* q, const float* k, const float* v, int64_t n_kv,
                   int64_t head_dim, int64_t kv_stride, float scale,
                   float* scores, float* out) {
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
    for (int64_t i = 0; i < n_kv; ++i)
      sum += static_cast<double>(scores[i]) * v[i * kv_stride + d];
    out[d] = static_cast<float>(sum);
  }
}

float RoundToHalf(float x) { return Fp16ToFp32(Fp32ToFp16(x)); }

void AttentionHeadF16(const float* q, const uint16_t* k, const uint16_t* v,
                      int64_t n_kv, int64_t head_dim, int64_t kv_stride,
                      float scale, float* work, float* out) {
  float* q16 = work;
  float* acc = work + head_dim;  // binary16 values held as f32
  for (int64_t d = 0; d < head_dim; ++d) {
    q16[d] = RoundToHalf(q[d]);
    acc[d] = 0.0f;
  }
  float max = -INFINITY;
  float sum = 0.0f;
  for (int64_t i = 0; i < n_kv; ++i) {
    const uint16_t* ki = k + i * kv_stride;
    const uint16_t* vi = v + i * kv_stride;
    // Products of two binary16 values are exact in f32.
    double dot = 0.0;
    for (int64_t d = 0; d < head_dim; ++d)
      dot += static_cast<double>(q16[d] * Fp16ToFp32(ki[d]));
    const float s = static_cast<float>(dot) * scale;
    float ms = 1.0f;  // rescales acc and sum when s is a new max
    float vs = 1.0f;  // exp(s - max)
    if (s > max) {
      ms = std::exp(max - s);
      max = s;
      for (int64_t d = 0; d < head_dim; ++d) acc[d] = RoundToHalf(acc[d] * ms);
    } else {
      vs = std::exp(s - max);
    }
    for (int64_t d = 0; d < head_dim; ++d)
      acc[d] = RoundToHalf(std::fma(Fp16ToFp32(vi[d]), vs, acc[d]));
    // ggml's `S = S*ms + vs`, rounded twice (GCC does not contract it there).
    sum = sum * ms + vs;
  }
  const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
  for (int64_t d = 0; d < head_dim; ++d) out[d] = acc[d] * inv;
}

// Element d of head row `row` (one position's head) as f32.
float KvValue(KvElement type, const uint8_t* row, int64_t d) {
  if (type == KvElement::kF16) {
    return Fp16ToFp32(reinterpret_cast<const uint16_t*>(row)[d]);
  }
  const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row) + d / kQkBlock;
  return Fp16ToFp32(b->d) * static_cast<float>(b->qs[d % kQkBlock]);
}

// The partial in f64: exact max, then e^(s - max) per key, sums in f64.
void AttentionChunk(KvElement type, const float* q, int64_t n_q, const void* k,
                    const void* v, int64_t n_kv, int64_t head_dim,
                    int64_t row_bytes, float scale, float* /*work*/,
                    float* partial) {
  const auto* kb = static_cast<const uint8_t*>(k);
  const auto* vb = static_cast<const uint8_t*>(v);
  std::array<double, kAttentionChunkKeys> e;
  for (int64_t h = 0; h < n_q; ++h) {
    const float* qh = q + h * head_dim;
    double max = -INFINITY;
    for (int64_t i = 0; i < n_kv; ++i) {
      double dot = 0.0;
      for (int64_t d = 0; d < head_dim; ++d) {
        dot +=
            static_cast<double>(qh[d]) * KvValue(type, kb + i * row_bytes, d);
      }
      e[i] = static_cast<double>(scale) * dot;
      max = std::fmax(max, e[i]);
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n_kv; ++i) {
      e[i] = std::exp(e[i] - max);
      sum += e[i];
    }
    for (int64_t d = 0; d < head_dim; ++d) {
      double acc = 0.0;
      for (int64_t i = 0; i < n_kv; ++i) {
        acc += e[i] * KvValue(type, vb + i * row_bytes, d);
      }
      partial[h * head_dim + d] = static_cast<float>(acc);
    }
    partial[n_q * head_dim + h] = static_cast<float>(max);
    partial[n_q * (head_dim + 1) + h] = static_cast<float>(sum);
  }
}

}  // namespace

void ToF16(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Fp32ToFp16(x[i]);
}

int64_t Argmax(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    // Strictly greater keeps the first of equal maxima.
    if (best < 0 || x[i] > x[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

void FillTable(KernelTable* table) {
  table->isa = Isa::kScalar;
  FillMatMulTable(table);
  table->rms_norm = &RmsNorm;
  table->softmax = &Softmax;
  table->silu_mul = &SiluMul;
  table->add = &Add;
  table->rope = &Rope;
  table->argmax = &Argmax;
  table->to_f16 = &ToF16;
  table->attention_head = &AttentionHead;
  table->attention_head_f16 = &AttentionHeadF16;
  table->attention_chunk = &AttentionChunk;
}

}  // namespace redline::kernels::ref
