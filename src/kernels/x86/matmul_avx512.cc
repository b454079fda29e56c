// AVX-512 (F/BW/VL/DQ/VNNI) matrix products. Compiled with AVX-512 flags;
// only reached through the kernel table when the CPU supports them.
//
// Every kernel computes a tile of R weight rows x T tokens, so each weight
// vector loaded is used T times and each activation vector R times. Decode
// (T = 1) is memory-bound: R rows give R independent load streams. Prefill
// tiles reuse each weight block across T tokens from registers.
//
// Quantized weights use VNNI vpdpbusd (u8 x s8 -> s32, four products per
// lane). vpdpbusd wants one unsigned operand:
//   Q8_0: w is s8, so we feed (w ^ 0x80) = w + 128 as u8 against s8 x;
//   Q4_0: the stored nibble q = w + 8 is already u8 in [0, 15].
// The offset adds c * (sum of x over the lane's 4 bytes) to each int32
// lane; it depends on the activations only, so each token computes that
// correction once per unit and every row's dot product starts from it: the
// integer result is exact, as in the reference.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/x86/intrinsics.h"

namespace redline::kernels::avx512 {
namespace {

constexpr int64_t kQk = 32;
constexpr int64_t kQ8BlockBytes = 34;
constexpr int64_t kQ4BlockBytes = 18;

// Row tiles. Decode uses kDecodeRows rows per tile; prefill kPrefillRows x
// kPrefillTokens accumulators (16 of 32 zmm registers, the rest hold the
// weights of the tile and temporaries).
constexpr int kDecodeRows = 4;
constexpr int kPrefillRows = 4;
constexpr int kPrefillTokens = 4;

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

inline __mmask16 FirstLanes16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff)
                 : static_cast<__mmask16>((1u << n) - 1);
}

// Sums of 4 vectors: lane i of the result is the sum of v[i]'s lanes, added
// in the order of _mm512_reduce_add_ps (halves of 256, then 128 bits, then
// lanes (0+2)+(1+3)), as the single-vector path and ggml's tinyBLAS do.
inline __m128 Reduce4(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  auto quarter = [](__m512 v) {
    const __m256 h = _mm256_add_ps(
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)),
        _mm512_castps512_ps256(v));
    return _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
  };
  __m128 q0 = quarter(v0), q1 = quarter(v1), q2 = quarter(v2), q3 = quarter(v3);
  _MM_TRANSPOSE4_PS(q0, q1, q2, q3);  // q_k = lane k of each input
  return _mm_add_ps(_mm_add_ps(q0, q2), _mm_add_ps(q1, q3));
}

// y[t * y_stride + r] = the sum of acc[r][t]'s lanes.
template <int R, int T>
inline void StoreSums(const __m512 (&acc)[R][T], float* y, int64_t y_stride) {
  if constexpr (R == 4) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      _mm_storeu_ps(y + t * y_stride,
                    Reduce4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
    }
  } else {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Activation quantization (bit-identical to the reference).

// kMaxIndex[level]: permutex2var indices that halve every block's segment
// of partial maxima and pack two vectors' segments into one (block order
// kept). Level 0 takes one block per vector (16 lanes), level 3 leaves one
// lane per block.
struct MaxIndexTable {
  alignas(64) int32_t first[4][16];
  alignas(64) int32_t second[4][16];
};
constexpr MaxIndexTable MakeMaxIndex() {
  MaxIndexTable t{};
  for (int level = 0; level < 4; ++level) {
    const int width = 16 >> level;  // lanes per block in the inputs
    const int half = width / 2;
    const int n_seg = 16 / width;  // blocks per input vector
    for (int j = 0; j < 16; ++j) {
      const int seg = j / half, off = j % half;
      const int base = seg < n_seg ? seg * width : 16 + (seg - n_seg) * width;
      t.first[level][j] = base + off;
      t.second[level][j] = base + half + off;
    }
  }
  return t;
}
constexpr MaxIndexTable kMaxIndex = MakeMaxIndex();

inline __m512 CombineMax(__m512 a, __m512 b, int level) {
  const __m512i i1 =
      _mm512_load_si512(static_cast<const void*>(kMaxIndex.first[level]));
  const __m512i i2 =
      _mm512_load_si512(static_cast<const void*>(kMaxIndex.second[level]));
  return _mm512_max_ps(_mm512_permutex2var_ps(a, i1, b),
                       _mm512_permutex2var_ps(a, i2, b));
}

// Activations for F16 weights (bit-identical to ref's RoundF16: F16C
// rounds to nearest even; min/max with the bound first keep NaN).
void RoundF16(const float* x, int64_t n, float* rounded, uint16_t* bits) {
  const __m512 hi = _mm512_set1_ps(kF16Max);
  const __m512 lo = _mm512_set1_ps(-kF16Max);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = FirstLanes16(n - i);
    const __m512 v =
        _mm512_max_ps(lo, _mm512_min_ps(hi, _mm512_maskz_loadu_ps(m, x + i)));
    const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(bits + i, m, h);
    _mm512_mask_storeu_ps(rounded + i, m, _mm512_cvtph_ps(h));
  }
}

