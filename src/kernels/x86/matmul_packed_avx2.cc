// AVX2 products on packed Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1, F16 and
// BF16 weights (layout: packed.h). Compiled with AVX2 + FMA + F16C flags;
// reached only through the kernel table. matmul_packed_avxvnni.cc compiles
// this file again with AVX-VNNI (__AVXVNNI__), into namespace avxvnni: there
// the block dots are vpdpbusd chains on the stored unsigned values (below).
//
// Why panels on AVX2 too: the row layout's AVX2 tiles spend, per row, block
// and token, a scalar scale product, a broadcast and (at the end) a
// horizontal sum, and unpack every row apart; Q4_0 decode there was bound
// by that work (27 GB/s from L2 on Zen 5), and Q4_0 and F16 prefill ran
// 0.90x and 0.76x llama.cpp's AVX2 build. In a panel, one 32-byte half of
// a 64-byte group is 8 rows' 4 weights, so one vpmaddubsw against 4
// broadcast activation bytes advances 8 rows' dot products at once, and a
// block's 8 scales are one conversion.
//
// The block types: a tile is one half panel (8 rows, one ymm lane each) by
// up to kTileTokens tokens; decode reads whole panels, several in step. The
// integer block dots are exact (HalfDot and AddBlock say how each type
// avoids vpmaddubsw's saturation). Then, per block in order, the
// reference's float operations (AddBlock, ref/matmul.cc): outputs are
// bit-identical to it, and to the AVX-512 products, for any token count.
// With AVX-VNNI a block dot is vpdpbusd of the stored u8 (the weight plus
// PackedBlock::kOffset; IQ4_NL's table value plus 128) against the
// activation bytes, each chain starting at -kOffset x the activation sum,
// as on AVX-512: the same exact integers, so the same bits.
//
// F16/BF16: every output is one f32 FMA chain over the columns in column
// order from zero, as in the AVX-512 panel products
// (matmul_half_packed_avx512.cc): decode and batches of any size give the
// same bits, and the same bits as the AVX-512 panels.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/blocks.h"
#include "kernels/kernel_table.h"
#include "kernels/packed.h"
#include "kernels/x86/intrinsics.h"

