// AVX-512 element-wise and row-wise ops.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "kernels/blocks.h"
#include "kernels/kernel_table.h"
#include "kernels/x86/intrinsics.h"

namespace redline::kernels::avx512 {
namespace {

inline __mmask16 FirstLanes16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff)
                 : static_cast<__mmask16>((1u << n) - 1);
}

// exp(x) for f32 lanes: x = n ln2 + r, |r| <= ln2/2, e^r by its Taylor
// series to degree 7 (truncation error < 1e-8 relative), scaled by 2^n with
// vscalefps, which also gives inf on overflow and 0 / subnormals on
// underflow. Relative error about 2 ulp (kernels_test bounds it). Inputs are
// clamped to [-104, 89] so -inf gives 0 (exp(-104) underflows to 0).
inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(89.0f)),
                    _mm512_set1_ps(-104.0f));
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // Cody-Waite: ln2 = hi + lo with hi exact in 9 bits so n * hi is exact.
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// Adds the squares of 16 floats (squared in f32, as the reference does) to
// two f64 accumulators.
inline void AccumulateSquares(__m512 v, __m512d* lo, __m512d* hi) {
  const __m512 sq = _mm512_mul_ps(v, v);
  *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
  *hi =
      _mm512_add_pd(*hi, _mm512_cvtps_pd(_mm256_castpd_ps(
                             _mm512_extractf64x4_pd(_mm512_castps_pd(sq), 1))));
}

void RmsNorm(const float* x, const float* weight, int64_t n, float eps,
             float* out) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    AccumulateSquares(_mm512_maskz_loadu_ps(FirstLanes16(n - i), x + i), &lo,
                      &hi);
  }
  const double sum = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const __m512 scale = _mm512_set1_ps(1.0f / __builtin_sqrtf(mean + eps));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = FirstLanes16(n - i);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), scale);
    _mm512_mask_storeu_ps(
        out + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i)));
  }
}

void Softmax(float* x, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < n; i += 16) {
    vmax =
        _mm512_mask_max_ps(vmax, FirstLanes16(n - i), vmax,
                           _mm512_maskz_loadu_ps(FirstLanes16(n - i), x + i));
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = FirstLanes16(n - i);
    const __m512 e = _mm512_maskz_mov_ps(
        m, Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max)));
    _mm512_mask_storeu_ps(x + i, m, e);
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi =
        _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(
                              _mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  const __m512 inv = _mm512_set1_ps(
      static_cast<float>(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(lo, hi))));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = FirstLanes16(n - i);
    _mm512_mask_storeu_ps(x + i, m,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

// e^x exactly as ref/ops.cc SiluExp computes it (see there); vscalefps is
// the exact, correctly rounded 2^n scaling that ldexp gives.
inline __m512 SiluExp(__m512 x) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  const __m512 n = _mm512_sub_ps(
      _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift), shift);
  const __m512 b =
      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                       _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 b2 = _mm512_mul_ps(b, b);
  const __m512 high =
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b,
                                      _mm512_set1_ps(0x1.573e2ep-5f)),
                      b2,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b,
                                      _mm512_set1_ps(0x1.fffdb6p-2f)));
  const __m512 poly = _mm512_fmadd_ps(
      high, b2,
      _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 result = _mm512_scalef_ps(poly, n);
  const __mmask16 out_of_range =
      _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  if (out_of_range == 0) return result;
  const __m512 limit = _mm512_mask_blend_ps(
      _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_GT_OQ),
      _mm512_setzero_ps(), _mm512_set1_ps(__builtin_inff()));
  return _mm512_mask_blend_ps(out_of_range, result, limit);
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = FirstLanes16(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 silu = _mm512_div_ps(
        g, _mm512_add_ps(one, SiluExp(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, u));
  }
}

void Add(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = FirstLanes16(n - i);
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i),
                                        _mm512_maskz_loadu_ps(m, x + i)));
  }
}

