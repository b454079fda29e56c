// AMX-INT8 prefill for Q8_0 / Q4_0 weights (Sapphire Rapids and later).
// Compiled with AVX-512 + AMX flags; reached only through the kAmx kernel
// table, which dispatch.cc enables after the OS granted tile state
// (arch_prctl ARCH_REQ_XCOMP_PERM). Everything else in that table (decode,
// float weights, ops) is the AVX-512 code.
//
// One TDPBSSD multiplies a tile of 16 weight rows x one 32-element block
// (A: s8, row-major)
// by the same block of 16 tokens (B: s8 in the VNNI layout, four
// consecutive elements of one token per dword), giving C = 16 rows x 16
// tokens of exact int32 block dot products. Each block has its own scales,
// so K stays at one block (32) and C is stored and scaled in f32 per block:
//   acc[row] (16 token lanes) += f32(C[row]) * (d_w[row, b] * d_x[tokens, b]).
// That AVX-512 epilogue (3 ops per row per block), not the tile multiply, is
// the cost, about 10x fewer vector ops per multiply-add than vpdpbusd.
//
// The activations' B tiles are built once per call (PackQ8Tiles), shared by
// all rows. Weight rows are copied (Q4_0: unpacked to s8 q - 8) into a
// contiguous stack panel, one row tile x kChunkBlocks at a time, reused by
// every token tile; a chunk continues the f32 sums of the previous one, so
// blocks are accumulated in order and outputs equal the reference's.
//
// Packed weights (packed.h) take the other orientation: a panel's block is
// already a B tile, the activations are the A tile (see MatMulPackedRows
// below). Its epilogue broadcasts two per-token scalars per token, so it
// gains less over the AVX-512 packed kernel (~1.1-1.2x on Q8_0 products).
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernel_table.h"
#include "kernels/packed.h"
#include "kernels/x86/intrinsics.h"

namespace redline::kernels::amx {
namespace {

constexpr int64_t kQk = 32;
constexpr int kTile = 16;  // rows of A and C, tokens of B and C
constexpr int64_t kQ8BlockBytes = 34;
constexpr int64_t kQ4BlockBytes = 18;
// Blocks per chunk of a row tile: the chunk's A panel (16 rows x 32 blocks
// x 32 bytes = 16 KiB) and one token tile's B tiles (16 KiB) stay in L1
// while the token tiles pass over the panel.
constexpr int64_t kChunkBlocks = 32;
// Below this many tokens the padded tiles waste more than AMX saves.
constexpr int64_t kMinTokens = 4;

// Tile registers: four C tiles take four consecutive blocks, so storing and
// scaling one block's C overlaps the next blocks' multiplies; A and B
// alternate. Macros, because GCC's tile intrinsics paste the register
// number into the instruction text.
#define RL_TMM_C0 0
#define RL_TMM_C1 1
#define RL_TMM_C2 2
#define RL_TMM_C3 3
#define RL_TMM_A0 4
#define RL_TMM_A1 5
#define RL_TMM_B0 6
#define RL_TMM_B1 7

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

constexpr TileConfig MakeTileConfig() {
  TileConfig cfg{};
  cfg.palette_id = 1;
  for (int c : {RL_TMM_C0, RL_TMM_C1, RL_TMM_C2, RL_TMM_C3}) {
    cfg.rows[c] = kTile;
    cfg.colsb[c] = kTile * 4;
  }
  for (int a : {RL_TMM_A0, RL_TMM_A1}) {
    cfg.rows[a] = kTile;
    cfg.colsb[a] = kQk;
  }
  for (int b : {RL_TMM_B0, RL_TMM_B1}) {
    cfg.rows[b] = kQk / 4;
    cfg.colsb[b] = kTile * 4;
  }
  return cfg;
}
// A constant, not a local: GCC's _tile_loadconfig declares only 8 bytes of
// its operand as read, so stores filling a local config can be dropped.
constexpr TileConfig kTileConfig = MakeTileConfig();

void LoadTileConfig() { _tile_loadconfig(&kTileConfig); }

// Tile loads are asm statements without a memory clobber: without this,
// stores to a buffer that is then only read by tile loads may be dropped.
inline void CompilerBarrier() { __asm__ volatile("" ::: "memory"); }

// Activation tiles: tile j, block b holds tokens [16j, 16j + 16) (zeros past
// n_tokens) as B[k][4t + i] = x[16j + t][32b + 4k + i], 8 rows of 64 bytes,
// and their 16 scales.
void PackQ8Tiles(const Q8Activations& xq, int64_t n_tokens, int64_t cols,
                 int64_t tile_begin, int64_t tile_end, int8_t* tiles,
                 float* tile_d) {
  const int64_t n_blocks = cols / kQk;
  const __m512i token_offsets = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(static_cast<int>(xq.qs_stride)));
  const __m512i d_offsets = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(static_cast<int>(xq.d_stride)));
  for (int64_t j = tile_begin; j < tile_end; ++j) {
    const int64_t left = n_tokens - j * kTile;
    const __mmask16 valid = left >= kTile
                                ? static_cast<__mmask16>(0xffff)
                                : static_cast<__mmask16>((1u << left) - 1);
    const int8_t* x = xq.qs + j * kTile * xq.qs_stride;
    const float* d = xq.d + j * kTile * xq.d_stride;
    for (int64_t b = 0; b < n_blocks; ++b) {
      int8_t* out = tiles + (j * n_blocks + b) * (kQk * kTile);
      for (int k = 0; k < kQk / 4; ++k) {
        const __m512i v =
            _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid,
                                        token_offsets, x + b * kQk + 4 * k, 1);
        _mm512_store_si512(static_cast<void*>(out + 64 * k), v);
      }
      _mm512_store_ps(tile_d + (j * n_blocks + b) * kTile,
                      _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid,
                                               d_offsets, d + b, 4));
    }
  }
}

