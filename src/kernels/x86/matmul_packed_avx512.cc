// AVX-512 VNNI products on packed Q8_0/Q4_0/Q4_1/IQ4_NL/Q5_0/Q5_1 weights
// (layout: packed.h). Compiled with AVX-512 flags; reached only through the
// kernel table.
//
// One tile is a panel of 16 rows x T tokens. Per block, the panel's weights
// become 8 u8 operands of 64 bytes, [16 rows][4 bytes] each; vpdpbusd of
// operand g against token t's activation bytes 4g..4g+3 (broadcast) adds
// four products to every row's lane, so 8 of them give the 16 rows' integer
// block dot products in one register with no horizontal sums. The u8
// operand is w + 128 (Q8_0), the nibble w + 8 (Q4_0), the nibble q (Q4_1,
// where w = d q + m), the table value w + 128 (IQ4_NL: one vpshufb per
// operand) or the 5-bit value (Q5_0: w + 16; Q5_1: q); the offset adds
// 128 (8, 16) x the block's activation sum, which each lane starts from
// with the opposite sign, so the integer result is exact.
//
// Then, as the reference does (ref/matmul.cc), per block in order:
// acc = fma(float(dot), d_w * d_x, acc), one fma for 16 rows: outputs are
// bit-identical to the reference. (The reference of Q4_1, IQ4_NL, Q5_0 and
// Q5_1 scales each half block apart, MatMulUnpackedRows; HalfBlocks does
// the same.)
#include <cstdint>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/kernel_table.h"
#include "kernels/packed.h"
#include "kernels/x86/intrinsics.h"

namespace redline::kernels::avx512 {
namespace {

constexpr int64_t kQk = 32;
constexpr int kGroups = 8;         // 4-byte groups per block
constexpr int kPrefillTokens = 8;  // tokens per tile when n_tokens > 1
// Software prefetch distance of the weight stream. A panel tile computes
// while the lines it will need next arrive: without it the loads of a
// tile of 2-9 tokens waited on memory instead of overlapping the dot
// products (9 tokens cost 2.5x a decode step on a 4864 x 896 Q8_0 matrix,
// 1.1x with it). On Zen 4, 4 and 8 KiB measured best for 1-9 tokens on the
// qwen2.5 and llama3.2 shapes, within the noise of each other (kernels_bench
// SmallBatch/MatVec); on Zen 5 decode, 8 KiB against 4 KiB (each line
// fetched once, same process, alternating): 1.02-1.06x on cold 4864 x 896
// and 896 x 4864 matrices, 1.03-1.09x in whole decode steps of
// qwen2.5-0.5b and llama3.2-1b Q4_0/Q8_0; 16 and 32 KiB measured no better.
// That was one stream per thread.
constexpr int64_t kPrefetchBytes = 8192;
// Decode reads a thread's panels as kDecodeStreams streams in step
// (PanelsDecode), each prefetched kStreamPrefetchBytes ahead: a stream
// advances at 1/kDecodeStreams of the thread's pace, so the bytes in
// flight per thread stay 8 KiB. Measured on Zen 5, whole decode steps, the
// same process alternating (12-30 rounds each):
//  - two streams at 4 KiB against two at 8 KiB: qwen2.5-0.5b Q8_0 1.055x
//    and 1.057x, llama3.2-1b Q8_0 1.049x and 1.056x, qwen2.5-0.5b and
//    llama3.2-1b Q4_0 1.022-1.023x;
//  - four at 2 KiB against two at 4 KiB: qwen2.5-0.5b Q8_0 1.059x,
//    llama3.2-1b Q8_0 1.153x, llama3.2-1b Q4_0 1.119x, qwen2.5-0.5b Q4_0
//    1.001x; four at 4 KiB 1.067x, 1.119x, 1.024x, 0.962x; three at 3 KiB
//    1.036x (qwen2.5-0.5b Q8_0);
//  - against four at 2 KiB: four at 1 KiB 0.95-0.97x, four at 3 KiB
//    0.94-1.00x, eight at 1 KiB 0.72-0.77x.
// (Four streams at 8 KiB each had measured 0.90-1.02x against two at 8.)
constexpr int kDecodeStreams = 4;
constexpr int64_t kStreamPrefetchBytes = 2048;

template <DType kType>
constexpr int64_t kBlockBytes = PackedBlock<kType>::kBytes;

#include "kernels/x86/panel_streams.inc"

inline __m512i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// The 8 u8 operands of one block: w[g] pairs with activation group g.
template <DType kType>
inline void LoadBlock(const uint8_t* block, __m512i (&w)[kGroups]) {
  if constexpr (kType == DType::kQ8_0) {
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) w[g] = _mm512_loadu_si512(block + 64 * g);
  } else {
    // Low nibbles are elements 4g..4g+3 (groups 0-3), high nibbles
    // 16 + 4g.. (groups 4-7).
    const __m512i mask = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const __m512i q = _mm512_loadu_si512(block + 64 * g);
      w[g] = _mm512_and_si512(q, mask);
      w[g + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask);
    }
    if constexpr (kType == DType::kIQ4_NL) {
      const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(
          reinterpret_cast<const __m128i*>(kIq4NlValuesU8.data())));
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) w[g] = _mm512_shuffle_epi8(table, w[g]);
    }
    if constexpr (kFiveBits<kType>) {
      // Fifth bits: mask g has a bit per byte of operand g (packed.h), so
      // one masked add puts 16 where it is set. (The file's qh words had
      // cost a shuffle and a test per operand more; with them Q5_0 decode
      // was the slowest packed product, qwen2.5-0.5b Q4_K_M's gate/up
      // 45-50 GB/s where Q8_0's read 59-60.)
      const uint8_t* masks = block + PackedBlock<kType>::kQh;
      const __m512i sixteen = _mm512_set1_epi8(16);
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) {
        uint64_t m;
        std::memcpy(&m, masks + 8 * g, sizeof(m));
        w[g] = _mm512_mask_add_epi8(w[g], _cvtu64_mask64(m), w[g], sixteen);
      }
    }
  }
}

