// AVX2 products on packed Q2_K/Q3_K/Q4_K/Q5_K/Q6_K weights (layout:
// packed.h). Compiled with AVX2 + FMA + F16C flags; reached only through
// the kernel table. matmul_kpacked_avxvnni.cc compiles this file again with
// AVX-VNNI (__AVXVNNI__), into namespace avxvnni (below).
//
// Why panels on AVX2 too: the row layout's AVX2 products unpack every
// super-block of every row into a buffer before its dot products, so
// their decode read 29-66 % of the measured bandwidth and fell to
// 0.69-0.97x llama.cpp's AVX2 build in some rounds (docs/PERFORMANCE.md).
// In a panel one 32-byte half of a 64-byte operand is 8 rows' 4 weights, so
// a vpmaddubsw against 4 broadcast activation bytes advances 8 rows at
// once, and a sub-block's 8 scales are one load.
//
// Arithmetic per row (lane), activation block b of super-block i,
// sub-block k (b = 8i + k); every integer term is exact:
//   Q4_K: q in [0, 15], x in [-127, 127]: a vpmaddubsw pair sum is at most
//         3810 in size, so a sub-block's 8 groups add in s16 (<= 30480);
//         vpmaddwd against the scale in both 16-bit halves of the lane
//         gives sc_k * dot in s32.
//         sb += float(sc_k * dot) * d_x,b;  mn += m_k * (d_x,b * xsum_b);
//         per super-block acc += d * sb - dmin * mn.
//   Q5_K: as Q4_K with q in [0, 31]: a pair sum is at most 7874, so each
//         half of a sub-block's groups (0-3, 4-7) adds in s16 (<= 31496)
//         and takes its own vpmaddwd; the two s32 halves add to sc_k * dot.
//   Q6_K: q + 32 = (ql | qh << 4) in [0, 63]: a pair sum is at most 16002,
//         so two groups add in s16 (<= 32004); vpmaddwd against the scale of
//         their 16-element half; minus 32 * (sc_2k * xsum16_0 + sc_2k+1 *
//         xsum16_1); sb += float(isum) * d_x,b;  per super-block
//         acc += d * sb.
//   Q3_K: as Q6_K with q + 4 = (2 bits of qs | the hmask bit << 2) in
//         [0, 7] and the offset -4 * (...): a pair sum is at most 1778, so
//         a 16-element half's 4 groups add in s16 (<= 7112).
//   Q2_K: as Q3_K with q the 2 bits of qs in [0, 3], no offset, and the
//         4-bit scales and mins of each half: a half's 4 groups add in s16
//         (<= 3048); misum = m_2k * xsum16_0 + m_2k+1 * xsum16_1 by one
//         vpmaddwd; mn += float(misum) * d_x,b; per super-block
//         acc += d * sb - dmin * mn.
// With AVX-VNNI (kVnni) each 16-element half's groups are one vpdpbusd
// chain in s32 instead (no s16 bound to respect), Q6_K's and Q3_K's from
// -32 (-4) x the half's activation sum, and the chain times its scale is
// one vpmulld, as on AVX-512: the same exact integer term per sub-block,
// so the same bits. Per half and token that is 4 vpdpbusd and a
// vpmulld where AVX2 takes 4 vpmaddubsw, 4 vpaddw and one or two vpmaddwd
// with their vpaddd (and Q6_K, Q3_K their offsets' TermStart);
// kernels_bench Prefill, 128 tokens, 2 threads, the same process forced to
// each ISA on Zen 5: Q4_K 1.27-1.42x, Q6_K 1.18-1.26x the AVX2 tiles (Q6_K
// 1.07-1.12x with TermStart's offsets); decode, bound by memory, unchanged.
// These are the AVX-512 products' float operations
// (matmul_kpacked_avx512.cc) on the same exact integers in the same order,
// sub-blocks included (Q6_K, Q3_K, Q2_K: 0, 2, 1, 3, 4, 6, 5, 7), so the
// two ISAs give the same bits; and decode (KDecode) takes the batch tiles'
// (KTile) operations per lane in their order, so a token's outputs are the
// same whatever the batch.
#include <cstdint>
#include <cstring>
#include <type_traits>

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

