// AVX-512 prefill products with F16 and BF16 weights (more than
// kHalfRowTokens tokens). Compiled with AVX-512 flags; reached only through
// the kernel table.
//
// Why: the row-layout tiles (FloatTile in matmul_avx512.cc) convert every
// binary16 weight again for each 4-token tile and end every output in a
// horizontal sum, so converts, loads and shuffles share the FMA ports with
// the products. Here each thread converts a chunk of two 16-row panels once
// into an f32 buffer laid out column by column ([col][32 rows], 32 KiB, in
// L1), and then every token tile passes over it: per column two aligned
// loads and 2 x kTileTokens FMAs with a broadcast activation, with no
// shuffles and no horizontal sums. Lanes are rows, so an output is one
// lane's running sum. Measured on Zen 5 (2 threads, 128 tokens, the same
// process alternating both kernels): 1.06-1.13x FloatTile on the qwen2.5
// and llama3.2 shapes (380-430 GFLOP/s, 78-88 % of the FMA peak of 490),
// 1.45x at 512 tokens, BF16 1.8x; the tile loop alone on hot data runs at
// the peak, the conversion takes about a tenth of the time.
//
// Order of the sums (documented because tests and users compare results):
// each output y[t, r] is the f32 FMA sum over the columns of one chunk of
// kChunkCols columns in column order, started at zero; chunk sums are then
// added to y in chunk order. The order depends only on cols, not on the
// tile, the thread count or n_tokens.
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/kernel_table.h"
#include "kernels/x86/intrinsics.h"

namespace redline::kernels::avx512 {
namespace {

constexpr int64_t kPanelRows = 16;  // rows per panel: one zmm per column
constexpr int kPanels = 2;          // panels converted and multiplied at once
// Tokens per tile: kPanels x kTileTokens = 24 accumulators plus the two
// weight vectors fit the 32 zmm registers.
constexpr int kTileTokens = 12;
// Columns per converted chunk: 256 x 2 panels x 64 bytes = 32 KiB, which
// stays in L1 while every token tile passes over it.
constexpr int64_t kChunkCols = 256;
// 64-byte lines of one row's chunk (binary16 or bfloat16 weights); one
// line per column of a chunk covers kChunkCols / kChunkLines = 32 rows.
constexpr int64_t kChunkLines = kChunkCols * 2 / 64;
static_assert(kChunkCols / kChunkLines == kPanels * kPanelRows);

inline __mmask16 FirstLanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff)
                 : static_cast<__mmask16>((1u << n) - 1);
}

// 16 f32 weights of one row from columns [c, c + n), n <= 16 (zeros past n).
template <DType kType>
inline __m512 LoadRow16(const uint8_t* row, int64_t c, int64_t n) {
  const __m256i bits =
      n >= 16
          ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c))
          : _mm256_maskz_loadu_epi16(FirstLanes(n), row + 2 * c);
  if constexpr (kType == DType::kF16) {
    return _mm512_cvtph_ps(bits);
  } else {
    static_assert(kType == DType::kBF16);
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
}

// In-register transpose of 16 x 16 floats: v[i] lane j becomes v[j] lane i.
inline void Transpose16(__m512 (&v)[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    for (int k = 0; k < 2; ++k) {
      v[i + 2 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(
          _mm512_castps_pd(t[i + k]), _mm512_castps_pd(t[i + 2 + k])));
      v[i + 2 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(
          _mm512_castps_pd(t[i + k]), _mm512_castps_pd(t[i + 2 + k])));
    }
  }
  // v[4q + k] now holds, in 128-bit lane L, rows 4q..4q + 3 of column
  // 4L + k; a 4 x 4 transpose of 128-bit lanes puts each column together.
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_f32x4(v[k], v[4 + k], 0x88);
    t[4 + k] = _mm512_shuffle_f32x4(v[k], v[4 + k], 0xdd);
    t[8 + k] = _mm512_shuffle_f32x4(v[8 + k], v[12 + k], 0x88);
    t[12 + k] = _mm512_shuffle_f32x4(v[8 + k], v[12 + k], 0xdd);
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
    v[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
    v[4 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88);
    v[12 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xdd);
  }
}

// Converts rows [r0, r0 + n_rows) (n_rows <= 16; missing rows are zeros),
// columns [c0, c0 + n_cols) of the weights into panel column by column:
// panel[c * stride + r] = w[r0 + r, c0 + c].
template <DType kType>
void ConvertPanel(const MatMulArgs& a, int64_t r0, int64_t n_rows, int64_t c0,
                  int64_t n_cols, float* panel, int64_t stride) {
  const uint8_t* rows[kPanelRows];
  for (int64_t r = 0; r < kPanelRows; ++r)
    rows[r] = a.w + (r0 + (r < n_rows ? r : 0)) * a.row_bytes;
  for (int64_t c = 0; c < n_cols; c += 16) {
    const int64_t n = n_cols - c < 16 ? n_cols - c : 16;
    __m512 v[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      v[r] = r < n_rows ? LoadRow16<kType>(rows[r], c0 + c, n)
                        : _mm512_setzero_ps();
    }
    Transpose16(v);
    for (int64_t j = 0; j < n; ++j)
      _mm512_store_ps(panel + (c + j) * stride, v[j]);
  }
}

