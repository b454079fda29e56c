// AVX-512 (F/BW/VL/DQ/VNNI) matrix products. Compiled with AVX-512 flags;
// only reached through the kernel table when the CPU supports them.
//
// Every kernel computes a tile of R weight rows x T tokens with R*T vector
// accumulators, so each weight vector loaded is used T times and each
// activation vector R times. Decode (T = 1) is memory-bound: R rows give R
// independent load streams and accumulator chains. Prefill tiles reuse each
// weight block across T tokens from registers.
//
// Quantized weights use VNNI vpdpbusd (u8 x s8 -> s32, four products per
// lane). vpdpbusd wants one unsigned operand:
//   Q8_0: w is s8, so we feed (w ^ 0x80) = w + 128 as u8 against s8 x and
//         start the accumulator at -128 * sum4(x), which cancels the offset.
//   Q4_0: the stored nibble q = w + 8 is already u8 in [0, 15]; start the
//         accumulator at -8 * sum4(x).
// Both corrections depend on the activations only, so they cost nothing per
// weight row. A zmm holds two 32-element blocks (lanes 0-7 and 8-15), and the
// per-block scale d_w * d_x is spread over those lane halves by a permute
// from a vector of 16 block scales gathered once per 16 blocks.
#include <cstdint>
#include <cstring>
#include <type_traits>

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

// kPairIndex[p]: lanes 0-7 select element 2p, lanes 8-15 element 2p + 1.
struct PairIndexTable {
  alignas(64) int32_t v[8][16];
};
constexpr PairIndexTable MakePairIndex() {
  PairIndexTable t{};
  for (int p = 0; p < 8; ++p) {
    for (int l = 0; l < 16; ++l) t.v[p][l] = 2 * p + (l >= 8 ? 1 : 0);
  }
  return t;
}
constexpr PairIndexTable kPairIndex = MakePairIndex();

inline __m512i PairIndex(int p) {
  return _mm512_load_si512(static_cast<const void*>(kPairIndex.v[p]));
}

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

inline __mmask16 FirstLanes16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// ---------------------------------------------------------------------------
// Activation quantization (bit-identical to ref::QuantizeQ8Activations).

// roundf(): round half away from zero, exactly.
inline __m512 RoundHalfAway(__m512 s) {
  const __m512 t = _mm512_roundscale_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac_abs = _mm512_abs_ps(_mm512_sub_ps(s, t));
  const __mmask16 up = _mm512_cmp_ps_mask(frac_abs, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 sign = _mm512_and_ps(s, _mm512_set1_ps(-0.0f));
  const __m512 one = _mm512_or_ps(sign, _mm512_set1_ps(1.0f));
  return _mm512_mask_add_ps(t, up, t, one);
}

void QuantizeQ8(const float* x, int64_t cols, int8_t* qs, float* d) {
  for (int64_t b = 0; b < cols / kQk; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * kQk);
    const __m512 v1 = _mm512_loadu_ps(x + b * kQk + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i q0 = _mm512_cvtps_epi32(RoundHalfAway(_mm512_mul_ps(v0, vinv)));
    const __m512i q1 = _mm512_cvtps_epi32(RoundHalfAway(_mm512_mul_ps(v1, vinv)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * kQk), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * kQk + 16), _mm512_cvtepi32_epi8(q1));
    d[b] = _cvtsh_ss(_cvtss_sh(scale, _MM_FROUND_TO_NEAREST_INT));
  }
}

// ---------------------------------------------------------------------------
// Quantized weights.

template <DType kType>
struct QuantTraits;
template <>
struct QuantTraits<DType::kQ8_0> {
  static constexpr int64_t kBlockBytes = kQ8BlockBytes;
  static constexpr char kOffset = static_cast<char>(128);  // see file comment
};
template <>
struct QuantTraits<DType::kQ4_0> {
  static constexpr int64_t kBlockBytes = kQ4BlockBytes;
  static constexpr char kOffset = 8;
};

// f32 scales of blocks [0, n) of a weight row (n <= 16); lanes >= n are 0.
// One gather of the 16-bit scales at the block stride.
template <int64_t kBlockBytes>
inline __m512 LoadBlockScales(const uint8_t* first_block, int64_t n) {
  const __m512i offsets = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(static_cast<int>(kBlockBytes)));
  const __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), FirstLanes16(n), offsets,
                                                   first_block, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
}

