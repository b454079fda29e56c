// AVX-512 products with F16 and BF16 weights in the panel layout (packed.h:
// [panel][column][16 rows]), decode and batches alike. Compiled with
// AVX-512 flags; reached only through the kernel table.
//
// Why panels: in a panel one column of 16 rows is 32 contiguous bytes, so a
// load and one conversion give a vector whose lanes are rows, and an FMA
// with the broadcast activation of that column advances 16 outputs at once:
// no horizontal sums and, in batches, no transposes. The row layout's
// batch kernel had to transpose 16 x 16 blocks in registers to get there
// (64 shuffles per 256 weights, about a tenth of a 128-token prefill).
//
// Order of the sums (documented because tests and users compare results):
// each output y[t, r] is one f32 FMA chain over the columns in column
// order, started at zero, in one go (decode and batches alike). So every
// token's outputs equal its decode's bit for bit whatever the number of
// tokens, the tile, the thread count or the other sequences in the batch:
// speculative verification and batched decoding see plain decoding's
// logits.
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/kernel_table.h"
#include "kernels/packed.h"
#include "kernels/x86/intrinsics.h"

namespace redline::kernels::avx512 {
namespace {

constexpr int64_t kColumnBytes = kHalfColumnBytes;
constexpr int kPanels = 2;  // panels converted and multiplied at once
// Tokens per tile: kPanels x kTileTokens = 24 accumulators plus the two
// weight vectors fit the 32 zmm registers.
constexpr int kTileTokens = 12;
// Batches of up to this many tokens take the tiles four panels at a time
// (more take two).
constexpr int kFewTokens = 4;
// Decode: panels in step, each stream fetched this far ahead (the row
// layout's decode measured four streams 2 KiB ahead best on Zen 5; a lone
// stream goes further ahead to hide the same latency).
constexpr int kDecodeStreams = 4;
constexpr int64_t kStreamAheadBytes = 2048;
constexpr int64_t kLoneAheadBytes = 8192;

#include "kernels/x86/panel_streams.inc"

inline __mmask16 FirstLanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff)
                 : static_cast<__mmask16>((1u << n) - 1);
}

// The 16 rows of one panel column as f32.
template <DType kType>
inline __m512 LoadColumn(const uint8_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (kType == DType::kF16) {
    return _mm512_cvtph_ps(bits);
  } else {
    static_assert(kType == DType::kBF16);
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
}

// acc[p][t] += w[p] * x[t][c] for every panel p and token t of a tile.
template <int P, int T>
inline void FmaColumn(const __m512 (&w)[P], const float* const (&x)[T],
                      int64_t c, __m512 (&acc)[P][T]) {
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) {
    const __m512 xb = _mm512_set1_ps(x[t][c]);
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p)
      acc[p][t] = _mm512_fmadd_ps(w[p], xb, acc[p][t]);
  }
}

// Decode: S panels in step, panel s at w[s] (rows r[s] .. of y, lanes past
// mask[s] not stored), each one FMA chain per lane over all columns.
template <DType kType, int S, int64_t kAhead>
void PanelsInStep(const MatMulArgs& a, const uint8_t* const (&w)[S],
                  const int64_t (&r)[S], const __mmask16 (&mask)[S]) {
  const float* x = a.x;
  __m512 acc[S];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) acc[s] = _mm512_setzero_ps();
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
      const __m512 xb = _mm512_set1_ps(x[c + j]);
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        acc[s] = _mm512_fmadd_ps(
            LoadColumn<kType>(w[s] + (c + j) * kColumnBytes), xb, acc[s]);
      }
    }
  }
  for (; c < a.cols; ++c) {
    const __m512 xb = _mm512_set1_ps(x[c]);
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      acc[s] = _mm512_fmadd_ps(LoadColumn<kType>(w[s] + c * kColumnBytes), xb,
                               acc[s]);
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s)
    _mm512_mask_storeu_ps(a.y + r[s], mask[s], acc[s]);
}

