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
// order, started at zero. Decode and batches of up to kTileTokens tokens
// run the chain in one go; larger batches run it kChunkCols columns at a
// time, each chunk's tile starting from the value the previous chunk
// stored. So every token's outputs equal its decode's bit for bit whatever
// the number of tokens, the tile, the thread count or the other sequences
// in the batch: speculative verification and batched decoding see plain
// decoding's logits.
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
// Batches of up to this many tokens take the direct tiles four panels at a
// time (more take two).
constexpr int kDirectFewTokens = 4;
// Columns per converted chunk: 256 x 2 panels x 64 bytes = 32 KiB of f32,
// which stays in L1 while every token tile passes over it.
constexpr int64_t kChunkCols = 256;
// 64-byte lines of one panel's chunk: the next chunk's weights are fetched
// a line per column while the current one is multiplied.
constexpr int64_t kChunkLines = kChunkCols * kColumnBytes / 64;
static_assert(kChunkCols / kChunkLines == kPanels);
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

// Converts columns [c0, c0 + n_cols) of one panel to f32 into buf:
// buf[c * stride + lane] = row lane of column c0 + c.
template <DType kType>
void ConvertChunk(const uint8_t* panel, int64_t c0, int64_t n_cols, float* buf,
                  int64_t stride) {
  for (int64_t c = 0; c < n_cols; ++c) {
    _mm512_store_ps(buf + c * stride,
                    LoadColumn<kType>(panel + (c0 + c) * kColumnBytes));
  }
}

// y[t0 + t, r0 + 16p + lane] = its chain continued over the chunk's n_cols
// columns (from the stored value when continue_chain, else from zero), for
// t < T, p < P: buf column c (panel p) times x[t0 + t, c0 + c].
// next: when not null, the first weight byte of the next chunk to convert
// (its panel q at next + q * panel_bytes); one of its lines is fetched per
// column, so the next conversion finds them in cache.
template <int P, int T>
void TileChunk(const MatMulArgs& a, const float* buf, int64_t n_cols,
               int64_t r0, const __mmask16 (&rows)[P], int64_t t0, int64_t c0,
               bool continue_chain, const uint8_t* next, int64_t panel_bytes) {
  const float* x[T];
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) x[t] = a.x + (t0 + t) * a.x_stride + c0;
  __m512 acc[P][T];
#pragma GCC unroll 2
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
      acc[p][t] =
          continue_chain
              ? _mm512_maskz_loadu_ps(
                    rows[p], a.y + (t0 + t) * a.y_stride + r0 + p * kPackRows)
              : _mm512_setzero_ps();
    }
  }
  for (int64_t c = 0; c < n_cols; ++c) {
    if (next != nullptr) {
      _mm_prefetch(
          reinterpret_cast<const char*>(next + (c / kChunkLines) * panel_bytes +
                                        (c % kChunkLines) * 64),
          _MM_HINT_T1);
    }
    __m512 w[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p)
      w[p] = _mm512_load_ps(buf + (c * P + p) * kPackRows);
    FmaColumn<P, T>(w, x, c, acc);
  }
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) {
    float* y = a.y + (t0 + t) * a.y_stride + r0;
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p)
      _mm512_mask_storeu_ps(y + p * kPackRows, rows[p], acc[p][t]);
  }
}

template <int P>
using TileFn = void (*)(const MatMulArgs&, const float*, int64_t, int64_t,
                        const __mmask16 (&)[P], int64_t, int64_t, bool,
                        const uint8_t*, int64_t);

// kTailTiles<P>[n - 1] is the tile of n tokens, n < kTileTokens.
template <int P, int... kN>
constexpr std::array<TileFn<P>, sizeof...(kN)> TailTiles(
    std::integer_sequence<int, kN...>) {
  return {&TileChunk<P, kN + 1>...};
}
template <int P>
constexpr auto kTailTiles =
    TailTiles<P>(std::make_integer_sequence<int, kTileTokens - 1>{});

template <int P>
void TokenTiles(const MatMulArgs& a, const float* buf, int64_t n_cols,
                int64_t r0, const __mmask16 (&rows)[P], int64_t c0,
                bool continue_chain, const uint8_t* next, int64_t panel_bytes) {
  int64_t t0 = 0;
  for (; t0 + kTileTokens <= a.n_tokens; t0 += kTileTokens) {
    TileChunk<P, kTileTokens>(a, buf, n_cols, r0, rows, t0, c0, continue_chain,
                              t0 == 0 ? next : nullptr, panel_bytes);
  }
  // The last tile, of fewer than kTileTokens tokens.
  const int64_t left = a.n_tokens - t0;
  if (left > 0) {
    kTailTiles<P>[left - 1](a, buf, n_cols, r0, rows, t0, c0, continue_chain,
                            t0 == 0 ? next : nullptr, panel_bytes);
  }
}