// d_w of blocks [b0, b0 + nb) for 16 rows starting at `rows`, as
// dw[b][row] in f32.
template <int64_t kBlockBytes>
void LoadRowScales(const uint8_t* rows, int64_t row_bytes, int64_t b0,
                   int64_t nb, float* dw) {
  const __m512i offsets = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(static_cast<int>(row_bytes)));
  for (int64_t b = 0; b < nb; ++b) {
    const __m512i raw =
        _mm512_i32gather_epi32(offsets, rows + (b0 + b) * kBlockBytes, 1);
    _mm512_store_ps(dw + b * kTile,
                    _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw)));
  }
}

// Blocks [b0, b0 + nb) of 16 rows as s8 weights, out[row][32 * b + i]: the
// A panel, contiguous so each A tile load touches 8 cache lines rather than
// 16-32 (blocks are 34 or 18 bytes and straddle lines). Q4_0 becomes q - 8.
template <DType kType>
void UnpackRows(const uint8_t* rows, int64_t row_bytes, int64_t b0, int64_t nb,
                int8_t* out) {
  constexpr int64_t kBlockBytes =
      kType == DType::kQ8_0 ? kQ8BlockBytes : kQ4BlockBytes;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i eight = _mm256_set1_epi8(8);
  for (int r = 0; r < kTile; ++r) {
    const uint8_t* row = rows + r * row_bytes + b0 * kBlockBytes;
    int8_t* dst = out + r * (kChunkBlocks * kQk);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i q;
      if constexpr (kType == DType::kQ8_0) {
        q = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(row + b * kBlockBytes + 2));
      } else {
        const __m128i raw = _mm_loadu_si128(
            reinterpret_cast<const __m128i*>(row + b * kBlockBytes + 2));
        q = _mm256_sub_epi8(
            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw),
                             low4),
            eight);
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + b * kQk), q);
    }
  }
}

// acc[r] += f32(C[r]) * d_w[r] * d_x, for the 16 rows of one block.
inline void ScaleBlock(const int32_t* c, const float* dw, const float* dx,
                       __m512* acc) {
  const __m512 vdx = _mm512_load_ps(dx);
#pragma GCC unroll 16
  for (int r = 0; r < kTile; ++r) {
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(dw[r]), vdx);
    const __m512 dot = _mm512_cvtepi32_ps(
        _mm512_load_si512(static_cast<const void*>(c + r * kTile)));
    acc[r] = _mm512_fmadd_ps(dot, scale, acc[r]);
  }
}

// One block through the tiles: C = A(block b of the panel) x B(block b of
// token tile). kC, kA, kB are tile register numbers.
#define RL_TILE_BLOCK(kC, kA, kB, b)                          \
  do {                                                        \
    _tile_zero(kC);                                           \
    _tile_loadd(kA, panel + (b)*kQk, kChunkBlocks * kQk);     \
    _tile_loadd(kB, btiles + (b) * (kQk * kTile), kTile * 4); \
    _tile_dpbssd(kC, kA, kB);                                 \
  } while (0)

