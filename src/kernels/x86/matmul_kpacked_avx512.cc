// AVX-512 VNNI products on packed Q2_K/Q3_K/Q4_K/Q5_K/Q6_K weights (layout:
// packed.h). Compiled with AVX-512 flags; reached only through the kernel
// table.
//
// Why a packed layout: in the file's row layout every super-block of one
// row is unpacked (shifts, masks, scale bit-fiddling) into a buffer before
// its dot products, and each 32-element dot ends in a per-row reduction. In
// a panel, one 32-element sub-block of 16 rows is 8 operands of 64 bytes
// ([16 rows][4 bytes]); vpdpbusd of operand g against the 4 broadcast
// activation bytes 4g..4g+3 advances all 16 rows at once, so a sub-block is
// 8 loads, a mask or shift each, and 8 vpdpbusd per token, with no shuffles
// and no horizontal sums until the very end.
//
// Arithmetic per panel row (lane) and 32-element activation block b of
// super-block i, sub-block k (b = 8i + k), all integer terms exact:
//   Q4_K: dot = sum(q * x) (q the 4-bit value, u8 against s8 x);
//         sb += float(sc_k * dot) * d_x,b;  mn += m_k * (d_x,b * xsum_b);
//         per super-block acc += d * sb - dmin * mn.
//   Q5_K: as Q4_K with q the 5-bit value (nibble | fifth bit << 4);
//         |sc_k * dot| <= 63 x 32 x 31 x 127 < 2^23, exact as a float.
//   Q6_K: q + 32 = (ql | qh << 4) in [0, 63] (u8); per half h of 16
//         elements dot_h starts at -32 * xsum16 (Q8Activations::s16) so
//         it is sum((q - 32) * x) exactly; isum = sc_2k * dot_0 +
//         sc_2k+1 * dot_1 (int32, |isum| < 2^26);
//         sb += float(isum) * d_x,b;  per super-block acc += d * sb.
//   Q3_K: as Q6_K with q + 4 = (2 bits of qs | the hmask bit << 2) in
//         [0, 7], each dot_h starting at -4 * xsum16, the scales the 6-bit
//         ones minus 32 (|isum| < 2^19).
//   Q2_K: as Q3_K with q = the 2 bits of qs in [0, 3] and no offset, the
//         4-bit scales and mins of each 16-element half:
//         misum = m_2k * xsum16_0 + m_2k+1 * xsum16_1 (int32);
//         mn += float(misum) * d_x,b;  per super-block
//         acc += d * sb - dmin * mn.
// The reference (ref/matmul.cc on the row layout) sums the same exact
// integer terms with the scales applied in another order, so results agree
// to f32 rounding (kernels test: 1e-5 of the sum of absolute terms).
#include <cstdint>
#include <cstring>

#include "kernels/kernel_table.h"
#include "kernels/packed.h"
#include "kernels/x86/intrinsics.h"