// The 64 weights of blocks (b, b + 1) as the u8 operand of vpdpbusd, in
// natural order (block b in bytes 0-31). kTwo = false loads block b only and
// leaves the upper half at the zero point, which the zero activation padding
// turns into zero products.
template <DType kType, bool kTwo>
inline __m512i LoadWeightPair(const uint8_t* block) {
  if constexpr (kType == DType::kQ8_0) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    const __m256i hi = kTwo ? _mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(block + kQ8BlockBytes + 2))
                            : _mm256_setzero_si256();
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    // 16 bytes per block: low nibbles are elements 0-15, high nibbles 16-31.
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    __m256i q = _mm256_castsi128_si256(lo);
    if constexpr (kTwo) {
      q = _mm256_inserti128_si256(
          q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kQ4BlockBytes + 2)), 1);
    } else {
      q = _mm256_zextsi128_si256(lo);
    }
    // [q_b, q_b, q_b+1, q_b+1] in 128-bit lanes, then shift lanes 1 and 3 by 4.
    const __m512i z = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0),
                                               _mm512_castsi256_si512(q));
    const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0,
                                            0x0004000400040004, 0x0004000400040004, 0, 0);
    return _mm512_and_si512(_mm512_srlv_epi16(z, shifts), _mm512_set1_epi8(0x0f));
  }
}

// Quantized tile: y[t0 + t, r0 + r] for r < R, t < T.
template <DType kType, int R, int T>
void QuantTile(const MatMulArgs& a, int64_t r0, int64_t t0) {
  constexpr int64_t kBlockBytes = QuantTraits<kType>::kBlockBytes;
  const int64_t n_blocks = a.cols / kQk;
  const uint8_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.row_bytes;
  const int8_t* xq[T];
  const float* xd[T];
  for (int t = 0; t < T; ++t) {
    xq[t] = a.xq.qs + (t0 + t) * a.xq.qs_stride;
    xd[t] = a.xq.d + (t0 + t) * a.xq.d_stride;
  }
  const __m512i offset = _mm512_set1_epi8(QuantTraits<kType>::kOffset);

  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }

  for (int64_t g = 0; g < n_blocks; g += 16) {
    const int64_t nb = Min(16, n_blocks - g);
    // Block scales of this group: per row (gathered) and per token. For
    // T == 1 fold them together once: scale[r] = d_w[r] * d_x.
    __m512 wscale[R];
    __m512 xscale[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xscale[t] = _mm512_load_ps(xd[t] + g);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      wscale[r] = LoadBlockScales<kBlockBytes>(w[r] + g * kBlockBytes, nb);
      if constexpr (T == 1) wscale[r] = _mm512_mul_ps(wscale[r], xscale[0]);
    }

    auto pair = [&](int p, auto two) {
      constexpr bool kTwo = decltype(two)::value;
      const int64_t b = g + 2 * p;
      const __m512i idx = PairIndex(p);
      __m512i wq[R];
      __m512 ws[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        wq[r] = LoadWeightPair<kType, kTwo>(w[r] + b * kBlockBytes);
        ws[r] = _mm512_permutexvar_ps(idx, wscale[r]);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512i xv = _mm512_load_si512(static_cast<const void*>(xq[t] + b * kQk));
        const __m512i corr = _mm512_sub_epi32(
            _mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, xv));
        const __m512 xs = T == 1 ? _mm512_set1_ps(1.0f) : _mm512_permutexvar_ps(idx, xscale[t]);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i dot = _mm512_dpbusd_epi32(corr, wq[r], xv);
          const __m512 scale = T == 1 ? ws[r] : _mm512_mul_ps(ws[r], xs);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[r][t]);
        }
      }
    };
    const int full_pairs = static_cast<int>(nb / 2);
    for (int p = 0; p < full_pairs; ++p) pair(p, std::true_type{});
    if (nb & 1) pair(full_pairs, std::false_type{});
  }

#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      a.y[(t0 + t) * a.y_stride + r0 + r] = _mm512_reduce_add_ps(acc[r][t]);
    }
  }
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