// Quantizes 16 blocks at a time: the 16 block maxima come out of one
// transposing reduction, and scales, reciprocals and fp16 rounding are done
// as vectors with the same IEEE operations as the reference's scalars.
void QuantizeQ8(const float* x, int64_t cols, int8_t* qs, float* d) {
  const int64_t n_blocks = cols / kQk;
  for (int64_t g = 0; g < n_blocks; g += 16) {
    const int64_t nb = Min(16, n_blocks - g);
    const float* xg = x + g * kQk;
    __m512 m[16];
    for (int k = 0; k < 16; ++k) {
      const __mmask16 valid = k < nb ? static_cast<__mmask16>(0xffff) : 0;
      m[k] = _mm512_max_ps(
          _mm512_abs_ps(_mm512_maskz_loadu_ps(valid, xg + k * kQk)),
          _mm512_abs_ps(_mm512_maskz_loadu_ps(valid, xg + k * kQk + 16)));
    }
    for (int level = 0, n = 16; n > 1; ++level, n /= 2) {
      for (int k = 0; k < n / 2; ++k)
        m[k] = CombineMax(m[2 * k], m[2 * k + 1], level);
    }
    // As ggml's x86 quantizer (see ref/matmul.cc): x * (127 / amax), half to
    // even.
    const __m512 scale = _mm512_div_ps(m[0], _mm512_set1_ps(127.0f));
    const __mmask16 nonzero =
        _mm512_cmp_ps_mask(m[0], _mm512_setzero_ps(), _CMP_NEQ_UQ);
    alignas(64) float inv[16];
    _mm512_store_ps(inv,
                    _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(127.0f), m[0]));
    _mm512_mask_storeu_ps(
        d + g, FirstLanes16(nb),
        _mm512_cvtph_ps(_mm512_cvtps_ph(
            scale, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    for (int64_t k = 0; k < nb; ++k) {
      const __m512 vinv = _mm512_set1_ps(inv[k]);
      const __m512i q0 = _mm512_cvt_roundps_epi32(
          _mm512_mul_ps(_mm512_loadu_ps(xg + k * kQk), vinv),
          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i q1 = _mm512_cvt_roundps_epi32(
          _mm512_mul_ps(_mm512_loadu_ps(xg + k * kQk + 16), vinv),
          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + (g + k) * kQk),
                       _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + (g + k) * kQk + 16),
                       _mm512_cvtepi32_epi8(q1));
    }
  }
}

// ---------------------------------------------------------------------------
// Quantized weights.
//
// The inner loop steps over "units" of blocks that fill whole zmm registers:
//   Q8_0: a pair of blocks, one zmm; lanes 0-7 hold block 0, 8-15 block 1.
//   Q4_0: a quad of blocks, two zmm (low and high nibbles) whose lanes
//         4k..4k+3 both belong to block k, so one int32 accumulator takes
//         both dot products before the f32 conversion.
// Scales are handled per group of 16 blocks: the 16 weight scales of each
// row are collected once (LoadBlockScales) and transposed to block-major
// order, so each block's fma takes the 4 rows' scales in one load.

template <DType kType>
struct QuantTraits;
template <>
struct QuantTraits<DType::kQ8_0> {
  static constexpr int64_t kBlockBytes = kQ8BlockBytes;
  static constexpr int kUnitBlocks = 2;
  // The u8 operand is w + 128.
  static constexpr char kOffset = static_cast<char>(128);
};
template <>
struct QuantTraits<DType::kQ4_0> {
  static constexpr int64_t kBlockBytes = kQ4BlockBytes;
  static constexpr int kUnitBlocks = 4;
  // The u8 operand is the nibble w + 8.
  static constexpr char kOffset = 8;
};

// f32 scales of blocks [0, n) of a weight row (n <= 16); lanes >= n are 0.
// One gather of the 16-bit scales at the block stride. (Measured: cheaper
// than 16 scalar loads through the stack, and than collecting them with
// word permutes of 64-byte loads; in profiles the gather also absorbs the
// cache misses of the next 16 blocks, being the first to touch them.)
template <int64_t kBlockBytes>
inline __m512 LoadBlockScales(const uint8_t* first_block, int64_t n) {
  const __m512i offsets = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(static_cast<int>(kBlockBytes)));
  const __m512i raw = _mm512_mask_i32gather_epi32(
      _mm512_setzero_si512(), FirstLanes16(n), offsets, first_block, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
}

// The weights of one unit as u8 operands of vpdpbusd. kFull = false loads
// only the first `n` blocks and zeros the rest (zero activation padding makes
// their products zero).
struct WeightUnit {
  __m512i a;  // Q8_0: the pair; Q4_0: low nibbles (elements 0-15 of each block)
  __m512i b;  // Q4_0: high nibbles (elements 16-31); unused for Q8_0
};

inline __m128i LoadQs16(const uint8_t* block, bool present) {
  return _mm_maskz_loadu_epi8(present ? static_cast<__mmask16>(0xffff) : 0,
                              block + 2);
}

template <DType kType, bool kFull>
inline WeightUnit LoadWeightUnit(const uint8_t* block, int64_t n) {
  WeightUnit u;
  if constexpr (kType == DType::kQ8_0) {
    const __m256i lo =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    // Without a second block, 0x80 bytes: w = 0 after the flip below.
    const __m256i hi =
        kFull || n > 1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                             block + kQ8BlockBytes + 2))
                       : _mm256_set1_epi8(static_cast<char>(0x80));
    u.a =
        _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                         _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    __m256i lo, hi;
    if constexpr (kFull) {
      lo = _mm256_inserti128_si256(
          _mm256_castsi128_si256(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2))),
          _mm_loadu_si128(
              reinterpret_cast<const __m128i*>(block + kQ4BlockBytes + 2)),
          1);
      hi = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(
              reinterpret_cast<const __m128i*>(block + 2 * kQ4BlockBytes + 2))),
          _mm_loadu_si128(
              reinterpret_cast<const __m128i*>(block + 3 * kQ4BlockBytes + 2)),
          1);
    } else {
      lo =
          _mm256_inserti128_si256(_mm256_castsi128_si256(LoadQs16(block, true)),
                                  LoadQs16(block + kQ4BlockBytes, n > 1), 1);
      hi = _mm256_inserti128_si256(
          _mm256_castsi128_si256(LoadQs16(block + 2 * kQ4BlockBytes, n > 2)),
          LoadQs16(block + 3 * kQ4BlockBytes, n > 3), 1);
    }
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    const __m512i mask = _mm512_set1_epi8(0x0f);
    u.a = _mm512_and_si512(q, mask);
    u.b = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask);
  }
  return u;
}