namespace redline::kernels::avx512 {
namespace {

constexpr int64_t kQk = 32;
constexpr int kGroups = 8;         // 4-byte groups per 32-element sub-block
constexpr int kPrefillTokens = 4;  // tokens per tile when n_tokens > 1
// Prefill tiles fetch the weights this many super-blocks ahead (the first
// tile pass over a panel): without it a tile of 2-9 tokens waited on memory
// instead of overlapping its dot products (9 tokens cost 4x a decode step
// on an 8192 x 2048 Q4_K matrix, 1.8x with it; 2 measured better than 1).
constexpr int64_t kAheadSupers = 2;

template <DType kType>
constexpr int64_t kSuperBytes = PackedBlock<kType>::kBytes;

inline __m512i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

inline __m512i Load64(const uint8_t* p) { return _mm512_loadu_si512(p); }

// Q3_K's hmask lane of group g (Q2_K has none: zero).
template <DType kType>
inline __m512i HmaskLane(const uint8_t* block, int g) {
  if constexpr (kType == DType::kQ3_K) {
    return Load64(block + PackedBlock<DType::kQ3_K>::kQh + g * 64);
  } else {
    return _mm512_setzero_si512();
  }
}

// Q2_K's or Q3_K's u8 operand of sub-block 4n + j from the group's qs and
// hmask lanes: bits 2j, 2j + 1 of qs, and Q3_K's hmask bit 4n + j as bit
// 2. (The 16-bit shifts carry no bit that the masks keep across a byte
// boundary: qs by at most 6, hmask by at most 5.)
template <DType kType>
inline __m512i LowBitsValue(__m512i qs, __m512i hm, int n, int j) {
  const __m512i low = _mm512_and_si512(
      j == 0 ? qs : _mm512_srli_epi16(qs, 2 * j), _mm512_set1_epi8(0x03));
  if constexpr (kType == DType::kQ2_K) {
    return low;
  } else {
    const int bit = 4 * n + j;
    const __m512i at2 = bit > 2    ? _mm512_srli_epi16(hm, bit - 2)
                        : bit == 2 ? hm
                                   : _mm512_slli_epi16(hm, 2 - bit);
    // low | (at2 & 0x04)
    return _mm512_ternarylogic_epi32(low, at2, _mm512_set1_epi8(0x04), 0xf8);
  }
}

// nibble | (bit k of each byte of qh) << 4: Q5_K's value of sub-block k
// (k a constant after unrolling). The 16-bit shifts move no bit that the
// 0x10 mask keeps across a byte boundary, since |4 - k| <= 4.
inline __m512i WithFifthBit(__m512i nibble, __m512i qh, int k) {
  const __m512i at4 = k < 4    ? _mm512_slli_epi16(qh, 4 - k)
                      : k == 4 ? qh
                               : _mm512_srli_epi16(qh, k - 4);
  // nibble | (at4 & 0x10)
  return _mm512_ternarylogic_epi32(nibble, at4, _mm512_set1_epi8(0x10), 0xf8);
}

// The u8 operand of group g of sub-block k of a packed super-block: lane r
// holds row r's 4 values for elements 32k + 4g .. 32k + 4g + 3 (Q6_K: the
// value + 32). k and g are constants after unrolling.
template <DType kType>
inline __m512i WeightGroup(const uint8_t* block, int k, int g) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  if constexpr (kScaleMin<kType>) {
    const __m512i raw = Load64(block + ((k / 2) * kGroups + g) * 64);
    const __m512i nibble =
        k % 2 == 0 ? _mm512_and_si512(raw, low4)
                   : _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
    if constexpr (kType == DType::kQ4_K) return nibble;
    return WithFifthBit(
        nibble, Load64(block + PackedBlock<DType::kQ5_K>::kQh + g * 64), k);
  } else if constexpr (kLowBit<kType>) {
    const int n = k / 4;
    const __m512i qs = Load64(block + (n * kGroups + g) * 64);
    return LowBitsValue<kType>(qs, HmaskLane<kType>(block, g), n, k % 4);
  } else {
    static_assert(kType == DType::kQ6_K);
    const int n = k / 4, kk = k % 4;
    const __m512i ql = Load64(block + ((n * 2 + kk % 2) * kGroups + g) * 64);
    const __m512i qh =
        Load64(block + PackedBlock<DType::kQ6_K>::kQh + (n * kGroups + g) * 64);
    const __m512i low = kk < 2
                            ? _mm512_and_si512(ql, low4)
                            : _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4);
    // Bits 2kk, 2kk + 1 of qh to bits 4, 5.
    const __m512i shifted = kk == 0   ? _mm512_slli_epi16(qh, 4)
                            : kk == 1 ? _mm512_slli_epi16(qh, 2)
                            : kk == 2 ? qh
                                      : _mm512_srli_epi16(qh, 2);
    // low | (shifted & 0x30)
    return _mm512_ternarylogic_epi32(low, shifted, _mm512_set1_epi8(0x30),
                                     0xf8);
  }
}

