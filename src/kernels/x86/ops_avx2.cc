// AVX2 + FMA element-wise and row-wise ops.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/blocks.h"
#include "kernels/kernel_table.h"
#include "kernels/x86/intrinsics.h"

namespace redline::kernels::avx2 {
namespace {

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline double HSum(__m256d v) {
  __m128d s =
      _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

inline float HMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp(x) for f32 lanes, as the AVX-512 version (degree-7 Taylor on
// |r| <= ln2/2) but building 2^n in the exponent bits: inputs are clamped
// to [-87.3, 88.3] so n stays a normal exponent; below -87.3 the result is
// flushed to 0 and above 88.72 it is inf.
inline __m256 Exp(__m256 x) {
  const __m256 xc = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3f)),
                                  _mm256_set1_ps(-87.3f));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504f)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 result = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  result = _mm256_and_ps(result,
                         _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_GE_OQ));
  return _mm256_blendv_ps(result, _mm256_set1_ps(__builtin_inff()),
                          _mm256_cmp_ps(x, _mm256_set1_ps(88.72f), _CMP_GT_OQ));
}

// Loads the first `n` (< 8) floats, zeros after.
inline __m256 LoadPartial(const float* p, int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
  return _mm256_maskload_ps(p, mask);
}

inline void StorePartial(float* p, int64_t n, __m256 v) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
  _mm256_maskstore_ps(p, mask, v);
}

inline void AccumulateF64(__m256 v, __m256d* lo, __m256d* hi) {
  *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

void RmsNorm(const float* x, const float* weight, int64_t n, float eps,
             float* out) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    AccumulateF64(_mm256_mul_ps(v, v), &lo, &hi);
  }
  if (i < n) {
    const __m256 v = LoadPartial(x + i, n - i);
    AccumulateF64(_mm256_mul_ps(v, v), &lo, &hi);
  }
  const double sum = HSum(_mm256_add_pd(lo, hi));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const __m256 scale = _mm256_set1_ps(1.0f / __builtin_sqrtf(mean + eps));
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), scale);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(v, _mm256_loadu_ps(weight + i)));
  }
  if (i < n) {
    const __m256 v = _mm256_mul_ps(LoadPartial(x + i, n - i), scale);
    StorePartial(out + i, n - i,
                 _mm256_mul_ps(v, LoadPartial(weight + i, n - i)));
  }
}

void Softmax(float* x, int64_t n) {
  __m256 vmax = _mm256_set1_ps(-__builtin_inff());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float max = HMax(vmax);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const __m256 vm = _mm256_set1_ps(max);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    AccumulateF64(e, &lo, &hi);
  }
  if (i < n) {
    const __m256 e = Exp(_mm256_sub_ps(LoadPartial(x + i, n - i), vm));
    const __m256 e_valid =
        _mm256_and_ps(e, _mm256_castsi256_ps(_mm256_cmpgt_epi32(
                             _mm256_set1_epi32(static_cast<int>(n - i)),
                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))));
    StorePartial(x + i, n - i, e_valid);
    AccumulateF64(e_valid, &lo, &hi);
  }
  const __m256 inv =
      _mm256_set1_ps(static_cast<float>(1.0 / HSum(_mm256_add_pd(lo, hi))));
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  if (i < n)
    StorePartial(x + i, n - i, _mm256_mul_ps(LoadPartial(x + i, n - i), inv));
}

// e^x exactly as ref/ops.cc SiluExp computes it (see there). 2^n is built
// in the exponent bits, which scales exactly (as ldexp) while |n| <= 126;
// beyond that the lanes take the scalar path.
inline float SiluExpScalar(float x) {
  constexpr float kShift = 0x1.8p23f;
  const float n = std::fma(x, 0x1.715476p+0f, kShift) - kShift;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const float b2 = b * b;
  const float high = std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), b2,
                              std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
  const float poly = std::fma(high, b2, std::fma(0x1.ffffecp-1f, b, 1.0f));
  if (std::fabs(n) > 192.0f) return n > 0.0f ? __builtin_inff() : 0.0f;
  return std::ldexp(poly, static_cast<int>(n));
}