// Activations of one unit, arranged like the weights, with the int32
// correction -offset * sum4(x) that every row's dot product starts from.
struct ActivationUnit {
  __m512i a, b;
  __m512i corr;
};

template <DType kType>
inline ActivationUnit LoadActivationUnit(const int8_t* x) {
  const __m512i offset = _mm512_set1_epi8(QuantTraits<kType>::kOffset);
  ActivationUnit u;
  const __m512i x0 = _mm512_load_si512(static_cast<const void*>(x));
  __m512i sum;
  if constexpr (kType == DType::kQ4_0) {
    // x0 = [b0 0-15, b0 16-31, b1 0-15, b1 16-31], x1 likewise for b2, b3.
    const __m512i x1 = _mm512_load_si512(static_cast<const void*>(x + 64));
    u.a = _mm512_shuffle_i64x2(x0, x1, 0x88);  // elements 0-15 of b0..b3
    u.b = _mm512_shuffle_i64x2(x0, x1, 0xdd);  // elements 16-31 of b0..b3
    sum = _mm512_dpbusd_epi32(
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, u.a), offset, u.b);
  } else {
    u.a = x0;
    u.b = _mm512_setzero_si512();
    sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, x0);
  }
  u.corr = _mm512_sub_epi32(_mm512_setzero_si512(), sum);
  return u;
}

template <DType kType>
inline __m512i UnitDot(const WeightUnit& w, const ActivationUnit& x) {
  const __m512i dot = _mm512_dpbusd_epi32(x.corr, w.a, x.a);
  if constexpr (kType == DType::kQ4_0)
    return _mm512_dpbusd_epi32(dot, w.b, x.b);
  return dot;
}

// The integer sums of each block of one unit for rows 0-3 (v[r] =
// UnitDot of row r), as f32: lane 4c + r holds row r's sum over the lanes of
// 128-bit chunk c. Q4_0: chunk k is block k of the unit. Q8_0: chunks are
// also summed in pairs, so chunk 0 holds block 0 and chunk 2 block 1.
// Integer sums are exact, so the lane order inside a block does not matter.
template <int kUnit>
inline __m512 BlockSums(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
  const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1),
                                       _mm512_unpackhi_epi32(v0, v1));
  const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3),
                                       _mm512_unpackhi_epi32(v2, v3));
  const __m512 a = _mm512_castsi512_ps(s01);
  const __m512 b = _mm512_castsi512_ps(s23);
  __m512i sums = _mm512_add_epi32(
      _mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0))),
      _mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2))));
  if constexpr (kUnit == 2) {
    sums = _mm512_add_epi32(
        sums, _mm512_shuffle_i32x4(sums, sums, _MM_SHUFFLE(2, 3, 0, 1)));
  }
  return _mm512_cvtepi32_ps(sums);
}

inline __m128 Chunk(__m512 v, int c) {
  switch (c) {
    case 0:
      return _mm512_castps512_ps128(v);
    case 1:
      return _mm512_extractf32x4_ps(v, 1);
    case 2:
      return _mm512_extractf32x4_ps(v, 2);
    default:
      return _mm512_extractf32x4_ps(v, 3);
  }
}

// Quantized tile: y[t0 + t, r0 + r] for r < R, t < T.
//
// Every output is the sum the reference defines (ref/matmul.cc): blocks in
// order, acc = fma(int block dot, d_w * d_x, acc), which is also how ggml's
// AMX and VNNI kernels for these types accumulate. The integer dot product
// of a whole block is formed first (BlockSums), then the R rows of a token
// share one xmm accumulator (lane r = row r), one fma per block.
template <DType kType, int R, int T>
void QuantTile(const MatMulArgs& a, int64_t r0, int64_t t0) {
  using Traits = QuantTraits<kType>;
  constexpr int64_t kBlockBytes = Traits::kBlockBytes;
  constexpr int kUnit = Traits::kUnitBlocks;
  static_assert(R >= 1 && R <= 4);
  const int64_t n_blocks = a.cols / kQk;
  const uint8_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.row_bytes;
  const int8_t* xq[T];
  const float* xd[T];
  for (int t = 0; t < T; ++t) {
    xq[t] = a.xq.qs + (t0 + t) * a.xq.qs_stride;
    xd[t] = a.xq.d + (t0 + t) * a.xq.d_stride;
  }

  __m128 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();

  // Weight scales of a group of 16 blocks, block-major: wd[b] = rows 0-3.
  alignas(64) float wd[16][4];
  for (int64_t g = 0; g < n_blocks; g += 16) {
    const int64_t nb = Min(16, n_blocks - g);
    {
      __m512 ws[4];
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        ws[r] = r < R ? LoadBlockScales<kBlockBytes>(w[r] + g * kBlockBytes, nb)
                      : _mm512_setzero_ps();
      }
      // 4 x 16 -> 16 x 4: per 128-bit chunk c, o[k] = rows of block 4c + k.
      const __m512 t0v = _mm512_unpacklo_ps(ws[0], ws[1]);
      const __m512 t1v = _mm512_unpackhi_ps(ws[0], ws[1]);
      const __m512 t2v = _mm512_unpacklo_ps(ws[2], ws[3]);
      const __m512 t3v = _mm512_unpackhi_ps(ws[2], ws[3]);
      const __m512 o[4] = {
          _mm512_shuffle_ps(t0v, t2v, _MM_SHUFFLE(1, 0, 1, 0)),
          _mm512_shuffle_ps(t0v, t2v, _MM_SHUFFLE(3, 2, 3, 2)),
          _mm512_shuffle_ps(t1v, t3v, _MM_SHUFFLE(1, 0, 1, 0)),
          _mm512_shuffle_ps(t1v, t3v, _MM_SHUFFLE(3, 2, 3, 2))};
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        for (int c = 0; c < 4; ++c) _mm_store_ps(wd[4 * c + k], Chunk(o[k], c));
      }
    }

    auto unit = [&](int u, auto full) {
      constexpr bool kFull = decltype(full)::value;
      const int64_t b = g + u * kUnit;
      const int n_valid = static_cast<int>(Min(kUnit, nb - u * kUnit));
      WeightUnit wu[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // Rows are short (a few KB), so the hardware prefetcher would
        // start each row of the next tile cold: fetch the same unit of the
        // row R rows down (prefetches past the matrix are harmless).
        _mm_prefetch(reinterpret_cast<const char*>(w[r] + R * a.row_bytes +
                                                   b * kBlockBytes),
                     _MM_HINT_T0);
        wu[r] = LoadWeightUnit<kType, kFull>(w[r] + b * kBlockBytes,
                                             nb - u * kUnit);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const ActivationUnit xu = LoadActivationUnit<kType>(xq[t] + b * kQk);
        __m512i dots[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r)
          dots[r] = r < R ? UnitDot<kType>(wu[r], xu) : _mm512_setzero_si512();
        const __m512 sums =
            BlockSums<kUnit>(dots[0], dots[1], dots[2], dots[3]);
        for (int k = 0; k < n_valid; ++k) {
          const int chunk = kUnit == 2 ? 2 * k : k;
          const __m128 scale = _mm_mul_ps(_mm_load_ps(wd[u * kUnit + k]),
                                          _mm_set1_ps(xd[t][b + k]));
          acc[t] = _mm_fmadd_ps(Chunk(sums, chunk), scale, acc[t]);
        }
      }
    };
    const int full_units = static_cast<int>(nb / kUnit);
    for (int u = 0; u < full_units; ++u) unit(u, std::true_type{});
    if (nb % kUnit != 0) unit(full_units, std::false_type{});
  }

  constexpr __mmask8 kRows = static_cast<__mmask8>((1u << R) - 1);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
    _mm_mask_storeu_ps(a.y + (t0 + t) * a.y_stride + r0, kRows, acc[t]);
}