template <DType kType, int R, int T>
void FloatTile(const MatMulArgs& a, int64_t r0, int64_t t0) {
  constexpr int64_t kStep = kFloatStep<kType>;
  const uint8_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.row_bytes;
  const float* x[T];
  for (int t = 0; t < T; ++t) x[t] = a.x + (t0 + t) * a.cols;
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const __m512i even = _mm512_load_si512(static_cast<const void*>(kBf16Index.even));
  const __m512i odd = _mm512_load_si512(static_cast<const void*>(kBf16Index.odd));

  // kMasked handles the last partial step: masked loads read zeros past cols.
  auto step = [&](int64_t c, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    const int64_t rem = a.cols - c;
    if constexpr (kType == DType::kBF16) {
      const __mmask32 wm = kMasked ? static_cast<__mmask32>((uint64_t{1} << rem) - 1) : ~__mmask32{0};
      const __mmask16 m0 = FirstLanes16(rem);
      const __mmask16 m1 = FirstLanes16(rem > 16 ? rem - 16 : 0);
      __m512 we[R], wo[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i raw = kMasked ? _mm512_maskz_loadu_epi16(wm, w[r] + 2 * c)
                                    : _mm512_loadu_si512(w[r] + 2 * c);
        we[r] = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
        wo[r] = _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512 x0 = kMasked ? _mm512_maskz_loadu_ps(m0, x[t] + c) : _mm512_loadu_ps(x[t] + c);
        const __m512 x1 =
            kMasked ? _mm512_maskz_loadu_ps(m1, x[t] + c + 16) : _mm512_loadu_ps(x[t] + c + 16);
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
                      : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + 2 * c)));
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512 xv = kMasked ? _mm512_maskz_loadu_ps(m, x[t] + c) : _mm512_loadu_ps(x[t] + c);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
  };
  int64_t c = 0;
  for (; c + kStep <= a.cols; c += kStep) step(c, std::false_type{});
  if (c < a.cols) step(c, std::true_type{});

#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      a.y[(t0 + t) * a.y_stride + r0 + r] = _mm512_reduce_add_ps(acc[r][t]);
    }
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
    case 1: Tile<kType, R, 1>(a, r0, t0); break;
    case 2: Tile<kType, R, 2>(a, r0, t0); break;
    case 3: Tile<kType, R, 3>(a, r0, t0); break;
    default: Tile<kType, R, 4>(a, r0, t0); break;
  }
}

template <DType kType>
void TileRowsTokens(const MatMulArgs& a, int64_t r0, int64_t n_rows, int64_t t0,
                    int64_t n_tokens) {
  static_assert(kPrefillRows == 4);
  switch (n_rows) {
    case 1: TileTokens<kType, 1>(a, r0, t0, n_tokens); break;
    case 2: TileTokens<kType, 2>(a, r0, t0, n_tokens); break;
    case 3: TileTokens<kType, 3>(a, r0, t0, n_tokens); break;
    default: TileTokens<kType, 4>(a, r0, t0, n_tokens); break;
  }
}

template <DType kType>
void MatMulRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.n_tokens == 1) {
    int64_t r = row_begin;
    for (; r + kDecodeRows <= row_end; r += kDecodeRows) Tile<kType, kDecodeRows, 1>(a, r, 0);
    for (; r < row_end; ++r) Tile<kType, 1, 1>(a, r, 0);
    return;
  }
  // Prefill: each row panel stays in L1 while all token tiles pass over it.
  for (int64_t r = row_begin; r < row_end; r += kPrefillRows) {
    const int64_t n_rows = Min(kPrefillRows, row_end - r);
    for (int64_t t = 0; t < a.n_tokens; t += kPrefillTokens) {
      TileRowsTokens<kType>(a, r, n_rows, t, Min(kPrefillTokens, a.n_tokens - t));
    }
  }
}

}  // namespace

void FillMatMulTable(KernelTable* table) {
  table->quantize_q8 = &QuantizeQ8;
  table->matmul[static_cast<int>(DType::kF32)] = &MatMulRows<DType::kF32>;
  table->matmul[static_cast<int>(DType::kF16)] = &MatMulRows<DType::kF16>;
  table->matmul[static_cast<int>(DType::kBF16)] = &MatMulRows<DType::kBF16>;
  table->matmul[static_cast<int>(DType::kQ8_0)] = &MatMulRows<DType::kQ8_0>;
  table->matmul[static_cast<int>(DType::kQ4_0)] = &MatMulRows<DType::kQ4_0>;
}

}  // namespace redline::kernels::avx512
