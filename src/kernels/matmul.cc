#include "kernels/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/float16.h"
#include "kernels/kernel_table.h"
#include "kernels/packed.h"

namespace redline::kernels {
namespace {

constexpr int64_t kScratchAlign = 64;

int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Below this many activation values, quantizing on one thread is cheaper
// than waking the pool for it.
constexpr int64_t kParallelQuantizeMin = 1 << 15;

// Below this many multiply-adds (weights x tokens over a call's matrices,
// about 2.5 us of one core) a product runs on the calling thread: handing
// half of it to another core costs more than it saves. The products of
// tiny models' decode steps (TinyStories-656K: 16-98 K) fall below it;
// every product of qwen2.5-0.5b and larger is far above. Measured on Zen 5,
// `bench-model -t 2 -n 128`, alternating binaries, 4 rounds: decode
// TinyStories-656K F16 18.1-19.4 k tok/s before, 27.3-33.1 k after;
// stories260K 10.1-12.0 k (one round 31.7 k) before, 19.1-22.0 k after.
constexpr int64_t kSerialProductMax = int64_t{1} << 18;

// Rows per work unit of the row split. Small enough to balance 896-row
// matrices over a few threads, a multiple of every row tile (<= 16) and one
// panel of packed weights.
constexpr int64_t kRowGrain = 16;
static_assert(kRowGrain % kPackRows == 0);

// Tokens per AMX tile (MatMulArgs::xtiles).
constexpr int64_t kTileTokens = 16;

int64_t Q8QsStride(int64_t cols) { return RoundUp(cols + 64, 128); }
int64_t Q8DStride(int64_t cols) { return RoundUp(cols / kQkBlock + 16, 16); }

// Scratch of a quantized MatMul, from the aligned start:
//   qs     [n_tokens, Q8QsStride]   int8
//   d      [n_tokens, Q8DStride]    f32
//   s      [n_tokens, Q8DStride]    int32
//   s16    [n_tokens, 2 * Q8DStride] int32
//   xtiles [n_tiles, n_blocks, 512] int8   (n_tokens > 1 only; AMX layout)
//   xtile_d[n_tiles, n_blocks, 16]  f32
// The tile copy is reserved whatever the ISA, so the size does not change
// with SetActiveIsa.
struct ScratchLayout {
  int64_t qs_stride, d_stride, n_tiles, n_blocks;
  int64_t qs_bytes, d_bytes, s_bytes, s16_bytes, tiles_bytes, tile_d_bytes;

  ScratchLayout(int64_t cols, int64_t n_tokens)
      : qs_stride(Q8QsStride(cols)),
        d_stride(Q8DStride(cols)),
        n_tiles(n_tokens > 1 ? (n_tokens + kTileTokens - 1) / kTileTokens : 0),
        n_blocks(cols / kQkBlock),
        qs_bytes(n_tokens * qs_stride),
        d_bytes(n_tokens * d_stride * static_cast<int64_t>(sizeof(float))),
        s_bytes(n_tokens * d_stride * static_cast<int64_t>(sizeof(int32_t))),
        s16_bytes(2 * s_bytes),
        tiles_bytes(n_tiles * n_blocks * kQkBlock * kTileTokens),
        tile_d_bytes(n_tiles * n_blocks * kTileTokens *
                     static_cast<int64_t>(sizeof(float))) {}