// ---------------------------------------------------------------------------
// Float weights (F32, F16, BF16): f32 FMA on converted weights.

// kBf16Even / kBf16Odd pick the even / odd elements of 32 floats held in two
// zmm (permutex2var indices).
struct Bf16Index {
  alignas(64) int32_t even[16];
  alignas(64) int32_t odd[16];
};
constexpr Bf16Index MakeBf16Index() {
  Bf16Index t{};
  for (int l = 0; l < 16; ++l) {
    t.even[l] = 2 * l;
    t.odd[l] = 2 * l + 1;
  }
  return t;
}
constexpr Bf16Index kBf16Index = MakeBf16Index();

// Columns per step: 16 f32/f16 weights; 32 bf16 weights, whose even
// elements become f32 by a 16-bit shift and odd ones by masking the low
// half (cheaper than widening), matched by even/odd activations.
template <DType kType>
constexpr int64_t kFloatStep = kType == DType::kBF16 ? 32 : 16;

// Whole rows: each output one accumulator over all columns.
template <DType kType, int R, int T>
void FloatTile(const MatMulArgs& a, int64_t r0, int64_t t0) {
  constexpr int64_t kStep = kFloatStep<kType>;
  const uint8_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.row_bytes;
  const float* x[T];
  for (int t = 0; t < T; ++t) x[t] = a.x + (t0 + t) * a.x_stride;
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const __m512i even =
      _mm512_load_si512(static_cast<const void*>(kBf16Index.even));
  const __m512i odd =
      _mm512_load_si512(static_cast<const void*>(kBf16Index.odd));

  // Bytes of one weight element (BF16 and F16: 2).
  constexpr int64_t kElementBytes = kType == DType::kF32 ? 4 : 2;

  // kMasked handles the last partial step: masked loads read zeros past cols.
  auto step = [&](int64_t c, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    const int64_t rem = a.cols - c;
    if constexpr (T == 1) {
      // Decode (F32, BF16), as in QuantTile: fetch the same columns of the
      // rows R rows down, whose tile would otherwise start each row cold
      // (measured +33 % decode on qwen2.5-0.5b F16, before F16 got
      // HalfRowsDecode).
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(w[r] + R * a.row_bytes +
                                                   kElementBytes * c),
                     _MM_HINT_T0);
      }
    }
    if constexpr (kType == DType::kBF16) {
      const __mmask32 wm =
          kMasked ? static_cast<__mmask32>((uint64_t{1} << rem) - 1)
                  : ~__mmask32{0};
      const __mmask16 m0 = FirstLanes16(rem);
      const __mmask16 m1 = FirstLanes16(rem > 16 ? rem - 16 : 0);
      __m512 we[R], wo[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i raw = kMasked ? _mm512_maskz_loadu_epi16(wm, w[r] + 2 * c)
                                    : _mm512_loadu_si512(w[r] + 2 * c);
        we[r] = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
        wo[r] = _mm512_castsi512_ps(_mm512_and_si512(
            raw, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512 x0 = kMasked ? _mm512_maskz_loadu_ps(m0, x[t] + c)
                                  : _mm512_loadu_ps(x[t] + c);
        const __m512 x1 = kMasked ? _mm512_maskz_loadu_ps(m1, x[t] + c + 16)
                                  : _mm512_loadu_ps(x[t] + c + 16);
        const __m512 xe = _mm512_permutex2var_ps(x0, even, x1);
        const __m512 xo = _mm512_permutex2var_ps(x0, odd, x1);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          acc[r][t] = _mm512_fmadd_ps(we[r], xe, acc[r][t]);
          acc[r][t] = _mm512_fmadd_ps(wo[r], xo, acc[r][t]);
        }
      }
    } else {
      const __mmask16 m = FirstLanes16(rem);
      __m512 wv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if constexpr (kType == DType::kF32) {
          wv[r] = kMasked ? _mm512_maskz_loadu_ps(m, w[r] + 4 * c)
                          : _mm512_loadu_ps(w[r] + 4 * c);
        } else {
          wv[r] = _mm512_cvtph_ps(
              kMasked ? _mm256_maskz_loadu_epi16(m, w[r] + 2 * c)
                      : _mm256_loadu_si256(
                            reinterpret_cast<const __m256i*>(w[r] + 2 * c)));
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512 xv = kMasked ? _mm512_maskz_loadu_ps(m, x[t] + c)
                                  : _mm512_loadu_ps(x[t] + c);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
  };
  int64_t c = 0;
  for (; c + kStep <= a.cols; c += kStep) step(c, std::false_type{});
  if (c < a.cols) step(c, std::true_type{});

  StoreSums<R, T>(acc, a.y + t0 * a.y_stride + r0, a.y_stride);
}

// Decode with F16 weights: y[r] = w[r] . x row by row (four far-apart rows
// in step, HalfRowsDecode), x read as binary16 (a.xh), each weight stream
// fetched ahead (kHalfAheadBytes for a row alone). One accumulator per row
// over 16-column steps, reduced as _mm512_reduce_add_ps: the order in
// which FloatTile sums every output over whole rows, so batches (which
// take FloatTile on the rounded f32 copy: the same values) give each token
// exactly its decode's sums, and speculative and batched decoding see plain
// decoding's logits. Measured against the
// 4-row FloatTile decode on cold weights (paired in one
// process, 2 threads): 8192 x 2048 1.40x, 4864 x 896 2.1x, 151936 x 896
// 2.3x, 128256 x 2048 1.3x, 2048 x 8192 1.0x (four accumulators measured
// the same as one: the loop waits on memory). On Zen 4 one stream per
// thread suited the hardware prefetcher better than four interleaved ones;
// on Zen 5 four far apart beat one (HalfRowsDecode). Binary16 x halves
// what competes with the weights for L1 (with f32 x the same row loop
// measured 0.66-1.26x).
constexpr int64_t kHalfAheadBytes = 8192;
// HalfRowsDecode's rows in step, each stream fetched kHalfStreamAheadBytes
// ahead: a stream of four advances at a quarter of the thread's pace, so
// 2 KiB is as far ahead in time as 8 KiB for one row. Measured on Zen 5,
// whole decode steps, the same process alternating (12-16 rounds): four
// rows at 2 KiB against two at 8 KiB, llama3.2-1b F16 1.085x and 1.243x,
// qwen2.5-0.5b F16 1.095x and 1.206x; four at 4 KiB 0.94x and 0.97x of
// two at 8, four at 1 KiB 0.99x and 0.96x of four at 2.
constexpr int kHalfDecodeStreams = 4;
constexpr int64_t kHalfStreamAheadBytes = 2048;

// Rows r[0..S) of y, each summed exactly as a lone row is (one accumulator,
// 64-column steps, then masked 16-column steps), the S rows in step.
template <int S, int64_t kAhead>
void HalfRowsInStep(const MatMulArgs& a, const int64_t (&r)[S]) {
  const uint16_t* x = a.xh;
  const int64_t cols = a.cols;
  const uint8_t* w[S];
  __m512 acc[S];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
    w[s] = a.w + r[s] * a.row_bytes;
    acc[s] = _mm512_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 64 <= cols; c += 64) {
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      _mm_prefetch(reinterpret_cast<const char*>(w[s] + 2 * c + kAhead),
                   _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(w[s] + 2 * c + kAhead + 64),
                   _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512 xv = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + c + 16 * j)));
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        const __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(w[s] + 2 * (c + 16 * j))));
        acc[s] = _mm512_fmadd_ps(wv, xv, acc[s]);
      }
    }
  }
  // Whole 16-column steps, then FloatTile's masked last step (zeros past
  // cols).
  for (; c < cols; c += 16) {
    const __mmask16 m = FirstLanes16(cols - c);
    const __m512 xv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + c));
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const __m512 wv =
          _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w[s] + 2 * c));
      acc[s] = _mm512_fmadd_ps(wv, xv, acc[s]);
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) a.y[r[s]] = _mm512_reduce_add_ps(acc[s]);
}