#if defined(__AVXVNNI__)
namespace redline::kernels::avxvnni {
#else
namespace redline::kernels::avx2 {
#endif
namespace {

#include "kernels/x86/avx2_half_panels.inc"
#include "kernels/x86/panel_streams.inc"

constexpr int64_t kQk = 32;

// ---------------------------------------------------------------------------
// Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0 and Q5_1.

constexpr int kGroups = 8;  // 4-byte activation groups per block
// Tokens per tile: the operands of one half block + 4 accumulators fill
// the 16 ymm registers (Q8_0's two operand sets do not fit: the compiler
// keeps part of them in L1 and reads them back as memory operands).
constexpr int kTileTokens = 4;
// Software prefetch distance of a panel stream: decode reads
// kDecodeStreams panels in step, prefetch kStreamAheadBytes ahead each;
// batches read one panel at a time, kLoneAheadBytes ahead.
constexpr int kDecodeStreams = 2;
constexpr int64_t kStreamAheadBytes = 4096;
constexpr int64_t kLoneAheadBytes = 8192;

template <DType kType>
constexpr int64_t kBlockBytes = PackedBlock<kType>::kBytes;
// Types whose operands are signed weights w with u = |w| (HalfBlock);
// none with AVX-VNNI.
template <DType kType>
constexpr bool kSigned =
    !kVnni && (kType == DType::kQ8_0 || kType == DType::kIQ4_NL);

// Fetches the lines that start within [p, p + bytes), kAhead bytes on.
template <int64_t kAhead>
inline void PrefetchSpan(const uint8_t* p, int64_t bytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) + kAhead;
  for (uintptr_t line = (at + 63) & ~uintptr_t{63}; line < at + bytes;
       line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
  }
}

// Half h of a panel block as vpmaddubsw operands; operand g pairs with
// activation bytes 4g..4g+3.
//   Q4_0: u[g] the nibbles q = w + 8 (low nibbles of the 4 stored groups
//         are elements 4g.., high nibbles 16 + 4g..).
//   Q5_0: u[g] the 5-bit q = w + 16: Q4_0's nibbles, 16 added where the
//         fifth bit is set.
//   Q4_1: u[g] the nibbles q (w = d q + m), m the 8 mins as f32.
//   Q5_1: u[g] the 5-bit q as Q5_0's (w = d q + m), m the 8 mins as f32.
//   Q8_0: w[g] the signed weights (stored w + 128, flipped back), u[g] = |w|
//         (<= 128 as u8), for the sign trick: |w| x (x * sign(w)). With
//         AVX-VNNI u[g] the stored w + 128.
//   IQ4_NL: w[g] the table values of the nibbles (one vpshufb), u[g] = |w|
//         (<= 127), for the same trick. With AVX-VNNI u[g] the table
//         values plus 128.
struct Unsigned {
  __m256i u[kGroups];
};
struct Signed {
  __m256i u[kGroups];
  __m256i w[kGroups];
};
struct WithMin {
  __m256i u[kGroups];
  __m256 m;
};
template <DType kType>
using HalfBlock =
    std::conditional_t<kSigned<kType>, Signed,
                       std::conditional_t<kHasMin<kType>, WithMin, Unsigned>>;

template <DType kType>
inline void LoadHalf(const uint8_t* block, int h, HalfBlock<kType>* op) {
  if constexpr (kType == DType::kQ8_0 && kVnni) {
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) {
      op->u[g] = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(block + 64 * g + 32 * h));
    }
  } else if constexpr (kType == DType::kQ8_0) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) {
      op->w[g] = _mm256_xor_si256(
          _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(block + 64 * g + 32 * h)),
          flip);
      op->u[g] = _mm256_abs_epi8(op->w[g]);
    }
  } else {
    const __m256i mask = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int g = 0; g < kGroups / 2; ++g) {
      const __m256i q = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(block + 64 * g + 32 * h));
      op->u[g] = _mm256_and_si256(q, mask);
      op->u[g + 4] = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
    }
    if constexpr (kType == DType::kIQ4_NL && kVnni) {
      const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(
          reinterpret_cast<const __m128i*>(kIq4NlValuesU8.data())));
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g)
        op->u[g] = _mm256_shuffle_epi8(table, op->u[g]);
    } else if constexpr (kType == DType::kIQ4_NL) {
      const __m256i table = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) {
        op->w[g] = _mm256_shuffle_epi8(table, op->u[g]);
        op->u[g] = _mm256_abs_epi8(op->w[g]);
      }
    }
    if constexpr (kFiveBits<kType>) {
      // Bits 32h.. of mask g are one per byte of the half operand
      // (packed.h): each byte takes its mask byte (a shuffle within the
      // 128-bit lanes), tests its own bit, and becomes 16 where it is set.
      const uint8_t* masks = block + PackedBlock<kType>::kQh;
      const __m256i spread =
          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                           2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
      const __m256i bit =
          _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
      const __m256i sixteen = _mm256_set1_epi8(16);
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) {
        int32_t m;
        std::memcpy(&m, masks + 8 * g + 4 * h, sizeof(m));
        const __m256i sel = _mm256_and_si256(
            _mm256_shuffle_epi8(_mm256_set1_epi32(m), spread), bit);
        op->u[g] = _mm256_or_si256(
            op->u[g], _mm256_and_si256(_mm256_cmpeq_epi8(sel, bit), sixteen));
      }
    }
    if constexpr (kHasMin<kType>) {
      op->m = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
          block + PackedBlock<kType>::kMin + 16 * h)));
    }
  }
}