inline __m256 SiluExp(__m256 x) {
  const __m256 shift = _mm256_set1_ps(0x1.8p23f);
  const __m256 n = _mm256_sub_ps(
      _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift), shift);
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  if (_mm256_movemask_ps(
          _mm256_cmp_ps(abs_n, _mm256_set1_ps(126.0f), _CMP_GT_OQ)) != 0) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, x);
    for (float& lane : lanes) lane = SiluExpScalar(lane);
    return _mm256_load_ps(lanes);
  }
  const __m256 b =
      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                       _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 b2 = _mm256_mul_ps(b, b);
  const __m256 high =
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b,
                                      _mm256_set1_ps(0x1.573e2ep-5f)),
                      b2,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b,
                                      _mm256_set1_ps(0x1.fffdb6p-2f)));
  const __m256 poly = _mm256_fmadd_ps(
      high, b2,
      _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  const __m256i bits = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(poly, _mm256_castsi256_ps(bits));
}

inline __m256 SiluMul8(__m256 g, __m256 u) {
  const __m256 e = SiluExp(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)),
                       u);
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(
        out + i, SiluMul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    StorePartial(
        out + i, n - i,
        SiluMul8(LoadPartial(gate + i, n - i), LoadPartial(up + i, n - i)));
  }
}

void Add(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(
        y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  }
  for (; i < n; ++i) y[i] += x[i];
}

inline float Dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 =
        _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8),
                           _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8)
    acc0 =
        _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  if (i < n)
    acc1 = _mm256_fmadd_ps(LoadPartial(a + i, n - i), LoadPartial(b + i, n - i),
                           acc1);
  return HSum(_mm256_add_ps(acc0, acc1));
}

void AttentionHead(const float* q, const float* k, const float* v, int64_t n_kv,
                   int64_t head_dim, int64_t kv_stride, float scale,
                   float* scores, float* out) {
  for (int64_t i = 0; i < n_kv; ++i)
    scores[i] = scale * Dot(q, k + i * kv_stride, head_dim);
  Softmax(scores, n_kv);
  // out = sum_i p_i v_i, 32 dimensions (4 accumulators) at a time.
  for (int64_t d0 = 0; d0 < head_dim; d0 += 32) {
    int64_t width[4];
    __m256 acc[4];
    for (int j = 0; j < 4; ++j) {
      const int64_t left = head_dim - d0 - 8 * j;
      width[j] = left < 0 ? 0 : (left > 8 ? 8 : left);
      acc[j] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n_kv; ++i) {
      const __m256 p = _mm256_set1_ps(scores[i]);
      const float* vi = v + i * kv_stride + d0;
      for (int j = 0; j < 4; ++j) {
        if (width[j] == 8) {
          acc[j] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vi + 8 * j), acc[j]);
        } else if (width[j] > 0) {
          acc[j] =
              _mm256_fmadd_ps(p, LoadPartial(vi + 8 * j, width[j]), acc[j]);
        }
      }
    }
    for (int j = 0; j < 4; ++j) {
      if (width[j] == 8) {
        _mm256_storeu_ps(out + d0 + 8 * j, acc[j]);
      } else if (width[j] > 0) {
        StorePartial(out + d0 + 8 * j, width[j], acc[j]);
      }
    }
  }
}