// The range as kHalfDecodeStreams streams, its equal parts in step (rows
// i, part + i, 2 part + i, ...), then the rows left over one at a time.
// Measured on Zen 5 against one row at a time (whole decode steps, the
// same process alternating): two rows 1.13-1.15x on llama3.2-1b F16,
// 1.06-1.07x on qwen2.5-0.5b F16; four are better again
// (kHalfDecodeStreams). Each row's sum is the same either way.
void HalfRowsDecode(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int S = kHalfDecodeStreams;
  const int64_t part = (row_end - row_begin) / S;
  for (int64_t i = 0; i < part; ++i) {
    int64_t rows[S];
    for (int s = 0; s < S; ++s) rows[s] = row_begin + s * part + i;
    HalfRowsInStep<S, kHalfStreamAheadBytes>(a, rows);
  }
  for (int64_t r = row_begin + S * part; r < row_end; ++r) {
    const int64_t row[1] = {r};
    HalfRowsInStep<1, kHalfAheadBytes>(a, row);
  }
}

// ---------------------------------------------------------------------------
// Row-range drivers: full tiles, then smaller tiles for the leftovers.

template <DType kType, int R, int T>
void Tile(const MatMulArgs& a, int64_t r0, int64_t t0) {
  if constexpr (kType == DType::kQ8_0 || kType == DType::kQ4_0) {
    QuantTile<kType, R, T>(a, r0, t0);
  } else {
    FloatTile<kType, R, T>(a, r0, t0);
  }
}

template <DType kType, int R>
void TileTokens(const MatMulArgs& a, int64_t r0, int64_t t0, int64_t n_tokens) {
  static_assert(kPrefillTokens == 4);
  switch (n_tokens) {
    case 1:
      Tile<kType, R, 1>(a, r0, t0);
      break;
    case 2:
      Tile<kType, R, 2>(a, r0, t0);
      break;
    case 3:
      Tile<kType, R, 3>(a, r0, t0);
      break;
    default:
      Tile<kType, R, 4>(a, r0, t0);
      break;
  }
}