constexpr int64_t kQk = 32;
constexpr int kGroups = 8;  // 4-byte groups per 32-element sub-block
// Batches: one half panel by up to kTileTokens tokens per tile.
constexpr int kTileTokens = 4;
// Each panel stream is fetched this many super-blocks ahead, a share of
// the super-block per sub-block. One ahead measured 0.72-0.94x in whole
// decode steps (llama3.2-1b Q4_K_M and Q6_K, alternating), three within
// the noise of two.
constexpr int64_t kAheadSupers = 2;

template <DType kType>
constexpr int64_t kSuperBytes = PackedBlock<kType>::kBytes;

// The kk-th sub-block every tile sums (the AVX-512 products' order).
template <DType kType>
constexpr int SubBlock(int kk) {
  return kScaleMin<kType> ? kk : kk / 4 * 4 + kk % 4 / 2 + kk % 2 * 2;
}

// Fetches share `part` of kParts of the super-block kAheadSupers on from
// `block`: spread over a super-block's kParts steps, each line once.
template <DType kType, int kParts>
inline void FetchAhead(const uint8_t* block, int part) {
  constexpr int64_t kLines = (kSuperBytes<kType> + 63) / 64;
  constexpr int64_t kShare = (kLines + kParts - 1) / kParts;
#pragma GCC unroll 8
  for (int64_t l = 0; l < kShare; ++l) {
    _mm_prefetch(reinterpret_cast<const char*>(
                     block + kAheadSupers * kSuperBytes<kType> +
                     (part * kShare + l) * 64),
                 _MM_HINT_T0);
  }
}

inline __m128i Load8(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}

// s32 lanes v (-32768 <= v < 32768) as ScaledSum multiplies by them: v in
// both 16-bit halves for vpmaddwd; v itself for vpmulld (AVX-VNNI).
inline __m256i ScaleOperand(__m256i v) {
  if constexpr (kVnni) {
    return v;
  } else {
    return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)),
                           _mm256_slli_epi32(v, 16));
  }
}

// Sub-block k's scales for half h of a super-block of the panel (lane r:
// row 8h + r), as the dot products consume them.
//   Q4_K, Q5_K: sc the 6-bit scale (ScaleOperand), m the 6-bit min as
//         f32.
//   Q6_K, Q3_K: sc[0], sc[1] the scales of the two 16-element halves
//         (ScaleOperand), pair = sc_2k in the low and sc_2k+1 in the high
//         16 bits.
//   Q2_K: sc[0], sc[1] the halves' 4-bit scales (ScaleOperand), pair =
//         their 4-bit mins m_2k, m_2k+1 the same way.
struct ScaleMin {
  __m256i sc;
  __m256 m;
};
struct HalfScales {
  __m256i sc[2];
  __m256i pair;
};
template <DType kType>
using SubScales = std::conditional_t<kScaleMin<kType>, ScaleMin, HalfScales>;

// s32 lanes lo, hi (each in [-32768, 32768)) as one pair of 16-bit halves.
inline __m256i Pair16(__m256i lo, __m256i hi) {
  return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xffff)),
                         _mm256_slli_epi32(hi, 16));
}