  int64_t Total() const {
    return qs_bytes + d_bytes + s_bytes + s16_bytes + tiles_bytes +
           tile_d_bytes;
  }
};

// Scratch of the binary16 activations of F16 weights, after the quantized
// layout (a group may mix F16 and quantized matrices):
//   rounded [n_tokens, HalfRoundedStride(cols)] f32   x rounded to binary16
//   bits    [n_tokens, cols] u16                     the same values
//
// Floats from one token of `rounded` to the next: cols rounded up to whole
// 64-byte lines, plus one line when that count is even. Why: the prefill
// tiles read one line of each of up to 12 tokens at the same column; with
// a stride of a multiple of 4 KiB (cols 1024, 2048, 8192, ...) all of them
// fall in one L1 set and evict the converted weight panel beside them. An
// odd number of lines puts consecutive tokens in different sets. Measured
// on Zen 5 (2 threads, 128 tokens, the same process alternating strides):
// 2048x2048, 8192x2048 and 2048x8192 F16 products 1.21-1.23x, whole
// llama3.2-1b F16 prefill 1.20x (128 and 512 tokens); no change on the
// qwen2.5-0.5b shapes (896 and 4864 columns are apart already).
int64_t HalfRoundedStride(int64_t cols) {
  const int64_t lines = (cols + 15) / 16;
  return 16 * (lines % 2 == 0 ? lines + 1 : lines);
}
int64_t HalfRoundedBytes(int64_t cols, int64_t n_tokens) {
  return RoundUp(
      n_tokens * HalfRoundedStride(cols) * static_cast<int64_t>(sizeof(float)),
      kScratchAlign);
}
int64_t HalfBytes(int64_t cols, int64_t n_tokens) {
  return HalfRoundedBytes(cols, n_tokens) +
         RoundUp(n_tokens * cols * static_cast<int64_t>(sizeof(uint16_t)),
                 kScratchAlign);
}

}  // namespace

size_t MatMulScratchBytes(DType weight_type, int64_t cols, int64_t n_tokens) {
  if (weight_type == DType::kF16) {
    return static_cast<size_t>(kScratchAlign +
                               ScratchLayout(cols, n_tokens).Total() +
                               HalfBytes(cols, n_tokens));
  }
  if (!IsQuantized(weight_type)) return 0;
  return static_cast<size_t>(kScratchAlign +
                             ScratchLayout(cols, n_tokens).Total());
}

namespace {

// The scratch's first kScratchAlign-aligned byte, after checking that it
// holds what `type` needs.
std::byte* AlignedScratch(std::span<std::byte> scratch, DType type,
                          int64_t cols, int64_t n_tokens) {
  RL_DCHECK(scratch.size() >= MatMulScratchBytes(type, cols, n_tokens))
      << "scratch " << scratch.size() << " < "
      << MatMulScratchBytes(type, cols, n_tokens);
  const auto base = reinterpret_cast<uintptr_t>(scratch.data());
  const uintptr_t aligned =
      (base + kScratchAlign - 1) & ~static_cast<uintptr_t>(kScratchAlign - 1);
  return reinterpret_cast<std::byte*>(aligned);
}

// Quantizes x into the scratch (and packs AMX tiles when the table wants
// them); returns the activations as the row kernels see them.
void PrepareQuantized(const KernelTable& kernels, const float* x, int64_t cols,
                      int64_t n_tokens, std::span<std::byte> scratch,
                      ThreadPool& pool, MatMulArgs* args) {
  const ScratchLayout layout(cols, n_tokens);
  auto* qs = reinterpret_cast<int8_t*>(
      AlignedScratch(scratch, DType::kQ8_0, cols, n_tokens));
  auto* d = reinterpret_cast<float*>(qs + layout.qs_bytes);
  auto* sums =
      reinterpret_cast<int32_t*>(qs + layout.qs_bytes + layout.d_bytes);
  auto* sums16 = reinterpret_cast<int32_t*>(qs + layout.qs_bytes +
                                            layout.d_bytes + layout.s_bytes);
  auto* tiles =
      qs + layout.qs_bytes + layout.d_bytes + layout.s_bytes + layout.s16_bytes;
  auto* tile_d = reinterpret_cast<float*>(tiles + layout.tiles_bytes);
  const Q8Activations xq{
      qs, d, sums, sums16, layout.qs_stride, layout.d_stride};
  const bool pack = kernels.pack_q8_tiles != nullptr && layout.n_tiles > 0;
  // Each range quantizes its tokens, then packs the tiles they complete
  // (ranges are whole tiles except the last).
  auto quantize = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      int8_t* qs_t = qs + t * layout.qs_stride;
      float* d_t = d + t * layout.d_stride;
      kernels.quantize_q8(x + t * cols, cols, qs_t, d_t);
      std::memset(qs_t + cols, 0, static_cast<size_t>(layout.qs_stride - cols));
      std::fill(d_t + layout.n_blocks, d_t + layout.d_stride, 0.0f);
      int32_t* s_t = sums + t * layout.d_stride;
      int32_t* s16_t = sums16 + 2 * t * layout.d_stride;
      for (int64_t h = 0; h < 2 * layout.n_blocks; ++h) {
        int32_t sum = 0;
        for (int64_t j = 0; j < kQkBlock / 2; ++j) sum += qs_t[h * 16 + j];
        s16_t[h] = sum;
      }
      for (int64_t b = 0; b < layout.n_blocks; ++b)
        s_t[b] = s16_t[2 * b] + s16_t[2 * b + 1];
      std::fill(s_t + layout.n_blocks, s_t + layout.d_stride, 0);
      std::fill(s16_t + 2 * layout.n_blocks, s16_t + 2 * layout.d_stride, 0);
    }
    if (pack) {
      kernels.pack_q8_tiles(xq, n_tokens, cols, t0 / kTileTokens,
                            (t1 + kTileTokens - 1) / kTileTokens, tiles,
                            tile_d);
    }
  };
  if (n_tokens * cols >= kParallelQuantizeMin && n_tokens > 1) {
    pool.ParallelFor(n_tokens, pack ? kTileTokens : 1, quantize);
  } else {
    quantize(0, n_tokens, 0);
  }
  args->xq = xq;
  if (pack) {
    args->xtiles = tiles;
    args->xtile_d = tile_d;
  }
}

