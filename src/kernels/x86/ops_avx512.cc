// AVX-512 element-wise and row-wise ops.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

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

// out [16, 16] = the transpose of the rows r[0..15]: out row d holds lane d
// of every r. Four rounds of 16 shuffles.
inline void Transpose16(__m512* r, float* out) {
  __m512 t[16];
  // Pairs of rows interleaved by element, then by pairs of elements: u_c of
  // rows 4g..4g+3 holds, in 128-bit lane L, column 4L + c of those rows.
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512d t0 = _mm512_castps_pd(t[4 * g]);
    const __m512d t1 = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]);
    const __m512d t3 = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  // Then the 128-bit lanes of the four groups: column 4L + c gathers lane L
  // of u_c from each group.
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
    const __m512 w0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
    _mm512_storeu_ps(out + (0 + c) * 16, _mm512_shuffle_f32x4(v0, w0, 0x88));
    _mm512_storeu_ps(out + (4 + c) * 16, _mm512_shuffle_f32x4(v1, w1, 0x88));
    _mm512_storeu_ps(out + (8 + c) * 16, _mm512_shuffle_f32x4(v0, w0, 0xdd));
    _mm512_storeu_ps(out + (12 + c) * 16, _mm512_shuffle_f32x4(v1, w1, 0xdd));
  }
}

// Heads up to this size take their scores from the transposed key tile
// (TransposedScores), larger ones from per-key dot products (DotScores):
// a transpose costs 4 * head_dim shuffles per tile for all the heads, the
// dot products' reduction about 50 operations per head, so by that count at
// 16 and 32 dimensions the transpose pays from two heads and at 64 only
// from about seven (decode calls have 2-7). The choice depends on head_dim
// alone, never on the number of heads, so a head's score is the same
// whichever batch it came in.
constexpr int64_t kMaxTransposedHeadDim = 32;

// s [kH rows kAttentionChunkKeys apart] = masked scale * q_h . k_j for the
// tile whose keys ktt holds transposed ([head_dim, 16]); each head sums its
// dimensions in four chains (d mod 4), whatever kH.
template <int kH>
inline void TransposedScores(const float* q, const float* ktt, int64_t head_dim,
                             __mmask16 valid, __m512 vscale, float* s) {
  __m512 a[kH][4];
#pragma GCC unroll 8
  for (int h = 0; h < kH; ++h) {
    for (int c = 0; c < 4; ++c) a[h][c] = _mm512_setzero_ps();
  }
  int64_t d = 0;
  for (; d + 4 <= head_dim; d += 4) {
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512 kd = _mm512_loadu_ps(ktt + (d + c) * kTile);
#pragma GCC unroll 8
      for (int h = 0; h < kH; ++h) {
        a[h][c] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * head_dim + d + c]), kd,
                                  a[h][c]);
      }
    }
  }
  for (int c = 0; c < 3; ++c) {
    if (d + c >= head_dim) break;
    const __m512 kd = _mm512_loadu_ps(ktt + (d + c) * kTile);
#pragma GCC unroll 8
    for (int h = 0; h < kH; ++h) {
      a[h][c] =
          _mm512_fmadd_ps(_mm512_set1_ps(q[h * head_dim + d + c]), kd, a[h][c]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < kH; ++h) {
    const __m512 dot = _mm512_add_ps(_mm512_add_ps(a[h][0], a[h][1]),
                                     _mm512_add_ps(a[h][2], a[h][3]));
    _mm512_storeu_ps(s + h * kAttentionChunkKeys,
                     _mm512_mask_blend_ps(valid, _mm512_set1_ps(-INFINITY),
                                          _mm512_mul_ps(dot, vscale)));
  }
}

// The same from the widened tile kt [16, head_dim] for one head: sixteen
// dot products (one chain each, head_dim / 16 long), reduced together.
// kHeadDim: head_dim as a constant, or 0.
template <int64_t kHeadDim>
inline void DotScores(const float* qh, const float* kt,
                      int64_t runtime_head_dim, __mmask16 valid, __m512 vscale,
                      float* s) {
  const int64_t head_dim = kHeadDim != 0 ? kHeadDim : runtime_head_dim;
  __m512 dots[kTile];
#pragma GCC unroll 16
  for (int j = 0; j < kTile; ++j) {
    __m512 a = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int64_t d = 0; d < head_dim; d += 16) {
      const __mmask16 m = FirstLanes16(head_dim - d);
      a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qh + d),
                          _mm512_maskz_loadu_ps(m, kt + j * head_dim + d), a);
    }
    dots[j] = a;
  }
  _mm512_storeu_ps(s,
                   _mm512_mask_blend_ps(valid, _mm512_set1_ps(-INFINITY),
                                        _mm512_mul_ps(Reduce16(dots), vscale)));
}