// Rounds f32 lanes to binary16 and back (round to nearest even).
inline __m256 RoundToHalf(__m256 x) {
  return _mm256_cvtph_ps(
      _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

inline __m256 LoadHalf8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// q16 . k in the order of ggml's AVX2 ggml_vec_dot_f16: four 8-lane
// accumulators over 32-element steps, folded 0+2, 1+3, 0+1, then two
// horizontal adds; the tail past the last full step adds f32 products in f64.
inline float DotHalf(const float* q16, const uint16_t* k, int64_t n) {
  __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps(), _mm256_setzero_ps()};
  const int64_t full = n & ~int64_t{31};
  for (int64_t i = 0; i < full; i += 32) {
    for (int j = 0; j < 4; ++j) {
      sum[j] = _mm256_fmadd_ps(LoadHalf8(k + i + 8 * j),
                               _mm256_loadu_ps(q16 + i + 8 * j), sum[j]);
    }
  }
  sum[0] = _mm256_add_ps(sum[0], sum[2]);
  sum[1] = _mm256_add_ps(sum[1], sum[3]);
  sum[0] = _mm256_add_ps(sum[0], sum[1]);
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(sum[0]),
                               _mm256_extractf128_ps(sum[0], 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  double dot = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
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
  int64_t d = 0;
  for (; d + 8 <= head_dim; d += 8) {
    _mm256_storeu_ps(q16 + d, RoundToHalf(_mm256_loadu_ps(q + d)));
    _mm256_storeu_ps(acc + d, _mm256_setzero_ps());
  }
  for (; d < head_dim; ++d) {
    q16[d] = _cvtsh_ss(_cvtss_sh(q[d], _MM_FROUND_TO_NEAREST_INT));
    acc[d] = 0.0f;
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
    const __m256 vms = _mm256_set1_ps(ms);
    const __m256 vvs = _mm256_set1_ps(vs);
    for (d = 0; d + 8 <= head_dim; d += 8) {
      __m256 a = _mm256_loadu_ps(acc + d);
      if (new_max) a = RoundToHalf(_mm256_mul_ps(a, vms));
      _mm256_storeu_ps(acc + d,
                       RoundToHalf(_mm256_fmadd_ps(LoadHalf8(vi + d), vvs, a)));
    }
    for (; d < head_dim; ++d) {
      float a = acc[d];
      if (new_max) a = _cvtsh_ss(_cvtss_sh(a * ms, _MM_FROUND_TO_NEAREST_INT));
      acc[d] = _cvtsh_ss(_cvtss_sh(std::fma(_cvtsh_ss(vi[d]), vs, a),
                                   _MM_FROUND_TO_NEAREST_INT));
    }
    sum = sum * ms + vs;  // rounded twice, as in ggml (see ref/ops.cc)
  }
  const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
  for (d = 0; d < head_dim; ++d) out[d] = acc[d] * inv;
}

constexpr int kTile = 8;  // keys per tile of AttentionChunk

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
void WidenRows(KvElement type, const uint8_t* src, int64_t row_bytes, int n,
               int64_t head_dim, float* dst) {
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = src + j * row_bytes;
    float* out = dst + j * head_dim;
    if (type == KvElement::kF16) {
      const auto* h = reinterpret_cast<const uint16_t*>(row);
      int64_t d = 0;
      for (; d + 8 <= head_dim; d += 8)
        _mm256_storeu_ps(out + d, LoadHalf8(h + d));
      for (; d < head_dim; ++d) out[d] = _cvtsh_ss(h[d]);
    } else {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(row);
      for (int64_t blk = 0; blk < head_dim / kQkBlock; ++blk) {
        const __m256 scale = _mm256_set1_ps(_cvtsh_ss(b[blk].d));
        for (int part = 0; part < 4; ++part) {
          const __m128i q8 = _mm_loadl_epi64(
              reinterpret_cast<const __m128i*>(b[blk].qs + 8 * part));
          _mm256_storeu_ps(out + blk * kQkBlock + 8 * part,
                           _mm256_mul_ps(scale, _mm256_cvtepi32_ps(
                                                    _mm256_cvtepi8_epi32(q8))));
        }
      }
    }
  }
}

// Lane j of the result is the sum of the lanes of v[j], j < 8.
inline __m256 Reduce8(const __m256* v) {
  const __m256 s0123 =
      _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 s4567 =
      _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20),
                       _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// Dot product partials of q and a widened key: 8 lanes to be summed.
inline __m256 DotLanes(const float* q, const float* k, int64_t n) {
  __m256 a = _mm256_setzero_ps();
  int64_t d = 0;
#pragma GCC unroll 16
  for (; d + 8 <= n; d += 8) {
    a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), a);
  }
  if (d < n) {
    a = _mm256_fmadd_ps(LoadPartial(q + d, n - d), LoadPartial(k + d, n - d),
                        a);
  }
  return a;
}