// Lane r: the exact integer dot of row r of the half panel with the
// activation block x (xs: its sum, for Q4_0's offset).
template <DType kType>
inline __m256i HalfDot(const HalfBlock<kType>& op, const int8_t* x,
                       int32_t xs) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kVnni) {
    // Two chains (even and odd groups), the first from -kOffset x sum(x).
    __m256i a = _mm256_set1_epi32(-PackedBlock<kType>::kOffset * xs);
    __m256i b = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; g += 2) {
      a = DotU8(a, op.u[g], Broadcast4(x + 4 * g));
      b = DotU8(b, op.u[g + 1], Broadcast4(x + 4 * g + 4));
    }
    return _mm256_add_epi32(a, b);
  } else if constexpr (kType == DType::kQ8_0) {
    // Pair sums reach 2 x 128 x 127, so each widens to s32 alone.
    __m256i a = _mm256_setzero_si256();
    __m256i b = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; g += 2) {
      a = _mm256_add_epi32(
          a, _mm256_madd_epi16(
                 _mm256_maddubs_epi16(
                     op.u[g], _mm256_sign_epi8(Broadcast4(x + 4 * g), op.w[g])),
                 ones));
      b = _mm256_add_epi32(
          b, _mm256_madd_epi16(
                 _mm256_maddubs_epi16(
                     op.u[g + 1],
                     _mm256_sign_epi8(Broadcast4(x + 4 * g + 4), op.w[g + 1])),
                 ones));
    }
    return _mm256_add_epi32(a, b);
  } else {
    // Pair sums <= 3810: two s16 chains of 4 groups (<= 15240) add
    // without saturating; the lane starts from -8 x sum(x).
    __m256i a = _mm256_maddubs_epi16(op.u[0], Broadcast4(x));
    __m256i b = _mm256_maddubs_epi16(op.u[1], Broadcast4(x + 4));
#pragma GCC unroll 3
    for (int g = 2; g < kGroups; g += 2) {
      a = _mm256_add_epi16(
          a, _mm256_maddubs_epi16(op.u[g], Broadcast4(x + 4 * g)));
      b = _mm256_add_epi16(
          b, _mm256_maddubs_epi16(op.u[g + 1], Broadcast4(x + 4 * g + 4)));
    }
    return _mm256_add_epi32(
        _mm256_madd_epi16(_mm256_add_epi16(a, b), ones),
        _mm256_set1_epi32(-PackedBlock<kType>::kOffset * xs));
  }
}

// The 8 binary16 scales of half h of a block, as f32.
template <DType kType>
inline __m256 HalfScales(const uint8_t* block, int h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
      block + PackedBlock<kType>::kQuantBytes + 16 * h)));
}