template <DType kType>
void TileRowsTokens(const MatMulArgs& a, int64_t r0, int64_t n_rows, int64_t t0,
                    int64_t n_tokens) {
  static_assert(kPrefillRows == 4);
  switch (n_rows) {
    case 1:
      TileTokens<kType, 1>(a, r0, t0, n_tokens);
      break;
    case 2:
      TileTokens<kType, 2>(a, r0, t0, n_tokens);
      break;
    case 3:
      TileTokens<kType, 3>(a, r0, t0, n_tokens);
      break;
    default:
      TileTokens<kType, 4>(a, r0, t0, n_tokens);
      break;
  }
}

template <DType kType>
void MatMulRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  // MatMul always rounds x for F16 weights, so a.xh is set.
  if (kType == DType::kF16 && a.n_tokens == 1)
    return HalfRowsDecode(a, row_begin, row_end);
  if (a.n_tokens == 1) {
    int64_t r = row_begin;
    for (; r + kDecodeRows <= row_end; r += kDecodeRows)
      Tile<kType, kDecodeRows, 1>(a, r, 0);
    for (; r < row_end; ++r) Tile<kType, 1, 1>(a, r, 0);
    return;
  }
  // Prefill: each 4-row panel stays in cache while all token tiles pass
  // over it. Every output is summed over its whole row (one accumulator,
  // as ggml's tinyBLAS does, and as decode sums it: HalfRowsDecode for
  // F16), so a token's outputs are its decode's whatever the batch. For
  // 16-bit float weights the repacked layout is the fast one
  // (x86/matmul_half_packed_avx512.cc); this one serves --no-repack.
  for (int64_t r = row_begin; r < row_end; r += kPrefillRows) {
    const int64_t n_rows = Min(kPrefillRows, row_end - r);
    for (int64_t t = 0; t < a.n_tokens; t += kPrefillTokens) {
      TileRowsTokens<kType>(a, r, n_rows, t,
                            Min(kPrefillTokens, a.n_tokens - t));
    }
  }
}

}  // namespace

void MatMulRowsQ8_0(const MatMulArgs& args, int64_t row_begin,
                    int64_t row_end) {
  MatMulRows<DType::kQ8_0>(args, row_begin, row_end);
}

void MatMulRowsQ4_0(const MatMulArgs& args, int64_t row_begin,
                    int64_t row_end) {
  MatMulRows<DType::kQ4_0>(args, row_begin, row_end);
}