template <DType kType>
inline SubScales<kType> LoadSubScales(const uint8_t* block, int k, int h) {
  using Block = PackedBlock<kType>;
  if constexpr (kScaleMin<kType>) {
    const __m256i sc = _mm256_cvtepu8_epi32(
        Load8(block + Block::kScales + k * kPackRows + kHalfRows * h));
    const __m256i m = _mm256_cvtepu8_epi32(
        Load8(block + Block::kMins + k * kPackRows + kHalfRows * h));
    return {ScaleOperand(sc), _mm256_cvtepi32_ps(m)};
  } else {
    const uint8_t* s = block + Block::kScales + kHalfRows * h;
    if constexpr (kType == DType::kQ2_K) {
      const __m256i raw0 = _mm256_cvtepu8_epi32(Load8(s + 2 * k * kPackRows));
      const __m256i raw1 =
          _mm256_cvtepu8_epi32(Load8(s + (2 * k + 1) * kPackRows));
      const __m256i low4 = _mm256_set1_epi32(0x0f);
      return {{ScaleOperand(_mm256_and_si256(raw0, low4)),
               ScaleOperand(_mm256_and_si256(raw1, low4))},
              Pair16(_mm256_srli_epi32(raw0, 4), _mm256_srli_epi32(raw1, 4))};
    } else {
      const __m256i s0 = _mm256_cvtepi8_epi32(Load8(s + 2 * k * kPackRows));
      const __m256i s1 =
          _mm256_cvtepi8_epi32(Load8(s + (2 * k + 1) * kPackRows));
      return {{ScaleOperand(s0), ScaleOperand(s1)}, Pair16(s0, s1)};
    }
  }
}

// sc.pair against a block's two 16-element activation sums at xs16
// (|xsum16| <= 2032, so each fits 16 bits): per lane pair_lo * xsum16_0 +
// pair_hi * xsum16_1 (Q2_K's misum; Q6_K's and Q3_K's offset before its
// factor).
inline __m256i PairDot(const HalfScales& sc, const int32_t* xs16) {
  const int32_t xs_pair =
      static_cast<int32_t>((static_cast<uint32_t>(xs16[1]) << 16) |
                           (static_cast<uint32_t>(xs16[0]) & 0xffffu));
  return _mm256_madd_epi16(sc.pair, _mm256_set1_epi32(xs_pair));
}

// Where a sub-block's integer term starts: Q6_K -32 and Q3_K -4 times
// (sc_2k * xsum16_0 + sc_2k+1 * xsum16_1), the others zero; zero with
// AVX-VNNI, whose sums start from the offsets instead (SumStart).
template <DType kType>
inline __m256i TermStart(const SubScales<kType>& sc, const int32_t* xs16) {
  if constexpr (kHalfOffset<kType> == 0 || kVnni) {
    return _mm256_setzero_si256();
  } else {
    constexpr int kShift = kType == DType::kQ6_K ? 5 : 2;
    static_assert(1 << kShift == kHalfOffset<kType>);
    return _mm256_sub_epi32(_mm256_setzero_si256(),
                            _mm256_slli_epi32(PairDot(sc, xs16), kShift));
  }
}

// Groups per sum (the s16 bounds in the header): Q4_K all 8, Q5_K, Q3_K
// and Q2_K 4, Q6_K 2; with AVX-VNNI 4 (a 16-element half: its s32 chain
// is the vpdpbusd latency of 4, and each sum of Q6_K, Q3_K and Q2_K needs
// one scale).
template <DType kType>
constexpr int kSumGroups = kVnni                   ? 4
                           : kType == DType::kQ4_K ? 8
                           : kType == DType::kQ6_K ? 2
                                                   : 4;

// The scale operand of the sum that starts at group g0.
inline __m256i SumScale(const ScaleMin& sc, int) { return sc.sc; }
inline __m256i SumScale(const HalfScales& sc, int g0) { return sc.sc[g0 / 4]; }

// Where the sum of groups g0 .. g0 + kSumGroups - 1 starts: with AVX-VNNI
// (one 16-element half per sum) -kHalfOffset x that half's activation sum
// (xs16: the sub-block's two), so that its vpmulld scales the offset in as
// AVX-512 does; otherwise zero (TermStart takes the offsets).
template <DType kType>
inline __m256i SumStart(const int32_t* xs16, int g0) {
  if constexpr (kHalfOffset<kType> == 0 || !kVnni) {
    return _mm256_setzero_si256();
  } else {
    return _mm256_set1_epi32(-kHalfOffset<kType> * xs16[g0 / 4]);
  }
}