// One block of a half panel added to acc, as the reference does
// (ref/matmul.cc): Q8_0/Q4_0 fma(float(dot), d_w * d_x, acc); Q4_1,
// IQ4_NL, Q5_0 and Q5_1 scale each 16-element half's exact dot by d_w
// apart and add them, Q4_1 and Q5_1 then add m_w x each half's activation
// sum (those two products added first), and take fma(that, d_x, acc)
// (MatMulUnpackedRows). x: the activation block, xs its sum, s16 its two
// 16-element sums; wd the half panel's 8 scales.
template <DType kType>
inline __m256 AddBlock(const HalfBlock<kType>& op, const int8_t* x, int32_t xs,
                       const int32_t* s16, __m256 wd, float xd, __m256 acc) {
  if constexpr (kHalfScaled<kType>) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i dot_lo, dot_hi;
    if constexpr (kVnni) {
      // Each half's chain from -kOffset x its activation sum.
      constexpr int32_t kOffset = PackedBlock<kType>::kOffset;
      dot_lo = _mm256_set1_epi32(-kOffset * s16[0]);
      dot_hi = _mm256_set1_epi32(-kOffset * s16[1]);
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        dot_lo = DotU8(dot_lo, op.u[g], Broadcast4(x + 4 * g));
        dot_hi = DotU8(dot_hi, op.u[g + 4], Broadcast4(x + 16 + 4 * g));
      }
    } else if constexpr (kSigned<kType>) {
      // IQ4_NL: pair sums reach 2 x 127 x 127, so each widens to s32 alone.
      dot_lo = _mm256_setzero_si256();
      dot_hi = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        dot_lo = _mm256_add_epi32(
            dot_lo,
            _mm256_madd_epi16(
                _mm256_maddubs_epi16(
                    op.u[g], _mm256_sign_epi8(Broadcast4(x + 4 * g), op.w[g])),
                ones));
        dot_hi = _mm256_add_epi32(
            dot_hi,
            _mm256_madd_epi16(
                _mm256_maddubs_epi16(
                    op.u[g + 4],
                    _mm256_sign_epi8(Broadcast4(x + 16 + 4 * g), op.w[g + 4])),
                ones));
      }
    } else {
      // Pair sums <= 2 x 31 x 127: a half's four groups add in s16
      // (<= 31496).
      constexpr int32_t kOffset = PackedBlock<kType>::kOffset;
      __m256i lo = _mm256_maddubs_epi16(op.u[0], Broadcast4(x));
      __m256i hi = _mm256_maddubs_epi16(op.u[4], Broadcast4(x + 16));
#pragma GCC unroll 3
      for (int g = 1; g < 4; ++g) {
        lo = _mm256_add_epi16(
            lo, _mm256_maddubs_epi16(op.u[g], Broadcast4(x + 4 * g)));
        hi = _mm256_add_epi16(
            hi, _mm256_maddubs_epi16(op.u[g + 4], Broadcast4(x + 16 + 4 * g)));
      }
      dot_lo = _mm256_add_epi32(_mm256_madd_epi16(lo, ones),
                                _mm256_set1_epi32(-kOffset * s16[0]));
      dot_hi = _mm256_add_epi32(_mm256_madd_epi16(hi, ones),
                                _mm256_set1_epi32(-kOffset * s16[1]));
    }
    __m256 block = _mm256_add_ps(_mm256_mul_ps(wd, _mm256_cvtepi32_ps(dot_lo)),
                                 _mm256_mul_ps(wd, _mm256_cvtepi32_ps(dot_hi)));
    if constexpr (kHasMin<kType>) {
      block = _mm256_add_ps(
          block,
          _mm256_add_ps(
              _mm256_mul_ps(op.m, _mm256_set1_ps(static_cast<float>(s16[0]))),
              _mm256_mul_ps(op.m, _mm256_set1_ps(static_cast<float>(s16[1])))));
    }
    return _mm256_fmadd_ps(block, _mm256_set1_ps(xd), acc);
  } else {
    const __m256i dot = HalfDot<kType>(op, x, xs);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot),
                           _mm256_mul_ps(wd, _mm256_set1_ps(xd)), acc);
  }
}