// Sub-block k's terms for the 16-element scale types (Q6_K, Q3_K, Q2_K):
// dot[h] the exact dot of half h, xs16 the two halves' activation sums,
// dx the block's activation scale.
template <DType kType>
inline void AddHalves(const uint8_t* block, int k, const __m512i (&dot)[2],
                      const int32_t* xs16, __m512 dx, __m512* sb, __m512* mn) {
  using Block = PackedBlock<kType>;
  const auto scales = [&](int s) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(
        block + Block::kScales + s * kPackRows));
  };
  if constexpr (kType == DType::kQ2_K) {
    const __m512i raw0 = _mm512_cvtepu8_epi32(scales(2 * k));
    const __m512i raw1 = _mm512_cvtepu8_epi32(scales(2 * k + 1));
    const __m512i low4 = _mm512_set1_epi32(0x0f);
    const __m512i isum = _mm512_add_epi32(
        _mm512_mullo_epi32(dot[0], _mm512_and_si512(raw0, low4)),
        _mm512_mullo_epi32(dot[1], _mm512_and_si512(raw1, low4)));
    const __m512i misum =
        _mm512_add_epi32(_mm512_mullo_epi32(_mm512_srli_epi32(raw0, 4),
                                            _mm512_set1_epi32(xs16[0])),
                         _mm512_mullo_epi32(_mm512_srli_epi32(raw1, 4),
                                            _mm512_set1_epi32(xs16[1])));
    *sb = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dx, *sb);
    *mn = _mm512_fmadd_ps(_mm512_cvtepi32_ps(misum), dx, *mn);
  } else {
    const __m512i isum = _mm512_add_epi32(
        _mm512_mullo_epi32(dot[0], _mm512_cvtepi8_epi32(scales(2 * k))),
        _mm512_mullo_epi32(dot[1], _mm512_cvtepi8_epi32(scales(2 * k + 1))));
    *sb = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dx, *sb);
  }
}