// Rounds x to binary16 into the scratch area after the quantized layout.
// Why: ggml multiplies F16 weights by binary16 activations too, and the
// AVX-512 decode kernel reads the binary16 copy (half the cache footprint
// beside the weight stream; x86/matmul_avx512.cc, HalfRowsDecode); every other
// kernel reads the rounded f32 copy, so all agree on the operands.
void PrepareHalf(const KernelTable& kernels, const float* x, int64_t cols,
                 int64_t n_tokens, std::span<std::byte> scratch,
                 ThreadPool& pool, const float** rounded,
                 const uint16_t** bits) {
  std::byte* area = AlignedScratch(scratch, DType::kF16, cols, n_tokens) +
                    ScratchLayout(cols, n_tokens).Total();
  auto* r = reinterpret_cast<float*>(area);
  auto* h =
      reinterpret_cast<uint16_t*>(area + HalfRoundedBytes(cols, n_tokens));
  const int64_t stride = HalfRoundedStride(cols);
  auto round = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      kernels.round_f16(x + t * cols, cols, r + t * stride, h + t * cols);
    }
  };
  if (n_tokens * cols >= kParallelQuantizeMin && n_tokens > 1) {
    pool.ParallelFor(n_tokens, 1, round);
  } else {
    round(0, n_tokens, 0);
  }
  *rounded = r;
  *bits = h;
}

// Units of kRowGrain rows of matrix i are numbered after those of
// matrices < i; one ParallelFor splits them all.
int64_t RowUnits(int64_t rows) { return (rows + kRowGrain - 1) / kRowGrain; }

}  // namespace