namespace {

// The other block types (x86/unpacked_matmul.inc), on 256-bit vpdpbusd.
inline __m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

constexpr int kDotU8Max = 255;

constexpr int kUnpackedPrefillRows = 4;

// The .inc's row tiles are all replaced in the table by KQuantRows512
// (FillMatMulTable), which fetches ahead on its own; their decode hook is
// never reached here.
inline void PrefetchRowAhead(const uint8_t*, int64_t) {}

#include "kernels/x86/unpacked_matmul.inc"

// Every block type but Q8_0/Q4_0 with two 32-element blocks per zmm: Q4_K,
// Q5_K (0 <= q <= 31, one scale and offset per 32 elements), Q2_K (scale
// and offset per 16), Q6_K and Q3_K (signed, a scale per 16), and Q4_1,
// Q5_0, Q5_1, IQ4_NL (unsigned values with an offset, in groups of 8
// blocks). The unpacked super-block (or group) as above, then per pair of activation blocks one
// vpdpbusd per row and token whose lanes 0-7 belong to the first block and
// 8-15 to the second, each lane scaled by its group's weight scale and its
// block's activation scale. Uniform offsets as in UnpackedTile; Q2_K's per
// 16 from the activations' 4-byte sums. Q6_K and Q3_K are fed as q + bias
// (u8) with the accumulator started at -bias * (sum of x over the lane's 4
// bytes), so the int32 dot is exact.
// Unpacked groups of R rows, [R][n_groups] of 256 q, 16 scales and 16
// offsets each (64-byte aligned), for prefill tiles that reuse them across
// token tiles; null members: each tile unpacks for itself.
struct UnpackedGroups {
  const int8_t* q = nullptr;
  const float* scale = nullptr;
  const float* offset = nullptr;
  int64_t n_groups = 0;
};

// Group i (256 elements) of one row into q[256], scale[16], offset[16].
// Blocks past the row's end (a short last group of a 32-element type) get
// zero weights, scales and offsets; the activations there are zero padding
// (Q8Activations) and are read at most one block past the row.
template <DType kType>
inline void UnpackGroup(const uint8_t* row, int64_t i, int64_t n_blocks,
                        int8_t* q, float* scale, float* offset) {
  using Traits = UnpackedTraits<kType>;
  if constexpr (Traits::kSuper) {
    UnpackBlock<kType>(row + i * Traits::kBytes, q, scale, offset);
  } else {
    const uint8_t* group = row + i * 8 * Traits::kBytes;
    const int nb = static_cast<int>(Min(8, n_blocks - 8 * i));
    for (int k = 0; k < nb; ++k) {
      UStore(q + 32 * k, Unpack32<kType>(group + k * Traits::kBytes, &scale[k],
                                         &offset[k]));
    }
    for (int k = nb; k < 8; ++k) {
      UStore(q + 32 * k, _mm256_setzero_si256());
      scale[k] = 0.0f;
      offset[k] = 0.0f;
    }
  }
}

template <DType kType, int R, int T>
void KQuantTile512(const MatMulArgs& a, int64_t r0, int64_t t0,
                   const UnpackedGroups& pre = {}) {
  using Traits = UnpackedTraits<kType>;
  // Signed q is fed as q + kBias (u8) against an accumulator started at
  // -kBias * (sum of x over the lane's 4 bytes).
  constexpr int kBias = kType == DType::kQ6_K   ? 32
                        : kType == DType::kQ3_K ? 4
                                                : 0;
  static_assert(Traits::kSigned == (kBias != 0));
  // Scales (and Q2_K's offsets) per 16 elements: lanes 4j..4j+3 of a pair.
  constexpr bool kGroups16 = !Traits::kUniform;
  constexpr bool kOffset16 = kGroups16 && Traits::kOffset;
  // Groups of 256 elements: a super-block, or 8 blocks of a 32-element type
  // (the last group of a row possibly fewer).
  const int64_t n_blocks = a.cols / kQkBlock;
  const int64_t n_groups = (n_blocks + 7) / 8;
  constexpr int64_t kGroupBytes =
      Traits::kSuper ? Traits::kBytes : 8 * Traits::kBytes;
  const uint8_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.row_bytes;
  const int8_t* xq[T];
  const float* xd[T];
  const int32_t* xs[T];
  for (int t = 0; t < T; ++t) {
    xq[t] = a.xq.qs + (t0 + t) * a.xq.qs_stride;
    xd[t] = a.xq.d + (t0 + t) * a.xq.d_stride;
    xs[t] = a.xq.s + (t0 + t) * a.xq.d_stride;
  }
  __m512 acc[R][T];
  __m256 off_acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[r][t] = _mm512_setzero_ps();
      off_acc[r][t] = _mm256_setzero_ps();
    }
  }
  alignas(64) int8_t q[R][kQkSuper];
  alignas(32) float scale[R][16];
  alignas(32) float offset[R][16];
  // Lanes 0-7 take element 0 of a pair of floats, lanes 8-15 element 1.
  const __m512i pair_index =
      _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  // Lanes 4j..4j+3 take element j of four floats (Q6_K's groups of 16).
  const __m512i quad_index =
      _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  auto pair = [&](const float* p) {
    return _mm512_permutexvar_ps(
        pair_index, _mm512_castps128_ps512(_mm_castpd_ps(
                        _mm_load_sd(reinterpret_cast<const double*>(p)))));
  };
  for (int64_t i = 0; i < n_groups; ++i) {
    // Row streams are read once: fetch a few super-blocks ahead (the
    // unpacking in between keeps the hardware prefetcher from running far
    // enough ahead on its own).
    if (pre.q == nullptr) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(
            reinterpret_cast<const char*>(w[r] + (i + 4) * kGroupBytes),
            _MM_HINT_T0);
        _mm_prefetch(
            reinterpret_cast<const char*>(w[r] + (i + 4) * kGroupBytes + 64),
            _MM_HINT_T0);
        _mm_prefetch(
            reinterpret_cast<const char*>(w[r] + (i + 4) * kGroupBytes + 128),
            _MM_HINT_T0);
      }
    }
    const int n_pairs =
        Traits::kSuper ? 4
                       : static_cast<int>((Min(8, n_blocks - 8 * i) + 1) / 2);
    const int8_t* qg[R];
    const float* scg[R];
    const float* offg[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if (pre.q != nullptr) {
        const int64_t g = r * pre.n_groups + i;
        qg[r] = pre.q + g * kQkSuper;
        scg[r] = pre.scale + g * 16;
        offg[r] = pre.offset + g * 16;
      } else {
        UnpackGroup<kType>(w[r], i, n_blocks, q[r], scale[r], offset[r]);
        qg[r] = q[r];
        scg[r] = scale[r];
        offg[r] = offset[r];
      }
    }
    if constexpr (Traits::kOffset && !kGroups16) {
      __m256 off8[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) off8[r] = _mm256_load_ps(offg[r]);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256 dxs = _mm256_mul_ps(
            _mm256_loadu_ps(xd[t] + i * 8),
            _mm256_cvtepi32_ps(_mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(xs[t] + i * 8))));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          off_acc[r][t] = _mm256_fmadd_ps(off8[r], dxs, off_acc[r][t]);
      }
    }
    for (int p = 0; p < n_pairs; ++p) {
      const int64_t b = i * 8 + 2 * p;
      __m512i wq[R];
      __m512 wsc[R], woff[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        wq[r] = _mm512_load_si512(static_cast<const void*>(qg[r] + 64 * p));
        if constexpr (kBias != 0)
          wq[r] = _mm512_add_epi8(wq[r], _mm512_set1_epi8(kBias));
        if constexpr (kGroups16) {
          wsc[r] = _mm512_permutexvar_ps(
              quad_index, _mm512_castps128_ps512(_mm_load_ps(scg[r] + 4 * p)));
        } else {
          wsc[r] = pair(scg[r] + 2 * p);
        }
        if constexpr (kOffset16) {
          woff[r] = _mm512_permutexvar_ps(
              quad_index, _mm512_castps128_ps512(_mm_load_ps(offg[r] + 4 * p)));
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512i xv =
            _mm512_load_si512(static_cast<const void*>(xq[t] + b * 32));
        const __m512 dx = pair(xd[t] + b);
        __m512i start = _mm512_setzero_si512();
        if constexpr (kBias != 0) {
          start = _mm512_sub_epi32(
              start, _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                         _mm512_set1_epi8(kBias), xv));
        }
        __m512 xsum = _mm512_setzero_ps();
        if constexpr (kOffset16) {
          xsum = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(
              _mm512_setzero_si512(), _mm512_set1_epi8(1), xv));
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i dot = _mm512_dpbusd_epi32(start, wq[r], xv);
          __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(dot), wsc[r]);
          if constexpr (kOffset16) v = _mm512_fmadd_ps(xsum, woff[r], v);
          acc[r][t] = _mm512_fmadd_ps(v, dx, acc[r][t]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      a.y[(t0 + t) * a.y_stride + r0 + r] =
          _mm512_reduce_add_ps(acc[r][t]) + UHSum(off_acc[r][t]);
    }
  }
}