// y[t0 + t, rows of P panels] for t < T. Panels p < P start at
// first_panel + p * panel_bytes and hold rows r0 + 16p ..; rows at or past
// row_end are not stored. Prefill (one panel, T tokens); decode has
// KPanelDecode. prefetch: fetch the weights kAheadSupers ahead.
template <DType kType, int P, int T>
void KPanelTile(const MatMulArgs& a, const uint8_t* first_panel,
                int64_t panel_bytes, int64_t r0, int64_t row_end, int64_t t0,
                bool prefetch) {
  using Block = PackedBlock<kType>;
  constexpr bool kQ4or5 = kScaleMin<kType>;  // Q4_K or Q5_K
  const int64_t n_super = a.cols / kQkSuper;
  const int8_t* xq[T];
  const float* xd[T];
  const int32_t* xs[T];
  const int32_t* xs16[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    xq[t] = a.xq.qs + (t0 + t) * a.xq.qs_stride;
    xd[t] = a.xq.d + (t0 + t) * a.xq.d_stride;
    xs[t] = a.xq.s + (t0 + t) * a.xq.d_stride;
    xs16[t] = a.xq.s16 + 2 * (t0 + t) * a.xq.d_stride;
  }
  __m512 acc[P][T];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < n_super; ++i) {
    const uint8_t* block[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p)
      block[p] = first_panel + p * panel_bytes + i * kSuperBytes<kType>;
    __m512 sb[P][T], mn[P][T];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        sb[p][t] = _mm512_setzero_ps();
        mn[p][t] = _mm512_setzero_ps();
      }
    }
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; ++kk) {
      // Sub-blocks in KPanelDecode's order (Q6_K: 0, 2, 1, 3, 4, 6, 5, 7),
      // so a token's sums are its decode's bit for bit whatever the batch.
      const int k = kQ4or5 ? kk : kk / 4 * 4 + kk % 4 / 2 + kk % 2 * 2;
      const int64_t b = i * 8 + k;
      if (prefetch) {
        // A share of the super-block kAheadSupers on per sub-block.
        constexpr int64_t kLines = (kSuperBytes<kType> + 63) / 64;
        constexpr int64_t kShare = (kLines + 7) / 8;
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
          for (int64_t l = 0; l < kShare; ++l) {
            _mm_prefetch(reinterpret_cast<const char*>(
                             block[p] + kAheadSupers * kSuperBytes<kType> +
                             (kk * kShare + l) * 64),
                         _MM_HINT_T0);
          }
        }
      }
      __m512i dot[P][T][2];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512i lo =
            _mm512_set1_epi32(-kHalfOffset<kType> * xs16[t][2 * b]);
        const __m512i hi =
            _mm512_set1_epi32(-kHalfOffset<kType> * xs16[t][2 * b + 1]);
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          dot[p][t][0] = lo;
          dot[p][t][1] = hi;
        }
      }
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) {
        // Q4_K: two chains (even and odd groups) halve the dependent
        // vpdpbusd latency; Q6_K: the two halves' scales differ.
        const int h = g / 4;
        const int chain = kQ4or5 ? g % 2 : h;
        __m512i xb[T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) xb[t] = Broadcast4(xq[t] + b * kQk + 4 * g);
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          const __m512i w = WeightGroup<kType>(block[p], k, g);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            dot[p][t][chain] = _mm512_dpbusd_epi32(dot[p][t][chain], w, xb[t]);
          }
        }
      }
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        if constexpr (kQ4or5) {
          const __m512i sc = _mm512_cvtepu8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                  block[p] + Block::kScales + k * kPackRows)));
          const __m512 m = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                  block[p] + Block::kMins + k * kPackRows))));
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const __m512i d = _mm512_add_epi32(dot[p][t][0], dot[p][t][1]);
            const __m512 dx = _mm512_set1_ps(xd[t][b]);
            sb[p][t] = _mm512_fmadd_ps(
                _mm512_cvtepi32_ps(_mm512_mullo_epi32(d, sc)), dx, sb[p][t]);
            const __m512 dxs =
                _mm512_set1_ps(xd[t][b] * static_cast<float>(xs[t][b]));
            mn[p][t] = _mm512_fmadd_ps(m, dxs, mn[p][t]);
          }
        } else {
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            AddHalves<kType>(block[p], k, dot[p][t], xs16[t] + 2 * b,
                             _mm512_set1_ps(xd[t][b]), &sb[p][t], &mn[p][t]);
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(block[p] + Block::kD)));
      __m512 dmin = _mm512_setzero_ps();
      if constexpr (kHasDmin<kType>) {
        dmin = _mm512_cvtph_ps(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(block[p] + Block::kDmin)));
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[p][t] = _mm512_fmadd_ps(d, sb[p][t], acc[p][t]);
        if constexpr (kHasDmin<kType>)
          acc[p][t] = _mm512_fnmadd_ps(dmin, mn[p][t], acc[p][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    const int64_t rows = row_end - (r0 + p * kPackRows);
    const auto mask = rows >= kPackRows
                          ? static_cast<__mmask16>(0xffff)
                          : static_cast<__mmask16>((1u << rows) - 1);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      _mm512_mask_storeu_ps(a.y + (t0 + t) * a.y_stride + r0 + p * kPackRows,
                            mask, acc[p][t]);
  }
}

