// AVX2 + FMA + F16C matrix products on the file's row layout. Compiled with
// those flags only; reached through the kernel table when the CPU has them.
// Q8_0, Q4_0, F16 and BF16 weights are repacked into panels at load by
// default and multiplied by x86/matmul_packed_avx2.cc; these tiles serve
// them with --no-repack, and every other type.
//
// Same tiling as the AVX-512 file (R weight rows x T tokens of vector
// accumulators), with one 32-element block per ymm. Integer dot products use
// vpmaddubsw (u8 x s8 -> saturating s16 pairs) and vpmaddwd to s32:
//   Q8_0: the sign trick, |w| (u8) times x * sign(w) (s8); pair sums stay
//         below 2 * 127 * 127 < 2^15 so nothing saturates.
//   Q4_0: the nibble q = w + 8 (u8, <= 15) times x, minus 8 * x pair sums
//         computed once per activation block (|difference| <= 2032).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/kernel_table.h"
#include "kernels/x86/intrinsics.h"

namespace redline::kernels::avx2 {
namespace {

constexpr int64_t kQk = 32;
constexpr int64_t kQ8BlockBytes = 34;
constexpr int64_t kQ4BlockBytes = 18;

// 16 ymm registers: decode uses 4 rows; prefill 2 rows x 4 tokens = 8
// accumulators plus the row operands.
constexpr int kDecodeRows = 4;
constexpr int kPrefillRows = 2;
constexpr int kPrefillTokens = 4;

// Decode tiles fetch each row's bytes this far ahead, a line per 64 bytes
// as they go (PrefetchRowAhead): the hardware prefetcher alone left the
// 4-row tiles waiting on memory. kernels_bench MatVec, 2 threads, on
// Zen 5 with this ISA forced: Q8_0 4864 x 896 12.3-12.9 GB/s without,
// 32-39 at 8 KiB ahead, 26-48 at 16 KiB (three rounds of four 39-48);
// 896 x 4864 20 -> 25-26 at 8 KiB, 31-41 at 16; Q4_0 4864 x 896 9.5 ->
// 20-28 at either (its unpacking, not memory, then bounds it: 27 GB/s on
// an L2-resident matrix). 32 KiB measured no better than 16.
constexpr int64_t kDecodeAheadBytes = 16384;

// A decode tile reading `bytes` of a row at p fetches the lines of those
// bytes kDecodeAheadBytes on into L1.
inline void PrefetchRowAhead(const uint8_t* p, int64_t bytes) {
  for (int64_t i = 0; i < bytes; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kDecodeAheadBytes + i),
                 _MM_HINT_T0);
  }
}

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HalfToFloat(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

// Activations for F16 weights (bit-identical to ref's RoundF16: F16C
// rounds to nearest even; min/max with the bound first keep NaN). The tail
// goes through zero-padded copies (no shared scalar code in an ISA unit:
// x86/intrinsics.h).
void RoundF16(const float* x, int64_t n, float* rounded, uint16_t* bits) {
  const __m256 hi = _mm256_set1_ps(kF16Max);
  const __m256 lo = _mm256_set1_ps(-kF16Max);
  auto round8 = [&](const float* in, float* out, uint16_t* out_bits) {
    const __m256 v = _mm256_max_ps(lo, _mm256_min_ps(hi, _mm256_loadu_ps(in)));
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out_bits), h);
    _mm256_storeu_ps(out, _mm256_cvtph_ps(h));
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) round8(x + i, rounded + i, bits + i);
  if (i < n) {
    const auto rem = static_cast<size_t>(n - i);
    alignas(32) float in[8] = {};
    alignas(32) float out[8];
    alignas(16) uint16_t out_bits[8];
    std::memcpy(in, x + i, rem * sizeof(float));
    round8(in, out, out_bits);
    std::memcpy(rounded + i, out, rem * sizeof(float));
    std::memcpy(bits + i, out_bits, rem * sizeof(uint16_t));
  }
}

// ---------------------------------------------------------------------------
// Activation quantization (bit-identical to ref::QuantizeQ8Activations).

void QuantizeQ8(const float* x, int64_t cols, int8_t* qs, float* d) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / kQk; ++b) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + b * kQk + 8 * j);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[j]));
    }
    // As ggml's x86 quantizer (see ref/matmul.cc): x * (127 / amax), half to
    // even.
    const float max = HMax(amax);
    const float scale = max / 127.0f;
    const float inv = max != 0.0f ? 127.0f / max : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) {
      q[j] = _mm256_cvtps_epi32(
          _mm256_round_ps(_mm256_mul_ps(v[j], vinv),
                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // Pack 4 x 8 int32 to 32 int8; packs work per 128-bit lane, so undo the
    // lane interleave with a final permute.
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p = _mm256_packs_epi16(p01, p23);
    const __m256i ordered = _mm256_permutevar8x32_epi32(
        p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * kQk), ordered);
    d[b] = _cvtsh_ss(_cvtss_sh(scale, _MM_FROUND_TO_NEAREST_INT));
  }
}

// ---------------------------------------------------------------------------
// Quantized weights.

// Sum over pairs of u8 x s8 products, widened to 8 lanes of s32.
inline __m256i MaddPairsToI32(__m256i s16) {
  return _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
}