inline float Dot(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 =
        _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16),
                           _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = FirstLanes16(n - i);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i),
                           _mm512_maskz_loadu_ps(m, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// Sums of 4 vectors: lane i of the result is the sum of v[i]'s lanes.
inline __m128 Reduce4(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  const __m512 s01 =
      _mm512_add_ps(_mm512_unpacklo_ps(v0, v1), _mm512_unpackhi_ps(v0, v1));
  const __m512 s23 =
      _mm512_add_ps(_mm512_unpacklo_ps(v2, v3), _mm512_unpackhi_ps(v2, v3));
  const __m512 s =
      _mm512_add_ps(_mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 h = _mm256_add_ps(
      _mm512_castps512_ps256(s),
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// scores[i] = scale * q . k_i, four keys at a time (four independent FMA
// chains and one combined reduction).
void Scores(const float* q, const float* k, int64_t n_kv, int64_t head_dim,
            int64_t kv_stride, float scale, float* scores) {
  const __m128 vscale = _mm_set1_ps(scale);
  int64_t i = 0;
  for (; i + 4 <= n_kv; i += 4) {
    const float* k0 = k + i * kv_stride;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t d = 0; d < head_dim; d += 16) {
      const __mmask16 m = FirstLanes16(head_dim - d);
      const __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
      for (int j = 0; j < 4; ++j) {
        acc[j] = _mm512_fmadd_ps(
            qv, _mm512_maskz_loadu_ps(m, k0 + j * kv_stride + d), acc[j]);
      }
    }
    _mm_storeu_ps(scores + i,
                  _mm_mul_ps(vscale, Reduce4(acc[0], acc[1], acc[2], acc[3])));
  }
  for (; i < n_kv; ++i) scores[i] = scale * Dot(q, k + i * kv_stride, head_dim);
}

void AttentionHead(const float* q, const float* k, const float* v, int64_t n_kv,
                   int64_t head_dim, int64_t kv_stride, float scale,
                   float* scores, float* out) {
  Scores(q, k, n_kv, head_dim, kv_stride, scale, scores);
  Softmax(scores, n_kv);
  // out = sum_i p_i v_i, 64 dimensions (4 accumulators) at a time.
  for (int64_t d0 = 0; d0 < head_dim; d0 += 64) {
    __mmask16 m[4];
    __m512 acc[4];
    for (int j = 0; j < 4; ++j) {
      const int64_t left = head_dim - d0 - 16 * j;
      m[j] = left > 0 ? FirstLanes16(left) : 0;
      acc[j] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n_kv; ++i) {
      const __m512 p = _mm512_set1_ps(scores[i]);
      const float* vi = v + i * kv_stride + d0;
      for (int j = 0; j < 4; ++j) {
        acc[j] = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(m[j], vi + 16 * j),
                                 acc[j]);
      }
    }
    for (int j = 0; j < 4; ++j)
      _mm512_mask_storeu_ps(out + d0 + 16 * j, m[j], acc[j]);
  }
}

// Rounds f32 lanes to binary16 and back (round to nearest even).
inline __m512 RoundToHalf(__m512 x) {
  return _mm512_cvtph_ps(
      _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

inline __m512 LoadHalf16(__mmask16 m, const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// q16 . k in the order of ggml's AVX-512 ggml_vec_dot_f16: four 16-lane
// accumulators over 64-element steps, folded 0+2, 1+3, 0+1, then
// _mm512_reduce_add_ps; the tail past the last full step adds f32 products
// in f64.
inline float DotHalf(const float* q16, const uint16_t* k, int64_t n) {
  __m512 sum[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps(), _mm512_setzero_ps()};
  const int64_t full = n & ~int64_t{63};
  for (int64_t i = 0; i < full; i += 64) {
    for (int j = 0; j < 4; ++j) {
      sum[j] = _mm512_fmadd_ps(LoadHalf16(0xffff, k + i + 16 * j),
                               _mm512_loadu_ps(q16 + i + 16 * j), sum[j]);
    }
  }
  sum[0] = _mm512_add_ps(sum[0], sum[2]);
  sum[1] = _mm512_add_ps(sum[1], sum[3]);
  sum[0] = _mm512_add_ps(sum[0], sum[1]);
  double dot = _mm512_reduce_add_ps(sum[0]);
  for (int64_t i = full; i < n; ++i) {
    dot += static_cast<double>(q16[i] * _cvtsh_ss(k[i]));
  }
  return static_cast<float>(dot);
}

void AttentionHeadF16(const float* q, const uint16_t* k, const uint16_t* v,
                      int64_t n_kv, int64_t head_dim, int64_t kv_stride,
                      float scale, float* work, float* out) {
  float* q16 = work;
  float* acc = work + head_dim;  // binary16 values held as f32
  for (int64_t d = 0; d < head_dim; d += 16) {
    const __mmask16 m = FirstLanes16(head_dim - d);
    _mm512_mask_storeu_ps(q16 + d, m,
                          RoundToHalf(_mm512_maskz_loadu_ps(m, q + d)));
    _mm512_mask_storeu_ps(acc + d, m, _mm512_setzero_ps());
  }
  float max = -INFINITY;
  float sum = 0.0f;
  for (int64_t i = 0; i < n_kv; ++i) {
    const uint16_t* vi = v + i * kv_stride;
    const float s = DotHalf(q16, k + i * kv_stride, head_dim) * scale;
    float ms = 1.0f;
    float vs = 1.0f;
    const bool new_max = s > max;
    if (new_max) {
      ms = std::exp(max - s);
      max = s;
    } else {
      vs = std::exp(s - max);
    }
    const __m512 vms = _mm512_set1_ps(ms);
    const __m512 vvs = _mm512_set1_ps(vs);
    for (int64_t d = 0; d < head_dim; d += 16) {
      const __mmask16 m = FirstLanes16(head_dim - d);
      __m512 a = _mm512_maskz_loadu_ps(m, acc + d);
      if (new_max) a = RoundToHalf(_mm512_mul_ps(a, vms));
      _mm512_mask_storeu_ps(
          acc + d, m,
          RoundToHalf(_mm512_fmadd_ps(LoadHalf16(m, vi + d), vvs, a)));
    }
    sum = sum * ms + vs;  // rounded twice, as in ggml (see ref/ops.cc)
  }
  const __m512 inv = _mm512_set1_ps(sum == 0.0f ? 0.0f : 1.0f / sum);
  for (int64_t d = 0; d < head_dim; d += 16) {
    const __mmask16 m = FirstLanes16(head_dim - d);
    _mm512_mask_storeu_ps(
        out + d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + d), inv));
  }
}

constexpr int kTile = 16;  // keys per tile of AttentionChunk

// Fetches rows [begin, end) of a K or V chunk (head_bytes each, position i
// at byte i * row_bytes) into L1.
inline void PrefetchRows(const uint8_t* src, int64_t begin, int64_t end,
                         int64_t row_bytes, int64_t head_bytes) {
  for (int64_t i = begin; i < end; ++i) {
    const auto at = reinterpret_cast<uintptr_t>(src + i * row_bytes);
    for (uintptr_t line = at & ~uintptr_t{63}; line < at + head_bytes;
         line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
    }
  }
}

// Widens rows [0, n) of a K or V chunk (head_dim elements each, position i
// at byte i * row_bytes) to f32: dst [n, head_dim].
inline void WidenRows(KvElement type, const uint8_t* src, int64_t row_bytes,
                      int n, int64_t head_dim, float* dst) {
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = src + j * row_bytes;
    float* out = dst + j * head_dim;
    if (type == KvElement::kF16) {
      const auto* h = reinterpret_cast<const uint16_t*>(row);
      for (int64_t d = 0; d < head_dim; d += 16) {
        const __mmask16 m = FirstLanes16(head_dim - d);
        _mm512_mask_storeu_ps(out + d, m, LoadHalf16(m, h + d));
      }
    } else {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(row);
      for (int64_t blk = 0; blk < head_dim / kQkBlock; ++blk) {
        const __m512 scale = _mm512_set1_ps(_cvtsh_ss(b[blk].d));
        for (int half = 0; half < 2; ++half) {
          const __m128i q8 = _mm_loadu_si128(
              reinterpret_cast<const __m128i*>(b[blk].qs + 16 * half));
          _mm512_storeu_ps(out + blk * kQkBlock + 16 * half,
                           _mm512_mul_ps(scale, _mm512_cvtepi32_ps(
                                                    _mm512_cvtepi8_epi32(q8))));
        }
      }
    }
  }
}

// Lane j of the result is the sum of the lanes of v[j], j < 16.
inline __m512 Reduce16(const __m512* v) {
  __m512 out = _mm512_castps128_ps512(Reduce4(v[0], v[1], v[2], v[3]));
  out = _mm512_insertf32x4(out, Reduce4(v[4], v[5], v[6], v[7]), 1);
  out = _mm512_insertf32x4(out, Reduce4(v[8], v[9], v[10], v[11]), 2);
  return _mm512_insertf32x4(out, Reduce4(v[12], v[13], v[14], v[15]), 3);
}

// acc [head_dim] += sum_j p[j] * vt[j], j < n: per 64 dimensions two
// accumulator sets (even and odd keys) so the FMA chains overlap.
inline void AccumulateValues(const float* p, const float* vt, int n,
                             int64_t head_dim, float* acc) {
  for (int64_t d0 = 0; d0 < head_dim; d0 += 64) {
    __mmask16 m[4];
    __m512 a0[4], a1[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const int64_t left = head_dim - d0 - 16 * c;
      m[c] = left > 0 ? FirstLanes16(left) : 0;
      a0[c] = _mm512_maskz_loadu_ps(m[c], acc + d0 + 16 * c);
      a1[c] = _mm512_setzero_ps();
    }
    int j = 0;
    for (; j + 2 <= n; j += 2) {
      const __m512 p0 = _mm512_set1_ps(p[j]);
      const __m512 p1 = _mm512_set1_ps(p[j + 1]);
      const float* v0 = vt + j * head_dim + d0;
      const float* v1 = v0 + head_dim;
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        a0[c] = _mm512_fmadd_ps(p0, _mm512_maskz_loadu_ps(m[c], v0 + 16 * c),
                                a0[c]);
        a1[c] = _mm512_fmadd_ps(p1, _mm512_maskz_loadu_ps(m[c], v1 + 16 * c),
                                a1[c]);
      }
    }
    if (j < n) {
      const __m512 p0 = _mm512_set1_ps(p[j]);
      const float* v0 = vt + j * head_dim + d0;
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        a0[c] = _mm512_fmadd_ps(p0, _mm512_maskz_loadu_ps(m[c], v0 + 16 * c),
                                a0[c]);
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      _mm512_mask_storeu_ps(acc + d0 + 16 * c, m[c],
                            _mm512_add_ps(a0[c], a1[c]));
    }
  }
}

// kHeadDim: head_dim as a constant (its loops unrolled, its masks full) or 0
// for any head_dim.
template <int64_t kHeadDim>
void AttentionChunkOf(KvElement type, const float* q, int64_t n_q,
                      const void* k, const void* v, int64_t n_kv,
                      int64_t runtime_head_dim, int64_t row_bytes, float scale,
                      float* work, float* partial) {
  const int64_t head_dim = kHeadDim != 0 ? kHeadDim : runtime_head_dim;
  float* kt = work;                     // [kTile, head_dim]
  float* vt = work + kTile * head_dim;  // [kTile, head_dim]
  float* p = vt + kTile * head_dim;     // [kTile]
  float* max = partial + n_q * head_dim;
  float* sum = max + n_q;
  for (int64_t i = 0; i < n_q * head_dim; ++i) partial[i] = 0.0f;
  for (int64_t h = 0; h < n_q; ++h) {
    max[h] = -INFINITY;
    sum[h] = 0.0f;
  }
  const auto* kb = static_cast<const uint8_t*>(k);
  const auto* vb = static_cast<const uint8_t*>(v);
  const __m512 vscale = _mm512_set1_ps(scale);
  const int64_t head_bytes = type == KvElement::kF16
                                 ? 2 * head_dim
                                 : head_dim / kQkBlock * sizeof(BlockQ8_0);
  for (int64_t i0 = 0; i0 < n_kv; i0 += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, n_kv - i0));
    const __mmask16 valid = FirstLanes16(n);
    // The next tile's keys and values arrive while this one is computed. At
    // depth the tiles had waited on memory: decode steps' attention at 4096
    // and 8192 positions took 14-22 % less with it (qwen2.5-0.5b and
    // llama3.2-1b Q8_0, f16 KV, the same process alternating), the whole
    // step 6-11 %; at 1024 within noise. Two and four tiles ahead gained
    // less.
    const int64_t next_end = std::min<int64_t>(i0 + 2 * kTile, n_kv);
    PrefetchRows(kb, i0 + kTile, next_end, row_bytes, head_bytes);
    PrefetchRows(vb, i0 + kTile, next_end, row_bytes, head_bytes);
    WidenRows(type, kb + i0 * row_bytes, row_bytes, n, head_dim, kt);
    WidenRows(type, vb + i0 * row_bytes, row_bytes, n, head_dim, vt);
    for (int64_t h = 0; h < n_q; ++h) {
      const float* qh = q + h * head_dim;
      // Unrolled so that dots and the accumulators stay in registers.
      __m512 dots[kTile];
#pragma GCC unroll 16
      for (int j = 0; j < kTile; ++j) {
        __m512 a = _mm512_setzero_ps();
        if (j < n) {
#pragma GCC unroll 8
          for (int64_t d = 0; d < head_dim; d += 16) {
            const __mmask16 m = FirstLanes16(head_dim - d);
            a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qh + d),
                                _mm512_maskz_loadu_ps(m, kt + j * head_dim + d),
                                a);
          }
        }
        dots[j] = a;
      }
      const __m512 s =
          _mm512_mask_blend_ps(valid, _mm512_set1_ps(-INFINITY),
                               _mm512_mul_ps(Reduce16(dots), vscale));
      const float tile_max = _mm512_reduce_max_ps(s);
      if (tile_max > max[h]) {
        // The running sums were relative to the old max; e^-inf = 0 when
        // this is the first tile.
        const float f = std::exp(max[h] - tile_max);
        float* acc = partial + h * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) acc[d] *= f;
        sum[h] *= f;
        max[h] = tile_max;
      }
      const __m512 e = _mm512_maskz_mov_ps(
          valid, Exp(_mm512_sub_ps(s, _mm512_set1_ps(max[h]))));
      sum[h] += _mm512_reduce_add_ps(e);
      _mm512_storeu_ps(p, e);
      AccumulateValues(p, vt, n, head_dim, partial + h * head_dim);
    }
  }
}