// y[t0 + t, r0 + r] for t < T and the first n_rows rows (1-8) of half h
// of the panel. prefetch: also fetch the panel ahead (the first pass over
// it; later passes find it in cache).
template <DType kType, int T>
void HalfTile(const MatMulArgs& a, const uint8_t* panel, int h, int64_t r0,
              int n_rows, int64_t t0, bool prefetch) {
  const int64_t n_blocks = a.cols / kQk;
  const TileTokens<T> x(a.xq, t0);
  __m256 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = panel + b * kBlockBytes<kType>;
    if (prefetch) PrefetchSpan<kLoneAheadBytes>(block, kBlockBytes<kType>);
    HalfBlock<kType> op;
    LoadHalf<kType>(block, h, &op);
    const __m256 wd = HalfScales<kType>(block, h);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      acc[t] = AddBlock<kType>(op, x.qs[t] + b * kQk, x.s[t][b],
                               x.s16[t] + 2 * b, wd, x.d[t][b], acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
    StoreRows(a.y + (t0 + t) * a.y_stride + r0, n_rows, acc[t]);
}

// Decode of kDecodeStreams whole panels apart in memory (rows r0[s] of
// panels[s]), block by block in step: per lane the same operations in the
// same order as HalfTile<kType, 1>.
template <DType kType>
void PanelsDecode(const MatMulArgs& a,
                  const uint8_t* const (&panels)[kDecodeStreams],
                  const int64_t (&r0)[kDecodeStreams]) {
  const int64_t n_blocks = a.cols / kQk;
  __m256 acc[kDecodeStreams][2];
#pragma GCC unroll 4
  for (int s = 0; s < kDecodeStreams; ++s) {
    acc[s][0] = _mm256_setzero_ps();
    acc[s][1] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* x = a.xq.qs + b * kQk;
#pragma GCC unroll 4
    for (int s = 0; s < kDecodeStreams; ++s) {
      const uint8_t* block = panels[s] + b * kBlockBytes<kType>;
      PrefetchSpan<kStreamAheadBytes>(block, kBlockBytes<kType>);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        HalfBlock<kType> op;
        LoadHalf<kType>(block, h, &op);
        acc[s][h] =
            AddBlock<kType>(op, x, a.xq.s[b], a.xq.s16 + 2 * b,
                            HalfScales<kType>(block, h), a.xq.d[b], acc[s][h]);
      }
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < kDecodeStreams; ++s) {
    _mm256_storeu_ps(a.y + r0[s], acc[s][0]);
    _mm256_storeu_ps(a.y + r0[s] + kHalfRows, acc[s][1]);
  }
}

template <DType kType>
void MatMulPackedQuant(const MatMulArgs& a, int64_t row_begin,
                       int64_t row_end) {
  const int64_t panel_bytes = a.cols / kQk * kBlockBytes<kType>;
  // Decode reads the range's whole panels as kDecodeStreams streams in
  // step; the panels left over go below.
  if (a.n_tokens == 1) {
    row_begin = PanelStreams<kDecodeStreams>(
        row_begin, row_end, [&](const int64_t(&r0)[kDecodeStreams]) {
          const uint8_t* panels[kDecodeStreams];
          for (int s = 0; s < kDecodeStreams; ++s)
            panels[s] = a.w + r0[s] / kPackRows * panel_bytes;
          PanelsDecode<kType>(a, panels, r0);
        });
  }
  HalfPanelTiles<kTileTokens>(
      a, row_begin, row_end, panel_bytes,
      [&a]<int T>(const uint8_t* panel, int h, int64_t r0, int n_rows,
                  int64_t t0, bool fetch) {
        HalfTile<kType, T>(a, panel, h, r0, n_rows, t0, fetch);
      });
}

// ---------------------------------------------------------------------------
// F16 and BF16.

constexpr int64_t kColumnBytes = kHalfColumnBytes;
// Decode: panels in step (2 ymm chains each: 8 chains cover the FMA
// latency of two pipes), each stream fetched kHalfStreamAheadBytes ahead.
constexpr int kHalfDecodeStreams = 4;
constexpr int64_t kHalfStreamAheadBytes = 2048;
constexpr int64_t kHalfLoneAheadBytes = 8192;
// Batch tiles: one panel (2 ymm) by up to kHalfTileTokens tokens, 12
// accumulators + 2 weight vectors + a broadcast in 16 registers. Batches
// of up to 2 tokens take two panels at a time instead (8 chains).
constexpr int kHalfTileTokens = 6;

// Rows 8h..8h+7 of one panel column as f32.
template <DType kType>
inline __m256 LoadColumnHalf(const uint8_t* column, int h) {
  const __m128i bits =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(column + 16 * h));
  if constexpr (kType == DType::kF16) {
    return _mm256_cvtph_ps(bits);
  } else {
    static_assert(kType == DType::kBF16);
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  }
}

// Stores rows [0, n_rows) of a panel (two ymm) at y.
inline void StorePanel(float* y, int64_t n_rows, const __m256 (&v)[2]) {
  StoreRows(y, static_cast<int>(n_rows < kHalfRows ? n_rows : kHalfRows), v[0]);
  if (n_rows > kHalfRows) {
    StoreRows(
        y + kHalfRows,
        static_cast<int>(n_rows - kHalfRows < kHalfRows ? n_rows - kHalfRows
                                                        : kHalfRows),
        v[1]);
  }
}