// sum + the dot of group operand w (u8) with activation bytes x (s8): in
// s16 pair sums (vpmaddubsw; the bounds in the header), or with AVX-VNNI
// in s32 (vpdpbusd).
inline __m256i AddGroup(__m256i sum, __m256i w, __m256i x) {
  if constexpr (kVnni) {
    return DotU8(sum, w, x);
  } else {
    return _mm256_add_epi16(sum, _mm256_maddubs_epi16(w, x));
  }
}

// A finished sum times its scale operand, in s32.
inline __m256i ScaledSum(__m256i sum, __m256i scale) {
  if constexpr (kVnni) {
    return _mm256_mullo_epi32(sum, scale);
  } else {
    return _mm256_madd_epi16(sum, scale);
  }
}

// Q3_K's hmask lane of group g, half h (Q2_K has none: zero).
template <DType kType>
inline __m256i HmaskLane(const uint8_t* block, int g, int h) {
  if constexpr (kType == DType::kQ3_K) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
        block + PackedBlock<DType::kQ3_K>::kQh + g * 64 + 32 * h));
  } else {
    return _mm256_setzero_si256();
  }
}

// Q2_K's or Q3_K's u8 operand of sub-block 4n + j from the group's qs and
// hmask lanes: bits 2j, 2j + 1 of qs, and Q3_K's hmask bit 4n + j as bit
// 2. (The 16-bit shifts carry no bit that the masks keep across a byte
// boundary: qs by at most 6, hmask by at most 5.)
template <DType kType>
inline __m256i LowBitsValue(__m256i qs, __m256i hm, int n, int j) {
  const __m256i low = _mm256_and_si256(
      j == 0 ? qs : _mm256_srli_epi16(qs, 2 * j), _mm256_set1_epi8(0x03));
  if constexpr (kType == DType::kQ2_K) {
    return low;
  } else {
    const int bit = 4 * n + j;
    const __m256i at2 = bit > 2    ? _mm256_srli_epi16(hm, bit - 2)
                        : bit == 2 ? hm
                                   : _mm256_slli_epi16(hm, 2 - bit);
    return _mm256_or_si256(low, _mm256_and_si256(at2, _mm256_set1_epi8(0x04)));
  }
}

// nibble | (bit k of each byte of qh) << 4: Q5_K's value of sub-block k
// (k a constant after unrolling). The 16-bit shifts move no bit that the
// 0x10 mask keeps across a byte boundary, since |4 - k| <= 4.
inline __m256i WithFifthBit(__m256i nibble, __m256i qh, int k) {
  const __m256i at4 = k < 4    ? _mm256_slli_epi16(qh, 4 - k)
                      : k == 4 ? qh
                               : _mm256_srli_epi16(qh, k - 4);
  return _mm256_or_si256(nibble, _mm256_and_si256(at4, _mm256_set1_epi8(0x10)));
}

// Group g of half h of span j's two sub-blocks (KDecode's sub(j, 0) and
// sub(j, 1)) from one set of loads, as u8 operands: lane r holds row
// 8h + r's values (Q6_K: + 32) of the sub-block's elements 4g .. 4g + 3.
// Q4_K, Q5_K: the low and high nibbles of operand j (and Q5_K's qh bits
// 2j, 2j + 1); Q6_K: those of ql chunk c of half n (j = 2n + c) with qh
// bits 2c, 2c + 1 and 2c + 4, 2c + 5; Q2_K, Q3_K: bits 2c and 2c + 4 of
// qs lane n (and Q3_K's hmask bits 4n + c, 4n + c + 2).
template <DType kType>
inline void SpanOperands(const uint8_t* block, int j, int g, int h,
                         __m256i (&w)[2]) {
  using Block = PackedBlock<kType>;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  auto load = [h](const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * h));
  };
  if constexpr (kScaleMin<kType>) {
    const __m256i raw = load(block + (j * kGroups + g) * 64);
    w[0] = _mm256_and_si256(raw, low4);
    w[1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
    if constexpr (kType == DType::kQ5_K) {
      const __m256i qh = load(block + Block::kQh + g * 64);
      w[0] = WithFifthBit(w[0], qh, 2 * j);
      w[1] = WithFifthBit(w[1], qh, 2 * j + 1);
    }
  } else if constexpr (kLowBit<kType>) {
    const int n = j / 2, c = j % 2;
    const __m256i qs = load(block + (n * kGroups + g) * 64);
    const __m256i hm = HmaskLane<kType>(block, g, h);
    w[0] = LowBitsValue<kType>(qs, hm, n, c);
    w[1] = LowBitsValue<kType>(qs, hm, n, c + 2);
  } else {
    static_assert(kType == DType::kQ6_K);
    const int n = j / 2, c = j % 2;
    const __m256i ql = load(block + ((n * 2 + c) * kGroups + g) * 64);
    const __m256i qh = load(block + Block::kQh + (n * kGroups + g) * 64);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    w[0] = _mm256_or_si256(
        _mm256_and_si256(ql, low4),
        _mm256_and_si256(
            c == 0 ? _mm256_slli_epi16(qh, 4) : _mm256_slli_epi16(qh, 2), m30));
    w[1] = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4),
        _mm256_and_si256(c == 0 ? qh : _mm256_srli_epi16(qh, 2), m30));
  }
}