void AttentionChunk(KvElement type, const float* q, int64_t n_q, const void* k,
                    const void* v, int64_t n_kv, int64_t head_dim,
                    int64_t row_bytes, float scale, float* work,
                    float* partial) {
  switch (head_dim) {
    case 16:
      return AttentionChunkOf<16>(type, q, n_q, k, v, n_kv, head_dim, row_bytes,
                                  scale, work, partial);
    case 32:
      return AttentionChunkOf<32>(type, q, n_q, k, v, n_kv, head_dim, row_bytes,
                                  scale, work, partial);
    case 64:
      return AttentionChunkOf<64>(type, q, n_q, k, v, n_kv, head_dim, row_bytes,
                                  scale, work, partial);
    case 128:
      return AttentionChunkOf<128>(type, q, n_q, k, v, n_kv, head_dim,
                                   row_bytes, scale, work, partial);
    default:
      return AttentionChunkOf<0>(type, q, n_q, k, v, n_kv, head_dim, row_bytes,
                                 scale, work, partial);
  }
}

// Each output the reference's operations on the same operands:
// fma(x0, c, -(x1 s)) and fma(x0, s, x1 c), so the results are bit-identical.
// Why vectors: the scalar loop (a libm fma call per product) took 1.7 us for
// qwen2.5-0.5b's 14 query heads, once per layer of every decode step.
void Rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin,
          RopeStyle style) {
  const int64_t half = head_dim / 2;
  if (style == RopeStyle::kNorm) {
    // Pairs (2i, 2i + 1) lie side by side, as cos_sin's (cos_i, sin_i): the
    // even lanes take the first output, the odd lanes the second.
    for (int64_t d = 0; d < head_dim; d += 16) {
      const __mmask16 m = FirstLanes16(head_dim - d);
      const __m512 cs = _mm512_maskz_loadu_ps(m, cos_sin + d);
      const __m512 c = _mm512_moveldup_ps(cs);
      const __m512 s = _mm512_movehdup_ps(cs);
      for (int64_t h = 0; h < n_heads; ++h) {
        float* p = x + h * head_dim + d;
        const __m512 v = _mm512_maskz_loadu_ps(m, p);
        const __m512 swapped = _mm512_permute_ps(v, 0xb1);
        const __m512 first = _mm512_fmsub_ps(v, c, _mm512_mul_ps(swapped, s));
        const __m512 second = _mm512_fmadd_ps(swapped, s, _mm512_mul_ps(v, c));
        _mm512_mask_storeu_ps(
            p, m,
            _mm512_mask_blend_ps(static_cast<__mmask16>(0xaaaa), first,
                                 second));
      }
    }
    return;
  }
  // kNeox: pairs (i, i + half); cos and sin of 16 pairs gathered from
  // cos_sin's even and odd floats.
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                         22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t i = 0; i < half; i += 16) {
    const int64_t pairs = std::min<int64_t>(16, half - i);
    const __mmask16 m = FirstLanes16(pairs);
    const __m512 lo =
        _mm512_maskz_loadu_ps(FirstLanes16(2 * pairs), cos_sin + 2 * i);
    const __m512 hi = _mm512_maskz_loadu_ps(
        pairs > 8 ? FirstLanes16(2 * pairs - 16) : 0, cos_sin + 2 * i + 16);
    const __m512 c = _mm512_permutex2var_ps(lo, even, hi);
    const __m512 s = _mm512_permutex2var_ps(lo, odd, hi);
    for (int64_t h = 0; h < n_heads; ++h) {
      float* p0 = x + h * head_dim + i;
      float* p1 = p0 + half;
      const __m512 x0 = _mm512_maskz_loadu_ps(m, p0);
      const __m512 x1 = _mm512_maskz_loadu_ps(m, p1);
      _mm512_mask_storeu_ps(p0, m,
                            _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s)));
      _mm512_mask_storeu_ps(p1, m,
                            _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c)));
    }
  }
}