// Decode: S panels in step (panel s at w[s], rows r[s] of y, n_rows[s] of
// them stored), each lane one FMA chain over all columns.
template <DType kType, int S, int64_t kAhead>
void HalfPanelsInStep(const MatMulArgs& a, const uint8_t* const (&w)[S],
                      const int64_t (&r)[S], const int64_t (&n_rows)[S]) {
  const float* x = a.x;
  __m256 acc[S][2];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
    acc[s][0] = _mm256_setzero_ps();
    acc[s][1] = _mm256_setzero_ps();
  }
  int64_t c = 0;
  // Two columns per 64-byte line: one prefetch per stream per pair.
  for (; c + 2 <= a.cols; c += 2) {
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      _mm_prefetch(
          reinterpret_cast<const char*>(w[s] + c * kColumnBytes + kAhead),
          _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      const __m256 xb = _mm256_broadcast_ss(x + c + j);
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        const uint8_t* col = w[s] + (c + j) * kColumnBytes;
        acc[s][0] =
            _mm256_fmadd_ps(LoadColumnHalf<kType>(col, 0), xb, acc[s][0]);
        acc[s][1] =
            _mm256_fmadd_ps(LoadColumnHalf<kType>(col, 1), xb, acc[s][1]);
      }
    }
  }
  for (; c < a.cols; ++c) {
    const __m256 xb = _mm256_broadcast_ss(x + c);
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const uint8_t* col = w[s] + c * kColumnBytes;
      acc[s][0] = _mm256_fmadd_ps(LoadColumnHalf<kType>(col, 0), xb, acc[s][0]);
      acc[s][1] = _mm256_fmadd_ps(LoadColumnHalf<kType>(col, 1), xb, acc[s][1]);
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) StorePanel(a.y + r[s], n_rows[s], acc[s]);
}

// The range's whole panels as kHalfDecodeStreams streams in step, then the
// panels left one at a time. Each output's chain is the same either way.
template <DType kType>
void HalfPanelsDecode(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int S = kHalfDecodeStreams;
  const int64_t panel_bytes = a.cols * kColumnBytes;
  const int64_t left =
      PanelStreams<S>(row_begin, row_end, [&](const int64_t(&r)[S]) {
        const uint8_t* w[S];
        int64_t n[S];
        for (int s = 0; s < S; ++s) {
          w[s] = a.w + r[s] / kPackRows * panel_bytes;
          n[s] = kPackRows;
        }
        HalfPanelsInStep<kType, S, kHalfStreamAheadBytes>(a, w, r, n);
      });
  for (int64_t r0 = left; r0 < row_end; r0 += kPackRows) {
    const uint8_t* w[1] = {a.w + r0 / kPackRows * panel_bytes};
    const int64_t r[1] = {r0};
    const int64_t n[1] = {row_end - r0};
    HalfPanelsInStep<kType, 1, kHalfLoneAheadBytes>(a, w, r, n);
  }
}

// y[t0 + t, r0 + 16p + lane] for t < T, p < P (panel p at panel +
// p * panel_bytes, n_rows rows from r0 in all): each the whole chain over
// all columns, the weights converted as they are loaded.
template <DType kType, int P, int T>
void FloatHalfTile(const MatMulArgs& a, const uint8_t* panel,
                   int64_t panel_bytes, int64_t r0, int64_t n_rows,
                   int64_t t0) {
  const float* x[T];
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) x[t] = a.x + (t0 + t) * a.x_stride;
  __m256 acc[P][T][2];
#pragma GCC unroll 2
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      acc[p][t][0] = _mm256_setzero_ps();
      acc[p][t][1] = _mm256_setzero_ps();
    }
  }
  const bool prefetch = t0 == 0;
  for (int64_t c = 0; c < a.cols; ++c) {
    __m256 w[P][2];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      const uint8_t* col = panel + p * panel_bytes + c * kColumnBytes;
      if (prefetch && c % 2 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(col + kHalfLoneAheadBytes),
                     _MM_HINT_T0);
      }
      w[p][0] = LoadColumnHalf<kType>(col, 0);
      w[p][1] = LoadColumnHalf<kType>(col, 1);
    }
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      const __m256 xb = _mm256_broadcast_ss(x[t] + c);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) {
        acc[p][t][0] = _mm256_fmadd_ps(w[p][0], xb, acc[p][t][0]);
        acc[p][t][1] = _mm256_fmadd_ps(w[p][1], xb, acc[p][t][1]);
      }
    }
  }
#pragma GCC unroll 2
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      StorePanel(a.y + (t0 + t) * a.y_stride + r0 + p * kPackRows,
                 n_rows - p * kPackRows, acc[p][t]);
    }
  }
}