// The range's whole panels as kDecodeStreams streams in step, then the
// panels left one at a time. Each output's chain is the same either way.
template <DType kType>
void PanelsDecode(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int S = kDecodeStreams;
  const int64_t panel_bytes = a.cols * kColumnBytes;
  const int64_t left =
      PanelStreams<S>(row_begin, row_end, [&](const int64_t(&r)[S]) {
        const uint8_t* w[S];
        __mmask16 mask[S];
        for (int s = 0; s < S; ++s) {
          w[s] = a.w + r[s] / kPackRows * panel_bytes;
          mask[s] = FirstLanes(kPackRows);
        }
        PanelsInStep<kType, S, kStreamAheadBytes>(a, w, r, mask);
      });
  for (int64_t r0 = left; r0 < row_end; r0 += kPackRows) {
    const uint8_t* w[1] = {a.w + r0 / kPackRows * panel_bytes};
    const int64_t r[1] = {r0};
    const __mmask16 mask[1] = {FirstLanes(row_end - r0)};
    PanelsInStep<kType, 1, kLoneAheadBytes>(a, w, r, mask);
  }
}

// One tile: y[t0 + t, r0 + 16p + lane] for t < T, p < P, each the whole
// chain over all columns, the weights converted as they are loaded.
//
// Why no converted copy of the weights: on Zen 5 a conversion per weight
// vector and tile costs no FMA throughput (a loop of 24 independent FMA
// chains ran 220 GFLOP/s on one core with 0 or 2 conversions per 24 FMAs).
// Converting 256 columns of two panels once into an f32 buffer in L1 for
// the 12-token tiles to pass over, as this file did before, measured
// slower: kernels_bench Prefill/f16/avx512 packed, 2 threads, two
// alternating rounds, 0.95-1.16x per round for these tiles on the six
// shapes, above 1 in 10 of 12; whole llama3.2-1b F16 prefill of 128 tokens
// 1.06-1.15x in 5 alternating rounds (median 1.10x). Published port tables
// put Intel's zmm conversion on the FMA ports, where the 2 per 24 FMAs
// would take FMA slots; no such CPU was at hand to measure.
//
// Few tokens: measured against the row layout's 4 x 4 tiles (kernels_bench
// SmallBatch, 2 threads, two alternating rounds): cold 4864 x 896 and
// 8192 x 2048 1.5-2.2x with 2, 4 and 9 tokens (four panels at once for up
// to 4 tokens: 1.1-1.4x over two); weights in L2 (SmallBatchHot,
// 256 x 2048) 0.51x with 2 tokens, 0.81x with 4, 1.33x with 9, where a
// conversion per weight and use weighs against few FMAs.
template <DType kType, int P, int T>
void Tile(const MatMulArgs& a, const uint8_t* panel, int64_t panel_bytes,
          int64_t r0, const __mmask16 (&rows)[P], int64_t t0) {
  const float* x[T];
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) x[t] = a.x + (t0 + t) * a.x_stride;
  __m512 acc[P][T];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < a.cols; ++c) {
    __m512 w[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const uint8_t* col = panel + p * panel_bytes + c * kColumnBytes;
      if (c % 2 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(col + kStreamAheadBytes),
                     _MM_HINT_T0);
      }
      w[p] = LoadColumn<kType>(col);
    }
    FmaColumn<P, T>(w, x, c, acc);
  }
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      _mm512_mask_storeu_ps(a.y + (t0 + t) * a.y_stride + r0 + p * kPackRows,
                            rows[p], acc[p][t]);
    }
  }
}

template <int P>
using TileFn = void (*)(const MatMulArgs&, const uint8_t*, int64_t, int64_t,
                        const __mmask16 (&)[P], int64_t);