// Rows [r0, r0 + 16) of y for all tokens.
template <DType kType>
void RowTile(const MatMulArgs& a, int64_t r0) {
  constexpr int64_t kBlockBytes =
      kType == DType::kQ8_0 ? kQ8BlockBytes : kQ4BlockBytes;
  const int64_t n_blocks = a.cols / kQk;
  const int64_t n_tiles = (a.n_tokens + kTile - 1) / kTile;
  const uint8_t* rows = a.w + r0 * a.row_bytes;
  alignas(64) float dw[kChunkBlocks * kTile];
  alignas(64) int32_t c[4][kTile * kTile];
  alignas(64) int8_t panel[kTile * kChunkBlocks * kQk];
  alignas(64) float out[kTile * kTile];

  for (int64_t b0 = 0; b0 < n_blocks; b0 += kChunkBlocks) {
    const int64_t nb =
        n_blocks - b0 < kChunkBlocks ? n_blocks - b0 : kChunkBlocks;
    LoadRowScales<kBlockBytes>(rows, a.row_bytes, b0, nb, dw);
    UnpackRows<kType>(rows, a.row_bytes, b0, nb, panel);
    CompilerBarrier();

    for (int64_t j = 0; j < n_tiles; ++j) {
      const int8_t* btiles = a.xtiles + (j * n_blocks + b0) * (kQk * kTile);
      const float* dx = a.xtile_d + (j * n_blocks + b0) * kTile;
      const int64_t n_t =
          a.n_tokens - j * kTile < kTile ? a.n_tokens - j * kTile : kTile;
      // A later chunk continues the sums of the earlier ones from y (f32,
      // stored exactly), so blocks are accumulated in order across chunks,
      // as the reference does.
      __m512 acc[kTile];
      if (b0 == 0) {
        for (auto& v : acc) v = _mm512_setzero_ps();
      } else {
        for (int r = 0; r < kTile; ++r) {
          for (int64_t t = 0; t < kTile; ++t) {
            out[r * kTile + t] =
                t < n_t ? a.y[(j * kTile + t) * a.y_stride + r0 + r] : 0.0f;
          }
          acc[r] = _mm512_load_ps(out + r * kTile);
        }
      }
      int64_t b = 0;
      for (; b + 4 <= nb; b += 4) {
        RL_TILE_BLOCK(RL_TMM_C0, RL_TMM_A0, RL_TMM_B0, b);
        RL_TILE_BLOCK(RL_TMM_C1, RL_TMM_A1, RL_TMM_B1, b + 1);
        RL_TILE_BLOCK(RL_TMM_C2, RL_TMM_A0, RL_TMM_B0, b + 2);
        RL_TILE_BLOCK(RL_TMM_C3, RL_TMM_A1, RL_TMM_B1, b + 3);
        _tile_stored(RL_TMM_C0, c[0], kTile * 4);
        _tile_stored(RL_TMM_C1, c[1], kTile * 4);
        _tile_stored(RL_TMM_C2, c[2], kTile * 4);
        _tile_stored(RL_TMM_C3, c[3], kTile * 4);
        for (int i = 0; i < 4; ++i)
          ScaleBlock(c[i], dw + (b + i) * kTile, dx + (b + i) * kTile, acc);
      }
      for (; b < nb; ++b) {
        RL_TILE_BLOCK(RL_TMM_C0, RL_TMM_A0, RL_TMM_B0, b);
        _tile_stored(RL_TMM_C0, c[0], kTile * 4);
        ScaleBlock(c[0], dw + b * kTile, dx + b * kTile, acc);
      }
      // acc[r] lane t -> y[16j + t, r0 + r].
      for (int r = 0; r < kTile; ++r) _mm512_store_ps(out + r * kTile, acc[r]);
      for (int64_t t = 0; t < n_t; ++t) {
        float* y = a.y + (j * kTile + t) * a.y_stride + r0;
        for (int r = 0; r < kTile; ++r) y[r] = out[r * kTile + t];
      }
    }
  }
}

#undef RL_TILE_BLOCK

template <DType kType>
void MatMulRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const MatMulRowsFn vnni =
      kType == DType::kQ8_0 ? &avx512::MatMulRowsQ8_0 : &avx512::MatMulRowsQ4_0;
  if (a.n_tokens < kMinTokens || a.xtiles == nullptr) {
    vnni(a, row_begin, row_end);
    return;
  }
  const int64_t full_end = row_begin + (row_end - row_begin) / kTile * kTile;
  if (full_end > row_begin) {
    LoadTileConfig();
    for (int64_t r = row_begin; r < full_end; r += kTile) RowTile<kType>(a, r);
    _tile_release();
  }
  if (full_end < row_end) vnni(a, full_end, row_end);
}