// acc_h [head_dim] = sum_j<n p_h[j] * v_j for kH heads (p_h rows
// kAttentionChunkKeys apart, acc_h rows head_dim apart; v_j at v + j *
// stride elements, f32 or, with T = uint16_t, binary16; rows readable to a
// multiple of 8 elements), kV 8-dimension columns at a time, in registers
// over all n keys. Each (head, column) sums even and odd keys in two
// chains, each in key order, whatever kH and kV, so a head's values are the
// same whichever batch it came in.
template <int kH, int kV, typename T>
inline void WeightedValues(const float* p, const T* v, int64_t stride,
                           int64_t n, int64_t head_dim, float* acc) {
  for (int64_t d0 = 0; d0 < head_dim; d0 += 8 * kV) {
    __m256 a[2][kH][kV];
#pragma GCC unroll 4
    for (int h = 0; h < kH; ++h) {
#pragma GCC unroll 2
      for (int c = 0; c < kV; ++c) {
        a[0][h][c] = _mm256_setzero_ps();
        a[1][h][c] = _mm256_setzero_ps();
      }
    }
    const auto step = [&](int64_t j, int e) {
      const T* row = v + j * stride + d0;
      __m256 x[kV];
#pragma GCC unroll 2
      for (int c = 0; c < kV; ++c) {
        if constexpr (std::is_same_v<T, uint16_t>) {
          x[c] = LoadHalf8(row + 8 * c);
        } else {
          x[c] = _mm256_loadu_ps(row + 8 * c);
        }
      }
#pragma GCC unroll 4
      for (int h = 0; h < kH; ++h) {
        const __m256 w = _mm256_set1_ps(p[h * kAttentionChunkKeys + j]);
#pragma GCC unroll 2
        for (int c = 0; c < kV; ++c) {
          a[e][h][c] = _mm256_fmadd_ps(w, x[c], a[e][h][c]);
        }
      }
    };
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {
      step(j, 0);
      step(j + 1, 1);
    }
    if (j < n) step(j, 0);
#pragma GCC unroll 4
    for (int h = 0; h < kH; ++h) {
#pragma GCC unroll 2
      for (int c = 0; c < kV; ++c) {
        const int64_t left = head_dim - d0 - 8 * c;
        const __m256 sum = _mm256_add_ps(a[0][h][c], a[1][h][c]);
        if (left >= 8) {
          _mm256_storeu_ps(acc + h * head_dim + d0 + 8 * c, sum);
        } else if (left > 0) {
          StorePartial(acc + h * head_dim + d0 + 8 * c, left, sum);
        }
      }
    }
  }
}

// WeightedValues over `heads` heads: kV columns and 4 / kV heads at a time
// (8 accumulators), then single heads.
template <int kV, typename T>
inline void WeightedHeads(const float* p, const T* v, int64_t stride, int64_t n,
                          int64_t head_dim, int64_t heads, float* acc) {
  constexpr int kH = 4 / kV;
  int64_t h = 0;
  for (; h + kH <= heads; h += kH) {
    WeightedValues<kH, kV>(p + h * kAttentionChunkKeys, v, stride, n, head_dim,
                           acc + h * head_dim);
  }
  for (; h < heads; ++h) {
    WeightedValues<1, kV>(p + h * kAttentionChunkKeys, v, stride, n, head_dim,
                          acc + h * head_dim);
  }
}

// WeightedHeads with two columns at a time where the head has them.
template <typename T>
inline void WeightedAllHeads(const float* p, const T* v, int64_t stride,
                             int64_t n, int64_t head_dim, int64_t heads,
                             float* acc) {
  if (head_dim >= 16) {
    WeightedHeads<2>(p, v, stride, n, head_dim, heads, acc);
  } else {
    WeightedHeads<1>(p, v, stride, n, head_dim, heads, acc);
  }
}

// Query heads per block: the block's scores over the whole chunk fit the
// work area (ops.h).
constexpr int64_t kBlockHeads = kAttentionWorkHeads;