// Lane r: row r's exact integer dot product with the activation block x.
inline __m512i BlockDot(const __m512i (&w)[kGroups], const int8_t* x,
                        int32_t correction) {
  // Two chains halve the dependent vpdpbusd latency.
  __m512i a = _mm512_set1_epi32(correction);
  __m512i b = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int g = 0; g < kGroups; g += 2) {
    a = _mm512_dpbusd_epi32(a, w[g], Broadcast4(x + 4 * g));
    b = _mm512_dpbusd_epi32(b, w[g + 1], Broadcast4(x + 4 * g + 4));
  }
  return _mm512_add_epi32(a, b);
}

// Q4_1, IQ4_NL, Q5_0 and Q5_1 as the reference sums them (ref/matmul.cc,
// MatMulUnpackedRows): the exact dot of the values and x over each half
// block (an operand of w + kOffset starts each chain at -kOffset x that
// half's activation sum, Q8Activations::s16), each scaled by d apart and
// added; Q4_1 and Q5_1 then add m x each half's activation sum, those two
// products added first. The caller takes fma(result, d_x, acc). Lane-wise
// the same IEEE operations in the same order: bit-identical.
template <DType kType>
inline __m512 HalfBlocks(const __m512i (&w)[kGroups], const int8_t* x,
                         const int32_t* s16, const uint8_t* block, __m512 wd) {
  constexpr int32_t kOffset = PackedBlock<kType>::kOffset;
  __m512i lo = _mm512_set1_epi32(-kOffset * s16[0]);
  __m512i hi = _mm512_set1_epi32(-kOffset * s16[1]);
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    lo = _mm512_dpbusd_epi32(lo, w[g], Broadcast4(x + 4 * g));
    hi = _mm512_dpbusd_epi32(hi, w[g + 4], Broadcast4(x + 16 + 4 * g));
  }
  const __m512 dots = _mm512_add_ps(_mm512_mul_ps(wd, _mm512_cvtepi32_ps(lo)),
                                    _mm512_mul_ps(wd, _mm512_cvtepi32_ps(hi)));
  if constexpr (!kHasMin<kType>) {
    return dots;
  } else {
    const __m512 wm = _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(block + PackedBlock<kType>::kMin)));
    return _mm512_add_ps(
        dots,
        _mm512_add_ps(
            _mm512_mul_ps(wm, _mm512_set1_ps(static_cast<float>(s16[0]))),
            _mm512_mul_ps(wm, _mm512_set1_ps(static_cast<float>(s16[1])))));
  }
}