// ---------------------------------------------------------------------------
// Packed weights (packed.h). The panel's block is already a B tile: 8 rows
// of [16 weight rows][4 bytes], u8 (Q8_0: w + 128; Q4_0: nibbles w + 8,
// unpacked to bytes first). A is 16 tokens x one block of activations (s8),
// loaded straight from the Q8 rows. TDPBSUD (s8 x u8) gives
// C[token][row] = dot + offset * sum(x block), and the epilogue does for each
// token exactly what the AVX-512 packed kernel does:
//   acc[t] = fma(f32(C[t] - offset * s[t][b]), d_w[rows] * d_x[t][b], acc[t])
// blocks in order, so the outputs are bit-identical to the reference.

// Q4_0: the B tile of one block, nibbles to bytes. Group g's low nibbles are
// activation group g, high nibbles group g + 4 (packed.h).
inline void UnpackQ4Tile(const uint8_t* block, uint8_t* tile) {
  const __m512i mask = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512i q = _mm512_loadu_si512(block + 64 * g);
    _mm512_store_si512(tile + 64 * g, _mm512_and_si512(q, mask));
    _mm512_store_si512(tile + 64 * (g + 4),
                       _mm512_and_si512(_mm512_srli_epi16(q, 4), mask));
  }
}

// acc[t] += f32(C[t] - offset * s[t]) * (d_w * d_x[t]) for the 16 tokens of
// one block (C: [token][row] int32, as stored from a C tile).
template <int32_t kOffset>
inline void ScalePackedBlock(const int32_t* c, __m512 wd, const float* xd,
                             const int32_t* xs, int64_t stride, __m512* acc) {
#pragma GCC unroll 16
  for (int t = 0; t < kTile; ++t) {
    const __m512i dot = _mm512_sub_epi32(
        _mm512_load_si512(static_cast<const void*>(c + t * kTile)),
        _mm512_set1_epi32(kOffset * xs[t * stride]));
    const __m512 scale = _mm512_mul_ps(wd, _mm512_set1_ps(xd[t * stride]));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[t]);
  }
}

// Tokens [t0, t0 + 16) x the first n_rows rows of one panel. Four blocks at
// a time in four C tiles, so the tile products of later blocks overlap the
// epilogues of earlier ones (which still run in block order).
template <DType kType>
void PackedPanelTile(const MatMulArgs& a, const uint8_t* panel, int64_t r0,
                     int n_rows, int64_t t0) {
  using Block = PackedBlock<kType>;
  constexpr int64_t kBlockBytes = Block::kBytes;
  const int64_t n_blocks = a.cols / kQk;
  const int64_t stride = a.xq.d_stride;
  alignas(64) int32_t c[4][kTile * kTile];
  alignas(64) uint8_t q4_tiles[4][kQk * kTile];
  const int8_t* x = a.xq.qs + t0 * a.xq.qs_stride;
  const float* xd = a.xq.d + t0 * stride;
  const int32_t* xs = a.xq.s + t0 * stride;
  __m512 acc[kTile];
#pragma GCC unroll 16
  for (int t = 0; t < kTile; ++t) acc[t] = _mm512_setzero_ps();
  auto b_tile = [&](int64_t b, int i) -> const void* {
    const uint8_t* block = panel + b * kBlockBytes;
    if constexpr (kType == DType::kQ8_0) {
      return block;
    } else {
      UnpackQ4Tile(block, q4_tiles[i]);
      return q4_tiles[i];
    }
  };
  auto scales = [&](int64_t b) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
        panel + b * kBlockBytes + Block::kQuantBytes)));
  };