// Decode (one token), P panels `step` panels apart (panel p at
// first_panel + p * step * panel_bytes, rows r0 + 16 p step ..), each
// panel stream fetched one super-block ahead: the same sums as
// KPanelTile<kType, P, 1>, but every 64-byte weight operand is loaded once
// for the two sub-blocks it holds (Q4_K: its two nibbles; Q5_K: those and
// qh for both; Q6_K: ql's two nibbles, and qh for both; Q2_K and Q3_K:
// two bit pairs of qs, and Q3_K's hmask for both), where
// KPanelTile's per-sub-block loop loads it again for each. In decode the
// loads, not the dot products, limit the kernel: this measured +25-34 % on
// cold matrices (kernels_bench MatVec .../packed, Q4_K and Q6_K, 2
// threads).
template <DType kType, int P>
void KPanelDecode(const MatMulArgs& a, const uint8_t* first_panel,
                  int64_t panel_bytes, int64_t r0, int64_t row_end,
                  int64_t step) {
  using Block = PackedBlock<kType>;
  constexpr bool kQ4or5 = kScaleMin<kType>;  // Q4_K or Q5_K
  // Sub-blocks sharing one set of loads.
  constexpr int kSpan = 2;
  // Sub-block of super-block i that span j's operand s2 covers: Q4_K's and
  // Q5_K's operand holds sub-blocks 2j, 2j + 1 (its nibbles); Q6_K's ql chunk c
  // of half n holds 4n + c and 4n + c + 2 (qh, shared by all four of the half,
  // is loaded once per pair: a span of four needs 16 accumulators for two
  // panels and measured slower); Q2_K and Q3_K pair their sub-blocks as
  // Q6_K does (qs bits 2c and 2c + 4).
  constexpr auto sub = [](int j, int s2) {
    return kQ4or5 ? 2 * j + s2 : 4 * (j / 2) + j % 2 + 2 * s2;
  };
  constexpr int64_t kLines = (kSuperBytes<kType> + 63) / 64;
  const int64_t n_super = a.cols / kQkSuper;
  const int8_t* xq = a.xq.qs;
  const float* xd = a.xq.d;
  const int32_t* xs = a.xq.s;
  const int32_t* xs16 = a.xq.s16;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512 acc[P];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n_super; ++i) {
    const uint8_t* block[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p)
      block[p] = first_panel + p * step * panel_bytes + i * kSuperBytes<kType>;
    __m512 sb[P], mn[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      sb[p] = _mm512_setzero_ps();
      mn[p] = _mm512_setzero_ps();
    }
#pragma GCC unroll 4
    for (int j = 0; j < 8 / kSpan; ++j) {
      // The next super-block, a share of it per span.
      constexpr int64_t kSpanLines = (kLines + 8 / kSpan - 1) / (8 / kSpan);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
        for (int64_t l = 0; l < kSpanLines; ++l) {
          _mm_prefetch(
              reinterpret_cast<const char*>(block[p] + kSuperBytes<kType> +
                                            (j * kSpanLines + l) * 64),
              _MM_HINT_T0);
        }
      }
      // dot[p][s2][h]: sub-block 8i + sub(j, s2); h the chain (Q4_K: even
      // and odd groups) or the 16-element half (Q6_K).
      __m512i dot[P][kSpan][2];
#pragma GCC unroll 4
      for (int s2 = 0; s2 < kSpan; ++s2) {
        const int64_t b = i * 8 + sub(j, s2);
        const __m512i lo = _mm512_set1_epi32(-kHalfOffset<kType> * xs16[2 * b]);
        const __m512i hi =
            _mm512_set1_epi32(-kHalfOffset<kType> * xs16[2 * b + 1]);
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          dot[p][s2][0] = lo;
          dot[p][s2][1] = hi;
        }
      }
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) {
        const int h = kQ4or5 ? g % 2 : g / 4;
        __m512i xb[kSpan];
#pragma GCC unroll 4
        for (int s2 = 0; s2 < kSpan; ++s2)
          xb[s2] = Broadcast4(xq + (i * 8 + sub(j, s2)) * kQk + 4 * g);
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          if constexpr (kQ4or5) {
            const __m512i raw = Load64(block[p] + (j * kGroups + g) * 64);
            __m512i w0 = _mm512_and_si512(raw, low4);
            __m512i w1 = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
            if constexpr (kType == DType::kQ5_K) {
              // One qh load serves both sub-blocks (bits 2j and 2j + 1).
              const __m512i qh = Load64(block[p] + Block::kQh + g * 64);
              w0 = WithFifthBit(w0, qh, 2 * j);
              w1 = WithFifthBit(w1, qh, 2 * j + 1);
            }
            dot[p][0][h] = _mm512_dpbusd_epi32(dot[p][0][h], w0, xb[0]);
            dot[p][1][h] = _mm512_dpbusd_epi32(dot[p][1][h], w1, xb[1]);
          } else if constexpr (kLowBit<kType>) {
            // Sub-blocks 4n + c and 4n + c + 2: bits 2c and 2c + 4 of one
            // qs lane (Q3_K: hmask bits 4n + c and 4n + c + 2 of one load).
            const int n = j / 2, c = j % 2;
            const __m512i qs = Load64(block[p] + (n * kGroups + g) * 64);
            const __m512i hm = HmaskLane<kType>(block[p], g);
            const __m512i w0 = LowBitsValue<kType>(qs, hm, n, c);
            const __m512i w1 = LowBitsValue<kType>(qs, hm, n, c + 2);
            dot[p][0][h] = _mm512_dpbusd_epi32(dot[p][0][h], w0, xb[0]);
            dot[p][1][h] = _mm512_dpbusd_epi32(dot[p][1][h], w1, xb[1]);
          } else {
            // Sub-blocks 4n + c and 4n + c + 2: the low and high nibbles of
            // ql chunk c, qh bits 2c, 2c + 1 and 2c + 4, 2c + 5.
            const int n = j / 2, c = j % 2;
            const __m512i ql =
                Load64(block[p] + ((n * 2 + c) * kGroups + g) * 64);
            const __m512i qh =
                Load64(block[p] + Block::kQh + (n * kGroups + g) * 64);
            const __m512i m30 = _mm512_set1_epi8(0x30);
            const __m512i w0 = _mm512_ternarylogic_epi32(
                _mm512_and_si512(ql, low4),
                c == 0 ? _mm512_slli_epi16(qh, 4) : _mm512_slli_epi16(qh, 2),
                m30, 0xf8);
            const __m512i w1 = _mm512_ternarylogic_epi32(
                _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                c == 0 ? qh : _mm512_srli_epi16(qh, 2), m30, 0xf8);
            dot[p][0][h] = _mm512_dpbusd_epi32(dot[p][0][h], w0, xb[0]);
            dot[p][1][h] = _mm512_dpbusd_epi32(dot[p][1][h], w1, xb[1]);
          }
        }
      }