// Fetches the lines that start within this block's bytes, kDistance bytes
// on: each line of a stream once.
template <DType kType, int64_t kDistance = kPrefetchBytes>
inline void PrefetchAhead(const uint8_t* block) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(block) + kDistance;
  for (uintptr_t line = (at + 63) & ~uintptr_t{63};
       line < at + kBlockBytes<kType>; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
  }
}

// y[t0 + t, r0 + r] for t < T and the first n_rows rows of the panel.
// prefetch: also fetch the weights kPrefetchBytes ahead (the first tile
// pass over a panel; later passes find it in cache).
template <DType kType, int T>
void PanelTile(const MatMulArgs& a, const uint8_t* panel, int64_t r0,
               int n_rows, int64_t t0, bool prefetch) {
  constexpr int32_t kOffset = PackedBlock<kType>::kOffset;
  const int64_t n_blocks = a.cols / kQk;
  const int8_t* xq[T];
  const float* xd[T];
  const int32_t* xs[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    xq[t] = a.xq.qs + (t0 + t) * a.xq.qs_stride;
    xd[t] = a.xq.d + (t0 + t) * a.xq.d_stride;
    xs[t] = a.xq.s + (t0 + t) * a.xq.d_stride;
  }
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();

  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = panel + b * kBlockBytes<kType>;
    if (prefetch) PrefetchAhead<kType>(block);
    __m512i w[kGroups];
    LoadBlock<kType>(block, w);
    const __m512 wd =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
            block + PackedBlock<kType>::kQuantBytes)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      if constexpr (kHalfScaled<kType>) {
        const int32_t* s16 = a.xq.s16 + 2 * (t0 + t) * a.xq.d_stride + 2 * b;
        acc[t] = _mm512_fmadd_ps(
            HalfBlocks<kType>(w, xq[t] + b * kQk, s16, block, wd),
            _mm512_set1_ps(xd[t][b]), acc[t]);
        continue;
      }
      const __m512i dot = BlockDot(w, xq[t] + b * kQk, -kOffset * xs[t][b]);
      const __m512 scale = _mm512_mul_ps(wd, _mm512_set1_ps(xd[t][b]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[t]);
    }
  }
  const auto rows = static_cast<__mmask16>((1u << n_rows) - 1);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(a.y + (t0 + t) * a.y_stride + r0, rows, acc[t]);
}

template <DType kType>
void PanelTokens(const MatMulArgs& a, const uint8_t* panel, int64_t r0,
                 int n_rows, int64_t t0, int64_t n_tokens, bool prefetch) {
  static_assert(kPrefillTokens == 8);
  switch (n_tokens) {
    case 1:
      return PanelTile<kType, 1>(a, panel, r0, n_rows, t0, prefetch);
    case 2:
      return PanelTile<kType, 2>(a, panel, r0, n_rows, t0, prefetch);
    case 3:
      return PanelTile<kType, 3>(a, panel, r0, n_rows, t0, prefetch);
    case 4:
      return PanelTile<kType, 4>(a, panel, r0, n_rows, t0, prefetch);
    case 5:
      return PanelTile<kType, 5>(a, panel, r0, n_rows, t0, prefetch);
    case 6:
      return PanelTile<kType, 6>(a, panel, r0, n_rows, t0, prefetch);
    case 7:
      return PanelTile<kType, 7>(a, panel, r0, n_rows, t0, prefetch);
    default:
      return PanelTile<kType, 8>(a, panel, r0, n_rows, t0, prefetch);
  }
}