// The u8 operand of group g of sub-block k, half h: lane r holds row
// 8h + r's values for elements 32k + 4g .. 32k + 4g + 3 (Q6_K: + 32):
// SpanOperands' operand for k (the compiler drops the span's other one).
template <DType kType>
inline __m256i WeightGroup(const uint8_t* block, int k, int g, int h) {
  const int j = kScaleMin<kType> ? k / 2 : k / 4 * 2 + k % 2;
  const int s2 = kScaleMin<kType> ? k % 2 : k % 4 / 2;
  __m256i w[2];
  SpanOperands<kType>(block, j, g, h, w);
  return w[s2];
}

// One tile: half h of the panel (rows r0 .. r0 + n_rows - 1 of y) by T
// tokens from t0. fetch: fetch the panel kAheadSupers super-blocks ahead
// (once per panel: for its first half and first token tile).
template <DType kType, int T>
void KTile(const MatMulArgs& a, const uint8_t* panel, int h, int64_t r0,
           int n_rows, int64_t t0, bool fetch) {
  using Block = PackedBlock<kType>;
  constexpr bool kQ4or5 = kScaleMin<kType>;  // Q4_K or Q5_K
  const int64_t n_super = a.cols / kQkSuper;
  const TileTokens<T> x(a.xq, t0);
  __m256 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n_super; ++i) {
    const uint8_t* block = panel + i * kSuperBytes<kType>;
    __m256 sb[T], mn[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      sb[t] = _mm256_setzero_ps();
      mn[t] = _mm256_setzero_ps();
    }
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; ++kk) {
      const int k = SubBlock<kType>(kk);
      const int64_t b = i * 8 + k;
      if (fetch) FetchAhead<kType, 8>(block, kk);
      const SubScales<kType> sc = LoadSubScales<kType>(block, k, h);
      // term[t]: the exact integer the sub-block adds (Q4_K sc_k * dot,
      // Q6_K isum).
      __m256i term[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t)
        term[t] = TermStart<kType>(sc, x.s16[t] + 2 * b);
#pragma GCC unroll 4
      for (int g0 = 0; g0 < kGroups; g0 += kSumGroups<kType>) {
        __m256i sum[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t)
          sum[t] = SumStart<kType>(x.s16[t] + 2 * b, g0);
#pragma GCC unroll 8
        for (int g = g0; g < g0 + kSumGroups<kType>; ++g) {
          const __m256i w = WeightGroup<kType>(block, k, g, h);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            sum[t] = AddGroup(sum[t], w, Broadcast4(x.qs[t] + b * kQk + 4 * g));
          }
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          term[t] =
              _mm256_add_epi32(term[t], ScaledSum(sum[t], SumScale(sc, g0)));
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256 dx = _mm256_set1_ps(x.d[t][b]);
        sb[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(term[t]), dx, sb[t]);
        if constexpr (kQ4or5) {
          mn[t] = _mm256_fmadd_ps(
              sc.m, _mm256_set1_ps(x.d[t][b] * static_cast<float>(x.s[t][b])),
              mn[t]);
        } else if constexpr (kType == DType::kQ2_K) {
          mn[t] = _mm256_fmadd_ps(
              _mm256_cvtepi32_ps(PairDot(sc, x.s16[t] + 2 * b)), dx, mn[t]);
        }
      }
    }
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(block + Block::kD + 16 * h)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t] = _mm256_fmadd_ps(d, sb[t], acc[t]);
    if constexpr (kHasDmin<kType>) {
      const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(
          reinterpret_cast<const __m128i*>(block + Block::kDmin + 16 * h)));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t)
        acc[t] = _mm256_fnmadd_ps(dmin, mn[t], acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
    StoreRows(a.y + (t0 + t) * a.y_stride + r0, n_rows, acc[t]);
}