// Two sets of 16 running maxima (even and odd blocks of 16) halve the
// dependent compare-and-select chain; each lane keeps its first maximum
// (strictly greater replaces, NaN never does), so the lowest index among
// the lanes holding the overall maximum is the first one in x.
// The logits arrive from the output head, written by every thread and
// pushed out of this core's caches by the weights read after them: a
// prefetch 4 KiB ahead took the argmax over qwen2.5-0.5b's 151936 logits
// right after a decode step from 96-103 us to 25-26 us (2, 4 and 8 KiB
// alike), on the already-hot logits from 40 to 24 us.
constexpr int64_t kArgmaxAheadFloats = 1024;
int64_t Argmax(const float* x, int64_t n) {
  if (n > INT32_MAX) return ref::Argmax(x, n);
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  __m512 best[2] = {minus_inf, minus_inf};
  __m512i at[2] = {_mm512_set1_epi32(-1), _mm512_set1_epi32(-1)};
  __m512i index =
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i sixteen = _mm512_set1_epi32(16);
  int64_t i = 0;
  for (int k = 0; i < n; i += 16, k ^= 1) {
    const __mmask16 m = FirstLanes16(n - i);
    _mm_prefetch(reinterpret_cast<const char*>(x + i + kArgmaxAheadFloats),
                 _MM_HINT_T0);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __mmask16 gt = _mm512_mask_cmp_ps_mask(m, v, best[k], _CMP_GT_OQ);
    best[k] = _mm512_mask_mov_ps(best[k], gt, v);
    at[k] = _mm512_mask_mov_epi32(at[k], gt, index);
    index = _mm512_add_epi32(index, sixteen);
  }
  // Per lane, the odd set wins when greater, or equal with a lower index.
  const __mmask16 take_odd = _mm512_cmp_ps_mask(best[1], best[0], _CMP_GT_OQ) |
                             (_mm512_cmp_ps_mask(best[1], best[0], _CMP_EQ_OQ) &
                              _mm512_cmplt_epi32_mask(at[1], at[0]));
  const __m512 value = _mm512_mask_mov_ps(best[0], take_odd, best[1]);
  const __m512i where = _mm512_mask_mov_epi32(at[0], take_odd, at[1]);
  const float max = _mm512_reduce_max_ps(value);
  // Nothing beat -inf: every value NaN or -inf, which the reference orders.
  if (max == -INFINITY) return ref::Argmax(x, n);
  const __mmask16 holders =
      _mm512_cmp_ps_mask(value, _mm512_set1_ps(max), _CMP_EQ_OQ);
  return _mm512_mask_reduce_min_epi32(holders, where);
}

// vcvtps2ph rounds to nearest even and overflows to inf as the reference
// does; only NaN payloads differ (it keeps their top bits), so a vector
// holding a NaN is converted by the reference.
void ToF16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0) {
      ref::ToF16(x + i, 16, out + i);
      continue;
    }
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out + i),
        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  ref::ToF16(x + i, n - i, out + i);
}

}  // namespace

void FillTable(KernelTable* table) {
  ref::FillTable(table);
  table->isa = Isa::kAvx512;
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

}  // namespace redline::kernels::avx512