// Decode of kDecodeStreams whole panels that lie apart in memory (rows
// r0[s] of panels[s]), block by block in step: the same operations per
// panel, in the same order, as PanelTile<kType, 1>.
template <DType kType>
void PanelsDecode(const MatMulArgs& a,
                  const uint8_t* const (&panels)[kDecodeStreams],
                  const int64_t (&r0)[kDecodeStreams]) {
  constexpr int32_t kOffset = PackedBlock<kType>::kOffset;
  const int64_t n_blocks = a.cols / kQk;
  __m512 acc[kDecodeStreams];
#pragma GCC unroll 4
  for (int s = 0; s < kDecodeStreams; ++s) acc[s] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m512 xd = _mm512_set1_ps(a.xq.d[b]);
    const int32_t correction = -kOffset * a.xq.s[b];
#pragma GCC unroll 4
    for (int s = 0; s < kDecodeStreams; ++s) {
      const uint8_t* block = panels[s] + b * kBlockBytes<kType>;
      PrefetchAhead<kType, kStreamPrefetchBytes>(block);
      __m512i w[kGroups];
      LoadBlock<kType>(block, w);
      const __m512 wd =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
              block + PackedBlock<kType>::kQuantBytes)));
      if constexpr (kHalfScaled<kType>) {
        acc[s] = _mm512_fmadd_ps(HalfBlocks<kType>(w, a.xq.qs + b * kQk,
                                                   a.xq.s16 + 2 * b, block, wd),
                                 xd, acc[s]);
        continue;
      }
      const __m512i dot = BlockDot(w, a.xq.qs + b * kQk, correction);
      acc[s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd, xd),
                               acc[s]);
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < kDecodeStreams; ++s)
    _mm512_storeu_ps(a.y + r0[s], acc[s]);
}

template <DType kType>
void MatMulPackedRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t panel_bytes = a.cols / kQk * kBlockBytes<kType>;
  // Decode reads the whole panels of the range as kDecodeStreams streams,
  // its equal parts in step (the panels left over go below). Two streams
  // against one measured 1.05-1.10x on Zen 5 (qwen2.5-0.5b Q4_0/Q8_0 and
  // llama3.2-1b Q4_0/Q8_0, whole decode steps); four with half the
  // prefetch distance are better again (kDecodeStreams says by how much).
  // Q5_0 too, since its fifth bits are masks: with both, qwen2.5-0.5b
  // Q4_K_M's Q5_0 gate/up read 54-62 GB/s instead of 45-50, and its whole
  // decode step ran 1.07x (median of 8 alternating runs, 0.97-1.17x).
  if (a.n_tokens == 1) {
    row_begin = PanelStreams<kDecodeStreams>(
        row_begin, row_end, [&](const int64_t(&r0)[kDecodeStreams]) {
          const uint8_t* panels[kDecodeStreams];
          for (int s = 0; s < kDecodeStreams; ++s)
            panels[s] = a.w + r0[s] / kPackRows * panel_bytes;
          PanelsDecode<kType>(a, panels, r0);
        });
  }
  // Panels are consecutive in memory, so a thread's rows are one sequential
  // stream, prefetched by the first tile pass over each panel; each panel
  // stays in cache while the other token tiles pass over it.
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kPackRows) {
    const uint8_t* panel = a.w + r0 / kPackRows * panel_bytes;
    const int n_rows =
        static_cast<int>(row_end - r0 < kPackRows ? row_end - r0 : kPackRows);
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kPrefillTokens) {
      const int64_t n = a.n_tokens - t0;
      PanelTokens<kType>(a, panel, r0, n_rows, t0,
                         n < kPrefillTokens ? n : kPrefillTokens, t0 == 0);
    }
  }
}

}  // namespace

void MatMulPackedRowsQ5_0(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  MatMulPackedRows<DType::kQ5_0>(args, row_begin, row_end);
}

void MatMulPackedRowsQ5_1(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  MatMulPackedRows<DType::kQ5_1>(args, row_begin, row_end);
}

void MatMulPackedRowsQ4_1(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  MatMulPackedRows<DType::kQ4_1>(args, row_begin, row_end);
}

void MatMulPackedRowsIQ4_NL(const MatMulArgs& args, int64_t row_begin,
                            int64_t row_end) {
  MatMulPackedRows<DType::kIQ4_NL>(args, row_begin, row_end);
}

void MatMulPackedRowsQ8_0(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  MatMulPackedRows<DType::kQ8_0>(args, row_begin, row_end);
}

void MatMulPackedRowsQ4_0(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  MatMulPackedRows<DType::kQ4_0>(args, row_begin, row_end);
}

}  // namespace redline::kernels::avx512