// y[t0 + t, r0 + 16p + lane] (+)= sum over the chunk's n_cols columns of
// panel column c (panel p) times x[t0 + t, c0 + c], for t < T, p < P.
// next: when not null, the first weight byte of the next chunk to convert
// (kPanels x kPanelRows rows from there, a.row_bytes apart); one of its
// lines is fetched per column, so the next conversion finds them in cache.
template <int P, int T>
void TileChunk(const MatMulArgs& a, const float* panel, int64_t n_cols,
               int64_t r0, const __mmask16 (&rows)[P], int64_t t0, int64_t c0,
               bool accumulate, const uint8_t* next) {
  const float* x[T];
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) x[t] = a.x + (t0 + t) * a.x_stride + c0;
  __m512 acc[P][T];
#pragma GCC unroll 2
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < n_cols; ++c) {
    if (next != nullptr) {
      _mm_prefetch(
          reinterpret_cast<const char*>(next + (c / kChunkLines) * a.row_bytes +
                                        (c % kChunkLines) * 64),
          _MM_HINT_T1);
    }
    __m512 w[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p)
      w[p] = _mm512_load_ps(panel + (c * P + p) * kPanelRows);
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
      const __m512 xb = _mm512_set1_ps(x[t][c]);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p)
        acc[p][t] = _mm512_fmadd_ps(w[p], xb, acc[p][t]);
    }
  }
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) {
    float* y = a.y + (t0 + t) * a.y_stride + r0;
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      __m512 v = acc[p][t];
      if (accumulate)
        v = _mm512_add_ps(_mm512_maskz_loadu_ps(rows[p], y + p * kPanelRows),
                          v);
      _mm512_mask_storeu_ps(y + p * kPanelRows, rows[p], v);
    }
  }
}

template <int P>
using TileFn = void (*)(const MatMulArgs&, const float*, int64_t, int64_t,
                        const __mmask16 (&)[P], int64_t, int64_t, bool,
                        const uint8_t*);

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
void TokenTiles(const MatMulArgs& a, const float* panel, int64_t n_cols,
                int64_t r0, const __mmask16 (&rows)[P], int64_t c0,
                bool accumulate, const uint8_t* next) {
  int64_t t0 = 0;
  for (; t0 + kTileTokens <= a.n_tokens; t0 += kTileTokens) {
    TileChunk<P, kTileTokens>(a, panel, n_cols, r0, rows, t0, c0, accumulate,
                              t0 == 0 ? next : nullptr);
  }
  // The last tile, of fewer than kTileTokens tokens.
  const int64_t left = a.n_tokens - t0;
  if (left > 0) {
    kTailTiles<P>[left - 1](a, panel, n_cols, r0, rows, t0, c0, accumulate,
                            t0 == 0 ? next : nullptr);
  }
}

template <DType kType>
void HalfPrefillRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int64_t kPairRows = kPanels * kPanelRows;
  alignas(64) float panel[kChunkCols * kPanels * kPanelRows];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kPairRows) {
    const int64_t n_rows = row_end - r0;
    for (int64_t c0 = 0; c0 < a.cols; c0 += kChunkCols) {
      const int64_t n_cols =
          a.cols - c0 < kChunkCols ? a.cols - c0 : kChunkCols;
      const bool accumulate = c0 > 0;
      // The chunk converted after this one: the next columns, else the
      // next rows' first columns.
      const uint8_t* next = nullptr;
      if (c0 + kChunkCols < a.cols) {
        next = a.w + r0 * a.row_bytes + 2 * (c0 + kChunkCols);
      } else if (r0 + kPairRows < row_end) {
        next = a.w + (r0 + kPairRows) * a.row_bytes;
      }
      if (n_rows > kPanelRows) {
        ConvertPanel<kType>(a, r0, kPanelRows, c0, n_cols, panel, kPairRows);
        ConvertPanel<kType>(a, r0 + kPanelRows, n_rows - kPanelRows, c0, n_cols,
                            panel + kPanelRows, kPairRows);
        const __mmask16 rows[2] = {FirstLanes(kPanelRows),
                                   FirstLanes(n_rows - kPanelRows)};
        TokenTiles<2>(a, panel, n_cols, r0, rows, c0, accumulate, next);
      } else {
        ConvertPanel<kType>(a, r0, n_rows, c0, n_cols, panel, kPanelRows);
        const __mmask16 rows[1] = {FirstLanes(n_rows)};
        TokenTiles<1>(a, panel, n_cols, r0, rows, c0, accumulate, next);
      }
    }
  }
}

}  // namespace

void MatMulHalfPrefillRowsF16(const MatMulArgs& args, int64_t row_begin,
                              int64_t row_end) {
  HalfPrefillRows<DType::kF16>(args, row_begin, row_end);
}

void MatMulHalfPrefillRowsBF16(const MatMulArgs& args, int64_t row_begin,
                               int64_t row_end) {
  HalfPrefillRows<DType::kBF16>(args, row_begin, row_end);
}

}  // namespace redline::kernels::avx512