template <DType kType, int R>
void KQuantTileTokens512(const MatMulArgs& a, int64_t r0, int64_t t0,
                         int64_t n_tokens, const UnpackedGroups& pre) {
  switch (n_tokens) {
    case 1:
      KQuantTile512<kType, R, 1>(a, r0, t0, pre);
      break;
    case 2:
      KQuantTile512<kType, R, 2>(a, r0, t0, pre);
      break;
    case 3:
      KQuantTile512<kType, R, 3>(a, r0, t0, pre);
      break;
    default:
      KQuantTile512<kType, R, 4>(a, r0, t0, pre);
      break;
  }
}

// Decode: each tile unpacks its rows as it streams them. Prefill (more than
// one token tile): the rows of a tile are unpacked once into a buffer that
// every token tile then reads.
template <DType kType>
void KQuantRows512(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = a.cols / kQkBlock;
  const int64_t n_groups = (n_blocks + 7) / 8;
  std::vector<uint8_t> buffer;
  UnpackedGroups pre;
  auto unpack_rows = [&](int64_t r, int n_rows) {
    if (a.n_tokens <= 4) return;
    const int64_t q_bytes = n_rows * n_groups * kQkSuper;
    const int64_t f_count = n_rows * n_groups * 16;
    buffer.resize(static_cast<size_t>(q_bytes + 2 * f_count * 4 + 64));
    auto base = reinterpret_cast<uintptr_t>(buffer.data());
    auto* q = reinterpret_cast<int8_t*>((base + 63) & ~uintptr_t{63});
    auto* scale = reinterpret_cast<float*>(q + q_bytes);
    float* offset = scale + f_count;
    for (int k = 0; k < n_rows; ++k) {
      for (int64_t i = 0; i < n_groups; ++i) {
        const int64_t g = k * n_groups + i;
        UnpackGroup<kType>(a.w + (r + k) * a.row_bytes, i, n_blocks,
                           q + g * kQkSuper, scale + g * 16, offset + g * 16);
      }
    }
    pre = UnpackedGroups{q, scale, offset, n_groups};
  };
  int64_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    unpack_rows(r, 4);
    for (int64_t t = 0; t < a.n_tokens; t += 4)
      KQuantTileTokens512<kType, 4>(a, r, t, Min(4, a.n_tokens - t), pre);
  }
  for (; r < row_end; ++r) {
    unpack_rows(r, 1);
    for (int64_t t = 0; t < a.n_tokens; t += 4)
      KQuantTileTokens512<kType, 1>(a, r, t, Min(4, a.n_tokens - t), pre);
  }
}

}  // namespace

void FillMatMulTable(KernelTable* table) {
  table->quantize_q8 = &QuantizeQ8;
  table->round_f16 = &RoundF16;
  table->matmul[static_cast<int>(DType::kF32)] = &MatMulRows<DType::kF32>;
  table->matmul[static_cast<int>(DType::kF16)] = &MatMulRows<DType::kF16>;
  table->matmul[static_cast<int>(DType::kBF16)] = &MatMulRows<DType::kBF16>;
  table->matmul[static_cast<int>(DType::kQ8_0)] = &MatMulRows<DType::kQ8_0>;
  table->matmul[static_cast<int>(DType::kQ4_0)] = &MatMulRows<DType::kQ4_0>;
  table->matmul_packed[static_cast<int>(DType::kQ8_0)] = &MatMulPackedRowsQ8_0;
  table->matmul_packed[static_cast<int>(DType::kQ4_0)] = &MatMulPackedRowsQ4_0;
  table->matmul_packed[static_cast<int>(DType::kQ5_0)] = &MatMulPackedRowsQ5_0;
  table->matmul_packed[static_cast<int>(DType::kQ5_1)] = &MatMulPackedRowsQ5_1;
  table->matmul_packed[static_cast<int>(DType::kQ4_1)] = &MatMulPackedRowsQ4_1;
  table->matmul_packed[static_cast<int>(DType::kIQ4_NL)] =
      &MatMulPackedRowsIQ4_NL;
  table->matmul_packed[static_cast<int>(DType::kQ2_K)] = &MatMulPackedRowsQ2_K;
  table->matmul_packed[static_cast<int>(DType::kQ3_K)] = &MatMulPackedRowsQ3_K;
  table->matmul_packed[static_cast<int>(DType::kQ4_K)] = &MatMulPackedRowsQ4_K;
  table->matmul_packed[static_cast<int>(DType::kQ5_K)] = &MatMulPackedRowsQ5_K;
  table->matmul_packed[static_cast<int>(DType::kQ6_K)] = &MatMulPackedRowsQ6_K;
  table->matmul_packed[static_cast<int>(DType::kF16)] = &MatMulPackedRowsF16;
  table->matmul_packed[static_cast<int>(DType::kBF16)] = &MatMulPackedRowsBF16;
  FillUnpackedTable(table);
  table->matmul[static_cast<int>(DType::kQ4_K)] = &KQuantRows512<DType::kQ4_K>;
  table->matmul[static_cast<int>(DType::kQ5_K)] = &KQuantRows512<DType::kQ5_K>;
  table->matmul[static_cast<int>(DType::kQ6_K)] = &KQuantRows512<DType::kQ6_K>;
  table->matmul[static_cast<int>(DType::kQ3_K)] = &KQuantRows512<DType::kQ3_K>;
  table->matmul[static_cast<int>(DType::kQ2_K)] = &KQuantRows512<DType::kQ2_K>;
  table->matmul[static_cast<int>(DType::kQ4_1)] = &KQuantRows512<DType::kQ4_1>;
  table->matmul[static_cast<int>(DType::kQ5_0)] = &KQuantRows512<DType::kQ5_0>;
  table->matmul[static_cast<int>(DType::kQ5_1)] = &KQuantRows512<DType::kQ5_1>;
  table->matmul[static_cast<int>(DType::kIQ4_NL)] =
      &KQuantRows512<DType::kIQ4_NL>;
}

}  // namespace redline::kernels::avx512