// acc_h [head_dim] = sum_j<n p_h[j] * v_j for kH heads (p_h rows
// kAttentionChunkKeys apart, acc_h rows head_dim apart; v_j at v + j *
// stride elements, f32 or, with T = uint16_t, binary16), kV 16-dimension
// columns at a time, in registers over all n keys. Each
// (head, column) sums even and odd keys in two chains, each in key order,
// whatever kH and kV, so a head's values are the same whichever batch it
// came in.
template <int kH, int kV, typename T>
inline void WeightedValues(const float* p, const T* v, int64_t stride,
                           int64_t n, int64_t head_dim, float* acc) {
  for (int64_t d0 = 0; d0 < head_dim; d0 += 16 * kV) {
    __mmask16 m[kV];
    __m512 a[2][kH][kV];
#pragma GCC unroll 4
    for (int c = 0; c < kV; ++c) {
      const int64_t left = head_dim - d0 - 16 * c;
      m[c] = left > 0 ? FirstLanes16(left) : 0;
#pragma GCC unroll 8
      for (int h = 0; h < kH; ++h) {
        a[0][h][c] = _mm512_setzero_ps();
        a[1][h][c] = _mm512_setzero_ps();
      }
    }
    const auto step = [&](int64_t j, int e) {
      const T* row = v + j * stride + d0;
      __m512 x[kV];
#pragma GCC unroll 4
      for (int c = 0; c < kV; ++c) {
        if constexpr (std::is_same_v<T, uint16_t>) {
          x[c] = LoadHalf16(m[c], row + 16 * c);
        } else {
          x[c] = _mm512_maskz_loadu_ps(m[c], row + 16 * c);
        }
      }
#pragma GCC unroll 8
      for (int h = 0; h < kH; ++h) {
        const __m512 w = _mm512_set1_ps(p[h * kAttentionChunkKeys + j]);
#pragma GCC unroll 4
        for (int c = 0; c < kV; ++c) {
          a[e][h][c] = _mm512_fmadd_ps(w, x[c], a[e][h][c]);
        }
      }
    };
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {
      step(j, 0);
      step(j + 1, 1);
    }
    if (j < n) step(j, 0);
#pragma GCC unroll 8
    for (int h = 0; h < kH; ++h) {
#pragma GCC unroll 4
      for (int c = 0; c < kV; ++c) {
        _mm512_mask_storeu_ps(acc + h * head_dim + d0 + 16 * c, m[c],
                              _mm512_add_ps(a[0][h][c], a[1][h][c]));
      }
    }
  }
}

// WeightedValues over `heads` heads: kV columns at a time (as many as a
// head has, up to 4) and 8 / kV heads at a time (16 accumulators), then
// pairs, then single heads.
template <int kV, typename T>
inline void WeightedHeads(const float* p, const T* v, int64_t stride, int64_t n,
                          int64_t head_dim, int64_t heads, float* acc) {
  constexpr int kH = 8 / kV;
  int64_t h = 0;
  for (; h + kH <= heads; h += kH) {
    WeightedValues<kH, kV>(p + h * kAttentionChunkKeys, v, stride, n, head_dim,
                           acc + h * head_dim);
  }
  for (; h + 2 <= heads; h += 2) {
    WeightedValues<2, kV>(p + h * kAttentionChunkKeys, v, stride, n, head_dim,
                          acc + h * head_dim);
  }
  for (; h < heads; ++h) {
    WeightedValues<1, kV>(p + h * kAttentionChunkKeys, v, stride, n, head_dim,
                          acc + h * head_dim);
  }
}