#pragma GCC unroll 4
      for (int s2 = 0; s2 < kSpan; ++s2) {
        const int k = sub(j, s2);
        const int64_t b = i * 8 + k;
        const __m512 dx = _mm512_set1_ps(xd[b]);
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          if constexpr (kQ4or5) {
            const __m512i sc = _mm512_cvtepu8_epi32(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                    block[p] + Block::kScales + k * kPackRows)));
            const __m512 m = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                    block[p] + Block::kMins + k * kPackRows))));
            const __m512i d = _mm512_add_epi32(dot[p][s2][0], dot[p][s2][1]);
            sb[p] = _mm512_fmadd_ps(
                _mm512_cvtepi32_ps(_mm512_mullo_epi32(d, sc)), dx, sb[p]);
            mn[p] = _mm512_fmadd_ps(
                m, _mm512_set1_ps(xd[b] * static_cast<float>(xs[b])), mn[p]);
          } else {
            AddHalves<kType>(block[p], k, dot[p][s2], xs16 + 2 * b, dx, &sb[p],
                             &mn[p]);
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(block[p] + Block::kD)));
      acc[p] = _mm512_fmadd_ps(d, sb[p], acc[p]);
      if constexpr (kHasDmin<kType>) {
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(block[p] + Block::kDmin)));
        acc[p] = _mm512_fnmadd_ps(dmin, mn[p], acc[p]);
      }
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    const int64_t rows = row_end - (r0 + p * step * kPackRows);
    const auto mask = rows >= kPackRows
                          ? static_cast<__mmask16>(0xffff)
                          : static_cast<__mmask16>((1u << rows) - 1);
    _mm512_mask_storeu_ps(a.y + r0 + p * step * kPackRows, mask, acc[p]);
  }
}