// Decode of one panel (rows r0 .. r0 + n_rows - 1 of y), super-block by
// super-block, each half panel in turn: the same operations per lane in the
// same order as KTile<kType, 1>, but each 32-byte weight load serves the two
// sub-blocks it holds (Q4_K: its two nibbles; Q5_K: those and qh for both;
// Q6_K: ql's two nibbles, and qh for both; Q2_K and Q3_K: two bit pairs
// of qs, and Q3_K's hmask for both), where KTile loads it again for each.
// One panel at a time: with two panels in step (a stream each) whole
// decode steps measured 0.66-0.75x on llama3.2-1b Q4_K_M and 0.83-1.11x on
// Q6_K (two alternating rounds), and four in step halved Q6_K's
// kernels_bench MatVec 2048 x 8192.
template <DType kType>
void KDecode(const MatMulArgs& a, const uint8_t* panel, int64_t r0,
             int64_t n_rows) {
  using Block = PackedBlock<kType>;
  constexpr bool kQ4or5 = kScaleMin<kType>;  // Q4_K or Q5_K
  // Span j's two sub-blocks: Q4_K's and Q5_K's operands j hold sub-blocks
  // 2j, 2j + 1; Q6_K's ql chunk c of half n holds 4n + c and 4n + c + 2
  // (j = 2n + c), as do Q2_K's and Q3_K's qs lanes n (bits 2c and 2c + 4).
  // Taken span by span, sub(j, 0) then sub(j, 1), they come in SubBlock's
  // order.
  constexpr auto sub = [](int j, int s2) {
    return kQ4or5 ? 2 * j + s2 : 4 * (j / 2) + j % 2 + 2 * s2;
  };
  const int64_t n_super = a.cols / kQkSuper;
  const int8_t* xq = a.xq.qs;
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t i = 0; i < n_super; ++i) {
    const uint8_t* block = panel + i * kSuperBytes<kType>;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 sb = _mm256_setzero_ps();
      __m256 mn = _mm256_setzero_ps();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        if (h == 0) FetchAhead<kType, 4>(block, j);
        const int k0 = sub(j, 0), k1 = sub(j, 1);
        const int8_t* x0 = xq + (i * 8 + k0) * kQk;
        const int8_t* x1 = xq + (i * 8 + k1) * kQk;
        const SubScales<kType> sc0 = LoadSubScales<kType>(block, k0, h);
        const SubScales<kType> sc1 = LoadSubScales<kType>(block, k1, h);
        __m256i term0, term1;
        term0 = TermStart<kType>(sc0, a.xq.s16 + 2 * (i * 8 + k0));
        term1 = TermStart<kType>(sc1, a.xq.s16 + 2 * (i * 8 + k1));
#pragma GCC unroll 4
        for (int g0 = 0; g0 < kGroups; g0 += kSumGroups<kType>) {
          __m256i sum0 = SumStart<kType>(a.xq.s16 + 2 * (i * 8 + k0), g0);
          __m256i sum1 = SumStart<kType>(a.xq.s16 + 2 * (i * 8 + k1), g0);
#pragma GCC unroll 8
          for (int g = g0; g < g0 + kSumGroups<kType>; ++g) {
            __m256i w[2];
            SpanOperands<kType>(block, j, g, h, w);
            sum0 = AddGroup(sum0, w[0], Broadcast4(x0 + 4 * g));
            sum1 = AddGroup(sum1, w[1], Broadcast4(x1 + 4 * g));
          }
          term0 = _mm256_add_epi32(term0, ScaledSum(sum0, SumScale(sc0, g0)));
          term1 = _mm256_add_epi32(term1, ScaledSum(sum1, SumScale(sc1, g0)));
        }
#pragma GCC unroll 2
        for (int s2 = 0; s2 < 2; ++s2) {
          const int64_t b = i * 8 + sub(j, s2);
          const __m256 dx = _mm256_set1_ps(a.xq.d[b]);
          sb = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s2 == 0 ? term0 : term1), dx,
                               sb);
          if constexpr (kQ4or5) {
            mn = _mm256_fmadd_ps(
                s2 == 0 ? sc0.m : sc1.m,
                _mm256_set1_ps(a.xq.d[b] * static_cast<float>(a.xq.s[b])), mn);
          } else if constexpr (kType == DType::kQ2_K) {
            mn = _mm256_fmadd_ps(_mm256_cvtepi32_ps(PairDot(s2 == 0 ? sc0 : sc1,
                                                            a.xq.s16 + 2 * b)),
                                 dx, mn);
          }
        }
      }
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(
          reinterpret_cast<const __m128i*>(block + Block::kD + 16 * h)));
      acc[h] = _mm256_fmadd_ps(d, sb, acc[h]);
      if constexpr (kHasDmin<kType>) {
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(
            reinterpret_cast<const __m128i*>(block + Block::kDmin + 16 * h)));
        acc[h] = _mm256_fnmadd_ps(dmin, mn, acc[h]);
      }
    }
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const int64_t left = n_rows - h * kHalfRows;
    if (left > 0) {
      StoreRows(a.y + r0 + h * kHalfRows,
                static_cast<int>(left < kHalfRows ? left : kHalfRows), acc[h]);
    }
  }
}