void MatMulMany(std::span<const WeightView> ws, const float* x,
                int64_t n_tokens, std::span<float* const> ys,
                std::span<std::byte> scratch, ThreadPool& pool) {
  RL_DCHECK(ws.size() == ys.size())
      << ws.size() << " weights, " << ys.size() << " outputs";
  RL_DCHECK(n_tokens >= 0);
  if (n_tokens == 0 || ws.empty()) return;
  constexpr size_t kMaxMatrices = 8;
  RL_CHECK(ws.size() <= kMaxMatrices) << ws.size() << " matrices";
  const int64_t cols = ws[0].cols;
  const KernelTable& kernels = ActiveKernels();
  MatMulArgs args[kMaxMatrices];
  MatMulRowsFn fns[kMaxMatrices] = {};
  bool any_quantized = false;
  bool any_half = false;
  int64_t total_units = 0;
  int64_t work = 0;  // multiply-adds
  for (size_t i = 0; i < ws.size(); ++i) {
    const WeightView& w = ws[i];
    RL_DCHECK(w.cols == cols)
        << "matrix " << i << " has " << w.cols << " cols, not " << cols;
    RL_DCHECK(w.cols % BlockElements(w.type) == 0) << "cols=" << w.cols;
    args[i].type = w.type;
    args[i].w = static_cast<const uint8_t*>(w.data);
    fns[i] = kernels.matmul[static_cast<int>(w.type)];
    if (w.packed != nullptr &&
        kernels.matmul_packed[static_cast<int>(w.type)] != nullptr) {
      args[i].w = static_cast<const uint8_t*>(w.packed);
      fns[i] = kernels.matmul_packed[static_cast<int>(w.type)];
    }
    args[i].row_bytes = RowBytes(w.type, w.cols);
    args[i].cols = w.cols;
    args[i].n_tokens = n_tokens;
    args[i].x = x;
    args[i].x_stride = cols;
    args[i].y = ys[i];
    args[i].y_stride = w.rows;
    any_quantized = any_quantized || IsQuantized(w.type);
    any_half = any_half || w.type == DType::kF16;
    total_units += RowUnits(w.rows);
    work += w.rows * w.cols * n_tokens;
  }
  if (any_half) {
    const float* rounded = nullptr;
    const uint16_t* bits = nullptr;
    PrepareHalf(kernels, x, cols, n_tokens, scratch, pool, &rounded, &bits);
    for (size_t i = 0; i < ws.size(); ++i) {
      if (ws[i].type != DType::kF16) continue;
      args[i].x = rounded;
      args[i].x_stride = HalfRoundedStride(cols);
      args[i].xh = bits;
    }
  }
  if (any_quantized) {
    MatMulArgs prepared;
    PrepareQuantized(kernels, x, cols, n_tokens, scratch, pool, &prepared);
    for (size_t i = 0; i < ws.size(); ++i) {
      args[i].xq = prepared.xq;
      args[i].xtiles = prepared.xtiles;
      args[i].xtile_d = prepared.xtile_d;
    }
  }
  // A decode step reads each thread's rows as a few long streams
  // (kernels/x86: PanelsDecode, HalfRowsDecode, KPackedRows), and a stream
  // runs at full speed only once the hardware prefetchers have followed it
  // for a while: one chunk per thread instead of four made the short
  // streams of the small products two to four times longer. Measured on
  // Zen 5 (same process, alternating, 16-20 rounds of 32 decode steps):
  // qwen2.5-0.5b Q4_0 1.13x, Q8_0 1.12x, Q4_K_M 1.09x, Q6_K 1.08x, F16
  // 1.03x; llama3.2-1b 1.00-1.03x; two chunks per thread 0.96x of one.
  // Batches keep four: prefill is compute-bound and spreads better.
  const int64_t chunks_per_thread =
      n_tokens == 1 ? 1 : ThreadPool::kDefaultChunksPerThread;
  // A tiny product is one unit, which the pool runs inline (counted in its
  // busy time). Each output is one chain whatever the split (the kernels'
  // contract), so the results are those of any split.
  const int64_t grain = work < kSerialProductMax ? total_units : 1;
  pool.ParallelFor(
      total_units, grain,
      [&](int64_t u0, int64_t u1, int) {
        int64_t first = 0;  // first unit of matrix i
        for (size_t i = 0; i < ws.size() && first < u1; ++i) {
          const int64_t units = RowUnits(ws[i].rows);
          const int64_t begin = std::max(u0, first) - first;
          const int64_t end = std::min(u1, first + units) - first;
          if (begin < end) {
            fns[i](args[i], begin * kRowGrain,
                   std::min(end * kRowGrain, ws[i].rows));
          }
          first += units;
        }
      },
      chunks_per_thread);
}