template <DType kType>
void KPanelTokens(const MatMulArgs& a, const uint8_t* panel, int64_t r0,
                  int64_t row_end, int64_t t0, int64_t n_tokens,
                  bool prefetch) {
  static_assert(kPrefillTokens == 4);
  switch (n_tokens) {
    case 1:
      return KPanelTile<kType, 1, 1>(a, panel, 0, r0, row_end, t0, prefetch);
    case 2:
      return KPanelTile<kType, 1, 2>(a, panel, 0, r0, row_end, t0, prefetch);
    case 3:
      return KPanelTile<kType, 1, 3>(a, panel, 0, r0, row_end, t0, prefetch);
    default:
      return KPanelTile<kType, 1, 4>(a, panel, 0, r0, row_end, t0, prefetch);
  }
}

// Decode reads the whole panels of the range as two streams, its first and
// its second half in step (KPanelDecode<kType, 2> with step = half), then
// the rest one panel at a time. Measured on Zen 5 (whole decode steps, the
// same process alternating): against two adjacent panels for Q6_K and one
// panel for Q4_K, as Zen 4 had measured best, 1.15-1.20x on llama3.2-1b
// Q6_K and Q4_K_M and 1.02x on qwen2.5-0.5b Q6_K/Q4_K_M (16-30 rounds).
// Prefill: each panel stays in cache while all token tiles pass over it.
template <DType kType>
void KPackedRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t panel_bytes = a.cols / kQkSuper * kSuperBytes<kType>;
  auto panel = [&](int64_t r) { return a.w + r / kPackRows * panel_bytes; };
  int64_t r0 = row_begin;
  if (a.n_tokens == 1) {
    const int64_t half = (row_end - row_begin) / kPackRows / 2;
    for (int64_t i = 0; i < half; ++i, r0 += kPackRows)
      KPanelDecode<kType, 2>(a, panel(r0), panel_bytes, r0, row_end, half);
    for (r0 += half * kPackRows; r0 < row_end; r0 += kPackRows)
      KPanelDecode<kType, 1>(a, panel(r0), panel_bytes, r0, row_end, 1);
    return;
  }
  for (; r0 < row_end; r0 += kPackRows) {
    const int64_t end = row_end - r0 < kPackRows ? row_end : r0 + kPackRows;
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kPrefillTokens) {
      const int64_t n = a.n_tokens - t0;
      KPanelTokens<kType>(a, panel(r0), r0, end, t0,
                          n < kPrefillTokens ? n : kPrefillTokens, t0 == 0);
    }
  }
}

}  // namespace

void MatMulPackedRowsQ2_K(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  KPackedRows<DType::kQ2_K>(args, row_begin, row_end);
}

void MatMulPackedRowsQ3_K(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  KPackedRows<DType::kQ3_K>(args, row_begin, row_end);
}

void MatMulPackedRowsQ4_K(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  KPackedRows<DType::kQ4_K>(args, row_begin, row_end);
}

void MatMulPackedRowsQ5_K(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  KPackedRows<DType::kQ5_K>(args, row_begin, row_end);
}

void MatMulPackedRowsQ6_K(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  KPackedRows<DType::kQ6_K>(args, row_begin, row_end);
}

}  // namespace redline::kernels::avx512