// kTiles<kType, P, kMaxT>[n - 1] is the tile of n tokens.
template <DType kType, int P, int... kN>
constexpr std::array<TileFn<P>, sizeof...(kN)> Tiles(
    std::integer_sequence<int, kN...>) {
  return {&Tile<kType, P, kN + 1>...};
}
template <DType kType, int P, int kMaxT>
constexpr auto kTiles =
    Tiles<kType, P>(std::make_integer_sequence<int, kMaxT>{});

// Panels [p, p + P) of the range (lanes past row_end not stored), tokens
// [t0, t0 + n): one tile.
template <DType kType, int P, int kMaxT>
void RunTile(const MatMulArgs& a, int64_t row_begin, int64_t row_end, int64_t p,
             int64_t t0, int64_t n) {
  const int64_t panel_bytes = a.cols * kColumnBytes;
  __mmask16 rows[P];
  for (int q = 0; q < P; ++q)
    rows[q] = FirstLanes(row_end - row_begin - (p + q) * kPackRows);
  kTiles<kType, P, kMaxT>[n - 1](
      a, a.w + (row_begin / kPackRows + p) * panel_bytes, panel_bytes,
      row_begin + p * kPackRows, rows, t0);
}

// Up to kMaxT tokens: P panels at a time, then the panels left one at a
// time. Each output is one chain whatever P is.
template <DType kType, int P, int kMaxT>
void PanelsFewTokens(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t panels = (row_end - row_begin + kPackRows - 1) / kPackRows;
  int64_t p = 0;
  for (; p + P <= panels; p += P)
    RunTile<kType, P, kMaxT>(a, row_begin, row_end, p, 0, a.n_tokens);
  for (; p < panels; ++p)
    RunTile<kType, 1, kMaxT>(a, row_begin, row_end, p, 0, a.n_tokens);
}

// Batches: each pair of panels takes every token tile in turn, so its
// weights (2 x 32 bytes a column) are read from memory by the first tile
// and from L2 by the others. Tried and not kept: groups of up to 4 pairs
// (512 KiB of weights) passed over by each tile in turn, so a tile's
// activations are read from L3 once per group: llama3.2-1b F16 prefill
// of 128 tokens, 5 alternating rounds, 0.96-1.01x.
template <DType kType>
void PanelsBatch(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t panels = (row_end - row_begin + kPackRows - 1) / kPackRows;
  int64_t p = 0;
  for (; p + kPanels <= panels; p += kPanels) {
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTileTokens) {
      RunTile<kType, kPanels, kTileTokens>(
          a, row_begin, row_end, p, t0,
          a.n_tokens - t0 < kTileTokens ? a.n_tokens - t0 : kTileTokens);
    }
  }
  for (; p < panels; ++p) {
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTileTokens) {
      RunTile<kType, 1, kTileTokens>(
          a, row_begin, row_end, p, t0,
          a.n_tokens - t0 < kTileTokens ? a.n_tokens - t0 : kTileTokens);
    }
  }
}

template <DType kType>
void HalfPackedRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.n_tokens == 1) return PanelsDecode<kType>(a, row_begin, row_end);
  // Up to 4 tokens, four panels at once: at least 8 independent FMA
  // chains, as many as the two FMA pipes' latency needs.
  if (a.n_tokens <= kFewTokens)
    return PanelsFewTokens<kType, 4, kFewTokens>(a, row_begin, row_end);
  if (a.n_tokens <= kTileTokens)
    return PanelsFewTokens<kType, 2, kTileTokens>(a, row_begin, row_end);
  PanelsBatch<kType>(a, row_begin, row_end);
}

}  // namespace

void MatMulPackedRowsF16(const MatMulArgs& args, int64_t row_begin,
                         int64_t row_end) {
  HalfPackedRows<DType::kF16>(args, row_begin, row_end);
}

void MatMulPackedRowsBF16(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end) {
  HalfPackedRows<DType::kBF16>(args, row_begin, row_end);
}

}  // namespace redline::kernels::avx512