#define RL_PACKED_BLOCK(kC, kA, kB, b, i)         \
  do {                                            \
    const void* bt = b_tile(b, i);                \
    CompilerBarrier();                            \
    _tile_zero(kC);                               \
    _tile_loadd(kA, x + (b)*kQk, a.xq.qs_stride); \
    _tile_loadd(kB, bt, kTile * 4);               \
    _tile_dpbsud(kC, kA, kB);                     \
  } while (0)
  int64_t b = 0;
  for (; b + 4 <= n_blocks; b += 4) {
    RL_PACKED_BLOCK(RL_TMM_C0, RL_TMM_A0, RL_TMM_B0, b, 0);
    RL_PACKED_BLOCK(RL_TMM_C1, RL_TMM_A1, RL_TMM_B1, b + 1, 1);
    RL_PACKED_BLOCK(RL_TMM_C2, RL_TMM_A0, RL_TMM_B0, b + 2, 2);
    RL_PACKED_BLOCK(RL_TMM_C3, RL_TMM_A1, RL_TMM_B1, b + 3, 3);
    _tile_stored(RL_TMM_C0, c[0], kTile * 4);
    _tile_stored(RL_TMM_C1, c[1], kTile * 4);
    _tile_stored(RL_TMM_C2, c[2], kTile * 4);
    _tile_stored(RL_TMM_C3, c[3], kTile * 4);
    CompilerBarrier();
    for (int i = 0; i < 4; ++i) {
      ScalePackedBlock<Block::kOffset>(c[i], scales(b + i), xd + b + i,
                                       xs + b + i, stride, acc);
    }
  }
  for (; b < n_blocks; ++b) {
    RL_PACKED_BLOCK(RL_TMM_C0, RL_TMM_A0, RL_TMM_B0, b, 0);
    _tile_stored(RL_TMM_C0, c[0], kTile * 4);
    CompilerBarrier();
    ScalePackedBlock<Block::kOffset>(c[0], scales(b), xd + b, xs + b, stride,
                                     acc);
  }
#undef RL_PACKED_BLOCK
  const auto rows = static_cast<__mmask16>((1u << n_rows) - 1);
#pragma GCC unroll 16
  for (int t = 0; t < kTile; ++t)
    _mm512_mask_storeu_ps(a.y + (t0 + t) * a.y_stride + r0, rows, acc[t]);
}

// Whole 16-token tiles through AMX; decode and the last n_tokens % 16
// tokens through the AVX-512 packed kernel (the same arithmetic).
template <DType kType>
void MatMulPackedRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const MatMulRowsFn vnni = kType == DType::kQ8_0
                                ? &avx512::MatMulPackedRowsQ8_0
                                : &avx512::MatMulPackedRowsQ4_0;
  const int64_t full_tokens = a.n_tokens / kTile * kTile;
  if (full_tokens == 0) {
    vnni(a, row_begin, row_end);
    return;
  }
  using Block = PackedBlock<kType>;
  const int64_t panel_bytes = a.cols / kQk * Block::kBytes;
  LoadTileConfig();
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kTile) {
    const uint8_t* panel = a.w + r0 / kTile * panel_bytes;
    const int n_rows =
        static_cast<int>(row_end - r0 < kTile ? row_end - r0 : kTile);
    for (int64_t t0 = 0; t0 < full_tokens; t0 += kTile)
      PackedPanelTile<kType>(a, panel, r0, n_rows, t0);
  }
  _tile_release();
  if (full_tokens < a.n_tokens) {
    MatMulArgs tail = a;
    tail.n_tokens = a.n_tokens - full_tokens;
    tail.xq.qs += full_tokens * a.xq.qs_stride;
    tail.xq.d += full_tokens * a.xq.d_stride;
    tail.xq.s += full_tokens * a.xq.d_stride;
    tail.xq.s16 += 2 * full_tokens * a.xq.d_stride;
    tail.y += full_tokens * a.y_stride;
    vnni(tail, row_begin, row_end);
  }
}

}  // namespace

bool RequestTilePermission() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

void FillTable(KernelTable* table) {
  avx512::FillTable(table);
  table->isa = Isa::kAmx;
  table->pack_q8_tiles = &PackQ8Tiles;
  table->matmul[static_cast<int>(DType::kQ8_0)] = &MatMulRows<DType::kQ8_0>;
  table->matmul[static_cast<int>(DType::kQ4_0)] = &MatMulRows<DType::kQ4_0>;
  table->matmul_packed[static_cast<int>(DType::kQ8_0)] =
      &MatMulPackedRows<DType::kQ8_0>;
  table->matmul_packed[static_cast<int>(DType::kQ4_0)] =
      &MatMulPackedRows<DType::kQ4_0>;
}

}  // namespace redline::kernels::amx

#undef RL_TMM_C0
#undef RL_TMM_C1
#undef RL_TMM_C2
#undef RL_TMM_C3
#undef RL_TMM_A0
#undef RL_TMM_A1
#undef RL_TMM_B0
#undef RL_TMM_B1