// kHeadDim: head_dim as a constant (its loops unrolled) or 0 for any.
// Three passes over the chunk, as on AVX-512 (ops_avx512.cc says why):
// scores of a block of heads, then each head's maximum and sum, then the
// weighted values.
template <int64_t kHeadDim>
void AttentionChunkOf(KvElement type, const float* q, int64_t n_q,
                      const void* k, const void* v, int64_t n_kv,
                      int64_t runtime_head_dim, int64_t row_bytes, float scale,
                      float* work, float* partial) {
  const int64_t head_dim = kHeadDim != 0 ? kHeadDim : runtime_head_dim;
  // Widened values' rows: head_dim rounded up to 8, zeros past it.
  const int64_t v_stride = (head_dim + 7) / 8 * 8;
  float* kt = work;                       // [kTile, head_dim]
  float* scores = kt + kTile * head_dim;  // [kBlockHeads, chunk keys]
  float* vw = scores + kBlockHeads * kAttentionChunkKeys;  // [n_kv, v_stride]
  float* max = partial + n_q * head_dim;
  float* sum = max + n_q;
  const auto* kb = static_cast<const uint8_t*>(k);
  const auto* vb = static_cast<const uint8_t*>(v);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int64_t head_bytes = type == KvElement::kF16
                                 ? 2 * head_dim
                                 : head_dim / kQkBlock * sizeof(BlockQ8_0);
  const int64_t n_tiles = (n_kv + kTile - 1) / kTile;
  // Binary16 values are read straight from the cache where their rows hold
  // whole columns of 8; others are widened once, for every block of heads.
  const bool direct = type == KvElement::kF16 && head_dim % 8 == 0;
  if (!direct) {
    for (int64_t j = 0; j < n_kv; ++j) {
      WidenRows(type, vb + j * row_bytes, row_bytes, 1, head_dim,
                vw + j * v_stride);
      std::fill(vw + j * v_stride + head_dim, vw + (j + 1) * v_stride, 0.0f);
    }
  }
  for (int64_t h0 = 0; h0 < n_q; h0 += kBlockHeads) {
    const int64_t heads = std::min(kBlockHeads, n_q - h0);
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
      const int64_t i0 = tile * kTile;
      const int n = static_cast<int>(std::min<int64_t>(kTile, n_kv - i0));
      const __m256 valid =
          _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
      // The next tile's rows, as the AVX-512 kernel does (ops_avx512.cc);
      // the values on the first pass, for the weighted sums below.
      const int64_t ahead = std::min<int64_t>(i0 + 2 * kTile, n_kv);
      PrefetchRows(kb, i0 + kTile, ahead, row_bytes, head_bytes);
      if (h0 == 0 && direct) {
        PrefetchRows(vb, tile == 0 ? 0 : i0 + kTile, ahead, row_bytes,
                     head_bytes);
      }
      WidenRows(type, kb + i0 * row_bytes, row_bytes, n, head_dim, kt);
      for (int64_t h = 0; h < heads; ++h) {
        const float* qh = q + (h0 + h) * head_dim;
        __m256 dots[kTile];
#pragma GCC unroll 8
        for (int j = 0; j < kTile; ++j) {
          dots[j] = j < n ? DotLanes(qh, kt + j * head_dim, head_dim)
                          : _mm256_setzero_ps();
        }
        _mm256_storeu_ps(
            scores + h * kAttentionChunkKeys + i0,
            _mm256_blendv_ps(
                _mm256_set1_ps(-INFINITY),
                _mm256_mul_ps(Reduce8(dots), _mm256_set1_ps(scale)), valid));
      }
    }
    // Softmax numerators in place; the maximum and sum once per head.
    for (int64_t h = 0; h < heads; ++h) {
      float* s = scores + h * kAttentionChunkKeys;
      __m256 vmax = _mm256_set1_ps(-INFINITY);
      for (int64_t tile = 0; tile < n_tiles; ++tile) {
        vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + tile * kTile));
      }
      const float m = HMax(vmax);
      const __m256 vm = _mm256_set1_ps(m);
      __m256 vsum = _mm256_setzero_ps();
      for (int64_t tile = 0; tile < n_tiles; ++tile) {
        const int left =
            static_cast<int>(std::min<int64_t>(kTile, n_kv - tile * kTile));
        const __m256 valid = _mm256_castsi256_ps(
            _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane));
        const __m256 e = _mm256_and_ps(
            valid, Exp(_mm256_sub_ps(_mm256_loadu_ps(s + tile * kTile), vm)));
        _mm256_storeu_ps(s + tile * kTile, e);
        vsum = _mm256_add_ps(vsum, e);
      }
      max[h0 + h] = m;
      sum[h0 + h] = HSum(vsum);
    }
    float* acc = partial + h0 * head_dim;
    if (direct) {
      WeightedAllHeads(scores, static_cast<const uint16_t*>(v), row_bytes / 2,
                       n_kv, head_dim, heads, acc);
    } else {
      WeightedAllHeads(scores, vw, v_stride, n_kv, head_dim, heads, acc);
    }
  }
}