template <DType kType, int R, int T>
void QuantTile(const MatMulArgs& a, int64_t r0, int64_t t0) {
  constexpr int64_t kBlockBytes =
      kType == DType::kQ8_0 ? kQ8BlockBytes : kQ4BlockBytes;
  const int64_t n_blocks = a.cols / kQk;
  const uint8_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.row_bytes;
  const int8_t* xq[T];
  const float* xd[T];
  for (int t = 0; t < T; ++t) {
    xq[t] = a.xq.qs + (t0 + t) * a.xq.qs_stride;
    xd[t] = a.xq.d + (t0 + t) * a.xq.d_stride;
  }
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256i wq[R];
    float dw[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = w[r] + b * kBlockBytes;
      if constexpr (T == 1) PrefetchRowAhead(block, kBlockBytes);
      dw[r] = HalfToFloat(block);
      if constexpr (kType == DType::kQ8_0) {
        wq[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
      } else {
        const __m128i raw =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
        wq[r] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw),
                                 _mm256_set1_epi8(0x0f));
      }
    }
    // For Q8_0 keep |w| next to w (w is still needed for the signs).
    __m256i wabs[R];
    if constexpr (kType == DType::kQ8_0) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) wabs[r] = _mm256_sign_epi8(wq[r], wq[r]);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i xv =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(xq[t] + b * kQk));
      const float dx = xd[t][b];
      __m256i corr = _mm256_setzero_si256();
      if constexpr (kType == DType::kQ4_0)
        corr = _mm256_maddubs_epi16(_mm256_set1_epi8(8), xv);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m256i s16;
        if constexpr (kType == DType::kQ8_0) {
          s16 = _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(xv, wq[r]));
        } else {
          s16 = _mm256_sub_epi16(_mm256_maddubs_epi16(wq[r], xv), corr);
        }
        const __m256 dot = _mm256_cvtepi32_ps(MaddPairsToI32(s16));
        acc[r][t] = _mm256_fmadd_ps(dot, _mm256_set1_ps(dw[r] * dx), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      a.y[(t0 + t) * a.y_stride + r0 + r] = HSum(acc[r][t]);
  }
}

// ---------------------------------------------------------------------------
// Float weights: 8 columns per step, converted to f32, FMA.

template <DType kType>
inline __m256 LoadWeights8(const uint8_t* p) {
  if constexpr (kType == DType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (kType == DType::kF16) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    const __m256i wide = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
}

template <DType kType, int R, int T>
void FloatTile(const MatMulArgs& a, int64_t r0, int64_t t0) {
  constexpr int64_t kElemBytes = kType == DType::kF32 ? 4 : 2;
  const uint8_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.row_bytes;
  const float* x[T];
  for (int t = 0; t < T; ++t) x[t] = a.x + (t0 + t) * a.x_stride;
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  auto step = [&](const uint8_t* const* wp, const float* const* xp) {
    __m256 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = LoadWeights8<kType>(wp[r]);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(xp[t]);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  };
  int64_t c = 0;
  for (; c + 8 <= a.cols; c += 8) {
    const uint8_t* wp[R];
    const float* xp[T];
    for (int r = 0; r < R; ++r) wp[r] = w[r] + c * kElemBytes;
    if constexpr (T == 1) {
      // One line per row every 64 bytes.
      if (c * kElemBytes % 64 == 0) {
        for (int r = 0; r < R; ++r) PrefetchRowAhead(wp[r], 1);
      }
    }
    for (int t = 0; t < T; ++t) xp[t] = x[t] + c;
    step(wp, xp);
  }
  if (c < a.cols) {
    // Last partial step from zero-padded copies.
    const int64_t rem = a.cols - c;
    alignas(32) uint8_t wbuf[R][32] = {};
    alignas(32) float xbuf[T][8] = {};
    const uint8_t* wp[R];
    const float* xp[T];
    for (int r = 0; r < R; ++r) {
      std::memcpy(wbuf[r], w[r] + c * kElemBytes,
                  static_cast<size_t>(rem * kElemBytes));
      wp[r] = wbuf[r];
    }
    for (int t = 0; t < T; ++t) {
      std::memcpy(xbuf[t], x[t] + c, static_cast<size_t>(rem) * sizeof(float));
      xp[t] = xbuf[t];
    }
    step(wp, xp);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      a.y[(t0 + t) * a.y_stride + r0 + r] = HSum(acc[r][t]);
  }
}

// ---------------------------------------------------------------------------
// The other block types (x86/unpacked_matmul.inc), on vpmaddubsw + vpmaddwd.

inline __m256i DotU8S8(__m256i u, __m256i s) {
  return MaddPairsToI32(_mm256_maddubs_epi16(u, s));
}

constexpr int kDotU8Max = 127;

constexpr int kUnpackedPrefillRows = 2;

#include "kernels/x86/unpacked_matmul.inc"

// ---------------------------------------------------------------------------
// Row-range drivers.

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
void MatMulRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.n_tokens == 1) {
    int64_t r = row_begin;
    for (; r + kDecodeRows <= row_end; r += kDecodeRows)
      Tile<kType, kDecodeRows, 1>(a, r, 0);
    for (; r < row_end; ++r) Tile<kType, 1, 1>(a, r, 0);
    return;
  }
  static_assert(kPrefillRows == 2);
  for (int64_t r = row_begin; r < row_end; r += kPrefillRows) {
    const bool two = r + 1 < row_end;
    for (int64_t t = 0; t < a.n_tokens; t += kPrefillTokens) {
      const int64_t nt = Min(kPrefillTokens, a.n_tokens - t);
      if (two) {
        TileTokens<kType, 2>(a, r, t, nt);
      } else {
        TileTokens<kType, 1>(a, r, t, nt);
      }
    }
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
  FillUnpackedTable(table);
  FillPackedMatMulTable(table);
  FillKPackedMatMulTable(table);
}

}  // namespace redline::kernels::avx2