void MatMul(const WeightView& w, const float* x, int64_t n_tokens, float* y,
            std::span<std::byte> scratch, ThreadPool& pool) {
  float* ys[] = {y};
  MatMulMany(std::span<const WeightView>(&w, 1), x, n_tokens, ys, scratch,
             pool);
}

void DequantizeRow(const WeightView& w, int64_t row, float* out) {
  RL_DCHECK(row >= 0 && row < w.rows) << "row=" << row;
  const uint8_t* p = w.Row(row);
  switch (w.type) {
    case DType::kF32:
      std::memcpy(out, p, static_cast<size_t>(w.cols) * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t c = 0; c < w.cols; ++c) {
        uint16_t h;
        std::memcpy(&h, p + 2 * c, sizeof(h));
        out[c] = w.type == DType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
      }
      return;
    default:
      ref::DequantizeBlocks(w.type, p, w.cols / BlockElements(w.type), out);
      return;
  }
}

void QuantizeRow(DType type, const float* src, int64_t n, void* dst) {
  RL_DCHECK(n % BlockElements(type) == 0) << "n=" << n;
  RL_CHECK(type == DType::kF32 || type == DType::kF16 || type == DType::kBF16 ||
           type == DType::kQ8_0 || type == DType::kQ4_0)
      << "QuantizeRow has no " << DTypeName(type) << " quantizer";
  auto* out = static_cast<uint8_t*>(dst);
  switch (type) {
    case DType::kF32:
      std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h =
            type == DType::kF16 ? Fp32ToFp16(src[i]) : Fp32ToBf16(src[i]);
        std::memcpy(out + 2 * i, &h, sizeof(h));
      }
      return;
    case DType::kQ8_0:
      // ggml's quantize_row_q8_0_ref: d = amax / 127, q = roundf(x * (1 / d)).
      for (int64_t b = 0; b < n / kQkBlock; ++b) {
        const float* x = src + b * kQkBlock;
        float amax = 0.0f;
        for (int j = 0; j < kQkBlock; ++j)
          amax = std::max(amax, std::fabs(x[j]));
        const float scale = amax / 127.0f;
        const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
        BlockQ8_0 block;
        block.d = Fp32ToFp16(scale);
        for (int j = 0; j < kQkBlock; ++j)
          block.qs[j] = static_cast<int8_t>(std::roundf(x[j] * inv));
        std::memcpy(out + b * sizeof(BlockQ8_0), &block, sizeof(block));
      }
      return;
    case DType::kQ4_0:
      // ggml's quantize_row_q4_0_ref: the value of largest magnitude m maps
      // to -8 (d = m / -8); q = min(15, trunc(x / d + 8.5)).
      for (int64_t b = 0; b < n / kQkBlock; ++b) {
        const float* x = src + b * kQkBlock;
        float amax = 0.0f;
        float max = 0.0f;
        for (int j = 0; j < kQkBlock; ++j) {
          if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
          }
        }
        const float scale = max / -8.0f;
        const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
        BlockQ4_0 block;
        block.d = Fp32ToFp16(scale);
        for (int j = 0; j < kQkBlock / 2; ++j) {
          const auto q0 = static_cast<int8_t>(x[j] * inv + 8.5f);
          const auto q1 = static_cast<int8_t>(x[j + kQkBlock / 2] * inv + 8.5f);
          const auto lo = static_cast<uint8_t>(std::min<int>(15, q0));
          const auto hi = static_cast<uint8_t>(std::min<int>(15, q1));
          block.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
        std::memcpy(out + b * sizeof(BlockQ4_0), &block, sizeof(block));
      }
      return;
    default:
      return;
  }
}

}  // namespace redline::kernels