template <DType kType, int P>
void HalfTileTokens(const MatMulArgs& a, const uint8_t* panel,
                    int64_t panel_bytes, int64_t r0, int64_t n_rows, int64_t t0,
                    int64_t n_tokens) {
  static_assert(kHalfTileTokens == 6);
  switch (n_tokens) {
    case 1:
      return FloatHalfTile<kType, P, 1>(a, panel, panel_bytes, r0, n_rows, t0);
    case 2:
      return FloatHalfTile<kType, P, 2>(a, panel, panel_bytes, r0, n_rows, t0);
    case 3:
      return FloatHalfTile<kType, P, 3>(a, panel, panel_bytes, r0, n_rows, t0);
    case 4:
      return FloatHalfTile<kType, P, 4>(a, panel, panel_bytes, r0, n_rows, t0);
    case 5:
      return FloatHalfTile<kType, P, 5>(a, panel, panel_bytes, r0, n_rows, t0);
    default:
      return FloatHalfTile<kType, P, 6>(a, panel, panel_bytes, r0, n_rows, t0);
  }
}

// Batches: up to 2 tokens two panels at a time; more one panel at a time,
// the tokens in tiles of equal size (each >= 3 tokens, so >= 6 chains)
// of at most kHalfTileTokens. The chains are the same whatever the tiles.
template <DType kType>
void HalfPanelsBatch(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t panel_bytes = a.cols * kColumnBytes;
  const int64_t first = row_begin / kPackRows;
  const int64_t panels = (row_end - row_begin + kPackRows - 1) / kPackRows;
  if (a.n_tokens <= 2) {
    int64_t p = 0;
    for (; p + 2 <= panels; p += 2) {
      HalfTileTokens<kType, 2>(a, a.w + (first + p) * panel_bytes, panel_bytes,
                               row_begin + p * kPackRows,
                               row_end - row_begin - p * kPackRows, 0,
                               a.n_tokens);
    }
    if (p < panels) {
      HalfTileTokens<kType, 1>(a, a.w + (first + p) * panel_bytes, panel_bytes,
                               row_begin + p * kPackRows,
                               row_end - row_begin - p * kPackRows, 0,
                               a.n_tokens);
    }
    return;
  }
  const int64_t tiles = (a.n_tokens + kHalfTileTokens - 1) / kHalfTileTokens;
  const int64_t base = a.n_tokens / tiles;
  const int64_t bigger = a.n_tokens % tiles;  // tiles of base + 1 tokens
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t r0 = row_begin + p * kPackRows;
    int64_t t0 = 0;
    for (int64_t i = 0; i < tiles; ++i) {
      const int64_t n = base + (i < bigger ? 1 : 0);
      HalfTileTokens<kType, 1>(a, a.w + (first + p) * panel_bytes, panel_bytes,
                               r0, row_end - r0, t0, n);
      t0 += n;
    }
  }
}

template <DType kType>
void MatMulPackedHalf(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.n_tokens == 1) return HalfPanelsDecode<kType>(a, row_begin, row_end);
  HalfPanelsBatch<kType>(a, row_begin, row_end);
}

}  // namespace

void FillPackedMatMulTable(KernelTable* table) {
  table->matmul_packed[static_cast<int>(DType::kQ8_0)] =
      &MatMulPackedQuant<DType::kQ8_0>;
  table->matmul_packed[static_cast<int>(DType::kQ4_0)] =
      &MatMulPackedQuant<DType::kQ4_0>;
  table->matmul_packed[static_cast<int>(DType::kQ5_0)] =
      &MatMulPackedQuant<DType::kQ5_0>;
  table->matmul_packed[static_cast<int>(DType::kQ5_1)] =
      &MatMulPackedQuant<DType::kQ5_1>;
  table->matmul_packed[static_cast<int>(DType::kQ4_1)] =
      &MatMulPackedQuant<DType::kQ4_1>;
  table->matmul_packed[static_cast<int>(DType::kIQ4_NL)] =
      &MatMulPackedQuant<DType::kIQ4_NL>;
  table->matmul_packed[static_cast<int>(DType::kF16)] =
      &MatMulPackedHalf<DType::kF16>;
  table->matmul_packed[static_cast<int>(DType::kBF16)] =
      &MatMulPackedHalf<DType::kBF16>;
}

#if defined(__AVXVNNI__)
}  // namespace redline::kernels::avxvnni
#else
}  // namespace redline::kernels::avx2
#endif