// WeightedHeads with as many columns at a time as head_dim allows.
template <typename T>
inline void WeightedAllHeads(const float* p, const T* v, int64_t stride,
                             int64_t n, int64_t head_dim, int64_t heads,
                             float* acc) {
  if (head_dim >= 64) {
    WeightedHeads<4>(p, v, stride, n, head_dim, heads, acc);
  } else if (head_dim >= 32) {
    WeightedHeads<2>(p, v, stride, n, head_dim, heads, acc);
  } else {
    WeightedHeads<1>(p, v, stride, n, head_dim, heads, acc);
  }
}

// Query heads per block of AttentionChunkOf: the block's scores over the
// whole chunk fit the work area (ops.h).
constexpr int64_t kBlockHeads = kAttentionWorkHeads;

// kHeadDim: head_dim as a constant (its loops unrolled, its masks full) or 0
// for any head_dim.
//
// Why three passes over the chunk, not an online softmax per tile: the
// online form rescaled a head's accumulator whenever a tile raised its
// maximum (a data-dependent branch) and ran every head through one long
// dependent chain per tile (dot products, reduction, maximum, exponentials,
// sum, then the values); at 2-63 heads of 16-128 dimensions it took 1.6-12
// ns per (head, key) (kernels_bench AttentionChunk), 1.05-2.0x the time
// this takes (docs/PERFORMANCE.md). Here the scores of a
// block of heads over the whole chunk are computed first, then the maximum
// and sum once per head, then the values with the heads interleaved; no
// accumulator is rescaled.
template <int64_t kHeadDim>
void AttentionChunkOf(KvElement type, const float* q, int64_t n_q,
                      const void* k, const void* v, int64_t n_kv,
                      int64_t runtime_head_dim, int64_t row_bytes, float scale,
                      float* work, float* partial) {
  const int64_t head_dim = kHeadDim != 0 ? kHeadDim : runtime_head_dim;
  const bool transposed = head_dim <= kMaxTransposedHeadDim;
  const int64_t dim_blocks = (head_dim + 15) / 16;
  float* kt = work;                               // [kTile, head_dim]
  float* ktt = kt + kTile * head_dim;             // [dim_blocks * 16, kTile]
  float* scores = ktt + dim_blocks * 16 * kTile;  // [kBlockHeads, chunk keys]
  float* vw = scores + kBlockHeads * kAttentionChunkKeys;  // [n_kv, head_dim]
  float* max = partial + n_q * head_dim;
  float* sum = max + n_q;
  const auto* kb = static_cast<const uint8_t*>(k);
  const auto* vb = static_cast<const uint8_t*>(v);
  const __m512 vscale = _mm512_set1_ps(scale);
  const int64_t head_bytes = type == KvElement::kF16
                                 ? 2 * head_dim
                                 : head_dim / kQkBlock * sizeof(BlockQ8_0);
  const int64_t n_tiles = (n_kv + kTile - 1) / kTile;
  // q8_0 values widened once, for every block of heads.
  for (int64_t tile = 0; type == KvElement::kQ8_0 && tile < n_tiles; ++tile) {
    const int64_t i0 = tile * kTile;
    PrefetchRows(vb, i0 + kTile, std::min<int64_t>(i0 + 2 * kTile, n_kv),
                 row_bytes, head_bytes);
    WidenRows(type, vb + i0 * row_bytes, row_bytes,
              static_cast<int>(std::min<int64_t>(kTile, n_kv - i0)), head_dim,
              vw + i0 * head_dim);
  }
  for (int64_t h0 = 0; h0 < n_q; h0 += kBlockHeads) {
    const int64_t heads = std::min(kBlockHeads, n_q - h0);
    const float* qb = q + h0 * head_dim;
    // Scores, keys past n_kv at -inf.
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
      const int64_t i0 = tile * kTile;
      const int n = static_cast<int>(std::min<int64_t>(kTile, n_kv - i0));
      const __mmask16 valid = FirstLanes16(n);
      // The next tile's keys arrive while this one is computed. At depth
      // the tiles had waited on memory: decode steps' attention at 4096 and
      // 8192 positions took 14-22 % less with it (qwen2.5-0.5b and
      // llama3.2-1b Q8_0, f16 KV, the same process alternating), the whole
      // step 6-11 %; at 1024 within noise. Two and four tiles ahead gained
      // less.
      const int64_t ahead = std::min<int64_t>(i0 + 2 * kTile, n_kv);
      PrefetchRows(kb, i0 + kTile, ahead, row_bytes, head_bytes);
      // Binary16 values too, on the first pass, for the weighted sums below
      // (q8_0 ones were widened above).
      if (h0 == 0 && type == KvElement::kF16) {
        PrefetchRows(vb, tile == 0 ? 0 : i0 + kTile, ahead, row_bytes,
                     head_bytes);
      }
      // Binary16 keys go from the cache into the transpose's registers;
      // others are widened first. Rows past n (never used for a score that
      // counts) are zeros.
      const bool direct = transposed && type == KvElement::kF16;
      if (!direct) {
        WidenRows(type, kb + i0 * row_bytes, row_bytes, n, head_dim, kt);
        std::fill(kt + n * head_dim, kt + kTile * head_dim, 0.0f);
      }
      float* s = scores + i0;
      if (transposed) {
        for (int64_t b = 0; b < dim_blocks; ++b) {
          const __mmask16 m = FirstLanes16(head_dim - 16 * b);
          __m512 r[kTile];
#pragma GCC unroll 16
          for (int j = 0; j < kTile; ++j) {
            if (j >= n) {
              r[j] = _mm512_setzero_ps();
            } else if (direct) {
              r[j] = LoadHalf16(m, reinterpret_cast<const uint16_t*>(
                                       kb + (i0 + j) * row_bytes) +
                                       16 * b);
            } else {
              r[j] = _mm512_maskz_loadu_ps(m, kt + j * head_dim + 16 * b);
            }
          }
          Transpose16(r, ktt + b * 16 * kTile);
        }
        int64_t h = 0;
        for (; h + 4 <= heads; h += 4) {
          TransposedScores<4>(qb + h * head_dim, ktt, head_dim, valid, vscale,
                              s + h * kAttentionChunkKeys);
        }
        for (; h < heads; ++h) {
          TransposedScores<1>(qb + h * head_dim, ktt, head_dim, valid, vscale,
                              s + h * kAttentionChunkKeys);
        }
      } else {
        for (int64_t h = 0; h < heads; ++h) {
          DotScores<kHeadDim>(qb + h * head_dim, kt, head_dim, valid, vscale,
                              s + h * kAttentionChunkKeys);
        }
      }
    }
    // Softmax numerators in place; the maximum and sum once per head.
    for (int64_t h = 0; h < heads; ++h) {
      float* s = scores + h * kAttentionChunkKeys;
      __m512 vmax = _mm512_set1_ps(-INFINITY);
      for (int64_t tile = 0; tile < n_tiles; ++tile) {
        vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(s + tile * kTile));
      }
      const float m = _mm512_reduce_max_ps(vmax);
      const __m512 vm = _mm512_set1_ps(m);
      __m512 vsum = _mm512_setzero_ps();
      for (int64_t tile = 0; tile < n_tiles; ++tile) {
        const __mmask16 valid = FirstLanes16(n_kv - tile * kTile);
        const __m512 e = _mm512_maskz_mov_ps(
            valid, Exp(_mm512_sub_ps(_mm512_loadu_ps(s + tile * kTile), vm)));
        _mm512_storeu_ps(s + tile * kTile, e);
        vsum = _mm512_add_ps(vsum, e);
      }
      max[h0 + h] = m;
      sum[h0 + h] = _mm512_reduce_add_ps(vsum);
    }
    // Values weighted by the numerators: binary16 values straight from the
    // cache, q8_0 ones widened above.
    float* acc = partial + h0 * head_dim;
    if (type == KvElement::kF16) {
      WeightedAllHeads(scores, static_cast<const uint16_t*>(v), row_bytes / 2,
                       n_kv, head_dim, heads, acc);
    } else {
      WeightedAllHeads(scores, vw, head_dim, n_kv, head_dim, heads, acc);
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