// Batches of up to kTileTokens tokens, one tile: y[t, r0 + 16p + lane]
// for t < T, p < P, each the whole chain over all columns, the weights
// converted as they are loaded: with one tile per panel a converted copy
// would be read once. Measured against the row layout's 4 x 4 tiles
// (kernels_bench SmallBatch, 2 threads, two alternating rounds): cold
// 4864 x 896 and 8192 x 2048 1.5-2.2x with 2, 4 and 9 tokens (four panels
// at once for up to 4 tokens: 1.1-1.4x over two); weights in L2
// (SmallBatchHot, 256 x 2048) 0.51x with 2 tokens, 0.81x with 4, 1.33x
// with 9, where a conversion per weight and use weighs against few FMAs.
template <DType kType, int P, int T>
void DirectTile(const MatMulArgs& a, const uint8_t* panel, int64_t panel_bytes,
                int64_t r0, const __mmask16 (&rows)[P]) {
  const float* x[T];
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) x[t] = a.x + t * a.x_stride;
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
      _mm512_mask_storeu_ps(a.y + t * a.y_stride + r0 + p * kPackRows, rows[p],
                            acc[p][t]);
    }
  }
}

template <int P>
using DirectFn = void (*)(const MatMulArgs&, const uint8_t*, int64_t, int64_t,
                          const __mmask16 (&)[P]);

// kDirectTiles<kType, P, kMaxT>[n - 1] is the direct tile of n tokens.
template <DType kType, int P, int... kN>
constexpr std::array<DirectFn<P>, sizeof...(kN)> DirectTiles(
    std::integer_sequence<int, kN...>) {
  return {&DirectTile<kType, P, kN + 1>...};
}
template <DType kType, int P, int kMaxT>
constexpr auto kDirectTiles =
    DirectTiles<kType, P>(std::make_integer_sequence<int, kMaxT>{});

// P panels at a time, then the panels left one at a time. Each output is
// one chain whatever P is.
template <DType kType, int P, int kMaxT>
void PanelsDirect(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t panel_bytes = a.cols * kColumnBytes;
  const int64_t panels = (row_end - row_begin + kPackRows - 1) / kPackRows;
  const int64_t first = row_begin / kPackRows;
  int64_t p = 0;
  for (; p + P <= panels; p += P) {
    __mmask16 rows[P];
    for (int q = 0; q < P; ++q)
      rows[q] = FirstLanes(row_end - row_begin - (p + q) * kPackRows);
    kDirectTiles<kType, P, kMaxT>[a.n_tokens - 1](
        a, a.w + (first + p) * panel_bytes, panel_bytes,
        row_begin + p * kPackRows, rows);
  }
  for (; p < panels; ++p) {
    const __mmask16 rows[1] = {FirstLanes(row_end - row_begin - p * kPackRows)};
    kDirectTiles<kType, 1, kMaxT>[a.n_tokens - 1](
        a, a.w + (first + p) * panel_bytes, panel_bytes,
        row_begin + p * kPackRows, rows);
  }
}

// Batches: each thread converts a chunk of two panels once into an f32
// buffer laid out column by column ([col][32 rows], 32 KiB, in L1), then
// every token tile passes over it with two aligned loads and
// 2 x kTileTokens FMAs per column.
template <DType kType>
void PanelsBatch(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int64_t kPairRows = kPanels * kPackRows;
  const int64_t panel_bytes = a.cols * kColumnBytes;
  alignas(64) float buf[kChunkCols * kPairRows];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kPairRows) {
    const int64_t n_rows = row_end - r0;
    const uint8_t* panel = a.w + r0 / kPackRows * panel_bytes;
    for (int64_t c0 = 0; c0 < a.cols; c0 += kChunkCols) {
      const int64_t n_cols =
          a.cols - c0 < kChunkCols ? a.cols - c0 : kChunkCols;
      // The chunk converted after this one: the next columns, else the
      // next rows' first columns.
      const uint8_t* next = nullptr;
      if (c0 + kChunkCols < a.cols) {
        next = panel + (c0 + kChunkCols) * kColumnBytes;
      } else if (r0 + kPairRows < row_end) {
        next = panel + kPanels * panel_bytes;
      }
      const bool continue_chain = c0 > 0;
      if (n_rows > kPackRows) {
        ConvertChunk<kType>(panel, c0, n_cols, buf, kPairRows);
        ConvertChunk<kType>(panel + panel_bytes, c0, n_cols, buf + kPackRows,
                            kPairRows);
        const __mmask16 rows[2] = {FirstLanes(kPackRows),
                                   FirstLanes(n_rows - kPackRows)};
        TokenTiles<2>(a, buf, n_cols, r0, rows, c0, continue_chain, next,
                      panel_bytes);
      } else {
        ConvertChunk<kType>(panel, c0, n_cols, buf, kPackRows);
        const __mmask16 rows[1] = {FirstLanes(n_rows)};
        TokenTiles<1>(a, buf, n_cols, r0, rows, c0, continue_chain, next,
                      panel_bytes);
      }
    }
  }
}

template <DType kType>
void HalfPackedRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.n_tokens == 1) return PanelsDecode<kType>(a, row_begin, row_end);
  // Up to 4 tokens, four panels at once: at least 8 independent FMA
  // chains, as many as the two FMA pipes' latency needs.
  if (a.n_tokens <= kDirectFewTokens)
    return PanelsDirect<kType, 4, kDirectFewTokens>(a, row_begin, row_end);
  if (a.n_tokens <= kTileTokens)
    return PanelsDirect<kType, 2, kTileTokens>(a, row_begin, row_end);
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