// Decode reads the range panel by panel. Batches take one half panel at a
// time by token tiles: the first tile pass over a panel fetches it ahead,
// and it stays in cache while the others pass over it.
template <DType kType>
void KPackedRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t panel_bytes = a.cols / kQkSuper * kSuperBytes<kType>;
  auto panel_of = [&](int64_t r) { return a.w + r / kPackRows * panel_bytes; };
  if (a.n_tokens == 1) {
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kPackRows)
      KDecode<kType>(a, panel_of(r0), r0, row_end - r0);
    return;
  }
  HalfPanelTiles<kTileTokens>(
      a, row_begin, row_end, panel_bytes,
      [&a]<int T>(const uint8_t* panel, int h, int64_t r0, int n_rows,
                  int64_t t0, bool fetch) {
        KTile<kType, T>(a, panel, h, r0, n_rows, t0, fetch);
      });
}

}  // namespace

void FillKPackedMatMulTable(KernelTable* table) {
  table->matmul_packed[static_cast<int>(DType::kQ2_K)] =
      &KPackedRows<DType::kQ2_K>;
  table->matmul_packed[static_cast<int>(DType::kQ3_K)] =
      &KPackedRows<DType::kQ3_K>;
  table->matmul_packed[static_cast<int>(DType::kQ4_K)] =
      &KPackedRows<DType::kQ4_K>;
  table->matmul_packed[static_cast<int>(DType::kQ5_K)] =
      &KPackedRows<DType::kQ5_K>;
  table->matmul_packed[static_cast<int>(DType::kQ6_K)] =
      &KPackedRows<DType::kQ6_K>;
}

#if defined(__AVXVNNI__)
}  // namespace redline::kernels::avxvnni
#else
}  // namespace redline::kernels::avx2
#endif