void AttentionChunk(KvElement type, const float* q, int64_t n_q, const void* k,
                    const void* v, int64_t n_kv, int64_t head_dim,
                    int64_t row_bytes, float scale, float* work,
                    float* partial) {
  switch (head_dim) {
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

// The reference's operations on the same operands, lane by lane
// (bit-identical): fma(x0, c, -(x1 s)) and fma(x0, s, x1 c). The pairs left
// over past whole vectors go through the same scalar formulas.
void Rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin,
          RopeStyle style) {
  const int64_t half = head_dim / 2;
  if (style == RopeStyle::kNorm) {
    // Pairs (2i, 2i + 1) lie side by side, as cos_sin's (cos_i, sin_i).
    int64_t d = 0;
    for (; d + 8 <= head_dim; d += 8) {
      const __m256 cs = _mm256_loadu_ps(cos_sin + d);
      const __m256 c = _mm256_moveldup_ps(cs);
      const __m256 s = _mm256_movehdup_ps(cs);
      for (int64_t h = 0; h < n_heads; ++h) {
        float* p = x + h * head_dim + d;
        const __m256 v = _mm256_loadu_ps(p);
        const __m256 swapped = _mm256_permute_ps(v, 0xb1);
        const __m256 first = _mm256_fmsub_ps(v, c, _mm256_mul_ps(swapped, s));
        const __m256 second = _mm256_fmadd_ps(swapped, s, _mm256_mul_ps(v, c));
        _mm256_storeu_ps(p, _mm256_blend_ps(first, second, 0xaa));
      }
    }
    for (; d < head_dim; d += 2) {
      const float c = cos_sin[d];
      const float s = cos_sin[d + 1];
      for (int64_t h = 0; h < n_heads; ++h) {
        float* p = x + h * head_dim + d;
        const float x0 = p[0];
        const float x1 = p[1];
        p[0] = std::fma(x0, c, -(x1 * s));
        p[1] = std::fma(x0, s, x1 * c);
      }
    }
    return;
  }
  // kNeox: pairs (i, i + half).
  int64_t i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 lo = _mm256_loadu_ps(cos_sin + 2 * i);
    const __m256 hi = _mm256_loadu_ps(cos_sin + 2 * i + 8);
    // Even floats (cos) and odd floats (sin), back in pair order.
    const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xd8));
    const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xdd)), 0xd8));
    for (int64_t h = 0; h < n_heads; ++h) {
      float* p0 = x + h * head_dim + i;
      float* p1 = p0 + half;
      const __m256 x0 = _mm256_loadu_ps(p0);
      const __m256 x1 = _mm256_loadu_ps(p1);
      _mm256_storeu_ps(p0, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
      _mm256_storeu_ps(p1, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
    }
  }
  for (; i < half; ++i) {
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    for (int64_t h = 0; h < n_heads; ++h) {
      float* p = x + h * head_dim + i;
      const float x0 = p[0];
      const float x1 = p[half];
      p[0] = std::fma(x0, c, -(x1 * s));
      p[half] = std::fma(x0, s, x1 * c);
    }
  }
}

// Eight running maxima, each lane keeping its first maximum (strictly
// greater replaces, NaN never does); then the lanes in index order and the
// values past whole vectors, by the same rule. Prefetched 4 KiB ahead, as
// the AVX-512 one is (ops_avx512.cc says why).
constexpr int64_t kArgmaxAheadFloats = 1024;
int64_t Argmax(const float* x, int64_t n) {
  if (n > INT32_MAX) return ref::Argmax(x, n);
  __m256 best = _mm256_set1_ps(-INFINITY);
  __m256i at = _mm256_set1_epi32(-1);
  __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i eight = _mm256_set1_epi32(8);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (i % 16 == 0) {
      _mm_prefetch(reinterpret_cast<const char*>(x + i + kArgmaxAheadFloats),
                   _MM_HINT_T0);
    }
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
    best = _mm256_blendv_ps(best, v, gt);
    at = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(at),
                                              _mm256_castsi256_ps(index), gt));
    index = _mm256_add_epi32(index, eight);
  }
  alignas(32) float lane_best[8];
  alignas(32) int32_t lane_at[8];
  _mm256_store_ps(lane_best, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lane_at), at);
  float max = -INFINITY;
  int64_t arg = -1;
  for (int k = 0; k < 8; ++k) {
    if (lane_at[k] < 0) continue;
    if (lane_best[k] > max || (lane_best[k] == max && lane_at[k] < arg)) {
      max = lane_best[k];
      arg = lane_at[k];
    }
  }
  for (; i < n; ++i) {
    if (x[i] > max) {
      max = x[i];
      arg = i;
    }
  }
  // Nothing beat -inf: every value NaN or -inf, which the reference orders.
  return arg < 0 ? ref::Argmax(x, n) : arg;
}

// As the AVX-512 version (ops_avx512.cc), 8 lanes at a time.
void ToF16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      ref::ToF16(x + i, 8, out + i);
      continue;
    }
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + i),
        _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  ref::ToF16(x + i, n - i, out + i);
}

}  // namespace

void FillTable(KernelTable* table) {
  ref::FillTable(table);
  table->isa = Isa::kAvx2;
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

}  // namespace redline::kernels::avx2
